//! Stopping a session that another node carries, where several bastions
//! share a PostgreSQL audit: the node asked (from its console or `walissh
//! sessions kill`) finds the session's node in the chain and sends it a
//! notification (`NOTIFY walissh_stop`); every node listens on a
//! connection of its own and stops the sessions addressed to it, auditing
//! `session_killed` as if it had been asked itself.
//!
//! Why the database and not node-to-node TLS: it is already the one thing
//! every node reaches and authenticates to, so there are no certificates
//! to issue, no addresses to publish, and a node behind a load balancer
//! needs no port of its own. Whoever can write the database can send such
//! a notification: the same trust the audit already puts in it for its
//! rows (and they are signed, a stop is audited by the node that does it).
//!
//! What it leaves to others: stopping itself (`session::kill`), the pool
//! and runtime (`pg`).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::pg::Pg;

/// The channel every node listens on.
const CHANNEL: &str = "walissh_stop";
/// Stops waiting for this node's tasks; past that, a stop is dropped (and
/// said in the log).
const QUEUE: usize = 64;

/// A stop addressed to one node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Stop {
    pub(crate) node: String,
    pub(crate) session: String,
    pub(crate) by: String,
    pub(crate) reason: String,
    pub(crate) via: String,
}

/// Where a node's stops arrive; listening ends when it is dropped.
pub(crate) struct Stops {
    pub(crate) rx: mpsc::Receiver<Stop>,
    listener: tokio::task::JoinHandle<()>,
}

impl Drop for Stops {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl Pg {
    /// Listens for stops addressed to `node`, on a connection of its own,
    /// connected again after an outage.
    pub(crate) fn listen_stops(&self, node: &str) -> Stops {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (this, node) = (self.clone(), node.to_string());
        let listener = self.spawn(async move {
            loop {
                if let Err(e) = this.listen_once(&node, &tx).await {
                    tracing::debug!(error = %e, "stops from other nodes: listening again");
                }
                if tx.is_closed() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        Stops { rx, listener }
    }

    /// One connection's listening, until it ends.
    async fn listen_once(&self, node: &str, tx: &mpsc::Sender<Stop>) -> Result<(), String> {
        use futures_util::StreamExt;
        let (client, mut connection) = self.connect().await?;
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        let sql = format!("LISTEN {CHANNEL}");
        let listen = client.batch_execute(&sql);
        // The connection is driven by reading its messages: both at once.
        let mut listen = std::pin::pin!(listen);
        let mut listening = false;
        loop {
            tokio::select! {
                done = &mut listen, if !listening => {
                    done.map_err(|e| e.to_string())?;
                    listening = true;
                }
                message = messages.next() => match message {
                    None => return Ok(()),
                    Some(Err(e)) => return Err(e.to_string()),
                    Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                        let Ok(stop) = serde_json::from_str::<Stop>(n.payload()) else {
                            continue;
                        };
                        if stop.node == node && tx.try_send(stop).is_err() {
                            tracing::warn!("a stop from another node was dropped: too many at once");
                        }
                    }
                    Some(Ok(_)) => {}
                }
            }
        }
    }

    /// Sends `stop` to its node. Async: the caller's runtime awaits it
    /// while this store's runs it.
    pub(crate) async fn send_stop(&self, stop: &Stop) -> Result<(), String> {
        let (this, payload) = (
            self.clone(),
            serde_json::to_string(stop).map_err(|e| e.to_string())?,
        );
        let sent = async move {
            let client = this.pooled().await?;
            client
                .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        self.spawn(sent).await.map_err(|e| e.to_string())?
    }

    /// The node that carries session `id`, and its user and target, if it
    /// is open: as the chain has it (a start with no end).
    pub(crate) async fn open_session(
        &self,
        id: &str,
    ) -> Result<Option<(String, String, String)>, String> {
        let (this, id) = (self.clone(), id.to_string());
        let found = async move {
            let client = this.pooled().await?;
            let row = client
                .query_opt(
                    "SELECT s.fields::json ->> 'node', s.\"user\", s.target FROM events s
                     WHERE s.kind = 'session_start' AND s.session = $1
                       AND NOT EXISTS (SELECT 1 FROM events e WHERE e.kind = 'session_end' AND e.session = $1)",
                    &[&id],
                )
                .await
                .map_err(|e| e.to_string())?;
            Ok(row.map(|r| {
                let text = |i: usize| r.get::<_, Option<String>>(i).unwrap_or_default();
                (text(0), text(1), text(2))
            }))
        };
        self.spawn(found).await.map_err(|e| e.to_string())?
    }
}
