//! Retention: `[audit] keep_days` and `[recordings] keep_days`, applied
//! by a pass the writer thread runs (it alone writes the chain) at start
//! and daily.
//!
//! Rows older than `[audit] keep_days` are deleted from the start of the
//! chain, up to a signed checkpoint, with the checkpoints among them and
//! their sessions' rows, and one signed `pruned` marker takes their place:
//! that checkpoint's seq and head (the next row links to it, the next
//! checkpoint names it). `audit verify` starts from the marker, so the
//! chain stays verifiable end to end. What is deleted is decided by the
//! chain, never by what is not chained: only the leading run of rows
//! older than the cutoff, never past a session whose chained start has no
//! chained end, and only once the rows relink to that checkpoint and its
//! signature is the audit key's (a row edited to look old stops the pass).
//!
//! Recordings of sessions whose chained `session_end` (at or below a
//! signed checkpoint) is older than `[recordings] keep_days` are deleted,
//! each with a chained `recording_pruned` row, signed at once, so verify
//! tells retention from a recording removed by hand; a recording whose
//! session's rows are gone already goes by its file's age. Only files in
//! the recordings directory, by their own name, are ever deleted.
//!
//! What it owns: the pass, the marker and its message. What it leaves to
//! others: signing (`chain`), writing rows (`db`), checking (`verify`).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, params};
use russh::keys::PublicKey;

use super::chain::{self, Signed};
use super::db::Stored;
use super::{Event, Kind, rfc3339};

/// At most this many recordings are deleted by one pass: the writer
/// thread does it, and the audit waits meanwhile.
pub(super) const MAX_RECORDINGS: usize = 10_000;
/// At most this many rows are deleted by one pass (the daemon asks again
/// while a pass deletes some), so the writer is never held for long.
pub(super) const MAX_ROWS: i64 = 50_000;

/// What the rows before a pruned chain ended at, signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Marker {
    /// The last row deleted: the first kept is the one after it.
    pub(crate) seq: i64,
    /// The chain's hash at `seq`, which the next row links to.
    pub(crate) head: String,
    /// The last checkpoint at or before `seq`: its seq and id (0 and the
    /// zero hash for none), which the next checkpoint names.
    pub(crate) checkpoint: (i64, String),
    pub(crate) ts: String,
    pub(crate) signature: String,
}

impl Marker {
    /// What the signature signs.
    pub(crate) fn message(&self) -> String {
        let (cp_seq, cp) = &self.checkpoint;
        format!(
            "walissh audit pruned\nthrough seq {}\nhead {}\ncheckpoint {cp_seq} {cp}\nts {}\n",
            self.seq, self.head, self.ts
        )
    }

    pub(crate) fn signed_by(&self, key: &PublicKey) -> bool {
        chain::signed_by(key, &self.message(), &self.signature)
    }

    /// The marker of a chain pruned through checkpoint `c`, signed now.
    pub(super) fn at(c: &Signed, sign: Signer<'_>) -> Result<Marker, String> {
        let mut m = Marker {
            seq: c.seq,
            head: c.head.clone(),
            checkpoint: (c.seq, c.id()),
            ts: rfc3339(SystemTime::now()),
            signature: String::new(),
        };
        m.signature = sign(&m.message())?;
        Ok(m)
    }
}

/// The marker the database holds, if it was ever pruned.
pub(crate) fn marker(conn: &Connection) -> rusqlite::Result<Option<Marker>> {
    let exists = conn
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pruned'")?
        .exists([])?;
    if !exists {
        return Ok(None);
    }
    conn.query_row(
        "SELECT seq, head, cp_seq, cp, ts, signature FROM pruned WHERE id = 1",
        [],
        |r| {
            Ok(Marker {
                seq: r.get(0)?,
                head: r.get(1)?,
                checkpoint: (r.get(2)?, r.get(3)?),
                ts: r.get(4)?,
                signature: r.get(5)?,
            })
        },
    )
    .optional()
}

/// Signs a marker's message with the audit key.
pub(crate) type Signer<'a> = &'a dyn Fn(&str) -> Result<String, String>;

