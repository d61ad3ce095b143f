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

use crate::audit::Event;

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
    /// Counts a refusal of `kind`, described by `row`; gives the row to
    /// write, with its `count`, when this one gets a row.
    pub(crate) fn refused(&mut self, kind: String, row: Event) -> Option<Event> {
        self.refused_many(kind, row, 1)
    }

    /// Counts `n` refusals of `kind` at once (a channel's `env` requests).
    pub(crate) fn refused_many(&mut self, kind: String, row: Event, n: u64) -> Option<Event> {
        let count = self.kinds.entry(kind).or_insert(Count {
            seen: 0,
            said: 0,
            row: Event::new("-"),
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

    #[test]
    fn a_flood_gets_rows_at_powers_of_two_and_a_total() {
        let mut tally = Tally::default();
        let mut rows = Vec::new();
        for i in 0..3000 {
            let row = Event::new("forward_denied").field("detail", format!("h{i}"));
            rows.extend(tally.refused("tcpip-forward".into(), row));
        }
        rows.extend(tally.refused("x11".into(), Event::new("forward_denied")));
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
            .filter_map(|_| tally.refused_many("env".into(), Event::new("env_refused"), 3))
            .map(|r| r.fields["count"].as_u64().unwrap())
            .collect();
        assert_eq!(counts, [3, 6, 9, 18]);
        let totals: Vec<Event> = tally.totals().collect();
        assert_eq!(totals[0].fields["count"], 30);
    }
}
