//! Linking every event row again, in seq order, and checking each
//! checkpoint at the row it signed: its signature, and that its head is
//! the chain's there.

use rusqlite::Connection;
use russh::keys::PublicKey;

use super::{Checked, Stop};
use crate::audit::chain::Signed;
use crate::audit::db::Stored;

/// Links every row, from `start` (the seq and hash before the first:
/// 0 and the zero hash, or a pruned marker's); returns the last seq (they
/// run from the one after `start` without a gap, or the chain is broken).
pub(super) fn link(
    conn: &Connection,
    cps: &[Signed],
    key: &PublicKey,
    start: (i64, String),
) -> Checked<i64> {
    let by_seq: std::collections::HashMap<i64, &Signed> = cps.iter().map(|c| (c.seq, c)).collect();
    let mut st = conn.prepare(&format!(
        "SELECT {} FROM events ORDER BY seq",
        Stored::COLUMNS
    ))?;
    let mut rows = st.query([])?;
    let (mut last, mut prev) = start;
    let first = last;
    while let Some(r) = rows.next()? {
        let row = Stored::read(r)?;
        let seq = row.seq;
        // Every row has a hash (older databases were chained when the
        // column came), and seqs follow each other from 1.
        let Some(hash) = row.hash.clone() else {
            let what = "the row has no hash (written around the chain)";
            return Err(Stop::Broken(Some(seq), what.into()));
        };
        in_order(seq, last, first)?;
        if row.linked(&prev) != hash {
            let what =
                "the row does not match its hash (edited, inserted, or a row before it deleted)";
            return Err(Stop::Broken(Some(seq), what.into()));
        }
        if let Some(c) = by_seq.get(&seq) {
            signed_here(c, &hash, key)?;
        }
        prev = hash;
        last = seq;
    }
    Ok(last)
}

/// `seq` comes right after `last` (`first` before the first row: 0, or
/// where the chain was pruned).
fn in_order(seq: i64, last: i64, first: i64) -> Checked<()> {
    if seq == last + 1 {
        return Ok(());
    }
    let what = match last {
        l if l > first && seq > l + 1 => {
            format!("seq {} to {} are missing (deleted)", l + 1, seq - 1)
        }
        _ => format!(
            "the first row is seq {seq}, not {} (rows deleted, or one put before them)",
            first + 1
        ),
    };
    Err(Stop::Broken(Some((last + 1).min(seq)), what))
}

/// The checkpoint at this row is the audit key's, over this chain.
fn signed_here(c: &Signed, hash: &str, key: &PublicKey) -> Checked<()> {
    let seq = c.seq;
    if !c.signed_by(key) {
        let what = format!("the checkpoint at seq {seq} is not signed by the audit key");
        return Err(Stop::Broken(Some(seq), what));
    }
    if c.head != hash {
        let what = format!("the checkpoint at seq {seq} signed another chain");
        return Err(Stop::Broken(Some(seq), what));
    }
    Ok(())
}
