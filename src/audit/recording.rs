//! Session recordings in asciicast v2, written by one recorder thread.
//!
//! A session owns a [`Recording`], which turns terminal bytes into
//! timed asciicast events (output always, input only with
//! `[audit] record_input`) and queues them for the thread. The thread
//! writes them as JSON lines (the escaping stays off the session's task),
//! owns the files and flushes whenever its queue runs dry, so a live
//! recording is at most one burst behind the screen.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

enum Msg {
    Open {
        id: Arc<str>,
        path: PathBuf,
        header: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// An event, made into its JSON line on the recorder's thread: the
    /// escaping is most of a recording's cost, and the session's task is
    /// on the byte path.
    Event {
        id: Arc<str>,
        at: f64,
        code: &'static str,
        text: String,
    },
    Close {
        id: Arc<str>,
        /// Told once the file is flushed and closed.
        done: oneshot::Sender<()>,
    },
    /// A live view joins: the file is flushed, and each event from now on
    /// is also sent to it.
    Watch {
        id: Arc<str>,
        reply: oneshot::Sender<Option<Watch>>,
    },
}

/// A live view of a recording: the file's first `upto` bytes (header and
/// events, whole), then each event line as it is written. The lines end
/// when the recording closes.
pub(crate) struct Watch {
    pub(crate) path: PathBuf,
    pub(crate) upto: u64,
    pub(crate) lines: tokio::sync::broadcast::Receiver<Arc<str>>,
}

/// Event lines a live view may fall behind by before it is cut off (one
/// line is one chunk of output: this bounds what a watched session holds
/// for a slow viewer).
const WATCH_BACKLOG: usize = 256;

/// Events the recorder's queue holds before a session waits for room
/// (each is one chunk of output, so this bounds the memory they hold):
/// several times what a flood brings in the recorder's COALESCE pause.
const QUEUE: usize = 1024;

/// Starts recordings; cheap to clone.
#[derive(Clone)]
pub(crate) struct Recorder {
    tx: mpsc::Sender<Msg>,
    dir: PathBuf,
    record_input: bool,
    spool: Arc<Spool>,
    /// Where closed recordings go to be uploaded (`upload`), if anywhere.
    uploads: Option<super::upload::Uploads>,
}

/// Whether recordings are being written, for `/healthz` and the watchdog.
#[derive(Default)]
pub(crate) struct Spool {
    /// A recording's writes are failing now (kept in step by the thread).
    writes: std::sync::atomic::AtomicBool,
    /// The last recording could not be created.
    opens: std::sync::atomic::AtomicBool,
    metrics: Option<Arc<super::metrics::Metrics>>,
}

impl Spool {
    fn set(flag: &std::sync::atomic::AtomicBool, on: bool) {
        flag.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    fn failed(&self) {
        if let Some(m) = &self.metrics {
            m.recording_failed();
        }
    }
}

/// What a recording's header says about the terminal.
pub(crate) struct Header<'a> {
    pub(crate) cols: u32,
    pub(crate) rows: u32,
    pub(crate) term: &'a str,
    pub(crate) title: &'a str,
    /// A command's output with no terminal (`ssh bastion tar c …`, scp):
    /// the one kind of stream whose binary stretches are summarised
    /// rather than kept. A terminal's output is kept whatever its bytes:
    /// a shell whose output starts with a NUL is still a shell.
    pub(crate) transfer: bool,
}

impl Recorder {
    /// What keeps recordings from being written, if anything.
    pub(crate) fn problem(&self) -> Option<&'static str> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.tx.is_closed() {
            return Some("the recorder has stopped");
        }
        if self.spool.writes.load(Relaxed) || self.spool.opens.load(Relaxed) {
            return Some("session recordings cannot be written");
        }
        None
    }

    /// A live view of recording `id`, if it is open.
    pub(crate) async fn watch(&self, id: &str) -> Option<Watch> {
        let (reply, answer) = oneshot::channel();
        let id = Arc::from(id);
        self.tx.send(Msg::Watch { id, reply }).await.ok()?;
        answer.await.ok().flatten()
    }

    /// Starts the recorder's thread; its errors are counted in `metrics`.
    pub(crate) fn start(
        dir: PathBuf,
        record_input: bool,
        (metrics, uploads): (
            Option<Arc<super::metrics::Metrics>>,
            Option<super::upload::Uploads>,
        ),
    ) -> Result<(Recorder, std::thread::JoinHandle<()>), String> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let spool = Arc::new(Spool {
            metrics,
            ..Spool::default()
        });
        let (s, d) = (spool.clone(), dir.clone());
        let thread = std::thread::Builder::new()
            .name("recorder".into())
            .spawn(move || recorder_loop(rx, &s, &d))
            .map_err(|e| format!("cannot start the recorder: {e}"))?;
        Ok((
            Recorder {
                tx,
                dir,
                record_input,
                spool,
                uploads,
            },
            thread,
        ))
    }

    /// Creates `<dir>/<id>.cast` and writes its header.
    pub(crate) async fn open(&self, id: &str, header: Header<'_>) -> Result<Recording, String> {
        let path = self.dir.join(format!("{id}.cast"));
        let transfer = header.transfer;
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let header = json!({
            "version": 2,
            "width": header.cols,
            "height": header.rows,
            "timestamp": timestamp,
            "env": {"TERM": header.term},
            "title": header.title,
        })
        .to_string();
        let id: Arc<str> = Arc::from(id);
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Msg::Open {
                id: id.clone(),
                path: path.clone(),
                header,
                reply,
            })
            .await
            .map_err(|_| "the recorder has stopped".to_string())?;
        answer
            .await
            .map_err(|_| "the recorder has stopped".to_string())??;
        Ok(Recording {
            id,
            path,
            tx: self.tx.clone(),
            uploads: self.uploads.clone(),
            start: Instant::now(),
            record_input: self.record_input,
            transfer,
        })
    }
}

