//! The audit database: schema, the single writer thread, and the read-only
//! queries behind `walissh sessions` and `walissh audit`.
//!
//! SQLite in WAL mode, so the CLI can read while the bastion writes. The
//! writer drains whatever is queued into one transaction, which keeps a
//! burst of events to one fsync. The `sessions` table is written from the
//! chained `session_start` and `session_end` events, in their transaction,
//! so it never says what the chain does not (`audit verify` checks that).

use crate::audit::Kind;
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
    recording   TEXT,
    start_seq   INTEGER
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
    signature TEXT NOT NULL,
    prev_seq  INTEGER,
    prev      TEXT
);
CREATE INDEX IF NOT EXISTS events_session ON events(session);
CREATE INDEX IF NOT EXISTS sessions_started ON sessions(started);
CREATE TABLE IF NOT EXISTS pruned (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    seq       INTEGER NOT NULL,
    head      TEXT NOT NULL,
    cp_seq    INTEGER NOT NULL,
    cp        TEXT NOT NULL,
    ts        TEXT NOT NULL,
    signature TEXT NOT NULL
);
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
    // Columns of later versions; older rows keep them NULL, which verify
    // reads as "written before they came".
    add_column(&conn, "checkpoints", "prev_seq", "INTEGER").map_err(err)?;
    add_column(&conn, "checkpoints", "prev", "TEXT").map_err(err)?;
    add_column(&conn, "sessions", "start_seq", "INTEGER").map_err(err)?;
    index_text(&conn).map_err(err)?;
    Ok(conn)
}

/// Adds `column` to `table` when a database from an older version lacks it.
fn add_column(conn: &Connection, table: &str, column: &str, decl: &str) -> rusqlite::Result<()> {
    if !has_column(conn, table, column)? {
        conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
    }
    Ok(())
}

fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    conn.prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?
        .exists(params![table, column])
}

/// `column` to select, or NULL in its place in a database an older version
/// made and no newer walissh has opened for writing yet (readers, such as
/// `audit verify`, read it as it is).
pub(crate) fn column_or_null(
    conn: &Connection,
    table: &str,
    column: &str,
) -> rusqlite::Result<&'static str> {
    // Only the columns added since: a name from this list is the SQL.
    let name = match column {
        "prev_seq" => "prev_seq",
        "prev" => "prev",
        "start_seq" => "start_seq",
        _ => return Err(rusqlite::Error::InvalidColumnName(column.into())),
    };
    Ok(match has_column(conn, table, column)? {
        true => name,
        false => "NULL",
    })
}

/// A row of `events` as stored, with its hash: what verify and the
/// retention pass link again.
pub(crate) struct Stored {
    pub(crate) seq: i64,
    pub(crate) ts: String,
    pub(crate) session: Option<String>,
    pub(crate) user: Option<String>,
    pub(crate) target: Option<String>,
    pub(crate) kind: String,
    pub(crate) fields: String,
    pub(crate) hash: Option<String>,
}

impl Stored {
    /// The columns [`Stored::read`] reads, in its order.
    pub(crate) const COLUMNS: &'static str = "seq, ts, session, user, target, kind, fields, hash";

    pub(crate) fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Stored> {
        Ok(Stored {
            seq: r.get(0)?,
            ts: r.get(1)?,
            session: r.get(2)?,
            user: r.get(3)?,
            target: r.get(4)?,
            kind: r.get(5)?,
            fields: r.get(6)?,
            hash: r.get(7)?,
        })
    }

    /// Its hash after `prev`, as the chain makes it.
    pub(crate) fn linked(&self, prev: &str) -> String {
        let row = chain::Row {
            seq: self.seq,
            ts: &self.ts,
            session: self.session.as_deref(),
            user: self.user.as_deref(),
            target: self.target.as_deref(),
            kind: &self.kind,
            fields: &self.fields,
        };
        chain::link(prev, &row)
    }
}

/// A row of `events` as `chain_old_rows` reads it: seq, ts, session,
/// user, target, kind, fields.
type OldRow = (
    i64,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    String,
);

