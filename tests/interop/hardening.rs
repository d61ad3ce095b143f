//! The login and session surface under attack (issue 14), with the real
//! OpenSSH client against walissh on loopback.

use crate::harness::*;

/// A local target's commands are started in a session of their own and
/// with only stdin, stdout and stderr: a `run_as` account must not reach
/// the terminal walissh was started from (TIOCSTI would type into the
/// administrator's shell) nor any descriptor walissh holds.
#[test]
fn local_commands_get_no_terminal_and_no_descriptor_of_walissh() {
    if !is_root() {
        eprintln!("skipped: run_as needs the tests to run as root (CI does)");
        return;
    }
    let b = Bastion::start_with(Opts {
        on_a_terminal: true,
        ..Opts::default()
    });
    // walissh itself has a controlling terminal here.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", b.pid())).unwrap();
    let tty_nr: i64 = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().nth(4))
        .and_then(|f| f.parse().ok())
        .unwrap();
    assert_ne!(
        tty_nr, 0,
        "the test did not give walissh a terminal: {stat}"
    );
    // The shell's descriptors, listed by a child (a glob would list the
    // directory the shell opened to read it; a pipeline would have the
    // shell hold the pipe while `ls` runs, which a run once saw as fd 3).
    let probe = "if (exec 3</dev/tty) 2>/dev/null; then echo HAS-TTY; else echo NO-TTY; fi; \
                 ls /proc/$$/fd";
    let out = exec(b.ssh_pw("carol:jail", CAROL_PW), probe);
    let text = stdout(&out);
    assert!(text.contains("NO-TTY"), "{text}\nstderr: {}", stderr(&out));
    let fds: Vec<u32> = text.lines().filter_map(|l| l.parse().ok()).collect();
    assert!(!fds.is_empty(), "{text}");
    assert!(
        fds.iter().all(|fd| *fd <= 2 || *fd == 255),
        "descriptors beyond stdio reached the account's shell: {fds:?}"
    );
}

/// walissh's files are its own (0600, directories 0700) whatever the
/// state directory allows, an audit created looser is closed, and a state
/// directory others can enter is said at start.
#[test]
fn state_files_are_private_whatever_the_directory_allows() {
    use std::os::unix::fs::PermissionsExt;
    let b = Bastion::start_with(Opts {
        prepare: Some(Box::new(|state, _| {
            std::fs::create_dir_all(state).unwrap();
            std::fs::set_permissions(state, std::fs::Permissions::from_mode(0o755)).unwrap();
            let db = state.join("audit.db");
            std::fs::write(&db, "").unwrap();
            std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        })),
        ..Opts::default()
    });
    b.log.wait_for("can be entered by other accounts");
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo PRIVATE-$((1+1))\r");
    t.expect("PRIVATE-2");
    b.wait_event(|e| e["kind"] == "command" && e["command"] == "echo PRIVATE-$((1+1))");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&b.state).unwrap() {
        let path = entry.unwrap().path();
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&path), want, "{}", path.display());
        checked.push(path.clone());
        if path.is_dir() {
            for inner in std::fs::read_dir(&path).unwrap() {
                let inner = inner.unwrap().path();
                let want = if inner.is_dir() { 0o700 } else { 0o600 };
                assert_eq!(mode(&inner), want, "{}", inner.display());
                checked.push(inner);
            }
        }
    }
    assert!(
        checked.iter().any(|p| p.ends_with("audit.db"))
            && checked.iter().any(|p| p.ends_with("recordings")),
        "{checked:?}"
    );
}