/// One session's recording. Each direction of the session writes through
/// its own [`Track`], so both can run at once.
pub(crate) struct Recording {
    /// Shared with every line sent, so a chunk of output costs no copy of it.
    id: Arc<str>,
    pub(crate) path: PathBuf,
    tx: mpsc::Sender<Msg>,
    uploads: Option<super::upload::Uploads>,
    start: Instant,
    record_input: bool,
    /// Binary output is summarised (see [`Header::transfer`]).
    transfer: bool,
}

/// One stream of a recording: output ("o") or input ("i").
pub(crate) struct Track<'a> {
    rec: &'a Recording,
    code: &'static str,
    carry: Vec<u8>,
    enabled: bool,
    /// Whether binary output is summarised; only a transfer's is.
    summarise: bool,
    /// Bytes of binary output (chunks with a NUL byte: a tar or scp
    /// stream) not said yet: counted and hashed, not kept, so a transfer
    /// costs the recording a line, not its size, and the line still pins
    /// down what went by.
    binary: u64,
    digest: Sha256,
    /// Binary output went by already.
    was_binary: bool,
}

/// A marker's label is cut to this many bytes.
const MARKER_MAX: usize = 80;

/// The label of the marker an audit event stands for.
pub(crate) fn marker_of(ev: &super::Event) -> Option<String> {
    let text = |k: &str| ev.fields.get(k).and_then(serde_json::Value::as_str);
    match ev.kind {
        super::Kind::AiPrompt => text("text").map(str::to_string),
        super::Kind::AiToolCall => {
            let decision = text("decision").unwrap_or("");
            match (text("command"), text("tool")) {
                (Some(c), _) => Some(format!("ai $ {c} ({decision})")),
                (None, Some(t)) => Some(format!(
                    "ai mcp {}/{t} ({decision})",
                    text("server").unwrap_or("")
                )),
                _ => None,
            }
        }
        super::Kind::AiAnswer => {
            text("text").map(|t| format!("ai: {}", t.lines().next().unwrap_or("")))
        }
        _ => None,
    }
}

/// Binary output is said at least once per this many bytes.
const BINARY_REPORT: u64 = 64 << 20;

