//! The audit trail: events in SQLite and asciicast recordings of sessions.
//!
//! Sessions hand events to [`Audit`], which queues them on a bounded
//! channel for one writer thread (`db`); recordings go the same way to the
//! recorder thread (`recording`). Neither ever does file I/O on the async
//! runtime. When storage fails, [`Health`] remembers it, and the
//! `[audit] on_failure` policy decides whether new sessions are refused.

pub(crate) mod backup;
pub(crate) mod chain;
pub(crate) mod copies;
pub(crate) mod db;
pub(crate) mod forward;
pub(crate) mod kind;
pub(crate) mod metrics;
pub(crate) mod nodes;
pub(crate) mod pg;
pub(crate) mod play;
pub(crate) mod prune;
pub(crate) mod query;
pub(crate) mod readable;
pub(crate) mod recording;
pub(crate) mod stops;
pub(crate) mod tally;
pub(crate) mod upload;
pub(crate) mod verify;
pub(crate) mod views;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::config::OnFailure;
pub(crate) use kind::Kind;

/// How long a login waits for the other nodes' count of failures before
/// it goes on without it (one try at a time).
const ASK_WITHIN: std::time::Duration = std::time::Duration::from_millis(500);

/// Events waiting for the writer. Large enough to absorb a burst (a login
/// flood), small enough that a dead disk is noticed as back-pressure on the
/// sessions producing events rather than as unbounded memory.
const QUEUE: usize = 4096;

/// One audit event, as `walissh audit --json` prints it.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) ts: SystemTime,
    pub(crate) session: Option<String>,
    pub(crate) user: Option<String>,
    pub(crate) target: Option<String>,
    pub(crate) kind: Kind,
    pub(crate) fields: Map<String, Value>,
    /// Its own id, random, kept through retries: a store where a commit's
    /// answer can be lost (PostgreSQL) finds by it what is already written.
    /// Not chained, not shown.
    pub(crate) rid: u128,
}

impl Event {
    pub(crate) fn new(kind: Kind) -> Event {
        Event {
            rid: rand::random(),
            ts: SystemTime::now(),
            session: None,
            user: None,
            target: None,
            kind,
            fields: Map::new(),
        }
    }

    pub(crate) fn user(mut self, user: impl Into<String>) -> Event {
        self.user = Some(user.into());
        self
    }

    pub(crate) fn field(mut self, key: &str, value: impl Into<Value>) -> Event {
        self.fields.insert(key.to_string(), value.into());
        self
    }

    pub(crate) fn fields(self, fields: impl IntoIterator<Item = (&'static str, Value)>) -> Event {
        fields.into_iter().fold(self, |ev, (k, v)| ev.field(k, v))
    }

    /// The event with every string cut to a bound before it is stored:
    /// much of it comes from clients (login names, commands, requested
    /// targets), and no client may fill the disk through the audit. The
    /// cut is said where it is.
    fn bounded(mut self) -> Event {
        for name in [&mut self.user, &mut self.target].into_iter().flatten() {
            cut(name, MAX_NAME);
        }
        for value in self.fields.values_mut() {
            match value {
                Value::String(s) => cut(s, MAX_TEXT),
                Value::Array(items) => items.iter_mut().for_each(|v| {
                    if let Value::String(s) = v {
                        cut(s, MAX_TEXT);
                    }
                }),
                _ => {}
            }
        }
        self
    }
}

/// Bytes of a user or target name kept in the audit.
const MAX_NAME: usize = 256;
/// Bytes of any other text kept in one field.
const MAX_TEXT: usize = 64 * 1024;

/// Cuts `s` to `max` bytes, saying so (`text::head`).
fn cut(s: &mut String, max: usize) {
    if let std::borrow::Cow::Owned(cut) = crate::text::head(s, max) {
        *s = cut;
    }
}

/// The identity of a running session, for its audit events.
#[derive(Clone)]
pub(crate) struct Ids {
    pub(crate) session: String,
    pub(crate) user: String,
    pub(crate) target: String,
}

impl Ids {
    pub(crate) fn event(&self, kind: Kind) -> Event {
        let mut ev = Event::new(kind).user(self.user.clone());
        ev.session = Some(self.session.clone());
        ev.target = Some(self.target.clone());
        ev
    }
}

#[derive(Debug)]
pub(crate) enum Record {
    Event(Event),
    /// A user's conversation with a target, sanitised, to restore when
    /// they come back (`[context] restore`).
    Conversation {
        user: String,
        target: String,
        messages: String,
    },
    /// An event that must be in the database before what it records
    /// happens: answered with whether its batch was written.
    Committed {
        event: Event,
        /// Taken by the writer when the record joins a batch.
        written: Option<tokio::sync::oneshot::Sender<bool>>,
    },
    /// Answered once everything queued before it is written.
    Flush(tokio::sync::oneshot::Sender<()>),
    /// A retention pass (`prune`), run by the writer.
    Prune(prune::Ask, Answer<prune::Pruned>),
}

/// Where the writer answers a request, with what it did or why not.
pub(crate) type Answer<T> = tokio::sync::oneshot::Sender<Result<T, String>>;

/// Whether the audit database is writable, as the writer thread last found
/// it, and what to do when it is not. Recordings are checked as each one is
/// opened, so only the database needs a remembered state.
#[derive(Debug)]
pub(crate) struct Health {
    db_ok: AtomicBool,
    policy: OnFailure,
}

impl Health {
    pub(crate) fn new(policy: OnFailure) -> Health {
        Health {
            db_ok: AtomicBool::new(true),
            policy,
        }
    }

