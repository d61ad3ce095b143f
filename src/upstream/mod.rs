//! The far side of a session: a channel on the target, reached with the
//! bastion's own russh client (`ssh`) or a process on this host (`local`).
//!
//! Both kinds look the same to `session`: a [`Reader`] of [`Event`]s and a
//! [`Writer`] for input and control. Reading and writing apply
//! back-pressure (SSH windows, PTY and pipe buffers), so nothing here
//! buffers without bound.

mod local;
mod ssh;

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use russh::keys::PrivateKey;
use russh::{Pty, Sig};

use crate::config::{Account, HostKeyPolicy, TargetConfig, TargetKind};

pub(crate) use local::LocalAccount;

/// What the target sends.
#[derive(Debug)]
pub(crate) enum Event {
    Data(Bytes),
    Stderr(Bytes),
    Eof,
    ExitStatus(u32),
    ExitSignal {
        signal: Sig,
        core_dumped: bool,
        message: String,
    },
}

/// The client's terminal, as its pty-req described it.
#[derive(Debug, Clone)]
pub(crate) struct PtySpec {
    pub(crate) term: String,
    pub(crate) cols: u32,
    pub(crate) rows: u32,
    pub(crate) modes: Vec<(Pty, u32)>,
}

/// What the client asked the channel to run.
#[derive(Debug, Clone)]
pub(crate) enum Command {
    Shell,
    Exec(Vec<u8>),
    Subsystem(String),
}

/// Everything needed to open the target side of one session channel.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) command: Command,
    pub(crate) pty: Option<PtySpec>,
    /// Client environment that passed the allow-list (LANG, LC_*).
    pub(crate) env: Vec<(String, String)>,
    /// The bastion user, the default upstream login name.
    pub(crate) user: String,
}

/// Bastion-wide settings for reaching targets.
pub(crate) struct Context {
    pub(crate) identity: Arc<PrivateKey>,
    pub(crate) known_hosts: PathBuf,
    pub(crate) policy: HostKeyPolicy,
    /// The account `local` targets run as when they have no `run_as`.
    pub(crate) own_account: Account,
    /// Serialises process creation for local targets (see `local::open`).
    pub(crate) spawn_lock: std::sync::Mutex<()>,
}

pub(crate) enum Reader {
    Ssh(ssh::Reader),
    Local(local::Reader),
}

pub(crate) enum Writer {
    Ssh(ssh::Writer),
    Local(local::Writer),
}

/// Opens the target side. The error is a sentence for the user.
pub(crate) async fn open(
    target: &TargetConfig,
    ctx: &Context,
    req: &Request,
) -> Result<(Reader, Writer), String> {
    match target.kind {
        TargetKind::Ssh => {
            let (r, w) = ssh::open(target, ctx, req).await?;
            Ok((Reader::Ssh(r), Writer::Ssh(w)))
        }
        TargetKind::Local => {
            let run_as = target.run_as.as_ref().map(|r| r.get_ref().clone());
            let own = ctx.own_account.clone();
            // The user and group databases may be remote (NSS): not on the runtime.
            let who =
                tokio::task::spawn_blocking(move || LocalAccount::resolve(run_as.as_deref(), &own))
                    .await
                    .map_err(|e| format!("account lookup failed: {e}"))??;
            let (r, w) = local::open(&who, req, &ctx.spawn_lock)?;
            Ok((Reader::Local(r), Writer::Local(w)))
        }
    }
}

impl Reader {
    /// The next event, or `None` once the target side is closed.
    pub(crate) async fn next(&mut self) -> Option<Event> {
        match self {
            Reader::Ssh(r) => r.next().await,
            Reader::Local(r) => r.next().await,
        }
    }
}

impl Writer {
    pub(crate) async fn data(&mut self, data: Bytes) -> Result<(), String> {
        match self {
            Writer::Ssh(w) => w.data(data).await,
            Writer::Local(w) => w.data(&data).await,
        }
    }

    pub(crate) async fn eof(&mut self) {
        match self {
            Writer::Ssh(w) => w.eof().await,
            Writer::Local(w) => w.eof(),
        }
    }

    pub(crate) async fn resize(&mut self, cols: u32, rows: u32) {
        match self {
            Writer::Ssh(w) => w.resize(cols, rows).await,
            Writer::Local(w) => w.resize(cols, rows),
        }
    }

    pub(crate) async fn signal(&mut self, sig: Sig) {
        match self {
            Writer::Ssh(w) => w.signal(sig).await,
            Writer::Local(w) => w.signal(&sig).await,
        }
    }

    /// Asks the target side to end: the channel is closed, the process hung
    /// up. Its exit status may still arrive on the reader.
    pub(crate) async fn hang_up(&mut self) {
        match self {
            Writer::Ssh(w) => w.hang_up().await,
            Writer::Local(w) => w.hang_up().await,
        }
    }

    /// Releases the target side for good (the ssh connection is closed; a
    /// local process still running is killed after a grace period).
    pub(crate) async fn finish(self) {
        match self {
            Writer::Ssh(w) => w.finish().await,
            Writer::Local(w) => drop(w),
        }
    }
}
