//! Watching, from one node's console, a session that another node
//! carries, where several bastions share a PostgreSQL audit: relayed
//! through the database's `LISTEN`/`NOTIFY`, as stops are (`stops`: the
//! same reasons, no certificates to issue and no node address to
//! publish).
//!
//! The watching node listens on a channel of the view's own
//! (`walissh_view_<id>`, a random id) and asks on `walissh_view`; the
//! node that carries the session streams its recording there: what it
//! holds so far (the last [`HISTORY_MAX`] bytes), then each event as it
//! is written, in frames of at most [`CHUNK`] bytes (a notification holds
//! 8000), until the session ends or the watcher stops renewing its lease
//! (every [`RENEW`]; gone after [`LEASE`]).
//!
//! Anyone who can connect to the database can listen and notify, and a
//! terminal's output is not the database's to read: every request and
//! frame is sealed (AES-256-GCM) with a key drawn from the audit key the
//! nodes share, bound to its channel. Frames are numbered: one seen
//! already is dropped, and a watcher that misses one ends the view rather
//! than show a screen with a hole. The serving node sends a frame at
//! least every [`RENEW`], and a watcher that hears nothing for [`LEASE`]
//! ends the view (a node gone is not a quiet session). Requests carry
//! their time and are dropped when stale, and a view is served once: its
//! request played again opens nothing.
//!
//! What it owns: the relay's connections, requests, frames, seals and
//! leases. What it leaves to others: the recording's stream
//! (`recording::Recorder::watch`), the `session_watched` row and who may
//! watch (the daemon and the console), the pool and runtime (`pg`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aes_gcm::{Aes256Gcm, Key};
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::pg::Pg;

/// The channel every node hears requests on.
const REQUESTS: &str = "walissh_view";
/// Bytes of the recording in one frame: sealed and in base64, with its
/// kind and number, it stays under a notification's 8000.
const CHUNK: usize = 5_600;
/// What a view from another node is sent of the recording so far.
pub(crate) const HISTORY_MAX: u64 = 1 << 20;
/// How often a watcher renews its lease, and how long one lasts.
const RENEW: Duration = Duration::from_secs(10);
const LEASE: Duration = Duration::from_secs(30);
/// How old a request may be when it arrives (seconds).
const FRESH: u64 = 60;
/// How long a watcher waits for the other node's first frame.
const FIRST: Duration = Duration::from_secs(10);
/// Frames a watcher may hold unread; past that the view fell behind.
const FRAMES: usize = 1024;
/// Notifications waiting for this node's relay connection: frames, and
/// (sent first) requests.
const OUT: usize = 1024;
const REQUESTS_OUT: usize = 64;
/// Requests from other nodes waiting for this node's daemon.
const ASKS: usize = 64;
/// Views this node serves to others at once.
pub(crate) const MAX_SERVED: usize = 32;
/// Lines sent in one frame at most, as a session's events come.
const BATCH: usize = 64;

/// A frame's kinds: the recording so far, from now on, the end.
const HISTORY: u8 = b'h';
const LIVE: u8 = b'l';
const END: u8 = b'e';

/// A request, sealed on [`REQUESTS`].
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Request {
    /// "watch", "renew" or "bye".
    t: String,
    /// The node asked.
    node: String,
    view: String,
    session: String,
    /// The console login and the browser's address, for the audit row.
    by: String,
    addr: String,
    /// The node that asks, and when (Unix seconds).
    from: String,
    at: u64,
}

/// A view asked of this node: stream session `session`'s recording to
/// view `view` ([`Views::serve`]).
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    pub(crate) session: String,
    pub(crate) view: String,
    pub(crate) by: String,
    pub(crate) addr: String,
    pub(crate) from: String,
}

enum Cmd {
    /// Listen on a view's channel; frames go to the sender, and the
    /// oneshot says when the database listens.
    Listen(String, mpsc::Sender<Vec<u8>>, oneshot::Sender<()>),
    Unlisten(String),
}

