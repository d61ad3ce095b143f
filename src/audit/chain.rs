//! The audit's hash chain and its signed checkpoints: what makes a rewritten
//! audit trail show.
//!
//! Every event row carries `hash = SHA-256(previous hash ‖ the row)`, the
//! row being the JSON array of its stored columns (`seq`, `ts`, `session`,
//! `user`, `target`, `kind`, `fields` as stored text): the same bytes
//! whoever reads them. The first row's previous hash is 32 zero bytes.
//! Every `[audit] checkpoint_events` events or `checkpoint_s` seconds, the
//! writer signs the chain's head with the audit key (ed25519, in
//! `state_dir`, an SSH signature that `ssh-keygen -Y check-novalidate`
//! verifies too) into the `checkpoints` table.
//!
//! What it owns: the hashing, the head the writer keeps, the checkpoint
//! message, the key. What it leaves to others: writing rows (`db`),
//! checking a whole database (`verify`).

use std::path::Path;
use std::time::{Duration, Instant};

use russh::keys::ssh_key::{HashAlg, LineEnding, SshSig};
use russh::keys::{PrivateKey, PublicKey};
use sha2::{Digest, Sha256};

/// The SSH signature namespace of checkpoints (`ssh-keygen -Y … -n`).
pub(crate) const NAMESPACE: &str = "walissh-audit";
/// The audit key's file name in `state_dir`.
pub(crate) const KEY_FILE: &str = "audit_key";

/// The previous hash of the first row.
pub(crate) fn genesis() -> String {
    "0".repeat(64)
}

/// One stored row, as it is hashed.
pub(crate) struct Row<'a> {
    pub(crate) seq: i64,
    pub(crate) ts: &'a str,
    pub(crate) session: Option<&'a str>,
    pub(crate) user: Option<&'a str>,
    pub(crate) target: Option<&'a str>,
    pub(crate) kind: &'a str,
    pub(crate) fields: &'a str,
}

/// The row's hash after `prev` (both hex).
pub(crate) fn link(prev: &str, row: &Row<'_>) -> String {
    let canonical = serde_json::json!([
        row.seq,
        row.ts,
        row.session,
        row.user,
        row.target,
        row.kind,
        row.fields
    ])
    .to_string();
    let mut h = Sha256::new();
    h.update(unhex(prev));
    h.update(canonical.as_bytes());
    hex(&h.finalize())
}

/// What a checkpoint signs.
pub(crate) fn checkpoint_message(seq: i64, head: &str, ts: &str) -> String {
    format!("walissh audit checkpoint\nseq {seq}\nhead {head}\nts {ts}\n")
}

pub(crate) fn sign(key: &PrivateKey, message: &str) -> Result<String, String> {
    key.sign(NAMESPACE, HashAlg::Sha512, message.as_bytes())
        .and_then(|s| s.to_pem(LineEnding::LF))
        .map_err(|e| format!("cannot sign a checkpoint: {e}"))
}

/// Whether `signature` (PEM) is `key`'s over `message`.
pub(crate) fn signed_by(key: &PublicKey, message: &str, signature: &str) -> bool {
    SshSig::from_pem(signature)
        .and_then(|sig| key.verify(NAMESPACE, message.as_bytes(), &sig))
        .is_ok()
}

/// The audit key: made at first start, mode 0600.
pub(crate) fn key(state_dir: &Path) -> Result<PrivateKey, String> {
    crate::keys::load_or_generate(&state_dir.join(KEY_FILE))
}

/// SHA-256 of a file and its length, read in pieces.
pub(crate) fn file_digest(path: &Path) -> std::io::Result<(String, u64)> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        len += n as u64;
    }
    Ok((hex(&h.finalize()), len))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// 32 bytes from 64 hex digits; anything else hashes as zeros (and so
/// breaks the chain where it is, which is where verify says it broke).
fn unhex(text: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    if text.len() == 64 {
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap_or(0);
        }
    }
    out
}