impl Recording {
    pub(crate) fn output(&self) -> Track<'_> {
        Track {
            rec: self,
            code: "o",
            carry: Vec::new(),
            enabled: true,
            summarise: self.transfer,
            binary: 0,
            digest: Sha256::new(),
            was_binary: false,
        }
    }

    /// Typed input, recorded only with `[audit] record_input`.
    pub(crate) fn input(&self) -> Track<'_> {
        Track {
            rec: self,
            code: "i",
            carry: Vec::new(),
            enabled: self.record_input,
            summarise: self.transfer,
            binary: 0,
            digest: Sha256::new(),
            was_binary: false,
        }
    }

    /// An asciicast marker (`"m"`) here: a place a player can jump to.
    pub(crate) async fn marker(&self, label: &str) {
        let label: String = label.chars().filter(|c| !c.is_control()).collect();
        let label = crate::text::prefix(label.trim(), MARKER_MAX);
        self.event("m", label.to_string()).await;
    }

    /// The marker an audit event gets, if any: a question, each agent
    /// call with its decision, the answer.
    pub(crate) async fn mark_event(&self, ev: &super::Event) {
        if let Some(label) = marker_of(ev) {
            self.marker(&label).await;
        }
    }

    pub(crate) async fn resize(&self, cols: u32, rows: u32) {
        self.event("r", format!("{cols}x{rows}")).await;
    }

    async fn event(&self, code: &'static str, text: String) {
        if text.is_empty() {
            return;
        }
        let at = self.start.elapsed().as_secs_f64();
        let _ = self
            .tx
            .send(Msg::Event {
                id: self.id.clone(),
                at,
                code,
                text,
            })
            .await;
    }

    /// Closes the recording; returns its SHA-256 and length, for the
    /// session's `session_end` row (none if it cannot be read back).
    pub(crate) async fn close(self) -> Option<(String, u64)> {
        let (done, closed) = oneshot::channel();
        let _ = self.tx.send(Msg::Close { id: self.id, done }).await;
        closed.await.ok()?;
        let path = self.path.clone();
        // Read back whole: file I/O, off the runtime.
        let digest =
            match tokio::task::spawn_blocking(move || super::chain::file_digest(&path)).await {
                Ok(Ok(digest)) => Some(digest),
                _ => None,
            };
        if let Some(u) = &self.uploads {
            u.closed(self.path.clone());
        }
        digest
    }
}

impl Track<'_> {
    pub(crate) async fn write(&mut self, data: &[u8]) {
        if !self.enabled {
            return;
        }
        if let Some(nul) = memchr::memchr(0, data).filter(|_| self.summarise) {
            // The text before a stream turns binary is kept (`echo x;
            // cat file.tar` in one chunk); the rest is counted.
            let (text, rest) = if self.binary == 0 && !self.was_binary {
                data.split_at(nul)
            } else {
                (&[][..], data)
            };
            if !text.is_empty() {
                let text = take_utf8(&mut self.carry, text);
                self.rec.event(self.code, text).await;
            }
            self.was_binary = true;
            self.binary += rest.len() as u64;
            self.digest.update(rest);
            if self.binary >= BINARY_REPORT {
                self.say_binary().await;
            }
            return;
        }
        if self.binary > 0 {
            self.say_binary().await;
        }
        let text = take_utf8(&mut self.carry, data);
        self.rec.event(self.code, text).await;
    }

    /// Says how much binary output went by unrecorded, and its SHA-256.
    async fn say_binary(&mut self) {
        let line = self.binary_line();
        self.rec.event(self.code, line).await;
    }

    /// `[N bytes of binary output, sha256 HEX]`, for what was counted
    /// since the last such line; the count starts again.
    fn binary_line(&mut self) -> String {
        let n = std::mem::take(&mut self.binary);
        let digest = std::mem::replace(&mut self.digest, Sha256::new()).finalize();
        let hex = super::chain::hex(&digest);
        format!("[{n} bytes of binary output, sha256 {hex}]\r\n")
    }
}

