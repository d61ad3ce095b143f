//! `[audit] forward`: every event and every checkpoint, as they are
//! committed, sent off the machine, where root on the bastion cannot
//! rewrite them: as RFC 5424 syslog (UDP, TCP with octet counting, or a
//! unix datagram socket such as `/dev/log`) or as JSON lines POSTed to an
//! HTTP endpoint.
//!
//! What it owns: one bounded queue and one sending task per destination,
//! the message formats, reconnecting, and counting what a full queue
//! loses. The writer thread only offers items (`try_send`): a slow or dead
//! collector never slows it, nor any session. What it leaves to others:
//! what is committed (`db`), the destinations' syntax (`config`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::{Event, rfc3339};
use crate::config::Destination;

/// The structured-data id of walissh's parameters (RFC 5424 §6.3.2; 32473
/// is the example enterprise number, until walissh has one of its own).
const SD_ID: &str = "walissh@32473";
/// How long a broken connection waits before it is tried again.
const RECONNECT: Duration = Duration::from_secs(1);
/// A message's JSON is kept under this many bytes (UDP's limit is 65507).
const MAX_MESSAGE: usize = 60_000;
/// What one destination's queue may hold, in bytes, whatever its count of
/// items: with the collector down, a flood of large rows must not grow
/// walissh's memory (10,000 rows of 60 KB once did by 860 MB).
const MAX_QUEUED_BYTES: usize = 16 << 20;
/// JSON lines POSTed at once, at most.
const HTTP_BATCH: usize = 256;

/// What leaves the machine.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    Event {
        seq: i64,
        hash: String,
        event: Event,
    },
    Checkpoint(super::chain::Signed),
}

impl Item {
    /// About what the item holds in memory: its strings and some.
    fn size(&self) -> usize {
        fn value(v: &Value) -> usize {
            match v {
                Value::String(s) => s.len() + 8,
                Value::Array(items) => items.iter().map(value).sum::<usize>() + 8,
                Value::Object(map) => map.iter().map(|(k, v)| k.len() + value(v)).sum(),
                _ => 16,
            }
        }
        match self {
            Item::Event { hash, event, .. } => {
                let names = [&event.user, &event.session, &event.target];
                let names: usize = names
                    .iter()
                    .filter_map(|n| n.as_ref())
                    .map(String::len)
                    .sum();
                256 + hash.len()
                    + names
                    + event
                        .fields
                        .iter()
                        .map(|(k, v)| k.len() + value(v))
                        .sum::<usize>()
            }
            // A head, a signature and a few numbers.
            Item::Checkpoint(_) => 1024,
        }
    }
}

/// One destination's queue, bounded in items (the channel) and in bytes.
struct Queue {
    name: String,
    tx: mpsc::Sender<Item>,
    bytes: Arc<AtomicUsize>,
}

/// Where items go, and what was lost on the way.
pub(crate) struct Forward {
    queues: Vec<Queue>,
    lost: Arc<AtomicU64>,
}

impl Forward {
    /// Starts one sender per destination on `runtime`, each with a queue
    /// of `queue` items; and the senders, which end once the `Forward` is
    /// gone and their queues are sent (shutdown waits for them a while:
    /// the last checkpoint is the one a collector most needs).
    pub(crate) fn start(
        destinations: Vec<Destination>,
        queue: usize,
        runtime: &tokio::runtime::Handle,
    ) -> (Forward, Vec<tokio::task::JoinHandle<()>>) {
        let lost = Arc::new(AtomicU64::new(0));
        let mut senders = Vec::new();
        let queues = destinations
            .into_iter()
            .map(|d| {
                let (tx, rx) = mpsc::channel(queue.max(1));
                let name = format!("{d:?}");
                let bytes = Arc::new(AtomicUsize::new(0));
                senders.push(runtime.spawn(send_all(d, rx, bytes.clone())));
                Queue { name, tx, bytes }
            })
            .collect();
        (Forward { queues, lost }, senders)
    }

