//! `kind = "local"` targets: a process on the bastion host itself.
//!
//! A shell (or exec with a PTY) runs on a fresh PTY as a login shell of the
//! target's account; exec and subsystems without a PTY run on pipes. A
//! reader task turns the process's output and exit into [`Event`]s on a
//! small bounded channel, so a slow client stalls the process, not memory.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use russh::Sig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use super::{Command, Event, Request};
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

/// The account a local process runs as, and whether we must switch to it.
pub(crate) struct LocalAccount {
    account: Account,
    switch: bool,
}

impl LocalAccount {
    pub(crate) fn new(account: Account) -> LocalAccount {
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        LocalAccount {
            switch: account.uid != me,
            account,
        }
    }
}

pub(crate) struct Reader {
    rx: mpsc::Receiver<Event>,
}

pub(crate) enum Input {
    Pty(pty_process::OwnedWritePty),
    Pipe(Option<ChildStdin>),
}

pub(crate) struct Writer {
    input: Input,
    pid: Option<u32>,
}

pub(crate) fn open(who: &LocalAccount, req: &Request) -> Result<(Reader, Writer), String> {
    let (program, args, arg0) = command_line(&who.account, &req.command)?;
    let (tx, rx) = mpsc::channel(16);
    let writer = match &req.pty {
        Some(pty) => {
            let (master, pts) =
                pty_process::open().map_err(|e| format!("cannot open a PTY: {e}"))?;
            master
                .resize(pty_process::Size::new(clamp(pty.rows), clamp(pty.cols)))
                .map_err(|e| format!("cannot size the PTY: {e}"))?;
            let mut cmd = pty_process::Command::new(&program).args(&args).arg0(&arg0);
            cmd = cmd
                .env_clear()
                .envs(environment(&who.account, req))
                .current_dir(home(&who.account));
            if let Some(switch) = who.switcher()? {
                // SAFETY: runs between fork and exec; see `switch_account`.
                cmd = unsafe { cmd.pre_exec(switch) };
            }
            let child = cmd
                .spawn(pts)
                .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
            let pid = child.id();
            let (read, write) = master.into_split();
            tokio::spawn(pump_pty(read, child, tx));
            Writer {
                input: Input::Pty(write),
                pid,
            }
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
            if let Some(switch) = who.switcher()? {
                // SAFETY: runs between fork and exec; see `switch_account`.
                unsafe { cmd.pre_exec(switch) };
            }
            let mut child = cmd
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
            let pid = child.id();
            let stdin = child.stdin.take();
            tokio::spawn(pump_pipes(child, tx));
            Writer {
                input: Input::Pipe(stdin),
                pid,
            }
        }
    };
    Ok((Reader { rx }, writer))
}

impl LocalAccount {
    /// The pre-exec step that becomes the target account, if one is needed.
    fn switcher(
        &self,
    ) -> Result<Option<impl FnMut() -> std::io::Result<()> + Send + Sync + 'static>, String> {
        if !self.switch {
            return Ok(None);
        }
        let (uid, gid) = (self.account.uid, self.account.gid);
        let user = CString::new(self.account.name.clone()).map_err(|e| e.to_string())?;
        Ok(Some(move || switch_account(&user, uid, gid)))
    }
}

/// Takes on an account's groups, group and user, in the only order that
/// works (groups need root, so the user id changes last). Called in the
/// child between fork and exec, as OpenSSH does with the same calls.
fn switch_account(user: &CString, uid: u32, gid: u32) -> std::io::Result<()> {
    let check = |rc: libc::c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    // SAFETY: `user` is a valid NUL-terminated string; the rest take ints.
    unsafe {
        check(libc::initgroups(user.as_ptr(), gid as _))?;
        check(libc::setgid(gid))?;
        check(libc::setuid(uid))
    }
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

/// Copies PTY output into events until the shell exits and its output is
/// drained, then reports how it exited.
async fn pump_pty(mut read: pty_process::OwnedReadPty, mut child: Child, tx: mpsc::Sender<Event>) {
    let mut buf = BytesMut::with_capacity(CHUNK);
    let mut exited = None;
    loop {
        buf.reserve(CHUNK);
        let n = if exited.is_some() {
            // The shell is gone: take what is still buffered in the PTY,
            // but do not wait on background jobs that keep it open.
            match tokio::time::timeout(Duration::from_millis(100), read.read_buf(&mut buf)).await {
                Ok(r) => r,
                Err(_) => break,
            }
        } else {
            tokio::select! {
                r = read.read_buf(&mut buf) => r,
                status = child.wait() => {
                    exited = Some(status);
                    continue;
                }
            }
        };
        match n {
            // EIO: every holder of the PTY's other side has closed it.
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if tx.send(Event::Data(buf.split().freeze())).await.is_err() {
                    let _ = child.start_kill();
                    return;
                }
            }
        }
    }
    let status = match exited {
        Some(s) => s,
        None => child.wait().await,
    };
    let _ = tx.send(Event::Eof).await;
    report_exit(status, &tx).await;
}

