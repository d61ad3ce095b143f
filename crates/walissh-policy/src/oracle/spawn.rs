//! Running a line in the jail: the plan made before the fork, the
//! child's steps (namespaces, seccomp, the terminal), and sweeping up
//! what it left.

use super::*;

/// Everything the child processes need, made before the fork.
pub(super) struct Plan {
    pub(super) root: CString,
    pub(super) cwd: CString,
    pub(super) exe: CString,
    pub(super) _argv: Vec<CString>,
    pub(super) argv: Vec<*const libc::c_char>,
    pub(super) _envp: Vec<CString>,
    pub(super) envp: Vec<*const libc::c_char>,
    pub(super) account: Account,
    pub(super) proc_setgroups: CString,
    pub(super) proc_uid_map: CString,
    pub(super) proc_gid_map: CString,
    pub(super) outer_uid_map: Vec<u8>,
    pub(super) outer_gid_map: Vec<u8>,
    pub(super) inner_map: Vec<u8>,
    pub(super) subreaper: bool,
    /// Where the run's own procfs goes (`/.oracle/proc` in the jail), when
    /// it has a mount namespace of its own.
    pub(super) proc_mount: Option<CString>,
}

pub(super) struct Fds {
    pub(super) out: libc::c_int,
    pub(super) null: libc::c_int,
    pub(super) report: libc::c_int,
    /// `null` and `out` are a terminal: the line's controlling one.
    pub(super) tty: bool,
}

pub(super) fn cstring(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| "the line holds a NUL byte".to_string())
}

impl Plan {
    pub(super) fn new(oracle: &Oracle, shell: Shell, line: &str) -> Result<Plan, String> {
        Plan::with(oracle, shell, line, false)
    }

    /// `typed`: an interactive bash on a terminal, with walissh's shell
    /// integration, which gets the line as the agent types it.
    pub(super) fn with(
        oracle: &Oracle,
        shell: Shell,
        line: &str,
        typed: bool,
    ) -> Result<Plan, String> {
        let argv: Vec<CString> = match shell {
            Shell::Bash if typed => vec![
                cstring("bash")?,
                cstring("--noprofile")?,
                cstring("--rcfile")?,
                cstring("/.oracle/typed.rc")?,
                cstring("-i")?,
            ],
            // `--`: a line that starts with `-` is a line, not options.
            Shell::Bash => vec![
                cstring("bash")?,
                cstring("-c")?,
                cstring("--")?,
                cstring(line)?,
            ],
            Shell::Dash => vec![
                cstring("sh")?,
                cstring("-c")?,
                cstring(&format!("{}{line}", dash_rc()))?,
            ],
            Shell::Zsh => vec![
                cstring("zsh")?,
                cstring("-f")?,
                cstring("-c")?,
                cstring("--")?,
                cstring(line)?,
            ],
        };
        let mut env: Vec<CString> = ENV.iter().map(|e| cstring(e)).collect::<Result<_, _>>()?;
        if typed {
            env.push(cstring("TERM=xterm")?);
            env.push(cstring("HISTFILE=")?);
        } else if shell == Shell::Bash {
            env.push(cstring("BASH_ENV=/.oracle/bash.rc")?);
        }
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|c| c.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        let (outer_uid_map, outer_gid_map) = match oracle.account {
            Account::UserNs {
                outer_uid,
                outer_gid,
            } => (
                format!("0 {outer_uid} 1\n").into_bytes(),
                format!("0 {outer_gid} 1\n").into_bytes(),
            ),
            Account::Root { .. } => (Vec::new(), Vec::new()),
        };
        Ok(Plan {
            root: CString::new(oracle.root.as_os_str().as_encoded_bytes())
                .map_err(|e| e.to_string())?,
            cwd: cstring(CWD)?,
            exe: cstring(&format!("/.oracle/real/{}", shell.name()))?,
            argv: ptrs(&argv),
            _argv: argv,
            envp: ptrs(&env),
            _envp: env,
            account: oracle.account,
            proc_setgroups: cstring("/proc/self/setgroups")?,
            proc_uid_map: cstring("/proc/self/uid_map")?,
            proc_gid_map: cstring("/proc/self/gid_map")?,
            outer_uid_map,
            outer_gid_map,
            inner_map: format!("{NS_UID} 0 1\n").into_bytes(),
            subreaper: oracle.clone_flags & libc::CLONE_NEWPID == 0,
            proc_mount: (oracle.clone_flags & libc::CLONE_NEWNS != 0)
                .then(|| {
                    CString::new(
                        oracle
                            .root
                            .join(".oracle/proc")
                            .as_os_str()
                            .as_encoded_bytes(),
                    )
                })
                .transpose()
                .map_err(|e| e.to_string())?,
        })
    }
}

