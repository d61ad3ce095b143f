//! A vt100 model of what the user of a PTY session sees, kept off the byte
//! path.
//!
//! The session hands each chunk it sends to the client to [`Screen::feed`],
//! which never waits: the model runs on the screens thread (`workers`)
//! behind a small queue. Output beyond what a person can read is not
//! modelled: past a budget of [`RATE`] bytes a second (with a burst of as
//! much), or when the queue is full, chunks are dropped and the model is
//! marked stale until the next prompt, where it starts afresh. What a
//! flood printed is in the command records' head and tail anyway, and a
//! flood modelled in full would cost a core (vt100 models line-by-line
//! output at about 30 MiB/s). The agent's context asks it for a [`ScreenView`].
//!
//! Models' memory is bounded twice: each is clamped to [`MAX_ROWS`] by
//! [`MAX_COLS`] whatever the client asks, and all of them together hold
//! leases on one [`Memory`], the bastion's budget (`[terminal]
//! screen_memory_mb`). A session whose size does not fit gets a small
//! model, and none when that does not fit either: a model only helps the
//! agent, and must never be what refuses a session.

use std::num::NonZeroU16;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

/// Rows kept above the screen: none, as nothing reads them (snapshots are
/// of the visible screen), and each would cost memory (2.5 KiB a row of 80
/// cells) and an allocation per line scrolled.
const SCROLLBACK: usize = 0;
/// Chunks waiting for the model before newer ones are dropped.
const QUEUE: usize = 32;
/// Output modelled per second, and the burst allowed: above what an
/// interactive program draws (`top` redraws a few KiB a second; an editor
/// scrolling flat out, a few hundred), far below a `cat` of a big file.
/// The model then takes at most a few percent of a core per session.
const RATE: f64 = 1024.0 * 1024.0;

enum Update {
    Output(Bytes),
    Resize(u16, u16),
    /// Start afresh: the model was stale and a prompt was drawn.
    Reset,
    ScreenView(oneshot::Sender<ScreenView>),
}

/// What the screen shows.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScreenView {
    /// The whole screen; only tests read it, so only they pay for it.
    #[cfg(test)]
    pub(crate) contents: String,
    pub(crate) cursor: (u16, u16),
    pub(crate) alternate: bool,
    /// Output was dropped since the last prompt: the model may be wrong.
    pub(crate) stale: bool,
    /// The logical line the cursor is on (wrapped rows joined).
    pub(crate) cursor_line: String,
}

/// The handle a session holds; the model lives in its own task, which
/// ends when this is dropped. Whether the model is stale is kept here, on
/// the session's side, where output is dropped: the model's thread may be
/// behind, and must not clear a flag for output it has not been sent.
pub(crate) struct Screen {
    tx: mpsc::Sender<Update>,
    stale: AtomicBool,
    budget: Mutex<Budget>,
    /// The model's share of the bastion's [`Memory`], and its size.
    lease: Mutex<Lease>,
}

/// The memory all screen models take together, in bytes: one per bastion.
#[derive(Default)]
pub(crate) struct Memory {
    used: AtomicUsize,
}

/// One model's part of a [`Memory`], given back when dropped.
struct Lease {
    memory: Arc<Memory>,
    limit: usize,
    rows: u16,
    cols: u16,
}

/// What a model of `rows` by `cols` takes: a cell of each of its two
/// screens (the normal and the alternate) per position, and a row header.
fn cost(rows: u16, cols: u16) -> usize {
    let row = 2 * (usize::from(cols) * std::mem::size_of::<vt100::Cell>() + 32);
    usize::from(rows) * row
}

/// The size a model falls back to when the client's does not fit.
const SMALL: (u16, u16) = (24, 80);

