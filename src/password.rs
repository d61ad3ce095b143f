//! Password hashing and verification: argon2id PHC strings.
//!
//! Both are deliberately slow (tens of milliseconds of CPU), so callers on
//! the async runtime go through [`verify_blocking`], which runs on tokio's
//! blocking pool: a flood of login attempts must not stall live sessions.

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

/// Hashes a password with argon2id and a random salt.
pub(crate) fn hash(password: &str) -> Result<String, String> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash password: {e}"))
}

/// Checks that `phc` is an argon2 PHC string.
pub(crate) fn check_hash(phc: &str) -> Result<(), String> {
    let parsed = PasswordHash::new(phc).map_err(|e| format!("not a PHC hash string: {e}"))?;
    if !parsed.algorithm.as_str().starts_with("argon2") {
        return Err(format!(
            "`{}` is not argon2 (use walissh hash-password)",
            parsed.algorithm
        ));
    }
    Ok(())
}

/// Verifies a password against a PHC string. `None` (an unknown user, or a
/// user without a password) still spends the time of one verification, so
/// the answer's timing does not say whether the user exists.
pub(crate) fn verify(password: &str, phc: Option<&str>) -> bool {
    // A fixed hash of a random string: verifying against it always fails.
    const DUMMY: &str = "$argon2id$v=19$m=19456,t=2,p=1$d2FsaXNzaGR1bW15$Ti3+VaxKxh7Sr1pL3mVfV3vJ3G3k1yCEdsbHq8xjq4Q";
    let ok = Argon2::default()
        .verify_password(password.as_bytes(), phc.unwrap_or(DUMMY))
        .is_ok();
    ok && phc.is_some()
}

/// [`verify`] on the blocking pool.
pub(crate) async fn verify_blocking(password: String, phc: Option<String>) -> bool {
    tokio::task::spawn_blocking(move || verify(&password, phc.as_deref()))
        .await
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = hash("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        check_hash(&h).unwrap();
        assert!(verify("correct horse", Some(&h)));
        assert!(!verify("wrong", Some(&h)));
        assert!(!verify("correct horse", None));
        assert!(check_hash("plaintext").is_err());
    }
}
