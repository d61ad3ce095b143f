//! `walissh audit verify`: checks a whole audit database and its
//! recordings against the hash chain and the signed checkpoints.
//!
//! What it owns: reading every row in `seq` order and linking it again,
//! checking each checkpoint's signature and that its head is the chain's
//! at its `seq`, and hashing each finished recording against its
//! `session_end` row. It stops at the first broken place and says where
//! and what. What it leaves to others: how rows are hashed and signed
//! (`chain`), writing them (`db`).

use std::collections::HashMap;
use std::path::Path;

use rusqlite::Connection;
use russh::keys::PublicKey;
use serde_json::{Value, json};

use super::chain;

/// What `audit verify` found.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Chained events checked.
    pub(crate) events: u64,
    pub(crate) recordings: u64,
    /// The last checkpoint: its seq and time.
    pub(crate) last_checkpoint: Option<(i64, String)>,
    /// The first broken place: the seq (when it is a row's) and what.
    pub(crate) broken: Option<(Option<i64>, String)>,
}

impl Report {
    fn broken(mut self, seq: Option<i64>, what: String) -> Report {
        self.broken = Some((seq, what));
        self
    }

    /// One line for people.
    pub(crate) fn line(&self) -> String {
        match &self.broken {
            Some((Some(seq), what)) => format!("broken at seq {seq}: {what}"),
            Some((None, what)) => format!("broken: {what}"),
            None => {
                let checkpoint = match &self.last_checkpoint {
                    Some((seq, ts)) => format!("last checkpoint at {ts} (seq {seq})"),
                    None => "no checkpoint yet".to_string(),
                };
                format!(
                    "ok: {} events, {} recordings, {checkpoint}",
                    self.events, self.recordings
                )
            }
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "ok": self.broken.is_none(),
            "events": self.events,
            "recordings": self.recordings,
            "last_checkpoint": self.last_checkpoint.as_ref().map(|(seq, ts)| json!({"seq": seq, "ts": ts})),
            "broken": self.broken.as_ref().map(|(seq, what)| json!({"seq": seq, "what": what})),
        })
    }
}

/// Checks the database at `path` against `key` (the audit key's public
/// half). Err only when the database cannot be read at all.
pub(crate) fn verify(path: &Path, key: &PublicKey) -> Result<Report, String> {
    let conn = super::db::open_reader(path)?;
    let err = |e: rusqlite::Error| format!("{}: {e}", path.display());
    let checkpoints = checkpoints(&conn).map_err(err)?;
    let mut report = Report {
        last_checkpoint: checkpoints
            .iter()
            .max_by_key(|(seq, _)| **seq)
            .map(|(seq, c)| (*seq, c.ts.clone())),
        ..Report::default()
    };
    let (report_after_chain, last_seq) = match chain_of(&conn, &checkpoints, key, report) {
        Ok(r) => r,
        Err(e) => return Err(err(e)),
    };
    report = report_after_chain;
    if report.broken.is_some() {
        return Ok(report);
    }
    // A checkpoint past the last row: rows it signed are gone.
    if let Some((&seq, _)) = checkpoints
        .iter()
        .filter(|(s, _)| **s > last_seq)
        .max_by_key(|(s, _)| **s)
    {
        let what = format!(
            "the rows after seq {last_seq} are gone: the checkpoint at seq {seq} signed them (truncated)"
        );
        return Ok(report.broken(Some(last_seq + 1), what));
    }
    recordings(&conn, report).map_err(err)
}

struct Checkpoint {
    ts: String,
    head: String,
    signature: String,
}

fn checkpoints(conn: &Connection) -> rusqlite::Result<HashMap<i64, Checkpoint>> {
    let mut st = conn.prepare("SELECT seq, ts, head, signature FROM checkpoints")?;
    let rows = st.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            Checkpoint {
                ts: r.get(1)?,
                head: r.get(2)?,
                signature: r.get(3)?,
            },
        ))
    })?;
    rows.collect()
}