/// One connection opens at most `[server] max_sessions_per_connection`
/// sessions at once (OpenSSH's `MaxSessions`): one more is refused and
/// audited, and a slot comes back when a session ends.
#[test]
fn one_connection_opens_at_most_max_sessions() {
    let b = Bastion::start_with(Opts {
        max_sessions: 2,
        ..Opts::default()
    });
    let master = Master::start(&b);
    let via_master = |extra: &[&str]| master.ssh(&b, extra);
    let mut sleepers: Vec<_> = (0..2)
        .map(|_| {
            with(via_master(&[]), "sleep 600")
                .stdin(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    b.wait_count("session_start", 2);
    // The master's connection refuses a third; OpenSSH's client then
    // falls back to a connection of its own, as it does with sshd's
    // MaxSessions.
    let third = exec(via_master(&[]), "echo THIRD");
    let refused = b.wait_kind("session_refused");
    assert_eq!(refused["limit"], 2, "{refused}");
    assert_eq!(refused["user"], "bob", "{refused}");
    let logins: Vec<String> = b
        .audit()
        .iter()
        .filter(|e| e["kind"] == "auth_ok")
        .map(|e| e["client_addr"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(refused["client_addr"], logins[0].as_str(), "{logins:?}");
    assert_eq!(
        logins.len(),
        2,
        "the third did not need a connection of its own"
    );
    assert_eq!(stdout(&third), "THIRD\n", "{}", stderr(&third));
    // One ends: its slot comes back.
    sleepers[0].kill().unwrap();
    sleepers[0].wait().unwrap();
    // The third's session and the first sleeper's have ended.
    b.wait_count("session_end", 2);
    let fourth = exec(via_master(&[]), "echo FOURTH");
    assert_eq!(stdout(&fourth), "FOURTH\n", "{}", stderr(&fourth));
    let audit = b.audit();
    let count = |kind: &str| audit.iter().filter(|e| e["kind"] == kind).count();
    assert_eq!(
        count("auth_ok"),
        2,
        "the fourth needed a connection of its own"
    );
    assert_eq!(count("session_refused"), 1, "{audit:#?}");
    sleepers[1].kill().unwrap();
    let _ = sleepers[1].wait();
}

/// bob's OpenSSH ControlMaster on web1: one connection that later
/// sessions ride on.
pub(crate) struct Master {
    _dir: tempfile::TempDir,
    sock: std::path::PathBuf,
    child: std::process::Child,
}

impl Master {
    pub(crate) fn start(b: &Bastion) -> Master {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("mux");
        let mut m = Master {
            sock,
            _dir: dir,
            child: std::process::Command::new("true").spawn().unwrap(),
        };
        let _ = m.child.wait();
        m.child = m
            .ssh(b, &["-M", "-N", "-o", "ControlPersist=no"])
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + DEADLINE;
        while !m
            .ssh(b, &["-O", "check"])
            .output()
            .unwrap()
            .status
            .success()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the master never came up"
            );
        }
        m
    }

    /// `ssh` through the master, with `extra` options.
    pub(crate) fn ssh(&self, b: &Bastion, extra: &[&str]) -> std::process::Command {
        let mut c = b.ssh_base();
        c.args(["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i"])
            .arg(&b.bob_key)
            .arg("-S")
            .arg(&self.sock)
            .args(extra)
            .arg("bob:web1@127.0.0.1");
        c
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A key removed from the config by a reload opens no new session on a
/// connection that logged in with it (a ControlMaster): refused, audited.
#[test]
fn a_key_removed_by_a_reload_opens_no_new_session_on_a_live_connection() {
    let b = Bastion::start();
    let master = Master::start(&b);
    let before = exec(master.ssh(&b, &[]), "echo BEFORE");
    assert_eq!(stdout(&before), "BEFORE\n", "{}", stderr(&before));
    // bob's key is replaced by another one.
    let bob_pub = std::fs::read_to_string(b.bob_key.with_extension("pub")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let other = keygen(&dir.path().join("other"));
    let text = std::fs::read_to_string(&b.config).unwrap();
    let was = format!("name = \"bob\"\nauthorized_keys = [\"{}\"]", bob_pub.trim());
    assert!(text.contains(&was), "{text}");
    let now = format!("name = \"bob\"\nauthorized_keys = [\"{other}\"]");
    std::fs::write(&b.config, text.replacen(&was, &now, 1)).unwrap();
    assert!(b.reload().contains("config reloaded"));
    let after = exec(master.ssh(&b, &[]), "echo AFTER");
    assert!(!stdout(&after).contains("AFTER"), "{}", stdout(&after));
    let refused = b.wait_kind("session_refused");
    assert_eq!(refused["reason"], "credentials_revoked", "{refused}");
    assert_eq!(refused["user"], "bob", "{refused}");
}

/// Rejected key offers flood the audit no more: one address's first 16
/// failures of a minute get a row each (with the count), later ones only
/// at powers of two, the 17th offer on waits before it is answered, and a
/// huge target part of the login name is cut before it is stored.
#[test]
fn a_flood_of_rejected_offers_costs_the_audit_a_bounded_number_of_rows() {
    let b = Bastion::start();
    let login = format!("mallory:{}", "x".repeat(5000));
    for _ in 0..20 {
        let out = exec(b.ssh_bob(&login), "true");
        assert_eq!(out.status.code(), Some(255), "{}", stderr(&out));
    }
    // Something after the flood, to know its rows are all in.
    let out = exec(b.ssh_bob("bob:web1"), "echo AFTER");
    assert_eq!(stdout(&out), "AFTER\n");
    b.wait_kind("auth_ok");
    let fails: Vec<serde_json::Value> = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "auth_fail")
        .collect();
    assert_eq!(fails.len(), 16, "{fails:#?}");
    for (i, f) in fails.iter().enumerate() {
        assert_eq!(f["count"], i as u64 + 1, "{f}");
        assert_eq!(f["reason"], "unknown_key", "{f}");
        assert!(f["target"].as_str().unwrap().len() <= 128, "{f}");
    }
}

/// An exec session's output is recorded too (`[audit] record_exec`, on by
/// default): a shell started through exec does not escape the recording.
/// Binary output is counted, not kept. Off, exec sessions are audited only.
#[test]
fn exec_sessions_are_recorded_and_binary_output_is_counted() {
    for on in [true, false] {
        let b = Bastion::start_with(Opts {
            record_exec: on,
            ..Opts::default()
        });
        let out = exec(
            b.ssh_bob("bob:web1"),
            "echo EXEC-RECORDED; printf 'a\\0b\\0c'; echo; echo AFTER-BINARY",
        );
        assert!(stdout(&out).contains("AFTER-BINARY"), "{}", stderr(&out));
        b.wait_kind("session_end");
        let sessions = b.sessions();
        let recording = sessions[0]["recording"].as_str().map(str::to_string);
        if !on {
            assert_eq!(recording, None, "{sessions:#?}");
            continue;
        }
        let path = recording.unwrap_or_else(|| panic!("no recording: {sessions:#?}"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("EXEC-RECORDED"), "{text}");
        let line = text
            .split("bytes of binary output, sha256 ")
            .nth(1)
            .unwrap_or_else(|| panic!("no binary summary: {text}"));
        let hex = &line[..line.find(']').unwrap()];
        assert_eq!(hex.len(), 64, "{text}");
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{text}");
        assert!(!text.contains("a\\u0000b"), "{text}");
    }
}

/// A terminal's output is recorded whatever its bytes: a shell whose every
/// chunk of output starts with a NUL (the reviewer's `pty.spawn` with a
/// NUL-prefixing reader) is recorded as it prints, not summarised as
/// binary, and its commands are still audited.
#[test]
fn a_nul_byte_hides_nothing_from_a_terminal_sessions_recording() {
    let b = Bastion::start();
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("python3 -c 'import pty,os; pty.spawn(\"/bin/bash\", lambda fd: b\"\\0\"+os.read(fd,4096))'\r");
    // The inner shell's first output, its prompt, comes after a NUL.
    t.expect("\0");
    t.send("echo HIDDEN-$((6*7)); echo MARK-DONE\r");
    t.expect("HIDDEN-42");
    t.expect("MARK-DONE");
    t.send("exit\r");
    // The python line ends with its inner shell: its command row says so.
    let python = b.wait_event(|e| {
        e["kind"] == "command"
            && e["command"]
                .as_str()
                .is_some_and(|c| c.starts_with("python3 -c"))
    });
    assert_eq!(python["exit_code"], 0, "{python}");
    t.send("exit\r");
    b.wait_kind("session_end");
    let sessions = b.sessions();
    let path = sessions[0]["recording"].as_str().unwrap().to_string();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("HIDDEN-42"), "{text}");
    assert!(!text.contains("bytes of binary output"), "{text}");
}

/// One user has at most `[server] max_sessions_per_user` sessions open at
/// once, over all their connections.
#[test]
fn one_user_opens_at_most_max_sessions_over_all_connections() {
    let b = Bastion::start_with(Opts {
        max_user_sessions: 1,
        ..Opts::default()
    });
    let mut sleeper = with(b.ssh_bob("bob:web1"), "sleep 600")
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    b.wait_kind("session_start");
    let second = exec(b.ssh_bob("bob:web1"), "echo SECOND");
    assert!(!stdout(&second).contains("SECOND"), "{}", stdout(&second));
    let refused = b.wait_kind("session_refused");
    assert_eq!(refused["reason"], "max_sessions_per_user", "{refused}");
    assert_eq!(refused["limit"], 1, "{refused}");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    b.wait_kind("session_end");
    let third = exec(b.ssh_bob("bob:web1"), "echo THIRD");
    assert_eq!(stdout(&third), "THIRD\n", "{}", stderr(&third));
}

/// Screen models share one memory budget (`[terminal] screen_memory_mb`):
/// a session that finds it used up runs without a model, its commands
/// audited as ever, whatever size its client asks for.
#[test]
fn a_session_runs_when_the_screen_models_budget_is_used_up() {
    let b = Bastion::start_with(Opts {
        extra_toml: "[terminal]\nscreen_memory_mb = 0\n".into(),
        ..Opts::default()
    });
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 1000, 1000);
    t.send("echo SUM-$((6*7))\r");
    t.expect("SUM-42");
    b.log.wait_for("no screen model");
    let c = b.wait_count("command", 1);
    assert_eq!(c[0]["command"], "echo SUM-$((6*7))");
    assert_eq!(c[0]["exit_code"], 0);
}

/// Runs `paramiko_flood.py` as bob against `b`: KIND, COUNT, SIZE.
fn flood(b: &Bastion, kind: &str, count: usize, size: usize) -> String {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/paramiko_flood.py"
    );
    let out = std::process::Command::new("python3")
        .args([script, &b.port.to_string(), "bob:web1"])
        .arg(&b.bob_key)
        .args([kind, &count.to_string(), &size.to_string()])
        .output()
        .expect("python3 with paramiko must be installed");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).ends_with("still-here\n"), "{}", stdout(&out));
    stdout(&out)
}

/// `env` requests are bounded as OpenSSH's `AcceptEnv` bounds them: only
/// the locale's names, with short locale values, reach the target; a
/// flood of others (the review sent 120,000 of 30 KB and took the bastion
/// down) keeps nothing, and is one audit row with its count.
#[test]
fn an_env_flood_keeps_nothing_and_is_one_audit_row() {
    let b = Bastion::start();
    let out = flood(&b, "env", 1000, 30_000);
    assert!(
        out.starts_with("LANG=C.UTF-8\nLC_ALL=C\nrefused 0\n"),
        "{out}"
    );
    let refused = b.wait_kind("env_refused");
    assert_eq!(refused["count"], 1000, "{refused}");
    assert_eq!(refused["user"], "bob");
    let names = refused["names"].as_array().unwrap();
    assert_eq!(names.len(), 8, "{refused}");
    assert_eq!(names[0], "LC_X0");
    // One row for the flood, not one a request.
    let rows = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "env_refused")
        .count();
    assert_eq!(rows, 1);

    // Spread over many channels of one connection, the same: counted
    // over the connection, and its total written when it ends.
    flood(&b, "channels", 300, 100);
    b.wait_event(|e| e["kind"] == "env_refused" && e["count"] == 300);
    let counts: Vec<u64> = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "env_refused")
        .map(|e| e["count"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [1000, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
}

/// Refused forwards and channel opens are counted per connection, as
/// pre-auth failures are: a flood of them (the review's 3,000 of 30 KB
/// added 92 MB to the audit) is a few rows with counts, their client text
/// cut, and one last row with the total when the connection ends.
#[test]
fn a_flood_of_refused_forwards_is_a_few_short_rows_with_counts() {
    let b = Bastion::start();
    for (kind, forward) in [("forward", "tcpip-forward"), ("direct", "direct-tcpip")] {
        let out = flood(&b, kind, 300, 30_000);
        assert!(out.starts_with("refused 300\n"), "{out}");
        let total = b.wait_event(|e| {
            e["kind"] == "forward_denied" && e["forward"] == forward && e["count"] == 300
        });
        assert!(total["detail"].as_str().unwrap().len() < 300, "{total}");
        let rows: Vec<serde_json::Value> = b
            .audit()
            .into_iter()
            .filter(|e| e["kind"] == "forward_denied" && e["forward"] == forward)
            .collect();
        // 1, 2, 4 … 256, then the total.
        let counts: Vec<u64> = rows.iter().map(|r| r["count"].as_u64().unwrap()).collect();
        assert_eq!(counts, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300], "{rows:#?}");
    }
}

/// One user holds at most `[server] max_connections_per_user` logged-in
/// connections: one more is refused at login and audited, and a place
/// comes free when a connection ends.
#[test]
fn one_user_holds_at_most_max_connections() {
    let b = Bastion::start_with(Opts {
        max_user_connections: 2,
        ..Opts::default()
    });
    let first = Master::start(&b);
    let _second = Master::start(&b);
    let out = exec(b.ssh_bob("bob:web1"), "echo THIRD");
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(!stdout(&out).contains("THIRD"));
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    let refused = b.wait_kind("connection_refused");
    assert_eq!(refused["user"], "bob");
    assert_eq!(refused["reason"], "max_connections_per_user");
    assert_eq!(refused["limit"], 2);
    drop(first);
    // The bastion sees the first connection go when its socket closes:
    // a login succeeds once it has.
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let out = exec(b.ssh_bob("bob:web1"), "echo THIRD");
        if stdout(&out).contains("THIRD") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", stderr(&out));
    }
}

