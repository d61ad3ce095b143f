//! Retention: `[audit] keep_days` and `[recordings] keep_days`, applied
//! by a daily pass the writer thread runs (it alone writes the chain).
//!
//! Rows older than `[audit] keep_days` are deleted from the start of the
//! chain, with their checkpoints and their sessions' rows, and replaced by
//! one signed `pruned` marker: the seq they went up to, the chain's hash
//! there (the next row links to it), and the last checkpoint among them
//! (the next checkpoint names it). `audit verify` starts from the marker,
//! so the chain stays verifiable end to end. A session still open, and
//! every row after its start, is kept whatever its age.
//!
//! Recordings of sessions that ended before `[recordings] keep_days` are
//! deleted, each with a chained `recording_pruned` row naming it, so
//! verify tells retention from a recording removed by hand; a recording
//! whose session's rows are gone already goes by its file's age.
//!
//! What it owns: the pass, the marker and its message. What it leaves to
//! others: signing (`chain`), writing rows (`db`), checking (`verify`).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, params};
use russh::keys::PublicKey;

use super::chain;
use super::{Event, Kind, rfc3339};

/// At most this many recordings are deleted by one pass: the writer
/// thread does it, and the audit waits meanwhile.
const MAX_RECORDINGS: usize = 10_000;

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

/// What one pass asks for.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    /// Delete rows from before this time.
    pub(crate) audit_before: Option<SystemTime>,
    /// Delete the recordings, in this directory, of sessions that ended
    /// before this time.
    pub(crate) recordings: Option<(PathBuf, SystemTime)>,
}

/// What one pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Pruned {
    /// The last row deleted, if any was.
    pub(crate) through: Option<i64>,
    pub(crate) events: u64,
    pub(crate) sessions: u64,
    pub(crate) recordings: u64,
}

/// Deletes what `ask` names: the rows in one transaction with their new
/// marker, signed by `sign`; then the recordings. Returns what it did and
/// the recordings' `recording_pruned` rows, for the writer to chain.
pub(crate) fn prune(
    conn: &mut Connection,
    ask: &Ask,
    sign: &dyn Fn(&str) -> Result<String, String>,
) -> Result<(Pruned, Vec<Event>), String> {
    let err = |e: rusqlite::Error| e.to_string();
    let mut done = Pruned::default();
    if let Some(before) = ask.audit_before {
        done = prune_rows(conn, &rfc3339(before), sign).map_err(|e| match e {
            Failed::Db(e) => err(e),
            Failed::Sign(e) => e,
        })?;
    }
    let mut rows = Vec::new();
    if let Some((dir, before)) = &ask.recordings {
        let files;
        (rows, files) = recordings(conn, dir, *before).map_err(err)?;
        done.recordings = (rows.len() + files) as u64;
    }
    Ok((done, rows))
}

enum Failed {
    Db(rusqlite::Error),
    Sign(String),
}

impl From<rusqlite::Error> for Failed {
    fn from(e: rusqlite::Error) -> Failed {
        Failed::Db(e)
    }
}

