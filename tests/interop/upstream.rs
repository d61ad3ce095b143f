//! Targets: host key policy, unreachable and failing targets, local shells.

use crate::harness::*;

#[test]
fn accept_new_records_the_key_and_refuses_a_change() {
    let b = Bastion::start();
    assert_eq!(
        exec(b.ssh_pw("alice:web1", ALICE_PW), "true").status.code(),
        Some(0)
    );
    let known = std::fs::read_to_string(b.state.join("known_hosts")).unwrap();
    let key_b64 = b.sshd.host_pub.split_whitespace().nth(1).unwrap();
    assert!(
        known.contains(&format!("[127.0.0.1]:{}", b.sshd.port)),
        "{known}"
    );
    assert!(known.contains(key_b64), "{known}");

    // Now the target's key changes.
    let other = keygen(&b.dir.path().join("other_host"));
    let line = format!("[127.0.0.1]:{} {}\n", b.sshd.port, other);
    std::fs::write(b.state.join("known_hosts"), line).unwrap();
    let out = refused(
        with(b.ssh_pw("alice:web1", ALICE_PW), "echo not-reached"),
        255,
        "host key for web1 changed; ask an administrator",
    );
    assert!(!stdout(&out).contains("not-reached"));
    let ev = b.wait_kind("upstream_error");
    assert_eq!(
        ev["message"],
        "host key for web1 changed; ask an administrator"
    );
    // The case, for an operator's alarm: not a sentence to match.
    assert_eq!(ev["reason"], "host_key");
    assert_eq!(ev["target"], "web1");
    b.wait_event(|e| e["kind"] == "session_end" && e["exit_status"] == 255);
}

#[test]
fn strict_policy_refuses_an_unknown_host() {
    let b = Bastion::start_with(Opts {
        host_key_policy: "strict",
        ..Opts::default()
    });
    refused(
        with(b.ssh_pw("alice:web1", ALICE_PW), "true"),
        255,
        "host key for web1 is not known",
    );
    assert_eq!(b.wait_kind("upstream_error")["reason"], "host_key");
}

#[test]
fn strict_policy_accepts_a_listed_host() {
    let b = with_known_hosts("strict", false, |sshd| {
        format!("[127.0.0.1]:{} {}\n", sshd.port, sshd.host_pub)
    });
    assert_eq!(
        stdout(&exec(b.ssh_pw("alice:web1", ALICE_PW), "echo strict-ok")),
        "strict-ok\n"
    );
}

#[test]
fn unreachable_target_is_reported_and_the_bastion_keeps_serving() {
    let b = Bastion::start();
    refused(
        with(b.ssh_pw("carol:down", CAROL_PW), "true"),
        255,
        "cannot reach down",
    );
    let ev = b.wait_kind("upstream_error");
    assert!(
        ev["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach down")
    );
    assert_eq!(ev["reason"], "unreachable");
    assert_eq!(
        stdout(&exec(
            b.ssh_pw("carol:web1", CAROL_PW),
            "echo still-serving"
        )),
        "still-serving\n"
    );
}

#[test]
fn target_closing_mid_session_reaches_the_user() {
    let b = Bastion::start();
    let mut t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo UP-$((5+5))\r");
    t.expect("UP-10");
    // Kill the sshd process serving this connection.
    t.send("kill -9 $PPID\r");
    t.expect("web1 closed the session");
    t.wait();
    let ev = b.wait_kind("upstream_error");
    assert!(
        ev["message"]
            .as_str()
            .unwrap()
            .contains("web1 closed the session")
    );
    assert_eq!(ev["reason"], "lost");
    b.wait_kind("session_end");
    assert_eq!(
        stdout(&exec(b.ssh_bob("bob:web1"), "echo after")),
        "after\n"
    );
}

#[test]
fn client_vanishing_mid_transfer_does_not_hurt_others() {
    let b = Bastion::start();
    let mut c = b.ssh_pw("alice:web1", ALICE_PW);
    c.stderr(std::process::Stdio::null());
    let (mut child, _out) = transfer_under_way(c);
    child.kill().unwrap();
    child.wait().unwrap();
    let end = b.wait_kind("session_end");
    assert!(end["bytes_out"].as_u64().unwrap() >= 1 << 20);
    assert_eq!(
        stdout(&exec(b.ssh_pw("alice:web1", ALICE_PW), "echo fine")),
        "fine\n"
    );
}

#[test]
fn local_target_shell_and_exec() {
    let b = Bastion::start();
    let out = exec(b.ssh_bob("bob:local"), "echo local-$((4+4)); exit 3");
    assert_eq!(stdout(&out), "local-8\n");
    assert_eq!(out.status.code(), Some(3));

    let mut t = Terminal::spawn(&b.ssh_bob("bob:local"), 30, 90);
    t.send("stty size; tty\r");
    t.expect("30 90");
    t.expect("/dev/pts/");
    t.send("exit 5\r");
    assert_eq!(t.wait(), Some(5));
    let end = b.wait_event(|e| e["kind"] == "session_end" && e["exit_status"] == 5);
    assert_eq!(end["target"], "local");
}

