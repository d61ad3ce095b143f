//! How walissh's TCP connections, to clients and to targets, are set up
//! before russh gets them.
//!
//! russh reads each packet's length and then its body straight off the
//! stream, several reads a packet as TCP segments arrive (about six a
//! 64 KiB packet on loopback, perf and strace in issue 7). A read buffer
//! takes what has arrived in one system call instead. Writes go straight
//! through: russh already gathers them.
//!
//! The buffer starts small and grows only while reads fill it: a
//! connection that sent a banner and nothing more (a flood of them is the
//! cheapest attack there is) holds [`READ_START`] bytes, not
//! [`READ_AHEAD`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Bytes read ahead at most: the largest packet russh takes from a target.
/// More halves the reads again (256 KiB: 2,300 for 256 MiB, against
/// 4,400) but costs memory in every busy session.
const READ_AHEAD: usize = 64 * 1024;

/// Bytes read ahead at first: a login's packets fit.
const READ_START: usize = 2 * 1024;

/// A connection as russh is given it: the socket with a read buffer that
/// grows, doubling, each time a read fills it, up to [`READ_AHEAD`].
pub(crate) struct Stream {
    socket: TcpStream,
    buf: Vec<u8>,
    /// What of `buf` is read and not yet taken: `buf[pos..filled]`.
    pos: usize,
    filled: usize,
}

/// Turns off Nagle's algorithm, without which each keystroke's echo would
/// wait for an ACK, and buffers reads.
pub(crate) fn prepare(socket: TcpStream) -> Stream {
    if let Err(e) = socket.set_nodelay(true) {
        tracing::warn!(error = %e, "cannot set TCP_NODELAY");
    }
    Stream {
        socket,
        buf: Vec::new(),
        pos: 0,
        filled: 0,
    }
}

impl Stream {
    /// Refills the empty buffer from the socket, first growing it if the
    /// last fill used all of it.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let grown = match self.buf.len() {
            0 => READ_START,
            n if self.filled == n => (n * 2).min(READ_AHEAD),
            n => n,
        };
        self.buf.resize(grown, 0);
        let mut read = ReadBuf::new(&mut self.buf);
        ready!(Pin::new(&mut self.socket).poll_read(cx, &mut read))?;
        (self.pos, self.filled) = (0, read.filled().len());
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pos == this.filled {
            // A read at least as large as the buffer has no use for it.
            if this.buf.len() == READ_AHEAD && out.remaining() >= READ_AHEAD {
                return Pin::new(&mut this.socket).poll_read(cx, out);
            }
            ready!(this.poll_fill(cx))?;
        }
        let n = out.remaining().min(this.filled - this.pos);
        out.put_slice(&this.buf[this.pos..this.pos + n]);
        this.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().socket).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().socket).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.socket.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().socket).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().socket).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What is written arrives whole and in order, through a buffer that
    /// starts small and grows only while reads fill it.
    #[tokio::test]
    async fn reads_pass_through_a_buffer_that_grows_with_the_flow() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(b"SSH-2.0-x\r\n").await.unwrap();
            s.write_all(&sent).await.unwrap();
        });
        let mut stream = prepare(TcpStream::connect(addr).await.unwrap());
        let mut banner = [0u8; 11];
        stream.read_exact(&mut banner).await.unwrap();
        assert_eq!(&banner, b"SSH-2.0-x\r\n");
        assert!(stream.buf.len() <= READ_AHEAD);
        let mut got = Vec::new();
        let mut chunk = [0u8; 5];
        while got.len() < data.len() {
            // Small reads, as russh's length reads are, and large ones.
            let n = match got.len() % 3 {
                0 => stream.read(&mut chunk).await.unwrap(),
                _ => {
                    let mut big = vec![0u8; 70_000];
                    let n = stream.read(&mut big).await.unwrap();
                    got.extend_from_slice(&big[..n]);
                    continue;
                }
            };
            got.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(got, data);
        writer.await.unwrap();
    }

    /// A connection that sends a banner and nothing more holds the small
    /// buffer only.
    #[tokio::test]
    async fn a_banner_only_connection_keeps_the_small_buffer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client.write_all(b"SSH-2.0-flood\r\n").await.unwrap();
        let mut stream = prepare(server);
        let mut b = [0u8; 1];
        stream.read_exact(&mut b).await.unwrap();
        assert_eq!(stream.buf.len(), READ_START);
    }
}