impl Memory {
    /// Takes `bytes` if fewer than `limit` would then be in use.
    fn take(&self, bytes: usize, limit: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&n| n <= limit)
            })
            .is_ok()
    }

    fn give(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Bytes held by live models.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// A lease for a model of the size asked (clamped), or of [`SMALL`]
    /// when that does not fit, or none.
    fn lease(self: &Arc<Self>, rows: u32, cols: u32, limit: usize) -> Option<Lease> {
        let (rows, cols) = (self::rows(rows), self::cols(cols));
        let small = (rows.min(SMALL.0), cols.min(SMALL.1));
        [(rows, cols), small]
            .into_iter()
            .find(|&(r, c)| self.take(cost(r, c), limit))
            .map(|(rows, cols)| Lease {
                memory: self.clone(),
                limit,
                rows,
                cols,
            })
    }
}

impl Lease {
    /// Changes the model's size to `rows` by `cols` (clamped) if the
    /// budget allows; otherwise keeps the old size. Returns the size the
    /// model should now have, if it changed.
    fn resize(&mut self, rows: u32, cols: u32) -> Option<(u16, u16)> {
        let (rows, cols) = (self::rows(rows), self::cols(cols));
        let (old, new) = (cost(self.rows, self.cols), cost(rows, cols));
        if (rows, cols) == (self.rows, self.cols) {
            return None;
        }
        // Growing takes the difference first; shrinking gives it back after.
        if new > old && !self.memory.take(new - old, self.limit) {
            return None;
        }
        if new < old {
            self.memory.give(old - new);
        }
        (self.rows, self.cols) = (rows, cols);
        Some((rows, cols))
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.memory.give(cost(self.rows, self.cols));
    }
}

/// A token bucket of bytes: [`RATE`] a second, at most [`RATE`] saved.
struct Budget {
    bytes: f64,
    at: Instant,
}

impl Budget {
    fn new() -> Budget {
        Budget {
            bytes: RATE,
            at: Instant::now(),
        }
    }

    /// Takes `n` bytes if the budget has them.
    fn take(&mut self, n: usize, now: Instant) -> bool {
        let earned = now.saturating_duration_since(self.at).as_secs_f64() * RATE;
        self.bytes = (self.bytes + earned).min(RATE);
        self.at = now;
        let n = n as f64;
        if self.bytes < n {
            return false;
        }
        self.bytes -= n;
        true
    }
}

impl Screen {
    /// Starts a model on `on`, a runtime other than the session's own: the
    /// model must not take turns with the byte path it watches. `None` when
    /// `memory` cannot hold even a small model within `limit` bytes.
    pub(crate) fn start(
        rows: u32,
        cols: u32,
        on: &tokio::runtime::Handle,
        memory: &Arc<Memory>,
        limit: usize,
    ) -> Option<Screen> {
        let lease = memory.lease(rows, cols, limit)?;
        let (tx, rx) = mpsc::channel(QUEUE);
        on.spawn(run(rx, lease.rows, lease.cols));
        Some(Screen {
            tx,
            stale: AtomicBool::new(false),
            budget: Mutex::new(Budget::new()),
            lease: Mutex::new(lease),
        })
    }

    fn budget(&self) -> std::sync::MutexGuard<'_, Budget> {
        self.budget.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `update` if the queue has room; otherwise the model misses it
    /// and is stale.
    fn send_or_stale(&self, update: Update) {
        if self.tx.try_send(update).is_err() {
            self.stale.store(true, Ordering::Relaxed);
        }
    }

    /// Bytes the client was sent. Never waits.
    pub(crate) fn feed(&self, data: Bytes) {
        // A stale model is not read before the next prompt starts it
        // over: what a flood would feed it is work for nothing.
        if self.stale.load(Ordering::Relaxed) {
            return;
        }
        if self.budget().take(data.len(), Instant::now()) {
            self.send_or_stale(Update::Output(data));
        } else {
            self.stale.store(true, Ordering::Relaxed);
        }
    }

    /// A prompt is about to be drawn: a stale model starts over here, with
    /// a full budget for what follows.
    pub(crate) fn prompt(&self) {
        if self.stale.swap(false, Ordering::Relaxed) {
            *self.budget() = Budget::new();
            self.send_or_stale(Update::Reset);
        }
    }

