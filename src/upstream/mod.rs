//! The far side of a session: a channel on the target, reached with the
//! bastion's own russh client (`ssh`) or a process on this host (`local`).
//!
//! Both kinds look the same to `session`: a [`Reader`] of [`TargetEvent`]s and a
//! [`Writer`] for input and control. Reading and writing apply
//! back-pressure (SSH windows, PTY and pipe buffers), so nothing here
//! buffers without bound.

mod cert;
pub(crate) mod known_hosts;
mod local;
pub(crate) mod sandbox;
mod ssh;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use russh::keys::PrivateKey;
use russh::{Pty, Sig};

use crate::config::{Account, HostKeyPolicy, TargetConfig, TargetKind};
use crate::terminal::Shell;

pub(crate) use local::LocalAccount;
#[cfg(any(fuzzing, test))]
pub(crate) use ssh::client_config;
pub(crate) use ssh::{Forwarded, RemoteForward, remote_forward};

/// What the target sends.
#[derive(Debug)]
pub(crate) enum TargetEvent {
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
    /// The session it is for (named in an upstream certificate's key ID).
    pub(crate) session: String,
    /// The client's connection, when its agent is forwarded to the
    /// target: agent channels the target opens are bridged to it.
    pub(crate) agent: Option<russh::server::Handle>,
    /// Install shell integration if the target's shell supports it.
    pub(crate) integrate: bool,
}

impl Request {
    /// A command with no PTY, no environment and no integration: what the
    /// agent's parallel members run.
    pub(crate) fn exec(command: &str, user: &str) -> Request {
        Request {
            command: Command::Exec(command.as_bytes().to_vec()),
            pty: None,
            env: Vec::new(),
            user: user.to_string(),
            session: String::new(),
            agent: None,
            integrate: false,
        }
    }

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
    /// What the target said about itself, for interactive shells.
    pub(crate) info: Option<TargetInfo>,
    /// Runs more commands on the same target, beside the session.
    pub(crate) runner: Runner,
}

/// Runs commands on a session's target beside its shell (the agent's
/// commands run apart: what the policy runs unasked, and parallel
/// members'): exec channels on the same ssh connection, or processes as
/// the local target's account. Clones share the connection and what the
/// sandbox probe found.
#[derive(Clone)]
pub(crate) struct Runner {
    via: Via,
    /// Which wall works on the target, probed once (see [`Runner::walls`]).
    walls: Arc<tokio::sync::OnceCell<sandbox::Found>>,
}

#[derive(Clone)]
enum Via {
    Ssh(ssh::Runner),
    Local(Arc<LocalAccount>),
}

/// A command started by a [`Runner`]: its output and how it ended. For a
/// local process the input side is kept, or the process would be hung up.
pub(crate) struct Execution {
    pub(crate) reader: Reader,
    _input: Input,
}

