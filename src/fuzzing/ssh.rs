//! The SSH transport as the fuzzer drives it: the vendored russh's packet
//! reader and message parsing, on both of walissh's ends (its server, with
//! walissh's settings, and the client it dials targets with), fed a byte
//! stream a hostile peer could send.
//!
//! Past the key exchange a peer's packets are encrypted, which no fuzzer
//! gets through. So, where the input asks for it, the handshake is given:
//! both sides agree on the `none` key exchange and cipher (russh has
//! them; walissh never offers them), and each piece of the input then
//! reaches russh as one clear packet, as a decrypted one would: the login,
//! channels, requests, window adjustments and channel data, parsed by the
//! same code as on a real connection. What russh leaves to its handler is
//! left to a handler that accepts all, so the parsing goes as deep as it
//! can; walissh's own handler is not here (its parsers have targets of
//! their own).

use std::sync::{Arc, LazyLock, Mutex};

use russh::keys::PrivateKey;
use russh::{ChannelMsg, MethodSet, client, server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

use crate::config::UpstreamConfig;

/// Where a framed input's pieces are cut: each piece is one packet.
const CUT: &[u8] = b"\xfe\xfe";

/// The peer's version line, ahead of a framed input's handshake.
const PEER_ID: &[u8] = b"SSH-2.0-OpenSSH_9.9\r\n";

/// The `none` algorithms, with the key exchange's extensions an end
/// offers (RFC 8308's, and OpenSSH's strict key exchange).
fn clear(extensions: [russh::kex::Name; 2]) -> russh::Preferred {
    use std::borrow::Cow;
    let kex: Vec<_> = std::iter::once(russh::kex::NONE)
        .chain(extensions)
        .collect();
    russh::Preferred {
        kex: kex.into(),
        cipher: Cow::Borrowed(&[russh::cipher::NONE]),
        mac: Cow::Borrowed(&[russh::mac::NONE]),
        compression: Cow::Borrowed(&[russh::compression::NONE]),
        ..Default::default()
    }
}

/// A fixed host key: the same input always runs the same way.
fn host_key() -> PrivateKey {
    let pair = russh::keys::ssh_key::private::Ed25519Keypair::from_seed(&[7; 32]);
    PrivateKey::from(pair)
}

/// walissh's server settings, but for the algorithms.
static SERVER: LazyLock<Arc<server::Config>> = LazyLock::new(|| {
    use russh::kex::{EXTENSION_OPENSSH_STRICT_KEX_AS_SERVER, EXTENSION_SUPPORT_AS_SERVER};
    let mut config = crate::server::russh_config(host_key(), MethodSet::server_supported());
    config.preferred = clear([
        EXTENSION_SUPPORT_AS_SERVER,
        EXTENSION_OPENSSH_STRICT_KEX_AS_SERVER,
    ]);
    Arc::new(config)
});

/// The settings walissh dials targets with (its default keepalive), but
/// for the algorithms.
static CLIENT: LazyLock<Arc<client::Config>> = LazyLock::new(|| {
    use russh::kex::{EXTENSION_OPENSSH_STRICT_KEX_AS_CLIENT, EXTENSION_SUPPORT_AS_CLIENT};
    let mut config = crate::upstream::client_config(UpstreamConfig::default().keepalive());
    config.preferred = clear([
        EXTENSION_SUPPORT_AS_CLIENT,
        EXTENSION_OPENSSH_STRICT_KEX_AS_CLIENT,
    ]);
    Arc::new(config)
});

/// One clear packet of `payload`: length, padding length, the payload,
/// and padding to a multiple of 8 bytes (at least 4), as RFC 4253 §6 has it.
fn packet(payload: &[u8]) -> Vec<u8> {
    let mut pad = 8 - (5 + payload.len()) % 8;
    if pad < 4 {
        pad += 8;
    }
    let len = u32::try_from(1 + payload.len() + pad).unwrap_or(u32::MAX);
    let mut p = len.to_be_bytes().to_vec();
    p.push(pad as u8);
    p.extend_from_slice(payload);
    p.resize(p.len() + pad, 0);
    p
}

/// The SSH encoding of a string (a name-list is one too).
fn string(s: &[u8]) -> Vec<u8> {
    use russh::keys::ssh_encoding::Encode;
    let mut out = Vec::new();
    // Writing to a Vec fails only past 4 GiB, which no input here reaches.
    let _ = s.encode(&mut out);
    out
}

/// A peer's version line and KEXINIT, agreeing on `none` for everything
/// (russh ends the `none` exchange there: no NEWKEYS is read).
fn handshake(kex: &str) -> Vec<u8> {
    let mut init = vec![20];
    init.extend_from_slice(&[0x5a; 16]);
    let lists = [
        kex,
        "ssh-ed25519",
        "none",
        "none",
        "none",
        "none",
        "none",
        "none",
        "",
        "",
    ];
    for list in lists {
        init.extend(string(list.as_bytes()));
    }
    init.extend_from_slice(&[0, 0, 0, 0, 0]);
    let mut out = PEER_ID.to_vec();
    out.extend(packet(&init));
    out
}

/// What a peer sends, from a fuzz input, in the writes it makes: `raw`,
/// the input itself (version line and all); otherwise the handshake, then
/// each piece of the input (cut at [`CUT`]) as one packet.
fn stream(kex: &str, raw: bool, input: &[u8]) -> Vec<Vec<u8>> {
    if raw {
        return vec![input.to_vec()];
    }
    let packets = split(input, CUT).into_iter().map(packet);
    std::iter::once(handshake(kex)).chain(packets).collect()
}

/// `input` cut at each `at`.
fn split<'a>(mut input: &'a [u8], at: &[u8]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    while let Some(i) = memchr::memmem::find(input, at) {
        pieces.push(&input[..i]);
        input = &input[i + at.len()..];
    }
    pieces.push(input);
    pieces
}

