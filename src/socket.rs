//! How walissh's TCP connections, to clients and to targets, are set up
//! before russh gets them.
//!
//! russh reads each packet's length and then its body straight off the
//! stream, several reads a packet as TCP segments arrive (about six a
//! 64 KiB packet on loopback, perf and strace in issue 7). A read buffer
//! takes what has arrived in one system call instead. Writes go straight
//! through: russh already gathers them.

use tokio::io::BufReader;
use tokio::net::TcpStream;

/// Bytes read ahead: the largest packet russh takes from a target. More
/// halves the reads again (256 KiB: 2,300 for 256 MiB, against 4,400) but
/// costs memory in every session, idle or not, and its two buffers are
/// allocated zeroed.
const READ_AHEAD: usize = 64 * 1024;

/// A connection as russh is given it.
pub(crate) type Stream = BufReader<TcpStream>;

/// Turns off Nagle's algorithm, without which each keystroke's echo would
/// wait for an ACK, and buffers reads.
pub(crate) fn prepare(socket: TcpStream) -> Stream {
    if let Err(e) = socket.set_nodelay(true) {
        tracing::warn!(error = %e, "cannot set TCP_NODELAY");
    }
    BufReader::with_capacity(READ_AHEAD, socket)
}