    pub(crate) fn set_db(&self, ok: bool) {
        self.db_ok.store(ok, Ordering::Relaxed);
    }

    /// What is broken, if anything.
    pub(crate) fn problem(&self) -> Option<&'static str> {
        (!self.db_ok.load(Ordering::Relaxed)).then_some("the audit database cannot be written")
    }

    pub(crate) fn policy(&self) -> OnFailure {
        self.policy
    }
}

/// The handle sessions use to audit. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Audit {
    tx: mpsc::Sender<Record>,
    pub(crate) health: Arc<Health>,
    /// Where conversations are read back from.
    store: Arc<Store>,
    /// This node's name, as it started (rows, locks and stops use it).
    node: Arc<str>,
    /// The audit key, to sign stops sent to other nodes (`stops`).
    key: Option<Arc<russh::keys::PrivateKey>>,
    /// Where the console reads.
    reader: Arc<Reader>,
    /// This node's claim on its name in a shared store (`pg::NodeHold`),
    /// released with the last handle.
    _node: Option<Arc<pg::NodeHold>>,
    /// Live views relayed between nodes (`views`), in a shared store.
    views: Option<Arc<views::Views>>,
    /// What the events say, counted (`/metrics`).
    pub(crate) metrics: Arc<metrics::Metrics>,
}

/// Where the audit lives, as `[audit] database` says.
pub(crate) enum Store {
    Sqlite(std::path::PathBuf),
    /// Several bastions' one trail; the head file (`copies`) is this
    /// node's own.
    Postgres {
        pg: pg::Pg,
        head_file: std::path::PathBuf,
    },
}

/// What a reader inside the daemon (the console) reads: the SQLite file,
/// or the mirror of PostgreSQL's rows.
enum Reader {
    Sqlite(std::path::PathBuf),
    Mirror(readable::Mirror),
}

impl Store {
    /// The store `config` names (a PostgreSQL one's password read now: `$WALISSH_DATABASE_PASSWORD`, else
    /// `[audit] database_password_file`).
    pub(crate) fn of(config: &crate::config::Config) -> Result<Store, String> {
        let Some(url) = config.audit_postgres() else {
            return Ok(Store::Sqlite(config.audit_db_path()));
        };
        let password = match (
            std::env::var(pg::PASSWORD_ENV).ok(),
            &config.audit.database_password_file,
        ) {
            (Some(p), _) => Some(p),
            (None, Some(file)) => Some(password_file(file.get_ref())?),
            (None, None) => None,
        };
        Ok(Store::Postgres {
            pg: pg::Pg::new(
                url,
                (
                    password.as_deref(),
                    config
                        .audit
                        .database_ca_file
                        .as_ref()
                        .map(|f| f.get_ref().as_path()),
                ),
            )?,
            head_file: config.state_dir().join("audit-postgres.head"),
        })
    }
}

