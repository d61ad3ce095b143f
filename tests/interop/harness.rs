//! The real peers the interop tests drive: an OpenSSH `sshd` on a loopback
//! port as the target, walissh in front of it, and the OpenSSH `ssh` client
//! (through a real PTY where a person would use one).
//!
//! Waiting is always for an event (a log line, a string on the screen, an
//! audit row), bounded by a deadline that only turns a hang into a failure.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long any single wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub const ALICE_PW: &str = "alice-correct-horse";
pub const CAROL_PW: &str = "carol-battery-staple";

pub fn walissh_bin() -> &'static str {
    env!("CARGO_BIN_EXE_walissh")
}

/// The account tests log in to targets as.
pub fn me() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub fn is_root() -> bool {
    unsafe { libc::getuid() == 0 }
}

/// The unprivileged account `run_as` tests use (created when missing; the
/// tests that need it run as root, as CI does).
pub const JAIL_USER: &str = "walissh-test";
/// JAIL_USER's password, given to walissh in WALISSH_TEST_TARGET_PW.
const JAIL_PW: &str = "jail-pw-7d1f3c";

/// An account whose login shell is zsh, with an empty ~/.zshrc (zsh would
/// otherwise start its new-user wizard). `None` without root or zsh.
pub const ZSH_USER: &str = "walissh-zsh";

pub fn zsh_user() -> Option<&'static str> {
    static ONCE: OnceLock<bool> = OnceLock::new();
    let ok = *ONCE.get_or_init(|| {
        if !is_root() || !Path::new("/usr/bin/zsh").exists() {
            return false;
        }
        ensure_account(ZSH_USER, &["--create-home", "--shell", "/usr/bin/zsh"]);
        std::fs::write(format!("/home/{ZSH_USER}/.zshrc"), "").unwrap();
        true
    });
    ok.then_some(ZSH_USER)
}

/// An account whose login shell is bash and whose `~/.bash_profile` asks
/// a question before the prompt (`read -p "Ticket number > "`), as a
/// review's did in `sudo su - app`. `None` without root.
pub const TICKET_USER: &str = "walissh-ticket";

pub fn ticket_user() -> Option<&'static str> {
    static ONCE: OnceLock<bool> = OnceLock::new();
    let ok = *ONCE.get_or_init(|| {
        if !is_root() {
            return false;
        }
        ensure_account(TICKET_USER, &["--create-home", "--shell", "/bin/bash"]);
        let profile =
            "read -r -p 'Ticket number > ' t; echo \"TICKET=[$t]\"\nPS1='\\u@\\h:\\w\\$ '\n";
        std::fs::write(format!("/home/{TICKET_USER}/.bash_profile"), profile).unwrap();
        true
    });
    ok.then_some(TICKET_USER)
}

/// Where the accounts the tests created are listed, one name a line, for
/// `tools/test` to remove when the suite ends (a test process has no
/// end of its own to do it in).
pub const ACCOUNTS_MADE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/accounts-made");

/// Creates a local account with `useradd` unless it exists, and lists it
/// in `ACCOUNTS_MADE`.
fn ensure_account(name: &str, options: &[&str]) {
    let exists = Command::new("id")
        .arg(name)
        .output()
        .unwrap()
        .status
        .success();
    if !exists {
        let st = Command::new("useradd")
            .args(options)
            .arg(name)
            .status()
            .unwrap();
        assert!(st.success(), "useradd {name} failed");
        let mut list = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(ACCOUNTS_MADE)
            .unwrap();
        writeln!(list, "{name}").unwrap();
    }
}

fn ensure_jail_user() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        ensure_account(
            JAIL_USER,
            &["--system", "--no-create-home", "--shell", "/bin/sh"],
        );
        // For targets that walissh logs in to with a password.
        set_password(JAIL_USER, JAIL_PW);
    });
}

fn set_password(user: &str, password: &str) {
    let mut chpasswd = Command::new("chpasswd")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let line = format!("{user}:{password}\n");
    chpasswd
        .stdin
        .take()
        .unwrap()
        .write_all(line.as_bytes())
        .unwrap();
    assert!(chpasswd.wait().unwrap().success(), "chpasswd failed");
}

/// An account with bash as its login shell and a home of its own, whose
/// start-up files the clean-run tests make hostile. It has a password:
/// sshd without PAM refuses a locked account even a key.
pub const HOSTILE_USER: &str = "walissh-hostile";

/// HOSTILE_USER and its home; `None` without root.
pub fn hostile_user() -> Option<(&'static str, PathBuf)> {
    static ONCE: OnceLock<Option<PathBuf>> = OnceLock::new();
    let home = ONCE.get_or_init(|| {
        if !is_root() {
            return None;
        }
        ensure_account(HOSTILE_USER, &["--create-home", "--shell", "/bin/bash"]);
        set_password(HOSTILE_USER, "hostile-pw-5c2e9a");
        let out = Command::new("getent")
            .args(["passwd", HOSTILE_USER])
            .output()
            .unwrap();
        let line = String::from_utf8(out.stdout).unwrap();
        let home = line.trim().split(':').nth(5).expect("no home in passwd");
        Some(PathBuf::from(home))
    });
    home.clone().map(|h| (HOSTILE_USER, h))
}

/// An argon2id hash of `pw`, made by `walissh hash-password`.
pub fn hash_of(pw: &str) -> String {
    static CACHE: OnceLock<Mutex<Vec<(String, String)>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    if let Some((_, h)) = cache.lock().unwrap().iter().find(|(p, _)| p == pw) {
        return h.clone();
    }
    let mut child = Command::new(walissh_bin())
        .arg("hash-password")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{pw}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let h = String::from_utf8(out.stdout).unwrap().trim().to_string();
    cache.lock().unwrap().push((pw.to_string(), h.clone()));
    h
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Generates an ed25519 key pair at `path` (and `path.pub`).
/// A loopback port that refuses connections for as long as the socket is
/// held: bound, never listening, so no other test can take it (a port
/// merely found free could be taken by then).
pub fn closed_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    (socket, port)
}

pub fn keygen(path: &Path) -> String {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::read_to_string(path.with_extension("pub"))
        .unwrap()
        .trim()
        .to_string()
}

