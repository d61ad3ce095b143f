//! Crashes (issue 18): walissh killed with SIGKILL in the middle of
//! sessions, exec commands, a transfer and agent questions, then started
//! again on the same state. What must hold afterwards: the audit opens,
//! every session that was open is ended with `reason = "bastion_restart"`,
//! every recording plays in asciinema, and no row walissh had acted on is
//! missing (rows are written ahead of what they record).
//!
//! The kill loop (`kills_at_random_moments_lose_no_row`) is slow: it runs
//! 10 kills here and 100 or more from `bench/crash`.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agent::{answer_run, ask, bastion_with, bob};
use crate::harness::*;
use crate::lifecycle::read_cast;
use crate::model::*;

const RUN: &str = "Run? [y/N/e]";

/// The recording at `path` is asciicast v2 to its last line, and
/// asciinema itself plays it to the end.
fn plays(path: &str) {
    let (header, events) = read_cast(path);
    assert_eq!(header["version"], 2, "{path}");
    assert!(events.iter().all(|e| e.is_array()), "{path}");
    let mut cat = std::process::Command::new("asciinema");
    cat.arg("cat").arg(path);
    let mut t = Terminal::spawn(&cat, 24, 80);
    assert_eq!(
        t.wait(),
        Some(0),
        "asciinema cat {path}: {}",
        t.screen.text()
    );
}