/// The database's password from `path`: its first line, from a file that
/// only its owner may read (as ssh asks of a private key).
fn password_file(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let meta = std::fs::metadata(path).map_err(err)?;
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{}: the database password file may be read by others; chmod 600 it",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(err)?;
    Ok(text.lines().next().unwrap_or_default().to_string())
}

impl Audit {
    /// [`Audit::open`] on a SQLite file.
    #[cfg(test)]
    pub(crate) fn start(
        (path, node): (&Path, &str),
        policy: OnFailure,
        checkpoints: chain::Checkpoints,
        forward: Option<forward::Forward>,
    ) -> Result<(Audit, std::thread::JoinHandle<()>), String> {
        let store = Store::Sqlite(path.to_path_buf());
        Audit::open((store, node), policy, checkpoints, forward)
    }

    /// Opens the store (creating or migrating its schema), checks it still
    /// holds the checkpoint its head file names (`copies`), ends what a
    /// crash of this node left open (`recover`), and starts its writer
    /// thread. Blocking.
    pub(crate) fn open(
        (store, node): (Store, &str),
        policy: OnFailure,
        checkpoints: chain::Checkpoints,
        forward: Option<forward::Forward>,
    ) -> Result<(Audit, std::thread::JoinHandle<()>), String> {
        let mut hold = None;
        let signing = checkpoints.key.clone().map(Arc::new);
        let (sink, head, head_file): (Box<dyn db::Sink>, _, _) = match &store {
            Store::Sqlite(path) => {
                let mut conn = db::open_writer(path)?;
                copies::check_head_at_start(&conn, path)?;
                let mut head = db::head(&conn, checkpoints).map_err(|e| {
                    format!("{}: cannot read the chain's head: {e}", path.display())
                })?;
                head.node = node.to_string();
                recover(&mut conn, path, &mut head)?;
                (Box::new(conn), head, copies::head_path(path))
            }
            Store::Postgres { pg, head_file } => {
                let applied = pg.migrate()?;
                if !applied.is_empty() {
                    tracing::info!(migrations = ?applied, "the audit's schema was migrated");
                }
                let key = checkpoints.key.as_ref().map(|k| k.public_key().clone());
                let pruned = pg.pruned_through(key.as_ref())?;
                let at = |seq| pg.checkpoint_at(seq);
                copies::check_head_in((&at, pruned), head_file, &pg.name)?;
                // The name first: what is open under it is then this
                // process's to end.
                hold = Some(Arc::new(pg.hold_node(node)?));
                let mut head = pg.head(checkpoints)?;
                head.node = node.to_string();
                let mut sink = pg.clone();
                recover_node(&mut sink, &mut head)?;
                (Box::new(sink), head, head_file.clone())
            }
        };
        let reader = match &store {
            Store::Sqlite(path) => Reader::Sqlite(path.clone()),
            Store::Postgres { pg, head_file } => Reader::Mirror(readable::Mirror::new(
                pg.clone(),
                head_file.with_file_name("audit-mirror.db"),
            )),
        };
        let views = match (&store, &signing) {
            (Store::Postgres { pg, .. }, Some(key)) => Some(Arc::new(pg.views(node, key)?)),
            _ => None,
        };
        let health = Arc::new(Health::new(policy));
        let (tx, rx) = mpsc::channel(QUEUE);
        let h = health.clone();
        let metrics = Arc::new(metrics::Metrics::new());
        let copies = db::Copies { head_file, forward };
        let m = metrics.clone();
        let thread = std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || db::writer_loop(sink, rx, (&h, &m), head, copies))
            .map_err(|e| format!("cannot start the audit writer: {e}"))?;
        Ok((
            Audit {
                tx,
                health,
                reader: Arc::new(reader),
                store: Arc::new(store),
                node: Arc::from(node),
                key: signing,
                _node: hold,
                views,
                metrics,
            },
            thread,
        ))
    }

    async fn send(&self, record: Record) {
        if self.tx.send(record).await.is_err() {
            tracing::error!("audit writer is gone; event lost");
        }
    }

    pub(crate) async fn event(&self, event: Event) {
        self.metrics.count(&event);
        self.send(Record::Event(event.bounded())).await
    }

    /// Runs a retention pass (`prune`) in the writer, after what is
    /// queued: what it deleted, or why it could not.
    pub(crate) async fn prune(&self, ask: prune::Ask) -> Result<prune::Pruned, String> {
        let (answer, done) = tokio::sync::oneshot::channel();
        self.send(Record::Prune(ask, answer)).await;
        done.await
            .map_err(|_| "the audit writer is gone".to_string())?
    }

    /// `/metrics`: the counts, and how deep the writer's queue is now.
    pub(crate) fn metrics_text(&self) -> String {
        let depth = QUEUE.saturating_sub(self.tx.capacity());
        self.metrics.text(i64::try_from(depth).unwrap_or(i64::MAX))
    }

    /// Writes `event` before the caller acts on it (write-ahead): an exec
    /// starts, an agent's command is sent, only once its row is committed,
    /// so a crash can lose a row only for what never happened. When the
    /// database cannot be written, `[audit] on_failure` decides: `refuse`
    /// gives Err (the caller does not act; the writer has put the event in
    /// the log), `continue` goes on.
    pub(crate) async fn ahead(&self, event: Event) -> Result<(), &'static str> {
        let (written, answer) = tokio::sync::oneshot::channel();
        self.metrics.count(&event);
        let event = event.bounded();
        let written = Some(written);
        self.send(Record::Committed { event, written }).await;
        match answer.await {
            Ok(true) => Ok(()),
            _ if self.health.policy() == OnFailure::Continue => Ok(()),
            _ => Err("the audit database cannot be written"),
        }
    }

    /// Keeps a user's conversation with a target for their next session.
    pub(crate) async fn save_conversation(&self, user: &str, target: &str, messages: String) {
        self.send(Record::Conversation {
            user: user.to_string(),
            target: target.to_string(),
            messages,
        })
        .await
    }

    /// The conversation kept for a user and target, if any (read on a
    /// blocking thread).
    pub(crate) async fn load_conversation(&self, user: &str, target: &str) -> Option<String> {
        let (store, user, target) = (self.store.clone(), user.to_string(), target.to_string());
        match &*store {
            Store::Postgres { pg, .. } => pg.conversation(&user, &target).await,
            Store::Sqlite(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || db::conversation(&path, &user, &target))
                    .await
                    .ok()
                    .flatten()
            }
        }
    }

    /// Where stops of this node's sessions asked on other nodes arrive
    /// (`stops`); none without a shared store (or an audit key).
    pub(crate) fn stops(&self) -> Option<stops::Stops> {
        match (&*self.store, &self.key) {
            (Store::Postgres { pg, .. }, Some(key)) => {
                Some(pg.listen_stops(&self.node, key.public_key().clone()))
            }
            _ => None,
        }
    }

    /// This node's side of the live views relayed between nodes; none
    /// without a shared store (or an audit key).
    pub(crate) fn views(&self) -> Option<&Arc<views::Views>> {
        self.views.as_ref()
    }

    /// Watches session `id` on the node that carries it, where several
    /// share the store, for console login `by` at `addr`: None when no
    /// other node has it open; Err when that node is not running, or the
    /// relay cannot be had.
    pub(crate) async fn watch_elsewhere(
        &self,
        id: &str,
        (by, addr): (&str, &str),
    ) -> Result<Option<views::Remote>, String> {
        let (Store::Postgres { pg, .. }, Some(views)) = (&*self.store, &self.views) else {
            return Ok(None);
        };
        let Some((node, _, _)) = self.node_elsewhere(pg, id).await? else {
            return Ok(None);
        };
        views.watch((&node, id), (by, addr)).await.map(Some)
    }

    /// The node other than this one that carries session `id` now, where
    /// several share the store: None when none does; Err (why) when its
    /// node is not running.
    pub(crate) async fn carried_elsewhere(&self, id: &str) -> Result<Option<String>, String> {
        let Store::Postgres { pg, .. } = &*self.store else {
            return Ok(None);
        };
        Ok(self.node_elsewhere(pg, id).await?.map(|(node, _, _)| node))
    }

    /// The running node other than this one that has session `id` open,
    /// as the chain says, with the session's user and target: None when
    /// none does; Err when that node is not running.
    async fn node_elsewhere(
        &self,
        pg: &pg::Pg,
        id: &str,
    ) -> Result<Option<(String, String, String)>, String> {
        let Some(found) = pg.open_session(id).await? else {
            return Ok(None);
        };
        if found.0 == *self.node {
            return Ok(None);
        }
        if !pg.node_running(&found.0).await? {
            return Err(format!(
                "session {id} is open on node {}, which is not running: end its sessions with `walissh sessions --reap {}`",
                found.0, found.0
            ));
        }
        Ok(Some(found))
    }

    /// Asks the node that carries session `id` to stop it, where several
    /// share the store, and waits a while for it to say it did: its user
    /// and target; None when no other node has it open (or there are no
    /// other nodes); Err when that node is not running (reap it) or did
    /// not stop it in time.
    pub(crate) async fn stop_elsewhere(
        &self,
        id: &str,
        (by, reason, via): (&str, &str, &str),
    ) -> Result<Option<(String, String)>, String> {
        let (Store::Postgres { pg, .. }, Some(key)) = (&*self.store, &self.key) else {
            return Ok(None);
        };
        let Some((node, user, target)) = self.node_elsewhere(pg, id).await? else {
            return Ok(None);
        };
        let stop = stops::Stop {
            node: node.clone(),
            session: id.to_string(),
            by: by.to_string(),
            reason: reason.to_string(),
            via: via.to_string(),
            from: self.node.to_string(),
            at: stops::now(),
            signature: String::new(),
        }
        .sign(key)?;
        pg.send_stop(&stop).await?;
        match pg.stopped(id, stops::CONFIRM).await? {
            true => Ok(Some((user, target))),
            false => Err(format!(
                "asked node {node} to stop session {id}; it has not said it did within {} s",
                stops::CONFIRM.as_secs()
            )),
        }
    }

    /// Counts a login attempt from `addr` where several nodes share the
    /// store, as a failure until [`Audit::release_attempt`] takes it
    /// back: its row's id, and how many failures and attempts other nodes
    /// had from the address within `within`. Ok(None) without a shared
    /// store; Err when it cannot be had within [`ASK_WITHIN`].
    pub(crate) async fn reserve_attempt(
        &self,
        addr: &str,
        within: std::time::Duration,
    ) -> Result<Option<(i64, u32)>, ()> {
        let Store::Postgres { pg, .. } = &*self.store else {
            return Ok(None);
        };
        let asked = pg.reserve_attempt(addr.into(), self.node.to_string(), within);
        match tokio::time::timeout(ASK_WITHIN, asked).await {
            Ok(Ok(found)) => Ok(Some(found)),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "other nodes' failed logins could not be read");
                Err(())
            }
            Err(_) => Err(()),
        }
    }

    /// Failed passwords of `account` on other nodes within `within`, and
    /// whether it logged in from `addr` on one lately, where several
    /// share the store; None without one, or when it cannot be had within
    /// [`ASK_WITHIN`] (the account's slow path then counts this node's).
    pub(crate) async fn account_elsewhere(
        &self,
        (account, addr): (&str, &str),
        within: std::time::Duration,
    ) -> Option<(u32, bool)> {
        let Store::Postgres { pg, .. } = &*self.store else {
            return None;
        };
        let who = (account.into(), self.node.to_string(), addr.into());
        match tokio::time::timeout(ASK_WITHIN, pg.account_elsewhere(who, within)).await {
            Ok(Ok(found)) => Some(found),
            _ => None,
        }
    }

    /// A failed password of `account`, written for the other nodes where
    /// several share the store (waited for, within [`ASK_WITHIN`]).
    pub(crate) async fn account_failed(&self, account: &str) {
        if let Store::Postgres { pg, .. } = &*self.store {
            let written = pg.account_failed((account.into(), self.node.to_string()));
            let _ = tokio::time::timeout(ASK_WITHIN, written).await;
        }
    }

    /// `account` logged in from `addr`: told to the other nodes where
    /// several share the store, in the background.
    pub(crate) fn account_known(&self, account: &str, addr: &str) {
        if let Store::Postgres { pg, .. } = &*self.store {
            pg.account_known(account.into(), addr.into());
        }
    }

    /// Takes back an attempt's row (it succeeded, or was not made).
    pub(crate) fn release_attempt(&self, id: i64) {
        if let Store::Postgres { pg, .. } = &*self.store {
            pg.release_attempt(id);
        }
    }

    /// The SQLite file the console reads: the database itself, or the
    /// mirror of PostgreSQL's rows brought up to date now. Blocking.
    pub(crate) fn readable(&self) -> Result<std::path::PathBuf, String> {
        match &*self.reader {
            Reader::Sqlite(path) => Ok(path.clone()),
            Reader::Mirror(m) => m.fresh().map(Path::to_path_buf),
        }
    }

    /// The PostgreSQL store under this handle (tests and benchmarks).
    #[cfg(test)]
    pub(crate) fn pg_for_tests(&self) -> pg::Pg {
        match &*self.store {
            Store::Postgres { pg, .. } => pg.clone(),
            Store::Sqlite(_) => panic!("not PostgreSQL"),
        }
    }

    /// Waits until everything queued so far is written.
    pub(crate) async fn flush(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Record::Flush(tx)).await;
        let _ = rx.await;
    }
}