impl Drop for Track<'_> {
    /// The stream ended: binary output still counted is said, if the
    /// recorder's queue has room (a session's end must not wait on it).
    fn drop(&mut self) {
        if self.enabled && self.binary > 0 {
            let text = self.binary_line();
            let _ = self.rec.tx.try_send(Msg::Event {
                id: self.rec.id.clone(),
                at: self.rec.start.elapsed().as_secs_f64(),
                code: self.code,
                text,
            });
        }
    }
}

/// One event line, `[time, code, text]`, serialised straight into the file's
/// buffer.
fn write_event(f: &mut BufWriter<File>, at: f64, code: &str, text: &str) -> std::io::Result<()> {
    serde_json::to_writer(&mut *f, &((at * 1e6).round() / 1e6, code, text))?;
    f.write_all(b"\n")
}

/// Decodes as much of `carry + data` as is complete UTF-8; an incomplete
/// sequence at the end waits for the next chunk, invalid bytes become U+FFFD.
fn take_utf8(carry: &mut Vec<u8>, data: &[u8]) -> String {
    if carry.is_empty()
        && let Ok(s) = std::str::from_utf8(data)
    {
        return s.to_string();
    }
    carry.extend_from_slice(data);
    let mut out = String::with_capacity(carry.len());
    let mut rest: &[u8] = carry;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                rest = &[];
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                match e.error_len() {
                    Some(n) => {
                        out.push('\u{FFFD}');
                        rest = &after[n..];
                    }
                    None => {
                        rest = after;
                        break;
                    }
                }
            }
        }
    }
    *carry = rest.to_vec();
    out
}

/// How often a recording whose writes fail is tried again.
const RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// One open recording. When a write fails (a full disk), the file is cut
/// back to its last whole flushed event, what follows is counted instead
/// of written, and writing is tried again every [`RETRY`]; once it works,
/// an output event says how much is missing, so the gap is in the
/// recording itself, and the session is recorded on.
struct Cast {
    w: BufWriter<File>,
    /// When the recording started, for the time of a gap's marker written
    /// when no event comes (the session's own clock, `Recording::start`,
    /// is a few microseconds earlier).
    opened: Instant,
    /// The time of the last event written: a gap's marker never goes
    /// before it.
    last_at: f64,
    /// Bytes of the file known written whole (flushed, whole events).
    good: u64,
    failing: Option<Failing>,
    path: PathBuf,
    /// Live views: each event line written goes to them too.
    watchers: Option<tokio::sync::broadcast::Sender<Arc<str>>>,
}

struct Failing {
    /// Bytes of terminal text not recorded.
    missed: u64,
    last_try: Instant,
}

/// The buffer of a recording's writer.
const BUFFER: usize = 64 * 1024;

impl Cast {
    /// Seconds since the recording started.
    fn elapsed(&self) -> f64 {
        self.opened.elapsed().as_secs_f64()
    }

    fn event(&mut self, id: &str, at: f64, code: &str, text: &str) {
        if self.failing.is_some() {
            self.retry(id, at);
        }
        if let Some(f) = &mut self.failing {
            f.missed += text.len() as u64;
            return;
        }
        match write_event(&mut self.w, at, code, text) {
            Ok(()) => self.last_at = self.last_at.max(at),
            Err(e) => self.fail(id, &e, text.len() as u64),
        }
        if let Some(w) = &self.watchers {
            match w.receiver_count() {
                0 => self.watchers = None,
                _ => {
                    let line = serde_json::to_string(&((at * 1e6).round() / 1e6, code, text));
                    let _ = w.send(Arc::from(line.unwrap_or_default()));
                }
            }
        }
    }

    /// A live view joins: what the file holds whole now, and the lines
    /// from here on.
    fn watch(&mut self, id: &str) -> Watch {
        self.flush(id);
        let sender = self
            .watchers
            .get_or_insert_with(|| tokio::sync::broadcast::channel(WATCH_BACKLOG).0);
        Watch {
            path: self.path.clone(),
            upto: self.good,
            lines: sender.subscribe(),
        }
    }

