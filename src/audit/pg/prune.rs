//! Retention on a PostgreSQL audit: the pass `prune` makes on SQLite,
//! made in one transaction under the head's lock, so that two nodes'
//! passes (each runs its own, daily) never delete past one another, and
//! rows are never linked by one node while another deletes.
//!
//! The rules are the SQLite pass's, and so are the pieces that decide
//! them (`prune::Relink`, `prune::Marker`, `prune::doom`): only the
//! leading run of rows older than the cutoff, up to a signed checkpoint
//! the rows relink to, never past a session left open; one signed marker
//! in their place. Recordings: with a bucket, any node prunes any
//! session's (the daemon deletes the objects once the rows are chained);
//! without one, each node only its own sessions', on its own disk.
//!
//! What it owns: the pass's SQL on PostgreSQL. What it leaves to others:
//! the rules and the marker (`prune`), chaining the rows and deleting the
//! files (`db`), the objects (the daemon, through `upload`).

use std::path::Path;
use std::time::SystemTime;

use russh::keys::PublicKey;
use tokio_postgres::Row;

use super::{Pg, signed};
use crate::audit::chain::{self, Signed};
use crate::audit::db::Stored;
use crate::audit::prune::{self, Ask, Doomed, Marker, Pruned, Relink};
use crate::audit::rfc3339;

type Tx<'a> = deadpool_postgres::Transaction<'a>;

fn db(e: tokio_postgres::Error) -> String {
    e.to_string()
}

impl Pg {
    /// One retention pass as `ask` says: the rows, then the recordings,
    /// in one transaction under the head's lock. Returns what it did and
    /// the recordings' rows to chain before their files go.
    pub(super) fn prune_pass(
        self,
        ask: &Ask,
        head: &mut chain::Head,
    ) -> Result<(Pruned, Vec<Doomed>), String> {
        let key = head.public_key().ok_or("no audit key: nothing is pruned")?;
        // Without a bucket, only this node's recordings are on its disk.
        let mine = (!ask.bucket).then(|| head.node.clone());
        // The directory is read before the head's lock is taken, and files
        // go after it is let go: every node's writer waits on that lock.
        let old = match &ask.recordings {
            Some((dir, before)) => prune::old_files(dir, *before),
            None => Vec::new(),
        };
        let this = self.clone();
        let (mut done, doomed, gone) = self.block(this.under_lock(head, async |tx, head| {
            let mut done = Pruned::default();
            if let Some(before) = ask.audit_before {
                let sign = |m: &str| head.sign(m);
                done = rows(tx, &rfc3339(before), (&key, &sign)).await?;
            }
            let (mut doomed, mut gone) = (Vec::new(), Vec::new());
            if let Some((dir, before)) = &ask.recordings {
                let found = (dir.as_path(), *before, old.as_slice());
                (doomed, gone) = recordings(tx, &key, found, mine.as_deref()).await?;
            }
            Ok((done, doomed, gone))
        }))?;
        done.recordings = gone
            .iter()
            .filter(|f| std::fs::remove_file(f).is_ok())
            .count() as u64;
        Ok((done, doomed))
    }
}

/// The retention marker, if the audit was ever pruned.
pub(super) async fn marker(
    tx: &impl deadpool_postgres::GenericClient,
) -> Result<Option<Marker>, String> {
    let row = tx
        .query_opt(
            "SELECT seq, head, cp_seq, cp, ts, signature FROM pruned",
            &[],
        )
        .await
        .map_err(db)?;
    Ok(row.map(|r| Marker {
        seq: r.get(0),
        head: r.get(1),
        checkpoint: (r.get(2), r.get(3)),
        ts: r.get(4),
        signature: r.get(5),
    }))
}

/// Where the chain starts: the seq and head of the marker, when it is
/// signed with `key` (else nothing is pruned), or the genesis.
async fn floor(tx: &Tx<'_>, key: &PublicKey) -> Result<(i64, String), String> {
    let m = prune::trusted(marker(tx).await?, key)?;
    Ok(m.map_or_else(|| (0, chain::genesis()), |m| (m.seq, m.head)))
}

/// The first row at or after `cutoff`, after `floor`.
async fn first_new(tx: &Tx<'_>, floor: i64, cutoff: &str) -> Result<Option<i64>, String> {
    let row = tx
        .query_opt(
            "SELECT seq FROM events WHERE seq > $1 AND ts >= $2 ORDER BY seq LIMIT 1",
            &[&floor, &cutoff],
        )
        .await
        .map_err(db)?;
    Ok(row.map(|r| r.get(0)))
}