/// After a crash (SIGKILL, power loss): sessions still open in the
/// database are ended with `reason = "bastion_restart"`, and their
/// recordings are cut back to their last whole event, so every recording
/// plays. Runs before the first session, so nothing races it.
fn recover(
    conn: &mut rusqlite::Connection,
    path: &Path,
    head: &mut chain::Head,
) -> Result<(), String> {
    let mut repaired = 0;
    let ended = db::recover(conn, head, &mut |r| repair(r, &mut repaired))
        .map_err(|e| format!("{}: cannot end the sessions left open: {e}", path.display()))?;
    said_recovered(ended, repaired);
    Ok(())
}

/// [`recover`] where several nodes share the store: only this node's
/// sessions (another node's may be live).
fn recover_node(pg: &mut pg::Pg, head: &mut chain::Head) -> Result<(), String> {
    let open = pg.open_sessions(&head.node)?;
    let (now, mut repaired) = (SystemTime::now(), 0);
    let records: Vec<Record> = open
        .iter()
        .map(|s| {
            let who = (s.id.as_str(), s.user.as_str(), s.target.as_str());
            let mut finish = |r: &str| repair(r, &mut repaired);
            Record::Event(db::left_open(
                (now, "bastion_restart"),
                who,
                s.recording.as_deref(),
                &mut finish,
            ))
        })
        .collect();
    db::Sink::write(pg, &records, head)
        .map_err(|e| format!("cannot end the sessions left open: {e}"))?;
    said_recovered(open.len(), repaired);
    Ok(())
}

