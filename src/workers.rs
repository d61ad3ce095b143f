//! The threads client connections run on: one single-threaded tokio
//! runtime per core. A connection, and every task it starts (its SSH
//! session, its channels' bridges, the upstream client, local targets'
//! pumps), stays on the worker it was placed on when it was accepted.
//! The sessions' screen models run on a thread of their own, off the byte
//! path: a model that falls behind drops output (see `terminal::screen`)
//! instead of holding up the session it models.
//!
//! Why not one work-stealing runtime: each packet of a transfer passes
//! three tasks (the upstream client's, the session bridge, the client
//! connection's). On a work-stealing runtime the two threads keep waking
//! and stealing from each other, and those wake-ups cost about a fifth of
//! walissh's CPU per byte (`bench/run`, issue 7). On one thread a task
//! wakes the next in the same run queue. What is given up is stealing: a
//! connection is placed on the worker with the fewest connections and
//! stays there.
//!
//! The listeners, signals and reloads stay on the main runtime. Blocking
//! work (argon2, SQLite reads, host-key files) goes to the blocking pool
//! of the worker it comes from, as it would on any runtime.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// How long a worker's leftover tasks get at exit, once the sessions have
/// been told and drained.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// The running workers; [`Workers::stop`] ends them.
pub(crate) struct Workers {
    threads: Vec<Thread>,
    screens: Handle,
    spread: Spread,
}

/// A thread driving a current-thread runtime until told to stop.
struct Thread {
    stop: oneshot::Sender<()>,
    join: JoinHandle<()>,
}

/// Places connections on the workers; cheap to clone.
#[derive(Clone)]
pub(crate) struct Spread {
    workers: Arc<[Worker]>,
}

struct Worker {
    handle: Handle,
    /// Connections running on this worker, for placing the next one.
    connections: AtomicUsize,
}

impl Workers {
    /// Starts one worker per core the process may use.
    pub(crate) fn start() -> Result<Workers, String> {
        Workers::with(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    fn with(n: usize) -> Result<Workers, String> {
        let mut threads = Vec::with_capacity(n + 1);
        let mut workers = Vec::with_capacity(n);
        for i in 0..n {
            let (handle, thread) = start_one(format!("walissh-w{i}"))?;
            threads.push(thread);
            workers.push(Worker {
                handle,
                connections: AtomicUsize::new(0),
            });
        }
        let (screens, thread) = start_one("walissh-screens".to_string())?;
        threads.push(thread);
        Ok(Workers {
            threads,
            screens,
            spread: Spread {
                workers: workers.into(),
            },
        })
    }

    pub(crate) fn spread(&self) -> Spread {
        self.spread.clone()
    }

    /// Where the screen models run.
    pub(crate) fn screens(&self) -> Handle {
        self.screens.clone()
    }

    /// Ends every worker. Called once the sessions have drained; what is
    /// still running gets [`EXIT_GRACE`] and is then dropped.
    pub(crate) fn stop(self) {
        let (stops, joins): (Vec<_>, Vec<_>) =
            self.threads.into_iter().map(|t| (t.stop, t.join)).unzip();
        for stop in stops {
            let _ = stop.send(());
        }
        for join in joins {
            let _ = join.join();
        }
    }
}

/// Starts a thread named `name` that drives a current-thread runtime until
/// told to stop.
fn start_one(name: String) -> Result<(Handle, Thread), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let join = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            runtime.block_on(async {
                let _ = stopped.await;
            });
            runtime.shutdown_timeout(EXIT_GRACE);
        })
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    Ok((handle, Thread { stop, join }))
}

impl Spread {
    /// Runs a connection's task on the worker with the fewest connections.
    /// A socket accepted elsewhere must be re-registered inside `task`
    /// (`TcpStream::from_std`), on the worker's own reactor.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let Some((index, worker)) = self
            .workers
            .iter()
            .enumerate()
            .min_by_key(|(_, w)| w.connections.load(Ordering::Relaxed))
        else {
            return;
        };
        worker.connections.fetch_add(1, Ordering::Relaxed);
        let placed = Placed {
            spread: self.clone(),
            index,
        };
        worker.handle.spawn(async move {
            task.await;
            drop(placed);
        });
    }
}

/// A connection's place on its worker, given back when its task ends or
/// is dropped at exit.
struct Placed {
    spread: Spread,
    index: usize,
}

impl Drop for Placed {
    fn drop(&mut self) {
        self.spread.workers[self.index]
            .connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker_name() -> String {
        std::thread::current()
            .name()
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn a_connection_goes_to_the_least_loaded_worker_and_its_place_is_given_back() {
        let workers = Workers::with(2).unwrap();
        let spread = workers.spread();
        let (names_tx, names) = std::sync::mpsc::channel();
        let (hold, held) = oneshot::channel::<()>();
        let tx = names_tx.clone();
        spread.spawn(async move {
            tx.send(worker_name()).unwrap();
            let _ = held.await;
        });
        let first = names.recv().unwrap();
        // The first is still running, so the second goes to the other one.
        spread.spawn(async move { names_tx.send(worker_name()).unwrap() });
        let second = names.recv().unwrap();
        assert!(first.starts_with("walissh-w"), "{first}");
        assert_ne!(first, second);
        drop(hold);
        workers.stop();
        let loads: Vec<usize> = spread
            .workers
            .iter()
            .map(|w| w.connections.load(Ordering::Relaxed))
            .collect();
        assert_eq!(loads, [0, 0]);
    }
}
