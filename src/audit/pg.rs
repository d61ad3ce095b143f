//! The audit in PostgreSQL (`[audit] database = "postgres://…"`), for
//! several bastions writing one trail.
//!
//! What it owns: the pool (tokio-postgres through deadpool), the versioned
//! schema (refinery, `migrations/postgres`), the writer's side (`Sink`),
//! ending one node's sessions after its crash, conversations, and copying
//! rows into a local SQLite file for the readers.
//!
//! One chain for every node: each write takes a transaction-scoped
//! advisory lock, reads the head the last writer left, links its rows
//! after it and commits, so seq order is chain order whichever node wrote.
//! Checkpoints are made under the same lock. What it leaves to others: the
//! chain's arithmetic (`chain`), batching and retries (`db::writer_loop`),
//! and every query people read (`query`, `verify`, run on the copy).

use std::path::Path;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::db::{Linked, Sink};
use super::{Event, Kind, Record, chain, rfc3339};

mod prune;

mod embedded {
    refinery::embed_migrations!("migrations/postgres");
}

/// The advisory lock that makes the chain's head one for every node
/// (an arbitrary constant: "walissh" in ASCII).
const HEAD_LOCK: i64 = 0x0077_616c_6973_7368;
/// The advisory lock held while the schema is migrated, so that two nodes
/// starting at once do not both run a migration.
const MIGRATE_LOCK: i64 = HEAD_LOCK + 1;
/// Connections per bastion: the writer, a reader or two, and a spare.
const POOL: usize = 4;
/// Connections for what logins and stops ask.
const AUX_POOL: usize = 2;
/// How long a connection or a free pool slot is waited for before the
/// store counts as down (`on_failure` then decides).
const WAIT: Duration = Duration::from_secs(5);
/// The longest any one piece of database work may take, whatever hangs
/// (statements are cut at 60 s by the server first).
const DEADLINE: Duration = Duration::from_secs(90);
/// Rows fetched in one query when copying for the readers.
const PAGE: i64 = 1_000;

/// The runtime a PostgreSQL audit's connections run on: its own, with a
/// worker thread, whoever uses it (the daemon's writer thread, the CLI):
/// the pool's connections are tasks of their own, which must run whatever
/// the caller's thread is doing, and the daemon's main runtime is for
/// listening and signals. Shut down without waiting when the last handle
/// goes (which may be on an async thread).
struct Driver(Option<tokio::runtime::Runtime>);