/// What one pass asks for.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    /// Delete rows from before this time.
    pub(crate) audit_before: Option<SystemTime>,
    /// Delete the recordings, in this directory, of sessions that ended
    /// before this time.
    pub(crate) recordings: Option<(PathBuf, SystemTime)>,
    /// The recordings are in a bucket too, where every node reaches them:
    /// a shared (PostgreSQL) audit's pass prunes every node's; without
    /// one, only this node's own (the others' are on their disks).
    pub(crate) bucket: bool,
}

/// What one pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Pruned {
    /// The last row deleted, if any was.
    pub(crate) through: Option<i64>,
    pub(crate) events: u64,
    pub(crate) sessions: u64,
    pub(crate) recordings: u64,
    /// The file names of the recordings whose rows say they were pruned:
    /// their objects go from the bucket too, when there is one (by the
    /// daemon, off the writer).
    pub(crate) names: Vec<String>,
}

impl Pruned {
    /// `more`, done after this.
    pub(crate) fn add(&mut self, more: Pruned) {
        self.through = more.through.or(self.through);
        self.events += more.events;
        self.sessions += more.sessions;
        self.recordings += more.recordings;
        self.names.extend(more.names);
    }
}

/// A recording to delete: its `recording_pruned` row, and its file, which
/// goes only once the row is chained and signed.
pub(crate) type Doomed = (Event, PathBuf);

/// Deletes what `ask` names: the rows in one transaction with their new
/// marker (checked against `key`, signed by `sign`); then the recordings
/// whose session left no chained start (by their files' age). Returns
/// what it did and the recordings to delete once their rows are chained
/// and signed (the writer's part).
pub(crate) fn prune(
    conn: &mut Connection,
    ask: &Ask,
    (key, sign): (&PublicKey, Signer<'_>),
) -> Result<(Pruned, Vec<Doomed>), String> {
    let said = |e: Failed| match e {
        Failed::Db(e) => e.to_string(),
        Failed::Refused(e) => e,
    };
    let mut done = Pruned::default();
    if let Some(before) = ask.audit_before {
        done = prune_rows(conn, &rfc3339(before), (key, sign)).map_err(said)?;
    }
    let mut doomed = Vec::new();
    if let Some((dir, before)) = &ask.recordings {
        let files;
        (doomed, files) = recordings(conn, key, dir, *before).map_err(said)?;
        done.recordings = files as u64;
    }
    Ok((done, doomed))
}

/// Deletes `doomed`'s files, whose rows are chained and signed now: how
/// many went (one that cannot is logged; its row says it was retention's).
pub(crate) fn delete(doomed: &[Doomed]) -> u64 {
    let mut n = 0;
    for (_, path) in doomed {
        match std::fs::remove_file(path) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(recording = %path.display(), error = %e, "retention: cannot delete")
            }
        }
    }
    n
}

enum Failed {
    Db(rusqlite::Error),
    /// The pass would not go on: the chain does not hold, or cannot be
    /// signed.
    Refused(String),
}

impl From<rusqlite::Error> for Failed {
    fn from(e: rusqlite::Error) -> Failed {
        Failed::Db(e)
    }
}

/// The first row at or after `cutoff` (RFC 3339, as stored), after `floor`:
/// rows are scanned in seq order, and the scan stops there.
fn first_new(conn: &Connection, floor: i64, cutoff: &str) -> rusqlite::Result<Option<i64>> {
    conn.query_row(
        "SELECT seq FROM events WHERE seq > ?1 AND ts >= ?2 ORDER BY seq LIMIT 1",
        params![floor, cutoff],
        |r| r.get(0),
    )
    .optional()
}

/// How far rows may go: the leading run of rows older than `cutoff`.
fn old_run(tx: &Connection, floor: i64, cutoff: &str) -> rusqlite::Result<i64> {
    let last: i64 = tx.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| r.get(0))?;
    Ok(match first_new(tx, floor, cutoff)? {
        Some(s) => s - 1,
        None => last,
    })
}