    /// Offers `item` to every destination, never waiting: a full queue
    /// loses it, counted and logged.
    pub(crate) fn offer(&self, item: &Item) {
        let size = item.size();
        for Queue { name, tx, bytes } in &self.queues {
            let room = bytes
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                    (b + size <= MAX_QUEUED_BYTES).then_some(b + size)
                })
                .is_ok();
            let queued = room && tx.try_send(item.clone()).is_ok();
            if room && !queued {
                bytes.fetch_sub(size, Ordering::AcqRel);
            }
            if !queued {
                let n = self.lost.fetch_add(1, Ordering::Relaxed) + 1;
                // A line for the first loss and every thousandth after.
                if n == 1 || n.is_multiple_of(1000) {
                    tracing::error!(destination = %name, lost = n, "audit forward queue full: events lost for this destination");
                }
            }
        }
    }

    /// Items lost so far (all destinations), and reset.
    pub(crate) fn take_lost(&self) -> u64 {
        self.lost.swap(0, Ordering::Relaxed)
    }
}

/// Sends what comes on `rx` to `to` until the queue closes, reconnecting
/// as needed; an item is dropped only when the queue is full, never
/// because the destination was down.
async fn send_all(to: Destination, mut rx: mpsc::Receiver<Item>, bytes: Arc<AtomicUsize>) {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "-".into());
    let mut link = Link::default();
    let mut batch: Vec<Item> = Vec::new();
    loop {
        if batch.is_empty() {
            match rx.recv().await {
                Some(item) => batch.push(item),
                None => return,
            }
            if matches!(to, Destination::Http(_)) {
                while batch.len() < HTTP_BATCH {
                    match rx.try_recv() {
                        Ok(item) => batch.push(item),
                        Err(_) => break,
                    }
                }
            }
        }
        match link.send(&to, &host, &batch).await {
            Ok(()) => {
                let sent: usize = batch.drain(..).map(|i| i.size()).sum();
                bytes.fetch_sub(sent, Ordering::AcqRel);
            }
            Err(e) => {
                if !link.failing {
                    tracing::warn!(destination = ?to, error = %e, "audit forward failing; kept and tried again");
                }
                link = Link {
                    failing: true,
                    ..Link::default()
                };
                tokio::time::sleep(RECONNECT).await;
            }
        }
    }
}

/// An open connection (TCP, unix datagram, UDP) and whether it failed.
#[derive(Default)]
struct Link {
    tcp: Option<tokio::net::TcpStream>,
    udp: Option<tokio::net::UdpSocket>,
    unix: Option<tokio::net::UnixDatagram>,
    http: Option<reqwest::Client>,
    failing: bool,
}

impl Link {
    async fn send(&mut self, to: &Destination, host: &str, items: &[Item]) -> Result<(), String> {
        let e = |e: std::io::Error| e.to_string();
        match to {
            Destination::Tcp(addr) => {
                if self.tcp.is_none() {
                    self.tcp = Some(tokio::net::TcpStream::connect(addr).await.map_err(e)?);
                }
                let tcp = self.tcp.as_mut().expect("connected");
                for item in items {
                    let msg = syslog(item, host);
                    // RFC 6587 octet counting: a message may hold anything.
                    let framed = format!("{} {msg}", msg.len());
                    tcp.write_all(framed.as_bytes()).await.map_err(e)?;
                }
            }
            Destination::Udp(addr) => {
                if self.udp.is_none() {
                    let s = tokio::net::UdpSocket::bind("0.0.0.0:0").await.map_err(e)?;
                    s.connect(addr).await.map_err(e)?;
                    self.udp = Some(s);
                }
                let udp = self.udp.as_ref().expect("bound");
                for item in items {
                    udp.send(syslog(item, host).as_bytes()).await.map_err(e)?;
                }
            }
            Destination::Unix(path) => {
                if self.unix.is_none() {
                    let s = tokio::net::UnixDatagram::unbound().map_err(e)?;
                    s.connect(path).map_err(e)?;
                    self.unix = Some(s);
                }
                let unix = self.unix.as_ref().expect("made");
                for item in items {
                    unix.send(syslog(item, host).as_bytes()).await.map_err(e)?;
                }
            }
            Destination::Http(url) => {
                let client = self.http.get_or_insert_with(|| {
                    reqwest::Client::builder()
                        .redirect(reqwest::redirect::Policy::none())
                        .timeout(Duration::from_secs(10))
                        .build()
                        .unwrap_or_default()
                });
                let body: String = items
                    .iter()
                    .map(|i| format!("{}\n", json_line(i)))
                    .collect();
                let r = client
                    .post(url)
                    .header("content-type", "application/x-ndjson")
                    .body(body)
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                let status = r.status();
                // A collector that refuses these items (4xx but for time
                // outs and rate limits) refuses them for good: dropped,
                // said, and not held against the ones behind them.
                if status.is_client_error() && status.as_u16() != 408 && status.as_u16() != 429 {
                    tracing::error!(destination = ?to, %status, items = items.len(), "audit forward: the collector refused these items; dropped");
                    return Ok(());
                }
                if !status.is_success() {
                    return Err(format!("HTTP {status}"));
                }
            }
        }
        if self.failing {
            tracing::info!(destination = ?to, "audit forward works again");
            self.failing = false;
        }
        Ok(())
    }
}

