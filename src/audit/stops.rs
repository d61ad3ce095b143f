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

/// A stop addressed to one node, signed by the node that asks with the
/// audit key the nodes share: a notification anyone who can connect to
/// the database can send, so an unsigned or stale one is dropped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Stop {
    pub(crate) node: String,
    pub(crate) session: String,
    pub(crate) by: String,
    pub(crate) reason: String,
    pub(crate) via: String,
    /// The node that asked, and when (Unix seconds).
    pub(crate) from: String,
    pub(crate) at: u64,
    #[serde(default)]
    pub(crate) signature: String,
}

/// How long the asking node waits for the `session_killed` row.
pub(crate) const CONFIRM: Duration = Duration::from_secs(5);

/// How old a stop may be when it arrives.
const FRESH: u64 = 60;

impl Stop {
    /// What the signature signs: every field but it, in order.
    fn message(&self) -> String {
        let fields = [
            &self.node,
            &self.session,
            &self.by,
            &self.reason,
            &self.via,
            &self.from,
        ];
        let mut m = String::from("walissh stop\n");
        for f in fields {
            m.push_str(&serde_json::Value::from(f.as_str()).to_string());
            m.push('\n');
        }
        m.push_str(&self.at.to_string());
        m
    }

    pub(crate) fn sign(mut self, key: &russh::keys::PrivateKey) -> Result<Stop, String> {
        self.signature = super::chain::sign(key, &self.message())?;
        Ok(self)
    }

    /// Whether it is signed with `key` and fresh.
    fn good(&self, key: &russh::keys::PublicKey) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        now.abs_diff(self.at) <= FRESH
            && super::chain::signed_by(key, &self.message(), &self.signature)
    }
}

/// Unix seconds now.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
    pub(crate) fn listen_stops(&self, node: &str, key: russh::keys::PublicKey) -> Stops {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (this, node) = (self.clone(), node.to_string());
        let listener = self.spawn(async move {
            let mut failing = 0u32;
            loop {
                match this.listen_once((&node, &key), &tx).await {
                    Ok(()) => failing = 0,
                    Err(e) => {
                        failing += 1;
                        // Said once it lasts: stops from other nodes do
                        // not reach this one meanwhile.
                        if failing == 5 {
                            tracing::warn!(error = %e, "stops from other nodes cannot be heard; trying again every second");
                        }
                    }
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
    async fn listen_once(
        &self,
        (node, key): (&str, &russh::keys::PublicKey),
        tx: &mpsc::Sender<Stop>,
    ) -> Result<(), String> {
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
                        if stop.node != node {
                            continue;
                        }
                        if !stop.good(key) {
                            tracing::warn!(from = %stop.from, "a stop not signed with the audit key, or stale, was dropped");
                            continue;
                        }
                        if tx.try_send(stop).is_err() {
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
            let client = this.aux().await?;
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
            let client = this.aux().await?;
            let row = client
                .query_opt(
                    &format!(
                        "SELECT s.fields::json ->> 'node', s.\"user\", s.target {} AND s.session = $1",
                        super::pg::OPEN_STARTS
                    ),
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

    /// Whether session `id` has been stopped (a `session_killed` or a
    /// `session_end` of it), asked every 100 ms for `within`.
    pub(crate) async fn stopped(&self, id: &str, within: Duration) -> Result<bool, String> {
        let (this, id) = (self.clone(), id.to_string());
        let asked = async move {
            let deadline = tokio::time::Instant::now() + within;
            loop {
                let client = this.aux().await?;
                let found = client
                    .query_opt(
                        "SELECT 1 FROM events WHERE session = $1 AND kind IN ('session_killed', 'session_end') LIMIT 1",
                        &[&id],
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                drop(client);
                if found.is_some() {
                    return Ok(true);
                }
                if tokio::time::Instant::now() >= deadline {
                    return Ok(false);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        self.spawn(asked).await.map_err(|e| e.to_string())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop(at: u64) -> Stop {
        Stop {
            node: "n2".into(),
            session: "s1".into(),
            by: "unix:root".into(),
            reason: "moved".into(),
            via: "cli".into(),
            from: "n1".into(),
            at,
            signature: String::new(),
        }
    }

    /// A stop is done only when signed with the audit key, unchanged and
    /// fresh: anyone who can connect to the database can notify.
    #[test]
    fn only_a_fresh_stop_signed_with_the_audit_key_is_done() {
        let key =
            russh::keys::PrivateKey::random(&mut rand::rng(), russh::keys::Algorithm::Ed25519)
                .unwrap();
        let other =
            russh::keys::PrivateKey::random(&mut rand::rng(), russh::keys::Algorithm::Ed25519)
                .unwrap();
        let public = key.public_key().clone();
        let good = stop(now()).sign(&key).unwrap();
        assert!(good.good(&public));
        assert!(!stop(now()).good(&public), "unsigned");
        assert!(
            !stop(now()).sign(&other).unwrap().good(&public),
            "another key"
        );
        assert!(
            !stop(now() - 2 * FRESH).sign(&key).unwrap().good(&public),
            "stale"
        );
        let mut changed = good.clone();
        changed.session = "s2".into();
        assert!(
            !changed.good(&public),
            "another session under the same signature"
        );
    }
}