impl Driver {
    fn start() -> Result<Driver, String> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("audit-pg")
            .enable_all()
            .build()
            .map(|rt| Driver(Some(rt)))
            .map_err(|e| format!("cannot start a runtime: {e}"))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A PostgreSQL audit: its pool, and the runtime its blocking callers
/// (the writer thread, the CLI) drive it on.
#[derive(Clone)]
pub(crate) struct Pg {
    pool: Pool,
    /// A small pool of its own for what logins and stops ask, so that a
    /// flood of them never takes the writer's connections.
    aux: Pool,
    /// For the connections outside the pool (`hold_node`, listening).
    config: std::sync::Arc<tokio_postgres::Config>,
    tls: MakeRustlsConnect,
    rt: tokio::runtime::Handle,
    _driver: std::sync::Arc<Driver>,
    /// The URL without its password, for messages.
    pub(crate) name: String,
}

/// An error with what caused it, on one line: a connection's
/// ("error performing TLS handshake") says why only in its sources
/// ("invalid peer certificate: UnknownIssuer").
fn said(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// The TLS a connection may take: with `sslmode=require`, the server's
/// certificate checked (its chain to `ca_file`'s certificates, or else
/// the system's roots, and its name: the URL's host) by rustls; with
/// `disable`, never asked. Blocking (reads the certificates).
fn tls(
    config: &tokio_postgres::Config,
    ca_file: Option<&Path>,
) -> Result<MakeRustlsConnect, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let asked = config.get_ssl_mode() != tokio_postgres::config::SslMode::Disable;
    match ca_file {
        Some(f) => {
            let err = |e: &dyn std::fmt::Display| {
                format!("[audit] database_ca_file {}: {e}", f.display())
            };
            for cert in CertificateDer::pem_file_iter(f).map_err(|e| err(&e))? {
                roots.add(cert.map_err(|e| err(&e))?).map_err(|e| err(&e))?;
            }
            if roots.is_empty() {
                return Err(err(&"no certificate in it"));
            }
        }
        None if asked => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
        None => {}
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(client))
}

/// Where the password comes from: never the config file.
pub(crate) const PASSWORD_ENV: &str = "WALISSH_DATABASE_PASSWORD";

impl Pg {
    /// A pool for `url` (a libpq URL or key=value string, without a
    /// password), the password from `password` (read from the environment
    /// or a file by the caller), the server's certificate checked against
    /// `ca_file` or the system's roots when `sslmode=require`. Connects
    /// lazily: a database down at start is found by the first write.
    pub(crate) fn new(
        url: &str,
        (password, ca_file): (Option<&str>, Option<&Path>),
    ) -> Result<Pg, String> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| format!("{url}: {e}"))?;
        // prefer is accepted only on this machine (the config's check): no
        // TLS tried there, so a local server's self-signed certificate
        // (Debian's "snakeoil") is no failure.
        if config.get_ssl_mode() == tokio_postgres::config::SslMode::Prefer {
            config.ssl_mode(tokio_postgres::config::SslMode::Disable);
        }
        let tls = tls(&config, ca_file)?;
        if config.get_password().is_some() {
            return Err(format!(
                "{url}: the password goes in ${PASSWORD_ENV} or [audit] database_password_file, not the URL"
            ));
        }
        if let Some(p) = password {
            config.password(p);
        }
        config.connect_timeout(WAIT);
        config.application_name("walissh");
        // Nothing waits without end: a lock another node holds while it
        // hangs, a statement on a stalled server, a transaction left open
        // by a paused node (which would hold the head's lock for every
        // node), a peer gone without a word (keepalives both ways).
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(10));
        config.keepalives_interval(Duration::from_secs(5));
        config.keepalives_retries(3);
        let ours = "-c lock_timeout=10s -c statement_timeout=60s \
                    -c idle_in_transaction_session_timeout=30s \
                    -c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3";
        let options = match config.get_options() {
            Some(given) => format!("{given} {ours}"),
            None => ours.to_string(),
        };
        config.options(&options);
        let pool_of = |size: usize| {
            let manager = Manager::from_config(
                config.clone(),
                tls.clone(),
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            Pool::builder(manager)
                .max_size(size)
                .wait_timeout(Some(WAIT))
                .create_timeout(Some(WAIT))
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .build()
                .map_err(|e| format!("{url}: {e}"))
        };
        let (pool, aux) = (pool_of(POOL)?, pool_of(AUX_POOL)?);
        let driver = Driver::start()?;
        let rt = driver
            .0
            .as_ref()
            .map(|r| r.handle().clone())
            .ok_or("no runtime")?;
        Ok(Pg {
            pool,
            aux,
            config: std::sync::Arc::new(config),
            tls,
            rt,
            _driver: std::sync::Arc::new(driver),
            name: url.to_string(),
        })
    }

    /// Runs `f` to its end, however long (each statement in it is bounded
    /// by the server's timeouts), from a thread outside the runtime.
    fn block_long<T>(&self, f: impl Future<Output = Result<T, String>>) -> Result<T, String> {
        self.rt.block_on(f)
    }

    /// Runs `f` to its end, or [`DEADLINE`], from a thread outside the
    /// runtime.
    fn block<T>(&self, f: impl Future<Output = Result<T, String>>) -> Result<T, String> {
        self.rt.block_on(async {
            match tokio::time::timeout(DEADLINE, f).await {
                Ok(done) => done,
                Err(_) => Err(format!(
                    "{}: no answer in {} s",
                    self.name,
                    DEADLINE.as_secs()
                )),
            }
        })
    }

    /// Runs `f` on this store's runtime.
    pub(super) fn spawn<T: Send + 'static>(
        &self,
        f: impl Future<Output = T> + Send + 'static,
    ) -> tokio::task::JoinHandle<T> {
        self.rt.spawn(f)
    }

    /// A connection outside the pool, whose driving is the caller's (to
    /// hold a lock, or to read notifications).
    pub(super) async fn connect(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<
                tokio_postgres::Socket,
                <MakeRustlsConnect as tokio_postgres::tls::MakeTlsConnect<
                    tokio_postgres::Socket,
                >>::Stream,
            >,
        ),
        String,
    > {
        self.config
            .connect(self.tls.clone())
            .await
            .map_err(|e| format!("{}: {}", self.name, said(&e)))
    }

    /// A connection from the small pool (logins, stops).
    pub(super) async fn aux(&self) -> Result<deadpool_postgres::Object, String> {
        self.aux
            .get()
            .await
            .map_err(|e| format!("{}: {}", self.name, said(&e)))
    }

    /// Whether a running bastion holds `node`'s name now (asked at once).
    pub(crate) async fn node_running(&self, node: &str) -> Result<bool, String> {
        let (this, node) = (self.clone(), node.to_string());
        let asked = async move {
            let (client, held) = this.lock_node(&node, Duration::from_millis(1)).await?;
            drop(client);
            Ok(!held)
        };
        self.rt.spawn(asked).await.map_err(|e| e.to_string())?
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, String> {
        self.pool
            .get()
            .await
            .map_err(|e| format!("{}: {}", self.name, said(&e)))
    }

    /// Brings the schema to this version's (`walissh migrate`, and every
    /// start); returns the migrations it applied. Blocking.
    pub(crate) fn migrate(&self) -> Result<Vec<String>, String> {
        self.block(async {
            let mut client = self.client().await?;
            let err = |e: tokio_postgres::Error| format!("{}: {e}", self.name);
            client
                .execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK])
                .await
                .map_err(err)?;
            let report = embedded::migrations::runner()
                .run_async(&mut **client)
                .await
                .map_err(|e| format!("{}: migrating: {e}", self.name));
            // Unlocked however it went: a session-level lock outlives a
            // failed migration, and the connection goes back to the pool.
            let _ = client
                .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK])
                .await;
            Ok(report?
                .applied_migrations()
                .iter()
                .map(|m| format!("V{}__{}", m.version(), m.name()))
                .collect())
        })
    }

    /// The chain's head as the database has it now. Blocking.
    pub(crate) fn head(&self, policy: chain::Checkpoints) -> Result<chain::Head, String> {
        self.block(async {
            let client = self.client().await?;
            let (seq, hash, last) = read_head(&client, &self.name).await?;
            Ok(chain::Head::new(seq, hash, last, policy))
        })
    }

    /// The checkpoint at `seq`, if the database holds one. Blocking.
    pub(crate) fn checkpoint_at(&self, seq: i64) -> Result<Option<chain::Signed>, String> {
        self.block(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT seq, ts, head, prev_seq, prev, signature FROM checkpoints WHERE seq = $1",
                    &[&seq],
                )
                .await
                .map_err(|e| format!("{}: {e}", self.name))?;
            Ok(row.map(|r| signed(&r)))
        })
    }

    /// The last seq retention pruned, when the marker that says so is
    /// signed with `key`. Blocking.
    pub(crate) fn pruned_through(
        &self,
        key: Option<&russh::keys::PublicKey>,
    ) -> Result<Option<i64>, String> {
        let Some(key) = key else { return Ok(None) };
        self.block(async {
            let client = self.client().await?;
            let m = prune::marker(&client).await?;
            Ok(m.filter(|m| m.signed_by(key)).map(|m| m.seq))
        })
    }

    /// The sessions `node` left open, each with its user, target and
    /// recording: as the chain has them (a `session_start` of that node's
    /// with no `session_end`), never from the sessions table, which is
    /// not chained. Blocking.
    pub(crate) fn open_sessions(&self, node: &str) -> Result<Vec<OpenSession>, String> {
        self.block(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    &format!(
                        "SELECT s.session, s.\"user\", s.target, s.fields::json ->> 'recording'
                         {OPEN_STARTS} AND s.fields::json ->> 'node' = $1 ORDER BY s.seq"
                    ),
                    &[&node],
                )
                .await
                .map_err(|e| format!("{}: {e}", self.name))?;
            Ok(rows
                .iter()
                .map(|r| OpenSession {
                    id: r.get(0),
                    user: r.get::<_, Option<String>>(1).unwrap_or_default(),
                    target: r.get::<_, Option<String>>(2).unwrap_or_default(),
                    recording: r.get(3),
                })
                .collect())
        })
    }

    /// The conversation kept for `user` on `target`, read on this store's
    /// own runtime (so its connections stay there) while the caller's
    /// awaits.
    pub(crate) async fn conversation(&self, user: &str, target: &str) -> Option<String> {
        let (this, user, target) = (self.clone(), user.to_string(), target.to_string());
        let read = async move {
            let client = this.client().await.ok()?;
            let row = client
                .query_opt(
                    "SELECT messages FROM conversations WHERE \"user\" = $1 AND target = $2",
                    &[&user, &target],
                )
                .await
                .ok()??;
            row.get(0)
        };
        self.rt.spawn(read).await.ok().flatten()
    }

    /// Copies into the SQLite file `into` (made with the store's schema if
    /// need be) the events after seq `after`, the checkpoints after its
    /// newest, the sessions started since or still open in it, and the
    /// retention marker, exactly as stored,
    /// all from one snapshot of the database (a read-only repeatable-read
    /// transaction: what other nodes commit meanwhile is not half in it).
    /// The readers (`walissh audit`, `sessions`, `audit verify`) then read
    /// every node's rows there. Returns the last seq copied. Blocking.
    pub(crate) fn copy_into(&self, into: &Path, after: i64) -> Result<i64, String> {
        let mut conn = super::db::open_writer(into)?;
        let into_err = |e: rusqlite::Error| format!("{}: {e}", into.display());
        let newest: i64 = conn
            .query_row("SELECT COALESCE(MAX(seq), -1) FROM checkpoints", [], |r| {
                r.get(0)
            })
            .map_err(into_err)?;
        // Of the sessions, only what can have changed since: the ones
        // started after `after`, and the ones the copy has still open.
        let open: Vec<String> = conn
            .prepare("SELECT id FROM sessions WHERE ended IS NULL")
            .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
            .map_err(into_err)?;
        self.block_long(async {
            let mut client = self.client().await?;
            let err = |e: tokio_postgres::Error| format!("{}: {e}", self.name);
            let tx = client
                .build_transaction()
                .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(err)?;
            let mut last = after;
            loop {
                let rows = tx
                    .query(
                        "SELECT seq, ts, session, \"user\", target, kind, fields, hash FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
                        &[&last, &PAGE],
                    )
                    .await
                    .map_err(err)?;
                let full = rows.len() as i64 == PAGE;
                last = copy_events(&mut conn, &rows).map_err(into_err)?.unwrap_or(last);
                if !full {
                    break;
                }
            }
            let checkpoints = tx
                .query(
                    "SELECT seq, ts, head, prev_seq, prev, signature FROM checkpoints WHERE seq > $1 ORDER BY seq",
                    &[&newest],
                )
                .await
                .map_err(err)?;
            let sessions = tx
                .query(
                    "SELECT id, \"user\", target, client_addr, started, ended, recording, start_seq FROM sessions
                     WHERE start_seq > $1 OR id = ANY($2) ORDER BY start_seq, id",
                    &[&after, &open],
                )
                .await
                .map_err(err)?;
            let pruned = tx
                .query_opt("SELECT seq, head, cp_seq, cp, ts, signature FROM pruned", &[])
                .await
                .map_err(err)?;
            tx.commit().await.map_err(err)?;
            copy_rest(&mut conn, (&checkpoints, &sessions, pruned.as_ref())).map_err(into_err)?;
            Ok(last)
        })
    }
}