/// What keeps a started command's other end: dropping it stops the
/// command (an ssh channel is closed after a TERM; a local process is hung
/// up).
enum Input {
    Ssh(#[allow(dead_code)] ssh::ExecChannel),
    Local(#[allow(dead_code)] Writer),
}

impl Runner {
    fn new(via: Via) -> Runner {
        Runner {
            via,
            walls: Arc::default(),
        }
    }

    /// Starts `script` clean, behind `wall`, in `cwd` (see
    /// [`sandbox::command`]), with no input. The error is a sentence.
    pub(crate) async fn exec_clean(
        &self,
        settings: &UpstreamSettings,
        clean: Clean<'_>,
        user: &str,
    ) -> Result<Execution, String> {
        let line = sandbox::command(clean.script, clean.cwd, clean.wall, clean.hide);
        // Its input stays open: it is the lifeline (`sandbox::command`).
        self.start(settings, &line, user, true).await
    }

    /// Which wall works on the target, and whether it has bash: probed
    /// the first time it is asked, by running each wall's probe the way a
    /// command would run (best first), then kept for the session. `hide`
    /// is `[ai] sandbox_hide`: a glob that breaks the sandbox breaks it in
    /// the probe too.
    pub(crate) async fn walls(
        &self,
        settings: &UpstreamSettings,
        user: &str,
        hide: &sandbox::Hide,
    ) -> sandbox::Found {
        *self
            .walls
            .get_or_init(|| async {
                for wall in sandbox::WALLS {
                    if self.probe(settings, user, wall, hide).await {
                        return sandbox::Found { wall, bash: true };
                    }
                }
                sandbox::Found {
                    wall: sandbox::Wall::None,
                    bash: false,
                }
            })
            .await
    }

    /// Whether `wall`'s probe prints what it should, within [`PROBE_TIME`].
    async fn probe(
        &self,
        settings: &UpstreamSettings,
        user: &str,
        wall: sandbox::Wall,
        hide: &sandbox::Hide,
    ) -> bool {
        let run = async {
            let line = sandbox::probe_line(wall, hide);
            // Its input held open: it is the lifeline (`sandbox::command`).
            let Ok(mut exec) = self.start(settings, &line, user, true).await else {
                return false;
            };
            let mut out = Vec::new();
            while let Some(event) = exec.reader.next().await {
                if let TargetEvent::Data(d) = event
                    && out.len() < 256
                {
                    out.extend_from_slice(&d);
                }
            }
            sandbox::probe_worked(&out)
        };
        tokio::time::timeout(PROBE_TIME, run).await.unwrap_or(false)
    }

    /// What the environment provider knows of the target: its OS, kernel,
    /// host name, user and login shell (none when the probe failed).
    pub(crate) async fn facts(&self) -> Option<TargetInfo> {
        match &self.via {
            Via::Ssh(r) => r.facts().await,
            Via::Local(who) => {
                let who = who.clone();
                tokio::task::spawn_blocking(move || TargetInfo::local(&who))
                    .await
                    .ok()
            }
        }
    }

    /// Starts `command` with no input. The error is a sentence.
    pub(crate) async fn exec(
        &self,
        settings: &UpstreamSettings,
        command: &str,
        user: &str,
    ) -> Result<Execution, String> {
        self.start(settings, command, user, false).await
    }

    /// Starts `command`; its input is never written to, and ends at once
    /// unless `hold_input`, when it ends as the [`Execution`] is dropped.
    async fn start(
        &self,
        settings: &UpstreamSettings,
        command: &str,
        user: &str,
        hold_input: bool,
    ) -> Result<Execution, String> {
        match &self.via {
            Via::Ssh(r) => {
                let (reader, channel) = r.exec(command, user, hold_input).await?;
                Ok(Execution {
                    reader: Reader::Ssh(reader),
                    _input: Input::Ssh(channel),
                })
            }
            Via::Local(who) => {
                let req = Request::exec(command, user);
                let (r, w) = local::open(who, &req, false, &settings.spawn_lock)?;
                let mut input = Writer::Local(w);
                if !hold_input {
                    input.eof().await;
                }
                Ok(Execution {
                    reader: Reader::Local(r),
                    _input: Input::Local(input),
                })
            }
        }
    }
}

/// How long one wall's probe may take before that wall counts as not
/// working.
const PROBE_TIME: Duration = Duration::from_secs(10);

/// A checked script to run clean: where, and behind what.
#[derive(Clone, Copy)]
pub(crate) struct Clean<'a> {
    pub(crate) script: &'a str,
    pub(crate) cwd: Option<&'a str>,
    pub(crate) wall: sandbox::Wall,
    /// `[ai] sandbox_hide` (hidden after [`sandbox::HIDDEN`] when walled) and `auto_network`.
    pub(crate) hide: &'a sandbox::Hide,
}

/// What the target says about itself: asked once, quietly, before an
/// interactive shell starts (on an exec channel of its own for ssh
/// targets; read off this machine for local ones, which run here).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TargetInfo {
    pub(crate) shell: Option<String>,
    pub(crate) os: Option<String>,
    pub(crate) kernel: Option<String>,
    pub(crate) host: Option<String>,
    pub(crate) user: Option<String>,
}

/// The probe, run by the target user's login shell: one `key=value` line
/// per fact. No command substitution, no redirection: fish before 3.4 and
/// tcsh refuse the whole line over either. A command that fails prints
/// nothing on stdout, and `|| echo` still ends its line.
pub(crate) const PROBE: &str = concat!(
    r#"printf 'shell=%s\n' "$SHELL"; "#,
    "printf 'kernel='; uname -srm || echo; ",
    "printf 'host='; uname -n || echo; ",
    "printf 'user='; id -un || echo; ",
    "printf 'os='; sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '\"' || echo",
);