/// A database from before the chain: its rows are chained as they stand,
/// once, so that from here on every row has a hash and a row without one
/// is a row put there around walissh.
fn chain_old_rows(conn: &Connection) -> rusqlite::Result<()> {
    let rows: Vec<OldRow> = conn
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
            && let Some(kind) = Kind::parse(&kind)
            && let Some(text) = super::query::searchable(kind, &f)
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
    // Retention may have deleted every row and checkpoint: the chain then
    // goes on from its marker.
    let pruned = super::prune::marker(conn)?;
    let (seq, hash) = match (last, &pruned) {
        (Some((seq, Some(hash))), _) => (seq, hash),
        (Some((seq, None)), _) => (seq, chain::genesis()),
        (None, Some(m)) => (m.seq, m.head.clone()),
        (None, None) => (0, chain::genesis()),
    };
    let last = match (last_checkpoint(conn)?, pruned) {
        (Some(c), _) => Some((c.seq, c.id())),
        (None, m) => m.map(|m| m.checkpoint),
    };
    Ok(chain::Head::new(seq, hash, last, policy))
}

/// The checkpoints' columns, in the order `checkpoint_row` reads them.
pub(crate) fn checkpoint_columns(conn: &Connection) -> rusqlite::Result<String> {
    let prev_seq = column_or_null(conn, "checkpoints", "prev_seq")?;
    let prev = column_or_null(conn, "checkpoints", "prev")?;
    Ok(format!("seq, ts, head, {prev_seq}, {prev}, signature"))
}

pub(crate) fn checkpoint_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<chain::Signed> {
    let prev = match (r.get::<_, Option<i64>>(3)?, r.get::<_, Option<String>>(4)?) {
        (Some(s), Some(h)) => Some((s, h)),
        _ => None,
    };
    Ok(chain::Signed {
        seq: r.get(0)?,
        ts: r.get(1)?,
        head: r.get(2)?,
        prev,
        signature: r.get(5)?,
    })
}

/// Every checkpoint, in seq order.
pub(crate) fn checkpoints(conn: &Connection) -> rusqlite::Result<Vec<chain::Signed>> {
    let sql = format!(
        "SELECT {} FROM checkpoints ORDER BY seq",
        checkpoint_columns(conn)?
    );
    let mut st = conn.prepare(&sql)?;
    let rows = st.query_map([], checkpoint_row)?;
    rows.collect()
}

/// The newest checkpoint, if any: read alone, not with every other.
fn last_checkpoint(conn: &Connection) -> rusqlite::Result<Option<chain::Signed>> {
    let sql = format!(
        "SELECT {} FROM checkpoints ORDER BY seq DESC LIMIT 1",
        checkpoint_columns(conn)?
    );
    conn.query_row(&sql, [], checkpoint_row).optional()
}

/// The checkpoint at `seq`, if the database holds one.
pub(crate) fn checkpoint_at(
    conn: &Connection,
    seq: i64,
) -> rusqlite::Result<Option<chain::Signed>> {
    let sql = format!(
        "SELECT {} FROM checkpoints WHERE seq = ?1",
        checkpoint_columns(conn)?
    );
    conn.query_row(&sql, [seq], checkpoint_row).optional()
}

/// An event as the chain's next row: its seq, time and fields as stored
/// (the node's name among them), and its hash. Both stores insert these.
pub(crate) struct Linked {
    pub(crate) seq: i64,
    pub(crate) ts: String,
    pub(crate) fields: String,
    pub(crate) hash: String,
}

/// Links `ev` after the row at `seq` with hash `prev`, written by `node`.
pub(crate) fn link_event((seq, prev, node): (i64, &str, &str), ev: &Event) -> Linked {
    let mut fields = ev.fields.clone();
    if !node.is_empty() {
        fields.insert("node".into(), node.into());
    }
    let (ts, fields) = (rfc3339(ev.ts), Value::Object(fields).to_string());
    let seq = seq + 1;
    let row = chain::Row {
        seq,
        ts: &ts,
        session: ev.session.as_deref(),
        user: ev.user.as_deref(),
        target: ev.target.as_deref(),
        kind: ev.kind.as_str(),
        fields: &fields,
    };
    let hash = chain::link(prev, &row);
    Linked {
        seq,
        ts,
        fields,
        hash,
    }
}