    /// The client's terminal changed size. A model the budget cannot grow
    /// keeps its size: its lines then wrap where the client's do not,
    /// which only the heuristic reading of a prompt's line minds.
    pub(crate) fn resize(&self, rows: u32, cols: u32) {
        let resized = self
            .lease
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .resize(rows, cols);
        if let Some((rows, cols)) = resized {
            self.send_or_stale(Update::Resize(rows, cols));
        }
    }

    /// What the screen shows. A stale model answers at once, without
    /// waiting for the model's thread: it cannot say anyway.
    pub(crate) async fn view(&self) -> Option<ScreenView> {
        let stale = || ScreenView {
            stale: true,
            ..ScreenView::default()
        };
        if self.stale.load(Ordering::Relaxed) {
            return Some(stale());
        }
        let (tx, rx) = oneshot::channel();
        self.tx.send(Update::ScreenView(tx)).await.ok()?;
        let snap = rx.await.ok()?;
        // Output dropped while the request waited its turn.
        Some(match self.stale.load(Ordering::Relaxed) {
            true => stale(),
            false => snap,
        })
    }
}

/// The rows from the start of the cursor's wrapped line to the cursor's row.
fn cursor_line(s: &vt100::Screen) -> String {
    let (row, _) = s.cursor_position();
    let mut first = row;
    while first > 0 && s.row_wrapped(first - 1) {
        first -= 1;
    }
    let (_, cols) = s.size();
    s.rows(0, cols.get())
        .skip(usize::from(first))
        .take(usize::from(row - first) + 1)
        .collect()
}

/// A screen model is at most this big, whatever the client asks: one
/// connection may hold several, and a 1000×1000 one takes tens of MB. A
/// wider terminal's lines wrap differently in the model, which only reads
/// the prompt's line.
const MAX_ROWS: u32 = 300;
const MAX_COLS: u32 = 600;

fn rows(n: u32) -> u16 {
    n.clamp(1, MAX_ROWS) as u16
}

fn cols(n: u32) -> u16 {
    n.clamp(1, MAX_COLS) as u16
}

fn parser(rows: u16, cols: u16) -> vt100::Parser {
    let nz = |n: u16| NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN);
    vt100::Parser::new(nz(rows), nz(cols), SCROLLBACK)
}