/// One page of events into the copy, with their search index; the last
/// seq among them.
fn copy_events(
    conn: &mut rusqlite::Connection,
    rows: &[tokio_postgres::Row],
) -> rusqlite::Result<Option<i64>> {
    let tx = conn.transaction()?;
    let mut last = None;
    for r in rows {
        let seq: i64 = r.get(0);
        let (kind, fields): (String, String) = (r.get(5), r.get(6));
        tx.prepare_cached(
            "INSERT OR REPLACE INTO events (seq, ts, session, user, target, kind, fields, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(rusqlite::params![
            seq,
            r.get::<_, String>(1),
            r.get::<_, Option<String>>(2),
            r.get::<_, Option<String>>(3),
            r.get::<_, Option<String>>(4),
            kind,
            fields,
            r.get::<_, Option<String>>(7)
        ])?;
        let text = serde_json::from_str(&fields)
            .ok()
            .and_then(|f| Kind::parse(&kind).and_then(|k| super::query::searchable(k, &f)));
        if let Some(text) = text {
            tx.prepare_cached("INSERT OR REPLACE INTO events_text (rowid, text) VALUES (?1, ?2)")?
                .execute(rusqlite::params![seq, text])?;
        }
        last = Some(seq);
    }
    tx.commit()?;
    Ok(last)
}