/// Debian's `ssh-audit` finds nothing to warn of in what walissh offers:
/// no MAC in encrypt-and-MAC mode, no Diffie-Hellman group under 3072
/// bits, no compression before login. Its only notes are the names it
/// does not know yet (the post-quantum key exchange, strict kex).
#[test]
fn ssh_audit_finds_nothing_to_warn_of() {
    let b = Bastion::start();
    let out = std::process::Command::new("ssh-audit")
        .args(["-n", "-p", &b.port.to_string(), "127.0.0.1"])
        .output()
        .expect("ssh-audit must be installed (Debian: ssh-audit)");
    let text = stdout(&out);
    assert!(text.contains("(kex) curve25519-sha256"), "{text}");
    assert!(
        text.contains("(mac) hmac-sha2-256-etm@openssh.com"),
        "{text}"
    );
    let complaints: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("[warn]") || l.contains("[fail]"))
        .filter(|l| !l.contains("unknown algorithm"))
        .collect();
    assert!(complaints.is_empty(), "{complaints:#?}\n{text}");
    assert!(
        text.contains("(gen) compression: enabled (zlib@openssh.com)"),
        "{text}"
    );
    // What ssh-audit's probe may not reach: a client that asks only for
    // group 14 or for a group exchange (where a small group could be
    // handed out) finds no key exchange in common.
    for kex in [
        "diffie-hellman-group14-sha256",
        "diffie-hellman-group-exchange-sha256",
    ] {
        let mut ssh = b.ssh_base();
        ssh.args(["-o", &format!("KexAlgorithms={kex}"), "-o", "BatchMode=yes"])
            .args(["-o", "IdentitiesOnly=yes", "-i"])
            .arg(&b.bob_key)
            .arg("bob:web1@127.0.0.1");
        let out = exec(ssh, "echo IN");
        assert!(!stdout(&out).contains("IN"), "{kex}");
        assert_eq!(out.status.code(), Some(255), "{kex}: {}", stderr(&out));
    }
    // The same login with the usual key exchanges gets in.
    let out = exec(b.ssh_bob("bob:web1"), "echo IN");
    assert_eq!(stdout(&out), "IN\n", "{}", stderr(&out));
}