    /// The queue is dry: push what is buffered to the file.
    fn flush(&mut self, id: &str) {
        if self.failing.is_some() {
            return;
        }
        match self
            .w
            .flush()
            .and_then(|_| self.w.get_mut().stream_position())
        {
            Ok(at) => self.good = at,
            Err(e) => self.fail(id, &e, 0),
        }
    }

    /// A write failed: what was buffered is counted as missed and dropped,
    /// and the file is cut back to its last whole event at once, so it
    /// stays a valid recording while the storage is failing.
    fn fail(&mut self, id: &str, e: &std::io::Error, missed: u64) {
        tracing::error!(session = id, error = %e, "recording write failed; the output is counted and recording resumes when the storage works again");
        let missed = missed + self.w.buffer().len() as u64;
        if let Ok(file) = self.w.get_ref().try_clone() {
            // `into_parts` drops the buffer without writing it.
            let old = std::mem::replace(&mut self.w, BufWriter::with_capacity(BUFFER, file));
            let _ = old.into_parts();
        }
        let _ = self.cut_back();
        self.failing = Some(Failing {
            missed,
            last_try: Instant::now(),
        });
    }

    /// Cuts the file to its last whole event, and writes on from there.
    /// Returns how many bytes were cut.
    fn cut_back(&mut self) -> std::io::Result<u64> {
        let file = self.w.get_mut();
        let cut = file.metadata()?.len().saturating_sub(self.good);
        file.set_len(self.good)?;
        file.seek(std::io::SeekFrom::Start(self.good))?;
        Ok(cut)
    }

    /// While failing, at most every [`RETRY`]: tries to write again,
    /// starting with an output event that says what is missing.
    fn retry(&mut self, id: &str, at: f64) {
        self.try_resume(id, at, false)
    }

    /// Tries to resume now, whenever the last try was: the recording is
    /// being closed, and this is its last chance to say what it missed.
    fn retry_now(&mut self, id: &str, at: f64) {
        self.try_resume(id, at, true)
    }

    fn try_resume(&mut self, id: &str, at: f64, now: bool) {
        let Some(f) = &mut self.failing else {
            return;
        };
        if !now && f.last_try.elapsed() < RETRY {
            return;
        }
        f.last_try = Instant::now();
        let missed = f.missed;
        let at = at.max(self.last_at);
        let resumed = self.cut_back().and_then(|cut| {
            let missed = missed + cut;
            let note = format!(
                "\r\n[walissh: {missed} bytes of output were not recorded: the storage failed]\r\n"
            );
            write_event(&mut self.w, at, "o", &note)?;
            self.w.flush()?;
            self.good = self.w.get_mut().stream_position()?;
            Ok(missed)
        });
        match resumed {
            Ok(missed) => {
                self.failing = None;
                tracing::info!(session = id, missed, "recording resumed");
            }
            Err(_) => {
                // The marker did not fit: drop it, as what it marks.
                if let Ok(file) = self.w.get_ref().try_clone() {
                    let old =
                        std::mem::replace(&mut self.w, BufWriter::with_capacity(BUFFER, file));
                    let _ = old.into_parts();
                }
                let _ = self.cut_back();
            }
        }
    }
}

/// How long the recorder lets a flood's events gather once it is woken
/// again this soon after its last batch: at most a few hundred wake-ups a
/// second under any flood (each was a task switch on the byte path, a
/// quarter of a PTY flood's CPU), while an event after a quiet spell is
/// written at once. A live view is that much later at most; the queue
/// holds a flood's events for that long (QUEUE).
const COALESCE: std::time::Duration = std::time::Duration::from_millis(2);