/// The small tables into the copy: new checkpoints, every session (in
/// the order their starts were chained), the retention marker (and what
/// it pruned goes from the copy).
fn copy_rest(
    conn: &mut rusqlite::Connection,
    (checkpoints, sessions, pruned): (
        &[tokio_postgres::Row],
        &[tokio_postgres::Row],
        Option<&tokio_postgres::Row>,
    ),
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    for r in checkpoints {
        let c = signed(r);
        let prev = c.prev.clone().unzip();
        tx.execute(
            "INSERT OR REPLACE INTO checkpoints (seq, ts, head, signature, prev_seq, prev) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![c.seq, c.ts, c.head, c.signature, prev.0, prev.1],
        )?;
    }
    for r in sessions {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO sessions (id, user, target, client_addr, started, ended, recording, start_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(rusqlite::params![
            r.get::<_, String>(0),
            r.get::<_, String>(1),
            r.get::<_, String>(2),
            r.get::<_, String>(3),
            r.get::<_, String>(4),
            r.get::<_, Option<String>>(5),
            r.get::<_, Option<String>>(6),
            r.get::<_, Option<i64>>(7)
        ])?;
    }
    if let Some(r) = pruned {
        // What the database pruned goes from the copy too (a mirror kept
        // from before the pass holds it still).
        super::prune::drop_through(&tx, 0, r.get::<_, i64>(0))?;
        tx.execute(
            "INSERT OR REPLACE INTO pruned (id, seq, head, cp_seq, cp, ts, signature) VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![
                r.get::<_, i64>(0),
                r.get::<_, String>(1),
                r.get::<_, i64>(2),
                r.get::<_, String>(3),
                r.get::<_, String>(4),
                r.get::<_, String>(5)
            ],
        )?;
    }
    tx.commit()
}

/// The `session_start` rows (as `s`) the chain has not ended: the open
/// sessions, whatever the unchained sessions table says.
pub(super) const OPEN_STARTS: &str =
    "FROM events s WHERE s.kind = 'session_start' AND s.session IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM events e WHERE e.kind = 'session_end' AND e.session = s.session)";

/// The advisory locks' class for node names (two-key locks, a space of
/// their own beside the head's one-key lock): "wali".
const NODE_LOCK_CLASS: i32 = 0x7761_6c69;
/// How long a node's name is waited for, at a start or a reap, before a
/// bastion holding it counts as running.
const NODE_WAIT: Duration = Duration::from_secs(3);
/// How soon PostgreSQL notices a node's machine gone (its connection's
/// keepalives: idle, interval, count), so that its lock is freed for a
/// reap.
const NODE_KEEPALIVE: &str =
    "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3";

/// A running node's claim on its name: a session-level advisory lock on
/// a connection of its own, held while the node runs (and taken again
/// after an outage). A node that dies, however, frees it when PostgreSQL
/// sees the connection gone. Dropped: released.
pub(crate) struct NodeHold {
    keeper: tokio::task::JoinHandle<()>,
}

impl Drop for NodeHold {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

impl Pg {
    /// A connection of its own, with keepalives, holding `node`'s lock if
    /// it was free or freed within `wait`: the client (dropping it releases
    /// the lock), and whether it holds it. The wait lets a node that just
    /// died go: PostgreSQL frees its lock when it reads the connection's
    /// end, a moment after the kernel closed it.
    async fn lock_node(
        &self,
        node: &str,
        wait: Duration,
    ) -> Result<(tokio_postgres::Client, bool), String> {
        let err = |e: tokio_postgres::Error| format!("{}: {e}", self.name);
        let (client, connection) = self.connect().await?;
        self.rt.spawn(async move {
            let _ = connection.await;
        });
        client.batch_execute(NODE_KEEPALIVE).await.map_err(err)?;
        let timeout = format!("SET lock_timeout = {}", wait.as_millis().max(1));
        client.batch_execute(&timeout).await.map_err(err)?;
        let locked = client
            .execute(
                "SELECT pg_advisory_lock($1, hashtext($2))",
                &[&NODE_LOCK_CLASS, &node],
            )
            .await;
        let held = match locked {
            Ok(_) => true,
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => {
                false
            }
            Err(e) => return Err(err(e)),
        };
        client
            .batch_execute("RESET lock_timeout")
            .await
            .map_err(err)?;
        Ok((client, held))
    }

