//! The audit database: schema, the single writer thread, and the read-only
//! queries behind `walissh sessions` and `walissh audit`.
//!
//! SQLite in WAL mode, so the CLI can read while the bastion writes. The
//! writer drains whatever is queued into one transaction, which keeps a
//! burst of events to one fsync.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::forward::{Forward, Item};
use super::{Event, Health, Record, chain, rfc3339};

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
    fields  TEXT NOT NULL,
    hash    TEXT
);
CREATE TABLE IF NOT EXISTS checkpoints (
    seq       INTEGER PRIMARY KEY,
    ts        TEXT NOT NULL,
    head      TEXT NOT NULL,
    signature TEXT NOT NULL
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
    // A database from before the chain gets its column, and its rows are
    // chained as they stand (`chain_old_rows`).
    let has_hash: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('events') WHERE name = 'hash'")
        .and_then(|mut st| st.exists([]))
        .map_err(err)?;
    if !has_hash {
        conn.execute_batch("ALTER TABLE events ADD COLUMN hash TEXT")
            .map_err(err)?;
        chain_old_rows(&conn).map_err(err)?;
    }
    index_text(&conn).map_err(err)?;
    Ok(conn)
}

/// A database from before the chain: its rows are chained as they stand,
/// once, so that from here on every row has a hash and a row without one
/// is a row put there around walissh.
fn chain_old_rows(conn: &Connection) -> rusqlite::Result<()> {
    let rows: Vec<(
        i64,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        String,
        String,
    )> = conn
        .prepare("SELECT seq, ts, session, user, target, kind, fields FROM events ORDER BY seq")?
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut prev = chain::genesis();
    for (seq, ts, session, user, target, kind, fields) in &rows {
        let row = chain::Row {
            seq: *seq,
            ts,
            session: session.as_deref(),
            user: user.as_deref(),
            target: target.as_deref(),
            kind,
            fields,
        };
        prev = chain::link(&prev, &row);
        conn.execute(
            "UPDATE events SET hash = ?2 WHERE seq = ?1",
            params![seq, prev],
        )?;
    }
    if !rows.is_empty() {
        tracing::info!(events = rows.len(), "the audit's older events are chained");
    }
    Ok(())
}