#[test]
fn run_as_keeps_the_local_shell_away_from_walissh_state() {
    if !is_root() {
        eprintln!("skipped: run_as needs the tests to run as root (CI does)");
        return;
    }
    let b = Bastion::start();
    let key = b.state.join("host_ed25519");
    let out = exec(
        b.ssh_pw("carol:jail", CAROL_PW),
        format!("id -un; cat {} || echo DENIED", key.display()),
    );
    assert_eq!(
        stdout(&out),
        format!("{JAIL_USER}\nDENIED\n"),
        "stderr: {}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("Permission denied"));
}

/// walissh under `policy` whose `known_hosts` holds what `lines` makes of
/// the target sshd, hashed by `ssh-keygen -H` when `hashed`.
fn with_known_hosts(
    policy: &'static str,
    hashed: bool,
    lines: impl Fn(&Sshd) -> String + 'static,
) -> Bastion {
    Bastion::start_with(Opts {
        host_key_policy: policy,
        prepare: Some(Box::new(move |state, sshd| {
            std::fs::create_dir_all(state).unwrap();
            let path = state.join("known_hosts");
            std::fs::write(&path, lines(sshd)).unwrap();
            if hashed {
                let out = std::process::Command::new("ssh-keygen")
                    .arg("-H")
                    .arg("-f")
                    .arg(&path)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(text.starts_with("|1|"), "{text}");
            }
        })),
        ..Opts::default()
    })
}

#[test]
fn a_revoked_host_key_is_refused_whatever_else_lists_it() {
    let b = with_known_hosts("accept-new", false, |sshd| {
        format!(
            "[127.0.0.1]:{} {}\n@revoked * {}\n",
            sshd.port, sshd.host_pub, sshd.host_pub
        )
    });
    refused(
        with(b.ssh_pw("alice:web1", ALICE_PW), "true"),
        255,
        "host key for web1 is revoked",
    );
}

#[test]
fn strict_policy_reads_host_patterns_as_openssh_does() {
    let b = with_known_hosts("strict", false, |sshd| {
        format!("[127.0.0.?]:{},!nothere {}\n", sshd.port, sshd.host_pub)
    });
    assert_eq!(
        stdout(&exec(b.ssh_pw("alice:web1", ALICE_PW), "echo $((40+2))")),
        "42\n"
    );
}

#[test]
fn strict_policy_reads_names_hashed_by_ssh_keygen() {
    let b = with_known_hosts("strict", true, |sshd| {
        format!("[127.0.0.1]:{} {}\n", sshd.port, sshd.host_pub)
    });
    assert_eq!(
        stdout(&exec(b.ssh_pw("alice:web1", ALICE_PW), "echo $((40+3))")),
        "43\n"
    );
}

#[test]
fn a_known_hosts_line_walissh_cannot_read_blocks_learning() {
    let b = with_known_hosts("accept-new", false, |_| {
        "web9 ssh-ed25519 not-a-key\n".into()
    });
    let out = refused(
        with(b.ssh_pw("alice:web1", ALICE_PW), "true"),
        255,
        "host key for web1 cannot be checked",
    );
    assert!(
        stderr(&out).contains("known_hosts:1 cannot be read"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_local_process_that_ignores_hangup_is_killed_after_the_client_leaves() {
    let b = Bastion::start();
    let marker = format!("sleep {}", 40000 + b.port as u32 % 20000);
    let t = Terminal::spawn(&b.ssh_bob("bob:local"), 24, 80);
    t.send(&format!(
        "trap '' HUP; echo READY-$((3+4)); exec {marker}\r"
    ));
    t.expect("READY-7");
    let start = std::time::Instant::now();
    while !running(&marker) {
        assert!(start.elapsed() < DEADLINE, "{marker} never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(t); // the client vanishes
    while running(&marker) {
        assert!(start.elapsed() < DEADLINE, "{marker} outlived its session");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    b.wait_kind("session_end");
}

#[test]
fn password_env_logs_in_to_the_target_with_a_password() {
    if !is_root() {
        eprintln!("skipped: the password target's account needs root to create (CI runs as root)");
        return;
    }
    let b = Bastion::start();
    let out = exec(b.ssh_pw("carol:pwtarget", CAROL_PW), "id -un");
    assert_eq!(
        stdout(&out),
        format!("{JAIL_USER}\n"),
        "stderr: {}",
        stderr(&out)
    );

    let mut c = b.ssh_pw("carol:pwmissing", CAROL_PW);
    c.arg("true");
    refused(
        c,
        255,
        "pwmissing: the bastion has no password for it (WALISSH_TEST_UNSET_PW is not set)",
    );
    // The password itself never reaches the audit trail or the log.
    let audit = stdout(&b.cli(&["audit", "--json"]));
    assert!(!audit.contains("jail-pw"), "{audit}");
    assert!(!b.log.text().contains("jail-pw"));
}