impl TargetInfo {
    /// Reads the probe's output; unknown lines and empty values are left out.
    pub(crate) fn parse(text: &str) -> TargetInfo {
        let mut info = TargetInfo::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value: String = value
                .trim()
                .chars()
                .filter(|c| !c.is_control())
                .take(200)
                .collect();
            if value.is_empty() {
                continue;
            }
            let slot = match key {
                "shell" => &mut info.shell,
                "os" => &mut info.os,
                "kernel" => &mut info.kernel,
                "host" => &mut info.host,
                "user" => &mut info.user,
                _ => continue,
            };
            *slot = Some(value);
        }
        info
    }

    /// A local target's facts: this machine's, and the account's. Reads
    /// /etc/os-release: call it on a blocking thread.
    fn local(account: &LocalAccount) -> TargetInfo {
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| {
                    l.strip_prefix("PRETTY_NAME=")
                        .map(|v| v.trim_matches('"').to_string())
                })
            });
        let (kernel, host) = match nix::sys::utsname::uname() {
            Ok(u) => {
                let field = |f: &std::ffi::OsStr| f.to_string_lossy().into_owned();
                let kernel = format!(
                    "{} {} {}",
                    field(u.sysname()),
                    field(u.release()),
                    field(u.machine())
                );
                (Some(kernel), Some(field(u.nodename())))
            }
            Err(_) => (None, None),
        };
        TargetInfo {
            shell: Some(account.shell().display().to_string()),
            os,
            kernel,
            host,
            user: Some(account.name().to_string()),
        }
    }
}

/// Bastion-wide settings for reaching targets.
pub(crate) struct UpstreamSettings {
    pub(crate) identity: Arc<PrivateKey>,
    /// `[upstream] ca_key`: logins then use a certificate signed for each
    /// (see `upstream::cert`), valid for `cert_validity`.
    pub(crate) ca: Option<Arc<PrivateKey>>,
    pub(crate) cert_validity: Duration,
    pub(crate) known_hosts: PathBuf,
    pub(crate) policy: HostKeyPolicy,
    /// How often a silent target is asked whether it is alive, and how
    /// many unanswered asks end its sessions (`[upstream] keepalive_*`).
    pub(crate) keepalive: (Duration, u32),
    /// The account `local` targets run as when they have no `run_as`.
    pub(crate) own_account: Account,
    /// Serialises process creation for local targets (see `local::open`).
    pub(crate) spawn_lock: std::sync::Mutex<()>,
    /// Serialises reading and recording `known_hosts` (`accept-new`): two
    /// first connections to one host must not each record a key.
    pub(crate) known_hosts_lock: Arc<std::sync::Mutex<()>>,
}

pub(crate) enum Reader {
    Ssh(ssh::Reader),
    Local(local::Reader),
}

pub(crate) enum Writer {
    Ssh(ssh::Writer),
    Local(local::Writer),
}

/// Why the target side could not be opened or connected: a sentence for
/// the user (its `Display`), and which case it is ([`OpenError::reason`]),
/// for the `upstream_error` row, so an operator can tell a changed host
/// key (an alarm) from a target that is down (an outage) without reading
/// sentences.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    #[error("cannot reach {name} ({host}:{port}): {why}")]
    Unreachable {
        name: String,
        host: String,
        port: u16,
        why: String,
    },
    #[error("{0} did not answer in time")]
    Timeout(String),
    /// The target's host key was refused (changed, revoked, unknown under
    /// the strict policy) or could not be checked.
    #[error("host key for {name} {why}; ask an administrator")]
    HostKey { name: String, why: String },
    /// The target refused the bastion's login, or the bastion has nothing
    /// to log in with.
    #[error("{0}")]
    Login(String),
    /// Logged in, but the session's channel, terminal or command was
    /// refused.
    #[error("{0}")]
    Channel(String),
    /// A local target's account or process could not be had.
    #[error("{0}")]
    Local(String),
    /// The bastion is shutting down.
    #[error("{0}")]
    Stopped(String),
}

impl OpenError {
    /// The case, as the `upstream_error` row's `reason` names it.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            OpenError::Unreachable { .. } => "unreachable",
            OpenError::Timeout(_) => "timeout",
            OpenError::HostKey { .. } => "host_key",
            OpenError::Login(_) => "login",
            OpenError::Channel(_) => "channel",
            OpenError::Local(_) => "local",
            OpenError::Stopped(_) => "shutdown",
        }
    }
}

