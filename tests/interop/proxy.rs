//! Proxying: shells, exec, binary data, transfers, forwarding refusals.

use sha2::{Digest, Sha256};

use crate::harness::*;

#[test]
fn interactive_round_trip_and_resize() {
    let b = Bastion::start();
    let mut t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo RT-$((6*7))\r");
    t.expect("RT-42");
    t.send("stty size\r");
    t.expect("24 80");
    // A shell that prints the terminal size whenever it changes, then a
    // marker: once the marker shows, `stty` has exited, and Ctrl-C reaches
    // the shell itself (sent while `stty` ran, it would only end `stty`).
    t.send("trap 'stty size; echo WINCHED-$((1+1))' WINCH; echo READY-$((1+1)); while :; do sleep 1 & wait $!; done\r");
    t.expect("READY-2");
    t.resize(40, 100);
    let at = t.expect("40 100");
    t.screen.wait_for_from("WINCHED-2", at);
    t.send("\x03");
    // Ctrl-C flushes what is typed ahead (as on any terminal): wait until
    // the shell reports the interrupted loop before typing on.
    b.wait_event(|e| e["kind"] == "command" && e["exit_code"] == 130);
    t.send("exit 7\r");
    assert_eq!(t.wait(), Some(7));
    let end = b.wait_kind("session_end");
    assert_eq!(end["exit_status"], 7);
    assert!(end["bytes_in"].as_u64().unwrap() > 10);
    assert!(end["bytes_out"].as_u64().unwrap() > 10);
    let start = b.wait_kind("session_start");
    assert_eq!(start["pty"], true);
    assert_eq!(start["target"], "web1");
    assert_eq!(start["user"], "bob");
}

#[test]
fn exec_passes_exit_status_stdout_and_stderr() {
    let b = Bastion::start();
    let out = exec(
        b.ssh_pw("alice:web1", ALICE_PW),
        "echo out; echo err >&2; exit 42",
    );
    assert_eq!(out.status.code(), Some(42));
    assert_eq!(stdout(&out), "out\n");
    assert_eq!(stderr(&out), "err\n");
    let ev = b.wait_kind("exec");
    assert_eq!(ev["command"], "echo out; echo err >&2; exit 42");
    assert_eq!(ev["target"], "web1");
    let end = b.wait_kind("session_end");
    assert_eq!(end["exit_status"], 42);
    assert_eq!(b.wait_kind("session_start")["pty"], false);
}

#[test]
fn ten_megabytes_of_random_bytes_survive_cat() {
    let b = Bastion::start();
    let mut data = vec![0u8; 10 * 1024 * 1024];
    let mut f = std::fs::File::open("/dev/urandom").unwrap();
    std::io::Read::read_exact(&mut f, &mut data).unwrap();
    let mut c = b.ssh_pw("alice:web1", ALICE_PW);
    c.arg("cat");
    let out = run(c, &data);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(out.stdout.len(), data.len());
    assert_eq!(Sha256::digest(&out.stdout), Sha256::digest(&data));
    let end = b.wait_kind("session_end");
    assert_eq!(end["bytes_in"], data.len() as u64);
    assert_eq!(end["bytes_out"], data.len() as u64);
}

#[test]
fn scp_and_sftp_pass_through_and_are_audited() {
    let b = Bastion::start();
    let src = b.dir.path().join("payload.bin");
    let data: Vec<u8> = (0..300_000u32).flat_map(|i| i.to_le_bytes()).collect();
    std::fs::write(&src, &data).unwrap();
    let remote = tempfile::tempdir().unwrap();
    let key = b.bob_key.display().to_string();
    let base = [
        "-F",
        "/dev/null",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "BatchMode=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-i",
        &key,
    ];

    // scp over the sftp protocol (OpenSSH's default), then the legacy one.
    for (flag, name) in [(None, "a.bin"), (Some("-O"), "b.bin")] {
        let mut c = std::process::Command::new("scp");
        c.args(base).args(["-P", &b.port.to_string()]);
        if let Some(f) = flag {
            c.arg(f);
        }
        c.arg(&src).arg(format!(
            "bob#web1@127.0.0.1:{}/{name}",
            remote.path().display()
        ));
        let out = run(c, b"");
        assert_eq!(out.status.code(), Some(0), "scp {flag:?}: {}", stderr(&out));
        assert_eq!(std::fs::read(remote.path().join(name)).unwrap(), data);
    }

    // sftp, fetching the file back.
    let back = b.dir.path().join("back.bin");
    let batch = b.dir.path().join("batch");
    std::fs::write(
        &batch,
        format!("get {}/a.bin {}\n", remote.path().display(), back.display()),
    )
    .unwrap();
    let mut c = std::process::Command::new("sftp");
    c.args(base)
        .args(["-P", &b.port.to_string(), "-b"])
        .arg(&batch);
    c.arg("bob#web1@127.0.0.1");
    let out = run(c, b"");
    assert_eq!(out.status.code(), Some(0), "sftp: {}", stderr(&out));
    assert_eq!(std::fs::read(&back).unwrap(), data);

    // sftp to a local target runs OpenSSH's sftp-server on pipes.
    let back_local = b.dir.path().join("back-local.bin");
    std::fs::write(
        &batch,
        format!("get {} {}\n", src.display(), back_local.display()),
    )
    .unwrap();
    let mut c = std::process::Command::new("sftp");
    c.args(base)
        .args(["-P", &b.port.to_string(), "-b"])
        .arg(&batch);
    c.arg("bob#local@127.0.0.1");
    let out = run(c, b"");
    assert_eq!(out.status.code(), Some(0), "sftp local: {}", stderr(&out));
    assert_eq!(std::fs::read(&back_local).unwrap(), data);

    let sub = b.wait_event(|e| e["kind"] == "subsystem" && e["name"] == "sftp");
    assert_eq!(sub["transfer"], "sftp");
    let scp = b.wait_event(|e| e["kind"] == "exec" && e["transfer"] == "scp");
    assert!(scp["command"].as_str().unwrap().starts_with("scp "));
}