/// The checkpoint to prune up to: the last after `floor` and at most
/// `limit`, within [`MAX_ROWS`] of the floor when one is (else the first,
/// so a long stretch without one never stalls retention); stepped back
/// before any session whose chained start has no chained end up to that
/// checkpoint (an open session keeps its rows). Every row this decision
/// reads is at or below the checkpoint, so `relinks` then checks them all.
fn target(tx: &Connection, floor: i64, mut limit: i64) -> rusqlite::Result<Option<Signed>> {
    let columns = super::db::checkpoint_columns(tx)?;
    let at = |sql: &str, a: i64, b: i64| {
        tx.query_row(
            &format!("SELECT {columns} FROM checkpoints WHERE {sql}"),
            [a, b],
            super::db::checkpoint_row,
        )
        .optional()
    };
    loop {
        let near = at(
            "seq > ?1 AND seq <= ?2 ORDER BY seq DESC LIMIT 1",
            floor,
            limit.min(floor.saturating_add(MAX_ROWS)),
        )?;
        let c = match near {
            Some(c) => c,
            None => match at("seq > ?1 AND seq <= ?2 ORDER BY seq LIMIT 1", floor, limit)? {
                Some(c) => c,
                None => return Ok(None),
            },
        };
        let open: Option<i64> = tx.query_row(
            "SELECT MIN(e.seq) FROM events e
             WHERE e.kind = 'session_start' AND e.seq > ?1 AND e.seq <= ?2
               AND NOT EXISTS (SELECT 1 FROM events x WHERE x.session = e.session
                               AND x.kind = 'session_end' AND x.seq > e.seq AND x.seq <= ?2)",
            [floor, c.seq],
            |r| r.get(0),
        )?;
        match open {
            Some(s) => limit = s - 1,
            None => return Ok(Some(c)),
        }
    }
}

/// The marker, when its signature is the audit key's: a marker put there
/// by hand must not become the start of what the pass trusts.
fn trusted_marker(tx: &Connection, key: &PublicKey) -> Result<Option<Marker>, Failed> {
    trusted(marker(tx)?, key).map_err(Failed::Refused)
}

/// `m`, when its signature is `key`'s.
pub(super) fn trusted(m: Option<Marker>, key: &PublicKey) -> Result<Option<Marker>, String> {
    match m {
        Some(m) if !m.signed_by(key) => Err(
            "the pruned marker is not signed by the audit key; nothing pruned: run `walissh audit verify`".into(),
        ),
        m => Ok(m),
    }
}

/// Walks the rows a pass would delete, from the marker's head to the
/// checkpoint it stops at: each must link to the last.
pub(super) struct Relink {
    last: i64,
    prev: String,
}

impl Relink {
    pub(super) fn from((floor, prev): (i64, String)) -> Relink {
        Relink { last: floor, prev }
    }

    /// `row`, the next in seq order, links to the one before.
    pub(super) fn next(&mut self, row: &Stored) -> Result<(), String> {
        let linked = row.linked(&self.prev);
        if row.seq != self.last + 1 || row.hash.as_deref() != Some(linked.as_str()) {
            return Err(refused(format!("the chain is broken at seq {}", row.seq)));
        }
        (self.last, self.prev) = (row.seq, linked);
        Ok(())
    }

    /// The walk ended at `c`, whose signature is `key`'s over the head
    /// reached.
    pub(super) fn reaches(&self, c: &Signed, key: &PublicKey) -> Result<(), String> {
        if self.last != c.seq || self.prev != c.head || !c.signed_by(key) {
            return Err(refused(format!(
                "the checkpoint at seq {} does not hold",
                c.seq
            )));
        }
        Ok(())
    }
}

pub(super) fn refused(what: String) -> String {
    format!("{what}; nothing pruned: run `walissh audit verify`")
}