/// One item as a JSON object: the event as `walissh audit --json` prints
/// it, with its `seq` and `hash`; or the checkpoint.
pub(crate) fn json_line(item: &Item) -> Value {
    match item {
        Item::Event { seq, hash, event } => {
            let mut o = Map::new();
            o.insert("seq".into(), json!(seq));
            o.insert("hash".into(), json!(hash));
            if let Value::Object(row) = super::db::event_json(event) {
                o.extend(row);
            }
            Value::Object(o)
        }
        // The same line as the head file's (`copies`), which
        // `audit verify --against` reads back.
        Item::Checkpoint(c) => super::copies::to_json(c),
    }
}

/// One item as an RFC 5424 message: facility authpriv, the kind as
/// MSGID, the chain's seq and hash and the event's identity as
/// structured data, the JSON object as the message.
pub(crate) fn syslog(item: &Item, host: &str) -> String {
    let (ts, kind, severity, mut params) = match item {
        Item::Event { seq, hash, event } => {
            let mut p = vec![("seq", seq.to_string()), ("hash", hash.clone())];
            for (k, v) in [
                ("session", &event.session),
                ("user", &event.user),
                ("target", &event.target),
            ] {
                if let Some(v) = v {
                    p.push((k, v.clone()));
                }
            }
            (rfc3339(event.ts), event.kind.as_str(), 6, p)
        }
        Item::Checkpoint(c) => {
            let p = vec![("seq", c.seq.to_string()), ("head", c.head.clone())];
            (c.ts.clone(), "audit_checkpoint", 5, p)
        }
    };
    let sd: String = params
        .drain(..)
        .map(|(k, v)| format!(" {k}=\"{}\"", sd_escape(&v)))
        .collect();
    let pri = 10 * 8 + severity;
    let mut msg = json_line(item).to_string();
    // One datagram's worth at most (UDP refuses more, and a message that
    // never goes would hold up all behind it): the fields go, the row's
    // identity and place in the chain stay.
    if msg.len() > MAX_MESSAGE {
        let mut o = json_line(item);
        if let Some(obj) = o.as_object_mut() {
            obj.retain(|k, _| {
                ["seq", "hash", "ts", "session", "user", "target", "kind"].contains(&k.as_str())
            });
            obj.insert("truncated".into(), json!(true));
        }
        msg = o.to_string();
        msg.truncate(MAX_MESSAGE.min(msg.len()));
    }
    format!(
        "<{pri}>1 {ts} {} walissh {} {kind} [{SD_ID}{sd}] {msg}",
        header_field(host),
        std::process::id()
    )
}