/// The full-text index of commands and questions (`audit search`): made,
/// and filled from the rows already there, the first time.
fn index_text(conn: &Connection) -> rusqlite::Result<()> {
    let exists = conn
        .prepare("SELECT 1 FROM sqlite_master WHERE name = 'events_text'")?
        .exists([])?;
    if exists {
        return Ok(());
    }
    conn.execute_batch("CREATE VIRTUAL TABLE events_text USING fts5(text, content='')")?;
    let mut st = conn.prepare("SELECT seq, kind, fields FROM events")?;
    let rows: Vec<(i64, String, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (seq, kind, fields) in rows {
        if let Ok(Value::Object(f)) = serde_json::from_str::<Value>(&fields)
            && let Some(text) = super::query::searchable(&kind, &f)
        {
            conn.execute(
                "INSERT INTO events_text (rowid, text) VALUES (?1, ?2)",
                params![seq, text],
            )?;
        }
    }
    Ok(())
}

/// The chain's head: the last row's seq and hash (zeros before the
/// first chained row).
pub(crate) fn head(conn: &Connection, policy: chain::Checkpoints) -> rusqlite::Result<chain::Head> {
    let last: Option<(i64, Option<String>)> = conn
        .query_row(
            "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    // A last row without a hash was put there around walissh: the chain
    // goes on from the zero hash, and verify says where it broke.
    let (seq, hash) = match last {
        Some((seq, Some(hash))) => (seq, hash),
        Some((seq, None)) => (seq, chain::genesis()),
        None => (0, chain::genesis()),
    };
    Ok(chain::Head::new(seq, hash, policy))
}

/// Inserts one event as the chain's next row; returns its seq and hash
/// (the head moves only once the transaction commits).
fn insert_event(
    tx: &rusqlite::Transaction<'_>,
    (seq, prev): (i64, &str),
    ev: &Event,
) -> rusqlite::Result<(i64, String)> {
    let (ts, fields) = (rfc3339(ev.ts), Value::Object(ev.fields.clone()).to_string());
    let seq = seq + 1;
    let row = chain::Row {
        seq,
        ts: &ts,
        session: ev.session.as_deref(),
        user: ev.user.as_deref(),
        target: ev.target.as_deref(),
        kind: ev.kind,
        fields: &fields,
    };
    let hash = chain::link(prev, &row);
    tx.prepare_cached(
        "INSERT INTO events (seq, ts, session, user, target, kind, fields, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![seq, ts, ev.session, ev.user, ev.target, ev.kind, fields, hash])?;
    if let Some(text) = super::query::searchable(ev.kind, &ev.fields) {
        tx.prepare_cached("INSERT INTO events_text (rowid, text) VALUES (?1, ?2)")?
            .execute(params![seq, text])?;
    }
    Ok((seq, hash))
}

/// Writes the checkpoint that is due (or, with `force`, any that waits).
pub(crate) fn checkpoint(
    conn: &Connection,
    head: &mut chain::Head,
    force: bool,
    forward: Option<&Forward>,
) {
    let ts = rfc3339(std::time::SystemTime::now());
    match head.checkpoint(&ts, force) {
        None => {}
        Some(Err(e)) => tracing::error!(error = %e, "audit checkpoint not written"),
        Some(Ok((seq, hash, signature))) => {
            let written = conn.execute(
                "INSERT OR REPLACE INTO checkpoints (seq, ts, head, signature) VALUES (?1, ?2, ?3, ?4)",
                params![seq, ts, hash, signature],
            );
            match written {
                Ok(_) => {
                    head.checkpointed();
                    if let Some(f) = forward {
                        f.offer(&Item::Checkpoint {
                            seq,
                            head: hash,
                            ts,
                            signature,
                        });
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "audit checkpoint not written; tried again later")
                }
            }
        }
    }
}

/// Ends the sessions a crash left open: each gets its `ended` time and a
/// `session_end` event with `reason = "bastion_restart"`, in one
/// transaction, before any new session starts. Returns each one's
/// recording, if it had one, for `recording::repair`.
pub(crate) fn recover(
    conn: &mut Connection,
    head: &mut chain::Head,
    finish: &mut dyn FnMut(&str) -> Option<(String, u64)>,
) -> rusqlite::Result<usize> {
    let tx = conn.transaction()?;
    let open: Vec<(String, String, String, Option<String>)> = tx
        .prepare("SELECT id, user, target, recording FROM sessions WHERE ended IS NULL")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let now = std::time::SystemTime::now();
    let (mut seq, mut hash) = (head.seq, head.hash.clone());
    for (id, user, target, recording) in &open {
        let mut ev = Event::new("session_end").field("reason", "bastion_restart");
        // The recording repaired first, then its digest chained with the end.
        if let Some((sha256, bytes)) = recording.as_deref().and_then(&mut *finish) {
            ev = ev
                .field("recording_sha256", sha256)
                .field("recording_bytes", bytes);
        }
        (ev.ts, ev.session, ev.user, ev.target) = (
            now,
            Some(id.clone()),
            Some(user.clone()),
            Some(target.clone()),
        );
        (seq, hash) = insert_event(&tx, (seq, &hash), &ev)?;
        tx.execute(
            "UPDATE sessions SET ended = ?2 WHERE id = ?1",
            params![id, rfc3339(now)],
        )?;
    }
    tx.commit()?;
    head.committed(seq, hash, open.len() as u64);
    Ok(open.len())
}

/// Bytes of records of failed writes kept to try again, at most (about:
/// their fields' text). Beyond, the oldest are given up (each was logged
/// when its write first failed) and counted in an `audit_gap` event once
/// writing works again.
const KEEP_UNWRITTEN: usize = 16 << 20;
/// How often a failing database is tried again while records wait.
const RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// Records written in one transaction, at most.
const BATCH: usize = 512;

/// Runs until every sender is gone, writing records in batches. When a
/// write fails (a full disk, a database made read-only), its records are
/// logged, kept and written again every [`RETRY`] until it works, so the
/// database catches up by itself once the storage is back.
pub(crate) fn writer_loop(
    mut conn: Connection,
    mut rx: mpsc::Receiver<Record>,
    health: &Health,
    mut head: chain::Head,
    forward: Option<Forward>,
) {
    let mut waiting = Unwritten::default();
    let to = (health, forward.as_ref());
    loop {
        let Some(mut batch) = next_batch(&mut rx, &waiting, head.due_in()) else {
            break;
        };
        // What a full forward queue lost is said in the chain itself.
        if let Some(lost) = forward.as_ref().map(Forward::take_lost).filter(|n| *n > 0) {
            let ev = Event::new("audit_forward_lost").field("events", lost);
            batch.records.push(Record::Event(ev));
        }
        // An empty batch is a wake-up: to retry what waits, or to sign.
        if !batch.is_empty() || !waiting.records.is_empty() {
            write_or_keep(&mut conn, batch, &mut waiting, to, &mut head);
        }
        checkpoint(&conn, &mut head, false, forward.as_ref());
    }
    // The senders are gone: one last try for what waits, and the head
    // signed, so a clean stop leaves nothing unsigned.
    if !waiting.records.is_empty() {
        write_or_keep(&mut conn, Batch::default(), &mut waiting, to, &mut head);
    }
    checkpoint(&conn, &mut head, true, forward.as_ref());
}

/// Records whose write failed, oldest first, and how many were given up.
#[derive(Default)]
struct Unwritten {
    records: std::collections::VecDeque<Record>,
    given_up: u64,
}

/// What one transaction writes, and who waits on it.
#[derive(Default)]
struct Batch {
    records: Vec<Record>,
    committed: Vec<tokio::sync::oneshot::Sender<bool>>,
    flushes: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.records.is_empty() && self.committed.is_empty() && self.flushes.is_empty()
    }
}

/// The next records to write: blocks for the first one when nothing
/// waits; while something does, waits at most [`RETRY`]. `None` when every
/// sender is gone.
fn next_batch(
    rx: &mut mpsc::Receiver<Record>,
    waiting: &Unwritten,
    checkpoint_in: Option<std::time::Duration>,
) -> Option<Batch> {
    let mut batch = Batch::default();
    let first = match (waiting.records.is_empty(), checkpoint_in) {
        (false, _) => super::recv_within(rx, RETRY).ok()?,
        // A checkpoint is due in a while: wake for it if nothing comes.
        (true, Some(wait)) => super::recv_within(rx, wait).ok()?,
        (true, None) => Some(rx.blocking_recv()?),
    };
    let mut next = first;
    while let Some(record) = next {
        match record {
            Record::Flush(reply) => batch.flushes.push(reply),
            mut other => {
                if let Record::Committed { written, .. } = &mut other {
                    batch.committed.extend(written.take());
                }
                batch.records.push(other);
            }
        }
        next = match batch.records.len() < BATCH {
            true => rx.try_recv().ok(),
            false => None,
        };
    }
    Some(batch)
}

/// Writes what waits and then `batch`, in one transaction. On failure the
/// new records are logged and everything is kept for the next try, but
/// for events written ahead under `on_failure = "refuse"`: their caller
/// did not act, so they must never be written.
fn write_or_keep(
    conn: &mut Connection,
    batch: Batch,
    waiting: &mut Unwritten,
    (health, forward): (&Health, Option<&Forward>),
    head: &mut chain::Head,
) {
    let old = waiting.records.len();
    let mut records: Vec<Record> = Vec::with_capacity(old + batch.records.len() + 1);
    // Where records were given up, the gap is said, first.
    let gap = waiting.given_up > 0;
    if gap {
        let ev = Event::new("audit_gap").field("events", waiting.given_up);
        records.push(Record::Event(ev));
    }
    records.extend(waiting.records.drain(..));
    records.extend(batch.records);
    let result = write_batch(conn, &records, head);
    for written in batch.committed {
        let _ = written.send(result.is_ok());
    }
    match result {
        Ok(linked) => {
            if let Some(f) = forward {
                let events = records.iter().filter_map(|r| match r {
                    Record::Event(ev) | Record::Committed { event: ev, .. } => Some(ev),
                    _ => None,
                });
                for ((seq, hash), ev) in linked.into_iter().zip(events) {
                    f.offer(&Item::Event {
                        seq,
                        hash,
                        event: ev.clone(),
                    });
                }
            }
            if old > 0 || gap {
                tracing::info!(
                    events = old,
                    given_up = waiting.given_up,
                    "the audit database works again; what waited is written"
                );
            }
            waiting.given_up = 0;
            health.set_db(true);
        }
        Err(e) => {
            if old == 0 {
                tracing::error!(error = %e, "audit database write failed; its events follow in the log and are written when it works again");
            }
            health.set_db(false);
            let acted_on = health.policy() == crate::config::OnFailure::Continue;
            let first_new = old + usize::from(gap);
            for (i, record) in records.into_iter().enumerate() {
                if i < usize::from(gap) {
                    continue;
                }
                if i >= first_new {
                    log_unwritten(&record);
                }
                match record {
                    Record::Committed { .. } if !acted_on => {}
                    record => waiting.records.push_back(record),
                }
            }
            let mut kept: usize = waiting.records.iter().map(size).sum();
            while kept > KEEP_UNWRITTEN {
                let Some(oldest) = waiting.records.pop_front() else {
                    break;
                };
                kept -= size(&oldest);
                waiting.given_up += 1;
            }
        }
    }
    for reply in batch.flushes {
        let _ = reply.send(());
    }
}

/// About how many bytes a record holds.
fn size(record: &Record) -> usize {
    let text = |v: &Value| v.as_str().map_or(16, str::len);
    match record {
        Record::Event(ev) | Record::Committed { event: ev, .. } => {
            256 + ev.fields.values().map(text).sum::<usize>()
        }
        Record::Conversation { messages, .. } => 256 + messages.len(),
        _ => 256,
    }
}

/// Logs a record that could not be written, whole, so it is not lost.
fn log_unwritten(record: &Record) {
    match record {
        Record::Event(ev) | Record::Committed { event: ev, .. } => {
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
        Record::Conversation { .. } | Record::Flush(_) => {}
    }
}

/// Writes `records` in one transaction; returns each event's seq and hash,
/// in order.
fn write_batch(
    conn: &mut Connection,
    records: &[Record],
    head: &mut chain::Head,
) -> rusqlite::Result<Vec<(i64, String)>> {
    let tx = conn.transaction()?;
    let (mut seq, mut hash) = (head.seq, head.hash.clone());
    let mut linked = Vec::new();
    for record in records {
        match record {
            Record::Event(ev) | Record::Committed { event: ev, .. } => {
                (seq, hash) = insert_event(&tx, (seq, &hash), ev)?;
                linked.push((seq, hash.clone()));
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
            Record::Flush(_) => {}
        }
    }
    tx.commit()?;
    head.committed(seq, hash, linked.len() as u64);
    Ok(linked)
}

/// An event as one JSON object: the common fields, then the kind's own,
/// as `walissh audit --json` prints it.
pub(crate) fn event_json(ev: &Event) -> Value {
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

/// A read-only connection, so the CLI reads while the bastion writes.
pub(crate) fn open_reader(path: &Path) -> Result<Connection, String> {
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