/// The rows after `floor` relink from `prev` up to `c`, whose signature
/// is `key`'s over the head they reach: else why not.
fn relinks(
    tx: &Connection,
    (floor, prev): (i64, String),
    c: &Signed,
    key: &PublicKey,
) -> Result<(), Failed> {
    let mut st = tx.prepare(&format!(
        "SELECT {} FROM events WHERE seq > ?1 AND seq <= ?2 ORDER BY seq",
        Stored::COLUMNS
    ))?;
    let mut rows = st.query([floor, c.seq])?;
    let mut walk = Relink::from((floor, prev));
    while let Some(r) = rows.next()? {
        walk.next(&Stored::read(r)?).map_err(Failed::Refused)?;
    }
    walk.reaches(c, key).map_err(Failed::Refused)
}

/// The rows before `cutoff` (RFC 3339, as stored) and all that goes with
/// them, up to a signed checkpoint, in one transaction.
fn prune_rows(
    conn: &mut Connection,
    cutoff: &str,
    (key, sign): (&PublicKey, Signer<'_>),
) -> Result<Pruned, Failed> {
    let tx = conn.transaction()?;
    let before = trusted_marker(&tx, key)?;
    let (floor, prev) = before
        .as_ref()
        .map_or_else(|| (0, chain::genesis()), |m| (m.seq, m.head.clone()));
    let limit = old_run(&tx, floor, cutoff)?;
    // Only up to a checkpoint: what is deleted was signed, and the marker
    // signs that the chain reached it.
    let Some(c) = target(&tx, floor, limit)? else {
        return Ok(Pruned::default());
    };
    relinks(&tx, (floor, prev), &c, key)?;
    let through = c.seq;
    let m = Marker::at(&c, sign).map_err(Failed::Refused)?;
    let (events, sessions) = drop_through(&tx, floor, through)?;
    tx.execute(
        "INSERT OR REPLACE INTO pruned (id, seq, head, cp_seq, cp, ts, signature)
         VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            m.seq,
            m.head,
            m.checkpoint.0,
            m.checkpoint.1,
            m.ts,
            m.signature
        ],
    )?;
    tx.commit()?;
    Ok(Pruned {
        through: Some(through),
        events: events as u64,
        sessions: sessions as u64,
        ..Pruned::default()
    })
}

/// Deletes the rows after `floor` up to `through`, with their search
/// index, the checkpoints among them, and the sessions whose start went:
/// how many rows and sessions. A readers' copy of a pruned PostgreSQL
/// audit drops the same.
pub(super) fn drop_through(
    tx: &Connection,
    floor: i64,
    through: i64,
) -> rusqlite::Result<(usize, usize)> {
    unindex(tx, floor, through)?;
    let events = tx.execute("DELETE FROM events WHERE seq <= ?1", [through])?;
    tx.execute("DELETE FROM checkpoints WHERE seq <= ?1", [through])?;
    // A session whose start is gone goes from the table too (its end,
    // if kept, still says it ended).
    let sessions = tx.execute(
        "DELETE FROM sessions WHERE NOT EXISTS
           (SELECT 1 FROM events e WHERE e.kind = 'session_start' AND e.session = sessions.id)",
        [],
    )?;
    Ok((events, sessions))
}