async fn run(mut rx: mpsc::Receiver<Update>, rows: u16, cols: u16) {
    let nz = |n: u16| NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN);
    let mut p = parser(rows, cols);
    let (mut rows, mut cols) = (rows, cols);
    while let Some(update) = rx.recv().await {
        match update {
            Update::Output(data) => p.process(&data),
            Update::Resize(r, c) => {
                (rows, cols) = (r, c);
                p.set_size(nz(r), nz(c));
            }
            Update::Reset => p = parser(rows, cols),
            Update::ScreenView(reply) => {
                let s = p.screen();
                let _ = reply.send(ScreenView {
                    #[cfg(test)]
                    contents: s.contents(),
                    cursor: s.cursor_position(),
                    alternate: s.alternate_screen(),
                    stale: false,
                    cursor_line: cursor_line(s),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A model on a budget of its own, big enough for it.
    fn start(rows: u32, cols: u32) -> Screen {
        let memory = Arc::new(Memory::default());
        let handle = tokio::runtime::Handle::current();
        Screen::start(rows, cols, &handle, &memory, usize::MAX).unwrap()
    }

    #[test]
    fn models_share_one_budget_and_give_it_back() {
        let memory = Arc::new(Memory::default());
        let big = cost(MAX_ROWS as u16, MAX_COLS as u16);
        let small = cost(SMALL.0, SMALL.1);
        let limit = 2 * big + small;
        // A client's size beyond the clamp costs no more than the clamp.
        let a = memory.lease(1000, 1000, limit).unwrap();
        assert_eq!((a.rows, a.cols), (300, 600));
        let b = memory.lease(u32::MAX, u32::MAX, limit).unwrap();
        assert_eq!(memory.used(), 2 * big);
        // The third does not fit whole, and gets the small model.
        let c = memory.lease(300, 600, limit).unwrap();
        assert_eq!((c.rows, c.cols), SMALL);
        // The fourth gets none; a session with no model still runs.
        assert!(memory.lease(24, 80, limit).is_none());
        drop((a, b, c));
        assert_eq!(memory.used(), 0);
        // A terminal smaller than the small model is taken as it is.
        let d = memory.lease(10, 40, limit).unwrap();
        assert_eq!((d.rows, d.cols), (10, 40));
    }

    #[test]
    fn a_resize_grows_only_within_the_budget() {
        let memory = Arc::new(Memory::default());
        let limit = cost(100, 200);
        let mut a = memory.lease(24, 80, limit).unwrap();
        let _b = memory.lease(50, 200, limit).unwrap();
        // Growing past what is left is refused: the model keeps its size.
        assert_eq!(a.resize(60, 200), None);
        assert_eq!((a.rows, a.cols), (24, 80));
        assert_eq!(a.resize(50, 200), Some((50, 200)));
        assert_eq!(memory.used(), 2 * cost(50, 200));
        // Shrinking gives back the difference.
        assert_eq!(a.resize(10, 20), Some((10, 20)));
        assert_eq!(memory.used(), cost(50, 200) + cost(10, 20));
        assert_eq!(a.resize(10, 20), None);
    }

    #[tokio::test]
    async fn the_model_follows_output_and_resizes() {
        let s = start(5, 20);
        s.feed(Bytes::from_static(b"hello\r\n\x1b[1mworld\x1b[0m"));
        let snap = s.view().await.unwrap();
        assert_eq!(snap.contents, "hello\nworld");
        assert_eq!(snap.cursor, (1, 5));
        assert!(!snap.stale && !snap.alternate);
        s.resize(10, 40);
        s.feed(Bytes::from_static(b"\x1b[?1049h"));
        assert!(s.view().await.unwrap().alternate);
    }

    #[tokio::test]
    async fn the_cursor_line_joins_wrapped_rows() {
        let s = start(5, 10);
        s.feed(Bytes::from_static(b"$ echo 0123456789"));
        let snap = s.view().await.unwrap();
        assert_eq!(snap.cursor_line, "$ echo 0123456789");
        assert_eq!(
            super::super::prompt::command(&snap.cursor_line).as_deref(),
            Some("echo 0123456789")
        );
    }

    #[test]
    fn the_budget_holds_a_burst_and_refills_with_time() {
        let t0 = Instant::now();
        let mut b = Budget {
            bytes: RATE,
            at: t0,
        };
        let kib = 1024;
        assert!(b.take(768 * kib, t0));
        assert!(!b.take(512 * kib, t0), "only 256 KiB are left");
        assert!(b.take(256 * kib, t0));
        assert!(b.take(512 * kib, t0 + Duration::from_millis(500)));
        // Saving is capped at one burst.
        let later = t0 + Duration::from_secs(60);
        assert!(b.take(1024 * kib, later));
        assert!(!b.take(1, later));
    }

    #[tokio::test]
    async fn output_past_the_budget_is_not_modelled_until_the_next_prompt() {
        let s = start(5, 20);
        let flood = Bytes::from(vec![b'x'; RATE as usize + 1]);
        s.feed(flood);
        assert!(s.view().await.unwrap().stale);
        // The prompt after the flood is modelled afresh, on a new budget.
        s.prompt();
        s.feed(Bytes::from_static(b"$ "));
        let snap = s.view().await.unwrap();
        assert!(!snap.stale);
        assert_eq!(snap.contents.trim_end(), "$");
    }

    #[tokio::test]
    async fn a_stale_model_starts_over_at_the_next_prompt() {
        let s = start(5, 20);
        s.feed(Bytes::from_static(b"old"));
        s.stale.store(true, Ordering::Relaxed);
        assert!(s.view().await.unwrap().stale);
        s.prompt();
        s.feed(Bytes::from_static(b"$ "));
        let snap = s.view().await.unwrap();
        assert_eq!(snap.contents.trim_end(), "$");
        assert!(!snap.stale);
    }
}