/// The rows before `cutoff` (RFC 3339, as stored) and all that goes with
/// them, in one transaction.
fn prune_rows(
    conn: &mut Connection,
    cutoff: &str,
    sign: &dyn Fn(&str) -> Result<String, String>,
) -> Result<Pruned, Failed> {
    let tx = conn.transaction()?;
    let old: Option<i64> =
        tx.query_row("SELECT MAX(seq) FROM events WHERE ts < ?1", [cutoff], |r| {
            r.get(0)
        })?;
    // An open session keeps its start, and so everything after it.
    let open: Option<i64> = tx.query_row(
        "SELECT MIN(start_seq) FROM sessions WHERE ended IS NULL",
        [],
        |r| r.get(0),
    )?;
    let before = marker(&tx)?;
    let from = before.as_ref().map_or(0, |m| m.seq);
    let through = match (old, open) {
        (Some(o), Some(s)) => o.min(s - 1),
        (o, _) => o.unwrap_or(0),
    };
    if through <= from {
        return Ok(Pruned::default());
    }
    let head: String = tx.query_row("SELECT hash FROM events WHERE seq = ?1", [through], |r| {
        r.get(0)
    })?;
    let last_cp = tx
        .query_row(
            &format!(
                "SELECT {} FROM checkpoints WHERE seq <= ?1 ORDER BY seq DESC LIMIT 1",
                super::db::checkpoint_columns(&tx)?
            ),
            [through],
            super::db::checkpoint_row,
        )
        .optional()?;
    let checkpoint = match (last_cp, &before) {
        (Some(c), _) => (c.seq, c.id()),
        (None, Some(m)) => m.checkpoint.clone(),
        (None, None) => (0, chain::genesis()),
    };
    let mut m = Marker {
        seq: through,
        head,
        checkpoint,
        ts: rfc3339(SystemTime::now()),
        signature: String::new(),
    };
    m.signature = sign(&m.message()).map_err(Failed::Sign)?;
    unindex(&tx, from, through)?;
    let events = tx.execute("DELETE FROM events WHERE seq <= ?1", [through])?;
    tx.execute("DELETE FROM checkpoints WHERE seq <= ?1", [through])?;
    // A session whose start is gone goes from the table too (its end,
    // if kept, still says it ended).
    let sessions = tx.execute(
        "DELETE FROM sessions WHERE NOT EXISTS
           (SELECT 1 FROM events e WHERE e.kind = 'session_start' AND e.session = sessions.id)",
        [],
    )?;
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
        recordings: 0,
    })
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

/// The recordings to delete: those of sessions that ended before
/// `before` (deleted here, each with its `recording_pruned` row to
/// write), then files in `dir` older than that which no session names
/// any more (deleted here). Returns the rows, and how many such files.
fn recordings(
    conn: &Connection,
    dir: &Path,
    before: SystemTime,
) -> rusqlite::Result<(Vec<Event>, usize)> {
    let cutoff = rfc3339(before);
    let mut st = conn.prepare(
        "SELECT id, user, target, recording FROM sessions
         WHERE ended IS NOT NULL AND ended < ?1 AND recording IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM events e WHERE e.kind = 'recording_pruned' AND e.session = sessions.id)
         ORDER BY ended LIMIT ?2",
    )?;
    let found: Vec<(String, String, String, String)> = st
        .query_map(params![cutoff, MAX_RECORDINGS as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut rows = Vec::new();
    for (id, user, target, recording) in found {
        let path = here(dir, &recording);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(recording = %path.display(), error = %e, "retention: cannot delete");
                continue;
            }
        }
        let mut ev = Event::new(Kind::RecordingPruned)
            .user(user)
            .field("recording", recording);
        (ev.session, ev.target) = (Some(id), Some(target));
        rows.push(ev);
    }
    let named: std::collections::HashSet<String> = conn
        .prepare("SELECT recording FROM sessions WHERE recording IS NOT NULL")?
        .query_map([], |r| r.get::<_, String>(0))?
        .filter_map(Result::ok)
        .filter_map(|p| Some(Path::new(&p).file_name()?.to_string_lossy().into_owned()))
        .collect();
    let files = orphans(
        dir,
        before,
        &named,
        MAX_RECORDINGS.saturating_sub(rows.len()),
    );
    Ok((rows, files))
}

/// The recording `recording` names, in `dir` when it is there by name.
fn here(dir: &Path, recording: &str) -> PathBuf {
    let local = Path::new(recording).file_name().map(|n| dir.join(n));
    match local {
        Some(l) if l.is_file() => l,
        _ => PathBuf::from(recording),
    }
}

/// Deletes the recordings in `dir` last written before `before` that no
/// session in `named` has, at most `max`: how many.
fn orphans(
    dir: &Path,
    before: SystemTime,
    named: &std::collections::HashSet<String>,
    max: usize,
) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for entry in entries.flatten() {
        if n >= max {
            break;
        }
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < before);
        if path.extension().is_some_and(|e| e == "cast") && old && !named.contains(&name) {
            n += usize::from(std::fs::remove_file(&path).is_ok());
        }
    }
    n
}