/// Inserts one event as the chain's next row; returns its seq and hash
/// (the head moves only once the transaction commits).
fn insert_event(
    tx: &rusqlite::Transaction<'_>,
    after: (i64, &str, &str),
    ev: &Event,
) -> rusqlite::Result<(i64, String)> {
    let Linked {
        seq,
        ts,
        fields,
        hash,
    } = link_event(after, ev);
    tx.prepare_cached(
        "INSERT INTO events (seq, ts, session, user, target, kind, fields, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![seq, ts, ev.session, ev.user, ev.target, ev.kind.as_str(), fields, hash])?;
    if let Some(text) = super::query::searchable(ev.kind, &ev.fields) {
        tx.prepare_cached("INSERT INTO events_text (rowid, text) VALUES (?1, ?2)")?
            .execute(params![seq, text])?;
    }
    session_row(tx, seq, &ts, ev)?;
    Ok((seq, hash))
}

/// The `sessions` row follows its chained events: made by `session_start`
/// (which names the user, target, address and recording, and whose seq
/// the row keeps), ended by `session_end`, both at the event's own time.
fn session_row(
    tx: &rusqlite::Transaction<'_>,
    seq: i64,
    ts: &str,
    ev: &Event,
) -> rusqlite::Result<()> {
    let Some(id) = ev.session.as_deref() else {
        return Ok(());
    };
    match ev.kind {
        Kind::SessionStart => {
            let text = |k: &str| ev.fields.get(k).and_then(Value::as_str);
            // OR IGNORE: a session id used twice (64 random bits) must not
            // stop the writer; verify says the row is not this event's.
            tx.prepare_cached(
                "INSERT OR IGNORE INTO sessions (id, user, target, client_addr, started, recording, start_seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                id,
                ev.user.as_deref().unwrap_or_default(),
                ev.target.as_deref().unwrap_or_default(),
                text("client_addr").unwrap_or_default(),
                ts,
                text("recording"),
                seq
            ])?;
        }
        Kind::SessionEnd => {
            tx.prepare_cached("UPDATE sessions SET ended = ?2 WHERE id = ?1")?
                .execute(params![id, ts])?;
        }
        _ => {}
    }
    Ok(())
}

/// Where the writer sends each checkpoint besides the database.
pub(crate) struct Copies {
    /// The head file (`copies::head_path`).
    pub(crate) head_file: std::path::PathBuf,
    pub(crate) forward: Option<Forward>,
}

/// What the writer writes to: the SQLite file here, or PostgreSQL
/// (`pg`), where other bastions write the same chain.
pub(crate) trait Sink: Send {
    /// Writes `records` in one transaction as the chain's next rows and
    /// moves `head`; returns each event's seq and hash, in order.
    fn write(
        &mut self,
        records: &[Record],
        head: &mut chain::Head,
    ) -> Result<Vec<(i64, String)>, String>;

    /// Stores the checkpoint `head` makes now (the one due, or with
    /// `force` any that waits) and returns it; None when none is due.
    fn checkpoint(
        &mut self,
        head: &mut chain::Head,
        force: bool,
    ) -> Option<Result<chain::Signed, String>>;

    /// The retention pass's deletions (`prune::prune`): what went, and
    /// the recordings' rows to chain before their files are deleted.
    fn prune(
        &mut self,
        ask: &super::prune::Ask,
        head: &mut chain::Head,
    ) -> Result<(super::prune::Pruned, Vec<super::prune::Doomed>), String>;
}

impl Sink for Connection {
    fn write(
        &mut self,
        records: &[Record],
        head: &mut chain::Head,
    ) -> Result<Vec<(i64, String)>, String> {
        write_batch(self, records, head).map_err(|e| e.to_string())
    }