/// Collects a child's output stream in the background, so tests can wait
/// for a string to appear.
/// `io` again while a signal to the test process (a child's end) cuts it
/// short: that is no answer and no end. A socket with a read timeout is
/// not restarted after a signal even with SA_RESTART, and a reader thread
/// that took it for the end stopped filling its screen.
pub fn retrying<T>(mut io: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    loop {
        match io() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

#[derive(Clone, Default)]
pub struct Capture {
    inner: Arc<(Mutex<Vec<u8>>, Condvar)>,
}

impl Capture {
    pub fn spawn_reader(&self, mut r: impl Read + Send + 'static) {
        let me = self.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match retrying(|| r.read(&mut buf)) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let (m, cv) = &*me.inner;
                        // A waiter that timed out panicked holding the
                        // lock; keep collecting regardless.
                        m.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .extend_from_slice(&buf[..n]);
                        cv.notify_all();
                    }
                }
            }
            let (m, cv) = &*me.inner;
            let _g = m.lock().unwrap_or_else(|e| e.into_inner());
            cv.notify_all();
        });
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.inner.0.lock().unwrap()).into_owned()
    }

    /// The offset just past what came so far, for `wait_for_from`.
    pub fn end(&self) -> usize {
        self.inner.0.lock().unwrap().len()
    }

    /// Waits until `needle` appears at or after byte `from`; returns the
    /// offset just past it.
    pub fn wait_for_from(&self, needle: &str, from: usize) -> usize {
        let (m, cv) = &*self.inner;
        let start = Instant::now();
        let mut g = m.lock().unwrap();
        loop {
            if g.len() > from
                && let Some(i) = find(&g[from..], needle.as_bytes())
            {
                return from + i + needle.len();
            }
            let left = DEADLINE.checked_sub(start.elapsed()).unwrap_or_else(|| {
                panic!(
                    "timed out waiting for {needle:?}; got:\n{}",
                    String::from_utf8_lossy(&g)
                )
            });
            g = cv.wait_timeout(g, left).unwrap().0;
        }
    }

    pub fn wait_for(&self, needle: &str) -> usize {
        self.wait_for_from(needle, 0)
    }

    /// Like `wait_for_from`, with escape sequences (colours, cursor moves,
    /// OSC titles) ignored: `needle` may be split by them, as text streamed
    /// and coloured piece by piece is. Returns the raw offset just past it.
    pub fn wait_plain_from(&self, needle: &str, from: usize) -> usize {
        let (m, cv) = &*self.inner;
        let start = Instant::now();
        let mut g = m.lock().unwrap();
        loop {
            if g.len() > from {
                let (plain, raw_end) = strip_escapes(&g[from..]);
                if let Some(i) = find(&plain, needle.as_bytes()) {
                    return from + raw_end[i + needle.len() - 1];
                }
            }
            let left = DEADLINE.checked_sub(start.elapsed()).unwrap_or_else(|| {
                panic!(
                    "timed out waiting for {needle:?} (escapes ignored) after byte {from}; \
                     screen without escapes:\n{}\n--- raw:\n{:?}",
                    String::from_utf8_lossy(&strip_escapes(&g).0),
                    String::from_utf8_lossy(&g)
                )
            });
            g = cv.wait_timeout(g, left).unwrap().0;
        }
    }

    /// Waits until one of `needles` appears at or after byte `from` and
    /// the line it is on is complete; returns that whole line.
    pub fn wait_line_from(&self, needles: &[&str], from: usize) -> String {
        let (m, cv) = &*self.inner;
        let start = Instant::now();
        let mut g = m.lock().unwrap();
        loop {
            if g.len() > from {
                let hay = &g[from..];
                let hit = needles.iter().filter_map(|n| find(hay, n.as_bytes())).min();
                if let Some(i) = hit
                    && let Some(nl) = hay[i..].iter().position(|&b| b == b'\n')
                {
                    let begin = hay[..i]
                        .iter()
                        .rposition(|&b| b == b'\n')
                        .map_or(0, |p| p + 1);
                    return String::from_utf8_lossy(&hay[begin..i + nl]).into_owned();
                }
            }
            let left = DEADLINE.checked_sub(start.elapsed()).unwrap_or_else(|| {
                panic!(
                    "timed out waiting for a line with one of {needles:?}; got:\n{}",
                    String::from_utf8_lossy(&g)
                )
            });
            g = cv.wait_timeout(g, left).unwrap().0;
        }
    }

    /// What came from byte `from` on, as text.
    pub fn since(&self, from: usize) -> String {
        let g = self.inner.0.lock().unwrap();
        String::from_utf8_lossy(&g[from.min(g.len())..]).into_owned()
    }

    /// Everything so far without escape sequences.
    pub fn plain(&self) -> String {
        String::from_utf8_lossy(&strip_escapes(&self.inner.0.lock().unwrap()).0).into_owned()
    }
}

/// `bytes` without escape sequences, and for each byte kept the offset
/// just past it in `bytes`.
pub fn strip_escapes(bytes: &[u8]) -> (Vec<u8>, Vec<usize>) {
    let (mut plain, mut ends) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != 0x1b {
            plain.push(bytes[i]);
            i += 1;
            ends.push(i);
            continue;
        }
        i += 1;
        match bytes.get(i) {
            // CSI: parameters up to a final byte.
            Some(b'[') => {
                i += 1;
                while i < bytes.len() && !(0x40..=0x7e).contains(&bytes[i]) {
                    i += 1;
                }
                i += 1;
            }
            // OSC, DCS, APC, PM: up to BEL or ST (ESC \).
            Some(b']' | b'P' | b'_' | b'^') => {
                i += 1;
                while i < bytes.len() {
                    if bytes[i] == 0x07 {
                        i += 1;
                        break;
                    }
                    if bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'\\') {
                        i += 2;
                        break;
                    }
                    i += 1;
                }
            }
            // Character set designations take one more byte.
            Some(b'(' | b')' | b'*' | b'+' | b'#' | b'%') => i += 2,
            Some(_) => i += 1,
            None => {}
        }
    }
    (plain, ends)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A throwaway OpenSSH server on loopback, accepting one public key.
