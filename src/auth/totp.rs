//! TOTP second factors (RFC 6238): enrolment, the secrets at rest, and
//! checking a code.
//!
//! Secrets live in `<state_dir>/totp.json`, each sealed with AES-256-GCM
//! under `<state_dir>/totp.key` (made at first enrolment, mode 0600, read
//! only by walissh's account), with the user's name as associated data so
//! a sealed secret cannot be moved to another user. The file also keeps,
//! per user, the last time step a code was accepted for: a code is good
//! once, and a replay within its window is refused.
//!
//! Codes are 6 digits, 30-second steps, SHA-1 (what every authenticator
//! app speaks), accepted one step either side. The arithmetic is
//! `totp-rs`'s; throttling failures is the handler's (with the password
//! throttle), and asking for the code is `server`'s.
//!
//! All of it is file I/O: callers run it on blocking threads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use totp_rs::{Algorithm, Totp};

/// The issuer authenticator apps show beside the account.
const ISSUER: &str = "walissh";
const DIGITS: u8 = 6;
const STEP_S: u64 = 30;
/// Steps either side of now that are accepted (clock skew).
const SKEW: u16 = 1;
/// 160 bits, as RFC 4226 recommends.
const SECRET_BYTES: usize = 20;
/// A store larger than this is not read (one user's entry is ~120 bytes).
const MAX_STORE: u64 = 16 << 20;

/// The enrolled users' secrets, on disk.
pub(crate) struct Store {
    dir: PathBuf,
    /// Checks and enrolments in this process take turns: each reads the
    /// file, changes it and writes it whole.
    turn: Mutex<()>,
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    users: BTreeMap<String, Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    /// base64 of nonce ‖ AES-256-GCM(secret).
    sealed: String,
    /// The last step a code was accepted for.
    #[serde(default)]
    last_step: u64,
}

/// The result of checking a code.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Good,
    Wrong,
    /// Right, but already used (its step or a later one was accepted).
    Replayed,
    NotEnrolled,
}

impl Store {
    pub(crate) fn new(state_dir: &Path) -> Store {
        Store {
            dir: state_dir.to_path_buf(),
            turn: Mutex::new(()),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join("totp.json")
    }

    fn key_path(&self) -> PathBuf {
        self.dir.join("totp.key")
    }

    /// Makes a new secret for `user`, replacing any, and returns its
    /// `otpauth://` URI (for the authenticator app; it holds the secret).
    pub(crate) fn enroll(&self, user: &str) -> Result<String, String> {
        let _turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        let secret: [u8; SECRET_BYTES] = rand::random();
        let totp = totp(&secret, user)?;
        let key = self.key(true)?;
        let mut file = self.read()?;
        let entry = Entry {
            sealed: seal(&key, user, &secret)?,
            last_step: 0,
        };
        file.users.insert(user.to_string(), entry);
        self.write(&file)?;
        totp.to_url()
            .map_err(|e| format!("cannot make the otpauth URI: {e}"))
    }

    /// Whether `user` has a secret.
    pub(crate) fn enrolled(&self, user: &str) -> Result<bool, String> {
        Ok(self.read()?.users.contains_key(user))
    }

    /// Checks `code` for `user` at `now` (seconds since the epoch), and
    /// uses it up when it is good.
    pub(crate) fn check(&self, user: &str, code: &str, now: u64) -> Result<Verdict, String> {
        let _turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        let mut file = self.read()?;
        let Some(entry) = file.users.get_mut(user) else {
            return Ok(Verdict::NotEnrolled);
        };
        let key = self.key(false)?;
        let secret = open(&key, user, &entry.sealed)?;
        let totp = totp(&secret, user)?;
        // Spaces as apps show them ("123 456") are not part of the code.
        let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        if code.len() != DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(Verdict::Wrong);
        }
        let Some(step) = totp.check(&code, now) else {
            return Ok(Verdict::Wrong);
        };
        if step <= entry.last_step {
            return Ok(Verdict::Replayed);
        }
        entry.last_step = step;
        self.write(&file)?;
        Ok(Verdict::Good)
    }