/// Waits until `file` exists (a command reached the target).
fn exists(file: &std::path::Path) {
    let start = Instant::now();
    while !file.exists() {
        assert!(
            start.elapsed() < DEADLINE,
            "{} never appeared",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_restart_after_sigkill_ends_what_was_open_and_loses_no_acted_row() {
    let scratch = tempfile::tempdir().unwrap();
    let running = scratch.path().join("agent-running");
    let approved = format!("touch {}; sleep 600", running.display());
    let model = Model::start(vec![
        Reply::Sse(call("c1", &approved, "wait on something")),
        Reply::Sse(call("c2", "echo NEVER-$((1+1))", "never approved")),
    ]);
    let mut b = bastion_with(&model, Opts::default());

    // A PTY session with the agent running an approved command.
    let busy = bob(&b);
    let at = ask(&busy, "? first");
    answer_run(&busy, at, "y");
    exists(&running);
    // A PTY session whose agent waits at `Run?`.
    let waiting = bob(&b);
    let at = ask(&waiting, "? second");
    waiting.expect_from(RUN, at);
    // An exec session whose command runs.
    let (mut exec_child, exec_out, _) = spawn_captured(with(
        b.ssh_pw("alice:web1", ALICE_PW),
        "echo EXEC-$((3+4)); sleep 600",
    ));
    exec_out.wait_for("EXEC-7");
    // A transfer: an upload that has started (its first bytes are on the
    // target) when walissh dies, or has ended by then; either way the
    // session must be accounted for.
    let big = scratch.path().join("big");
    std::fs::write(&big, vec![b'x'; 64 << 20]).unwrap();
    let landed = scratch.path().join("landed");
    let mut scp = std::process::Command::new("scp");
    scp.args(["-F", "/dev/null", "-P"])
        .arg(b.port.to_string())
        .args([
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
        ])
        .args(["-o", "LogLevel=ERROR", "-i"])
        .arg(&b.bob_key)
        .arg(&big)
        .arg(format!("bob#web1@127.0.0.1:{}", landed.display()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut scp = scp.spawn().unwrap();
    exists(&landed);

    let before = b.sessions();
    assert_eq!(before.len(), 4, "{before:#?}");
    let acted: Vec<Value> = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "ai_tool_call" || e["kind"] == "exec")
        .collect();
    b.kill();
    let _ = exec_child.kill();
    let _ = exec_child.wait();
    let _ = scp.kill();
    let _ = scp.wait();
    drop((busy, waiting));
    b.restart();

    let after = b.sessions();
    assert_eq!(after.len(), before.len(), "{after:#?}");
    let audit = b.audit();
    for s in &after {
        let id = s["id"].as_str().unwrap();
        assert!(s["ended"].is_string(), "session {id} was not ended: {s}");
        let ends: Vec<&Value> = audit
            .iter()
            .filter(|e| e["session"] == id && e["kind"] == "session_end")
            .collect();
        assert_eq!(ends.len(), 1, "{id}: {ends:#?}");
        assert_eq!(ends[0]["reason"], "bastion_restart", "{id}");
        if let Some(path) = s["recording"].as_str() {
            plays(path);
        }
    }
    // Rows of what had happened are still there: the approved command's
    // call (written before the command was typed) and the exec.
    for row in &acted {
        assert!(audit.contains(row), "lost in the crash: {row}");
    }
    assert!(
        acted
            .iter()
            .any(|e| e["kind"] == "ai_tool_call" && e["command"] == approved.as_str()),
        "{acted:#?}"
    );
    assert!(acted.iter().any(|e| e["kind"] == "exec"), "{acted:#?}");
    // The one never approved never ran, and has no call row.
    assert!(!audit.iter().any(|e| e["command"] == "echo NEVER-$((1+1))"));
    // And the bastion serves again.
    assert_eq!(
        stdout(&exec(
            b.ssh_pw("alice:web1", ALICE_PW),
            "echo AGAIN-$((5+5))"
        )),
        "AGAIN-10\n"
    );
}

/// Kills walissh at random moments while exec sessions start commands that
/// each leave a marker file on the target, restarting it each time. Every
/// marker (a command that reached the target) must have its `exec` row.
/// `WALISSH_KILLS` sets the number of kills (10 by default; `bench/crash`
/// runs 100).
#[test]
fn kills_at_random_moments_lose_no_row() {
    let kills: usize = std::env::var("WALISSH_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10);
    const PER_ROUND: usize = 6;
    let scratch = tempfile::tempdir().unwrap();
    let mut b = Bastion::start();
    let mut rng = Lcg(b.port as u64 ^ 0x5eed);
    let start_round = |b: &Bastion, round: usize| -> Vec<std::process::Child> {
        (0..PER_ROUND)
            .map(|k| {
                let marker = scratch.path().join(format!("m-{round}-{k}"));
                let mut c = with(b.ssh_bob("bob:web1"), format!("touch {}", marker.display()));
                c.stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null());
                c.spawn().unwrap()
            })
            .collect()
    };
    // How long a whole round takes on this machine, unkilled: the kills
    // fall anywhere from before the first login to after the last command.
    let started = Instant::now();
    for mut c in start_round(&b, kills) {
        assert!(c.wait().unwrap().success());
    }
    let round_ms = (started.elapsed().as_millis() as u64 * 6 / 5).max(1);
    for round in 0..kills {
        let children = start_round(&b, round);
        // The moment of the kill is the experiment, not a synchronisation.
        std::thread::sleep(Duration::from_millis(rng.next() % round_ms));
        b.kill();
        for mut c in children {
            let _ = c.kill();
            let _ = c.wait();
        }
        b.restart();
    }
    let markers: Vec<String> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    let rows: Vec<String> = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "exec")
        .filter_map(|e| {
            e["command"]
                .as_str()
                .map(|c| c.trim_start_matches("touch ").to_string())
        })
        .collect();
    let missing: Vec<&String> = markers.iter().filter(|m| !rows.contains(m)).collect();
    eprintln!(
        "kills: {kills} (a round takes {round_ms} ms); commands that reached the target: {}; their exec rows: {}; \
         rows of commands that never ran (killed in between): {}; missing rows: {}",
        markers.len(),
        markers.len() - missing.len(),
        rows.len() - (markers.len() - missing.len()),
        missing.len()
    );
    assert!(
        missing.is_empty(),
        "commands that ran without an exec row: {missing:#?}"
    );
    let open: Vec<Value> = b
        .sessions()
        .into_iter()
        .filter(|s| !s["ended"].is_string())
        .collect();
    assert!(
        open.is_empty(),
        "sessions left open after the restarts: {open:#?}"
    );
}

/// A small deterministic generator for the kill moments (seeded by the
/// port, so runs differ).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// A target that stops answering (its sshd stopped: silent, nothing
/// closed) is noticed within `keepalive_s * (keepalive_max + 1)`: the user
/// is told in one line, the session ends, and the audit says why.
#[test]
fn a_target_that_stops_answering_ends_the_session_with_one_line() {
    let b = Bastion::start_with(Opts {
        keepalive: (1, 2),
        ..Opts::default()
    });
    let mut t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo UP-$((1+2))\r");
    t.expect("UP-3");
    b.sshd.signal_all(libc::SIGSTOP);
    let seen = t.expect("walissh: web1 stopped answering (silent for 3 s)");
    let status = t.wait();
    b.sshd.signal_all(libc::SIGCONT);
    assert!(status.is_some(), "ssh did not end: {}", t.screen.text());
    let text = t.screen.since(seen);
    assert_eq!(
        text.matches("walissh:").count(),
        0,
        "more than one line: {text}"
    );
    let lost = b.wait_kind("upstream_error");
    assert_eq!(lost["message"], "web1 stopped answering (silent for 3 s)");
    assert_eq!(lost["reason"], "lost");
    b.wait_kind("session_end");
}

/// A client killed while its agent runs a command: the question, the
/// target's side (the command with it) and the session end, audited.
#[test]
fn a_client_killed_while_its_agent_runs_a_command_ends_everything() {
    let scratch = tempfile::tempdir().unwrap();
    let started = scratch.path().join("started");
    let sleeper = format!("sleep {}", 30000 + std::process::id() % 20000);
    let command = format!("touch {}; {sleeper}", started.display());
    let model = Model::start(vec![Reply::Sse(call("c1", &command, "wait"))]);
    let b = bastion_with(&model, Opts::default());
    let t = bob(&b);
    let at = ask(&t, "? wait for me");
    answer_run(&t, at, "y");
    exists(&started);
    assert!(running(&sleeper));
    drop(t); // SIGKILL to ssh: the client vanishes
    let error = b.wait_kind("ai_error");
    assert_eq!(error["message"], "the session ended before the answer");
    b.wait_kind("session_end");
    let start = Instant::now();
    while running(&sleeper) {
        assert!(start.elapsed() < DEADLINE, "{sleeper} outlived its session");
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = &b.sessions()[0];
    assert!(s["ended"].is_string(), "{s}");
}

/// A target that dies mid-transfer (its sshd and connection processes
/// killed: the TCP connection reset) ends the transfer with a non-zero
/// exit and a line saying so.
#[test]
fn a_target_reset_mid_transfer_ends_it_with_a_nonzero_exit() {
    let b = Bastion::start();
    let mut c = b.ssh_pw("alice:web1", ALICE_PW);
    c.stderr(std::process::Stdio::piped());
    let (mut child, mut out) = transfer_under_way(c);
    b.sshd.signal_all(libc::SIGKILL);
    // Drain what is still on its way, until the end.
    std::io::copy(&mut out, &mut std::io::sink()).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_ne!(status.code(), Some(0), "{err}");
    assert!(err.contains("walissh: "), "{err}");
    let lost = b.wait_kind("upstream_error");
    assert!(lost["message"].as_str().unwrap().contains("web1"), "{lost}");
    b.wait_kind("session_end");
}

/// walissh raises its soft limit on open files to the hard one at start:
/// a few hundred sessions would exhaust the usual 1024.
#[test]
fn walissh_raises_its_open_files_limit() {
    let b = Bastion::start_with(Opts {
        nofile_soft: Some(256),
        ..Opts::default()
    });
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", b.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers[0], numbers[1], "{line}");
    assert_ne!(numbers[0], "256", "{line}");
}

/// walissh's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A TCP connection to `port` on 127.0.0.1 from the loopback address
/// `from` (any 127.x.y.z is this machine).
fn connect_from(from: [u8; 4], port: u16) -> Option<std::net::TcpStream> {
    use std::os::fd::FromRawFd;
    let addr = |ip: [u8; 4], port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let stream = std::net::TcpStream::from_raw_fd(fd);
        let local = addr(from, 0);
        let remote = addr([127, 0, 0, 1], port);
        let bound = libc::bind(fd, (&raw const local).cast(), len) == 0;
        let connected = libc::connect(fd, (&raw const remote).cast(), len) == 0;
        (bound && connected).then_some(stream)
    }
}

/// A flood before authentication: connections that send random bytes
/// (some after a valid banner), and connections that send nothing at all.
/// Real logins go on being served during it, and walissh's memory stays
/// bounded.
#[test]
fn a_pre_auth_flood_of_garbage_and_half_open_connections() {
    use std::io::Write;
    let b = Bastion::start_with(Opts {
        login_grace_s: 5,
        ..Opts::default()
    });
    // Warm up: one real login, so what is measured is the flood's cost.
    assert_eq!(stdout(&exec(b.ssh_bob("bob:web1"), "echo WARM")), "WARM\n");
    let before = rss_kib(b.pid());
    let mut rng = Lcg(b.port as u64);
    let mut held = Vec::new();
    for i in 0..300 {
        // From other addresses than the real logins' (the throttle caps
        // what one address may hold), a few connections each.
        let from = [127, 0, 1, 1 + (i / 8) as u8];
        let Some(mut s) = connect_from(from, b.port) else {
            continue;
        };
        match i % 3 {
            // Nothing at all: half-open until the login grace.
            0 => {}
            // Random bytes, no banner.
            1 => {
                let junk: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
                let _ = s.write_all(&junk);
            }
            // A banner, then random bytes where the key exchange goes.
            _ => {
                let mut junk = b"SSH-2.0-flood\r\n".to_vec();
                junk.extend((0..4096).map(|_| rng.next() as u8));
                let _ = s.write_all(&junk);
            }
        }
        held.push(s);
        if i % 50 == 49 {
            // A real login in the middle of the flood.
            let out = exec(b.ssh_bob("bob:web1"), "echo SERVED-$((6*7))");
            assert_eq!(stdout(&out), "SERVED-42\n", "{}", stderr(&out));
        }
    }
    let during = rss_kib(b.pid());
    drop(held);
    assert_eq!(
        stdout(&exec(b.ssh_bob("bob:web1"), "echo AFTER")),
        "AFTER\n"
    );
    eprintln!(
        "walissh's RSS: {before} KiB before the flood, {during} KiB with 300 flood connections open"
    );
    assert!(
        during < before + 64 * 1024,
        "the flood cost {} KiB",
        during - before
    );
}

/// Waits for `child` at most `limit`; `None` (and the child killed) if it
/// has not ended by then.
fn wait_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Feeds `input` 64 KiB at a time, `limit` bytes at most, on a thread;
/// returns the count so far and the thread. `input` is closed at the end.
fn feed(
    mut input: std::process::ChildStdin,
    limit: u64,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicU64>,
    std::thread::JoinHandle<()>,
) {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    let fed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = fed.clone();
    let thread = std::thread::spawn(move || {
        let chunk = vec![b'y'; 64 << 10];
        while counter.load(Ordering::Relaxed) < limit && input.write_all(&chunk).is_ok() {
            counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
    });
    (fed, thread)
}

/// Set-up, not an assertion: waits until a feed stops moving (every buffer
/// on its way is full); returns how much went in.
fn until_still(fed: &std::sync::atomic::AtomicU64) -> u64 {
    use std::sync::atomic::Ordering;
    let start = Instant::now();
    let mut last = u64::MAX;
    while fed.load(Ordering::Relaxed) != last {
        assert!(start.elapsed() < DEADLINE, "the feed never stopped");
        last = fed.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(1000));
    }
    last
}

/// Runs `yes` through `c`, reads one line, closes the pipe (as `| head -1`
/// does) and waits for ssh to end; returns its exit code.
fn head_one(mut c: std::process::Command) -> Option<i32> {
    use std::io::BufRead;
    c.arg("yes")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "y\n");
    drop(out);
    let status = wait_within(&mut child, DEADLINE);
    status.expect("ssh ran on after its reader was gone").code()
}

/// `ssh bastion yes | head -1` ends as it does direct to sshd: OpenSSH's
/// client sends `eow@openssh.com` once nothing reads its output, and
/// walissh passes it on to the target (and closes a local process's
/// output), so `yes` gets SIGPIPE instead of running on.
#[test]
fn a_reader_that_goes_away_ends_the_command_as_direct() {
    let b = Bastion::start();
    let direct = head_one(b.ssh_direct());
    assert_eq!(head_one(b.ssh_bob("bob:web1")), direct);
    assert_eq!(head_one(b.ssh_bob("bob:local")), direct);
}

/// A channel whose target stops reading (a command that never reads its
/// input, fed without end) must not stall the other channels of the same
/// client connection: with OpenSSH's connection sharing (ControlMaster),
/// a second session on the same connection still runs.
#[test]
fn a_stalled_channel_does_not_stall_its_connection() {
    let b = Bastion::start();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("master");
    let shared = |c: &mut std::process::Command| {
        c.arg("-o").arg(format!("ControlPath={}", sock.display()));
    };
    // The master connection.
    let mut master = b.ssh_bob("bob:web1");
    shared(&mut master);
    master.args(["-o", "ControlMaster=yes", "-N"]);
    master.stdin(std::process::Stdio::null());
    let mut master = master.spawn().unwrap();
    let start = Instant::now();
    while !sock.exists() {
        assert!(start.elapsed() < DEADLINE, "no master connection");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Session A: `sleep` never reads what it is fed.
    let mut a = b.ssh_bob("bob:web1");
    shared(&mut a);
    a.arg("sleep 600")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut a = a.spawn().unwrap();
    let (fed, _feeder) = feed(a.stdin.take().unwrap(), u64::MAX);
    let last = until_still(&fed);
    // Session B on the same connection.
    let mut c = b.ssh_bob("bob:web1");
    shared(&mut c);
    c.arg("echo B-$((2+3))")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let status = wait_within(&mut child, DEADLINE);
    let _ = a.kill();
    let _ = a.wait();
    let _ = master.kill();
    let _ = master.wait();
    assert!(status.is_some(), "session B stalled behind session A");
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert_eq!(out, "B-5\n");
    eprintln!("fed to the stalled session before it stopped: {last} bytes");
}

/// Bulk data both ways through one channel (`cat`) while the client stops
/// reading for a while: once it reads again, everything arrives. Before
/// windows were given back on consumption, the bastion's connection loop
/// blocked on the full input queue and never read the client's window
/// adjustment: the session wedged for good.
#[test]
fn bulk_both_ways_with_a_paused_reader_does_not_wedge() {
    use std::io::Read;
    const TOTAL: u64 = 48 << 20;
    let b = Bastion::start();
    let mut c = b.ssh_bob("bob:web1");
    c.arg("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut output = child.stdout.take().unwrap();
    // Once all is fed, the feeder closes cat's input: cat ends after it.
    let (fed, feeder) = feed(child.stdin.take().unwrap(), TOTAL);
    // Nothing reads until the feed has stopped moving.
    let last = until_still(&fed);
    assert!(
        last < TOTAL,
        "everything fit in the buffers; the test proves nothing"
    );
    // Now read everything; it must all come back.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut n = 0u64;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match retrying(|| output.read(&mut buf)) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k as u64,
            }
        }
        let _ = tx.send(n);
    });
    let got = rx.recv_timeout(Duration::from_secs(120));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        got.ok(),
        Some(TOTAL),
        "the session wedged (fed {last} bytes before reading)"
    );
    feeder.join().unwrap();
}
