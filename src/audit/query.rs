//! Reading the audit for people: `walissh audit` with its filters
//! (`--user`, `--target`, `--kind`, `--session`, `--since`, `--until`),
//! `--follow`, and `walissh audit search` over commands and questions
//! (SQLite FTS5, the `events_text` index the writer keeps).
//!
//! What it owns: the queries (read-only connections, so the bastion writes
//! on), the time bounds' syntax, and following new rows. What it leaves to
//! others: how a row is printed (the caller's `emit`), writing (`db`).

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::Kind;
use rusqlite::{Connection, OptionalExtension, ToSql};
use serde_json::{Map, Value};

/// How often `--follow` looks for new rows.
const POLL: Duration = Duration::from_millis(250);

/// Which events to show.
#[derive(Debug, Default, Clone)]
pub(crate) struct Filter {
    pub(crate) user: Option<String>,
    pub(crate) target: Option<String>,
    pub(crate) kinds: Vec<String>,
    pub(crate) session: Option<String>,
    /// RFC 3339, as stored (see [`time_bound`]).
    pub(crate) since: Option<String>,
    pub(crate) until: Option<String>,
}

/// `--since`/`--until`: an RFC 3339 time, or a duration ago (`1h`,
/// `30min`, `2days`), as the stored timestamps are written.
pub(crate) fn time_bound(text: &str) -> Result<String, String> {
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        return Ok(super::rfc3339(t));
    }
    let ago = humantime::parse_duration(text).map_err(|_| {
        format!("`{text}`: write an RFC 3339 time (2026-12-01T09:00:00Z) or a duration ago (1h)")
    })?;
    let t = SystemTime::now()
        .checked_sub(ago)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    Ok(super::rfc3339(t))
}

/// The events `filter` picks after `after`, oldest first, each given to
/// `emit`; returns the last seq seen (or `after`).
pub(crate) fn events(
    path: &Path,
    filter: &Filter,
    after: i64,
    emit: &mut dyn FnMut(Value) -> std::io::Result<()>,
) -> Result<i64, String> {
    let conn = super::db::open_reader(path)?;
    let err = |e: rusqlite::Error| format!("{}: {e}", path.display());
    let mut sql = String::from(
        "SELECT seq, ts, session, user, target, kind, fields FROM events WHERE seq > ?1",
    );
    let mut params: Vec<Box<dyn ToSql>> = vec![Box::new(after)];
    let mut and = |clause: &str, value: Box<dyn ToSql>, params: &mut Vec<Box<dyn ToSql>>| {
        params.push(value);
        sql.push_str(&format!(" AND {clause} ?{}", params.len()));
    };
    for (column, value) in [
        ("user =", &filter.user),
        ("target =", &filter.target),
        ("session =", &filter.session),
        ("ts >=", &filter.since),
        ("ts <=", &filter.until),
    ] {
        if let Some(v) = value {
            and(column, Box::new(v.clone()), &mut params);
        }
    }
    if !filter.kinds.is_empty() {
        let list = serde_json::to_string(&filter.kinds).unwrap_or_default();
        params.push(Box::new(list));
        sql.push_str(&format!(
            " AND kind IN (SELECT value FROM json_each(?{}))",
            params.len()
        ));
    }
    sql.push_str(" ORDER BY seq");
    print(&conn, &sql, &params, after, emit).map_err(|e| match e {
        Printed::Db(e) => err(e),
        Printed::Out(e) => format!("cannot write output: {e}"),
    })
}

/// Like [`events`], then the new ones as they are written, until the
/// output is closed (a pager quit) or the process is stopped.
/// `refresh` brings the file up to the store before each look (a
/// PostgreSQL audit's copy, `readable`).
pub(crate) fn follow(
    path: &Path,
    filter: &Filter,
    emit: &mut dyn FnMut(Value) -> std::io::Result<()>,
    refresh: &mut dyn FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let mut last = 0;
    loop {
        last = events(path, filter, last, emit)?;
        std::thread::sleep(POLL);
        refresh()?;
    }
}

/// The commands and questions holding `text` (a phrase; FTS5 matches
/// whole words, case-insensitively), oldest first.
pub(crate) fn search(
    path: &Path,
    text: &str,
    emit: &mut dyn FnMut(Value) -> std::io::Result<()>,
) -> Result<(), String> {
    let conn = super::db::open_reader(path)?;
    let phrase = format!("\"{}\"", text.replace('"', "\"\""));
    let sql = "SELECT e.seq, e.ts, e.session, e.user, e.target, e.kind, e.fields
               FROM events_text t JOIN events e ON e.seq = t.rowid
               WHERE events_text MATCH ?1 ORDER BY e.seq";
    let params: Vec<Box<dyn ToSql>> = vec![Box::new(phrase)];
    match print(&conn, sql, &params, 0, emit) {
        Ok(_) => Ok(()),
        Err(Printed::Db(e)) => Err(format!("{}: {e}", path.display())),
        Err(Printed::Out(e)) => Err(format!("cannot write output: {e}")),
    }
}

enum Printed {
    Db(rusqlite::Error),
    Out(std::io::Error),
}