    fn read(&self) -> Result<File, String> {
        let path = self.path();
        let text = match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(File::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
            Ok(m) if m.len() > MAX_STORE => {
                return Err(format!("{}: larger than 16 MiB", path.display()));
            }
            Ok(_) => {
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?
            }
        };
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Written whole to a new file, then renamed over the old one: a crash
    /// leaves one or the other, never half.
    fn write(&self, file: &File) -> Result<(), String> {
        let path = self.path();
        let tmp = self.dir.join("totp.json.new");
        let text = serde_json::to_vec_pretty(file).map_err(|e| e.to_string())?;
        // What a crash may have left of an earlier write.
        let _ = std::fs::remove_file(&tmp);
        crate::keys::write_secret(&tmp, &text)?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The sealing key; made (0600) when `create` and there is none.
    fn key(&self, create: bool) -> Result<Key<Aes256Gcm>, String> {
        let path = self.key_path();
        match std::fs::read(&path) {
            Ok(bytes) => <[u8; 32]>::try_from(bytes.as_slice())
                .map(Key::<Aes256Gcm>::from)
                .map_err(|_| format!("{}: not a 32-byte key", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                let bytes: [u8; 32] = rand::random();
                crate::keys::write_secret(&path, &bytes)?;
                Ok(Key::<Aes256Gcm>::from(bytes))
            }
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }
}

fn totp(secret: &[u8], user: &str) -> Result<Totp, String> {
    totp_rs::Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(DIGITS)
        .with_skew(SKEW)
        .with_step_duration(STEP_S)
        .with_secret(secret.to_vec())
        .with_issuer(Some(ISSUER))
        .with_account_name(user)
        .build()
        .map_err(|e| format!("cannot make a TOTP for {user}: {e}"))
}

fn seal(key: &Key<Aes256Gcm>, user: &str, secret: &[u8]) -> Result<String, String> {
    let nonce: [u8; 12] = rand::random();
    let payload = Payload {
        msg: secret,
        aad: user.as_bytes(),
    };
    let sealed = Aes256Gcm::new(key)
        .encrypt(&Nonce::from(nonce), payload)
        .map_err(|_| "cannot seal the secret".to_string())?;
    Ok(B64.encode([nonce.as_slice(), &sealed].concat()))
}

fn open(key: &Key<Aes256Gcm>, user: &str, sealed: &str) -> Result<Vec<u8>, String> {
    let bad = || format!("the TOTP secret of {user} cannot be opened (wrong totp.key?)");
    let bytes = B64.decode(sealed).map_err(|_| bad())?;
    let (nonce, sealed) = bytes.split_at_checked(12).ok_or_else(bad)?;
    let nonce = <[u8; 12]>::try_from(nonce).map_err(|_| bad())?;
    let payload = Payload {
        msg: sealed,
        aad: user.as_bytes(),
    };
    Aes256Gcm::new(key)
        .decrypt(&Nonce::from(nonce), payload)
        .map_err(|_| bad())
}

/// The code for `uri`'s secret at `now`: for tests, which answer prompts
/// as an authenticator app would.
#[cfg(test)]
pub(crate) fn code_for(uri: &str, now: u64) -> String {
    Totp::from_url(uri).unwrap().generate(now).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_good_once_and_secrets_are_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        assert_eq!(
            store.check("alice", "123456", 0).unwrap(),
            Verdict::NotEnrolled
        );
        let uri = store.enroll("alice").unwrap();
        assert!(uri.starts_with("otpauth://totp/walissh:alice?"), "{uri}");
        let now = 1_800_000_000;
        let code = code_for(&uri, now);
        // The secret is not in the file as it is in the URI.
        let secret = uri
            .split("secret=")
            .nth(1)
            .unwrap()
            .split('&')
            .next()
            .unwrap();
        let stored = std::fs::read_to_string(dir.path().join("totp.json")).unwrap();
        assert!(!stored.contains(secret));
        assert_eq!(store.check("alice", &code, now).unwrap(), Verdict::Good);
        assert_eq!(store.check("alice", &code, now).unwrap(), Verdict::Replayed);
        // One step either side is accepted; two are not.
        let next = code_for(&uri, now + 30);
        assert_eq!(store.check("alice", &next, now).unwrap(), Verdict::Good);
        let far = code_for(&uri, now + 120);
        assert_eq!(
            store.check("alice", &far, now + 30).unwrap(),
            Verdict::Wrong
        );
        // An older code after a newer one is a replay, not a second chance.
        let old = code_for(&uri, now - 30);
        assert_eq!(store.check("alice", &old, now).unwrap(), Verdict::Replayed);
        for bad in ["", "12345", "1234567", "abcdef", "12345\u{0660}"] {
            assert_eq!(
                store.check("alice", bad, now).unwrap(),
                Verdict::Wrong,
                "{bad}"
            );
        }
        // A sealed secret moved to another user does not open.
        let moved = stored.replace("\"alice\"", "\"bob\"");
        std::fs::write(dir.path().join("totp.json"), moved).unwrap();
        assert!(store.check("bob", &code, now).is_err());
        let mode = std::fs::metadata(dir.path().join("totp.key")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o600);
    }
}