/// Takes the rows after `from` up to `through` out of the search index
/// (`events_text`, contentless: each is deleted with the text it was
/// indexed with, made again from the row).
fn unindex(tx: &Connection, from: i64, through: i64) -> rusqlite::Result<()> {
    let mut st = tx.prepare("SELECT seq, kind, fields FROM events WHERE seq > ?1 AND seq <= ?2")?;
    let mut rows = st.query([from, through])?;
    let mut delete =
        tx.prepare("INSERT INTO events_text (events_text, rowid, text) VALUES ('delete', ?1, ?2)")?;
    while let Some(r) = rows.next()? {
        let (seq, kind, fields): (i64, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let indexed = match (Kind::parse(&kind), serde_json::from_str(&fields)) {
            (Some(kind), Ok(serde_json::Value::Object(f))) => super::query::searchable(kind, &f),
            _ => None,
        };
        if let Some(text) = indexed {
            delete.execute(params![seq, text])?;
        }
    }
    Ok(())
}

/// The recordings to delete: those of sessions whose chained
/// `session_end`, at or below a signed checkpoint, is older than `cutoff`
/// (deleted here, each with its `recording_pruned` row to write), then
/// files in `dir` last written before `before` whose session has no
/// chained start any more (deleted here). Returns the rows, and how many
/// such files.
fn recordings(
    conn: &Connection,
    key: &PublicKey,
    dir: &Path,
    before: SystemTime,
) -> Result<(Vec<Doomed>, usize), Failed> {
    let cutoff = rfc3339(before);
    let marker = trusted_marker(conn, key)?;
    let floor = marker
        .as_ref()
        .map_or_else(|| (0, chain::genesis()), |m| (m.seq, m.head.clone()));
    let signed: i64 = conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM checkpoints", [], |r| {
        r.get(0)
    })?;
    let bound = first_new(conn, floor.0, &cutoff)?.map_or(signed, |s| signed.min(s - 1));
    let mut st = conn.prepare(
        "SELECT e.session, e.user, e.target, s.fields, s.seq, e.seq
         FROM events e JOIN events s ON s.session = e.session AND s.kind = 'session_start' AND s.seq < e.seq
         WHERE e.seq > ?1 AND e.seq <= ?2 AND e.kind = 'session_end' AND e.ts < ?3
           AND CASE WHEN json_valid(s.fields) THEN json_extract(s.fields, '$.recording') END IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM events p WHERE p.session = e.session AND p.kind = 'recording_pruned')
         ORDER BY e.seq, s.seq LIMIT ?4",
    )?;
    let found: Vec<Found> = st
        .query_map(
            params![floor.0, bound, cutoff, MAX_RECORDINGS as i64],
            |r| {
                Ok(Found {
                    who: (r.get(0)?, r.get(1)?, r.get(2)?),
                    start: r.get(3)?,
                    seqs: (r.get(4)?, r.get(5)?),
                })
            },
        )?
        .collect::<rusqlite::Result<_>>()?;
    // What is deleted on the word of these rows, the chain signed.
    let seqs: Vec<i64> = found.iter().flat_map(|f| [f.seqs.0, f.seqs.1]).collect();
    let walked = signed_rows(conn, key, floor, seqs)?;
    let found: Vec<Found> = found
        .into_iter()
        .filter(|f| walked.holds(f, &cutoff))
        .collect();
    let doomed = doomed(&found, dir, &cutoff, None);
    let files = orphans(
        conn,
        dir,
        before,
        MAX_RECORDINGS.saturating_sub(doomed.len()),
    )?;
    Ok((doomed, files))
}

/// A session the recordings pass found: its id, user and target, its
/// `session_start`'s fields (as stored), and the seqs of its start and
/// end.
pub(super) struct Found {
    pub(super) who: (String, Option<String>, Option<String>),
    pub(super) start: String,
    pub(super) seqs: (i64, i64),
}

/// The `recording_pruned` rows and files of `found`: each whose start
/// names a recording (fields that do not parse are skipped, not fatal),
/// of `node` when one is given.
pub(super) fn doomed(found: &[Found], dir: &Path, cutoff: &str, node: Option<&str>) -> Vec<Doomed> {
    found
        .iter()
        .filter_map(|f| {
            let start: serde_json::Value = serde_json::from_str(&f.start).ok()?;
            if node.is_some_and(|n| start["node"].as_str() != Some(n)) {
                return None;
            }
            let recording = start["recording"].as_str()?.to_string();
            let (id, user, target) = f.who.clone();
            doom((id, user, target, recording), dir, cutoff)
        })
        .collect()
}