    fn checkpoint(
        &mut self,
        head: &mut chain::Head,
        force: bool,
    ) -> Option<Result<chain::Signed, String>> {
        let ts = rfc3339(std::time::SystemTime::now());
        let c = match head.checkpoint(&ts, force)? {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let prev = c.prev.clone().unzip();
        // This one commit syncs the log (synchronous = FULL): with the
        // usual NORMAL, a power cut could take back a checkpoint the head
        // file, synced, already names, and walissh would then refuse to
        // start. Syncing the log makes every earlier commit durable too.
        let durable = self.pragma_update(None, "synchronous", "FULL");
        let written = durable.and_then(|()| {
            self.execute(
                "INSERT OR REPLACE INTO checkpoints (seq, ts, head, signature, prev_seq, prev) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![c.seq, c.ts, c.head, c.signature, prev.0, prev.1],
            )
        });
        if let Err(e) = self.pragma_update(None, "synchronous", "NORMAL") {
            tracing::warn!(error = %e, "audit database left at synchronous = FULL");
        }
        Some(written.map(|_| c).map_err(|e| e.to_string()))
    }

    fn prune(
        &mut self,
        ask: &super::prune::Ask,
        head: &mut chain::Head,
    ) -> Result<(super::prune::Pruned, Vec<super::prune::Doomed>), String> {
        let key = head.public_key().ok_or("no audit key: nothing is pruned")?;
        super::prune::prune(self, ask, (&key, &|m: &str| head.sign(m)))
    }
}

/// Writes the checkpoint that is due (or, with `force`, any that waits),
/// then its copies: the head file only once the database holds it, so a
/// head file never names a checkpoint the database has yet to commit.
pub(crate) fn checkpoint(
    sink: &mut dyn Sink,
    head: &mut chain::Head,
    force: bool,
    copies: &Copies,
) {
    match sink.checkpoint(head, force) {
        None => {}
        Some(Err(e)) => {
            tracing::error!(error = %e, "audit checkpoint not written; tried again later");
            head.retry_in(RETRY);
        }
        Some(Ok(c)) => {
            head.checkpointed(&c);
            if let Err(e) = super::copies::write_head(&copies.head_file, &c) {
                let file = copies.head_file.display();
                tracing::error!(%file, error = %e, "audit head file not written");
            }
            if let Some(f) = &copies.forward {
                f.offer(&Item::Checkpoint(c));
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
        let ev = left_open(
            (now, "bastion_restart"),
            (id, user, target),
            recording.as_deref(),
            finish,
        );
        // The event ends the row too (`session_row`).
        (seq, hash) = insert_event(&tx, (seq, &hash, &head.node), &ev)?;
    }
    tx.commit()?;
    head.committed(seq, hash, open.len() as u64);
    Ok(open.len())
}

/// The `session_end` of a session a crash left open (`reason`
/// `bastion_restart`, or `node_reaped` from another node): its recording
/// repaired first by `finish`, then the digest chained with the end.
pub(crate) fn left_open(
    (now, reason): (std::time::SystemTime, &str),
    (id, user, target): (&str, &str, &str),
    recording: Option<&str>,
    finish: &mut dyn FnMut(&str) -> Option<(String, u64)>,
) -> Event {
    let mut ev = Event::new(Kind::SessionEnd).field("reason", reason);
    if let Some((sha256, bytes)) = recording.and_then(finish) {
        ev = ev
            .field("recording_sha256", sha256)
            .field("recording_bytes", bytes);
    }
    (ev.ts, ev.session, ev.user, ev.target) = (
        now,
        Some(id.to_string()),
        Some(user.to_string()),
        Some(target.to_string()),
    );
    ev
}

/// Bytes of records of failed writes kept to try again, at most (about:
/// their fields' text). Beyond, the oldest are given up (each was logged
/// when its write first failed) and counted in an `audit_gap` event once
/// writing works again.
const KEEP_UNWRITTEN: usize = 16 << 20;
/// How often a failing database is tried again while records wait.
const RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// Records written in one transaction, at most.
pub(crate) const BATCH: usize = 512;

/// Runs until every sender is gone, writing records in batches. When a
/// write fails (a full disk, a database made read-only), its records are
/// logged, kept and written again every [`RETRY`] until it works, so the
/// database catches up by itself once the storage is back.
pub(crate) fn writer_loop(
    mut sink: Box<dyn Sink>,
    mut rx: mpsc::Receiver<Record>,
    (health, metrics): (&Health, &super::metrics::Metrics),
    mut head: chain::Head,
    copies: Copies,
) {
    let mut waiting = Unwritten::default();
    let waiter = match super::Waiter::new() {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(error = %e, "the audit writer cannot start");
            return;
        }
    };
    let forward = copies.forward.as_ref();
    let to = (health, forward);
    loop {
        let Some(mut batch) = next_batch((&mut rx, &waiter), &waiting, head.due_in()) else {
            break;
        };
        // What a full forward queue lost is said in the chain itself.
        if let Some(lost) = forward.map(Forward::take_lost).filter(|n| *n > 0) {
            let ev = Event::new(Kind::AuditForwardLost).field("events", lost);
            batch.records.push(Record::Event(ev));
        }
        let prunes = std::mem::take(&mut batch.prunes);
        // An empty batch is a wake-up: to retry what waits, or to sign.
        if !batch.is_empty() || !waiting.records.is_empty() {
            let began = std::time::Instant::now();
            write_or_keep(sink.as_mut(), batch, &mut waiting, to, &mut head);
            metrics.audit_written(began.elapsed());
        }
        if !prunes.is_empty() {
            // The pass acts only under a checkpoint: sign what is written.
            checkpoint(sink.as_mut(), &mut head, true, &copies);
        }
        for (ask, answer) in prunes {
            let _ = answer.send(prune(sink.as_mut(), &ask, &mut head, &copies));
        }
        checkpoint(sink.as_mut(), &mut head, false, &copies);
    }
    // The senders are gone: one last try for what waits, and the head
    // signed, so a clean stop leaves nothing unsigned.
    if !waiting.records.is_empty() {
        write_or_keep(sink.as_mut(), Batch::default(), &mut waiting, to, &mut head);
    }
    checkpoint(sink.as_mut(), &mut head, true, &copies);
}

/// Runs a retention pass (`prune`) as the writer: the chain checked and
/// the marker signed with the audit key, the recordings' rows chained
/// after it and signed at once (a `recording_pruned` row counts only
/// under a checkpoint).
fn prune(
    sink: &mut dyn Sink,
    ask: &super::prune::Ask,
    head: &mut chain::Head,
    copies: &Copies,
) -> Result<super::prune::Pruned, String> {
    let (mut done, doomed) = sink.prune(ask, head)?;
    if !doomed.is_empty() {
        // The rows chained and signed first: a file is never gone without
        // its row saying why.
        let records: Vec<Record> = doomed
            .iter()
            .map(|(ev, _)| Record::Event(ev.clone()))
            .collect();
        sink.write(&records, head)?;
        checkpoint(sink, head, true, copies);
        done.recordings += super::prune::delete(&doomed);
        done.names = doomed
            .iter()
            .filter_map(|(_, path)| path.file_name()?.to_str().map(str::to_string))
            .collect();
    }
    Ok(done)
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
    /// Retention passes asked for: run once the batch is written.
    prunes: Vec<(super::prune::Ask, super::Answer<super::prune::Pruned>)>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.records.is_empty()
            && self.committed.is_empty()
            && self.flushes.is_empty()
            && self.prunes.is_empty()
    }
}

/// The next records to write: blocks for the first one when nothing
/// waits; while something does, waits at most [`RETRY`]. `None` when every
/// sender is gone.
fn next_batch(
    (rx, waiter): (&mut mpsc::Receiver<Record>, &super::Waiter),
    waiting: &Unwritten,
    checkpoint_in: Option<std::time::Duration>,
) -> Option<Batch> {
    let mut batch = Batch::default();
    let first = match (waiting.records.is_empty(), checkpoint_in) {
        (false, _) => waiter.recv_within(rx, RETRY).ok()?,
        // A checkpoint is due in a while: wake for it if nothing comes.
        (true, Some(wait)) => waiter.recv_within(rx, wait).ok()?,
        (true, None) => Some(rx.blocking_recv()?),
    };
    let mut next = first;
    while let Some(record) = next {
        match record {
            Record::Flush(reply) => batch.flushes.push(reply),
            Record::Prune(ask, answer) => batch.prunes.push((ask, answer)),
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
    sink: &mut dyn Sink,
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
        let ev = Event::new(Kind::AuditGap).field("events", waiting.given_up);
        records.push(Record::Event(ev));
    }
    records.extend(waiting.records.drain(..));
    records.extend(batch.records);
    let result = sink.write(&records, head);
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
        // Not audit: a lost conversation is only not restored.
        Record::Conversation { .. } | Record::Flush(_) | Record::Prune(..) => {}
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
                (seq, hash) = insert_event(&tx, (seq, &hash, &head.node), ev)?;
                linked.push((seq, hash.clone()));
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
            Record::Flush(_) | Record::Prune(..) => {}
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

/// Every session, oldest first, one JSON object per line, each with its
/// node (the bastion that carried it, as its `session_start` names it;
/// this machine's name for rows from before nodes were named); with
/// `active`, those open now (no end in the audit: after a crash, until
/// walissh starts again and closes them).
pub(crate) fn sessions_json(
    path: &Path,
    (active, here): (bool, &str),
    out: &mut dyn std::io::Write,
) -> Result<(), String> {
    let names = [
        "id",
        "user",
        "target",
        "client_addr",
        "started",
        "ended",
        "recording",
        "node",
    ];
    let only = if active { "WHERE ended IS NULL" } else { "" };
    let start_seq = {
        let conn = open_reader(path)?;
        column_or_null(&conn, "sessions", "start_seq")
            .map_err(|e| format!("{}: {e}", path.display()))?
    };
    let sql = format!(
        "SELECT id, user, target, client_addr, started, ended, recording,
                COALESCE((SELECT json_extract(e.fields, '$.node') FROM events e WHERE e.seq = {start_seq}), ?1)
         FROM sessions {only} ORDER BY started, id"
    );
    print_rows(path, &sql, &[&here], &names, out)
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
