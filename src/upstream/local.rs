//! `kind = "local"` targets: a process on the bastion host itself.
//!
//! A shell (or exec with a PTY) runs on a fresh PTY as a login shell of the
//! target's account; exec and subsystems without a PTY run on pipes. A
//! reader task turns the process's output and exit into [`TargetEvent`]s on a
//! small bounded channel, so a slow client stalls the process, not memory.

use std::ffi::{CString, OsString};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use bytes::{Bytes, BytesMut};
use russh::Sig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::stat::{Mode, umask};
use nix::sys::termios;
use nix::unistd::{Gid, Pid, Uid, getgrouplist, getuid, setgid, setgroups, setsid, setuid};

use super::{Command, Request, TargetEvent};
use crate::config::Account;

/// Where OpenSSH's sftp-server lives on common distributions.
const SFTP_SERVERS: &[&str] = &[
    "/usr/lib/openssh/sftp-server",
    "/usr/lib/ssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/libexec/sftp-server",
];

/// Read size: one SSH packet's worth.
const CHUNK: usize = 32 * 1024;

/// Hang-up to SIGKILL: how long a process may outlive its session.
const HANGUP_GRACE: Duration = Duration::from_secs(5);

/// The account a local process runs as, and what becoming it takes.
#[derive(Clone)]
pub(crate) struct LocalAccount {
    account: Account,
    /// Supplementary groups, looked up before fork (NSS is not safe to call
    /// between fork and exec). `None` when no switch is needed.
    switch_to: Option<Vec<Gid>>,
}

impl LocalAccount {
    /// Resolves `run_as` (or walissh's own account). Reads the user and
    /// group databases, so call it on a blocking thread.
    pub(crate) fn resolve(run_as: Option<&str>, own: &Account) -> Result<LocalAccount, String> {
        let account = match run_as {
            Some(name) => crate::config::lookup_account(name)?,
            None => own.clone(),
        };
        let switch_to = (account.uid != getuid().as_raw())
            .then(|| groups_of(&account))
            .transpose()?;
        Ok(LocalAccount { account, switch_to })
    }

    pub(crate) fn name(&self) -> &str {
        &self.account.name
    }

    pub(crate) fn shell(&self) -> &Path {
        &self.account.shell
    }
}

/// The account's groups (its own and the supplementary ones). nix grows
/// the buffer for members of many groups.
fn groups_of(account: &Account) -> Result<Vec<Gid>, String> {
    let user = CString::new(account.name.clone()).map_err(|e| e.to_string())?;
    getgrouplist(&user, Gid::from_raw(account.gid))
        .map_err(|e| format!("cannot list the groups of {}: {e}", account.name))
}

impl LocalAccount {
    /// The pre-exec step that becomes the target account, if one is needed.
    fn switcher(&self) -> Option<impl FnMut() -> std::io::Result<()> + Send + Sync + 'static> {
        let groups = self.switch_to.clone()?;
        let (uid, gid) = (self.account.uid, self.account.gid);
        Some(move || switch_account(&groups, uid, gid))
    }
}