/// The rows at `seqs` are where the chain signed them: from each, the
/// rows link up to the first checkpoint at or after it, which the audit
/// key signed over the head they reach (a row changed, or a hash made
/// again after it, does not; the first row's link back is to the stored
/// hash before it, or `floor`, the marker's head). A stretch walked
/// covers the seqs within it. Else nothing is pruned.
fn signed_rows(
    conn: &Connection,
    key: &PublicKey,
    floor: (i64, String),
    seqs: Vec<i64>,
) -> Result<Walked, Failed> {
    let mut walked = Walked::new(&seqs);
    let mut stretches = Stretches::new(seqs);
    while let Some(from) = stretches.next_uncovered() {
        let prev = match from - 1 == floor.0 {
            true => Some(floor.1.clone()),
            false => conn
                .query_row("SELECT hash FROM events WHERE seq = ?1", [from - 1], |r| {
                    r.get::<_, Option<String>>(0)
                })
                .optional()?
                .flatten(),
        };
        let Some(prev) = prev else {
            return Err(Failed::Refused(refused(format!(
                "the chain is broken at seq {}",
                from - 1
            ))));
        };
        let columns = super::db::checkpoint_columns(conn)?;
        let c = conn
            .query_row(
                &format!("SELECT {columns} FROM checkpoints WHERE seq >= ?1 ORDER BY seq LIMIT 1"),
                [from],
                super::db::checkpoint_row,
            )
            .optional()?
            .ok_or_else(|| {
                Failed::Refused(refused(format!("seq {from} is under no checkpoint")))
            })?;
        let mut st = conn.prepare(&format!(
            "SELECT {} FROM events WHERE seq >= ?1 AND seq <= ?2 ORDER BY seq",
            Stored::COLUMNS
        ))?;
        let mut rows = st.query([from, c.seq])?;
        let mut walk = Relink::from((from - 1, prev));
        while let Some(r) = rows.next()? {
            let row = Stored::read(r)?;
            walk.next(&row).map_err(Failed::Refused)?;
            walked.keep(row);
        }
        walk.reaches(&c, key).map_err(Failed::Refused)?;
        stretches.covered(from, c.seq);
    }
    Ok(walked)
}

/// The rows a check walked at the seqs it was asked about: what the
/// pass then acts on is read from them, not from the query that found
/// them (a row changed between the two is not trusted).
pub(super) struct Walked {
    wanted: std::collections::HashSet<i64>,
    rows: std::collections::HashMap<i64, Stored>,
}

impl Walked {
    pub(super) fn new(seqs: &[i64]) -> Walked {
        Walked {
            wanted: seqs.iter().copied().collect(),
            rows: Default::default(),
        }
    }

    pub(super) fn keep(&mut self, row: Stored) {
        if self.wanted.contains(&row.seq) {
            self.rows.insert(row.seq, row);
        }
    }

    /// `f` is what the chain holds at its seqs: its session's start, with
    /// the fields read, and its end, older than `cutoff`.
    pub(super) fn holds(&self, f: &Found, cutoff: &str) -> bool {
        let (Some(s), Some(e)) = (self.rows.get(&f.seqs.0), self.rows.get(&f.seqs.1)) else {
            return false;
        };
        let id = Some(f.who.0.as_str());
        s.kind == "session_start"
            && e.kind == "session_end"
            && s.session.as_deref() == id
            && e.session.as_deref() == id
            && s.fields == f.start
            && e.ts.as_str() < cutoff
    }

    /// The chain holds a `recording_pruned` of session `id` at `seq`.
    pub(super) fn pruned(&self, seq: i64, id: &str) -> bool {
        self.rows
            .get(&seq)
            .is_some_and(|r| r.kind == "recording_pruned" && r.session.as_deref() == Some(id))
    }
}

/// Seqs to check, in order, and the stretch last walked.
pub(super) struct Stretches {
    seqs: std::vec::IntoIter<i64>,
    walked: Option<(i64, i64)>,
}

impl Stretches {
    pub(super) fn new(mut seqs: Vec<i64>) -> Stretches {
        seqs.sort_unstable();
        seqs.dedup();
        Stretches {
            seqs: seqs.into_iter(),
            walked: None,
        }
    }

    /// The next seq no stretch walked so far covers.
    pub(super) fn next_uncovered(&mut self) -> Option<i64> {
        self.seqs
            .by_ref()
            .find(|s| !self.walked.is_some_and(|(a, b)| (a..=b).contains(s)))
    }

    pub(super) fn covered(&mut self, from: i64, to: i64) {
        self.walked = Some((from, to));
    }
}

