//! Remote forwards (`ssh -R`), only where a target opts in
//! (`[[targets]] remote_forward = true`). On a login to that target,
//! straight (`alice:web1@bastion`) or through the jump, walissh asks the
//! target itself to listen, over a login of its own, and relays each
//! connection made there back to the client as a `forwarded-tcpip`
//! channel, audited as a tunnel (`via = "remote"`). The bastion itself
//! never listens for a client.
//!
//! What it owns: the forwards a connection holds, and the relaying of
//! their connections. What it leaves to others: whether a forward may be
//! asked (`server`), the target's login and listening (`upstream`), the
//! relay and its rows (`tunnel`).

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc};

use super::RelaySlot;
use super::jump::Relay;
use super::tunnel;
use crate::audit::Audit;
use crate::shutdown::Watcher;
use crate::upstream::{Forwarded, RemoteForward};

/// How many connections to one remote forward are relayed at once; the
/// next waits (and, once the target's queue is full, is refused).
const MAX_CONNECTIONS: usize = 32;

/// The remote forwards a connection holds, by the address and port the
/// client asked for (what its cancel names).
#[derive(Default)]
pub(super) struct Remotes {
    held: HashMap<(String, u32), (RemoteForward, RelaySlot)>,
}

impl Remotes {
    /// Keeps `forward` (and its place among the connection's jumps and
    /// relays) until it is cancelled or the connection ends.
    pub(super) fn hold(&mut self, asked: (String, u32), forward: RemoteForward, slot: RelaySlot) {
        self.held.insert(asked, (forward, slot));
    }

    /// The forward the client asked for as `address:port` (or, for port
    /// 0, the port the target chose), no longer held.
    pub(super) fn release(&mut self, address: &str, port: u32) -> Option<RemoteForward> {
        let key = self
            .held
            .iter()
            .find(|((a, p), (f, _))| a == address && (*p == port || f.port == port))
            .map(|(k, _)| k.clone())?;
        let (forward, _slot) = self.held.remove(&key)?;
        Some(forward)
    }
}

/// What one forward's relays share: whose they are, where the target
/// listens, and the client's side to open channels on.
pub(super) struct Serving {
    pub(super) audit: Audit,
    /// The user and their client's address, for the rows.
    pub(super) who: (String, String),
    pub(super) target: String,
    /// Where the target listens, as the client asked (the port the
    /// target chose, for port 0).
    pub(super) listen: (String, u32),
    pub(super) client: russh::server::Handle,
}

/// Relays each connection `incoming` brings to the client, as a
/// `forwarded-tcpip` channel naming the forward the client asked for,
/// until the forward ends or the bastion stops.
pub(super) async fn serve(s: Serving, mut incoming: mpsc::Receiver<Forwarded>, mut stop: Watcher) {
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let (address, port) = s.listen.clone();
    loop {
        let next = tokio::select! {
            f = incoming.recv() => f,
            _ = stop.requested() => None,
        };
        let Some(f) = next else { return };
        let Ok(permit) = limit.clone().acquire_owned().await else {
            return;
        };
        let (from, from_port) = f.originator;
        let opened = s
            .client
            .channel_open_forwarded_tcpip(address.as_str(), port, from.as_str(), from_port)
            .await;
        let near = match opened {
            Ok(ch) => ch,
            Err(e) => {
                tracing::info!(target = %s.target, error = %e, "the client refused a remote forward's connection");
                continue;
            }
        };
        let relay = Relay {
            asked: format!("{address}:{port}"),
            host: address.clone(),
            port: u16::try_from(port).unwrap_or(0),
            target: Some(s.target.clone()),
            via: "remote",
        };
        let run = tunnel::run(
            s.audit.clone(),
            s.who.clone(),
            (relay, format!("{from}:{from_port}")),
            (near.into_stream(), f.channel.into_stream()),
            stop.clone(),
        );
        tokio::spawn(async move {
            run.await;
            drop(permit);
        });
    }
}