/// Lets every other task on the (single-threaded) runtime run until it
/// waits, as far as that takes a bounded number of turns: a peer that
/// answers requests waits for them this way, with no clock (the runtime
/// runs its tasks in order, so this is the same every run).
async fn settle() {
    for _ in 0..32 {
        tokio::task::yield_now().await;
    }
}

/// Plays `peer`'s writes (then its end of file) to one of walissh's ends
/// on a fresh single-threaded runtime, reading all that end sends, and
/// returns once both are done. `paced`: each write waits until the end
/// has dealt with the one before, as a peer answering requests does;
/// otherwise all arrive at once, as from a peer that sends ahead. What
/// `end` returns is what its channels received.
fn play<F>(
    peer: Vec<Vec<u8>>,
    paced: bool,
    end: impl FnOnce(tokio::io::DuplexStream) -> F,
) -> Vec<u8>
where
    F: std::future::Future<Output = Vec<u8>>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (mut from, mut to) = tokio::io::split(theirs);
        let feed = async move {
            for write in peer {
                if paced {
                    settle().await;
                }
                if to.write_all(&write).await.is_err() {
                    return;
                }
            }
            let _ = to.shutdown().await;
        };
        let drain = async move {
            let mut sink = vec![0; 1 << 14];
            while matches!(from.read(&mut sink).await, Ok(n) if n > 0) {}
        };
        let (got, (), ()) = tokio::join!(end(ours), feed, drain);
        got
    })
}

/// Plays a fuzz input to one of walissh's ends; what its channels
/// received. `pick` chooses, as [`crate::fuzzing::ssh_transport`] says.
pub(crate) fn transport(pick: u8, rest: &[u8]) -> Vec<u8> {
    let (raw, paced) = (pick & 2 == 0, pick & 4 != 0);
    match pick & 1 {
        0 => serve(raw, paced, rest),
        _ => dial(raw, paced, rest),
    }
}

/// What a russh call gave, or `None` if it failed; a russh task that
/// panicked (russh turns that into `Error::Join`) panics here, so the
/// tests see it as the fuzzer does (libFuzzer aborts on any panic).
fn unless_panicked<T>(r: Result<T, russh::Error>) -> Option<T> {
    match r {
        Err(russh::Error::Join(e)) => panic!("a russh task panicked: {e}"),
        r => r.ok(),
    }
}