/// Cuts a recording a crash left back to its last whole event (counted in
/// `repaired`); its digest after, if it is there.
pub(crate) fn repair(r: &str, repaired: &mut usize) -> Option<(String, u64)> {
    match recording::repair(Path::new(r)) {
        Ok(changed) => *repaired += usize::from(changed),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => tracing::error!(recording = %r, error = %e, "cannot repair the recording"),
    }
    chain::file_digest(Path::new(r)).ok()
}

fn said_recovered(ended: usize, repaired: usize) {
    if ended > 0 {
        tracing::warn!(
            sessions = ended,
            recordings_repaired = repaired,
            "sessions left open by an unclean stop were ended (reason bastion_restart)"
        );
    }
}

/// A writer thread's clock for waiting on its queue with a deadline:
/// tokio's channel has no blocking receive with a timeout, so the thread
/// keeps a runtime of its own with only a timer, and blocks on it. (Naps
/// and polls instead made every event that came while a checkpoint was
/// pending wait up to a nap: 20 ms for each write-ahead row.)
pub(crate) struct Waiter(tokio::runtime::Runtime);

impl Waiter {
    pub(crate) fn new() -> Result<Waiter, String> {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map(Waiter)
            .map_err(|e| format!("cannot start a writer's timer: {e}"))
    }

