//! The sessions table and the recordings against their chained rows.
//! The table is not chained itself: the writer makes each row from its
//! session's `session_start` event and ends it with its `session_end`, so
//! a row must say what those say (it holds no exit status: that is only in
//! the chained `session_end`). Each recording is hashed again against the
//! digest its `session_end` holds.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use super::{Checked, Stop, seconds_between};
use crate::audit::chain;

/// How far a row written before rows were made from their events (no
/// `start_seq`) may be from its events' times: its start and end were
/// taken apart from them, milliseconds apart unless the queue was full.
const OLD_ROW_SLACK_S: f64 = 10.0;

/// One row of the sessions table.
struct SessionRow {
    id: String,
    started: String,
    ended: Option<String>,
    start_seq: Option<i64>,
}

/// Every row of the sessions table has its chained `session_start` (the
/// one it names), starts at its time and ends at its `session_end`'s.
pub(super) fn rows_follow_events(conn: &Connection) -> Checked<()> {
    // A session ends once: a second end would stand for the first (the
    // digest of its recording is read from its last).
    let twice: Option<(String, i64)> = conn
        .query_row(
            "SELECT session, MAX(seq) FROM events WHERE kind = 'session_end' AND session IS NOT NULL
             GROUP BY session HAVING COUNT(*) > 1 ORDER BY MAX(seq) LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    if let Some((session, seq)) = twice {
        let what = format!("session {session} ends twice");
        return Err(Stop::Broken(Some(seq), what));
    }
    let start_seq = crate::audit::db::column_or_null(conn, "sessions", "start_seq")?;
    let sql = format!("SELECT id, started, ended, {start_seq} FROM sessions ORDER BY rowid");
    let mut st = conn.prepare(&sql)?;
    let rows = st
        .query_map([], |r| {
            Ok(SessionRow {
                id: r.get(0)?,
                started: r.get(1)?,
                ended: r.get(2)?,
                start_seq: r.get(3)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    // Rows without `start_seq` get an old row's slack only where they are
    // old: before the first row that has one. A row nulled later to get
    // the slack is not.
    let first_new = rows.iter().position(|r| r.start_seq.is_some());
    for (i, row) in rows.iter().enumerate() {
        row_follows(conn, row)?;
        if row.start_seq.is_none() && first_new.is_some_and(|f| i > f) {
            return Err(Stop::Broken(
                None,
                format!(
                    "session {} in the sessions table names no session_start, though it was written after rows that do",
                    row.id
                ),
            ));
        }
    }
    Ok(())
}

fn row_follows(conn: &Connection, row: &SessionRow) -> Checked<()> {
    let id = &row.id;
    let (start_seq, start_ts) = start_of(conn, row)?;
    let broken = |what: String| Err(Stop::Broken(Some(start_seq), what));
    let end_ts: Option<String> = conn
        .query_row(
            "SELECT ts FROM events WHERE kind = 'session_end' AND session = ?1 ORDER BY seq DESC LIMIT 1",
            [id],
            |r| r.get(0),
        )
        .optional()?;
    let near = |a: &str, b: &str| seconds_between(a, b).is_some_and(|s| s.abs() <= OLD_ROW_SLACK_S);
    let old = row.start_seq.is_none();
    let start_ok = row.started == start_ts || (old && near(&row.started, &start_ts));
    if !start_ok {
        return broken(format!(
            "session {id}'s start in the sessions table ({}) is not its session_start's ({start_ts})",
            row.started
        ));
    }
    let end_ok = match (&row.ended, &end_ts) {
        (a, b) if a == b => true,
        // Before, a session refused for a failing audit was ended in the
        // table without a session_end.
        (Some(_), None) => old,
        (Some(a), Some(b)) => old && near(a, b),
        (None, _) => false,
    };
    if !end_ok {
        let said = |t: &Option<String>| t.clone().unwrap_or_else(|| "none".into());
        return broken(format!(
            "session {id}'s end in the sessions table ({}) is not its session_end's ({})",
            said(&row.ended),
            said(&end_ts)
        ));
    }
    Ok(())
}

/// The seq and time of the row's `session_start`: the one it names, or
/// for a row from before rows named it, its session's first.
fn start_of(conn: &Connection, row: &SessionRow) -> Checked<(i64, String)> {
    let id = &row.id;
    let start: Option<(i64, String, String, Option<String>)> = match row.start_seq {
        Some(seq) => conn
            .query_row(
                "SELECT seq, ts, kind, session FROM events WHERE seq = ?1",
                [seq],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?,
        None => conn
            .query_row(
                "SELECT seq, ts, kind, session FROM events WHERE kind = 'session_start' AND session = ?1 ORDER BY seq LIMIT 1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?,
    };
    match start {
        Some((seq, ts, kind, session))
            if kind == "session_start" && session.as_deref() == Some(id.as_str()) =>
        {
            Ok((seq, ts))
        }
        _ => Err(Stop::Broken(
            None,
            format!(
                "session {id} is in the sessions table, but no chained session_start has it (inserted)"
            ),
        )),
    }
}

/// Each session's row in `sessions` is what its chained `session_start`
/// says; each recording its `session_start` names is hashed again against
/// its `session_end`'s digest. A session without its end yet (still
/// running) is left. Returns how many recordings were checked.
/// Where recordings are looked for besides where their rows say: the
/// config's directory, and a bucket (with a directory to fetch into).
pub(super) type Places<'a> = (
    Option<&'a Path>,
    Option<&'a (crate::audit::upload::Bucket, std::path::PathBuf)>,
);

pub(super) fn recordings(conn: &Connection, places: Places<'_>, signed: i64) -> Checked<u64> {
    let mut count = 0;
    let mut st = conn.prepare(
        "SELECT e.seq, e.session, e.user, e.target, e.fields,
                (SELECT json_object('fields', x.fields) FROM events x
                  WHERE x.kind = 'session_end' AND x.session = e.session ORDER BY x.seq DESC LIMIT 1),
                s.user, s.target, s.client_addr, s.recording, s.id,
                EXISTS (SELECT 1 FROM events p
                        WHERE p.session = e.session AND p.kind = 'recording_pruned' AND p.seq <= ?1
                          AND p.seq > (SELECT MAX(x.seq) FROM events x
                                       WHERE x.session = e.session AND x.kind = 'session_end')
                          AND json_extract(p.fields, '$.before') >
                              (SELECT x.ts FROM events x WHERE x.session = e.session
                                 AND x.kind = 'session_end' ORDER BY x.seq DESC LIMIT 1))
         FROM events e LEFT JOIN sessions s ON s.id = e.session
         WHERE e.kind = 'session_start' ORDER BY e.seq",
    )?;
    let mut rows = st.query([signed])?;
    while let Some(r) = rows.next()? {
        let (seq, session): (i64, String) = (r.get(0)?, r.get(1)?);
        let (user, target, fields): (Option<String>, Option<String>, String) =
            (r.get(2)?, r.get(3)?, r.get(4)?);
        let end: Option<String> = r.get(5)?;
        // user, target, client_addr, recording, id
        let row: [Option<String>; 5] = [r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?];
        let row = (
            row[0].clone(),
            row[1].clone(),
            row[2].clone(),
            row[3].clone(),
            row[4].clone(),
        );
        let start: Value = serde_json::from_str(&fields).unwrap_or(Value::Null);
        let recording = start["recording"].as_str().map(str::to_string);
        let said = (
            user,
            target,
            start["client_addr"].as_str().map(str::to_string),
            recording.clone(),
        );
        if row.4.is_none() {
            let what = format!("session {session}'s row in the sessions table is gone");
            return Err(Stop::Broken(Some(seq), what));
        }
        // A session_start from before recordings were named in it names
        // none: its recording is not compared.
        let named = start.get("recording").is_some();
        let row = (row.0, row.1, row.2, if named { row.3 } else { None });
        if row != said {
            let what = format!(
                "session {session}'s row in the sessions table is not what its session_start says"
            );
            return Err(Stop::Broken(Some(seq), what));
        }
        // Retention deleted it, and said so in the chain after its end,
        // under a checkpoint (an unsigned tail could be anyone's), with a
        // cutoff its chained end is older than.
        let pruned: bool = r.get(11)?;
        let (Some(path), Some(end), false) = (recording, end, pruned) else {
            continue;
        };
        let end: Value = serde_json::from_str(&end).unwrap_or(Value::Null);
        let end: Value = end["fields"]
            .as_str()
            .and_then(|f| serde_json::from_str(f).ok())
            .unwrap_or(Value::Null);
        let (Some(sha), Some(len)) = (
            end["recording_sha256"].as_str(),
            end["recording_bytes"].as_u64(),
        ) else {
            // Reaped from a node that could not reach the dead node's
            // files: the chained end says so, and no digest is to be had.
            // Only from the node that carried it, only as its one end (a
            // second end is broken, below).
            if end["reason"] == "node_reaped"
                && end["recording_unreached"] == true
                && start.get("node").is_some()
                && end["reaped_node"] == start["node"]
            {
                continue;
            }
            let what = format!("session {session} ended without its recording's digest");
            return Err(Stop::Broken(Some(seq), what));
        };
        let (path, fetched) = match here(&path, places, len) {
            Ok(found) => found,
            Err(crate::audit::upload::Fetch::Missing(e)) => {
                let what = format!("the recording of session {session} is not in the bucket: {e}");
                return Err(Stop::Broken(Some(seq), what));
            }
            Err(crate::audit::upload::Fetch::Failed(e)) => return Err(Stop::Unreadable(e)),
        };
        let what = match chain::file_digest(Path::new(&path)) {
            Err(e) => Some(format!(
                "the recording of session {session} ({path}) cannot be read: {e}"
            )),
            Ok((_, n)) if n != len => Some(format!(
                "the recording of session {session} ({path}) is {n} bytes, {len} when it closed (cut or grown)"
            )),
            Ok((h, _)) if h != sha => Some(format!(
                "the recording of session {session} ({path}) was changed after it closed"
            )),
            Ok(_) => None,
        };
        // One fetched copy at a time on the scratch disk.
        if fetched {
            let _ = std::fs::remove_file(&path);
        }
        if let Some(what) = what {
            return Err(Stop::Broken(Some(seq), what));
        }
        count += 1;
    }
    Ok(count)
}

/// Where the recording the chain names as `path` is read: the file of
/// that name in `dir` (the recordings of the config in use) when there is
/// one, else `path` itself, else the object of that name in the bucket,
/// fetched, at most `len` bytes of it (then the second is true: the copy
/// is the caller's to delete).
fn here(
    path: &str,
    (dir, bucket): Places<'_>,
    len: u64,
) -> Result<(String, bool), crate::audit::upload::Fetch> {
    let name = Path::new(path).file_name();
    let local = dir.zip(name).map(|(d, n)| d.join(n));
    match (local, bucket, name.and_then(|n| n.to_str())) {
        (Some(l), _, _) if l.is_file() => Ok((l.display().to_string(), false)),
        _ if Path::new(path).is_file() => Ok((path.to_string(), false)),
        (_, Some((bucket, into)), Some(name)) => {
            let to = into.join(name);
            bucket.fetch_blocking(name, &to, Some(len))?;
            Ok((to.display().to_string(), true))
        }
        _ => Ok((path.to_string(), false)),
    }
}
