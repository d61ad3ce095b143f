//! The audit database: schema, the single writer thread, and the read-only
//! queries behind `walissh sessions` and `walissh audit`.
//!
//! SQLite in WAL mode, so the CLI can read while the bastion writes. The
//! writer drains whatever is queued into one transaction, which keeps a
//! burst of events to one fsync.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, params};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::{Event, Health, Record, rfc3339};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id          TEXT PRIMARY KEY,
    user        TEXT NOT NULL,
    target      TEXT NOT NULL,
    client_addr TEXT NOT NULL,
    started     TEXT NOT NULL,
    ended       TEXT,
    recording   TEXT
);
CREATE TABLE IF NOT EXISTS events (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    ts      TEXT NOT NULL,
    session TEXT,
    user    TEXT,
    target  TEXT,
    kind    TEXT NOT NULL,
    fields  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_session ON events(session);
CREATE TABLE IF NOT EXISTS conversations (
    user     TEXT NOT NULL,
    target   TEXT NOT NULL,
    updated  TEXT NOT NULL,
    messages TEXT NOT NULL,
    PRIMARY KEY (user, target)
);
";

/// Opens the database for writing, creating it and its schema if needed.
pub(crate) fn open_writer(path: &Path) -> Result<Connection, String> {
    if let Some(dir) = path.parent() {
        crate::keys::create_private_dir(dir)?;
    }
    let err = |e: rusqlite::Error| format!("{}: {e}", path.display());
    let conn = Connection::open(path).map_err(err)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(err)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(err)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(err)?;
    conn.execute_batch(SCHEMA).map_err(err)?;
    Ok(conn)
}

/// Ends the sessions a crash left open: each gets its `ended` time and a
/// `session_end` event with `reason = "bastion_restart"`, in one
/// transaction, before any new session starts. Returns each one's
/// recording, if it had one, for `recording::repair`.
pub(crate) fn recover(conn: &mut Connection) -> rusqlite::Result<Vec<Option<String>>> {
    let tx = conn.transaction()?;
    let open: Vec<(String, String, String, Option<String>)> = tx
        .prepare("SELECT id, user, target, recording FROM sessions WHERE ended IS NULL")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let now = rfc3339(std::time::SystemTime::now());
    for (id, user, target, _) in &open {
        let mut fields = Map::new();
        fields.insert("reason".into(), "bastion_restart".into());
        tx.execute(
            "INSERT INTO events (ts, session, user, target, kind, fields) VALUES (?1, ?2, ?3, ?4, 'session_end', ?5)",
            params![now, id, user, target, Value::Object(fields).to_string()],
        )?;
        tx.execute(
            "UPDATE sessions SET ended = ?2 WHERE id = ?1",
            params![id, now],
        )?;
    }
    tx.commit()?;
    Ok(open.into_iter().map(|(.., recording)| recording).collect())
}

/// Runs until every sender is gone, writing records in batches.
pub(crate) fn writer_loop(mut conn: Connection, mut rx: mpsc::Receiver<Record>, health: &Health) {
    let mut records = Vec::new();
    let mut flushes = Vec::new();
    let mut committed = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        let mut next = Some(first);
        while let Some(record) = next {
            match record {
                Record::Flush(reply) => flushes.push(reply),
                Record::Committed { event, written } => {
                    committed.push(written);
                    records.push(Record::Event(event));
                }
                other => records.push(other),
            }
            next = if records.len() < 512 {
                rx.try_recv().ok()
            } else {
                None
            };
        }
        let result = write_batch(&mut conn, &records);
        for written in committed.drain(..) {
            let _ = written.send(result.is_ok());
        }
        match result {
            Ok(()) => health.set_db(true),
            Err(e) => {
                health.set_db(false);
                tracing::error!(error = %e, "audit database write failed; the batch's events follow in the log");
                for record in &records {
                    match record {
                        Record::Event(ev) => {
                            tracing::error!(event = %event_json(ev), "unwritten audit event")
                        }
                        Record::SessionStart(row) => {
                            tracing::error!(session = %row.id, user = %row.user, target = %row.target,
                                client_addr = %row.client_addr, "unwritten session start")
                        }
                        Record::SessionEnd { id, .. } => {
                            tracing::error!(session = %id, "unwritten session end")
                        }
                        // Not audit: a lost conversation is only not restored.
                        Record::Conversation { .. } => {}
                        Record::Committed { .. } | Record::Flush(_) => {}
                    }
                }
            }
        }
        records.clear();
        for reply in flushes.drain(..) {
            let _ = reply.send(());
        }
    }
}