/// The rows before `cutoff` and all that goes with them, up to a signed
/// checkpoint.
async fn rows(
    tx: &Tx<'_>,
    cutoff: &str,
    (key, sign): (&PublicKey, prune::Signer<'_>),
) -> Result<Pruned, String> {
    let (floor, prev) = floor(tx, key).await?;
    let last: i64 = tx
        .query_one("SELECT COALESCE(MAX(seq), 0) FROM events", &[])
        .await
        .map_err(db)?
        .get(0);
    let limit = first_new(tx, floor, cutoff).await?.map_or(last, |s| s - 1);
    let Some(c) = target(tx, floor, limit).await? else {
        return Ok(Pruned::default());
    };
    let found = tx
        .query(
            "SELECT seq, ts, session, \"user\", target, kind, fields, hash FROM events
             WHERE seq > $1 AND seq <= $2 ORDER BY seq",
            &[&floor, &c.seq],
        )
        .await
        .map_err(db)?;
    let mut walk = Relink::from((floor, prev));
    for r in &found {
        walk.next(&stored(r))?;
    }
    walk.reaches(&c, key)?;
    let m = Marker::at(&c, sign)?;
    let events = tx
        .execute("DELETE FROM events WHERE seq <= $1", &[&c.seq])
        .await
        .map_err(db)?;
    tx.execute("DELETE FROM checkpoints WHERE seq <= $1", &[&c.seq])
        .await
        .map_err(db)?;
    let sessions = tx
        .execute(
            "DELETE FROM sessions s WHERE NOT EXISTS
               (SELECT 1 FROM events e WHERE e.kind = 'session_start' AND e.session = s.id)",
            &[],
        )
        .await
        .map_err(db)?;
    tx.execute(
        "INSERT INTO pruned (id, seq, head, cp_seq, cp, ts, signature) VALUES (1, $1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET seq = EXCLUDED.seq, head = EXCLUDED.head, cp_seq = EXCLUDED.cp_seq,
           cp = EXCLUDED.cp, ts = EXCLUDED.ts, signature = EXCLUDED.signature",
        &[&m.seq, &m.head, &m.checkpoint.0, &m.checkpoint.1, &m.ts, &m.signature],
    )
    .await
    .map_err(db)?;
    Ok(Pruned {
        through: Some(c.seq),
        events,
        sessions,
        ..Pruned::default()
    })
}

/// A row as the chain links it.
fn stored(r: &Row) -> Stored {
    Stored {
        seq: r.get(0),
        ts: r.get(1),
        session: r.get(2),
        user: r.get(3),
        target: r.get(4),
        kind: r.get(5),
        fields: r.get(6),
        hash: r.get(7),
    }
}

/// The checkpoint to prune up to, as `prune::target` picks it.
async fn target(tx: &Tx<'_>, floor: i64, mut limit: i64) -> Result<Option<Signed>, String> {
    let at = async |order: &str, hi: i64| {
        let sql = format!(
            "SELECT seq, ts, head, prev_seq, prev, signature FROM checkpoints
             WHERE seq > $1 AND seq <= $2 ORDER BY seq {order} LIMIT 1"
        );
        let row = tx.query_opt(&sql, &[&floor, &hi]).await.map_err(db)?;
        Ok::<_, String>(row.as_ref().map(signed))
    };
    loop {
        let near = at("DESC", limit.min(floor.saturating_add(prune::MAX_ROWS))).await?;
        let c = match near {
            Some(c) => c,
            None => match at("ASC", limit).await? {
                Some(c) => c,
                None => return Ok(None),
            },
        };
        let open: Option<i64> = tx
            .query_one(
                "SELECT MIN(e.seq) FROM events e
                 WHERE e.kind = 'session_start' AND e.seq > $1 AND e.seq <= $2
                   AND NOT EXISTS (SELECT 1 FROM events x WHERE x.session = e.session
                                   AND x.kind = 'session_end' AND x.seq > e.seq AND x.seq <= $2)",
                &[&floor, &c.seq],
            )
            .await
            .map_err(db)?
            .get(0);
        match open {
            Some(s) => limit = s - 1,
            None => return Ok(Some(c)),
        }
    }
}

/// The recordings to delete, as `prune::recordings` finds them; `mine`:
/// only the sessions of this node (no bucket). Then, of `old` (this
/// node's files older than the cutoff, each with its session), those whose
/// session another node's pass pruned (a bucket's: its row says so; the
/// local copy goes here): the rows, and those files, for the caller to
/// delete once the lock is let go. Files whose session's rows are gone are
/// left (a row deleted around walissh must not delete a recording): keep
/// the audit at least as long as the recordings.
async fn recordings(
    tx: &Tx<'_>,
    key: &PublicKey,
    (dir, before, old): (&Path, SystemTime, &[(String, std::path::PathBuf)]),
    mine: Option<&str>,
) -> Result<(Vec<Doomed>, Vec<std::path::PathBuf>), String> {
    let cutoff = rfc3339(before);
    let floor = floor(tx, key).await?;
    let signed: i64 = tx
        .query_one("SELECT COALESCE(MAX(seq), 0) FROM checkpoints", &[])
        .await
        .map_err(db)?
        .get(0);
    let bound = first_new(tx, floor.0, &cutoff)
        .await?
        .map_or(signed, |s| signed.min(s - 1));
    // A page at a time, a bounded number of pages (the pass holds the
    // head's lock, which every node's writer waits for): the sessions
    // whose start names a recording (and this node, without a bucket),
    // by a cheap look at the text; the fields are parsed here (a row that
    // does not parse is skipped, not fatal).
    let node_like = mine.map(|n| format!("%\"node\":\"{n}\"%"));
    let (mut found, mut after) = (Vec::new(), (floor.0, 0i64));
    for _ in 0..MAX_PAGES {
        let page = tx
            .query(
                "SELECT e.session, e.\"user\", e.target, s.fields, s.seq, e.seq
                 FROM events e JOIN events s ON s.session = e.session AND s.kind = 'session_start' AND s.seq < e.seq
                 WHERE (e.seq, s.seq) > ($1, $2) AND e.seq <= $3 AND e.kind = 'session_end' AND e.ts < $4
                   AND s.fields LIKE '%\"recording\":\"%'
                   AND ($6::text IS NULL OR s.fields LIKE $6)
                   AND NOT EXISTS (SELECT 1 FROM events p WHERE p.session = e.session AND p.kind = 'recording_pruned')
                 ORDER BY e.seq, s.seq LIMIT $5",
                &[&after.0, &after.1, &bound, &cutoff, &(PAGE as i64), &node_like],
            )
            .await
            .map_err(db)?;
        let page: Vec<prune::Found> = page
            .iter()
            .map(|r| prune::Found {
                who: (r.get(0), r.get(1), r.get(2)),
                start: r.get(3),
                seqs: (r.get(4), r.get(5)),
            })
            .collect();
        let Some(last) = page.last().map(|f| (f.seqs.1, f.seqs.0)) else {
            break;
        };
        let full = page.len() == PAGE;
        found.extend(page);
        after = last;
        if !full || found.len() >= prune::MAX_RECORDINGS {
            break;
        }
    }
    found.truncate(prune::MAX_RECORDINGS);
    // This node's copies of recordings another node's pass pruned.
    let ids: Vec<&str> = old.iter().map(|(id, _)| id.as_str()).collect();
    let pruned: Vec<(String, i64)> = tx
        .query(
            "SELECT session, seq FROM events
             WHERE kind = 'recording_pruned' AND session = ANY($1) AND seq > $2 AND seq <= $3",
            &[&ids, &floor.0, &signed],
        )
        .await
        .map_err(db)?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    // What is deleted on the word of these rows, the chain signed, and
    // read from the rows the check walked.
    let seqs: Vec<i64> = found
        .iter()
        .flat_map(|f| [f.seqs.0, f.seqs.1])
        .chain(pruned.iter().map(|(_, seq)| *seq))
        .collect();
    let walked = signed_rows(tx, key, floor, seqs).await?;
    found.retain(|f| walked.holds(f, &cutoff));
    let doomed = prune::doomed(&found, dir, &cutoff, mine);
    let gone: std::collections::HashSet<&str> = pruned
        .iter()
        .filter(|(id, seq)| walked.pruned(*seq, id))
        .map(|(id, _)| id.as_str())
        .collect();
    let files = old
        .iter()
        .filter(|(id, _)| gone.contains(id.as_str()))
        .map(|(_, path)| path.clone())
        .collect();
    Ok((doomed, files))
}

/// Pages of sessions one recordings pass reads at most.
const MAX_PAGES: usize = 20;
/// Sessions read a page at a time by the recordings pass.
const PAGE: usize = 1000;

/// `prune`'s check that the rows at `seqs` are where the chain signed
/// them, on PostgreSQL.
async fn signed_rows(
    tx: &Tx<'_>,
    key: &PublicKey,
    floor: (i64, String),
    seqs: Vec<i64>,
) -> Result<prune::Walked, String> {
    let mut walked = prune::Walked::new(&seqs);
    let mut stretches = prune::Stretches::new(seqs);
    while let Some(from) = stretches.next_uncovered() {
        let prev = match from - 1 == floor.0 {
            true => Some(floor.1.clone()),
            false => tx
                .query_opt("SELECT hash FROM events WHERE seq = $1", &[&(from - 1)])
                .await
                .map_err(db)?
                .and_then(|r| r.get::<_, Option<String>>(0)),
        };
        let Some(prev) = prev else {
            let what = format!("the chain is broken at seq {}", from - 1);
            return Err(prune::refused(what));
        };
        let c = tx
            .query_opt(
                "SELECT seq, ts, head, prev_seq, prev, signature FROM checkpoints
                 WHERE seq >= $1 ORDER BY seq LIMIT 1",
                &[&from],
            )
            .await
            .map_err(db)?
            .map(|r| signed(&r))
            .ok_or_else(|| prune::refused(format!("seq {from} is under no checkpoint")))?;
        let rows = tx
            .query(
                "SELECT seq, ts, session, \"user\", target, kind, fields, hash FROM events
                 WHERE seq >= $1 AND seq <= $2 ORDER BY seq",
                &[&from, &c.seq],
            )
            .await
            .map_err(db)?;
        let mut walk = Relink::from((from - 1, prev));
        for r in &rows {
            let row = stored(r);
            walk.next(&row)?;
            walked.keep(row);
        }
        walk.reaches(&c, key)?;
        stretches.covered(from, c.seq);
    }
    Ok(walked)
}