fn recorder_loop(mut rx: mpsc::Receiver<Msg>, spool: &Spool, dir: &std::path::Path) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut files: HashMap<Arc<str>, Cast> = HashMap::new();
    let waiter = match super::Waiter::new() {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(error = %e, "the recorder cannot start");
            return;
        }
    };
    let mut last_drain: Option<std::time::Instant> = None;
    loop {
        // Woken again soon after the last batch: output is flooding in.
        // Let it gather for a moment, so the thread (and each session
        // that would wake it) pays one wake-up per batch, not per chunk.
        if last_drain.is_some_and(|t| t.elapsed() < COALESCE) {
            std::thread::sleep(COALESCE);
        }
        // While a recording is failing, or the last could not be created,
        // wake up to try again even when nothing comes: it resumes (and
        // /healthz says so) as soon as the storage is back.
        if spool.opens.load(Relaxed) && can_create_in(dir) {
            Spool::set(&spool.opens, false);
            tracing::info!("session recordings can be created again");
        }
        let failing = files.values().any(|c| c.failing.is_some()) || spool.opens.load(Relaxed);
        let first = match failing {
            false => match rx.blocking_recv() {
                Some(m) => Some(m),
                None => break,
            },
            true => match waiter.recv_within(&mut rx, RETRY) {
                Err(()) => break,
                Ok(m) => m,
            },
        };
        last_drain = Some(std::time::Instant::now());
        let mut next = first;
        while let Some(msg) = next {
            handle(msg, &mut files, spool);
            next = rx.try_recv().ok();
        }
        // The queue is dry: push what we have to the page cache, so a
        // recording being read live is current.
        for (id, cast) in files.iter_mut() {
            let was = cast.failing.is_some();
            cast.retry(id, cast.elapsed());
            cast.flush(id);
            if !was && cast.failing.is_some() {
                spool.failed();
            }
        }
        Spool::set(&spool.writes, files.values().any(|c| c.failing.is_some()));
    }
}

fn handle(msg: Msg, files: &mut HashMap<Arc<str>, Cast>, spool: &Spool) {
    match msg {
        Msg::Open {
            id,
            path,
            header,
            reply,
        } => {
            let opened = create(&path, &header);
            Spool::set(&spool.opens, opened.is_err());
            if opened.is_err() {
                spool.failed();
            }
            let answer = opened.map(|cast| {
                files.insert(id, cast);
            });
            let _ = reply.send(answer);
        }
        Msg::Event { id, at, code, text } => {
            if let Some(cast) = files.get_mut(&id) {
                let was = cast.failing.is_some();
                cast.event(&id, at, code, &text);
                if !was && cast.failing.is_some() {
                    spool.failed();
                }
            }
        }
        Msg::Close { id, done } => {
            if let Some(mut cast) = files.remove(&id) {
                cast.retry_now(&id, cast.elapsed());
                cast.flush(&id);
                if let Some(f) = &cast.failing {
                    tracing::error!(session = %id, missed = f.missed, "recording closed with output not recorded");
                }
            }
            let _ = done.send(());
        }
        Msg::Watch { id, reply } => {
            let watch = files.get_mut(&id).map(|cast| cast.watch(&id));
            let _ = reply.send(watch);
        }
    }
}

/// Whether a file can be created and written in `dir` now.
fn can_create_in(dir: &std::path::Path) -> bool {
    let probe = dir.join(".walissh-probe");
    let written = std::fs::write(&probe, b"walissh\n");
    let _ = std::fs::remove_file(&probe);
    written.is_ok()
}