/// The `recording_pruned` row and file of a session found to prune (its
/// id, user, target and recording), when the recording is `dir`'s own
/// and the session's (`ID.cast`: a start row made to name another
/// session's recording names none).
fn doom(
    (id, user, target, recording): (String, Option<String>, Option<String>, String),
    dir: &Path,
    cutoff: &str,
) -> Option<Doomed> {
    // Only a recording of the directory's own, by its name.
    let path = in_dir(dir, &recording)?;
    if path.file_name()? != std::ffi::OsStr::new(&format!("{id}.cast")) {
        return None;
    }
    // The cutoff goes into the row: verify holds the chained end to it,
    // so rows made to look old for this pass show once put back.
    let mut ev = Event::new(Kind::RecordingPruned)
        .field("recording", recording)
        .field("before", cutoff);
    (ev.session, ev.user, ev.target) = (Some(id), user, target);
    Some((ev, path))
}

/// `dir`'s file of the name `recording` ends in, when it is a plain
/// recording's name (`ID.cast`).
pub(super) fn in_dir(dir: &Path, recording: &str) -> Option<PathBuf> {
    let name = Path::new(recording).file_name()?.to_str()?;
    let plain = name.ends_with(".cast")
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    plain.then(|| dir.join(name))
}

/// Deletes the recordings in `dir` (regular files `ID.cast`) last written
/// before `before` whose session has no chained start any more, at most
/// `max`: how many.
fn orphans(
    conn: &Connection,
    dir: &Path,
    before: SystemTime,
    max: usize,
) -> rusqlite::Result<usize> {
    let mut started =
        conn.prepare("SELECT 1 FROM events WHERE session = ?1 AND kind = 'session_start'")?;
    let mut n = 0;
    for (id, path) in old_files(dir, before) {
        if n >= max {
            break;
        }
        if !started.exists([&id])? {
            n += usize::from(std::fs::remove_file(&path).is_ok());
        }
    }
    Ok(n)
}

/// The recordings in `dir` (regular files `ID.cast`) last written before
/// `before`: each one's session id and path.
pub(super) fn old_files(dir: &Path, before: SystemTime) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < before);
        let (Some(path), Some(id)) = (in_dir(dir, &name), name.strip_suffix(".cast")) else {
            continue;
        };
        if regular && old {
            found.push((id.to_string(), path));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(id: &str, start: &str) -> Found {
        Found {
            who: (id.into(), Some("bob".into()), Some("web1".into())),
            start: start.into(),
            seqs: (1, 2),
        }
    }

    /// Only a session's own recording (`ID.cast`, in the directory) is
    /// doomed, of the node asked for; a start that does not parse is
    /// skipped, not fatal to the pass.
    #[test]
    fn only_a_sessions_own_recording_goes() {
        let dir = Path::new("/r");
        let all = [
            found("s1", r#"{"recording":"/elsewhere/s1.cast","node":"n1"}"#),
            found("s2", r#"{"recording":"/r/s1.cast","node":"n1"}"#),
            found("s3", r#"{"recording":"/r/s3.cast","node":"n2"}"#),
            found("s4", "not json"),
            found("s5", r#"{"node":"n1"}"#),
            found("s6", r#"{"recording":"/r/../s6.cast","node":"n1"}"#),
        ];
        let paths = |node| -> Vec<PathBuf> {
            doomed(&all, dir, "cut", node)
                .into_iter()
                .map(|(_, p)| p)
                .collect()
        };
        assert_eq!(
            paths(Some("n1")),
            [dir.join("s1.cast"), dir.join("s6.cast")]
        );
        assert_eq!(
            paths(None),
            [
                dir.join("s1.cast"),
                dir.join("s3.cast"),
                dir.join("s6.cast")
            ]
        );
    }

    /// A stretch walked covers the seqs within it; the next seq past it
    /// is walked from.
    #[test]
    fn stretches_skip_what_a_walk_covered() {
        let mut s = Stretches::new(vec![9, 3, 5, 3, 12]);
        assert_eq!(s.next_uncovered(), Some(3));
        s.covered(3, 10);
        assert_eq!(s.next_uncovered(), Some(12));
        s.covered(12, 20);
        assert_eq!(s.next_uncovered(), None);
    }
}
