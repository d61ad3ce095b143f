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
use tokio_postgres::NoTls;

use super::db::{Linked, Sink};
use super::{Event, Kind, Record, chain, rfc3339};

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
/// How long a connection or a free pool slot is waited for before the
/// store counts as down (`on_failure` then decides).
const WAIT: Duration = Duration::from_secs(5);
/// Rows fetched in one query when copying for the readers.
const PAGE: i64 = 10_000;

/// A runtime for one command's database work (the CLI has none): with a
/// worker thread, since the pool's connections are tasks of their own,
/// which `Handle::block_on` on a current-thread runtime would never run.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))
}

/// A PostgreSQL audit: its pool, and the runtime its blocking callers
/// (the writer thread, the CLI) drive it on.
#[derive(Clone)]
pub(crate) struct Pg {
    pool: Pool,
    /// For the one connection outside the pool (`hold_node`).
    config: std::sync::Arc<tokio_postgres::Config>,
    rt: tokio::runtime::Handle,
    /// The URL without its password, for messages.
    pub(crate) name: String,
}

/// Where the password comes from: never the config file.
pub(crate) const PASSWORD_ENV: &str = "WALISSH_DATABASE_PASSWORD";

impl Pg {
    /// A pool for `url` (a libpq URL or key=value string, without a
    /// password), the password from `password` (read from the environment
    /// or a file by the caller). Connects lazily: a database down at start
    /// is found by the first write.
    pub(crate) fn new(
        url: &str,
        password: Option<&str>,
        rt: tokio::runtime::Handle,
    ) -> Result<Pg, String> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| format!("{url}: {e}"))?;
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
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL)
            .wait_timeout(Some(WAIT))
            .create_timeout(Some(WAIT))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| format!("{url}: {e}"))?;
        Ok(Pg {
            pool,
            config: std::sync::Arc::new(config),
            rt,
            name: url.to_string(),
        })
    }

    /// Runs `f` to its end from a thread outside the runtime.
    fn block<T>(&self, f: impl Future<Output = Result<T, String>>) -> Result<T, String> {
        self.rt.block_on(f)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, String> {
        self.pool
            .get()
            .await
            .map_err(|e| format!("{}: {e}", self.name))
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

    /// The sessions `node` left open, each with its user, target and
    /// recording. Blocking.
    pub(crate) fn open_sessions(&self, node: &str) -> Result<Vec<OpenSession>, String> {
        self.block(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT id, \"user\", target, recording FROM sessions WHERE ended IS NULL AND node = $1 ORDER BY started",
                    &[&node],
                )
                .await
                .map_err(|e| format!("{}: {e}", self.name))?;
            Ok(rows
                .iter()
                .map(|r| OpenSession {
                    id: r.get(0),
                    user: r.get(1),
                    target: r.get(2),
                    recording: r.get(3),
                })
                .collect())
        })
    }

    /// The conversation kept for `user` on `target` (async: the runtime
    /// awaits it).
    pub(crate) async fn conversation(&self, user: &str, target: &str) -> Option<String> {
        let client = self.client().await.ok()?;
        let row = client
            .query_opt(
                "SELECT messages FROM conversations WHERE \"user\" = $1 AND target = $2",
                &[&user, &target],
            )
            .await
            .ok()??;
        row.get(0)
    }

    /// Copies into the SQLite file `into` (made with the store's schema if
    /// need be) the events after seq `after`, the checkpoints after its
    /// newest, every session and the retention marker, exactly as stored:
    /// the readers (`walissh audit`, `sessions`, `audit verify`) then read
    /// every node's rows there. Returns the last seq copied. Blocking.
    pub(crate) fn copy_into(&self, into: &Path, after: i64) -> Result<i64, String> {
        let mut conn = super::db::open_writer(into)?;
        let err = |e: rusqlite::Error| format!("{}: {e}", into.display());
        let mut last = after;
        loop {
            let rows = self.block(async {
                let client = self.client().await?;
                client
                    .query(
                        "SELECT seq, ts, session, \"user\", target, kind, fields, hash FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
                        &[&last, &PAGE],
                    )
                    .await
                    .map_err(|e| format!("{}: {e}", self.name))
            })?;
            let tx = conn.transaction().map_err(err)?;
            for r in &rows {
                let seq: i64 = r.get(0);
                let (kind, fields): (String, String) = (r.get(5), r.get(6));
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO events (seq, ts, session, user, target, kind, fields, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .and_then(|mut st| {
                    st.execute(rusqlite::params![
                        seq,
                        r.get::<_, String>(1),
                        r.get::<_, Option<String>>(2),
                        r.get::<_, Option<String>>(3),
                        r.get::<_, Option<String>>(4),
                        kind,
                        fields,
                        r.get::<_, Option<String>>(7)
                    ])
                })
                .map_err(err)?;
                let text = serde_json::from_str(&fields)
                    .ok()
                    .and_then(|f| Kind::parse(&kind).and_then(|k| super::query::searchable(k, &f)));
                if let Some(text) = text {
                    tx.prepare_cached(
                        "INSERT OR REPLACE INTO events_text (rowid, text) VALUES (?1, ?2)",
                    )
                    .and_then(|mut st| st.execute(rusqlite::params![seq, text]))
                    .map_err(err)?;
                }
                last = seq;
            }
            tx.commit().map_err(err)?;
            if (rows.len() as i64) < PAGE {
                break;
            }
        }
        self.copy_rest(&mut conn, into)?;
        Ok(last)
    }

    /// The small tables, whole or from where the copy stands.
    fn copy_rest(&self, conn: &mut rusqlite::Connection, into: &Path) -> Result<(), String> {
        let err = |e: rusqlite::Error| format!("{}: {e}", into.display());
        let newest: i64 = conn
            .query_row("SELECT COALESCE(MAX(seq), -1) FROM checkpoints", [], |r| {
                r.get(0)
            })
            .map_err(err)?;
        let (checkpoints, sessions, pruned) = self.block(async {
            let client = self.client().await?;
            let e = |e: tokio_postgres::Error| format!("{}: {e}", self.name);
            let c = client
                .query(
                    "SELECT seq, ts, head, prev_seq, prev, signature FROM checkpoints WHERE seq > $1 ORDER BY seq",
                    &[&newest],
                )
                .await
                .map_err(e)?;
            let s = client
                .query(
                    "SELECT id, \"user\", target, client_addr, started, ended, recording, start_seq FROM sessions",
                    &[],
                )
                .await
                .map_err(e)?;
            let p = client
                .query_opt("SELECT seq, head, cp_seq, cp, ts, signature FROM pruned", &[])
                .await
                .map_err(e)?;
            Ok((c, s, p))
        })?;
        let tx = conn.transaction().map_err(err)?;
        for r in &checkpoints {
            let c = signed(r);
            let prev = c.prev.clone().unzip();
            tx.execute(
                "INSERT OR REPLACE INTO checkpoints (seq, ts, head, signature, prev_seq, prev) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![c.seq, c.ts, c.head, c.signature, prev.0, prev.1],
            )
            .map_err(err)?;
        }
        for r in &sessions {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO sessions (id, user, target, client_addr, started, ended, recording, start_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut st| {
                st.execute(rusqlite::params![
                    r.get::<_, String>(0),
                    r.get::<_, String>(1),
                    r.get::<_, String>(2),
                    r.get::<_, String>(3),
                    r.get::<_, String>(4),
                    r.get::<_, Option<String>>(5),
                    r.get::<_, Option<String>>(6),
                    r.get::<_, Option<i64>>(7)
                ])
            })
            .map_err(err)?;
        }
        if let Some(r) = pruned {
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
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)
    }
}

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
        let (client, connection) = self.config.connect(NoTls).await.map_err(err)?;
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
        f: impl AsyncFnOnce(
            &deadpool_postgres::Transaction<'_>,
            &mut chain::Head,
        ) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, String> {
        let mut client = self.client().await?;
        let err = |e: tokio_postgres::Error| format!("{}: {e}", self.name);
        let tx = client.transaction().await.map_err(err)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&HEAD_LOCK])
            .await
            .map_err(err)?;
        let (seq, hash, last) = read_head(&tx, &self.name).await?;
        head.resync(seq, hash, last);
        let out = f(&tx, head).await.map_err(err)?;
        tx.commit().await.map_err(err)?;
        Ok(out)
    }
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
            let (mut seq, mut hash) = (head.seq, head.hash.clone());
            let mut linked = Vec::new();
            let mut rows = Rows::default();
            for record in records {
                match record {
                    Record::Event(ev) | Record::Committed { event: ev, .. } => {
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
                        .await?;
                    }
                    Record::Flush(_) | Record::Prune(..) => {}
                }
            }
            rows.insert(tx, &head.node).await?;
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
        // Nothing of this node's waits: no round trip.
        head.due_in()?;
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
            .await?;
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
        _ask: &super::prune::Ask,
        _head: &chain::Head,
    ) -> Result<(super::prune::Pruned, Vec<super::prune::Doomed>), String> {
        // The config refuses keep_days with PostgreSQL; this is the wall
        // behind it.
        Err("retention is not built for PostgreSQL yet: nothing is pruned".into())
    }
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
            "INSERT INTO events (seq, ts, session, \"user\", target, kind, fields, hash)
             SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])",
            &[&self.seq, &self.ts, &self.session, &self.user, &self.target, &self.kind, &self.fields, &self.hash],
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