/// Marks every descriptor above stderr close-on-exec, and gives back the
/// usual file mode mask, in the child before it becomes the account:
/// nothing walissh holds (its listening
/// socket, the audit database, another session's PTY, a descriptor it
/// inherited itself) reaches what the account runs. Runs between fork and
/// exec: system calls only. `close_range` where the kernel has it (5.11),
/// else one `fcntl` per possible descriptor.
fn clean_slate() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // walissh keeps its own files private (`daemon::keep_files_private`);
    // the account's processes get the usual mask.
    umask(Mode::from_bits_truncate(0o022));
    // SAFETY: integer arguments only. nix has no close_range.
    unsafe {
        let all = libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        );
        if all != 0 {
            let max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(1024, 1 << 20) as libc::c_int;
            for fd in 3..max {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
}

/// Takes on an account's groups, group and user, in the only order that
/// works (changing groups needs root, so the user id changes last). Runs
/// in the child between fork and exec, so it makes only async-signal-safe
/// system calls.
fn switch_account(groups: &[Gid], uid: u32, gid: u32) -> std::io::Result<()> {
    setgroups(groups)?;
    setgid(Gid::from_raw(gid))?;
    setuid(Uid::from_raw(uid))?;
    Ok(())
}

pub(crate) struct Reader {
    rx: mpsc::Receiver<TargetEvent>,
}

enum Input {
    Pty(pty_process::OwnedWritePty),
    Pipe(Option<ChildStdin>),
}

/// What the session asks of the process. The pump task owns the child, so
/// signals go through it: it knows whether the pid is still ours.
enum Control {
    Signal(Signal),
    HangUp,
    /// The client will not read the output any more (`eow@openssh.com`):
    /// the process's output pipe is closed, as sshd does, so a process
    /// that writes on gets SIGPIPE.
    StopOutput,
}

pub(crate) struct Writer {
    input: Input,
    control: mpsc::Sender<Control>,
}

/// Starts the process. `spawn_lock` serialises process creation: a PTY's
/// master is briefly inheritable after it is opened, and must not leak
/// into a process spawned at that moment for another session.
pub(crate) fn open(
    who: &LocalAccount,
    req: &Request,
    echo_off: bool,
    spawn_lock: &Mutex<()>,
) -> Result<(Reader, Writer), String> {
    let (program, args, arg0) = command_line(&who.account, &req.command)?;
    let (tx, rx) = mpsc::channel(16);
    let (control, control_rx) = mpsc::channel(4);
    let input = match &req.pty {
        Some(pty) => {
            let mut cmd = pty_process::Command::new(&program)
                .args(&args)
                .arg0(&arg0)
                .env_clear()
                .envs(environment(&who.account, req))
                .current_dir(home(&who.account));
            // (pty_process makes the child a session leader on the PTY
            // before this runs.)
            let mut switch = who.switcher();
            // SAFETY: runs between fork and exec; see `clean_slate` and
            // `switch_account`.
            cmd = unsafe {
                cmd.pre_exec(move || {
                    clean_slate();
                    switch.as_mut().map_or(Ok(()), |s| s())
                })
            };
            let (master, child) = {
                let _guard = spawn_lock.lock().unwrap_or_else(|e| e.into_inner());
                let (master, pts) =
                    pty_process::open().map_err(|e| format!("cannot open a PTY: {e}"))?;
                master
                    .resize(pty_process::Size::new(clamp(pty.rows), clamp(pty.cols)))
                    .map_err(|e| format!("cannot size the PTY: {e}"))?;
                if echo_off {
                    no_echo(&master).map_err(|e| format!("cannot set up the PTY: {e}"))?;
                }
                let child = cmd
                    .spawn(pts)
                    .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
                (master, child)
            };
            let (read, write) = master.into_split();
            let proc = Proc { child, group: true };
            tokio::spawn(pump_pty(read, proc, tx, control_rx));
            Input::Pty(write)
        }
        None => {
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(&args)
                .arg0(&arg0)
                .env_clear()
                .envs(environment(&who.account, req))
                .current_dir(home(&who.account))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            // A session of its own, as sshd gives each (setsid): no
            // controlling terminal, so nothing the account runs can type
            // into the terminal walissh was started from (TIOCSTI), and a
            // group of its own, so a hang-up reaches what it started too
            // and a command run clean passes a signal on to its group,
            // not to walissh's (`upstream::clean_command`).
            let mut switch = who.switcher();
            // SAFETY: runs between fork and exec; see `clean_slate` and
            // `switch_account`.
            unsafe {
                cmd.pre_exec(move || {
                    setsid()?;
                    clean_slate();
                    switch.as_mut().map_or(Ok(()), |s| s())
                })
            };
            let mut child = {
                let _guard = spawn_lock.lock().unwrap_or_else(|e| e.into_inner());
                cmd.spawn()
                    .map_err(|e| format!("cannot start {}: {e}", program.display()))?
            };
            let stdin = child.stdin.take();
            let proc = Proc { child, group: true };
            tokio::spawn(pump_pipes(proc, tx, control_rx));
            Input::Pipe(stdin)
        }
    };
    Ok((Reader { rx }, Writer { input, control }))
}

/// Turns the terminal's echo off (see `PtySpec::modes_without_echo`).
fn no_echo(pty: &impl AsFd) -> nix::Result<()> {
    let mut modes = termios::tcgetattr(pty)?;
    modes.local_flags.remove(termios::LocalFlags::ECHO);
    termios::tcsetattr(pty, termios::SetArg::TCSANOW, &modes)
}

fn clamp(n: u32) -> u16 {
    n.clamp(1, u16::MAX as u32) as u16
}

/// Program, arguments and argv[0] for what the client asked.
fn command_line(
    account: &Account,
    command: &Command,
) -> Result<(PathBuf, Vec<OsString>, String), String> {
    let shell = account.shell.clone();
    let base = shell
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sh".into());
    match command {
        // A leading '-' in argv[0] makes it a login shell.
        Command::Shell => Ok((shell, Vec::new(), format!("-{base}"))),
        Command::Exec(cmd) => Ok((
            shell,
            vec![OsString::from("-c"), OsString::from_vec(cmd.clone())],
            base,
        )),
        Command::Subsystem(name) if name == "sftp" => {
            let server = SFTP_SERVERS
                .iter()
                .map(Path::new)
                .find(|p| p.exists())
                .ok_or("sftp is not available on this host (no sftp-server found)")?;
            Ok((server.to_path_buf(), Vec::new(), "sftp-server".into()))
        }
        Command::Subsystem(name) => Err(format!("subsystem {name} is not available")),
    }
}

fn home(account: &Account) -> PathBuf {
    if account.home.is_dir() {
        account.home.clone()
    } else {
        PathBuf::from("/")
    }
}

/// A login environment for the account, plus the client's allowed env.
fn environment(account: &Account, req: &Request) -> Vec<(String, String)> {
    let path = if account.uid == 0 {
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    } else {
        "/usr/local/bin:/usr/bin:/bin"
    };
    let mut env = vec![
        ("HOME".to_string(), account.home.display().to_string()),
        ("USER".to_string(), account.name.clone()),
        ("LOGNAME".to_string(), account.name.clone()),
        ("SHELL".to_string(), account.shell.display().to_string()),
        ("PATH".to_string(), path.to_string()),
    ];
    if let Some(pty) = &req.pty {
        env.push(("TERM".to_string(), pty.term.clone()));
    }
    env.extend(req.env.iter().cloned());
    env
}

/// The process behind a session, owned by its pump task.
struct Proc {
    child: Child,
    /// The child leads its own process group (a PTY child its own
    /// session too), and the whole group is signalled on hang-up, as a
    /// closed terminal would.
    group: bool,
}

impl Proc {
    /// Signals the process, unless it has already been reaped (its pid may
    /// then belong to someone else).
    fn signal(&self, sig: Signal, whole_group: bool) {
        if let Some(pid) = self.child.id() {
            let pid = Pid::from_raw(pid as i32);
            if whole_group && self.group {
                let _ = killpg(pid, sig);
            }
            let _ = kill(pid, sig);
        }
    }

    fn control(&self, c: Option<Control>, deadline: &mut Option<Instant>) {
        match c {
            Some(Control::Signal(sig)) => self.signal(sig, false),
            // Piped output is closed by `pump_pipes`; a PTY's is the
            // terminal's, and stays.
            Some(Control::StopOutput) => {}
            // A hang-up, or the session dropped its writer.
            Some(Control::HangUp) | None => self.hang_up(deadline),
        }
    }

    /// SIGHUP now, SIGKILL at the deadline if it is still there.
    fn hang_up(&self, deadline: &mut Option<Instant>) {
        if deadline.is_none() {
            self.signal(Signal::SIGHUP, true);
            *deadline = Some(Instant::now() + HANGUP_GRACE);
        }
    }
}

/// Sleeps until the deadline, or for ever when there is none.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Copies PTY output into events until the shell exits and its output is
/// drained, then reports how it exited. Takes signals and the hang-up from
/// the session meanwhile.
async fn pump_pty(
    mut read: pty_process::OwnedReadPty,
    mut proc: Proc,
    tx: mpsc::Sender<TargetEvent>,
    mut control: mpsc::Receiver<Control>,
) {
    let mut buf = BytesMut::with_capacity(CHUNK);
    let mut kill_at = None;
    let mut control_open = true;
    let status = loop {
        buf.reserve(CHUNK);
        tokio::select! {
            r = read.read_buf(&mut buf) => match r {
                Ok(n) if n > 0 => {
                    if tx.send(TargetEvent::Data(buf.split().freeze())).await.is_err() {
                        // Nobody listens any more: end the process.
                        proc.hang_up(&mut kill_at);
                    }
                }
                // EIO: every holder of the terminal has closed it.
                _ => break finish(&mut proc, &mut kill_at).await,
            },
            status = proc.child.wait() => {
                drain_pty(&mut read, &mut buf, &tx).await;
                break status;
            }
            c = control.recv(), if control_open => {
                control_open = c.is_some();
                proc.control(c, &mut kill_at);
            }
            _ = until(kill_at) => {
                proc.signal(Signal::SIGKILL, true);
                kill_at = None;
            }
        }
    };
    let _ = tx.send(TargetEvent::Eof).await;
    report_exit(status, &tx).await;
}

/// After the shell exits, takes what is still buffered in the PTY, without
/// waiting on background jobs that keep it open.
async fn drain_pty(
    read: &mut pty_process::OwnedReadPty,
    buf: &mut BytesMut,
    tx: &mpsc::Sender<TargetEvent>,
) {
    loop {
        buf.reserve(CHUNK);
        match tokio::time::timeout(Duration::from_millis(100), read.read_buf(buf)).await {
            Ok(Ok(n)) if n > 0 => {
                if tx
                    .send(TargetEvent::Data(buf.split().freeze()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// Waits for a process whose output has ended, killing it if it lingers.
async fn finish(
    proc: &mut Proc,
    kill_at: &mut Option<Instant>,
) -> std::io::Result<std::process::ExitStatus> {
    match tokio::time::timeout(HANGUP_GRACE, proc.child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            proc.signal(Signal::SIGKILL, true);
            *kill_at = None;
            proc.child.wait().await
        }
    }
}

/// Copies stdout and stderr into events until both close, then reports
/// how the process exited. Takes signals and the hang-up meanwhile.
async fn pump_pipes(
    mut proc: Proc,
    tx: mpsc::Sender<TargetEvent>,
    mut control: mpsc::Receiver<Control>,
) {
    let mut out = proc.child.stdout.take();
    let mut err = proc.child.stderr.take();
    let mut kill_at = None;
    let mut control_open = true;
    while out.is_some() || err.is_some() {
        let event = tokio::select! {
            d = read_some(&mut out) => d.map(TargetEvent::Data),
            d = read_some(&mut err) => d.map(TargetEvent::Stderr),
            c = control.recv(), if control_open => {
                control_open = c.is_some();
                match c {
                    Some(Control::StopOutput) => out = None,
                    c => proc.control(c, &mut kill_at),
                }
                None
            }
            _ = until(kill_at) => {
                proc.signal(Signal::SIGKILL, false);
                kill_at = None;
                None
            }
        };
        if let Some(event) = event
            && tx.send(event).await.is_err()
        {
            proc.hang_up(&mut kill_at);
        }
    }
    let status = finish(&mut proc, &mut kill_at).await;
    let _ = tx.send(TargetEvent::Eof).await;
    report_exit(status, &tx).await;
}

/// Reads one chunk; at end of stream, clears the slot and yields `None`.
/// An empty slot never resolves, so `select!` waits on the other stream.
async fn read_some<R: AsyncRead + Unpin>(slot: &mut Option<R>) -> Option<Bytes> {
    let Some(r) = slot else {
        return std::future::pending().await;
    };
    let mut buf = BytesMut::with_capacity(CHUNK);
    match r.read_buf(&mut buf).await {
        Ok(n) if n > 0 => Some(buf.freeze()),
        _ => {
            *slot = None;
            None
        }
    }
}

async fn report_exit(
    status: std::io::Result<std::process::ExitStatus>,
    tx: &mpsc::Sender<TargetEvent>,
) {
    let event = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => TargetEvent::ExitStatus(code as u32),
            (None, Some(sig)) => TargetEvent::ExitSignal {
                signal: signal_name(sig),
                core_dumped: s.core_dumped(),
                message: String::new(),
            },
            (None, None) => TargetEvent::ExitStatus(255),
        },
        Err(_) => TargetEvent::ExitStatus(255),
    };
    let _ = tx.send(event).await;
}

/// The SSH name of the signal that ended a process.
fn signal_name(sig: i32) -> Sig {
    match Signal::try_from(sig) {
        Ok(Signal::SIGABRT) => Sig::ABRT,
        Ok(Signal::SIGALRM) => Sig::ALRM,
        Ok(Signal::SIGFPE) => Sig::FPE,
        Ok(Signal::SIGHUP) => Sig::HUP,
        Ok(Signal::SIGILL) => Sig::ILL,
        Ok(Signal::SIGINT) => Sig::INT,
        Ok(Signal::SIGKILL) => Sig::KILL,
        Ok(Signal::SIGPIPE) => Sig::PIPE,
        Ok(Signal::SIGQUIT) => Sig::QUIT,
        Ok(Signal::SIGSEGV) => Sig::SEGV,
        Ok(Signal::SIGTERM) => Sig::TERM,
        Ok(Signal::SIGUSR1) => Sig::USR1,
        _ => Sig::Custom(sig.to_string()),
    }
}

/// The signal an SSH client asked to send, if walissh knows it.
fn signal_of(sig: &Sig) -> Option<Signal> {
    Some(match sig {
        Sig::ABRT => Signal::SIGABRT,
        Sig::ALRM => Signal::SIGALRM,
        Sig::FPE => Signal::SIGFPE,
        Sig::HUP => Signal::SIGHUP,
        Sig::ILL => Signal::SIGILL,
        Sig::INT => Signal::SIGINT,
        Sig::KILL => Signal::SIGKILL,
        Sig::PIPE => Signal::SIGPIPE,
        Sig::QUIT => Signal::SIGQUIT,
        Sig::SEGV => Signal::SIGSEGV,
        Sig::TERM => Signal::SIGTERM,
        Sig::USR1 => Signal::SIGUSR1,
        Sig::Custom(_) => return None,
    })
}

impl Reader {
    pub(crate) async fn next(&mut self) -> Option<TargetEvent> {
        self.rx.recv().await
    }
}

impl Writer {
    pub(crate) async fn data(&mut self, data: &[u8]) -> Result<(), String> {
        let r = match &mut self.input {
            Input::Pty(w) => w.write_all(data).await,
            Input::Pipe(Some(w)) => w.write_all(data).await,
            Input::Pipe(None) => return Ok(()),
        };
        r.map_err(|e| format!("the local process stopped reading: {e}"))
    }

    /// End of input: closes a pipe's stdin. A PTY has no such thing (the
    /// shell reads ^D as EOF), so it is left alone, as sshd does.
    pub(crate) fn eof(&mut self) {
        if let Input::Pipe(stdin) = &mut self.input {
            *stdin = None;
        }
    }

    pub(crate) fn resize(&mut self, cols: u32, rows: u32) {
        if let Input::Pty(w) = &self.input {
            let _ = w.resize(pty_process::Size::new(clamp(rows), clamp(cols)));
        }
    }

    pub(crate) async fn signal(&mut self, sig: &Sig) {
        if let Some(n) = signal_of(sig) {
            let _ = self.control.send(Control::Signal(n)).await;
        }
    }

    /// The client will not read the output any more (`eow@openssh.com`).
    /// A PTY's output is the terminal's: only piped output is closed.
    pub(crate) async fn stop_output(&mut self) {
        if let Input::Pipe(_) = self.input {
            let _ = self.control.send(Control::StopOutput).await;
        }
    }

    /// Hangs up on the process, as a closed terminal would; it is killed if
    /// it is still there a few seconds later.
    pub(crate) async fn hang_up(&mut self) {
        self.input = Input::Pipe(None);
        let _ = self.control.send(Control::HangUp).await;
    }
}
