//! Copies of checkpoints kept outside the database, against it: the head
//! file beside it and forwarded copies (`--against FILE`). A copy the
//! audit key signed pins the chain up to its seq: a database that ends
//! before it, or holds another chain there, was rolled back or cut, and
//! one that lacks the checkpoint itself had it deleted.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};
use russh::keys::PublicKey;

use super::{Checked, Stop};
use crate::audit::chain::Signed;

pub(super) struct Copies<'a> {
    pub(super) conn: &'a Connection,
    pub(super) key: &'a PublicKey,
    pub(super) last_seq: i64,
    /// Where the chain was pruned: its last deleted seq, and the last
    /// checkpoint deleted with it (seq and id).
    pub(super) pruned: Option<(i64, (i64, String))>,
}

impl Copies<'_> {
    /// The head file's checkpoint is in the database. Without a head file,
    /// the database must hold no checkpoint written since there is one
    /// (they name the one before them): it was removed. Returns the copies
    /// that matched (0 or 1).
    pub(super) fn head_file(
        &self,
        path: &Path,
        head: Option<&Signed>,
        cps: &[Signed],
    ) -> Checked<u64> {
        let source = format!("the head file {}", path.display());
        match head {
            Some(c) => self.matches(&source, c).map(|()| 1),
            // A pruned marker is signed: there was a key, so a head file.
            None if self.pruned.is_some() => Err(Stop::Broken(
                None,
                format!("{source} is gone, but the audit was pruned with the audit key (removed)"),
            )),
            None => match cps.iter().find(|c| c.prev.is_some()) {
                Some(c) => Err(Stop::Broken(
                    None,
                    format!(
                        "{source} is gone, but the checkpoints since seq {} were written with one (removed)",
                        c.seq
                    ),
                )),
                None => Ok(0),
            },
        }
    }

    /// Every checkpoint in `file` is in the database. Returns how many.
    pub(super) fn forwarded(&self, file: &Path, found: &[(usize, Signed)]) -> Checked<u64> {
        for (line, c) in found {
            self.matches(&format!("{} line {line}", file.display()), c)?;
        }
        Ok(found.len() as u64)
    }

    /// `copy`, from `source`, is the audit key's and the database holds it.
    fn matches(&self, source: &str, copy: &Signed) -> Checked<()> {
        let seq = copy.seq;
        let broken = |what: String| Err(Stop::Broken(Some(seq), what));
        if !copy.signed_by(self.key) {
            return broken(format!(
                "{source}: its checkpoint at seq {seq} is not signed by the audit key"
            ));
        }
        // A copy from before the pruning pins nothing left, but the last
        // checkpoint pruned is the marker's.
        if let Some((floor, (cp_seq, cp))) = &self.pruned
            && seq <= *floor
        {
            return match seq == *cp_seq && copy.id() != *cp {
                true => broken(format!(
                    "{source} holds the checkpoint at seq {seq}, which is not the one the pruned marker names (replaced)"
                )),
                false => Ok(()),
            };
        }
        if seq > self.last_seq {
            return broken(format!(
                "{source} holds the checkpoint at seq {seq}, but the chain ends at seq {}: rolled back or cut",
                self.last_seq
            ));
        }
        if crate::audit::db::checkpoint_at(self.conn, seq)?.as_ref() == Some(copy) {
            return Ok(());
        }
        let hash: Option<String> = self
            .conn
            .query_row("SELECT hash FROM events WHERE seq = ?1", [seq], |r| {
                r.get(0)
            })
            .optional()?
            .flatten();
        match hash.as_deref() == Some(copy.head.as_str()) {
            true => broken(format!(
                "{source} holds the checkpoint at seq {seq}, which the database lacks (deleted or replaced)"
            )),
            false => broken(format!(
                "{source} holds the checkpoint at seq {seq}, which signed another chain: rolled back or rewritten"
            )),
        }
    }
}