    /// Claims `node`'s name for this bastion, refusing when a running one
    /// holds it: two nodes of one name would end each other's sessions at
    /// start. Blocking.
    pub(crate) fn hold_node(&self, node: &str) -> Result<NodeHold, String> {
        let (client, held) = self.block(self.lock_node(node, NODE_WAIT))?;
        if !held {
            return Err(format!(
                "node name {node} is held by a running bastion on {}: give each node its own [server] node_name",
                self.name
            ));
        }
        let (this, node) = (self.clone(), node.to_string());
        let keeper = self.rt.spawn(async move {
            let mut client = client;
            loop {
                // Held until the connection ends (an outage, a restart of
                // the server); then taken again once it can be.
                while !client.is_closed() {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                loop {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    match this.lock_node(&node, NODE_WAIT).await {
                        Ok((c, true)) => {
                            client = c;
                            break;
                        }
                        Ok((_, false)) => tracing::error!(
                            %node,
                            "another bastion holds this node's name: give each node its own [server] node_name"
                        ),
                        Err(_) => {}
                    }
                }
            }
        });
        Ok(NodeHold { keeper })
    }

    /// Runs `f` while holding dead `node`'s name, so that it cannot start
    /// meanwhile; refused while a running bastion holds it. Blocking.
    pub(crate) fn while_dead<T>(
        &self,
        node: &str,
        f: impl FnOnce() -> Result<T, String>,
    ) -> Result<T, String> {
        let (client, held) = self.block(self.lock_node(node, NODE_WAIT))?;
        if !held {
            return Err(format!(
                "node {node} is running (it holds its name on {}): stop it first; a node that starts again ends its own sessions",
                self.name
            ));
        }
        let out = f();
        drop(client);
        out
    }
}

impl Pg {
    /// Counts an attempt from `addr` on `node` (a row, kept if it fails)
    /// and returns its id with how many rows other nodes have from the
    /// address within `within`, in one statement. Now and then, rows older
    /// than a day go.
    pub(crate) async fn reserve_attempt(
        &self,
        addr: String,
        node: String,
        within: Duration,
    ) -> Result<(i64, u32), String> {
        let this = self.clone();
        let secs = within.as_secs_f64();
        let sweep = rand::random::<u8>() == 0;
        let asked = async move {
            let client = this.aux().await?;
            let e = |e: tokio_postgres::Error| e.to_string();
            let row = client
                .query_one(
                    "WITH others AS (SELECT count(*) AS n FROM login_failures
                                     WHERE addr = $1 AND node <> $2 AND at > now() - make_interval(secs => $3))
                     INSERT INTO login_failures (addr, node) VALUES ($1, $2)
                     RETURNING id, (SELECT n FROM others)",
                    &[&addr, &node, &secs],
                )
                .await
                .map_err(e)?;
            if sweep {
                let old = "DELETE FROM login_failures WHERE at < now() - interval '1 day'";
                client.execute(old, &[]).await.map_err(e)?;
            }
            Ok((
                row.get(0),
                u32::try_from(row.get::<_, i64>(1)).unwrap_or(u32::MAX),
            ))
        };
        self.rt.spawn(asked).await.map_err(|e| e.to_string())?
    }

    /// Failed passwords of `account` on nodes other than `node` within
    /// `within`, and whether it logged in from `addr` on any node lately.
    pub(crate) async fn account_elsewhere(
        &self,
        (account, node, addr): (String, String, String),
        within: Duration,
    ) -> Result<(u32, bool), String> {
        let this = self.clone();
        let secs = within.as_secs_f64();
        let asked = async move {
            let client = this.aux().await?;
            let row = client
                .query_one(
                    "SELECT (SELECT count(*) FROM account_failures
                             WHERE account = $1 AND node <> $2 AND at > now() - make_interval(secs => $3)),
                            EXISTS (SELECT 1 FROM account_addresses
                                    WHERE account = $1 AND addr = $4 AND at > now() - interval '7 days')",
                    &[&account, &node, &secs, &addr],
                )
                .await
                .map_err(|e| e.to_string())?;
            Ok((
                u32::try_from(row.get::<_, i64>(0)).unwrap_or(u32::MAX),
                row.get(1),
            ))
        };
        self.rt.spawn(asked).await.map_err(|e| e.to_string())?
    }

    /// A failed password of `account` on `node`, written (the next try
    /// on any node counts it).
    pub(crate) async fn account_failed(
        &self,
        (account, node): (String, String),
    ) -> Result<(), String> {
        let this = self.clone();
        let sweep = rand::random::<u8>() == 0;
        let written = async move {
            let client = this.aux().await?;
            let sql = "INSERT INTO account_failures (account, node) VALUES ($1, $2)";
            client
                .execute(sql, &[&account, &node])
                .await
                .map_err(|e| e.to_string())?;
            if sweep {
                let old = "DELETE FROM account_failures WHERE at < now() - interval '1 day';
                           DELETE FROM account_addresses WHERE at < now() - interval '7 days'";
                client.batch_execute(old).await.map_err(|e| e.to_string())?;
            }
            Ok(())
        };
        self.rt.spawn(written).await.map_err(|e| e.to_string())?
    }

    /// Notes, in the background, that `account` logged in from `addr`.
    pub(crate) fn account_known(&self, account: String, addr: String) {
        let this = self.clone();
        self.rt.spawn(async move {
            let Ok(client) = this.aux().await else { return };
            let sql = "INSERT INTO account_addresses (account, addr) VALUES ($1, $2)
                       ON CONFLICT (account, addr) DO UPDATE SET at = now()";
            let _ = client.execute(sql, &[&account, &addr]).await;
        });
    }

    /// Takes an attempt's row back, in the background.
    pub(crate) fn release_attempt(&self, id: i64) {
        let this = self.clone();
        self.rt.spawn(async move {
            if let Ok(client) = this.aux().await {
                let _ = client
                    .execute("DELETE FROM login_failures WHERE id = $1", &[&id])
                    .await;
            }
        });
    }
}

/// A session a node left open, as its row names it.
pub(crate) struct OpenSession {
    pub(crate) id: String,
    pub(crate) user: String,
    pub(crate) target: String,
    pub(crate) recording: Option<String>,
}