    /// The next message within `wait` (a writer must wake to sign, or to
    /// try its storage again, even when nothing comes). Err once every
    /// sender is gone.
    pub(crate) fn recv_within<T>(
        &self,
        rx: &mut mpsc::Receiver<T>,
        wait: std::time::Duration,
    ) -> Result<Option<T>, ()> {
        // The timer made inside: it needs the runtime it runs on.
        match self
            .0
            .block_on(async { tokio::time::timeout(wait, rx.recv()).await })
        {
            Ok(Some(m)) => Ok(Some(m)),
            Ok(None) => Err(()),
            Err(_) => Ok(None),
        }
    }
}

/// RFC 3339 with milliseconds, UTC.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain with no checkpoints.
    fn unsigned() -> chain::Checkpoints {
        chain::Checkpoints {
            key: None,
            every_events: 1000,
            every: std::time::Duration::from_secs(60),
        }
    }

    /// The figures of issue 20: events written per second (the chain
    /// on), then `audit verify` over them, and SHA-256 linking alone.
    /// `WALISSH_EVENTS=1000000 cargo test --release --lib chain_cost -- --ignored --nocapture`
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    #[ignore]
    async fn chain_cost() {
        let n: usize = std::env::var("WALISSH_EVENTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100_000);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let key =
            russh::keys::PrivateKey::random(&mut rand::rng(), russh::keys::Algorithm::Ed25519)
                .unwrap();
        let public = key.public_key().clone();
        let checkpoints = chain::Checkpoints {
            key: Some(key),
            every_events: 1000,
            every: std::time::Duration::from_secs(60),
        };
        let (audit, thread) =
            Audit::start((&path, ""), OnFailure::Refuse, checkpoints, None).unwrap();
        let t = std::time::Instant::now();
        for i in 0..n {
            let mut ev = Event::new(Kind::Command)
                .user("alice")
                .field("command", format!("systemctl status nginx-{i}"))
                .field("exit_code", 0);
            ev.session = Some("0123456789abcdef".into());
            ev.target = Some("web1".into());
            audit.event(ev).await;
        }
        audit.flush().await;
        let written = t.elapsed();
        drop(audit);
        thread.join().unwrap();
        println!(
            "write: {n} events in {written:?}: {:.0} events/s",
            n as f64 / written.as_secs_f64()
        );
        let t = std::time::Instant::now();
        let report = verify::verify(&path, &verify::Options::key(public)).unwrap();
        assert!(report.broken.is_none(), "{}", report.line());
        assert_eq!(report.events as usize, n);
        println!("verify: {n} events in {:?}", t.elapsed());
        let row = chain::Row {
            seq: 1,
            ts: "2026-12-02T00:00:00.000000Z",
            session: Some("0123456789abcdef"),
            user: Some("alice"),
            target: Some("web1"),
            kind: "command",
            fields: "{\"command\":\"systemctl status nginx\",\"exit_code\":0}",
        };
        let t = std::time::Instant::now();
        let mut h = chain::genesis();
        for _ in 0..n {
            h = chain::link(&h, &row);
        }
        println!("link alone: {:?} per event", t.elapsed() / n as u32);
    }

    /// What one write-ahead row costs its caller: the round trip to the
    /// writer thread and one SQLite commit (WAL, synchronous = NORMAL).
    /// `cargo test --release --lib write_ahead_cost -- --ignored --nocapture`
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    #[ignore]
    async fn write_ahead_cost() {
        let dir = tempfile::tempdir().unwrap();
        let (audit, _thread) = Audit::start(
            (&dir.path().join("audit.db"), "n1"),
            OnFailure::Refuse,
            unsigned(),
            None,
        )
        .unwrap();
        let mut times = Vec::new();
        for i in 0..1000 {
            let ev = Event::new(Kind::Exec).field("command", format!("true {i}"));
            let t = std::time::Instant::now();
            audit.ahead(ev).await.unwrap();
            times.push(t.elapsed());
        }
        times.sort();
        println!(
            "write-ahead row: p50 {:?}, p99 {:?} (1000 rows, one at a time)",
            times[500], times[990]
        );
    }

    #[test]
    fn client_strings_are_cut_before_they_are_stored() {
        let mut ev = Event::new(Kind::AuthFail)
            .user("u".repeat(10_000))
            .field("command", "c".repeat(200_000));
        ev.target = Some("t".repeat(10_000));
        let ev = ev.bounded();
        assert!(ev.user.as_ref().unwrap().len() < MAX_NAME + 32);
        assert!(ev.target.as_ref().unwrap().ends_with("bytes cut ...]"));
        let c = ev.fields["command"].as_str().unwrap();
        assert!(c.len() < MAX_TEXT + 32);
        assert!(c.ends_with(&crate::text::marker(200_000 - MAX_TEXT)));
    }
}
