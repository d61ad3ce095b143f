//! The little state a session's two pumps and its agent seat share.
//!
//! They run in one task on one worker thread (see `workers`), so it is
//! never contended; it is made of atomics because the session's future
//! must be `Send` to be spawned, and a shared reference to plain cells
//! would not be. Everything else between them goes over channels
//! (`seat::wires`). What the fields mean is the pumps' business; the seat
//! only reads them, but for `active` and its own output's allowance.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::terminal::Caps;

/// State the pumps and the seat share.
pub(crate) struct Shared {
    /// A question is being answered: the user's keys go to the seat.
    active: AtomicBool,
    /// Its answer is complete, and the terminal not yet given back:
    /// Ctrl-C has nothing left to stop, and is type-ahead like any key.
    answered: AtomicBool,
    /// When the shell last printed something, in µs since `epoch`.
    last_output: AtomicU64,
    epoch: Instant,
    /// The terminal's width.
    cols: AtomicU32,
    /// The shell's directory, as its prompt last reported it (OSC 7):
    /// where the agent's clean commands start.
    cwd: std::sync::Mutex<Option<String>>,
    /// Bytes of `render::Draw::Output` not written to the client yet, and a wake-up
    /// each time some are.
    unwritten: AtomicUsize,
    written: tokio::sync::Notify,
    /// The shell is at a fresh prompt (`Terminal::at_prompt`), and a
    /// wake-up each time that or `rotations` may have changed.
    at_prompt: AtomicBool,
    prompt_changed: tokio::sync::Notify,
    /// What the shell's bootstrap bound (`Terminal::caps`).
    caps: std::sync::Mutex<Caps>,
    /// New nonces the shell confirmed (`Terminal::rotations`); a change
    /// wakes `prompt_changed`'s waiters too.
    rotations: AtomicU64,
}

impl Shared {
    pub(crate) fn new(cols: u32) -> Shared {
        Shared {
            active: AtomicBool::new(false),
            answered: AtomicBool::new(false),
            last_output: AtomicU64::new(0),
            epoch: Instant::now(),
            cols: AtomicU32::new(cols),
            cwd: std::sync::Mutex::new(None),
            unwritten: AtomicUsize::new(0),
            written: tokio::sync::Notify::new(),
            at_prompt: AtomicBool::new(false),
            prompt_changed: tokio::sync::Notify::new(),
            caps: std::sync::Mutex::new(Caps::default()),
            rotations: AtomicU64::new(0),
        }
    }

    /// What the terminal model says of the shell after each chunk.
    pub(crate) fn set_shell(&self, at_prompt: bool, caps: Caps, rotations: u64) {
        let prompt = self.at_prompt.swap(at_prompt, Ordering::Relaxed) != at_prompt;
        let rotated = self.rotations.swap(rotations, Ordering::Relaxed) != rotations;
        if prompt || rotated {
            self.prompt_changed.notify_waiters();
        }
        *self.caps.lock().unwrap_or_else(|e| e.into_inner()) = caps;
    }

    pub(crate) fn caps(&self) -> Caps {
        *self.caps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the shell is at a fresh prompt; `false` if it is not
    /// by `deadline`.
    pub(crate) async fn prompt_by(&self, deadline: Instant) -> bool {
        self.shell_by(deadline, || self.at_prompt.load(Ordering::Relaxed))
            .await
    }

    /// Waits until `holds` says yes of what the terminal model last said
    /// of the shell (`set_shell` wakes it); `false` if it does not by
    /// `deadline`.
    async fn shell_by(&self, deadline: Instant, holds: impl Fn() -> bool) -> bool {
        loop {
            let changed = self.prompt_changed.notified();
            if holds() {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return holds();
            }
        }
    }

    /// New nonces the shell has confirmed so far.
    pub(crate) fn rotations(&self) -> u64 {
        self.rotations.load(Ordering::Relaxed)
    }

    /// Waits until the shell has confirmed more new nonces than `seen`;
    /// `false` if it has not by `deadline`.
    pub(crate) async fn rotated_by(&self, seen: u64, deadline: Instant) -> bool {
        self.shell_by(deadline, || self.rotations() > seen).await
    }

    /// The seat typed into the shell: the prompt is no longer fresh.
    pub(crate) fn typed_at_prompt(&self) {
        self.at_prompt.store(false, Ordering::Relaxed);
    }

    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Active or not; either way, not answered yet.
    pub(crate) fn set_active(&self, on: bool) {
        self.active.store(on, Ordering::Relaxed);
        self.answered.store(false, Ordering::Relaxed);
    }

    pub(crate) fn answered(&self) -> bool {
        self.answered.load(Ordering::Relaxed)
    }

    pub(crate) fn set_answered(&self) {
        self.answered.store(true, Ordering::Relaxed);
    }

    pub(crate) fn output_seen(&self) {
        let us = self.epoch.elapsed().as_micros() as u64;
        self.last_output.store(us, Ordering::Relaxed);
    }

    pub(crate) fn last_output(&self) -> Instant {
        self.epoch + Duration::from_micros(self.last_output.load(Ordering::Relaxed))
    }

    pub(crate) fn cols(&self) -> u32 {
        self.cols.load(Ordering::Relaxed)
    }

    pub(crate) fn set_cols(&self, cols: u32) {
        self.cols.store(cols, Ordering::Relaxed);
    }

    pub(crate) fn set_cwd(&self, cwd: Option<&str>) {
        let mut slot = self.cwd.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_deref() != cwd {
            *slot = cwd.map(str::to_string);
        }
    }

    /// The seat is sending `n` bytes of a command's output to the client
    /// pump: counted before they are sent, so the pump's count down never
    /// comes first.
    pub(crate) fn output_sending(&self, n: usize) {
        self.unwritten.fetch_add(n, Ordering::Relaxed);
    }

    /// Waits while more than `ahead` bytes of output are not written yet.
    pub(crate) async fn output_ahead(&self, ahead: usize) {
        while self.unwritten.load(Ordering::Relaxed) > ahead {
            self.written.notified().await;
        }
    }

    /// The client pump wrote `n` bytes of a `render::Draw::Output`.
    pub(crate) fn output_written(&self, n: usize) {
        self.unwritten.fetch_sub(n, Ordering::Relaxed);
        // A permit is kept if the seat is not waiting yet: no wake-up is lost.
        self.written.notify_one();
    }

    pub(crate) fn cwd(&self) -> Option<String> {
        self.cwd.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