fn write_batch(conn: &mut Connection, records: &[Record]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    for record in records {
        match record {
            Record::Event(ev) => {
                tx.prepare_cached(
                    "INSERT INTO events (ts, session, user, target, kind, fields) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?
                .execute(params![
                    rfc3339(ev.ts),
                    ev.session,
                    ev.user,
                    ev.target,
                    ev.kind,
                    Value::Object(ev.fields.clone()).to_string()
                ])?;
            }
            Record::SessionStart(row) => {
                tx.prepare_cached(
                    "INSERT INTO sessions (id, user, target, client_addr, started, recording) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?
                .execute(params![
                    row.id,
                    row.user,
                    row.target,
                    row.client_addr,
                    rfc3339(row.started),
                    row.recording
                ])?;
            }
            Record::SessionEnd { id, ended } => {
                tx.prepare_cached("UPDATE sessions SET ended = ?2 WHERE id = ?1")?
                    .execute(params![id, rfc3339(*ended)])?;
            }
            Record::Conversation {
                user,
                target,
                messages,
            } => {
                // Not audit: a conversation that cannot be stored is only
                // not restored, and must not fail the batch's events.
                let stored = tx
                    .prepare_cached(
                        "INSERT OR REPLACE INTO conversations (user, target, updated, messages) VALUES (?1, ?2, ?3, ?4)",
                    )
                    .and_then(|mut st| {
                        st.execute(params![user, target, rfc3339(std::time::SystemTime::now()), messages])
                    });
                if let Err(e) = stored {
                    tracing::warn!(%user, %target, error = %e, "conversation not stored");
                }
            }
            Record::Committed { .. } | Record::Flush(_) => {}
        }
    }
    tx.commit()
}

/// An event as one JSON object: the common fields, then the kind's own,
/// as `walissh audit --json` prints it.
fn event_json(ev: &Event) -> Value {
    let common = [
        ("ts", Some(rfc3339(ev.ts))),
        ("session", ev.session.clone()),
        ("user", ev.user.clone()),
        ("target", ev.target.clone()),
        ("kind", Some(ev.kind.to_string())),
    ];
    let mut obj: Map<String, Value> = common
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    obj.extend(ev.fields.clone());
    Value::Object(obj)
}

fn open_reader(path: &Path) -> Result<Connection, String> {
    if !path.exists() {
        return Err(format!(
            "{}: no audit database (has walissh served yet?)",
            path.display()
        ));
    }
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The conversation kept for `user` on `target`. Blocking.
pub(crate) fn conversation(path: &Path, user: &str, target: &str) -> Option<String> {
    let conn = open_reader(path).ok()?;
    conn.query_row(
        "SELECT messages FROM conversations WHERE user = ?1 AND target = ?2",
        params![user, target],
        |row| row.get(0),
    )
    .ok()
}

/// Every session, oldest first, one JSON object per line.
pub(crate) fn sessions_json(path: &Path, out: &mut dyn std::io::Write) -> Result<(), String> {
    let sql = "SELECT id, user, target, client_addr, started, ended, recording
               FROM sessions ORDER BY started, id";
    let names = [
        "id",
        "user",
        "target",
        "client_addr",
        "started",
        "ended",
        "recording",
    ];
    print_rows(path, sql, &[], &names, out)
}

/// Audit events, oldest first, optionally of one session only. The last
/// column holds the kind's own fields, merged into each object.
pub(crate) fn audit_json(
    path: &Path,
    session: Option<&str>,
    out: &mut dyn std::io::Write,
) -> Result<(), String> {
    let sql = "SELECT ts, session, user, target, kind, fields FROM events
               WHERE ?1 IS NULL OR session = ?1 ORDER BY seq";
    let names = ["ts", "session", "user", "target", "kind", "fields"];
    print_rows(path, sql, &[&session], &names, out)
}

/// Prints each row of a read-only query as one JSON object line, the
/// columns (text or NULL) under `names`; a column named `fields` holds a
/// JSON object whose members are merged in instead.
fn print_rows(
    path: &Path,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
    names: &[&str],
    out: &mut dyn std::io::Write,
) -> Result<(), String> {
    let conn = open_reader(path)?;
    let err = |e: rusqlite::Error| format!("{}: {e}", path.display());
    let mut stmt = conn.prepare(sql).map_err(err)?;
    let rows = stmt
        .query_map(params, |r| {
            let mut o = Map::new();
            for (i, name) in names.iter().enumerate() {
                let value: Option<String> = r.get(i)?;
                match (*name, value) {
                    ("fields", Some(text)) => {
                        if let Ok(Value::Object(f)) = serde_json::from_str(&text) {
                            o.extend(f);
                        }
                    }
                    (name, value) => {
                        o.insert(name.to_string(), value.into());
                    }
                }
            }
            Ok(Value::Object(o))
        })
        .map_err(err)?;
    for row in rows {
        writeln!(out, "{}", row.map_err(err)?).map_err(|e| e.to_string())?;
    }
    Ok(())
}
