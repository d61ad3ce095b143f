//! The console's connections: accepted (plain TCP, or TLS from `tls`),
//! bounded in number (all at once, and per client address), each served
//! by hyper's HTTP/1 with a deadline on every request's head, until
//! shutdown lets them finish what they were doing.
//!
//! axum's own `serve` sets neither bound nor deadline: one client that
//! opens connections and sends a header a byte a minute would hold the
//! console. What it leaves to others: the routes (`web`), the handshakes
//! (`tls`), the live views once upgraded (`live`: they are counted
//! there).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{Semaphore, watch};

use super::Peer;
use crate::shutdown::Watcher;

/// Connections at once; more are closed as they come.
const MAX_CONNECTIONS: usize = 256;
/// Connections at once from one address.
const PER_ADDRESS: usize = 32;
/// How long a request's head (its line and headers) may take to arrive,
/// from the first byte or from the end of the last answer.
const HEAD: Duration = Duration::from_secs(10);
/// How long open connections get to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(5);

/// Connections per address.
#[derive(Default)]
struct PerAddress(Mutex<HashMap<IpAddr, usize>>);

/// One connection's place in [`PerAddress`], given back when dropped.
struct Slot {
    all: Arc<PerAddress>,
    ip: IpAddr,
}

impl PerAddress {
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(ip).or_insert(0);
        if *n >= PER_ADDRESS {
            return None;
        }
        *n += 1;
        Some(Slot {
            all: self.clone(),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut map = self.all.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// Serves `app` on what `listener` accepts until shutdown.
pub(super) async fn run<L>(mut listener: L, app: Router, mut shutdown: Watcher)
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    let all = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let per = Arc::new(PerAddress::default());
    let (closing, closed) = watch::channel(false);
    let mut open = tokio::task::JoinSet::new();
    loop {
        let (io, peer) = tokio::select! {
            c = listener.accept() => c,
            _ = shutdown.requested() => break,
        };
        while open.try_join_next().is_some() {}
        let Ok(permit) = all.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "web console: too many connections");
            continue;
        };
        let Some(slot) = per.take(peer.ip()) else {
            tracing::debug!(%peer, "web console: too many connections from this address");
            continue;
        };
        let app = app.clone().layer(axum::Extension(ConnectInfo(Peer(peer))));
        let mut closed = closed.clone();
        open.spawn(async move {
            let _held = (permit, slot);
            let service = TowerToHyperService::new(app);
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new()).header_read_timeout(HEAD);
            let conn = http
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            tokio::pin!(conn);
            let stop = async move { closed.wait_for(|c| *c).await.is_ok() };
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    let _ = closing.send(true);
    let drained = async { while open.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(DRAIN, drained).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_its_share() {
        let per = Arc::new(PerAddress::default());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let held: Vec<Slot> = (0..PER_ADDRESS).map(|_| per.take(ip).unwrap()).collect();
        assert!(per.take(ip).is_none());
        assert!(per.take("192.0.2.2".parse().unwrap()).is_some());
        drop(held);
        assert!(per.take(ip).is_some());
        assert!(per.0.lock().unwrap().len() <= 1);
    }
}
