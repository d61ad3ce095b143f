//! The checkpoints as a whole: none past the chain's end, each chained to
//! the one before it, and the chain's tail signed as recently as the
//! writer signs.

use std::time::Duration;

use rusqlite::Connection;

use super::{Checked, Stop, seconds_between, span};
use crate::audit::chain::Signed;

/// How much of the chain's tail, after its last checkpoint, may be
/// unsigned: the writer signs after `checkpoint_events` events or
/// `checkpoint_s` seconds, but only once the batch that reached the count
/// is committed (up to `db::BATCH` records more), and a crash can leave
/// the last interval unsigned until the next start. So twice each, plus a
/// batch: an honest tail stays well inside, and a chain whose checkpoints
/// were deleted or rewritten away shows as soon as it is longer than that.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Freshness {
    pub(crate) events: u64,
    pub(crate) span: Duration,
}

impl Freshness {
    /// The bounds for `[audit] checkpoint_events` and `checkpoint_s`.
    pub(crate) fn of(checkpoint_events: u64, checkpoint: Duration) -> Freshness {
        let batch = crate::audit::db::BATCH as u64;
        Freshness {
            events: checkpoint_events
                .max(1)
                .saturating_mul(2)
                .saturating_add(batch),
            span: checkpoint.max(Duration::from_secs(1)).saturating_mul(2),
        }
    }
}

/// No checkpoint past the last row: rows it signed would be gone.
/// `floor` is the last row pruned (0 for none).
pub(super) fn truncated(cps: &[Signed], last_seq: i64, floor: i64) -> Checked<()> {
    // Rows start after the floor: a checkpoint at or below it names no
    // row, so no row's check would ever look at its signature.
    if let Some(c) = cps.iter().find(|c| c.seq <= floor) {
        return Err(Stop::Broken(
            None,
            format!("a checkpoint at seq {} names no row (inserted)", c.seq),
        ));
    }
    match cps.last() {
        Some(c) if c.seq > last_seq => Err(Stop::Broken(
            Some(last_seq + 1),
            format!(
                "the rows after seq {last_seq} are gone: the checkpoint at seq {} signed them (truncated)",
                c.seq
            ),
        )),
        _ => Ok(()),
    }
}

/// Each chained checkpoint names the one before it in the table (the
/// first, `base`: seq 0, or the last one a pruning deleted): one deleted
/// shows in the next. Checkpoints from before they were chained name none.
pub(super) fn chained(cps: &[Signed], base: &(i64, String)) -> Checked<()> {
    let mut before: Option<&Signed> = None;
    for c in cps {
        if let Some((prev_seq, prev)) = &c.prev {
            let (had_seq, had) = before.map_or_else(|| base.clone(), |b| (b.seq, b.id()));
            let what = if *prev_seq > had_seq {
                Some(format!(
                    "the checkpoint at seq {prev_seq} is gone: the checkpoint at seq {} names it (deleted)",
                    c.seq
                ))
            } else if *prev_seq != had_seq {
                Some(format!(
                    "the checkpoint at seq {} names the one at seq {prev_seq}, not the one at seq {had_seq} before it",
                    c.seq
                ))
            } else if *prev != had {
                Some(format!(
                    "the checkpoint at seq {had_seq} is not the one the checkpoint at seq {} names (replaced)",
                    c.seq
                ))
            } else {
                None
            };
            if let Some(what) = what {
                return Err(Stop::Broken(Some(c.seq), what));
            }
        }
        before = Some(c);
    }
    Ok(())
}

/// The rows after the last checkpoint are no more, and span no longer,
/// than the writer leaves unsigned (`Freshness`), the span measured
/// between the rows' own times (so a database read later, or copied,
/// verifies the same).
pub(super) fn fresh(
    conn: &Connection,
    cps: &[Signed],
    (last_seq, floor): (i64, i64),
    bounds: &Freshness,
) -> Checked<()> {
    // The pruned marker signs the rows up to its floor.
    let signed = cps.last().map_or(floor, |c| c.seq.max(floor));
    if last_seq <= signed {
        return Ok(());
    }
    let ts = |seq: i64| -> Checked<String> {
        Ok(conn.query_row("SELECT ts FROM events WHERE seq = ?1", [seq], |r| r.get(0))?)
    };
    let (first, last) = (ts(signed + 1)?, ts(last_seq)?);
    let Some(secs) = seconds_between(&first, &last) else {
        let what = format!("the rows' times ({first}, {last}) are not RFC 3339");
        return Err(Stop::Broken(Some(signed + 1), what));
    };
    let unsigned = u64::try_from(last_seq - signed).unwrap_or(0);
    let over = Duration::from_secs_f64(secs.max(0.0));
    if unsigned <= bounds.events && over <= bounds.span {
        return Ok(());
    }
    let since = match cps.last() {
        Some(c) => format!("no checkpoint after seq {}", c.seq),
        None => "no checkpoint at all".to_string(),
    };
    let what = format!(
        "{since}, but {unsigned} events over {} follow (at most {} events or {} unsigned): checkpoints deleted, or the chain rewritten",
        span(over),
        bounds.events,
        span(bounds.span)
    );
    Err(Stop::Broken(Some(signed + 1), what))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint put below seq 1 names no row, so no row's check reads
    /// its signature: it is refused as inserted, not reached later as a
    /// read error.
    #[test]
    fn a_checkpoint_below_the_first_row_is_broken() {
        let at = |seq| Signed {
            seq,
            head: String::new(),
            ts: String::new(),
            prev: None,
            signature: String::new(),
        };
        for seq in [0, -1] {
            match truncated(&[at(seq), at(5)], 10, 0) {
                Err(Stop::Broken(_, what)) => assert!(what.contains("names no row"), "{what}"),
                _ => panic!("seq {seq} passed"),
            }
        }
        assert!(truncated(&[at(5)], 10, 0).is_ok());
        assert!(truncated(&[at(5)], 10, 5).is_err());
    }
}
