//! Small messages sealed with AES-256-GCM: a random nonce, and what the
//! message belongs to bound in as associated data, so a sealed text moved
//! to another owner does not open. Used for TOTP secrets at rest
//! (`auth::totp`) and for live views relayed between nodes through the
//! database (`audit::views`).
//!
//! What it owns: the sealed text's form (base64 of the nonce and the
//! ciphertext). What it leaves to others: where the key comes from.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

/// `msg` sealed with `key`, bound to `aad`.
pub(crate) fn seal(key: &Key<Aes256Gcm>, aad: &[u8], msg: &[u8]) -> Option<String> {
    let nonce: [u8; 12] = rand::random();
    let payload = Payload { msg, aad };
    let sealed = Aes256Gcm::new(key)
        .encrypt(&Nonce::from(nonce), payload)
        .ok()?;
    Some(B64.encode([nonce.as_slice(), &sealed].concat()))
}

/// What `sealed` holds, if `key` sealed it bound to `aad`.
pub(crate) fn open(key: &Key<Aes256Gcm>, aad: &[u8], sealed: &str) -> Option<Vec<u8>> {
    let bytes = B64.decode(sealed).ok()?;
    let (nonce, sealed) = bytes.split_at_checked(12)?;
    let nonce = <[u8; 12]>::try_from(nonce).ok()?;
    let payload = Payload { msg: sealed, aad };
    Aes256Gcm::new(key)
        .decrypt(&Nonce::from(nonce), payload)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sealed text opens only with its key and its owner.
    #[test]
    fn opens_only_with_its_key_and_owner() {
        let key = Key::<Aes256Gcm>::from([7u8; 32]);
        let other = Key::<Aes256Gcm>::from([8u8; 32]);
        let s = seal(&key, b"alice", b"secret").unwrap();
        assert_eq!(open(&key, b"alice", &s).unwrap(), b"secret");
        assert!(open(&key, b"bob", &s).is_none());
        assert!(open(&other, b"alice", &s).is_none());
        assert!(open(&key, b"alice", "not base64!").is_none());
        assert!(open(&key, b"alice", "AAAA").is_none());
    }
}