/// Links every row again, in seq order, checking the checkpoints on the
/// way. Returns the report and the last seq read.
fn chain_of(
    conn: &Connection,
    checkpoints: &HashMap<i64, Checkpoint>,
    key: &PublicKey,
    mut report: Report,
) -> rusqlite::Result<(Report, i64)> {
    let mut st = conn.prepare(
        "SELECT seq, ts, session, user, target, kind, fields, hash FROM events ORDER BY seq",
    )?;
    let mut rows = st.query([])?;
    let mut prev = chain::genesis();
    let mut last: Option<i64> = None;
    while let Some(r) = rows.next()? {
        let seq: i64 = r.get(0)?;
        let (ts, session, user, target): (String, Option<String>, Option<String>, Option<String>) =
            (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
        let (kind, fields, hash): (String, String, Option<String>) =
            (r.get(5)?, r.get(6)?, r.get(7)?);
        // Every row has a hash (older databases were chained when the
        // column came), and seqs follow each other from 1.
        let Some(hash) = hash else {
            let what = "the row has no hash (written around the chain)".to_string();
            return Ok((report.broken(Some(seq), what), seq));
        };
        let expected_seq = last.map_or(1, |l| l + 1);
        if seq != expected_seq {
            let what = match last {
                Some(l) if seq > l + 1 => {
                    format!("seq {} to {} are missing (deleted)", l + 1, seq - 1)
                }
                _ => format!(
                    "the first row is seq {seq}, not 1 (rows deleted, or one put before them)"
                ),
            };
            return Ok((report.broken(Some(expected_seq.min(seq)), what), seq));
        }
        let row = chain::Row {
            seq,
            ts: &ts,
            session: session.as_deref(),
            user: user.as_deref(),
            target: target.as_deref(),
            kind: &kind,
            fields: &fields,
        };
        let expected = chain::link(&prev, &row);
        if expected != hash {
            let what =
                "the row does not match its hash (edited, inserted, or a row before it deleted)";
            return Ok((report.broken(Some(seq), what.to_string()), seq));
        }
        if let Some(c) = checkpoints.get(&seq) {
            let message = chain::checkpoint_message(seq, &c.head, &c.ts);
            if !chain::signed_by(key, &message, &c.signature) {
                let what = format!("the checkpoint at seq {seq} is not signed by the audit key");
                return Ok((report.broken(Some(seq), what), seq));
            }
            if c.head != hash {
                let what = format!("the checkpoint at seq {seq} signed another chain");
                return Ok((report.broken(Some(seq), what), seq));
            }
        }
        report.events += 1;
        prev = hash;
        last = Some(seq);
    }
    Ok((report, last.unwrap_or(0)))
}

/// Each session's row in `sessions` is what its chained `session_start`
/// says (that table is not chained itself); each recording its
/// `session_start` names is hashed again against its `session_end`'s
/// digest. A session without its end yet (still running) is left.
fn recordings(conn: &Connection, mut report: Report) -> rusqlite::Result<Report> {
    let mut st = conn.prepare(
        "SELECT e.seq, e.session, e.user, e.target, e.fields,
                (SELECT json_object('fields', x.fields) FROM events x
                  WHERE x.kind = 'session_end' AND x.session = e.session ORDER BY x.seq DESC LIMIT 1),
                s.user, s.target, s.client_addr, s.recording, s.id
         FROM events e LEFT JOIN sessions s ON s.id = e.session
         WHERE e.kind = 'session_start' ORDER BY e.seq",
    )?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let (seq, session): (i64, String) = (r.get(0)?, r.get(1)?);
        let (user, target, fields): (Option<String>, Option<String>, String) =
            (r.get(2)?, r.get(3)?, r.get(4)?);
        let end: Option<String> = r.get(5)?;
        let row: (
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        ) = (r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?);
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
            return Ok(report.broken(Some(seq), what));
        }
        // A session_start from before recordings were named in it names
        // none: its recording is not compared.
        let named = start.get("recording").is_some();
        let row = (row.0, row.1, row.2, if named { row.3 } else { None });
        if row != said {
            let what = format!(
                "session {session}'s row in the sessions table is not what its session_start says"
            );
            return Ok(report.broken(Some(seq), what));
        }
        let (Some(path), Some(end)) = (recording, end) else {
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
            let what = format!("session {session} ended without its recording's digest");
            return Ok(report.broken(Some(seq), what));
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
        if let Some(what) = what {
            return Ok(report.broken(Some(seq), what));
        }
        report.recordings += 1;
    }
    Ok(report)
}
