//! Counts a connection's refused requests, so that a client repeating one
//! costs the audit a few rows, not one a request.
//!
//! Refused forwards, channel opens, targets and `env` requests are written
//! as pre-auth failures are: the refusal of a kind on a connection that
//! brings its count to 1, 2, 4, 8… or past one of them gets a row with the
//! count so far, and when the connection ends a last row gives the total
//! if it was not the last one written. The server's handler and the
//! sessions of one connection share one tally. 3,000 refused
//! `tcpip-forward` requests once added 3,000 rows of 30 KB each; now they
//! add 13 rows of at most [`DETAIL_MAX`] bytes of client text.
//! What it leaves to others: which requests are refused (the handler) and
//! how rows are stored (`audit`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::audit::{Audit, Event};

/// One connection's tally, shared by its handler and its sessions.
#[derive(Clone, Default)]
pub(crate) struct Shared(Arc<Mutex<Tally>>);

impl Shared {
    /// Counts `n` refusals of `kind`, described by `row`, and writes the
    /// row when one is due.
    pub(crate) async fn refused(&self, audit: &Audit, kind: String, row: Event, n: u64) {
        let row = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refused_many(kind, row, n);
        if let Some(row) = row {
            audit.event(row).await;
        }
    }

    /// The connection ended: writes each kind's total not said yet.
    pub(crate) async fn finish(&self, audit: &Audit) {
        let tally = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        for total in tally.totals() {
            audit.event(total).await;
        }
    }
}

/// Client text in a refusal's row (a host name, a path) is cut to this.
pub(crate) const DETAIL_MAX: usize = 256;

/// One connection's refusals, by kind.
#[derive(Default)]
pub(crate) struct Tally {
    kinds: HashMap<String, Count>,
}

/// A kind's refusals: how many, how many the last row said, and that
/// row, for the total at the end.
struct Count {
    seen: u64,
    said: u64,
    row: Event,
}

impl Tally {
    /// Counts `n` refusals of `kind` (more than one at once: a channel's
    /// `env` requests), described by `row`; gives the row to write, with
    /// its `count`, when one is due.
    pub(crate) fn refused_many(&mut self, kind: String, row: Event, n: u64) -> Option<Event> {
        let count = self.kinds.entry(kind).or_insert(Count {
            seen: 0,
            said: 0,
            row: Event::new(row.kind),
        });
        let before = count.seen;
        count.seen += n;
        count.row = row;
        // A row when the count reaches or passes a power of two.
        let crossed = before == 0 || count.seen.ilog2() > before.ilog2();
        if !crossed {
            return None;
        }
        count.said = count.seen;
        Some(count.row.clone().field("count", count.seen))
    }

    /// The rows that give each kind's total, where the last row written
    /// said less: for when the connection ends.
    pub(crate) fn totals(self) -> impl Iterator<Item = Event> {
        self.kinds
            .into_values()
            .filter(|c| c.seen > c.said)
            .map(|c| c.row.field("count", c.seen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Kind;

    #[test]
    fn a_flood_gets_rows_at_powers_of_two_and_a_total() {
        let mut tally = Tally::default();
        let mut rows = Vec::new();
        for i in 0..3000 {
            let row = Event::new(Kind::ForwardDenied).field("detail", format!("h{i}"));
            rows.extend(tally.refused_many("tcpip-forward".into(), row, 1));
        }
        rows.extend(tally.refused_many("x11".into(), Event::new(Kind::ForwardDenied), 1));
        let counts: Vec<u64> = rows
            .iter()
            .map(|r| r.fields["count"].as_u64().unwrap())
            .collect();
        assert_eq!(
            counts,
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 1]
        );
        let totals: Vec<Event> = tally.totals().collect();
        assert_eq!(totals.len(), 1);
        assert_eq!(totals[0].fields["count"], 3000);
        assert_eq!(totals[0].fields["detail"], "h2999");
    }

    /// Counted many at a time, a row comes when the count passes a power
    /// of two, and the total at the end is exact.
    #[test]
    fn many_at_once_pass_powers_of_two() {
        let mut tally = Tally::default();
        let counts: Vec<u64> = (0..10)
            .filter_map(|_| tally.refused_many("env".into(), Event::new(Kind::EnvRefused), 3))
            .map(|r| r.fields["count"].as_u64().unwrap())
            .collect();
        assert_eq!(counts, [3, 6, 9, 18]);
        let totals: Vec<Event> = tally.totals().collect();
        assert_eq!(totals[0].fields["count"], 30);
    }
}