/// This node's side of the relay; dropping it ends its tasks.
pub(crate) struct Views {
    node: String,
    key: Key<Aes256Gcm>,
    cmd: mpsc::Sender<Cmd>,
    out: mpsc::Sender<(String, String)>,
    /// Requests go apart from frames, so a node busy serving views still
    /// renews the ones it watches.
    requests: mpsc::Sender<String>,
    asks: Mutex<Option<mpsc::Receiver<Ask>>>,
    /// The views this node serves, and when each was last renewed.
    leases: Arc<Mutex<HashMap<String, Instant>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Views {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The relay's key: drawn from the audit key's private half, so every
/// node that holds the audit key has it, and nothing else does.
fn relay_key(audit_key: &russh::keys::PrivateKey) -> Result<Key<Aes256Gcm>, String> {
    use hmac::{KeyInit, Mac};
    let seed = audit_key
        .key_data()
        .ed25519()
        .ok_or("the audit key is not ed25519")?
        .private
        .to_bytes();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&seed).map_err(|e| e.to_string())?;
    mac.update(b"walissh live view relay v1");
    Ok(Key::<Aes256Gcm>::from(<[u8; 32]>::from(
        mac.finalize().into_bytes(),
    )))
}

fn channel(view: &str) -> String {
    format!("{REQUESTS}_{view}")
}

impl Pg {
    /// This node's relay: a connection that listens (requests for `node`,
    /// and the views it watches) and one that sends, each connected
    /// again after an outage.
    pub(crate) fn views(
        &self,
        node: &str,
        audit_key: &russh::keys::PrivateKey,
    ) -> Result<Views, String> {
        let key = relay_key(audit_key)?;
        let (cmd_tx, cmd_rx) = mpsc::channel(64);
        let (out_tx, out_rx) = mpsc::channel(OUT);
        let (req_tx, req_rx) = mpsc::channel(REQUESTS_OUT);
        let (ask_tx, ask_rx) = mpsc::channel(ASKS);
        let leases = Arc::new(Mutex::new(HashMap::new()));
        let hear = Hearing {
            node: node.to_string(),
            key,
            asks: ask_tx,
            leases: leases.clone(),
            served: HashMap::new(),
            dropped: 0,
            routes: HashMap::new(),
        };
        let tasks = vec![
            self.spawn(self.clone().listen_views(hear, cmd_rx)),
            self.spawn(self.clone().send_all(req_rx, out_rx)),
        ];
        Ok(Views {
            node: node.to_string(),
            key,
            cmd: cmd_tx,
            out: out_tx,
            requests: req_tx,
            asks: Mutex::new(Some(ask_rx)),
            leases,
            tasks,
        })
    }