fn signed(r: &tokio_postgres::Row) -> chain::Signed {
    let prev = match (r.get::<_, Option<i64>>(3), r.get::<_, Option<String>>(4)) {
        (Some(s), Some(h)) => Some((s, h)),
        _ => None,
    };
    chain::Signed {
        seq: r.get(0),
        ts: r.get(1),
        head: r.get(2),
        prev,
        signature: r.get(5),
    }
}

/// The head as stored: the last row's seq and hash, and the newest
/// checkpoint's seq and id (or the retention marker's, when it deleted
/// every one).
async fn read_head(
    client: &impl deadpool_postgres::GenericClient,
    name: &str,
) -> Result<(i64, String, Option<(i64, String)>), String> {
    let err = |e: tokio_postgres::Error| format!("{name}: {e}");
    let last = client
        .query_opt(
            "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1",
            &[],
        )
        .await
        .map_err(err)?;
    let checkpoint = client
        .query_opt(
            "SELECT seq, ts, head, prev_seq, prev, signature FROM checkpoints ORDER BY seq DESC LIMIT 1",
            &[],
        )
        .await
        .map_err(err)?;
    let pruned = client
        .query_opt("SELECT seq, head, cp_seq, cp FROM pruned", &[])
        .await
        .map_err(err)?;
    // A last row without a hash was put there around walissh: the chain
    // goes on from the zero hash, and verify says where it broke.
    let (seq, hash) = match (&last, &pruned) {
        (Some(r), _) => (
            r.get(0),
            r.get::<_, Option<String>>(1).unwrap_or_else(chain::genesis),
        ),
        (None, Some(m)) => (m.get(0), m.get(1)),
        (None, None) => (0, chain::genesis()),
    };
    let last_checkpoint = match (checkpoint, pruned) {
        (Some(c), _) => {
            let c = signed(&c);
            Some((c.seq, c.id()))
        }
        (None, Some(m)) => Some((m.get(2), m.get(3))),
        (None, None) => None,
    };
    Ok((seq, hash, last_checkpoint))
}

impl Pg {
    /// In one transaction under the head's lock: the head as the last
    /// writer (of any node) left it, then `f`'s writes.
    async fn under_lock<T>(
        &self,
        head: &mut chain::Head,
        f: impl AsyncFnOnce(&deadpool_postgres::Transaction<'_>, &mut chain::Head) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut client = self.client().await?;
        let err = |e: tokio_postgres::Error| format!("{}: {e}", self.name);
        let tx = client.transaction().await.map_err(err)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&HEAD_LOCK])
            .await
            .map_err(err)?;
        let (seq, hash, last) = read_head(&tx, &self.name).await?;
        self.check_signed_head(&tx, head, (seq, &hash)).await?;
        head.resync(seq, hash, last);
        let out = f(&tx, head).await?;
        tx.commit().await.map_err(err)?;
        Ok(out)
    }

    /// The head the database holds must be the one the last writer signed
    /// (`head` table), with the audit key this node has: else rows were
    /// added, changed or removed around walissh, or a node runs with
    /// another key, and nothing is linked after it.
    async fn check_signed_head(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        head: &chain::Head,
        (seq, hash): (i64, &str),
    ) -> Result<(), String> {
        let err = |e: tokio_postgres::Error| format!("{}: {e}", self.name);
        let key = head
            .public_key()
            .ok_or("no audit key: nothing is written to a shared audit without one")?;
        let signed = tx
            .query_opt("SELECT seq, hash, node, signature FROM head", &[])
            .await
            .map_err(err)?;
        // Never backwards: rows this node wrote are gone (a restore of an
        // older copy, rows deleted with an old head's signature put back).
        if seq < head.seq {
            return Err(format!(
                "{}: the audit's rows end at seq {seq}, before seq {} this node wrote: rows were removed around walissh; nothing is linked after them (run walissh audit verify)",
                self.name, head.seq
            ));
        }
        // An empty chain is new only to a node that has written nothing.
        let fresh = seq == 0 && hash == chain::genesis() && head.seq == 0;
        let Some(row) = signed else {
            return match fresh {
                true => Ok(()),
                false => Err(format!(
                    "{}: the audit's head is not signed: rows were put there around walissh; nothing is linked after them (run walissh audit verify)",
                    self.name
                )),
            };
        };
        let (s, h, node, sig): (i64, String, String, String) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        if !chain::signed_by(&key, &head_message(s, &h), &sig) {
            return Err(format!(
                "{}: the audit's head (seq {s}, by node {node}) is not signed with this node's audit key: copy <state_dir>/audit_key from the first node to every node",
                self.name
            ));
        }
        if (s, h.as_str()) != (seq, hash) {
            return Err(format!(
                "{}: the audit's rows end at seq {seq}, but node {node} signed its head at seq {s}: rows were added, changed or removed around walissh; nothing is linked after them (run walissh audit verify)",
                self.name
            ));
        }
        Ok(())
    }
}

/// What a head's signature signs.
fn head_message(seq: i64, hash: &str) -> String {
    format!("walissh audit head\n{seq}\n{hash}\n")
}

