//! Remote forwards (`ssh -R`), only where a target opts in
//! (`[[targets]] remote_forward = true`). On a login to that target,
//! straight (`alice:web1@bastion`) or through the jump, walissh asks the
//! target itself to listen, over a login of its own, and relays each
//! connection made there back to the client as a `forwarded-tcpip`
//! channel, audited as a tunnel (`via = "remote"`). The bastion itself
//! never listens for a client.
//!
//! A forward is a task of its own that owns the target's login and the
//! forward's places (`RelaySlot`). It asks again, before each connection
//! and every [`RECHECK`], whether the user may still have it (the
//! credential holds, the target still opts in and is still theirs), and
//! ends when they may not, when the client cancels it or goes, when the
//! target's login ends, or at shutdown: `remote_forward_open` and
//! `remote_forward_close` (with why) frame it in the audit.
//!
//! What it owns: the forwards a connection holds, their lives and the
//! relaying of their connections. What it leaves to others: the first
//! decision (`server`), the target's login and listening (`upstream`),
//! each relay and its rows (`tunnel`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, mpsc, oneshot};

use super::RelaySlot;
use super::jump::Relay;
use super::login::Proof;
use super::tunnel;
use crate::audit::{Event, Kind};
use crate::bastion::Bastion;
use crate::session::Credential as _;
use crate::shutdown::Watcher;
use crate::upstream::{Forwarded, RemoteForward};

/// How many connections to one remote forward are relayed at once; more
/// are refused (closed on the target) until one ends.
const MAX_CONNECTIONS: usize = 32;
/// How often a forward with no new connection asks again whether its
/// user may still have it (a revoked key, a reload).
const RECHECK: Duration = Duration::from_secs(15);

/// The remote forwards a connection holds, by the address and port the
/// target listens on (what the client's cancel names): each a way to end
/// its task. Dropped with the connection, which ends them all.
#[derive(Default)]
pub(super) struct Remotes {
    held: HashMap<(String, u32), oneshot::Sender<()>>,
}

impl Remotes {
    /// Whether a live forward listens on `address:port` (forwards that
    /// ended are forgotten here).
    pub(super) fn holds(&mut self, address: &str, port: u32) -> bool {
        self.held.retain(|_, end| !end.is_closed());
        self.held.contains_key(&(address.to_string(), port))
    }

    /// Notes a forward on `address:port`: what its task ends on.
    pub(super) fn hold(&mut self, address: &str, port: u32) -> oneshot::Receiver<()> {
        let (end, ended) = oneshot::channel();
        self.held.insert((address.to_string(), port), end);
        ended
    }

    /// Ends the forward on `address:port`, if one is held.
    pub(super) fn release(&mut self, address: &str, port: u32) -> bool {
        let end = self.held.remove(&(address.to_string(), port));
        end.is_some_and(|e| e.send(()).is_ok())
    }
}

/// One forward: whose it is, where the target listens, and the client's
/// side to open channels on.
pub(super) struct Serving {
    pub(super) bastion: Arc<Bastion>,
    pub(super) credential: Arc<Proof>,
    /// The user and their client's address, for the rows.
    pub(super) who: (String, String),
    pub(super) target: String,
    /// Where the target listens (the port it chose, for port 0).
    pub(super) listen: (String, u32),
    pub(super) client: russh::server::Handle,
}

/// What a forward holds while it lasts: the target's login, its places
/// among the connection's relays and the user's sessions. Nothing reads
/// them: dropping them when the forward ends is what they are for.
#[expect(dead_code, reason = "held for their drops")]
pub(super) struct Held {
    pub(super) forward: RemoteForward,
    pub(super) slot: RelaySlot,
}

impl Serving {
    /// Whether the user may still have this forward, as the config of the
    /// moment says; else why not.
    fn allowed(&self) -> Result<(), &'static str> {
        let live = self.bastion.live();
        let user = &self.who.0;
        if !self.credential.still_valid(&live, user) {
            return Err("credentials_revoked");
        }
        let theirs = live
            .config
            .user(user)
            .is_some_and(|u| u.may_reach(&self.target));
        let opts_in = live
            .config
            .targets
            .iter()
            .any(|t| t.name() == self.target && t.remote_forward);
        match theirs && opts_in {
            true => Ok(()),
            false => Err("not_allowed"),
        }
    }

    /// A row of `kind` naming this forward.
    fn row(&self, kind: Kind) -> Event {
        let mut ev = Event::new(kind)
            .user(self.who.0.clone())
            .field("to", format!("{}:{}", self.listen.0, self.listen.1))
            .field("client_addr", self.who.1.as_str());
        ev.target = Some(self.target.clone());
        ev
    }
}

/// Serves one forward until it ends (see the module's doc): each
/// connection `incoming` brings is relayed to the client as a
/// `forwarded-tcpip` channel naming the forward.
pub(super) async fn serve(
    s: Serving,
    held: Held,
    mut incoming: mpsc::Receiver<Forwarded>,
    mut ended: oneshot::Receiver<()>,
    mut stop: Watcher,
) {
    let audit = s.bastion.audit.clone();
    audit.event(s.row(Kind::RemoteForwardOpen)).await;
    let opened = Instant::now();
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut recheck = tokio::time::interval_at(tokio::time::Instant::now() + RECHECK, RECHECK);
    let mut connections = 0u64;
    let why = loop {
        let f = tokio::select! {
            f = incoming.recv() => f,
            _ = recheck.tick() => match s.allowed() {
                Ok(()) => continue,
                Err(why) => break why,
            },
            e = &mut ended => break if e.is_ok() { "cancelled" } else { "connection_closed" },
            _ = stop.requested() => break "shutdown",
        };
        let Some(f) = f else { break "target_closed" };
        if let Err(why) = s.allowed() {
            let _ = f.channel.close().await;
            break why;
        }
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            let _ = f.channel.close().await;
            continue;
        };
        let (address, port) = (&s.listen.0, s.listen.1);
        let (from, from_port) = f.originator;
        let opened = s
            .client
            .channel_open_forwarded_tcpip(address.as_str(), port, from.as_str(), from_port)
            .await;
        let near = match opened {
            Ok(ch) => ch,
            Err(e) => {
                // The target's side is closed, or the caller would hang
                // and its socket stay open on the target.
                let _ = f.channel.close().await;
                tracing::info!(target = %s.target, error = %e, "the client refused a remote forward's connection");
                continue;
            }
        };
        connections += 1;
        let relay = Relay {
            asked: format!("{address}:{port}"),
            host: address.clone(),
            port: u16::try_from(port).unwrap_or(0),
            target: Some(s.target.clone()),
            via: "remote",
        };
        let run = tunnel::run(
            audit.clone(),
            s.who.clone(),
            (relay, format!("{from}:{from_port}")),
            (near.into_stream(), f.channel.into_stream()),
            stop.clone(),
        );
        tokio::spawn(async move {
            run.await;
            drop(permit);
        });
    };
    // What waits is refused on the target; then the target's login ends,
    // and with it the listening.
    incoming.close();
    while let Ok(f) = incoming.try_recv() {
        let _ = f.channel.close().await;
    }
    drop(held);
    let close = s
        .row(Kind::RemoteForwardClose)
        .field("reason", why)
        .field("connections", connections)
        .field("duration_s", opened.elapsed().as_secs_f64());
    audit.event(close).await;
}