/// The chain's head as the writer keeps it, and when to sign it.
pub(crate) struct Head {
    pub(crate) seq: i64,
    pub(crate) hash: String,
    /// Events since the last checkpoint.
    pending: u64,
    since: Instant,
    policy: Checkpoints,
}

/// When the writer signs the head, and with what.
pub(crate) struct Checkpoints {
    pub(crate) key: Option<PrivateKey>,
    pub(crate) every_events: u64,
    pub(crate) every: Duration,
}

impl Head {
    pub(crate) fn new(seq: i64, hash: String, policy: Checkpoints) -> Head {
        Head {
            seq,
            hash,
            pending: 0,
            since: Instant::now(),
            policy,
        }
    }

    /// `n` events were committed after the head moved.
    pub(crate) fn committed(&mut self, seq: i64, hash: String, n: u64) {
        self.seq = seq;
        self.hash = hash;
        self.pending += n;
    }

    /// How long until a checkpoint is due; None when nothing waits for one.
    pub(crate) fn due_in(&self) -> Option<Duration> {
        if self.pending == 0 || self.policy.key.is_none() {
            return None;
        }
        if self.pending >= self.policy.every_events {
            return Some(Duration::ZERO);
        }
        Some(self.policy.every.saturating_sub(self.since.elapsed()))
    }

    /// The checkpoint to write now (seq, head, signature), when one is due
    /// or `force`d and any event waits for one.
    pub(crate) fn checkpoint(
        &self,
        ts: &str,
        force: bool,
    ) -> Option<Result<(i64, String, String), String>> {
        let due = self.due_in()?;
        if !force && !due.is_zero() {
            return None;
        }
        let key = self.policy.key.as_ref()?;
        let message = checkpoint_message(self.seq, &self.hash, ts);
        Some(sign(key, &message).map(|sig| (self.seq, self.hash.clone(), sig)))
    }

    /// A checkpoint was written.
    pub(crate) fn checkpointed(&mut self) {
        self.pending = 0;
        self.since = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: i64, fields: &str) -> Row<'_> {
        Row {
            seq,
            ts: "2026-12-02T00:00:00.000000Z",
            session: Some("s1"),
            user: Some("bob"),
            target: None,
            kind: "exec",
            fields,
        }
    }

    #[test]
    fn every_column_and_the_previous_hash_are_in_the_hash() {
        let a = link(&genesis(), &row(1, "{\"command\":\"ls\"}"));
        assert_eq!(a.len(), 64);
        assert_ne!(a, link(&genesis(), &row(1, "{\"command\":\"ls \"}")));
        assert_ne!(a, link(&genesis(), &row(2, "{\"command\":\"ls\"}")));
        assert_ne!(a, link(&a, &row(1, "{\"command\":\"ls\"}")));
        // The same row after the same hash: the same hash, always.
        assert_eq!(a, link(&genesis(), &row(1, "{\"command\":\"ls\"}")));
    }

    #[test]
    fn checkpoints_are_ssh_signatures_of_the_audit_key() {
        let key = PrivateKey::random(&mut rand::rng(), russh::keys::Algorithm::Ed25519).unwrap();
        let message = checkpoint_message(7, &genesis(), "t");
        let sig = sign(&key, &message).unwrap();
        assert!(sig.starts_with("-----BEGIN SSH SIGNATURE-----"), "{sig}");
        assert!(signed_by(key.public_key(), &message, &sig));
        assert!(!signed_by(
            key.public_key(),
            &checkpoint_message(8, &genesis(), "t"),
            &sig
        ));
        let other = PrivateKey::random(&mut rand::rng(), russh::keys::Algorithm::Ed25519).unwrap();
        assert!(!signed_by(other.public_key(), &message, &sig));
        assert!(!signed_by(key.public_key(), &message, "garbage"));
    }
}
