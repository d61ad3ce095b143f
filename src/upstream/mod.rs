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
use crate::terminal::Shell;

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
    /// Install shell integration if the target's shell supports it.
    pub(crate) integrate: bool,
}

impl Request {
    /// Whether this is a PTY shell that should get shell integration.
    fn wants_integration(&self) -> bool {
        self.integrate && self.pty.is_some() && matches!(self.command, Command::Shell)
    }
}

impl PtySpec {
    /// Whether the client's terminal echoes (OpenSSH sends ECHO; absent
    /// means the default, on).
    pub(crate) fn echo(&self) -> bool {
        self.modes
            .iter()
            .find(|(m, _)| *m == Pty::ECHO)
            .is_none_or(|(_, v)| *v != 0)
    }

    /// The client's modes with echo off: the bootstrap is typed into the
    /// target's terminal before its shell reads it, and must not be echoed.
    pub(crate) fn modes_without_echo(&self) -> Vec<(Pty, u32)> {
        let mut modes: Vec<_> = self
            .modes
            .iter()
            .filter(|(m, _)| *m != Pty::ECHO)
            .copied()
            .collect();
        modes.push((Pty::ECHO, 0));
        modes
    }
}

/// The target side of a session, open.
pub(crate) struct Opened {
    pub(crate) reader: Reader,
    pub(crate) writer: Writer,
    /// The shell that will run walissh's bootstrap, when there is one: its
    /// terminal was opened with echo off.
    pub(crate) integrated: Option<Shell>,
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
) -> Result<Opened, String> {
    match target.kind {
        TargetKind::Ssh => {
            let (r, w, integrated) = ssh::open(target, ctx, req).await?;
            Ok(Opened {
                reader: Reader::Ssh(r),
                writer: Writer::Ssh(w),
                integrated,
            })
        }
        TargetKind::Local => {
            let run_as = target.run_as.as_ref().map(|r| r.get_ref().clone());
            let own = ctx.own_account.clone();
            // The user and group databases may be remote (NSS): not on the runtime.
            let who =
                tokio::task::spawn_blocking(move || LocalAccount::resolve(run_as.as_deref(), &own))
                    .await
                    .map_err(|e| format!("account lookup failed: {e}"))??;
            let integrated = req
                .wants_integration()
                .then(|| Shell::from_path(&who.shell().to_string_lossy()))
                .flatten();
            let (r, w) = local::open(&who, req, integrated.is_some(), &ctx.spawn_lock)?;
            Ok(Opened {
                reader: Reader::Local(r),
                writer: Writer::Local(w),
                integrated,
            })
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