pub struct Sshd {
    pub port: u16,
    pub host_pub: String,
    /// What sshd logs (`-e`): its "Accepted ..." lines among them.
    pub log: Capture,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Sshd {
    pub fn start(authorized_key: &str) -> Sshd {
        Sshd::start_with(authorized_key, "")
    }

    /// An sshd with more lines in its sshd_config.
    pub fn start_with(authorized_key: &str, extra_config: &str) -> Sshd {
        Sshd::start_without(authorized_key, extra_config, &[])
    }

    /// An sshd, and what it runs, in a mount namespace of its own where
    /// each of `programs` is `/dev/null` (a target without them).
    pub fn start_without(authorized_key: &str, extra_config: &str, programs: &[&str]) -> Sshd {
        std::fs::create_dir_all("/run/sshd").ok();
        let dir = tempfile::tempdir().unwrap();
        let host_pub = keygen(&dir.path().join("host_ed25519"));
        std::fs::write(
            dir.path().join("authorized_keys"),
            format!("{authorized_key}\n"),
        )
        .unwrap();
        for _ in 0..5 {
            let port = free_port();
            let cfg = dir.path().join("sshd_config");
            std::fs::write(
                &cfg,
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_ed25519\nPidFile none\n\
                     AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\n\
                     PasswordAuthentication yes\nKbdInteractiveAuthentication no\n\
                     PermitRootLogin prohibit-password\nAcceptEnv *\nPrintMotd no\n\
                     Subsystem sftp internal-sftp\nLogLevel INFO\n{extra_config}\n",
                    d = dir.path().display()
                ),
            )
            .unwrap();
            let hide: String = programs
                .iter()
                .map(|p| format!("mount --bind /dev/null {p} && "))
                .collect();
            let mut sshd = Command::new("/usr/sbin/sshd");
            if !programs.is_empty() {
                sshd = Command::new("unshare");
                sshd.args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
                    .arg(format!("{hide}exec /usr/sbin/sshd \"$@\""))
                    .arg("sh");
            }
            let mut child = sshd
                .args(["-D", "-e", "-f"])
                .arg(&cfg)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("sshd (openssh-server) must be installed");
            let err = Capture::default();
            err.spawn_reader(child.stderr.take().unwrap());
            // sshd says either that it listens or why it cannot.
            let listening = wait_either(&err, "Server listening", "Bind to port");
            if listening {
                return Sshd {
                    port,
                    host_pub,
                    log: err,
                    child,
                    _dir: dir,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("sshd could not find a free port");
    }
}

/// Waits until `yes` or `no` appears; true for `yes`.
fn wait_either(c: &Capture, yes: &str, no: &str) -> bool {
    let (m, cv) = &*c.inner;
    let start = Instant::now();
    let mut g = m.lock().unwrap();
    loop {
        if find(&g, yes.as_bytes()).is_some() {
            return true;
        }
        if find(&g, no.as_bytes()).is_some() {
            return false;
        }
        let left = DEADLINE
            .checked_sub(start.elapsed())
            .unwrap_or_else(|| panic!("sshd did not start:\n{}", String::from_utf8_lossy(&g)));
        g = cv.wait_timeout(g, left).unwrap().0;
    }
}

impl Sshd {
    /// Sends `signal` to the sshd and every process under it (its
    /// connections' privilege-separated children): SIGSTOP makes a target
    /// that is silent without closing anything, SIGCONT brings it back.
    pub fn signal_all(&self, signal: i32) {
        for pid in self.processes() {
            unsafe { libc::kill(pid, signal) };
        }
    }

    /// The sshd and every process under it.
    fn processes(&self) -> Vec<i32> {
        let mut pids = vec![self.child.id() as i32];
        let mut i = 0;
        while i < pids.len() {
            let out = Command::new("pgrep")
                .args(["-P", &pids[i].to_string()])
                .output()
                .unwrap();
            let children = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>();
            pids.extend(children);
            i += 1;
        }
        pids
    }

    /// The processes under the sshd, with their states and where each
    /// waits: what a failed test shows of the target's side (a stopped or
    /// blocked process explains output that never came).
    pub fn tree(&self) -> String {
        let pids: Vec<String> = self.processes().iter().map(|p| p.to_string()).collect();
        let out = Command::new("ps")
            .args(["-o", "pid,ppid,pgid,tpgid,stat,wchan:22,args", "-p"])
            .arg(pids.join(","))
            .output();
        out.map_or_else(
            |e| format!("ps: {e}"),
            |o| String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A step run on the state directory before walissh starts.
pub type Prepare = Box<dyn FnOnce(&Path, &Sshd)>;

/// Knobs for one test's walissh config.
pub struct Opts {
    pub host_key_policy: &'static str,
    pub on_failure: &'static str,
    pub max_failures: u32,
    pub record_input: bool,
    pub login_grace_s: u64,
    /// Runs on the state directory before walissh starts.
    pub prepare: Option<Prepare>,
    /// `[llm] base_url`; `None` points it at a closed local port, so a
    /// developer's local model server is never asked.
    pub llm_url: Option<String>,
    /// `[llm] timeout_s`.
    pub llm_timeout_s: u64,
    /// bob's `ai` mode (`off`, `confirm`, `auto`).
    pub bob_ai: &'static str,
    /// Appended to the config (an `[ai]` section, say; never `[llm]`,
    /// which is always written), with `{sshd_port}` replaced by the target
    /// sshd's port and `{bob_pub}` by bob's public key.
    pub extra_toml: String,
    /// walissh runs with a controlling terminal (a PTY the test holds), as
    /// `sudo walissh serve` typed in a shell does.
    pub on_a_terminal: bool,
    /// `[server] max_sessions_per_connection`.
    pub max_sessions: u32,
    /// `[audit] record_exec`.
    pub record_exec: bool,
    /// `[server] max_sessions_per_user`.
    pub max_user_sessions: u32,
    /// `[server] max_connections_per_user`.
    pub max_user_connections: u32,
    /// `[upstream] keepalive_s` and `keepalive_max`.
    pub keepalive: (u64, u32),
    /// A soft limit on open files for walissh's process, below the hard.
    pub nofile_soft: Option<u64>,
    /// More keys of `[audit]`.
    pub audit_toml: String,
    /// walissh logs in to the target with certificates from its CA
    /// (`[upstream] ca_key`), and the target's sshd trusts that CA
    /// (`TrustedUserCAKeys`, `AuthorizedPrincipalsFile`) instead of
    /// listing walissh's key.
    pub upstream_ca: bool,
    /// Programs the target sshd's logins run without (see
    /// [`Sshd::start_without`]).
    pub target_without: &'static [&'static str],
    /// WATCHDOG_USEC, as systemd's `WatchdogSec=` sets it.
    pub watchdog_usec: Option<u64>,
    /// More keys of `[server]`.
    pub server_toml: String,
    /// More environment for walissh and its CLI (an object store's
    /// endpoint and credentials).
    pub env: Vec<(String, String)>,
    /// bob's key (its `.pub` beside it), as another node of the same
    /// deployment has it; None: a new one.
    pub bob_key: Option<PathBuf>,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            host_key_policy: "accept-new",
            on_failure: "refuse",
            max_failures: 5,
            record_input: false,
            login_grace_s: 60,
            prepare: None,
            llm_url: None,
            llm_timeout_s: 10,
            bob_ai: "confirm",
            extra_toml: String::new(),
            on_a_terminal: false,
            max_sessions: 10,
            record_exec: true,
            max_user_sessions: 50,
            max_user_connections: 32,
            bob_key: None,
            keepalive: (15, 3),
            nofile_soft: None,
            audit_toml: String::new(),
            upstream_ca: false,
            target_without: &[],
            watchdog_usec: None,
            server_toml: String::new(),
            env: Vec::new(),
        }
    }
}

/// walissh in front of a real sshd, with three users:
/// alice (password, only web1, `ai` left to its default), bob (key, web1
/// and local: a menu; `ai` from [`Opts::bob_ai`]),
/// carol (password, `ai = "off"`, every target including the unreachable `down`, the
/// `tarpit` that accepts connections and never answers, and, when the
/// tests run as root, `jail`: a local shell run as JAIL_USER, and
/// `pwtarget`/`pwmissing`: the sshd as JAIL_USER with a password from an
/// environment variable that is set / not set).
pub struct Bastion {
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub state: PathBuf,
    pub bob_key: PathBuf,
    pub sshd: Sshd,
    pub log: Capture,
    _tarpit: TcpListener,
    /// The default `[llm]` port and the `down` target's: bound, never
    /// listening (see [`closed_port`]).
    _closed: [tokio::net::TcpSocket; 2],
    /// Where walissh sends its systemd notifications (NOTIFY_SOCKET).
    pub notify: std::os::unix::net::UnixDatagram,
    child: Option<Child>,
    /// The master side of walissh's controlling terminal, with
    /// [`Opts::on_a_terminal`].
    terminal: Option<std::os::fd::OwnedFd>,
    on_a_terminal: bool,
    nofile_soft: Option<u64>,
    watchdog_usec: Option<u64>,
    env: Vec<(String, String)>,
}

impl Bastion {
    pub fn start() -> Bastion {
        Bastion::start_with(Opts::default())
    }

    pub fn start_with(opts: Opts) -> Bastion {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let bob_key = dir.path().join("bob_ed25519");
        let bob_pub = match &opts.bob_key {
            None => keygen(&bob_key),
            Some(from) => {
                std::fs::copy(from, &bob_key).unwrap();
                let public = std::fs::read_to_string(from.with_extension("pub")).unwrap();
                std::fs::write(bob_key.with_extension("pub"), &public).unwrap();
                public.trim().to_string()
            }
        };
        let config = dir.path().join("walissh.toml");
        let (closed_down, down) = closed_port();
        // Accepts TCP connections (the kernel does) but never answers.
        let tarpit = TcpListener::bind("127.0.0.1:0").unwrap();
        let (closed, closed_port) = closed_port();
        let llm_url = opts
            .llm_url
            .clone()
            .unwrap_or_else(|| format!("http://127.0.0.1:{closed_port}/v1"));
        // The bastion's upstream key must be known before sshd starts.
        let write_config = |sshd_port: u16| {
            std::fs::write(
                &config,
                format!(
                    r#"[server]
listen = ["127.0.0.1:0"]
state_dir = "{state}"
auth_max_failures = {mf}
auth_lockout_s = 600
login_grace_s = {lg}
max_sessions_per_connection = {ms}
max_sessions_per_user = {mu}
max_connections_per_user = {mc}
{server_toml}

[upstream]
host_key_policy = "{policy}"
keepalive_s = {ka}
keepalive_max = {km}
{ca}

[audit]
on_failure = "{of}"
record_input = {ri}
record_exec = {rx}
{ae}

[[targets]]
name = "web1"
host = "127.0.0.1"
port = {sshd_port}
user = "{me}"

[[targets]]
name = "web2"
host = "127.0.0.1"
port = {sshd_port}
user = "{me}"

[[targets]]
name = "local"
kind = "local"

[[targets]]
name = "down"
host = "127.0.0.1"
port = {down}

[[targets]]
name = "tarpit"
host = "127.0.0.1"
port = {tarpit}

{jail}
{zsh}
[[users]]
name = "alice"
password_hash = "{alice}"
targets = ["web1"]

[[users]]
name = "bob"
authorized_keys = ["{bob_pub}"]
targets = ["web1", "local"]
ai = "{bob_ai}"

[[users]]
name = "carol"
password_hash = "{carol}"
targets = ["web*", "local", "down", "jail", "tarpit", "pw*", "zsh"]
ai = "off"

[[users]]
name = "dave"
authorized_keys = ["{bob_pub}"]
targets = ["zsh"]

[llm]
base_url = "{llm_url}"
model = "test-model"
timeout_s = {llm_timeout}

{extra}
"#,
                    bob_ai = opts.bob_ai,
                    llm_timeout = opts.llm_timeout_s,
                    extra = opts
                        .extra_toml
                        .replace("{sshd_port}", &sshd_port.to_string())
                        .replace("{bob_pub}", &bob_pub)
                        .replace("{me}", &me()),
                    state = state.display(),
                    tarpit = tarpit.local_addr().unwrap().port(),
                    mf = opts.max_failures,
                    lg = opts.login_grace_s,
                    ms = opts.max_sessions,
                    mu = opts.max_user_sessions,
                    mc = opts.max_user_connections,
                    server_toml = opts.server_toml,
                    policy = opts.host_key_policy,
                    ka = opts.keepalive.0,
                    km = opts.keepalive.1,
                    of = opts.on_failure,
                    ri = opts.record_input,
                    rx = opts.record_exec,
                    ae = opts.audit_toml,
                    ca = match opts.upstream_ca {
                        true => format!("ca_key = \"{}\"", dir.path().join("upstream_ca").display()),
                        false => String::new(),
                    },
                    me = me(),
                    alice = hash_of(ALICE_PW),
                    carol = hash_of(CAROL_PW),
                    zsh = match zsh_user() {
                        Some(u) => format!("[[targets]]\nname = \"zsh\"\nkind = \"local\"\nrun_as = \"{u}\"\n"),
                        None => String::new(),
                    },
                    jail = if is_root() {
                        ensure_jail_user();
                        format!(
                            "[[targets]]\nname = \"jail\"\nkind = \"local\"\nrun_as = \"{JAIL_USER}\"\n\n\
                             [[targets]]\nname = \"pwtarget\"\nhost = \"127.0.0.1\"\nport = {sshd_port}\n\
                             user = \"{JAIL_USER}\"\npassword_env = \"WALISSH_TEST_TARGET_PW\"\n\n\
                             [[targets]]\nname = \"pwmissing\"\nhost = \"127.0.0.1\"\nport = {sshd_port}\n\
                             user = \"{JAIL_USER}\"\npassword_env = \"WALISSH_TEST_UNSET_PW\"\n"
                        )
                    } else {
                        String::new()
                    },
                ),
            )
            .unwrap();
        };
        write_config(1);
        let out = Command::new(walissh_bin())
            .args(["pubkey", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pubkey: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let upstream_pub = String::from_utf8(out.stdout).unwrap();
        // The target accepts walissh's key (or its CA's certificates), and
        // bob's for direct logins to compare walissh's sessions with.
        let sshd = match opts.upstream_ca {
            false => Sshd::start_without(
                &format!("{}\n{bob_pub}", upstream_pub.trim()),
                "",
                opts.target_without,
            ),
            true => {
                let out = Command::new(walissh_bin())
                    .args(["pubkey", "--ca", "--config"])
                    .arg(&config)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "pubkey --ca: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let (ca, principals) = (dir.path().join("ca.pub"), dir.path().join("principals"));
                std::fs::write(&ca, &out.stdout).unwrap();
                std::fs::write(&principals, format!("{}\n", me())).unwrap();
                let trust = format!(
                    "TrustedUserCAKeys {}\nAuthorizedPrincipalsFile {}\n",
                    ca.display(),
                    principals.display()
                );
                Sshd::start_with(&bob_pub, &trust)
            }
        };
        write_config(sshd.port);
        if let Some(prepare) = opts.prepare {
            prepare(&state, &sshd);
        }
        let notify = std::os::unix::net::UnixDatagram::bind(dir.path().join("notify")).unwrap();
        notify.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut b = Bastion {
            _tarpit: tarpit,
            _closed: [closed, closed_down],
            port: 0,
            notify,
            dir,
            config,
            state,
            bob_key,
            sshd,
            log: Capture::default(),
            child: None,
            terminal: None,
            on_a_terminal: opts.on_a_terminal,
            nofile_soft: opts.nofile_soft,
            watchdog_usec: opts.watchdog_usec,
            env: opts.env,
        };
        b.spawn();
        b
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(walissh_bin());
        cmd.args(["serve", "--config"])
            .arg(&self.config)
            // WALISSH_TEST_LOG: another filter, to look into a failure.
            .env(
                "RUST_LOG",
                std::env::var("WALISSH_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env("NOTIFY_SOCKET", self.dir.path().join("notify"))
            .env("WALISSH_TEST_TARGET_PW", JAIL_PW)
            .env("WALISSH_TEST_METRICS", "metrics-token-for-the-test")
            .env_remove("WALISSH_TEST_UNSET_PW")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(usec) = self.watchdog_usec {
            cmd.env("WATCHDOG_USEC", usec.to_string());
        }
        if let Some(soft) = self.nofile_soft {
            use std::os::unix::process::CommandExt;
            unsafe {
                cmd.pre_exec(move || {
                    let mut l = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
                    l.rlim_cur = soft.min(l.rlim_max);
                    libc::setrlimit(libc::RLIMIT_NOFILE, &l);
                    Ok(())
                });
            }
        }
        if self.on_a_terminal {
            use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
            use std::os::unix::process::CommandExt;
            let (mut master, mut slave) = (0, 0);
            let opened = unsafe {
                libc::openpty(
                    &mut master,
                    &mut slave,
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    std::ptr::null(),
                )
            };
            assert_eq!(opened, 0, "openpty");
            let (master, slave) =
                unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
            let fd = slave.as_raw_fd();
            unsafe {
                libc::fcntl(master.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                cmd.pre_exec(move || {
                    if libc::setsid() < 0 || libc::ioctl(fd, libc::TIOCSCTTY, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let child = cmd.spawn().unwrap();
            drop(slave);
            self.terminal = Some(master);
            return self.started(child);
        }
        let child = cmd.spawn().unwrap();
        self.started(child)
    }

    /// Waits for a freshly spawned walissh to listen.
    fn started(&mut self, mut child: Child) {
        self.log = Capture::default();
        self.log.spawn_reader(child.stderr.take().unwrap());
        let end = self.log.wait_for("listening addr=127.0.0.1:");
        let text = self.log.text();
        let port: String = text[end..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        self.port = port.parse().unwrap();
        self.child = Some(child);
    }

    /// Sends SIGTERM and waits for walissh to exit; returns its status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().unwrap()
    }

    /// Kills walissh with SIGKILL (a crash: nothing of its shutdown
    /// runs) and reaps it.
    pub fn kill(&mut self) {
        let mut child = self.child.take().unwrap();
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
    }

    /// Starts walissh again on the same config and state, after `kill` or
    /// `terminate`; returns once it listens (on a new port).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "walissh is still running");
        self.spawn();
    }

    /// walissh's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("walissh is not running").id()
    }

    /// Sends SIGHUP (re-read the config) and waits for walissh to log
    /// how it went: returns the log line saying `config reloaded` or
    /// `reload failed`.
    pub fn reload(&self) -> String {
        let from = self.log.end();
        let rc = unsafe { libc::kill(self.pid() as i32, libc::SIGHUP) };
        assert_eq!(rc, 0, "kill -HUP: {}", std::io::Error::last_os_error());
        self.log
            .wait_line_from(&["config reloaded", "reload failed"], from)
    }

    /// The next systemd notification walissh sent.
    pub fn next_notification(&self) -> String {
        let mut buf = [0u8; 512];
        let n = retrying(|| self.notify.recv(&mut buf)).expect("no notification from walissh");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// Common `ssh` options: no user config, no host key prompts.
    pub fn ssh_base(&self) -> Command {
        ssh_to(self.port)
    }

    /// `ssh` logging in with a password (given through SSH_ASKPASS).
    pub fn ssh_pw(&self, login: &str, password: &str) -> Command {
        let askpass = self.dir.path().join(format!("askpass-{}", free_port()));
        std::fs::write(
            &askpass,
            format!("#!/bin/sh\nprintf '%s\\n' '{password}'\n"),
        )
        .unwrap();
        std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o700)).unwrap();
        let mut c = self.ssh_base();
        c.args([
            "-o",
            "PreferredAuthentications=password",
            "-o",
            "PubkeyAuthentication=no",
            "-o",
            "NumberOfPasswordPrompts=1",
        ])
        .env("SSH_ASKPASS", &askpass)
        .env("SSH_ASKPASS_REQUIRE", "force")
        .env("DISPLAY", ":0");
        c.arg(format!("{login}@127.0.0.1"));
        c
    }

    /// `ssh` straight to the target sshd, with bob's key, as walissh logs
    /// in there: the session walissh's are compared with.
    pub fn ssh_direct(&self) -> Command {
        let mut c = ssh_to(self.sshd.port);
        c.args(["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i"])
            .arg(&self.bob_key)
            .arg(format!("{}@127.0.0.1", me()));
        c
    }

    /// `ssh` logging in as bob with his key.
    pub fn ssh_bob(&self, login: &str) -> Command {
        self.ssh_bob_at(self.port, login)
    }

    /// `ssh` logging in as bob with his key, through `port` (a load
    /// balancer in front of this bastion and others).
    pub fn ssh_bob_at(&self, port: u16, login: &str) -> Command {
        let mut c = ssh_to(port);
        c.args(["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i"])
            .arg(&self.bob_key)
            .arg(format!("{login}@127.0.0.1"));
        c
    }

    /// The audit trail, as `walissh audit --json` prints it.
    /// The web console's base URL (`[web] listen` in the config), once
    /// it listens.
    pub fn web_url(&self) -> String {
        let at = self.log.wait_for("web console listening");
        let line = self.log.since(at);
        let addr = line
            .split("addr=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .expect("the console's address in the log")
            .to_string();
        format!("http://{addr}")
    }

    pub fn audit(&self) -> Vec<Value> {
        json_lines(&self.cli(&["audit", "--json"]))
    }

    pub fn sessions(&self) -> Vec<Value> {
        json_lines(&self.cli(&["sessions", "--json"]))
    }

    pub fn cli(&self, args: &[&str]) -> Output {
        let out = self.cli_any(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// A `walissh` command on this config, whatever its exit status.
    pub fn cli_any(&self, args: &[&str]) -> Output {
        let mut c = Command::new(walissh_bin());
        c.args(&args[..1])
            .arg("--config")
            .arg(&self.config)
            .args(&args[1..])
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        c.output().unwrap()
    }

    /// Polls the audit trail until `found` picks something out of it.
    fn wait_audit<T>(&self, what: &str, found: impl Fn(Vec<Value>) -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(t) = found(self.audit()) {
                return t;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{what} never came; audit:\n{:#?}",
                self.audit()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until an audit event matching `pred` is written; returns it.
    pub fn wait_event(&self, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_audit("the awaited event", |all| all.into_iter().find(|e| pred(e)))
    }

    pub fn wait_kind(&self, kind: &str) -> Value {
        self.wait_event(|e| e["kind"] == kind)
    }

    /// Waits until `n` events of `kind` are written; returns them all.
    pub fn wait_count(&self, kind: &str, n: usize) -> Vec<Value> {
        self.wait_audit(&format!("{n} {kind} events"), |all| {
            let found: Vec<Value> = all.into_iter().filter(|e| e["kind"] == kind).collect();
            (found.len() >= n).then_some(found)
        })
    }
}

impl Drop for Bastion {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the target's processes:\n{}", self.sshd.tree());
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // A test that failed shows what walissh logged, for a failure seen
        // once in CI.
        if std::thread::panicking() {
            eprintln!("walissh's log:\n{}", self.log.text());
        }
    }
}

/// `ssh` to a loopback port, with no user config and no host key prompts.
fn ssh_to(port: u16) -> Command {
    let mut c = Command::new("ssh");
    c.args(["-F", "/dev/null", "-p"])
        .arg(port.to_string())
        .args([
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "ConnectTimeout=20",
        ]);
    c
}

/// Runs a 1 GB download (`head -c`) through `c` and returns once its first
/// MiB has arrived: a transfer under way. `c`'s stderr is left as set.
pub fn transfer_under_way(mut c: Command) -> (Child, std::process::ChildStdout) {
    c.arg("head -c 1000000000 /dev/zero").stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 1 << 20];
    out.read_exact(&mut buf).unwrap();
    (child, out)
}

/// Whether a process whose command line contains `needle` is running.
pub fn running(needle: &str) -> bool {
    let out = Command::new("pgrep").args(["-f", needle]).output().unwrap();
    out.status.success()
}

pub fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// `c` with one more argument (the remote command, usually).
pub fn with(mut c: Command, arg: impl AsRef<std::ffi::OsStr>) -> Command {
    c.arg(arg);
    c
}

/// Runs `c` with the remote command `cmd` and no input.
pub fn exec(c: Command, cmd: impl AsRef<std::ffi::OsStr>) -> Output {
    run(with(c, cmd), b"")
}

/// Starts `c` in the background with its stdout and stderr collected.
pub fn spawn_captured(mut c: Command) -> (Child, Capture, Capture) {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let (out, err) = (Capture::default(), Capture::default());
    out.spawn_reader(child.stdout.take().unwrap());
    err.spawn_reader(child.stderr.take().unwrap());
    (child, out, err)
}

/// Runs a command to completion, with stdin from `input`.
pub fn run(mut c: Command, input: &[u8]) -> Output {
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// Runs `c` (no input) and checks that it fails with `code` and says
/// `needle` on stderr.
pub fn refused(c: Command, code: i32, needle: &str) -> Output {
    let out = run(c, b"");
    assert_eq!(out.status.code(), Some(code), "stderr: {}", stderr(&out));
    assert!(
        stderr(&out).contains(needle),
        "expected {needle:?} in: {}",
        stderr(&out)
    );
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A program on a real PTY, as a person at a terminal runs it.
pub struct Terminal {
    pty: Arc<pty_process::blocking::Pty>,
    child: Option<Child>,
    pub screen: Capture,
}

impl Terminal {
    pub fn spawn(c: &Command, rows: u16, cols: u16) -> Terminal {
        let (pty, pts) = pty_process::blocking::open().unwrap();
        pty.resize(pty_process::Size::new(rows, cols)).unwrap();
        let mut cmd = pty_process::blocking::Command::new(c.get_program()).args(c.get_args());
        for (k, v) in c.get_envs() {
            if let Some(v) = v {
                cmd = cmd.env(k, v);
            }
        }
        cmd = cmd.env("TERM", "xterm-256color");
        let child = cmd.spawn(pts).unwrap();
        let pty = Arc::new(pty);
        let screen = Capture::default();
        let reader = pty.clone();
        screen.spawn_reader(ReadPty(reader));
        Terminal {
            pty,
            child: Some(child),
            screen,
        }
    }

    pub fn send(&self, s: &str) {
        (&*self.pty).write_all(s.as_bytes()).unwrap();
    }

    pub fn resize(&self, rows: u16, cols: u16) {
        self.pty.resize(pty_process::Size::new(rows, cols)).unwrap();
    }

    pub fn expect(&self, needle: &str) -> usize {
        self.screen.wait_for(needle)
    }

    /// Waits for `needle` at or after byte `from`, escape sequences
    /// ignored; returns the offset just past it.
    pub fn expect_from(&self, needle: &str, from: usize) -> usize {
        self.screen.wait_plain_from(needle, from)
    }

    /// Waits for the program to exit; returns its exit code.
    pub fn wait(&mut self) -> Option<i32> {
        let mut child = self.child.take().expect("already waited");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait().map(|s| s.code()));
        });
        match rx.recv_timeout(DEADLINE) {
            Ok(code) => code.unwrap(),
            Err(_) => panic!("program did not exit; screen:\n{}", self.screen.text()),
        }
    }
}

struct ReadPty(Arc<pty_process::blocking::Pty>);

impl Read for ReadPty {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        (&*self.0).read(buf)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// check-config on `config` (written to a file): exit code and stderr,
/// the file's path replaced by FILE.
pub fn check_config(config: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("walissh.toml");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(walissh_bin())
        .args(["check-config", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let err = stderr(&out).replace(&path.display().to_string(), "FILE");
    (out.status.code(), err)
}

/// A scratch directory that what the agent runs unasked can see: its
/// sandbox gives commands an empty `/tmp` of their own, so files they are
/// to read are made elsewhere.
pub fn visible_dir() -> tempfile::TempDir {
    let base = Path::new("/var/lib/walissh-tests");
    std::fs::create_dir_all(base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

/// Polls `done` until it holds (for events no pipe reports to a test: a
/// process's exit, a line flushed to a file); fails with `what` after a
/// generous bound.
/// After a storage fault found at log offset `broken`: walissh says it
/// writes again, `health` (its /healthz) says ok by itself, and alice
/// logs in and runs a command.
pub fn caught_up(b: &Bastion, broken: usize, health: &str) {
    b.log
        .wait_for_from("the audit database works again", broken);
    wait_until(|| http_status(health) == "200", "/healthz to say ok again");
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo AFTER-$((4+4))");
    assert_eq!(stdout(&out), "AFTER-8\n", "{}", stderr(&out));
}

/// The HTTP status curl gets for `url`, as text (`000`: no answer).
pub fn http_status(url: &str) -> String {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", url])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn wait_until(done: impl Fn() -> bool, what: &str) {
    let end = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A throwaway PostgreSQL cluster (Debian's server, run as its
/// `postgres` account) on `port`, trusting local logins; stopped when
/// dropped.
pub struct Postgres {
    pub port: u16,
    dir: std::path::PathBuf,
    pg_ctl: std::path::PathBuf,
}

impl Postgres {
    pub fn start(port: u16) -> Option<Postgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin"))
            .find(|b| b.join("initdb").exists())?;
        let dir = std::env::temp_dir().join(format!("walissh-pg-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let chown = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&dir)
            .status();
        assert!(chown.unwrap().success());
        let data = dir.join("data");
        as_postgres(
            &bin.join("initdb"),
            &[
                "-D",
                data.to_str().unwrap(),
                "--auth=trust",
                "-U",
                "postgres",
            ],
        );
        let pg = Postgres {
            port,
            dir,
            pg_ctl: bin.join("pg_ctl"),
        };
        pg.resume();
        Some(pg)
    }

    /// Turns TLS on, with a certificate for `localhost` (its only name)
    /// from a CA of its own, and takes no connection without it
    /// (`hostnossl … reject`); restarts the server. Returns the CA's
    /// certificate (PEM).
    pub fn with_tls(&self) -> PathBuf {
        let ca = make_ca(&self.dir, "ca");
        let (cert, key) = (self.dir.join("server.crt"), self.dir.join("server.key"));
        sign_cert(
            &self.dir,
            "ca",
            ("localhost", "DNS:localhost"),
            (&cert, &key),
        );
        for f in [&cert, &key] {
            let chown = Command::new("chown")
                .arg("postgres:postgres")
                .arg(f)
                .status();
            assert!(chown.unwrap().success());
        }
        let data = self.dir.join("data");
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).unwrap();
        text.push_str(&format!(
            "\nssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
            cert.display(),
            key.display()
        ));
        std::fs::write(&conf, text).unwrap();
        let hba = data.join("pg_hba.conf");
        let text = std::fs::read_to_string(&hba).unwrap();
        std::fs::write(&hba, format!("hostnossl all all 0.0.0.0/0 reject\n{text}")).unwrap();
        self.stop();
        self.resume();
        ca
    }

    /// Stops the server (fast: open connections are cut), as an outage.
    pub fn stop(&self) {
        let data = self.dir.join("data");
        as_postgres(
            &self.pg_ctl,
            &["-D", data.to_str().unwrap(), "-m", "fast", "-w", "stop"],
        );
    }

    /// Starts the server (again) on its port; returns once it accepts.
    pub fn resume(&self) {
        let data = self.dir.join("data");
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.display()
        );
        let log = format!("{}/log", self.dir.display());
        as_postgres(
            &self.pg_ctl,
            &[
                "-D",
                data.to_str().unwrap(),
                "-o",
                &opts,
                "-w",
                "-l",
                &log,
                "start",
            ],
        );
    }
}

/// Runs `openssl` with `args` (each made text: paths here are temporary
/// directories), which must succeed.
fn openssl(args: &[&dyn std::fmt::Display]) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let out = Command::new("openssl").args(&args).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `openssl req` with a new P-256 key (unencrypted, to `key`) for
/// `subject`, writing `out`: a self-signed certificate with `-x509`
/// (`x509`), else a certificate request.
fn new_key(x509: bool, (key, out): (&Path, &Path), subject: &str) {
    let mut args: Vec<&dyn std::fmt::Display> = vec![&"req"];
    if x509 {
        args.extend([&"-x509" as &dyn std::fmt::Display, &"-days", &"2"]);
    }
    let (key, out) = (key.display(), out.display());
    args.extend([
        &"-newkey" as &dyn std::fmt::Display,
        &"ec",
        &"-pkeyopt",
        &"ec_paramgen_curve:P-256",
        &"-nodes",
        &"-keyout",
        &key,
        &"-out",
        &out,
        &"-subj",
        &subject,
    ]);
    openssl(&args);
}

/// A CA made with `openssl` in `dir` (`NAME.key`, `NAME.pem`): its
/// certificate's path.
pub fn make_ca(dir: &Path, name: &str) -> PathBuf {
    let (key, pem) = (
        dir.join(format!("{name}.key")),
        dir.join(format!("{name}.pem")),
    );
    new_key(true, (&key, &pem), &format!("/CN=walissh test {name}"));
    pem
}

/// A certificate for `(cn, san)` signed by the CA `ca` made in `dir`,
/// written with its key to `(cert, key)` (the key 0600).
pub fn sign_cert(dir: &Path, ca: &str, (cn, san): (&str, &str), (cert, key): (&Path, &Path)) {
    let (csr, ext) = (dir.join("req.csr"), dir.join("san.ext"));
    new_key(false, (key, &csr), &format!("/CN={cn}"));
    std::fs::write(&ext, format!("subjectAltName={san}\n")).unwrap();
    let (ca_pem, ca_key) = (dir.join(format!("{ca}.pem")), dir.join(format!("{ca}.key")));
    openssl(&[
        &"x509",
        &"-req",
        &"-days",
        &"2",
        &"-in",
        &csr.display(),
        &"-CA",
        &ca_pem.display(),
        &"-CAkey",
        &ca_key.display(),
        &"-CAcreateserial",
        &"-extfile",
        &ext.display(),
        &"-out",
        &cert.display(),
    ]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Runs `program` as the `postgres` account, which must succeed.
fn as_postgres(program: &std::path::Path, args: &[&str]) {
    let out = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(program)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(&self.pg_ctl)
            .args(["-D", data.to_str().unwrap(), "-m", "fast", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A real S3-compatible server: Garage (from crates.io, `tools/test-peers`
/// installs it), one node on loopback in a temp dir, with a bucket
/// `casts` and a key that may read and write it; stopped when dropped.
pub struct Garage {
    pub port: u16,
    pub key_id: String,
    pub secret: String,
    config: PathBuf,
    child: Option<Child>,
    /// The clock it (and the requests to it) run on: `faked_clock`'s.
    clock: Vec<(String, String)>,
    _dir: tempfile::TempDir,
}

/// HAProxy (Debian's) in TCP mode in front of bastions: round robin, a
/// refused connection sent on to the next (`option redispatch`), as a
/// deployment would run it; killed when dropped.
pub struct Haproxy {
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Haproxy {
    /// In front of the bastions on `ports`; None where HAProxy is not
    /// installed. Returns once it answers.
    pub fn start(ports: &[u16]) -> Option<Haproxy> {
        let bin = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
            .into_iter()
            .find(|p| Path::new(p).exists())?;
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut cfg = format!(
            "global\n    maxconn 400\ndefaults\n    mode tcp\n    timeout connect 2s\n    timeout client 1h\n    timeout server 1h\n    retries 3\n    option redispatch\nfrontend ssh\n    bind 127.0.0.1:{port}\n    default_backend nodes\nbackend nodes\n    balance roundrobin\n"
        );
        for (i, p) in ports.iter().enumerate() {
            cfg.push_str(&format!("    server n{i} 127.0.0.1:{p}\n"));
        }
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, cfg).unwrap();
        let child = Command::new(bin)
            .arg("-f")
            .arg(&path)
            .arg("-db")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_until(
            || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
            "haproxy to listen",
        );
        Some(Haproxy {
            port,
            child,
            _dir: dir,
        })
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What runs a program on a clock `offset` away from the real one
/// (libfaketime, e.g. "+3d"), its monotonic clock left alone; None where
/// libfaketime is not installed.
pub fn faked_clock(offset: &str) -> Option<Vec<(String, String)>> {
    let lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
    Path::new(lib).exists().then(|| {
        [
            ("LD_PRELOAD", lib),
            ("FAKETIME", offset),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .to_vec()
    })
}

impl Garage {
    /// Restarts the server on `clock` (`faked_clock`'s), and signs the
    /// tests' own requests on it too (S3 refuses a skewed signature).
    pub fn on_clock(&mut self, clock: Vec<(String, String)>) {
        self.stop();
        self.clock = clock;
        self.resume();
    }

    pub fn start() -> Option<Garage> {
        garage_bin()?;
        let dir = tempfile::tempdir().unwrap();
        let (port, rpc) = (free_port(), free_port());
        let config = dir.path().join("garage.toml");
        let secret: String = (0..32)
            .map(|i| format!("{:02x}", (i * 37 + 11) % 256))
            .collect();
        std::fs::write(
            &config,
            format!(
                "metadata_dir = \"{d}/meta\"\ndata_dir = \"{d}/data\"\ndb_engine = \"sqlite\"\n\
                 replication_factor = 1\nrpc_bind_addr = \"127.0.0.1:{rpc}\"\n\
                 rpc_public_addr = \"127.0.0.1:{rpc}\"\nrpc_secret = \"{secret}\"\n\
                 [s3_api]\ns3_region = \"garage\"\napi_bind_addr = \"127.0.0.1:{port}\"\n\
                 root_domain = \".s3.garage.localhost\"\n",
                d = dir.path().display()
            ),
        )
        .unwrap();
        let mut g = Garage {
            port,
            key_id: String::new(),
            secret: String::new(),
            config,
            child: None,
            clock: Vec::new(),
            _dir: dir,
        };
        g.resume();
        let id = g.cli(&["node", "id", "-q"]);
        let id = id.trim().split('@').next().unwrap().to_string();
        g.cli(&["layout", "assign", "-z", "dc1", "-c", "1G", &id]);
        g.cli(&["layout", "apply", "--version", "1"]);
        g.cli(&["bucket", "create", "casts"]);
        let key = g.cli(&["key", "create", "walissh"]);
        let field = |name: &str| {
            key.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|| panic!("no {name} in {key}"))
        };
        (g.key_id, g.secret) = (field("Key ID:"), field("Secret key:"));
        g.cli(&[
            "bucket", "allow", "--read", "--write", "--owner", "casts", "--key", "walissh",
        ]);
        Some(g)
    }

    /// The server, started (again); returns once it answers.
    pub fn resume(&mut self) {
        let child = Command::new(garage_bin().unwrap())
            .args(["-c"])
            .arg(&self.config)
            .arg("server")
            .envs(self.clock.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        wait_until(
            || {
                let out = self.command(&["status"]).output().unwrap();
                out.status.success()
            },
            "garage to answer",
        );
    }

    /// Kills the server, as an outage.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(garage_bin().unwrap());
        c.arg("-c").arg(&self.config).args(args);
        c.envs(self.clock.iter().map(|(k, v)| (k, v)));
        c
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        assert!(out.status.success(), "garage {args:?}: {}", stderr(&out));
        stdout(&out)
    }

    /// What walissh needs to reach the bucket.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            (
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", self.port),
            ),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "garage".into()),
            ("AWS_ACCESS_KEY_ID", self.key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret.clone()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec()
    }

    /// The object at `key` in `casts`, if there is one (curl's SigV4).
    pub fn object(&self, key: &str) -> Option<Vec<u8>> {
        let out = self.curl(key).output().unwrap();
        out.status.success().then_some(out.stdout)
    }

    /// The keys in `casts` under `prefix`, in order (S3's ListObjectsV2,
    /// one page: tests list a handful).
    pub fn list(&self, prefix: &str) -> Vec<String> {
        let encoded: String = prefix
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let mut c = self.curl_at(&format!("casts?list-type=2&prefix={encoded}"));
        let out = c.output().unwrap();
        assert!(out.status.success(), "{:?} {}", out.status, stdout(&out));
        let xml = stdout(&out);
        let mut keys: Vec<String> = xml
            .split("<Key>")
            .skip(1)
            .filter_map(|k| k.split_once("</Key>").map(|(k, _)| k.to_string()))
            .collect();
        keys.sort();
        keys
    }

    /// Puts `body` at `key` in `casts`, around walissh.
    pub fn put(&self, key: &str, body: &Path) {
        let out = self.curl(key).arg("-T").arg(body).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }

    fn curl(&self, key: &str) -> Command {
        self.curl_at(&format!("casts/{key}"))
    }

    fn curl_at(&self, path: &str) -> Command {
        let mut c = Command::new("curl");
        c.envs(self.clock.iter().map(|(k, v)| (k, v)));
        c.args([
            "-sS",
            "--fail-with-body",
            "--aws-sigv4",
            "aws:amz:garage:s3",
            "--user",
        ])
        .arg(format!("{}:{}", self.key_id, self.secret))
        .args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"])
        .arg(format!("http://127.0.0.1:{}/{path}", self.port));
        c
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Garage's binary: on PATH, or where `cargo install` puts it.
fn garage_bin() -> Option<PathBuf> {
    let home = std::env::var("HOME").unwrap_or_default();
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(PathBuf::from)
        .chain([PathBuf::from(home).join(".cargo/bin")])
        .map(|d| d.join("garage"))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_ignored_when_waiting_for_plain_text() {
        let (plain, ends) =
            strip_escapes(b"\x1b[36m\xe2\x94\x82 \x1b[0mThe di\x1b[1msk\x1b]0;title\x07 ok\x1b(B!");
        assert_eq!(String::from_utf8(plain).unwrap(), "\u{2502} The disk ok!");
        assert_eq!(*ends.last().unwrap(), 42);
        let c = Capture::default();
        c.inner
            .0
            .lock()
            .unwrap()
            .extend_from_slice(b"ab\x1b[31mc\x1b[0md tail");
        assert_eq!(c.wait_plain_from("bcd", 0), 13);
        assert_eq!(c.since(13), " tail");
    }
}