/// Where a typed run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Waiting for the first prompt's end (a B mark).
    Prompt,
    /// The line was typed; waiting for the prompt after it.
    Running,
    /// `exit` was typed at that prompt.
    Done,
}

/// The terminal of a typed run: its master side, driven without blocking
/// from the run's wait loop.
pub(super) struct Terminal {
    pub(super) master: OwnedFd,
    pub(super) slave: Option<OwnedFd>,
    pub(super) keys: Vec<u8>,
    /// What the integration draws where a prompt ends.
    pub(super) prompt_end: Vec<u8>,
    pub(super) stage: Stage,
    /// Everything the terminal showed, and where the next prompt is looked
    /// for.
    pub(super) seen: Vec<u8>,
    pub(super) from: usize,
}

impl Terminal {
    pub(super) fn open(line: &str, integration: &Integration) -> Result<Terminal, String> {
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: 24,
            ws_col: 200,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: plain out-parameters; the descriptors are owned below.
        let r = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        if r != 0 {
            return Err(format!("openpty: {}", io::Error::last_os_error()));
        }
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        unsafe {
            libc::fcntl(master.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
            libc::fcntl(master.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
        }
        let keys = [
            b"\x05\x15\x1b[200~".as_slice(),
            line.as_bytes(),
            b"\x1b[201~",
            &integration.accept,
        ]
        .concat();
        Ok(Terminal {
            master,
            slave: Some(slave),
            keys,
            prompt_end: integration.prompt_end.clone(),
            stage: Stage::Prompt,
            seen: Vec::new(),
            from: 0,
        })
    }

    pub(super) fn close_slave(&mut self) {
        self.slave = None;
    }

    /// Reads what the terminal shows; types at the prompts.
    pub(super) fn drive(&mut self) {
        let mut buf = [0u8; 4096];
        loop {
            let n =
                unsafe { libc::read(self.master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            self.seen.extend_from_slice(&buf[..n as usize]);
        }
        let prompt = self.prompt_end.as_slice();
        let Some(at) = memchr::memmem::find(&self.seen[self.from..], prompt) else {
            return;
        };
        self.from += at + prompt.len();
        let (keys, next) = match self.stage {
            Stage::Prompt => (std::mem::take(&mut self.keys), Stage::Running),
            Stage::Running => (b"\x05\x15exit\r".to_vec(), Stage::Done),
            Stage::Done => return,
        };
        let fd = self.master.as_raw_fd();
        let mut rest = keys.as_slice();
        while !rest.is_empty() {
            let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
            if n <= 0 {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            rest = &rest[n as usize..];
        }
        self.stage = next;
    }
}

/// What failed in the child, by index (reported through a pipe).
pub(super) const STEPS: &[&str] = &[
    "fork",
    "outer user namespace",
    "inner user namespace",
    "descriptors",
    "chroot",
    "chdir",
    "limits",
    "account",
    "seccomp",
    "exec",
];

/// `fork`, or `clone` into new namespaces, without glibc's fork handlers
/// (which may take locks another thread held).
pub(super) unsafe fn raw_fork(flags: libc::c_int) -> libc::pid_t {
    unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        ) as libc::pid_t
    }
}

pub(super) unsafe fn fail(fds: &Fds, step: usize) -> ! {
    unsafe {
        let errno = *libc::__errno_location();
        let mut msg = [0u8; 8];
        msg[0..4].copy_from_slice(&(step as i32).to_ne_bytes());
        msg[4..8].copy_from_slice(&errno.to_ne_bytes());
        libc::write(fds.report, msg.as_ptr().cast(), 8);
        libc::_exit(127)
    }
}

pub(super) unsafe fn write_file(path: &CString, data: &[u8]) -> bool {
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize;
        libc::close(fd);
        ok
    }
}

/// Drops every group and becomes `uid`:`uid`, by raw system calls: glibc's
/// wrappers would wait for the other threads of the parent, which the
/// child does not have.
pub(super) unsafe fn switch_to(uid: u32) -> bool {
    unsafe {
        libc::syscall(libc::SYS_setgroups, 0usize, 0usize) == 0
            && libc::syscall(libc::SYS_setresgid, uid, uid, uid) == 0
            && libc::syscall(libc::SYS_setresuid, uid, uid, uid) == 0
            && libc::syscall(libc::SYS_getuid) == uid as libc::c_long
            && libc::syscall(libc::SYS_geteuid) == uid as libc::c_long
    }
}

/// The run's first process: the init of its PID namespace (or a child
/// subreaper), which starts the jailed shell and reaps every process of
/// the run until none is left.
pub(super) unsafe fn init_main(plan: &Plan, fds: &Fds) -> ! {
    unsafe {
        if let Account::UserNs { .. } = plan.account
            && (!write_file(&plan.proc_setgroups, b"deny")
                || !write_file(&plan.proc_uid_map, &plan.outer_uid_map)
                || !write_file(&plan.proc_gid_map, &plan.outer_gid_map))
        {
            fail(fds, 1);
        }
        if plan.subreaper {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
        if let Some(target) = &plan.proc_mount {
            // A procfs of the run's PID namespace, for /dev/fd and
            // /dev/stdin; none of it propagates back to the host. Without
            // it those names lead nowhere, as they do in the fallback.
            let none = std::ptr::null::<libc::c_char>();
            if libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
            {
                libc::mount(
                    c"proc".as_ptr(),
                    target.as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                );
            }
        }
        let pid = raw_fork(0);
        if pid < 0 {
            fail(fds, 0);
        }
        if pid == 0 {
            jail_main(plan, fds);
        }
        loop {
            let mut status = 0;
            if libc::waitpid(-1, &mut status, 0) < 0 && *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        libc::_exit(0)
    }
}

pub(super) unsafe fn jail_main(plan: &Plan, fds: &Fds) -> ! {
    unsafe {
        if let Account::UserNs { .. } = plan.account
            && (libc::unshare(libc::CLONE_NEWUSER) != 0
                || !write_file(&plan.proc_setgroups, b"deny")
                || !write_file(&plan.proc_uid_map, &plan.inner_map)
                || !write_file(&plan.proc_gid_map, &plan.inner_map))
        {
            fail(fds, 2);
        }
        let mut fds = Fds { ..*fds };
        if libc::dup2(fds.null, 0) < 0 || libc::dup2(fds.out, 1) < 0 || libc::dup2(fds.out, 2) < 0 {
            fail(&fds, 3);
        }
        if fds.tty && (libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0) {
            fail(&fds, 3);
        }
        if fds.report != 3 {
            if libc::dup3(fds.report, 3, libc::O_CLOEXEC) < 0 {
                fail(&fds, 3);
            }
            fds.report = 3;
        }
        if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) != 0 {
            for fd in 4..4096 {
                libc::close(fd);
            }
        }
        if libc::chroot(plan.root.as_ptr()) != 0 {
            fail(&fds, 4);
        }
        if libc::chdir(plan.cwd.as_ptr()) != 0 {
            fail(&fds, 5);
        }
        let limits: [(libc::__rlimit_resource_t, u64); 6] = [
            (libc::RLIMIT_NPROC, 256),
            (libc::RLIMIT_AS, 512 << 20),
            (libc::RLIMIT_FSIZE, 16 << 20),
            (libc::RLIMIT_CPU, 10),
            (libc::RLIMIT_NOFILE, 64),
            (libc::RLIMIT_CORE, 0),
        ];
        for (resource, value) in limits {
            let l = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            if libc::setrlimit(resource, &l) != 0 {
                fail(&fds, 6);
            }
        }
        if let Account::Root { uid } = plan.account
            && !switch_to(uid)
        {
            fail(&fds, 7);
        }
        libc::umask(0o022);
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || !deny_sockets() {
            fail(&fds, 8);
        }
        libc::execve(plan.exe.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
        fail(&fds, 9)
    }
}

#[repr(C)]
pub(super) struct SockFilter {
    pub(super) code: u16,
    pub(super) jt: u8,
    pub(super) jf: u8,
    pub(super) k: u32,
}

#[repr(C)]
pub(super) struct SockFprog {
    pub(super) len: u16,
    pub(super) filter: *const SockFilter,
}

#[cfg(target_arch = "x86_64")]
pub(super) const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub(super) const AUDIT_ARCH: u32 = 0xC000_00B7;

/// A seccomp filter: `socket(2)` fails with `EACCES`, and so does every
/// system call of another architecture (x32, i386) on this one.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(super) unsafe fn deny_sockets() -> bool {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const ALLOW: u32 = 0x7fff_0000;
    const DENY: u32 = 0x0005_0000 | libc::EACCES as u32;
    let x32 = if cfg!(target_arch = "x86_64") {
        0x4000_0000
    } else {
        u32::MAX
    };
    let filter = [
        SockFilter {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 4,
        }, // arch
        SockFilter {
            code: JEQ_K,
            jt: 0,
            jf: 4,
            k: AUDIT_ARCH,
        },
        SockFilter {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        }, // nr
        SockFilter {
            code: JGE_K,
            jt: 2,
            jf: 0,
            k: x32,
        },
        SockFilter {
            code: JEQ_K,
            jt: 1,
            jf: 0,
            k: libc::SYS_socket as u32,
        },
        SockFilter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: ALLOW,
        },
        SockFilter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: DENY,
        },
    ];
    let prog = SockFprog {
        len: filter.len() as u16,
        filter: filter.as_ptr(),
    };
    unsafe { libc::prctl(libc::PR_SET_SECCOMP, 2, &prog as *const SockFprog, 0, 0) == 0 }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) unsafe fn deny_sockets() -> bool {
    true
}

/// Kills every process of the jail account `uid` (when no PID namespace
/// did): a helper becomes that account and signals all it may signal
/// (`kill(-1)`: stop, then kill), until no process of the account is left.
pub(super) fn sweep(uid: u32) {
    for _ in 0..1000 {
        if processes_of(Some(uid), None, false).is_empty() {
            return;
        }
        unsafe {
            let pid = raw_fork(0);
            if pid == 0 {
                if !switch_to(uid) {
                    libc::_exit(1);
                }
                // Stopped processes cannot fork: stop them all, then kill.
                for _ in 0..20 {
                    libc::kill(-1, libc::SIGSTOP);
                }
                for _ in 0..5 {
                    libc::kill(-1, libc::SIGKILL);
                }
                libc::_exit(0);
            }
            if pid > 0 {
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Processes that run as `uid` or whose root is `root` (and zombies of
/// those, with `zombies`).
pub(super) fn processes_of(uid: Option<u32>, root: Option<&Path>, zombies: bool) -> Vec<i32> {
    let mut found = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let in_root =
            root.is_some_and(|root| fs::read_link(e.path().join("root")).is_ok_and(|r| r == root));
        let status = fs::read_to_string(e.path().join("status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
        };
        let as_uid =
            uid.is_some_and(|uid| field("Uid:").and_then(|u| u.parse::<u32>().ok()) == Some(uid));
        let zombie = field("State:") == Some("Z");
        if (in_root || as_uid) && (zombies || !zombie) {
            found.push(pid);
        }
    }
    found
}