/// Signs the head at `seq` and `hash` as this node's, in `tx`.
async fn sign_head(
    tx: &deadpool_postgres::Transaction<'_>,
    head: &chain::Head,
    (seq, hash): (i64, &str),
) -> Result<(), String> {
    let signature = head.sign(&head_message(seq, hash))?;
    tx.execute(
        "INSERT INTO head (id, seq, hash, node, signature) VALUES (1, $1, $2, $3, $4)
         ON CONFLICT (id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash, node = EXCLUDED.node, signature = EXCLUDED.signature",
        &[&seq, &hash, &head.node, &signature],
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(())
}

impl Sink for Pg {
    fn write(
        &mut self,
        records: &[Record],
        head: &mut chain::Head,
    ) -> Result<Vec<(i64, String)>, String> {
        let this = self.clone();
        let mut moved = None;
        let linked = self.block(this.under_lock(head, async |tx, head| {
            let written = already_written(tx, records).await?;
            let (mut seq, mut hash) = (head.seq, head.hash.clone());
            let mut linked = Vec::new();
            let mut rows = Rows::default();
            for record in records {
                match record {
                    Record::Event(ev) | Record::Committed { event: ev, .. } => {
                        // Written by an earlier try whose answer was lost.
                        if let Some(there) = written.get(&rid(ev)) {
                            linked.push(there.clone());
                            continue;
                        }
                        let l = super::db::link_event((seq, &hash, &head.node), ev);
                        (seq, hash) = (l.seq, l.hash.clone());
                        linked.push((l.seq, l.hash.clone()));
                        rows.push(ev, l);
                    }
                    Record::Conversation {
                        user,
                        target,
                        messages,
                    } => {
                        tx.execute(
                            "INSERT INTO conversations (\"user\", target, updated, messages) VALUES ($1, $2, $3, $4)
                             ON CONFLICT (\"user\", target) DO UPDATE SET updated = EXCLUDED.updated, messages = EXCLUDED.messages",
                            &[user, target, &rfc3339(std::time::SystemTime::now()), messages],
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                    }
                    Record::Flush(_) | Record::Prune(..) => {}
                }
            }
            if !rows.seq.is_empty() {
                rows.insert(tx, &head.node).await.map_err(|e| e.to_string())?;
                sign_head(tx, head, (seq, &hash)).await?;
            }
            moved = Some((seq, hash));
            Ok(linked)
        }))?;
        if let Some((seq, hash)) = moved {
            head.committed(seq, hash, linked.len() as u64);
        }
        Ok(linked)
    }

    fn checkpoint(
        &mut self,
        head: &mut chain::Head,
        force: bool,
    ) -> Option<Result<chain::Signed, String>> {
        // No round trip unless one is due (or forced) for this node's rows.
        let due = head.due_in()?;
        if !force && !due.is_zero() {
            return None;
        }
        let this = self.clone();
        let ts = rfc3339(std::time::SystemTime::now());
        let mut made = None;
        let stored = self.block(this.under_lock(head, async |tx, head| {
            // Another node may have signed this very head already.
            let Some(c) = head.checkpoint(&ts, force) else {
                return Ok(());
            };
            let c = match c {
                Ok(c) => c,
                Err(e) => {
                    made = Some(Err(e));
                    return Ok(());
                }
            };
            let prev = c.prev.clone().unzip();
            tx.execute(
                "INSERT INTO checkpoints (seq, ts, head, signature, prev_seq, prev) VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (seq) DO NOTHING",
                &[&c.seq, &c.ts, &c.head, &c.signature, &prev.0, &prev.1],
            )
            .await
            .map_err(|e| e.to_string())?;
            // One was there at this seq already: it must sign this head.
            let there = tx
                .query_one("SELECT head FROM checkpoints WHERE seq = $1", &[&c.seq])
                .await
                .map_err(|e| e.to_string())?;
            if there.get::<_, String>(0) != c.head {
                return Err(format!("a checkpoint at seq {} signs another head", c.seq));
            }
            made = Some(Ok(c));
            Ok(())
        }));
        match stored {
            Err(e) => Some(Err(e)),
            Ok(()) => made,
        }
    }

    fn prune(
        &mut self,
        ask: &super::prune::Ask,
        head: &mut chain::Head,
    ) -> Result<(super::prune::Pruned, Vec<super::prune::Doomed>), String> {
        self.clone().prune_pass(ask, head)
    }
}

/// An event's id as stored.
fn rid(ev: &Event) -> String {
    format!("{:032x}", ev.rid)
}

/// The seq and hash of each of `records`' events already in the database,
/// by id.
async fn already_written(
    tx: &deadpool_postgres::Transaction<'_>,
    records: &[Record],
) -> Result<std::collections::HashMap<String, (i64, String)>, String> {
    let ids: Vec<String> = records
        .iter()
        .filter_map(|r| match r {
            Record::Event(ev) | Record::Committed { event: ev, .. } => Some(rid(ev)),
            _ => None,
        })
        .collect();
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let rows = tx
        .query(
            "SELECT rid, seq, hash FROM events WHERE rid = ANY($1)",
            &[&ids],
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get(0),
                (r.get(1), r.get::<_, Option<String>>(2).unwrap_or_default()),
            )
        })
        .collect())
}

/// A batch's rows as columns, inserted by one statement each (UNNEST), so
/// a batch of 512 events is one round trip, not 512.
#[derive(Default)]
struct Rows {
    seq: Vec<i64>,
    ts: Vec<String>,
    session: Vec<Option<String>>,
    user: Vec<Option<String>>,
    target: Vec<Option<String>>,
    kind: Vec<&'static str>,
    fields: Vec<String>,
    hash: Vec<String>,
    rid: Vec<String>,
    /// `session_start` and `session_end` rows, which move `sessions`.
    starts: Vec<(String, Event, i64, String)>,
    ends: Vec<(String, String)>,
}

impl Rows {
    fn push(&mut self, ev: &Event, l: Linked) {
        if let Some(id) = &ev.session {
            match ev.kind {
                Kind::SessionStart => {
                    self.starts
                        .push((id.clone(), ev.clone(), l.seq, l.ts.clone()))
                }
                Kind::SessionEnd => self.ends.push((id.clone(), l.ts.clone())),
                _ => {}
            }
        }
        self.seq.push(l.seq);
        self.ts.push(l.ts);
        self.session.push(ev.session.clone());
        self.user.push(ev.user.clone());
        self.target.push(ev.target.clone());
        self.kind.push(ev.kind.as_str());
        self.fields.push(l.fields);
        self.hash.push(l.hash);
        self.rid.push(rid(ev));
    }

    async fn insert(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        node: &str,
    ) -> Result<(), tokio_postgres::Error> {
        if self.seq.is_empty() {
            return Ok(());
        }
        tx.execute(
            "INSERT INTO events (seq, ts, session, \"user\", target, kind, fields, hash, rid)
             SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])",
            &[&self.seq, &self.ts, &self.session, &self.user, &self.target, &self.kind, &self.fields, &self.hash, &self.rid],
        )
        .await?;
        for (id, ev, seq, ts) in &self.starts {
            let text = |k: &str| ev.fields.get(k).and_then(serde_json::Value::as_str);
            // ON CONFLICT DO NOTHING: a session id used twice (64 random
            // bits) must not stop the writer; verify says the row is not
            // this event's.
            tx.execute(
                "INSERT INTO sessions (id, \"user\", target, client_addr, started, recording, start_seq, node)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING",
                &[
                    id,
                    &ev.user.as_deref().unwrap_or_default(),
                    &ev.target.as_deref().unwrap_or_default(),
                    &text("client_addr").unwrap_or_default(),
                    ts,
                    &text("recording"),
                    seq,
                    &node,
                ],
            )
            .await?;
        }
        for (id, ts) in &self.ends {
            tx.execute("UPDATE sessions SET ended = $2 WHERE id = $1", &[id, ts])
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Audit, Event};
    use crate::config::OnFailure;
    use std::time::Instant;

    /// What writing the audit costs in PostgreSQL against SQLite (run by
    /// `bench/pg-audit`, which starts a throwaway server and sets
    /// `WALISSH_BENCH_PG`): rows per second from one node and from two at
    /// once (the head's lock between them), and the time one write-ahead
    /// row takes to commit (what an exec waits before it starts). Prints
    /// the figures; asserts only that every row was written.
    #[test]
    #[ignore]
    fn audit_write_costs() {
        let Ok(url) = std::env::var("WALISSH_BENCH_PG") else {
            eprintln!("skipped: WALISSH_BENCH_PG is not set (bench/pg-audit sets it)");
            return;
        };
        let key =
            russh::keys::PrivateKey::random(&mut rand::rng(), russh::keys::Algorithm::Ed25519)
                .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let n = 20_000;
        let open = |store: crate::audit::Store, node: &str| {
            let checkpoints = chain::Checkpoints {
                key: Some(key.clone()),
                every_events: 1000,
                every: Duration::from_secs(60),
            };
            Audit::open((store, node), OnFailure::Refuse, checkpoints, None).unwrap()
        };
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let flood = |audits: &[Audit]| {
            let began = Instant::now();
            runtime.block_on(async {
                for i in 0..n {
                    for a in audits {
                        a.event(Event::new(Kind::Exec).field("command", format!("echo {i}")))
                            .await;
                    }
                }
                for a in audits {
                    a.flush().await;
                }
            });
            (n * audits.len()) as f64 / began.elapsed().as_secs_f64()
        };
        let ahead = |a: &Audit| {
            let mut took: Vec<f64> = runtime.block_on(async {
                let mut took = Vec::new();
                for i in 0..200 {
                    let began = Instant::now();
                    a.ahead(Event::new(Kind::Exec).field("command", format!("ahead {i}")))
                        .await
                        .unwrap();
                    took.push(began.elapsed().as_secs_f64() * 1000.0);
                }
                took
            });
            took.sort_by(f64::total_cmp);
            (took[100], took[198])
        };
        let pg = || crate::audit::Store::Postgres {
            pg: Pg::new(&url, (None, None)).unwrap(),
            head_file: dir.path().join(format!("{}.head", rand::random::<u32>())),
        };
        let (sqlite, _t1) = open(
            crate::audit::Store::Sqlite(dir.path().join("audit.db")),
            "s",
        );
        let sqlite_rate = flood(std::slice::from_ref(&sqlite));
        let sqlite_ahead = ahead(&sqlite);
        let (a, _t2) = open(pg(), "a");
        let one_rate = flood(std::slice::from_ref(&a));
        let pg_ahead = ahead(&a);
        let (b, _t3) = open(pg(), "b");
        let two_rate = flood(&[a.clone(), b.clone()]);
        println!(
            "rows/s: sqlite {sqlite_rate:.0}, postgresql one node {one_rate:.0}, two nodes at once {two_rate:.0} (together)"
        );
        println!(
            "a write-ahead row committed, p50/p99 ms: sqlite {:.2}/{:.2}, postgresql {:.2}/{:.2}",
            sqlite_ahead.0, sqlite_ahead.1, pg_ahead.0, pg_ahead.1
        );
        let copy = dir.path().join("copy.db");
        let began = Instant::now();
        let last = a.pg_for_tests().copy_into(&copy, 0).unwrap();
        println!(
            "the readers' copy: {last} rows in {:.2} s",
            began.elapsed().as_secs_f64()
        );
        assert!(last as usize >= 3 * n + 200);
    }
}