    /// Listens until the [`Views`] is gone, connecting again after a
    /// second when the connection ends.
    async fn listen_views(self, mut hear: Hearing, mut cmds: mpsc::Receiver<Cmd>) {
        let mut failing = 0u32;
        loop {
            match self.hear_views(&mut hear, &mut cmds).await {
                Ok(true) => return,
                Ok(false) => failing = 0,
                Err(e) => {
                    failing += 1;
                    if failing == 5 {
                        tracing::warn!(error = %e, "live views from other nodes cannot be heard; trying again every second");
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// One connection's listening: Ok(true) once the [`Views`] is gone.
    async fn hear_views(
        &self,
        hear: &mut Hearing,
        cmds: &mut mpsc::Receiver<Cmd>,
    ) -> Result<bool, String> {
        use futures_util::StreamExt;
        let (client, mut connection) = self.connect().await?;
        let client = Arc::new(client);
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        // The connection is driven by reading its messages below; each
        // LISTEN is awaited beside it.
        let listen = |chan: String, done: Option<oneshot::Sender<()>>| {
            let client = client.clone();
            tokio::spawn(async move {
                if client
                    .batch_execute(&format!("LISTEN {chan}"))
                    .await
                    .is_ok()
                    && let Some(done) = done
                {
                    let _ = done.send(());
                }
            });
        };
        listen(REQUESTS.to_string(), None);
        for chan in hear.routes.keys() {
            listen(chan.clone(), None);
        }
        loop {
            tokio::select! {
                cmd = cmds.recv() => match cmd {
                    None => return Ok(true),
                    Some(Cmd::Listen(chan, frames, done)) => {
                        hear.routes.insert(chan.clone(), frames);
                        listen(chan, Some(done));
                    }
                    Some(Cmd::Unlisten(chan)) => {
                        hear.routes.remove(&chan);
                        let client = client.clone();
                        tokio::spawn(async move {
                            let _ = client.batch_execute(&format!("UNLISTEN {chan}")).await;
                        });
                    }
                },
                message = messages.next() => match message {
                    None => return Ok(false),
                    Some(Err(e)) => return Err(e.to_string()),
                    Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                        hear.heard(n.channel(), n.payload());
                    }
                    Some(Ok(_)) => {}
                }
            }
        }
    }

    /// Sends every notification queued, requests first, in order, on one
    /// connection of its own (so a view's frames arrive in the order
    /// sent).
    async fn send_all(
        self,
        mut requests: mpsc::Receiver<String>,
        mut out: mpsc::Receiver<(String, String)>,
    ) {
        let mut client: Option<tokio_postgres::Client> = None;
        loop {
            let next = tokio::select! {
                biased;
                r = requests.recv() => r.map(|r| (REQUESTS.to_string(), r)),
                f = out.recv() => f,
            };
            let Some((chan, payload)) = next else { return };
            if client.is_none() {
                match self.connect().await {
                    Ok((c, connection)) => {
                        tokio::spawn(async move {
                            let _ = connection.await;
                        });
                        client = Some(c);
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "a live view's frame not sent");
                        continue;
                    }
                }
            }
            let sent = match &client {
                Some(c) => {
                    c.execute("SELECT pg_notify($1, $2)", &[&chan, &payload])
                        .await
                }
                None => continue,
            };
            if sent.is_err() {
                // The watcher sees the gap and ends its view.
                client = None;
            }
        }
    }
}

/// What the listening connection does with what it hears.
struct Hearing {
    node: String,
    key: Key<Aes256Gcm>,
    asks: mpsc::Sender<Ask>,
    leases: Arc<Mutex<HashMap<String, Instant>>>,
    /// Every view this node agreed to serve within twice [`FRESH`]: a
    /// request played again (after its bye, say) opens nothing.
    served: HashMap<String, Instant>,
    /// Notifications dropped (not sealed, stale): logged at the 1st, 2nd,
    /// 4th, … so that whoever can notify cannot flood the log.
    dropped: u64,
    /// The views this node watches: their channels, and where frames go.
    routes: HashMap<String, mpsc::Sender<Vec<u8>>>,
}

impl Hearing {
    fn heard(&mut self, chan: &str, payload: &str) {
        if chan == REQUESTS {
            return self.request(payload);
        }
        let Some(frames) = self.routes.get(chan) else {
            return;
        };
        let Some(frame) = crate::sealed::open(&self.key, chan.as_bytes(), payload) else {
            tracing::warn!(
                channel = chan,
                "a live view's frame not sealed with the audit key was dropped"
            );
            return;
        };
        // A watcher that does not keep up loses its view: the sender
        // dropped, it ends and says so.
        if frames.try_send(frame).is_err() {
            self.routes.remove(chan);
        }
    }

    /// Logs a dropped notification, fewer and fewer of them.
    fn drop_one(&mut self, what: &str) {
        self.dropped += 1;
        if self.dropped.is_power_of_two() {
            tracing::warn!(dropped = self.dropped, "{what} was dropped");
        }
    }

    fn request(&mut self, payload: &str) {
        let Some(plain) = crate::sealed::open(&self.key, REQUESTS.as_bytes(), payload) else {
            return self.drop_one("a live view's request not sealed with the audit key");
        };
        let Ok(r) = serde_json::from_slice::<Request>(&plain) else {
            return;
        };
        if r.node != self.node {
            return;
        }
        if super::stops::now().abs_diff(r.at) > FRESH {
            return self.drop_one("a stale live view's request");
        }
        // A request is fresh for FRESH either way of now: what was served
        // is remembered twice that.
        let forget = Duration::from_secs(2 * FRESH + 2);
        self.served.retain(|_, at| at.elapsed() < forget);
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        match r.t.as_str() {
            // Once per view: a request played again is not a second view.
            "watch" if !self.served.contains_key(&r.view) && leases.len() < MAX_SERVED => {
                self.served.insert(r.view.clone(), Instant::now());
                leases.insert(r.view.clone(), Instant::now());
                let ask = Ask {
                    session: r.session,
                    view: r.view,
                    by: r.by,
                    addr: r.addr,
                    from: r.from,
                };
                if let Err(e) = self.asks.try_send(ask) {
                    let ask = match e {
                        mpsc::error::TrySendError::Full(a)
                        | mpsc::error::TrySendError::Closed(a) => a,
                    };
                    leases.remove(&ask.view);
                }
            }
            "renew" => {
                if let Some(at) = leases.get_mut(&r.view) {
                    *at = Instant::now();
                }
            }
            "bye" => {
                leases.remove(&r.view);
            }
            _ => {}
        }
    }
}

/// The next thing a view shows.
pub(crate) enum Next {
    Line(Arc<str>),
    /// Events skipped: the view fell behind.
    Skipped(u64),
    /// The view ended, and why.
    Ended(String),
}

impl Views {
    /// The views other nodes ask of this one: taken once, by the daemon.
    pub(crate) fn take_asks(&self) -> Option<mpsc::Receiver<Ask>> {
        self.asks.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn request(
        &self,
        t: &str,
        (node, view, session): (&str, &str, &str),
        (by, addr): (&str, &str),
    ) {
        let r = Request {
            t: t.to_string(),
            node: node.to_string(),
            view: view.to_string(),
            session: session.to_string(),
            by: by.to_string(),
            addr: addr.to_string(),
            from: self.node.clone(),
            at: super::stops::now(),
        };
        let plain = serde_json::to_vec(&r).unwrap_or_default();
        if let Some(sealed) = crate::sealed::seal(&self.key, REQUESTS.as_bytes(), &plain) {
            let _ = self.requests.try_send(sealed);
        }
    }

    /// Watches session `session`, which node `node` carries, for console
    /// login `by` at `addr`: listening on the view's channel first, then
    /// asking.
    pub(crate) async fn watch(
        self: &Arc<Self>,
        (node, session): (&str, &str),
        (by, addr): (&str, &str),
    ) -> Result<Remote, String> {
        let view = format!("{:016x}", rand::random::<u64>());
        let chan = channel(&view);
        let (tx, frames) = mpsc::channel(FRAMES);
        let (done, listening) = oneshot::channel();
        self.cmd
            .send(Cmd::Listen(chan.clone(), tx, done))
            .await
            .map_err(|_| "the relay is not running".to_string())?;
        if !matches!(tokio::time::timeout(FIRST, listening).await, Ok(Ok(()))) {
            let _ = self.cmd.try_send(Cmd::Unlisten(chan));
            return Err("the database did not take the view's channel".into());
        }
        let who = [node, &view, session, by, addr].map(str::to_string);
        self.request("watch", (node, &view, session), (by, addr));
        // Renewed apart from how the view is read: a viewer slow to take
        // the history still holds its lease.
        let (views, w) = (self.clone(), who.clone());
        let renewing = tokio::spawn(async move {
            let mut every = tokio::time::interval(RENEW);
            every.tick().await;
            loop {
                every.tick().await;
                views.request("renew", (&w[0], &w[1], &w[2]), (&w[3], &w[4]));
            }
        });
        Ok(Remote::new(self.clone(), who, frames, renewing))
    }

    /// Streams to view `ask.view` the recording so far (`history`), then
    /// each line as it comes, until the session ends or the watcher's
    /// lease runs out.
    pub(crate) async fn serve(
        &self,
        ask: &Ask,
        history: Vec<String>,
        mut lines: broadcast::Receiver<Arc<str>>,
    ) {
        let mut out = Frames::new(self, &ask.view);
        for line in history {
            out.push(HISTORY, &line).await;
        }
        out.flush(HISTORY).await;
        out.frame(LIVE, b"").await;
        let mut check = tokio::time::interval(RENEW);
        loop {
            tokio::select! {
                line = lines.recv() => match line {
                    Ok(line) => {
                        out.push(LIVE, &line).await;
                        for _ in 0..BATCH {
                            let Ok(line) = lines.try_recv() else { break };
                            out.push(LIVE, &line).await;
                        }
                        out.flush(LIVE).await;
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        let note = format!("\r\n[walissh: {n} events skipped: the view fell behind]\r\n");
                        out.push(LIVE, &serde_json::json!([0.0, "o", note]).to_string()).await;
                        out.flush(LIVE).await;
                    }
                    Err(broadcast::error::RecvError::Closed) => {
                        out.frame(END, b"the session ended").await;
                        break;
                    }
                },
                _ = check.tick() => {
                    let held = {
                        let leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
                        leases.get(&ask.view).is_some_and(|at| at.elapsed() <= LEASE)
                    };
                    if !held {
                        out.frame(END, b"the view's lease ran out").await;
                        break;
                    }
                    // A frame at least this often: the watcher tells a
                    // quiet session from a node gone.
                    out.frame(LIVE, b"").await;
                }
            }
        }
        self.end(&ask.view, None).await;
    }

    /// Ends view `view` as served from here: `why`, when the watcher is
    /// to be told (a session not here, the bastion shutting down).
    pub(crate) async fn end(&self, view: &str, why: Option<&str>) {
        if let Some(why) = why {
            Frames::new(self, view).frame(END, why.as_bytes()).await;
        }
        self.leases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(view);
    }
}

/// A served view's outgoing frames: numbered, chunked, sealed.
struct Frames<'a> {
    views: &'a Views,
    chan: String,
    seq: u64,
    buf: Vec<u8>,
}

impl<'a> Frames<'a> {
    fn new(views: &'a Views, view: &str) -> Frames<'a> {
        Frames {
            views,
            chan: channel(view),
            seq: 0,
            buf: Vec::new(),
        }
    }

    /// Adds `line` to what goes next, sending whole chunks as they fill.
    async fn push(&mut self, kind: u8, line: &str) {
        self.buf.extend_from_slice(line.as_bytes());
        self.buf.push(b'\n');
        while self.buf.len() >= CHUNK {
            let rest = self.buf.split_off(CHUNK);
            let chunk = std::mem::replace(&mut self.buf, rest);
            self.frame(kind, &chunk).await;
        }
    }

    async fn flush(&mut self, kind: u8) {
        if !self.buf.is_empty() {
            let chunk = std::mem::take(&mut self.buf);
            self.frame(kind, &chunk).await;
        }
    }

    async fn frame(&mut self, kind: u8, data: &[u8]) {
        self.seq += 1;
        let mut plain = Vec::with_capacity(9 + data.len());
        plain.push(kind);
        plain.extend_from_slice(&self.seq.to_be_bytes());
        plain.extend_from_slice(data);
        if let Some(sealed) = crate::sealed::seal(&self.views.key, self.chan.as_bytes(), &plain) {
            // Waits when the relay's queue is full: the session's lines
            // back up and the view skips, as a local one does.
            let _ = self.views.out.send((self.chan.clone(), sealed)).await;
        }
    }
}

/// A view of a session on another node, as the console reads it.
pub(crate) struct Remote {
    views: Arc<Views>,
    /// Node, view, session, by, addr.
    who: [String; 5],
    frames: mpsc::Receiver<Vec<u8>>,
    seq: u64,
    buf: Vec<u8>,
    lines: VecDeque<String>,
    live: bool,
    ended: Option<String>,
    /// When the last frame came: none for [`LEASE`] ends the view.
    heard: tokio::time::Instant,
    renewing: tokio::task::JoinHandle<()>,
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.renewing.abort();
        let [node, view, session, by, addr] = &self.who;
        self.views.request("bye", (node, view, session), (by, addr));
        let _ = self.views.cmd.try_send(Cmd::Unlisten(channel(view)));
    }
}

impl Remote {
    fn new(
        views: Arc<Views>,
        who: [String; 5],
        frames: mpsc::Receiver<Vec<u8>>,
        renewing: tokio::task::JoinHandle<()>,
    ) -> Remote {
        Remote {
            views,
            who,
            frames,
            seq: 0,
            buf: Vec::new(),
            lines: VecDeque::new(),
            live: false,
            ended: None,
            heard: tokio::time::Instant::now(),
            renewing,
        }
    }

    /// The recording so far, as the other node sends it first; Err when
    /// it does not answer in time, or ends the view at once.
    pub(crate) async fn history(&mut self) -> Result<Vec<String>, String> {
        let node = self.who[0].clone();
        let first = async {
            while !self.live && self.ended.is_none() {
                match self.frames.recv().await {
                    Some(frame) => self.take(&frame),
                    None => self.ended = Some("the view fell behind".into()),
                }
            }
        };
        if tokio::time::timeout(FIRST, first).await.is_err() {
            return Err(format!("node {node} did not answer"));
        }
        match (&self.ended, self.live) {
            (Some(why), false) => Err(format!("node {node}: {why}")),
            _ => Ok(self.lines.drain(..).collect()),
        }
    }

    /// The next line, a skip, or the end. Cancel-safe: what it awaits is
    /// a queue and a timer.
    pub(crate) async fn next(&mut self) -> Next {
        loop {
            if let Some(line) = self.lines.pop_front() {
                return Next::Line(Arc::from(line));
            }
            if let Some(why) = &self.ended {
                return Next::Ended(why.clone());
            }
            tokio::select! {
                frame = self.frames.recv() => match frame {
                    Some(frame) => self.take(&frame),
                    None => {
                        self.ended = Some(format!("the view fell behind, or node {} stopped answering", self.who[0]));
                    }
                },
                _ = tokio::time::sleep_until(self.heard + LEASE) => {
                    self.ended = Some(format!("node {} stopped answering", self.who[0]));
                }
            }
        }
    }

    /// A line already here, if one is.
    pub(crate) fn try_line(&mut self) -> Option<Arc<str>> {
        self.lines.pop_front().map(Arc::from)
    }

    /// One frame: its number must be the next (one seen already is
    /// dropped), else the view ends.
    fn take(&mut self, frame: &[u8]) {
        let (Some(&kind), Some(seq)) = (
            frame.first(),
            frame.get(1..9).and_then(|s| <[u8; 8]>::try_from(s).ok()),
        ) else {
            return;
        };
        let (data, seq) = (&frame[9..], u64::from_be_bytes(seq));
        // One already taken, played again by whoever can notify: nothing.
        if seq <= self.seq {
            return;
        }
        if seq != self.seq + 1 {
            self.ended = Some("a frame of the relay was lost".into());
            return;
        }
        self.seq = seq;
        self.heard = tokio::time::Instant::now();
        match kind {
            HISTORY | LIVE => {
                self.live |= kind == LIVE;
                self.buf.extend_from_slice(data);
                while let Some(i) = memchr::memchr(b'\n', &self.buf) {
                    let line: Vec<u8> = self.buf.drain(..=i).collect();
                    self.lines
                        .push_back(String::from_utf8_lossy(&line[..i]).into_owned());
                }
            }
            END => self.ended = Some(String::from_utf8_lossy(data).into_owned()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> russh::keys::PrivateKey {
        russh::keys::PrivateKey::random(&mut rand::rng(), russh::keys::Algorithm::Ed25519).unwrap()
    }

    /// Every node that holds the audit key draws the same relay key;
    /// another audit key draws another.
    #[test]
    fn the_relay_key_is_the_audit_keys() {
        let k = key();
        assert_eq!(relay_key(&k).unwrap(), relay_key(&k).unwrap());
        assert_ne!(relay_key(&k).unwrap(), relay_key(&key()).unwrap());
    }

    /// A frame fills at most a notification (8000 bytes) once sealed.
    #[test]
    fn a_full_frame_fits_a_notification() {
        let k = relay_key(&key()).unwrap();
        let plain = vec![b'x'; 9 + CHUNK];
        let chan = channel(&format!("{:016x}", u64::MAX));
        let sealed = crate::sealed::seal(&k, chan.as_bytes(), &plain).unwrap();
        assert!(sealed.len() < 8000, "{}", sealed.len());
    }

    fn hearing(node: &str, key: Key<Aes256Gcm>) -> (Hearing, mpsc::Receiver<Ask>) {
        let (asks, rx) = mpsc::channel(ASKS);
        let h = Hearing {
            node: node.into(),
            key,
            asks,
            leases: Arc::new(Mutex::new(HashMap::new())),
            served: HashMap::new(),
            dropped: 0,
            routes: HashMap::new(),
        };
        (h, rx)
    }

    fn sealed(key: &Key<Aes256Gcm>, t: &str, node: &str, view: &str, at: u64) -> String {
        let r = Request {
            t: t.into(),
            node: node.into(),
            view: view.into(),
            session: "s1".into(),
            by: "erin".into(),
            addr: "127.0.0.1:1".into(),
            from: "n1".into(),
            at,
        };
        crate::sealed::seal(key, REQUESTS.as_bytes(), &serde_json::to_vec(&r).unwrap()).unwrap()
    }

    /// Anyone who can connect to the database can notify: a request is
    /// taken only sealed with the relay key, addressed to this node, and
    /// fresh; one played again does not open a second view; a bye ends
    /// the lease.
    #[test]
    fn only_a_sealed_fresh_request_for_this_node_is_served_once() {
        let k = relay_key(&key()).unwrap();
        let other = relay_key(&key()).unwrap();
        let (mut h, mut asks) = hearing("n2", k);
        let now = super::super::stops::now();
        h.heard(REQUESTS, &sealed(&other, "watch", "n2", "v0", now));
        h.heard(REQUESTS, r#"{"t":"watch","node":"n2"}"#);
        h.heard(REQUESTS, &sealed(&k, "watch", "n3", "v1", now));
        h.heard(REQUESTS, &sealed(&k, "watch", "n2", "v2", now - 2 * FRESH));
        assert!(
            asks.try_recv().is_err(),
            "a request that is not good was served"
        );
        let good = sealed(&k, "watch", "n2", "v3", now);
        h.heard(REQUESTS, &good);
        h.heard(REQUESTS, &good);
        assert_eq!(asks.try_recv().unwrap().view, "v3");
        assert!(asks.try_recv().is_err(), "played again, served twice");
        assert!(h.leases.lock().unwrap().contains_key("v3"));
        h.heard(REQUESTS, &sealed(&k, "bye", "n2", "v3", now));
        assert!(!h.leases.lock().unwrap().contains_key("v3"));
        // Its watch played again after its bye: no second view.
        h.heard(REQUESTS, &good);
        assert!(
            asks.try_recv().is_err(),
            "a view served again after its bye"
        );
        assert!(!h.leases.lock().unwrap().contains_key("v3"));
    }

    /// A watcher takes frames in order only: one missing ends the view
    /// (no screen with a hole); lines are whole across frames.
    #[test]
    fn a_lost_frame_ends_the_view() {
        let frame = |kind: u8, seq: u64, data: &str| {
            let mut f = vec![kind];
            f.extend_from_slice(&seq.to_be_bytes());
            f.extend_from_slice(data.as_bytes());
            f
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (cmd, _cmds) = mpsc::channel(4);
            let (out, _outs) = mpsc::channel(4);
            let (requests, _reqs) = mpsc::channel(4);
            let views = Arc::new(Views {
                node: "n1".into(),
                key: relay_key(&key()).unwrap(),
                cmd,
                out,
                requests,
                asks: Mutex::new(None),
                leases: Default::default(),
                tasks: Vec::new(),
            });
            let (_tx, frames) = mpsc::channel(4);
            let who = ["n2", "v", "s", "erin", "a"].map(str::to_string);
            let mut r = Remote::new(views, who, frames, tokio::spawn(async {}));
            r.take(&frame(HISTORY, 1, "{\"version\":2}\n[0.1,\"o\",\"a"));
            r.take(&frame(LIVE, 2, "b\"]\n"));
            assert_eq!(r.lines, ["{\"version\":2}", "[0.1,\"o\",\"ab\"]"]);
            assert!(r.live && r.ended.is_none());
            // Played again: dropped, the view goes on.
            r.take(&frame(LIVE, 2, "b\"]\n"));
            assert_eq!(r.lines.len(), 2);
            assert!(r.ended.is_none());
            r.take(&frame(LIVE, 4, "[0.2,\"o\",\"c\"]\n"));
            assert_eq!(r.ended.as_deref(), Some("a frame of the relay was lost"));
        });
    }
}