/// Opens the target side. The error says why, and which case it is.
pub(crate) async fn open(
    target: &TargetConfig,
    settings: &UpstreamSettings,
    req: &Request,
) -> Result<Opened, OpenError> {
    match target.kind {
        TargetKind::Ssh => {
            let (r, w, info, runner) = ssh::open(target, settings, req).await?;
            let integrated = info
                .as_ref()
                .and_then(|i| i.shell.as_deref())
                .and_then(Shell::from_path);
            Ok(Opened {
                reader: Reader::Ssh(r),
                writer: Writer::Ssh(w),
                integrated,
                info,
                runner: Runner::new(Via::Ssh(runner)),
            })
        }
        TargetKind::Local => {
            let run_as = target.run_as.as_ref().map(|r| r.get_ref().clone());
            let own = settings.own_account.clone();
            // The user and group databases may be remote (NSS): not on the runtime.
            let wants = req.wants_integration();
            // The user and group databases may be remote (NSS): not on the runtime.
            let (who, info) = tokio::task::spawn_blocking(move || {
                let who = LocalAccount::resolve(run_as.as_deref(), &own)?;
                let info = wants.then(|| TargetInfo::local(&who));
                Ok::<_, String>((who, info))
            })
            .await
            .map_err(|e| format!("account lookup failed: {e}"))
            .and_then(|r| r)
            .map_err(OpenError::Local)?;
            let integrated = wants
                .then(|| Shell::from_path(&who.shell().to_string_lossy()))
                .flatten();
            let (r, w) = local::open(&who, req, integrated.is_some(), &settings.spawn_lock)
                .map_err(OpenError::Local)?;
            Ok(Opened {
                reader: Reader::Local(r),
                writer: Writer::Local(w),
                integrated,
                info,
                runner: Runner::new(Via::Local(Arc::new(who))),
            })
        }
    }
}

/// A runner on `target` with no session channel of its own: a login to an
/// ssh target, or the local target's account.
pub(crate) async fn connect(
    target: &TargetConfig,
    settings: &UpstreamSettings,
    user: &str,
    session: &str,
) -> Result<Runner, OpenError> {
    match target.kind {
        TargetKind::Ssh => Ok(Runner::new(Via::Ssh(
            ssh::connect(target, settings, user, session).await?,
        ))),
        TargetKind::Local => {
            let run_as = target.run_as.as_ref().map(|r| r.get_ref().clone());
            let own = settings.own_account.clone();
            // The user and group databases may be remote (NSS): not on the runtime.
            let who =
                tokio::task::spawn_blocking(move || LocalAccount::resolve(run_as.as_deref(), &own))
                    .await
                    .map_err(|e| format!("account lookup failed: {e}"))
                    .and_then(|r| r)
                    .map_err(OpenError::Local)?;
            Ok(Runner::new(Via::Local(Arc::new(who))))
        }
    }
}

impl Reader {
    /// The next event, or `None` once the target side is closed.
    pub(crate) async fn next(&mut self) -> Option<TargetEvent> {
        match self {
            Reader::Ssh(r) => r.next().await,
            Reader::Local(r) => r.next().await,
        }
    }

    /// Why the target was lost, when its side closed without an exit
    /// status: a target that stopped answering, a cut connection.
    pub(crate) fn why_lost(&self) -> Option<String> {
        match self {
            Reader::Ssh(r) => r.why_lost(),
            Reader::Local(_) => None,
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

    /// The client will not read the output any more (`eow@openssh.com`,
    /// sent by OpenSSH's client when its standard output is closed, as in
    /// `ssh bastion cmd | head -1`): the target stops the command's output,
    /// so a command that writes on ends (SIGPIPE), as it would direct.
    pub(crate) async fn stop_output(&mut self) {
        match self {
            Writer::Ssh(w) => w.stop_output().await,
            Writer::Local(w) => w.stop_output().await,
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

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn the_probes_lines_are_read_and_empty_ones_left_out() {
        let info = TargetInfo::parse(
            "shell=/bin/bash\nkernel=Linux 6.1.0 x86_64\nhost=\nuser=deploy\nnoise\nos=Debian GNU/Linux 12 (bookworm)",
        );
        assert_eq!(info.shell.as_deref(), Some("/bin/bash"));
        assert_eq!(info.kernel.as_deref(), Some("Linux 6.1.0 x86_64"));
        assert_eq!(info.host, None);
        assert_eq!(info.user.as_deref(), Some("deploy"));
        assert_eq!(info.os.as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
    }
}
