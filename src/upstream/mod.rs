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
mod ssh;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use russh::keys::PrivateKey;
use russh::{Pty, Sig};

use crate::config::{Account, HostKeyPolicy, TargetConfig, TargetKind};
use crate::terminal::Shell;
use crate::terminal::bootstrap::quote;

pub(crate) use local::LocalAccount;

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
/// the local target's account.
#[derive(Clone)]
pub(crate) enum Runner {
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
    /// Starts `script` clean, in `cwd` (see [`clean_command`]), with no
    /// input. The error is a sentence.
    pub(crate) async fn exec_clean(
        &self,
        ctx: &UpstreamSettings,
        script: &str,
        cwd: Option<&str>,
        user: &str,
    ) -> Result<Execution, String> {
        // Its input stays open: it is the lifeline of [`with_lifeline`].
        self.start(ctx, &clean_command(script, cwd), user, true)
            .await
    }

    /// What the environment provider knows of the target: its OS, kernel,
    /// host name, user and login shell (none when the probe failed).
    pub(crate) async fn facts(&self) -> Option<TargetInfo> {
        match self {
            Runner::Ssh(r) => r.facts().await,
            Runner::Local(who) => {
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
        ctx: &UpstreamSettings,
        command: &str,
        user: &str,
    ) -> Result<Execution, String> {
        self.start(ctx, command, user, false).await
    }

    /// Starts `command`; its input is never written to, and ends at once
    /// unless `hold_input`, when it ends as the [`Execution`] is dropped.
    async fn start(
        &self,
        ctx: &UpstreamSettings,
        command: &str,
        user: &str,
        hold_input: bool,
    ) -> Result<Execution, String> {
        match self {
            Runner::Ssh(r) => {
                let (reader, channel) = r.exec(command, user, hold_input).await?;
                Ok(Execution {
                    reader: Reader::Ssh(reader),
                    _input: Input::Ssh(channel),
                })
            }
            Runner::Local(who) => {
                let req = Request::exec(command, user);
                let (r, w) = local::open(who, &req, false, &ctx.spawn_lock)?;
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

/// The only PATH a command run clean sees: the system's directories, the
/// sbin ones included (`ss`, `ip`, `sysctl` live there on some systems).
const CLEAN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// How a command run clean is stopped, all of it, when walissh gives it
/// up (Ctrl-C, its timeout). A signal is not enough: sshd passes a TERM
/// to the session's process group, but refuses to for some accounts
/// (OpenSSH sends no signal into a root login's session), and a closed
/// channel stops nothing that does not write. So the command's input,
/// which walissh holds open and never writes to, is a lifeline: `sh`
/// gives the script `/dev/null` instead, and a watcher waits for that
/// input to end, which it does when walissh drops the channel or the
/// process, then signals the whole process group: TERM, and two seconds
/// later KILL, for what ignores TERM (the watcher ignores it itself, to
/// live that long). sshd makes each
/// session's process the leader of a group of its own (setsid), and
/// walissh each local one (`local::open`), so the group is the command's
/// and nothing else's; the line must never run where it is not. When the
/// script ends first, the watcher is stopped, and the exit status is the
/// script's.
fn with_lifeline(script: &str) -> String {
    format!(
        "exec 3<&0 </dev/null; {{ {script}\n}} 3<&- & p=$!; \
         {{ trap '' TERM; read -r x <&3; kill -TERM 0; sleep 2; kill -KILL 0; }} & w=$!; \
         exec 3<&-; wait $p; s=$?; kill -KILL $w 2>/dev/null; exit $s"
    )
}

/// The command line, for the target account's login shell, that runs
/// `script` (a POSIX sh script, already fully quoted by the policy) clean:
///
/// ```text
/// \exec '/usr/bin/env' '-i' 'PATH=<CLEAN_PATH>' 'LANG=C.UTF-8' "HOME=$HOME" '/bin/sh' '-c' \
///     'cd -- CWD || exit 1; <SCRIPT, run with a lifeline>'
/// ```
///
/// The login shell is unavoidable (sshd runs every exec command through
/// it, and a local target's exec does the same), so it is given one thing
/// to do: replace itself with `env`, which empties the environment and
/// starts `/bin/sh` with a fixed PATH. `sh` is not interactive and gets no
/// `ENV`, so it reads no start-up file; it goes to the prompt's directory
/// (`cwd`; without one it stays where the login shell started, the home
/// directory) and runs the script so that giving it up stops all of it
/// ([`with_lifeline`]).
///
/// What that protects against: everything the user's interactive shell
/// would add to a checked name. Aliases (every word the login shell reads
/// is quoted, so neither bash's nor zsh's aliases, global ones included,
/// apply), functions and PATH entries from rc files, and exported ones
/// (`env -i` drops `BASH_FUNC_*`, `PATH`, `ENV`, `BASH_ENV`, `LD_PRELOAD`,
/// `IFS` and the rest; `env` and `sh` are named by absolute path), shell
/// options, and the interactive rc files themselves (`~/.bashrc` of an
/// interactive shell, `~/.zshrc`: a non-interactive shell never reads
/// them).
///
/// What it does not: the login shell's own non-interactive start-up runs
/// before this line is read: `/etc/zshenv` and `~/.zshenv` for zsh; for
/// bash started by sshd, `~/.bashrc` (and Debian's `/etc/bash.bashrc`),
/// which most distributions' files leave at once when not interactive;
/// `BASH_ENV` when sshd passes the environment on. Code there runs first,
/// and a function named `exec` defined there (no quoting stops a function)
/// takes this line over. Those files, like `/bin/sh` and the programs in
/// the fixed PATH, are the target account's own: an account can make any
/// of its commands do anything. The wrapper keeps the user's interactive
/// set-up from changing what the policy checked; it is no sandbox against
/// the account itself. Programs still read their own configuration from
/// `$HOME` (kept, so that `git` or `systemctl --user` find theirs).
///
/// The quoting is POSIX single quotes, which is what bash and zsh (the
/// login shells the agent runs with: it needs their shell integration)
/// read; fish reads `\\` inside them differently.
pub(crate) fn clean_command(script: &str, cwd: Option<&str>) -> String {
    let cd = match cwd {
        Some(dir) => format!("cd -- {} || exit 1; ", quote(dir)),
        None => String::new(),
    };
    // The script's own line ends before the brace: a comment at its end
    // must not hide it.
    let body = format!("{cd}{}", with_lifeline(script));
    format!(
        "\\exec '/usr/bin/env' '-i' 'PATH={CLEAN_PATH}' 'LANG=C.UTF-8' \"HOME=$HOME\" '/bin/sh' '-c' {}",
        quote(&body)
    )
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

/// Opens the target side. The error is a sentence for the user.
pub(crate) async fn open(
    target: &TargetConfig,
    ctx: &UpstreamSettings,
    req: &Request,
) -> Result<Opened, String> {
    match target.kind {
        TargetKind::Ssh => {
            let (r, w, info, runner) = ssh::open(target, ctx, req).await?;
            let integrated = info
                .as_ref()
                .and_then(|i| i.shell.as_deref())
                .and_then(Shell::from_path);
            Ok(Opened {
                reader: Reader::Ssh(r),
                writer: Writer::Ssh(w),
                integrated,
                info,
                runner: Runner::Ssh(runner),
            })
        }
        TargetKind::Local => {
            let run_as = target.run_as.as_ref().map(|r| r.get_ref().clone());
            let own = ctx.own_account.clone();
            // The user and group databases may be remote (NSS): not on the runtime.
            let wants = req.wants_integration();
            // The user and group databases may be remote (NSS): not on the runtime.
            let (who, info) = tokio::task::spawn_blocking(move || {
                let who = LocalAccount::resolve(run_as.as_deref(), &own)?;
                let info = wants.then(|| TargetInfo::local(&who));
                Ok::<_, String>((who, info))
            })
            .await
            .map_err(|e| format!("account lookup failed: {e}"))??;
            let integrated = wants
                .then(|| Shell::from_path(&who.shell().to_string_lossy()))
                .flatten();
            let (r, w) = local::open(&who, req, integrated.is_some(), &ctx.spawn_lock)?;
            Ok(Opened {
                reader: Reader::Local(r),
                writer: Writer::Local(w),
                integrated,
                info,
                runner: Runner::Local(Arc::new(who)),
            })
        }
    }
}

/// A runner on `target` with no session channel of its own: a login to an
/// ssh target, or the local target's account. The error is a sentence.
pub(crate) async fn connect(
    target: &TargetConfig,
    ctx: &UpstreamSettings,
    user: &str,
    session: &str,
) -> Result<Runner, String> {
    match target.kind {
        TargetKind::Ssh => Ok(Runner::Ssh(ssh::connect(target, ctx, user, session).await?)),
        TargetKind::Local => {
            let run_as = target.run_as.as_ref().map(|r| r.get_ref().clone());
            let own = ctx.own_account.clone();
            // The user and group databases may be remote (NSS): not on the runtime.
            let who =
                tokio::task::spawn_blocking(move || LocalAccount::resolve(run_as.as_deref(), &own))
                    .await
                    .map_err(|e| format!("account lookup failed: {e}"))??;
            Ok(Runner::Local(Arc::new(who)))
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
    use std::path::{Path, PathBuf};
    use std::process::Command as Process;

    #[test]
    fn the_clean_line_quotes_the_directory_and_keeps_the_script() {
        let wrapper = format!(
            r#"\exec '/usr/bin/env' '-i' 'PATH={CLEAN_PATH}' 'LANG=C.UTF-8' "HOME=$HOME" '/bin/sh' '-c' "#
        );
        let line = clean_command("'ls' '-la'", Some("/srv/it's here"));
        let body = format!(
            "cd -- '/srv/it'\\''s here' || exit 1; {}",
            with_lifeline("'ls' '-la'")
        );
        assert_eq!(line, format!("{wrapper}{}", quote(&body)));
        assert_eq!(
            quote(&body),
            r#"'cd -- '\''/srv/it'\''\'\'''\''s here'\'' || exit 1; exec 3<&0 </dev/null; { '\''ls'\'' '\''-la'\''
} 3<&- & p=$!; { trap '\'''\'' TERM; read -r x <&3; kill -TERM 0; sleep 2; kill -KILL 0; } & w=$!; exec 3<&-; wait $p; s=$?; kill -KILL $w 2>/dev/null; exit $s'"#
        );
        // No directory known: no cd at all.
        let line = clean_command("'uptime'", None);
        let body = with_lifeline("'uptime'");
        assert!(
            body.starts_with("exec 3<&0 </dev/null; { 'uptime'\n}"),
            "{body}"
        );
        assert_eq!(line, format!("{wrapper}{}", quote(&body)));
    }

    /// Starts `line` the way sshd does: as `shell -c line`, leading a
    /// process group of its own (the lifeline signals its group), with its
    /// input held open, in `dir`, with `env` over a plain environment.
    fn start_as_login_shell(
        shell: &str,
        line: &str,
        dir: &Path,
        env: &[(&str, String)],
    ) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        Process::new(shell)
            .arg("-c")
            .arg(line)
            .current_dir(dir)
            .env_clear()
            .env("HOME", dir)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Runs `line` as [`start_as_login_shell`] starts it, to its end, its
    /// input open all along; returns its exit code and stdout.
    fn run_as_login_shell(
        shell: &str,
        line: &str,
        dir: &Path,
        env: &[(&str, String)],
    ) -> (Option<i32>, String) {
        use std::io::Read;
        let mut child = start_as_login_shell(shell, line, dir, env);
        let input = child.stdin.take();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = child.wait().unwrap();
        drop(input);
        (status.code(), out)
    }

    #[test]
    fn the_script_reaches_sh_intact_in_the_directory_given() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("it's a \"dir\" $HOME");
        std::fs::create_dir(&dir).unwrap();
        let dir_s = dir.to_str().unwrap();
        let script = r#"printf '%s|' "$PWD" 'a  b' "\$x" 'it'\''s' \\n; printf '%s' "$PATH,$LANG"; exit 3 # a comment"#;
        let line = clean_command(script, Some(dir_s));
        let (code, out) = run_as_login_shell("bash", &line, tmp.path(), &[]);
        assert_eq!(
            out,
            format!(r#"{dir_s}|a  b|$x|it's|\n|{CLEAN_PATH},C.UTF-8"#)
        );
        // The script's exit status is the command's.
        assert_eq!(code, Some(3));
        // A directory that cannot be entered stops the script.
        let gone = tmp.path().join("gone");
        let line = clean_command("echo RAN", Some(gone.to_str().unwrap()));
        let (code, out) = run_as_login_shell("bash", &line, tmp.path(), &[]);
        assert_eq!(code, Some(1));
        assert!(!out.contains("RAN"), "{out}");
    }

    #[test]
    fn ending_its_input_stops_all_the_clean_line_started() {
        use std::io::BufRead;
        let tmp = tempfile::tempdir().unwrap();
        // Both sides of a pipe, neither of which sh becomes, silent.
        let script = "'echo' 'STARTED'; 'tail' '-f' '/dev/null' | 'cat'";
        let line = clean_command(script, None);
        let mut child = start_as_login_shell("bash", &line, tmp.path(), &[]);
        let group = child.id() as i32;
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert_eq!(first, "STARTED\n");
        let group = nix::unistd::Pid::from_raw(group);
        let alive = || nix::sys::signal::killpg(group, None).is_ok();
        assert!(alive());
        // What dropping the channel or the process does to the input.
        drop(child.stdin.take());
        // The signal takes a moment; the orphans it reached are reaped by
        // init, sh by this test.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while alive() && std::time::Instant::now() < deadline {
            let _ = child.try_wait();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let left = alive();
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        child.wait().unwrap();
        assert!(!left, "the pipe's programs outlived the end of the input");
    }

    /// A login shell made hostile in `tmp`: a fake `ls` first in PATH, and
    /// start-up code for `shell` (read by `shell -c` itself, as sshd runs
    /// it) that defines an alias, a function and an exported function
    /// `ls`, aliases for the wrapper's own words, and an `ENV` for `sh`.
    /// Each trick, if it works, leaves a file in the markers' directory.
    /// Returns the directory the real `ls` lists, the markers' directory
    /// and the environment to start `shell` with.
    fn hostile(shell: &str, tmp: &Path) -> (PathBuf, PathBuf, Vec<(&'static str, String)>) {
        use std::os::unix::fs::PermissionsExt;
        let (marks, listing, fakebin) = (tmp.join("marks"), tmp.join("listing"), tmp.join("bin"));
        for d in [&marks, &listing, &fakebin] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(listing.join("REAL-FILE-4711"), "").unwrap();
        let m = marks.display();
        let fake_ls = fakebin.join("ls");
        std::fs::write(
            &fake_ls,
            format!("#!/bin/sh\ntouch {m}/path-ls\necho FAKE\n"),
        )
        .unwrap();
        std::fs::set_permissions(&fake_ls, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sh_env = tmp.join("sh_env");
        std::fs::write(
            &sh_env,
            format!("ls() {{ touch {m}/sh-env-ls; echo FAKE; }}\n"),
        )
        .unwrap();
        let common = format!(
            "ls() {{ touch {m}/function-ls; echo FAKE; }}\n\
             alias ls='touch {m}/alias-ls; echo FAKE'\n\
             alias exec='touch {m}/alias-exec; echo FAKE'\n\
             export ENV={sh_env}\n",
            sh_env = sh_env.display(),
        );
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", fakebin.display());
        let mut env = vec![("PATH", path)];
        match shell {
            "bash" => {
                let rc = tmp.join("bash_env");
                let rc_text = format!("shopt -s expand_aliases\n{common}export -f ls\n");
                std::fs::write(&rc, rc_text).unwrap();
                env.push(("BASH_ENV", rc.display().to_string()));
            }
            "zsh" => {
                let zdot = tmp.join("zdot");
                std::fs::create_dir(&zdot).unwrap();
                // zsh expands aliases in scripts too, global ones anywhere
                // in a line.
                let global = format!(
                    "alias /usr/bin/env='touch {m}/alias-env; echo FAKE'\n\
                     alias -g /bin/sh='/bin/echo FAKE; touch {m}/global-sh; :'\n\
                     alias -g -- -i='-i; touch {m}/global-i'\n"
                );
                std::fs::write(zdot.join(".zshenv"), format!("{common}{global}")).unwrap();
                env.push(("ZDOTDIR", zdot.display().to_string()));
            }
            _ => unreachable!(),
        }
        (listing, marks, env)
    }

    fn markers(dir: &Path) -> Vec<std::ffi::OsString> {
        let entries = std::fs::read_dir(dir).unwrap();
        entries.map(|e| e.unwrap().file_name()).collect()
    }

    #[test]
    fn the_real_program_runs_whatever_the_login_shell_was_told() {
        for shell in ["bash", "zsh"] {
            if shell == "zsh" && !Path::new("/usr/bin/zsh").exists() {
                eprintln!("zsh is not installed: its half is skipped");
                continue;
            }
            let tmp = tempfile::tempdir().unwrap();
            let (listing, marks, env) = hostile(shell, tmp.path());
            // The set-up is hostile to a line that is not clean.
            let (_, plain) = run_as_login_shell(shell, "ls", &listing, &env);
            assert!(plain.contains("FAKE"), "{shell}: not hostile: {plain:?}");
            for m in markers(&marks) {
                std::fs::remove_file(marks.join(m)).unwrap();
            }
            let script = "'ls' '-a'; '/usr/bin/env'";
            let line = clean_command(script, Some(listing.to_str().unwrap()));
            let (code, out) = run_as_login_shell(shell, &line, tmp.path(), &env);
            assert_eq!(code, Some(0), "{shell}: {out:?}");
            assert!(out.contains("REAL-FILE-4711"), "{shell}: {out:?}");
            assert!(!out.contains("FAKE"), "{shell}: {out:?}");
            assert_eq!(markers(&marks), Vec::<std::ffi::OsString>::new(), "{shell}");
            // The environment is the fixed one, and what sh sets itself.
            let mut vars: Vec<&str> = out
                .lines()
                .filter_map(|l| l.split_once('=').map(|(k, _)| k))
                .filter(|k| k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
                .collect();
            vars.sort();
            assert_eq!(
                vars,
                ["HOME", "LANG", "OLDPWD", "PATH", "PWD"],
                "{shell}: {out:?}"
            );
            assert!(
                out.contains(&format!("PATH={CLEAN_PATH}\n")),
                "{shell}: {out:?}"
            );
        }
    }

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