/// Runs `sql` (its first column the seq, then ts, session, user, target,
/// kind, fields) and gives each row to `emit` as `walissh audit --json`
/// prints it; returns the last seq.
fn print(
    conn: &Connection,
    sql: &str,
    params: &[Box<dyn ToSql>],
    mut last: i64,
    emit: &mut dyn FnMut(Value) -> std::io::Result<()>,
) -> Result<i64, Printed> {
    let mut st = conn.prepare(sql).map_err(Printed::Db)?;
    let refs: Vec<&dyn ToSql> = params.iter().map(|p| p.as_ref()).collect();
    let mut rows = st.query(refs.as_slice()).map_err(Printed::Db)?;
    while let Some(r) = rows.next().map_err(Printed::Db)? {
        let seq: i64 = r.get(0).map_err(Printed::Db)?;
        let mut o = Map::new();
        for (i, name) in ["ts", "session", "user", "target", "kind"]
            .iter()
            .enumerate()
        {
            let v: Option<String> = r.get(i + 1).map_err(Printed::Db)?;
            o.insert((*name).to_string(), v.into());
        }
        let fields: String = r.get(6).map_err(Printed::Db)?;
        if let Ok(Value::Object(f)) = serde_json::from_str(&fields) {
            o.extend(f);
        }
        emit(Value::Object(o)).map_err(Printed::Out)?;
        last = seq;
    }
    Ok(last)
}

/// The recording of session `id`, as its chained `session_start` names
/// it (the sessions table, for sessions from before that).
pub(crate) fn recording(path: &Path, id: &str) -> Result<Option<String>, String> {
    let conn = super::db::open_reader(path)?;
    let err = |e: rusqlite::Error| format!("{}: {e}", path.display());
    let chained: Option<String> = conn
        .query_row(
            "SELECT json_extract(fields, '$.recording') FROM events
             WHERE kind = 'session_start' AND session = ?1 AND json_type(fields, '$.recording') IS NOT NULL",
            [id],
            |r| r.get(0),
        )
        .optional()
        .map_err(err)?
        .flatten();
    if chained.is_some() {
        return Ok(chained);
    }
    match conn.query_row("SELECT recording FROM sessions WHERE id = ?1", [id], |r| {
        r.get::<_, Option<String>>(0)
    }) {
        Ok(r) => Ok(r),
        Err(rusqlite::Error::QueryReturnedNoRows) => Err(format!("no session {id}")),
        Err(e) => Err(err(e)),
    }
}

/// The digest and length of session `id`'s recording as its chained
/// `session_end` holds them, if it has ended with one.
pub(crate) fn recording_digest(path: &Path, id: &str) -> Result<Option<(String, u64)>, String> {
    let conn = super::db::open_reader(path)?;
    conn.query_row(
        "SELECT json_extract(fields, '$.recording_sha256'), json_extract(fields, '$.recording_bytes')
         FROM events WHERE kind = 'session_end' AND session = ?1 ORDER BY seq LIMIT 1",
        [id],
        |r| Ok(r.get::<_, Option<String>>(0)?.zip(r.get::<_, Option<i64>>(1)?)),
    )
    .optional()
    .map(|d| d.flatten().map(|(sha, len)| (sha, len.max(0) as u64)))
    .map_err(|e| format!("{}: {e}", path.display()))
}

/// What of an event `audit search` finds it by: a command's line, a
/// question's text, an agent's call. None for other kinds.
pub(crate) fn searchable(kind: Kind, fields: &Map<String, Value>) -> Option<String> {
    let text = |k: &str| fields.get(k).and_then(Value::as_str);
    match kind {
        Kind::Command | Kind::Exec => text("command").map(str::to_string),
        Kind::AiPrompt => text("text").map(str::to_string),
        Kind::AiToolCall => match text("command") {
            Some(c) => Some(c.to_string()),
            None => Some(format!(
                "{} {} {}",
                text("server").unwrap_or(""),
                text("tool").unwrap_or(""),
                text("arguments").unwrap_or("")
            )),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_bounds_are_rfc3339_or_a_duration_ago() {
        assert_eq!(
            time_bound("2026-12-01T09:00:00Z").unwrap(),
            "2026-12-01T09:00:00.000Z"
        );
        let hour_ago = time_bound("1h").unwrap();
        assert!(
            hour_ago < super::super::rfc3339(SystemTime::now()),
            "{hour_ago}"
        );
        assert!(
            time_bound("yesterday-ish")
                .unwrap_err()
                .contains("RFC 3339")
        );
    }

    #[test]
    fn commands_questions_and_calls_are_searchable() {
        let f = |v: Value| v.as_object().unwrap().clone();
        let cmd = f(serde_json::json!({"command": "systemctl restart nginx"}));
        assert_eq!(
            searchable(Kind::Command, &cmd).as_deref(),
            Some("systemctl restart nginx")
        );
        assert_eq!(searchable(Kind::AuthOk, &cmd), None);
        let q = f(serde_json::json!({"text": "? why 502"}));
        assert_eq!(searchable(Kind::AiPrompt, &q).as_deref(), Some("? why 502"));
        let mcp = f(serde_json::json!({"server": "files", "tool": "read_file", "arguments": "{}"}));
        assert_eq!(
            searchable(Kind::AiToolCall, &mcp).as_deref(),
            Some("files read_file {}")
        );
    }
}
