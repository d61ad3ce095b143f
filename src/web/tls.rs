//! The console over TLS (`[web] tls_cert`, `tls_key`): the certificate
//! chain and key, read at start, and a listener whose handshakes run
//! beside each other, each bounded in time and in number, so a client
//! that never finishes one holds no one else up. What it leaves to
//! others: what is served over it (`web`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A handshake not done in this long is given up.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Handshakes at once; a connection past them is closed at once.
const MAX_HANDSHAKES: usize = 64;

/// The acceptor for the chain in `cert` and the key in `key` (PEM), or
/// a one-line error naming the file.
pub(crate) fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let named = |p: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", p.display());
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| named(cert, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| named(cert, &e))?;
    if chain.is_empty() {
        return Err(named(cert, &"no certificate in it"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| named(key, &e))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| named(cert, &e))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Connections whose handshake is done, as axum takes them.
pub(super) struct Listener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl Listener {
    pub(super) fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<Listener> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(MAX_HANDSHAKES);
        tokio::spawn(handshakes(tcp, acceptor, tx));
        Ok(Listener { ready, local })
    }
}

/// Accepts connections and shakes hands with each in a task of its own,
/// until the listener is gone.
async fn handshakes(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    done: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let (socket, peer) = tokio::select! {
            accepted = tcp.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "web console: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = done.closed() => return,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let (acceptor, done) = (acceptor.clone(), done.clone());
        tokio::spawn(async move {
            let _slot = slot;
            match tokio::time::timeout(HANDSHAKE, acceptor.accept(socket)).await {
                Ok(Ok(tls)) => {
                    let _ = done.send((tls, peer)).await;
                }
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "web console: TLS handshake failed")
                }
                Err(_) => tracing::debug!(%peer, "web console: TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for Listener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The handshakes' task only ends once this is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that is missing or holds no certificate or key is named in
    /// the one line that says so.
    #[test]
    fn bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        let e = acceptor(&cert, &key).err().unwrap();
        assert!(e.contains("c.pem") && !e.contains('\n'), "{e}");
        std::fs::write(&cert, "not a certificate\n").unwrap();
        let e = acceptor(&cert, &key).err().unwrap();
        assert!(e.contains("c.pem") && e.contains("no certificate"), "{e}");
    }
}