/// walissh's server reading what a client sent: `raw` as it is, or after
/// the `none` handshake, in packets. Returns the channel data its
/// channels received. It must end: the client's end of file ends it.
fn serve(raw: bool, paced: bool, input: &[u8]) -> Vec<u8> {
    let peer = stream("none,kex-strict-c-v00@openssh.com", raw, input);
    play(peer, paced, |ours| async move {
        let readers = Arc::new(Mutex::new(Vec::new()));
        let handler = AcceptAll {
            readers: readers.clone(),
        };
        if let Some(running) =
            unless_panicked(server::run_stream(SERVER.clone(), ours, handler).await)
        {
            unless_panicked(running.await);
        }
        let readers = std::mem::take(&mut *readers.lock().unwrap_or_else(|e| e.into_inner()));
        let mut got = Vec::new();
        for r in readers {
            match r.await {
                Ok(data) => got.extend(data),
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        }
        got
    })
}

/// walissh's client dialling a target that sends `input` (as
/// [`serve`]'s): it logs in with `none`, opens a session, runs a command
/// and reads the channel to its end. Returns the data read, once the
/// connection has ended.
fn dial(raw: bool, paced: bool, input: &[u8]) -> Vec<u8> {
    let peer = stream("none,kex-strict-s-v00@openssh.com", raw, input);
    play(peer, paced, |ours| async move {
        let connected = client::connect_stream(CLIENT.clone(), ours, TrustAll).await;
        let Some(mut handle) = unless_panicked(connected) else {
            return Vec::new();
        };
        let got = run_a_command(&mut handle).await;
        unless_panicked(handle.await);
        got
    })
}

/// Logs in with `none`, runs a command and reads its channel to the end.
async fn run_a_command(handle: &mut client::Handle<TrustAll>) -> Vec<u8> {
    let mut got = Vec::new();
    match unless_panicked(handle.authenticate_none("fuzz").await) {
        Some(r) if r.success() => {}
        _ => return got,
    }
    let Some(mut channel) = unless_panicked(handle.channel_open_session().await) else {
        return got;
    };
    if unless_panicked(channel.exec(true, "true").await).is_none() {
        return got;
    }
    while let Some(msg) = channel.wait().await {
        if let ChannelMsg::Data { data } | ChannelMsg::ExtendedData { data, .. } = msg {
            got.extend_from_slice(&data);
        }
    }
    got
}

/// A server handler that lets everyone in and opens every session
/// channel, each read to its end by a task of its own (as walissh's
/// session would), so russh parses all that follows.
struct AcceptAll {
    readers: Arc<Mutex<Vec<JoinHandle<Vec<u8>>>>>,
}

impl server::Handler for AcceptAll {
    type Error = russh::Error;

    async fn auth_none(&mut self, _: &str) -> Result<server::Auth, Self::Error> {
        Ok(server::Auth::Accept)
    }

    async fn channel_open_session(
        &mut self,
        mut channel: russh::Channel<server::Msg>,
        reply: server::ChannelOpenHandle,
        _: &mut server::Session,
    ) -> Result<(), Self::Error> {
        reply.accept().await;
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(msg) = channel.wait().await {
                if let ChannelMsg::Data { data } = msg {
                    got.extend_from_slice(&data);
                }
            }
            got
        });
        self.readers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(reader);
        Ok(())
    }
}

/// A client handler that takes any host key (there is none in a `none`
/// exchange; a raw input may still offer one).
struct TrustAll;

impl client::Handler for TrustAll {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        _: &russh::keys::PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The number russh gives the first channel it opens, on either end.
    const FIRST: u32 = 2;