/// Copies stdout and stderr into events until both close, then reports
/// how the process exited.
async fn pump_pipes(mut child: Child, tx: mpsc::Sender<Event>) {
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    while out.is_some() || err.is_some() {
        let event = tokio::select! {
            d = read_some(&mut out) => d.map(Event::Data),
            d = read_some(&mut err) => d.map(Event::Stderr),
        };
        if let Some(event) = event
            && tx.send(event).await.is_err()
        {
            let _ = child.start_kill();
            return;
        }
    }
    let _ = tx.send(Event::Eof).await;
    report_exit(child.wait().await, &tx).await;
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

async fn report_exit(status: std::io::Result<std::process::ExitStatus>, tx: &mpsc::Sender<Event>) {
    let event = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => Event::ExitStatus(code as u32),
            (None, Some(sig)) => Event::ExitSignal {
                signal: signal_name(sig),
                core_dumped: s.core_dumped(),
                message: String::new(),
            },
            (None, None) => Event::ExitStatus(255),
        },
        Err(_) => Event::ExitStatus(255),
    };
    let _ = tx.send(event).await;
}

fn signal_name(sig: i32) -> Sig {
    match sig {
        libc::SIGABRT => Sig::ABRT,
        libc::SIGALRM => Sig::ALRM,
        libc::SIGFPE => Sig::FPE,
        libc::SIGHUP => Sig::HUP,
        libc::SIGILL => Sig::ILL,
        libc::SIGINT => Sig::INT,
        libc::SIGKILL => Sig::KILL,
        libc::SIGPIPE => Sig::PIPE,
        libc::SIGQUIT => Sig::QUIT,
        libc::SIGSEGV => Sig::SEGV,
        libc::SIGTERM => Sig::TERM,
        libc::SIGUSR1 => Sig::USR1,
        other => Sig::Custom(other.to_string()),
    }
}

fn signal_number(sig: &Sig) -> Option<i32> {
    Some(match sig {
        Sig::ABRT => libc::SIGABRT,
        Sig::ALRM => libc::SIGALRM,
        Sig::FPE => libc::SIGFPE,
        Sig::HUP => libc::SIGHUP,
        Sig::ILL => libc::SIGILL,
        Sig::INT => libc::SIGINT,
        Sig::KILL => libc::SIGKILL,
        Sig::PIPE => libc::SIGPIPE,
        Sig::QUIT => libc::SIGQUIT,
        Sig::SEGV => libc::SIGSEGV,
        Sig::TERM => libc::SIGTERM,
        Sig::USR1 => libc::SIGUSR1,
        Sig::Custom(_) => return None,
    })
}

impl Reader {
    pub(crate) async fn next(&mut self) -> Option<Event> {
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

    pub(crate) fn signal(&mut self, sig: &Sig) {
        if let (Some(pid), Some(n)) = (self.pid, signal_number(sig)) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid as i32, n) };
        }
    }

    /// Hangs up on the process, as a closed terminal would.
    pub(crate) fn close(&mut self) {
        if let Some(pid) = self.pid.take() {
            // SAFETY: as above. A PTY child leads its own session and
            // process group, so the group gets the hang-up.
            unsafe {
                if matches!(self.input, Input::Pty(_)) {
                    libc::kill(-(pid as i32), libc::SIGHUP);
                }
                libc::kill(pid as i32, libc::SIGHUP);
            }
        }
        self.input = Input::Pipe(None);
    }
}