/// A PARAM-VALUE: `"`, `\` and `]` escaped (RFC 5424 §6.3.3), and
/// control characters (a login name is the client's) spelled out.
fn sd_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
            continue;
        }
        if matches!(c, '"' | '\\' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A header field: printable ASCII without spaces, at most 255, or `-`.
fn header_field(v: &str) -> String {
    let f: String = v
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(255)
        .collect();
    match f.is_empty() {
        true => "-".into(),
        false => f,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Kind;

    /// The figures of issue 20: items forwarded per second over TCP
    /// syslog to a listener that reads as fast as it can, and what a
    /// collector outage loses with a queue of 1000 items.
    /// `cargo test --release --lib forward_cost -- --ignored --nocapture`
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore]
    async fn forward_cost() {
        use tokio::io::AsyncReadExt;
        let n = 200_000usize;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        // Counts whole messages (octet counting: one per "LEN ").
        let counted = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 1 << 16];
            let mut bytes = 0usize;
            let t = std::time::Instant::now();
            while let Ok(k) = s.read(&mut buf).await {
                if k == 0 {
                    break;
                }
                bytes += k;
                if bytes >= n * 200 {
                    break;
                }
            }
            (bytes, t.elapsed())
        });
        let (f, _senders) = Forward::start(
            vec![Destination::Tcp(addr)],
            n,
            &tokio::runtime::Handle::current(),
        );
        let mut event = Event::new(Kind::Command)
            .user("alice")
            .field("command", "systemctl status nginx");
        event.session = Some("0123456789abcdef".into());
        let item = Item::Event {
            seq: 1,
            hash: "ab".repeat(32),
            event,
        };
        let size = syslog(&item, "bastion").len() + 4;
        let t = std::time::Instant::now();
        for _ in 0..n {
            f.offer(&item);
        }
        let offered = t.elapsed();
        let (bytes, took) = counted.await.unwrap();
        println!(
            "forward: {n} items offered in {offered:?}; {} received in {took:?}: {:.0} items/s ({size} bytes each)",
            bytes / size,
            (bytes / size) as f64 / took.as_secs_f64()
        );
        // An outage: nobody listens; 5000 items offered to a queue of 1000.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let (f, _senders) = Forward::start(
            vec![Destination::Tcp(format!("127.0.0.1:{port}"))],
            1000,
            &tokio::runtime::Handle::current(),
        );
        for _ in 0..5000 {
            f.offer(&item);
        }
        println!(
            "outage: 5000 offered to a queue of 1000: {} lost",
            f.take_lost()
        );
    }

    /// With the collector down, a queue of many items still holds at most
    /// [`MAX_QUEUED_BYTES`]: large rows are lost, counted, beyond it.
    #[tokio::test]
    async fn a_queue_is_bounded_in_bytes_as_well_as_items() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let (f, _senders) = Forward::start(
            vec![Destination::Tcp(format!("127.0.0.1:{port}"))],
            100_000,
            &tokio::runtime::Handle::current(),
        );
        let item = Item::Event {
            seq: 1,
            hash: "ab".repeat(32),
            event: Event::new(Kind::ForwardDenied).field("detail", "h".repeat(60_000)),
        };
        for _ in 0..1000 {
            f.offer(&item);
        }
        let held = f.queues[0].bytes.load(Ordering::Acquire);
        assert!(held <= MAX_QUEUED_BYTES, "{held}");
        let fit = MAX_QUEUED_BYTES / item.size();
        assert!(f.take_lost() >= (1000 - fit - 1) as u64);
    }

    #[test]
    fn an_event_is_one_rfc5424_message_with_structured_data() {
        let mut event = Event::new(Kind::Exec)
            .user("bob")
            .field("command", "echo \"]x\\");
        event.session = Some("s1".into());
        let item = Item::Event {
            seq: 42,
            hash: "ab".repeat(32),
            event,
        };
        let m = syslog(&item, "bastion 1");
        assert!(m.starts_with("<86>1 20"), "{m}");
        assert!(m.contains(" bastion1 walissh "), "{m}");
        assert!(m.contains(" exec [walissh@32473 seq=\"42\" hash=\""), "{m}");
        assert!(m.contains("session=\"s1\" user=\"bob\"]"), "{m}");
        let json: Value = serde_json::from_str(&m[m.find("] {").unwrap() + 2..]).unwrap();
        assert_eq!(json["command"], "echo \"]x\\");
        assert_eq!(json["seq"], 42);
        assert!(!m.contains('\n'));
        assert_eq!(sd_escape("a\"b]c\\"), "a\\\"b\\]c\\\\");
        assert_eq!(sd_escape("bob\nx"), "bob\\u{a}x");
        // A huge command: the message stays one datagram, seq and hash kept.
        let mut big = Event::new(Kind::Exec).field("command", "\u{1}".repeat(20_000));
        big.session = Some("s1".into());
        let m = syslog(
            &Item::Event {
                seq: 7,
                hash: "cd".repeat(32),
                event: big,
            },
            "h",
        );
        assert!(m.len() < 65_000, "{}", m.len());
        assert!(
            m.contains("\"truncated\":true") && m.contains("\"seq\":7"),
            "{m}"
        );
    }
}