fn create(path: &PathBuf, header: &str) -> Result<Cast, String> {
    if let Some(dir) = path.parent() {
        crate::keys::create_private_dir(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = BufWriter::with_capacity(BUFFER, file);
    let written = writeln!(w, "{header}").and_then(|_| w.flush());
    if let Err(e) = written {
        // A header cut short is no recording: leave none behind.
        let _ = std::fs::remove_file(path);
        return Err(format!("{}: {e}", path.display()));
    }
    Ok(Cast {
        w,
        good: header.len() as u64 + 1,
        failing: None,
        path: path.clone(),
        watchers: None,
        opened: Instant::now(),
        last_at: 0.0,
    })
}

/// Makes a recording a crash left open valid asciicast v2 again: a last
/// event cut short is dropped (the file ends at its last complete line),
/// and a file that lost even its header gets a plain one. Returns whether
/// anything changed. Blocking file I/O: at start-up, before serving.
pub(crate) fn repair(path: &std::path::Path) -> std::io::Result<bool> {
    let bytes = std::fs::read(path)?;
    let mut keep = 0;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let whole = line.ends_with(b"\n");
        if !whole || serde_json::from_slice::<serde_json::Value>(line).is_err() {
            break;
        }
        keep += line.len();
    }
    if keep == bytes.len() && keep > 0 {
        return Ok(false);
    }
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    if keep == 0 {
        // Not even the header was written: one with what any player needs.
        let header = json!({"version": 2, "width": 80, "height": 24}).to_string() + "\n";
        file.set_len(0)?;
        (&file).write_all(header.as_bytes())?;
    } else {
        file.set_len(keep as u64)?;
    }
    file.sync_all()?;
    Ok(true)
}

/// The recording's first `upto` bytes as lines: its header, then its last
/// whole events within `max` bytes (what a live view is sent first).
/// Blocking file I/O.
pub(crate) fn history(path: &std::path::Path, upto: u64, max: u64) -> std::io::Result<Vec<String>> {
    use std::io::{BufRead, Read};
    let file = std::fs::File::open(path)?;
    let mut reader = std::io::BufReader::new(file);
    let mut header = String::new();
    (&mut reader).take(64 * 1024).read_line(&mut header)?;
    let header_len = header.len() as u64;
    let mut lines = vec![header.trim_end().to_string()];
    let from = header_len.max(upto.saturating_sub(max));
    reader.seek(std::io::SeekFrom::Start(from))?;
    let mut rest = reader.take(upto.saturating_sub(from));
    let mut first = from > header_len;
    let mut line = String::new();
    loop {
        line.clear();
        if rest.read_line(&mut line)? == 0 {
            break;
        }
        // Cut in the middle of an event: start at the next whole one.
        if std::mem::take(&mut first) {
            continue;
        }
        if line.ends_with('\n') {
            lines.push(line.trim_end().to_string());
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::{history, repair, take_utf8};

    #[test]
    fn a_recording_cut_by_a_crash_ends_at_its_last_whole_event() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.cast");
        let whole = "{\"version\":2,\"width\":80,\"height\":24}\n[0.1,\"o\",\"a\"]\n";
        std::fs::write(&path, format!("{whole}[0.2,\"o\",\"b")).unwrap();
        assert!(repair(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), whole);
        assert!(
            !repair(&path).unwrap(),
            "a whole recording is left as it is"
        );
        std::fs::write(&path, "{\"vers").unwrap();
        assert!(repair(&path).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        let header: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(header["version"], 2);
    }

    #[test]
    fn utf8_split_across_chunks() {
        let mut carry = Vec::new();
        let bytes = "é€".as_bytes();
        assert_eq!(take_utf8(&mut carry, &bytes[..1]), "");
        assert_eq!(take_utf8(&mut carry, &bytes[1..3]), "é");
        assert_eq!(take_utf8(&mut carry, &bytes[3..]), "€");
        assert_eq!(take_utf8(&mut carry, b"a\xffb"), "a\u{FFFD}b");
        assert!(carry.is_empty());
    }

    #[test]
    fn history_is_the_header_and_the_last_whole_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.cast");
        let mut text = String::from("{\"version\":2}\n");
        for i in 0..10 {
            text.push_str(&format!("[{i}.0,\"o\",\"line {i}\"]\n"));
        }
        text.push_str("[10.0,\"o\",\"cut");
        std::fs::write(&path, &text).unwrap();
        let whole = text.rfind('\n').unwrap() as u64 + 1;
        let all = history(&path, whole, 4 << 20).unwrap();
        assert_eq!(all.len(), 11);
        assert_eq!(all[0], "{\"version\":2}");
        assert_eq!(all[10], "[9.0,\"o\",\"line 9\"]");
        // Only what was whole when the view joined.
        let third = text.match_indices('\n').nth(2).unwrap().0 as u64 + 1;
        let early = history(&path, third, 4 << 20).unwrap();
        assert_eq!(early.len(), 3, "{early:?}");
    }
}
