//! Blind relays: a tunnel target's jump (`[[targets]] jump = "tunnel"`),
//! a local forward the user may open (`[[users]] forward`, `ssh -L`) and
//! each connection to a remote forward (`remote`).
//! The bytes go through unread, as OpenSSH relays them; what is audited is
//! the tunnel: `tunnel_open` when it opens, `tunnel_close` with the bytes
//! each way and how long it lasted.
//!
//! What it owns: connecting (bounded in time), the relay, its rows. What
//! it leaves to others: which opens are relays (`jump::classify`), the
//! channel's acceptance (`server`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use russh::Channel;
use russh::server::Msg;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::jump::Relay;
use crate::audit::{Audit, Event, Kind};
use crate::shutdown::Watcher;

/// How long connecting to where a relay goes may take.
const CONNECT: Duration = Duration::from_secs(5);

/// Connects to where `relay` goes: the socket, or why not.
pub(crate) async fn connect(relay: &Relay) -> Result<TcpStream, String> {
    let to = (relay.host.as_str(), relay.port);
    match tokio::time::timeout(CONNECT, TcpStream::connect(to)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer in {} s", CONNECT.as_secs())),
    }
}

/// The row that names a relay, of `kind`.
fn row(kind: Kind, user: &str, relay: &Relay) -> Event {
    let mut ev = Event::new(kind)
        .user(user.to_string())
        .field("to", relay.asked.as_str())
        .field("via", relay.via);
    ev.target = relay.target.clone();
    ev
}

/// Relays `channel` and `socket` both ways (see [`run`]), the row naming
/// the address reached: the name asked for is the client's word.
pub(crate) async fn relay(
    audit: Audit,
    who: (String, String),
    relay: Relay,
    (channel, socket): (Channel<Msg>, TcpStream),
    stop: Watcher,
) {
    let reached = socket
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    run(
        audit,
        who,
        (relay, reached),
        (channel.into_stream(), socket),
        stop,
    )
    .await
}

/// Relays the client's side `near` and the far side `far` both ways until
/// either ends or the bastion stops, with its `tunnel_open` and
/// `tunnel_close` rows: `address` is where it went (a relay) or who
/// connected (a remote forward).
pub(crate) async fn run<N, F>(
    audit: Audit,
    (user, client): (String, String),
    (relay, address): (Relay, String),
    (near, far): (N, F),
    mut stop: Watcher,
) where
    N: AsyncRead + AsyncWrite + Unpin,
    F: AsyncRead + AsyncWrite + Unpin,
{
    let opened = Instant::now();
    audit
        .event(
            row(Kind::TunnelOpen, &user, &relay)
                .field("client_addr", client)
                .field("address", address),
        )
        .await;
    let (up, down) = (AtomicU64::new(0), AtomicU64::new(0));
    let (client_rx, client_tx) = tokio::io::split(near);
    let (target_rx, target_tx) = tokio::io::split(far);
    let both = async {
        tokio::try_join!(
            pump(client_rx, target_tx, &up),
            pump(target_rx, client_tx, &down)
        )
    };
    tokio::select! {
        _ = both => {}
        _ = stop.requested() => {}
    }
    let close = row(Kind::TunnelClose, &user, &relay)
        .field("bytes_in", up.load(Ordering::Relaxed))
        .field("bytes_out", down.load(Ordering::Relaxed))
        .field("duration_s", opened.elapsed().as_secs_f64());
    audit.event(close).await;
}

/// Copies `from` to `to` until `from` ends (then ends `to`'s writing),
/// counting in `count`: what went through is counted even when the other
/// side breaks off.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    count: &AtomicU64,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(());
        }
        to.write_all(&buf[..n]).await?;
        count.fetch_add(n as u64, Ordering::Relaxed);
    }
}
