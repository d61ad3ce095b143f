//! Graceful shutdown: a signal every task can wait on, and a count of the
//! tasks still running, in the manner of mini-redis.
//!
//! A task that must finish before shutdown completes holds a [`Listener`]
//! and drops it when done; [`Shutdown::wait_drained`] returns once the last
//! one is gone. A [`Watcher`] sees the signal and can hand out listeners
//! without being counted itself, for long-lived owners (an accept loop, a
//! connection's handler) that outlive the tasks they start.

use tokio::sync::{mpsc, watch};

pub(crate) struct Shutdown {
    notify: watch::Sender<bool>,
    alive_tx: Option<mpsc::Sender<()>>,
    alive_rx: mpsc::Receiver<()>,
}

/// A counted task's view of shutdown.
pub(crate) struct Listener {
    notify: watch::Receiver<bool>,
    _alive: mpsc::Sender<()>,
}

/// An uncounted view of shutdown that can start counted tasks.
#[derive(Clone)]
pub(crate) struct Watcher {
    notify: watch::Receiver<bool>,
    alive: mpsc::WeakSender<()>,
}

impl Shutdown {
    pub(crate) fn new() -> Shutdown {
        let (notify, _) = watch::channel(false);
        let (tx, rx) = mpsc::channel(1);
        Shutdown {
            notify,
            alive_tx: Some(tx),
            alive_rx: rx,
        }
    }

    pub(crate) fn watcher(&self) -> Watcher {
        let alive = self.alive_tx.as_ref().expect("watcher before begin");
        Watcher {
            notify: self.notify.subscribe(),
            alive: alive.downgrade(),
        }
    }

    /// Tells every task to stop.
    pub(crate) fn begin(&mut self) {
        let _ = self.notify.send(true);
        self.alive_tx = None;
    }

    /// Waits until every `Listener` has been dropped.
    pub(crate) async fn wait_drained(&mut self) {
        let _ = self.alive_rx.recv().await;
    }
}

async fn requested(notify: &mut watch::Receiver<bool>) {
    // An error means the Shutdown is gone, which is a stop too.
    let _ = notify.wait_for(|stop| *stop).await;
}

impl Listener {
    /// Resolves once shutdown has begun.
    pub(crate) async fn requested(&mut self) {
        requested(&mut self.notify).await
    }
}

impl Watcher {
    pub(crate) async fn requested(&mut self) {
        requested(&mut self.notify).await
    }

    /// A counted listener, or `None` once shutdown has begun (or when no
    /// counted task is left to keep the count open after it began).
    pub(crate) fn listener(&self) -> Option<Listener> {
        if *self.notify.borrow() {
            return None;
        }
        Some(Listener {
            notify: self.notify.clone(),
            _alive: self.alive.upgrade()?,
        })
    }
}