    /// The committed seeds (fuzz/corpus/ssh_transport/seed-NN).
    fn seed(n: u8) -> Vec<u8> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/ssh_transport");
        std::fs::read(format!("{dir}/seed-{n:02}")).expect("a seed")
    }

    /// A message: its type, then its fields, already encoded.
    fn msg(kind: u8, fields: &[&[u8]]) -> Vec<u8> {
        [&[kind][..], &fields.concat()].concat()
    }

    fn u32be(n: u32) -> [u8; 4] {
        n.to_be_bytes()
    }

    /// A client's framed session: the login with `none`, a session channel
    /// with a pty, an environment variable and a command, `hello` and
    /// `err` (stderr) on it, a window adjustment, a window change, OpenSSH's
    /// end-of-write, then EOF and close.
    fn client_session() -> Vec<u8> {
        let ch = u32be(FIRST);
        let modes = string(&[0]);
        let request = |name: &[u8], reply: u8, rest: &[&[u8]]| {
            msg(98, &[&ch, &string(name), &[reply], &rest.concat()])
        };
        [
            msg(5, &[&string(b"ssh-userauth")]),
            msg(
                50,
                &[&string(b"u"), &string(b"ssh-connection"), &string(b"none")],
            ),
            msg(
                90,
                &[
                    &string(b"session"),
                    &u32be(0),
                    &u32be(1 << 21),
                    &u32be(32768),
                ],
            ),
            request(
                b"pty-req",
                0,
                &[
                    &string(b"xterm"),
                    &u32be(80),
                    &u32be(24),
                    &u32be(0),
                    &u32be(0),
                    &modes,
                ],
            ),
            request(b"env", 0, &[&string(b"LANG"), &string(b"C")]),
            request(b"exec", 1, &[&string(b"id")]),
            msg(94, &[&ch, &string(b"hello")]),
            msg(95, &[&ch, &u32be(1), &string(b"err")]),
            msg(93, &[&ch, &u32be(4096)]),
            request(
                b"window-change",
                0,
                &[&u32be(100), &u32be(30), &u32be(0), &u32be(0)],
            ),
            request(b"eow@openssh.com", 0, &[]),
            msg(96, &[&ch]),
            msg(97, &[&ch]),
        ]
        .join(CUT)
    }

    /// A target's answers to walissh's client: the service, the login, the
    /// channel, the command's success, `hello` and `err`, a window
    /// adjustment, the exit status, then EOF and close.
    fn target_session() -> Vec<u8> {
        let ch = u32be(FIRST);
        [
            msg(6, &[&string(b"ssh-userauth")]),
            msg(52, &[]),
            msg(91, &[&ch, &u32be(0), &u32be(1 << 21), &u32be(32768)]),
            msg(99, &[&ch]),
            msg(94, &[&ch, &string(b"hello")]),
            msg(95, &[&ch, &u32be(1), &string(b"err")]),
            msg(93, &[&ch, &u32be(65536)]),
            msg(98, &[&ch, &string(b"exit-status"), &[0], &u32be(0)]),
            msg(96, &[&ch]),
            msg(97, &[&ch]),
        ]
        .join(CUT)
    }

    /// The seeds are the sessions built above (so they can be made again),
    /// with the first byte picking the end and the pacing; seed 0 is a real
    /// OpenSSH 9.2 client's greeting (its version line and KEXINIT, taken
    /// with `ProxyCommand`), seed 5 that KEXINIT sent as a server's.
    #[test]
    fn the_seeds_are_the_sessions_built_here() {
        let pick = |p: u8, session: Vec<u8>| [vec![p], session].concat();
        assert_eq!(seed(1), pick(6, client_session()));
        assert_eq!(seed(2), pick(2, client_session()));
        assert_eq!(seed(3), pick(7, target_session()));
        assert_eq!(seed(4), pick(3, target_session()));
        assert!(seed(0).starts_with(b"\x00SSH-2.0-OpenSSH_9.2p1"));
        assert!(seed(5).starts_with(b"\x01SSH-2.0-OpenSSH_9.2p1"));
    }

    /// The harness goes as deep as the fuzzer needs it to: a session's data
    /// reaches each end's channel (the server's reader takes stdout only),
    /// so the inputs grown from the seeds reach russh's channel parsing. A
    /// target that sends ahead is refused as soon as it confirms a login
    /// not yet asked for; a greeting alone opens no channel.
    #[test]
    fn each_seed_reaches_what_it_should() {
        let expected: [&[u8]; 6] = [b"", b"hello", b"hello", b"helloerr", b"", b""];
        for (n, want) in (0..).zip(expected) {
            let s = seed(n);
            assert_eq!(transport(s[0], &s[1..]), want, "seed {n}");
            crate::fuzzing::ssh_transport(&s);
        }
    }

    /// What the property is run over besides the seeds: each end given
    /// nothing, a cut handshake, a packet of a huge length, a packet
    /// whose padding is longer than itself, data for a channel that is not
    /// open, and the sessions cut every 7 bytes. Each ends, with no more
    /// channel data than was sent.
    #[test]
    fn the_property_holds_on_broken_streams() {
        let huge = [PEER_ID, &[0xff, 0xff, 0xff, 0xf0, 4, 1, 2, 3]].concat();
        let padded = [PEER_ID, &[0, 0, 0, 8, 200, 20, 0, 0, 0, 0, 0, 0]].concat();
        let stray = msg(94, &[&u32be(77), &string(b"x")]);
        for side in [0u8, 1] {
            for input in [&b""[..], &huge, &padded, &handshake("none")[..40]] {
                crate::fuzzing::ssh_transport(&[&[side][..], input].concat());
            }
            crate::fuzzing::ssh_transport(&[&[side | 2][..], &stray].concat());
        }
        for (side, whole) in [(0u8, client_session()), (1, target_session())] {
            for n in (0..whole.len()).step_by(7) {
                crate::fuzzing::ssh_transport(&[&[side | 6][..], &whole[..n]].concat());
            }
        }
    }

    /// The `none` algorithms are the harness's only: walissh's own ends
    /// never offer them.
    #[test]
    fn walissh_never_offers_the_none_algorithms() {
        let server = crate::server::russh_config(host_key(), MethodSet::server_supported());
        let client = crate::upstream::client_config(UpstreamConfig::default().keepalive());
        for p in [server.preferred, client.preferred] {
            assert!(!p.kex.contains(&russh::kex::NONE));
            assert!(!p.cipher.contains(&russh::cipher::NONE));
            assert!(!p.mac.contains(&russh::mac::NONE));
        }
    }
}