#[test]
fn port_forwarding_is_refused_and_audited() {
    let b = Bastion::start();
    // -W opens a direct-tcpip channel at once.
    let mut c = b.ssh_pw("alice:web1", ALICE_PW);
    c.args(["-W", &format!("127.0.0.1:{}", b.sshd.port)]);
    let out = run(c, b"");
    assert_ne!(out.status.code(), Some(0));
    let ev = b.wait_event(|e| e["kind"] == "forward_denied" && e["forward"] == "direct-tcpip");
    assert_eq!(ev["detail"], format!("127.0.0.1:{}", b.sshd.port));
    assert_eq!(ev["user"], "alice");

    let mut c = b.ssh_pw("alice:web1", ALICE_PW);
    c.args([
        "-o",
        "ExitOnForwardFailure=yes",
        "-R",
        "0:127.0.0.1:22",
        "echo not-reached",
    ]);
    let out = run(c, b"");
    assert_ne!(out.status.code(), Some(0));
    assert!(!stdout(&out).contains("not-reached"));
    b.wait_event(|e| e["kind"] == "forward_denied" && e["forward"] == "tcpip-forward");
}

#[test]
fn only_the_locale_is_passed_from_the_client() {
    let b = Bastion::start();
    let mut c = b.ssh_pw("alice:web1", ALICE_PW);
    c.args([
        "-o",
        "SendEnv=LANG LC_TIME WALISSH_TEST_VAR",
        "echo lang=$LANG time=$LC_TIME var=$WALISSH_TEST_VAR",
    ])
    .env("LANG", "C.UTF-8")
    .env("LC_TIME", "C")
    .env("WALISSH_TEST_VAR", "leak");
    let out = run(c, b"");
    assert_eq!(
        stdout(&out),
        "lang=C.UTF-8 time=C var=\n",
        "stderr: {}",
        stderr(&out)
    );
}

#[test]
fn exit_signal_reaches_the_client_and_the_audit() {
    let b = Bastion::start();
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "kill -TERM $$");
    // OpenSSH's client reports a remote signal as exit status 255.
    assert_eq!(out.status.code(), Some(255));
    let end = b.wait_kind("session_end");
    assert_eq!(end["exit_signal"], "TERM");
    assert_eq!(end["exit_status"], serde_json::Value::Null);
}

#[test]
fn a_command_that_stops_reading_still_reports_its_output_and_status() {
    let b = Bastion::start();
    let input = "y\n".repeat(5_000_000);
    for target in ["local", "web1"] {
        let mut c = b.ssh_bob(&format!("bob:{target}"));
        c.arg("head -n1; exit 4");
        let out = run(c, input.as_bytes());
        assert_eq!(stdout(&out), "y\n", "{target}: {}", stderr(&out));
        assert_eq!(out.status.code(), Some(4), "{target}");
    }
}

#[test]
fn a_shell_without_a_pty_is_recorded_too() {
    let b = Bastion::start();
    let mut c = b.ssh_bob("bob:web1");
    c.arg("-T");
    let out = run(c, b"echo NOPTY-$((20+1))\nexit 0\n");
    assert_eq!(stdout(&out), "NOPTY-21\n", "{}", stderr(&out));
    b.wait_kind("session_end");
    let s = b.sessions();
    let path = s[0]["recording"].as_str().expect("a recording");
    let cast = std::fs::read_to_string(path).unwrap();
    assert!(cast.contains("NOPTY-21"), "{cast}");
    assert_eq!(b.wait_kind("session_start")["pty"], false);
}
