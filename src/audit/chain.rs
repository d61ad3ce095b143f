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
//! verifies too) into the `checkpoints` table. Checkpoints are chained
//! too: each signs the SHA-256 of the one before's message (`prev`), so a
//! checkpoint deleted from the middle shows in the one after it.
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

/// One signed checkpoint, as stored, forwarded and kept in the head file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Signed {
    pub(crate) seq: i64,
    pub(crate) head: String,
    pub(crate) ts: String,
    /// The checkpoint before: its seq and [`Signed::id`] (seq 0 and the
    /// zero hash for the first). None in checkpoints from before they were
    /// chained: their message has no `prev` line.
    pub(crate) prev: Option<(i64, String)>,
    pub(crate) signature: String,
}

impl Signed {
    /// What the signature signs.
    pub(crate) fn message(&self) -> String {
        let (seq, head, ts) = (self.seq, &self.head, &self.ts);
        let mut m = format!("walissh audit checkpoint\nseq {seq}\nhead {head}\nts {ts}\n");
        if let Some((prev_seq, prev)) = &self.prev {
            m.push_str(&format!("prev {prev_seq} {prev}\n"));
        }
        m
    }

    /// The hash the next checkpoint names: SHA-256 of this one's message
    /// (which names the one before, and so on back to the first).
    pub(crate) fn id(&self) -> String {
        hex(&Sha256::digest(self.message().as_bytes()))
    }

    /// Whether the audit key signed it.
    pub(crate) fn signed_by(&self, key: &PublicKey) -> bool {
        signed_by(key, &self.message(), &self.signature)
    }
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
    /// The bastion's name, which every row it writes carries as `node`
    /// (none when empty).
    pub(crate) node: String,
    /// The last checkpoint written: its seq and id, which the next names.
    last_checkpoint: (i64, String),
    /// Events since the last checkpoint.
    pending: u64,
    since: Instant,
    /// No checkpoint is tried before this, after one failed.
    not_before: Option<Instant>,
    policy: Checkpoints,
}

/// When the writer signs the head, and with what.
pub(crate) struct Checkpoints {
    pub(crate) key: Option<PrivateKey>,
    pub(crate) every_events: u64,
    pub(crate) every: Duration,
}

impl Head {
    /// The head at `seq` and `hash`, the last checkpoint being `last`
    /// (its seq and id; none yet: the next is the first).
    pub(crate) fn new(
        seq: i64,
        hash: String,
        last: Option<(i64, String)>,
        policy: Checkpoints,
    ) -> Head {
        Head {
            seq,
            hash,
            node: String::new(),
            last_checkpoint: last.unwrap_or_else(|| (0, genesis())),
            pending: 0,
            since: Instant::now(),
            not_before: None,
            policy,
        }
    }

    /// The head as the last writer left it, where other bastions write
    /// the same chain (PostgreSQL): the next rows link after `seq` and
    /// `hash`, the next checkpoint names `last`. When `last` already signs
    /// `seq`, nothing waits for a checkpoint.
    pub(crate) fn resync(&mut self, seq: i64, hash: String, last: Option<(i64, String)>) {
        self.seq = seq;
        self.hash = hash;
        self.last_checkpoint = last.unwrap_or_else(|| (0, genesis()));
        if self.last_checkpoint.0 >= seq {
            self.pending = 0;
            self.since = Instant::now();
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
        let later = self.not_before.map_or(Duration::ZERO, |t| {
            t.saturating_duration_since(Instant::now())
        });
        if self.pending >= self.policy.every_events {
            return Some(later);
        }
        Some(
            self.policy
                .every
                .saturating_sub(self.since.elapsed())
                .max(later),
        )
    }

    /// The checkpoint to write now, when one is due or `force`d and any
    /// event waits for one.
    pub(crate) fn checkpoint(&self, ts: &str, force: bool) -> Option<Result<Signed, String>> {
        let due = self.due_in()?;
        if !force && !due.is_zero() {
            return None;
        }
        let key = self.policy.key.as_ref()?;
        let mut c = Signed {
            seq: self.seq,
            head: self.hash.clone(),
            ts: ts.to_string(),
            prev: Some(self.last_checkpoint.clone()),
            signature: String::new(),
        };
        Some(sign(key, &c.message()).map(|sig| {
            c.signature = sig;
            c
        }))
    }

    /// The audit key's public half, when the writer has the key.
    pub(crate) fn public_key(&self) -> Option<russh::keys::PublicKey> {
        self.policy.key.as_ref().map(|k| k.public_key().clone())
    }

    /// `message` signed with the audit key (none: refused).
    pub(crate) fn sign(&self, message: &str) -> Result<String, String> {
        let key = self
            .policy
            .key
            .as_ref()
            .ok_or("no audit key to sign with")?;
        sign(key, message)
    }

    /// A checkpoint could not be written: the next try waits `wait`, so a
    /// failing store is not asked again at once, and again.
    pub(crate) fn retry_in(&mut self, wait: Duration) {
        self.not_before = Some(Instant::now() + wait);
    }

    /// `c` was written: the next checkpoint names it.
    pub(crate) fn checkpointed(&mut self, c: &Signed) {
        self.not_before = None;
        self.pending = 0;
        self.since = Instant::now();
        self.last_checkpoint = (c.seq, c.id());
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

    fn checkpoint(seq: i64, prev: Option<(i64, String)>) -> Signed {
        Signed {
            seq,
            head: genesis(),
            ts: "t".into(),
            prev,
            signature: String::new(),
        }
    }

    #[test]
    fn checkpoints_are_ssh_signatures_of_the_audit_key() {
        let key = PrivateKey::random(&mut rand::rng(), russh::keys::Algorithm::Ed25519).unwrap();
        let message = checkpoint(7, Some((0, genesis()))).message();
        let sig = sign(&key, &message).unwrap();
        assert!(sig.starts_with("-----BEGIN SSH SIGNATURE-----"), "{sig}");
        assert!(signed_by(key.public_key(), &message, &sig));
        assert!(!signed_by(
            key.public_key(),
            &checkpoint(8, Some((0, genesis()))).message(),
            &sig
        ));
        let other = PrivateKey::random(&mut rand::rng(), russh::keys::Algorithm::Ed25519).unwrap();
        assert!(!signed_by(other.public_key(), &message, &sig));
        assert!(!signed_by(key.public_key(), &message, "garbage"));
    }

    #[test]
    fn a_checkpoint_names_the_one_before_and_old_ones_keep_their_message() {
        let old = checkpoint(3, None);
        assert!(old.message().ends_with("ts t\n"), "{}", old.message());
        let next = checkpoint(7, Some((3, old.id())));
        assert!(next.message().ends_with(&format!("prev 3 {}\n", old.id())));
        // The id covers the prev line: a checkpoint re-pointed is another.
        assert_ne!(next.id(), checkpoint(7, Some((0, genesis()))).id());
    }
}
