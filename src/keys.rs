//! Key material: the bastion's host key, its upstream identity, users'
//! authorized keys, and the embedded default's generated demo password.
//!
//! Every secret file is created with mode 0600 before anything is written
//! to it. This module reads and writes files only; it is called at start
//! and from the CLI, never on the proxy path.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use russh::keys::ssh_key::LineEnding;
use russh::keys::{Algorithm, PrivateKey, PublicKey};

/// Loads an OpenSSH private key, or generates an ed25519 one (mode 0600)
/// when the file does not exist.
pub(crate) fn load_or_generate(path: &Path) -> Result<PrivateKey, String> {
    if path.exists() {
        return load_private(path);
    }
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    let key = PrivateKey::random(&mut rand::rng(), Algorithm::Ed25519)
        .map_err(|e| format!("{}: cannot generate key: {e}", path.display()))?;
    let text = key
        .to_openssh(LineEnding::LF)
        .map_err(|e| format!("{}: cannot encode key: {e}", path.display()))?;
    write_secret(path, text.as_bytes())?;
    tracing::info!(path = %path.display(), "generated a new ed25519 key");
    Ok(key)
}

/// Loads an unencrypted OpenSSH private key.
pub(crate) fn load_private(path: &Path) -> Result<PrivateKey, String> {
    russh::keys::load_secret_key(path, None)
        .map_err(|e| format!("{}: cannot read key: {e}", path.display()))
}

/// Parses one authorized_keys line: `type base64 [comment]`, any key type
/// russh knows. Leading options (`from=`, `restrict`, ...) are refused
/// rather than ignored: walissh does not enforce them, and a key that
/// silently works from anywhere would weaken the policy they state.
pub(crate) fn parse_authorized_key(line: &str) -> Result<PublicKey, String> {
    let mut words = line.split_whitespace();
    let kind = words.next().ok_or("empty key")?;
    let blob = words.next().ok_or("expected `type base64 [comment]`")?;
    match russh::keys::parse_public_key_base64(blob) {
        Ok(key) if key.algorithm().as_str() == kind => Ok(key),
        Ok(key) => Err(format!(
            "key type `{kind}` does not match its data ({})",
            key.algorithm()
        )),
        Err(_)
            if russh::keys::parse_public_key_base64(kind).is_err()
                && line
                    .split_whitespace()
                    .skip(1)
                    .any(|w| russh::keys::parse_public_key_base64(w).is_ok()) =>
        {
            Err(
                "authorized_keys options (from=, restrict, ...) are not supported; remove them"
                    .into(),
            )
        }
        Err(e) => Err(format!("not a public key: {e}")),
    }
}

/// The public key line for a key, as `walissh pubkey` prints it.
pub(crate) fn public_line(key: &PrivateKey, comment: &str) -> String {
    let mut public = key.public_key().clone();
    public.set_comment(comment);
    public.to_openssh().unwrap_or_default()
}

/// Writes `data` to a new file readable by its owner only. The mode is set
/// at creation, so the secret is never briefly world-readable.
pub(crate) fn write_secret(path: &Path, data: &[u8]) -> Result<(), String> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: cannot create: {e}", path.display()))?;
    f.write_all(data)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// Creates a directory (and parents) only its owner can enter.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), String> {
    if dir.as_os_str().is_empty() || dir.exists() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("{}: cannot create directory: {e}", dir.display()))
}

/// The embedded default's `demo` password hash. At first start a password
/// is generated, returned so it can be printed once, and only its hash is
/// kept (in `<state_dir>/demo.hash`).
pub(crate) fn demo_password(state_dir: &Path) -> Result<(String, Option<String>), String> {
    let path = state_dir.join("demo.hash");
    if path.exists() {
        let hash = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let hash = hash.trim().to_string();
        // Held to what a config's hash is held to: an example's or a weak
        // one put here would otherwise let anyone in as demo.
        crate::password::check_hash(&hash).map_err(|e| {
            format!(
                "{}: {e}; remove the file for a new demo password",
                path.display()
            )
        })?;
        return Ok((hash, None));
    }
    let password = random_password(20);
    let hash = crate::password::hash(&password)?;
    write_secret(&path, hash.as_bytes())?;
    Ok((hash, Some(password)))
}

/// A password of `len` characters from an alphabet without look-alikes.
fn random_password(len: usize) -> String {
    use rand::RngExt;
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    (0..len)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn generated_key_is_private_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/key");
        let a = load_or_generate(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let b = load_or_generate(&path).unwrap();
        assert_eq!(a.public_key().key_data(), b.public_key().key_data());
        assert!(public_line(&a, "walissh-bastion").starts_with("ssh-ed25519 "));
    }

    /// A `demo.hash` put in the state directory is checked as a config's
    /// hash is: the repository's example is refused, a fresh one kept.
    #[test]
    fn the_demo_hash_is_checked_like_a_configs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demo.hash");
        let example = "$argon2id$v=19$m=19456,t=2,p=1$gogEsck8BfJBp6kcDqo+oQ$4Q9yMwdMw2I+4DdJ2yOoEinAFuFJn3iK+dr99hjzfpg";
        std::fs::write(&path, example).unwrap();
        let e = demo_password(dir.path()).unwrap_err();
        assert!(e.contains("example hash") && e.contains("demo.hash"), "{e}");
        std::fs::remove_file(&path).unwrap();
        let (hash, password) = demo_password(dir.path()).unwrap();
        assert!(password.is_some());
        assert_eq!(demo_password(dir.path()).unwrap(), (hash, None));
    }

    #[test]
    fn authorized_key_lines() {
        let line =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHMTPR0d+PrPU0WH3b7gJLajZMMutiK2XEYTom1UgY8S u@h";
        assert!(parse_authorized_key(line).is_ok());
        let with_options = format!("from=\"10.0.0.0/8\",no-pty {line}");
        assert!(
            parse_authorized_key(&with_options)
                .unwrap_err()
                .contains("options")
        );
        let wrong_type = line.replace("ssh-ed25519", "ssh-rsa");
        assert!(
            parse_authorized_key(&wrong_type)
                .unwrap_err()
                .contains("does not match")
        );
        assert!(parse_authorized_key("ssh-ed25519").is_err());
        assert!(parse_authorized_key("ssh-ed25519 AAAAnotakey").is_err());
    }
}
