//! Logging in: passwords, keys, failures, the throttle, and their audit.

use crate::harness::*;

#[test]
fn password_login_runs_a_command_and_is_audited() {
    let b = Bastion::start();
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo hello-$((40+2))");
    assert_eq!(stdout(&out), "hello-42\n", "stderr: {}", stderr(&out));
    assert_eq!(out.status.code(), Some(0));
    let ok = b.wait_kind("auth_ok");
    assert_eq!(ok["user"], "alice");
    assert_eq!(ok["method"], "password");
    assert!(
        ok["client_addr"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    assert_eq!(ok["session"], serde_json::Value::Null);
}

#[test]
fn key_login_works_and_unknown_key_is_refused() {
    let b = Bastion::start();
    let out = exec(b.ssh_bob("bob:web1"), "echo key-ok");
    assert_eq!(stdout(&out), "key-ok\n", "stderr: {}", stderr(&out));
    let ok = b.wait_event(|e| e["kind"] == "auth_ok" && e["user"] == "bob");
    assert_eq!(ok["method"], "publickey");

    // Bob's key does not open alice's account.
    let out = exec(b.ssh_bob("alice:web1"), "true");
    assert_eq!(out.status.code(), Some(255));
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    let fail = b.wait_event(|e| e["kind"] == "auth_fail" && e["user"] == "alice");
    assert_eq!(fail["method"], "publickey");
}

#[test]
fn wrong_passwords_are_throttled_per_address() {
    let b = Bastion::start_with(Opts {
        max_failures: 3,
        ..Opts::default()
    });
    for _ in 0..3 {
        let out = exec(b.ssh_pw("alice:web1", "wrong"), "true");
        assert_eq!(out.status.code(), Some(255));
    }
    // Locked out now: even the right password is refused from this address.
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo should-not-run");
    assert_eq!(out.status.code(), Some(255));
    assert!(!stdout(&out).contains("should-not-run"));

    let fails = b.wait_count("auth_fail", 4);
    assert_eq!(fails.len(), 4, "{fails:#?}");
    assert!(
        fails
            .iter()
            .all(|e| e["method"] == "password" && e["user"] == "alice")
    );
    assert_eq!(fails[0]["reason"], "bad_password");
    assert_eq!(fails[3]["reason"], "locked_out");
    // The log says it too, with the address, for fail2ban; never the
    // password tried.
    b.log.wait_for("login failed peer=127.0.0.1:");
    let log = b.log.text();
    assert!(
        log.contains("user=\"alice\"") && log.contains("reason=\"bad_password\""),
        "{log}"
    );
    assert!(!log.contains("wrong"), "{log}");

    // Another address is not affected.
    let mut c = b.ssh_pw("alice:web1", ALICE_PW);
    c.args(["-b", "127.0.0.2", "echo other-address"]);
    let out = run(c, b"");
    assert_eq!(stdout(&out), "other-address\n", "stderr: {}", stderr(&out));
}

#[test]
fn unknown_user_is_refused_and_audited() {
    let b = Bastion::start();
    let out = exec(b.ssh_pw("mallory:web1", "x"), "true");
    assert_eq!(out.status.code(), Some(255));
    let fail = b.wait_event(|e| e["kind"] == "auth_fail" && e["user"] == "mallory");
    assert_eq!(fail["method"], "password");
    assert!(b.audit().iter().all(|e| e["kind"] != "auth_ok"));
}

#[test]
fn plink_logs_in_with_a_password() {
    if std::process::Command::new("plink")
        .arg("-V")
        .output()
        .is_err()
    {
        panic!("plink (putty-tools) must be installed");
    }
    let b = Bastion::start();
    let fp = std::process::Command::new("ssh-keygen")
        .args(["-l", "-E", "sha256", "-f"])
        .arg(b.state.join("host_ed25519"))
        .output()
        .unwrap();
    let fp = stdout(&fp).split_whitespace().nth(1).unwrap().to_string();
    let mut c = std::process::Command::new("plink");
    c.args([
        "-ssh",
        "-batch",
        "-P",
        &b.port.to_string(),
        "-hostkey",
        &fp,
        "-pw",
        ALICE_PW,
    ])
    .args(["-l", "alice#web1", "127.0.0.1", "echo plink-$((1+1))"]);
    let out = run(c, b"");
    assert_eq!(stdout(&out), "plink-2\n", "stderr: {}", stderr(&out));
}

#[test]
fn clients_that_do_not_log_in_are_disconnected() {
    let b = Bastion::start_with(Opts {
        login_grace_s: 1,
        ..Opts::default()
    });
    // A TCP client that never speaks SSH.
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", b.port)).unwrap();
    sock.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut seen = Vec::new();
    let end = std::io::Read::read_to_end(&mut sock, &mut seen);
    assert!(end.is_ok(), "walissh did not close the connection: {end:?}");
    assert!(seen.starts_with(b"SSH-2.0-"));
    // The bastion still serves others.
    assert_eq!(
        stdout(&exec(b.ssh_pw("alice:web1", ALICE_PW), "echo served")),
        "served\n"
    );
}

/// A client that sends its banner and then nothing is dropped at the
/// deadline too: russh's disconnect does nothing before key exchange ends.
#[test]
fn a_client_that_stops_after_its_banner_is_disconnected() {
    use std::io::Write;
    let b = Bastion::start_with(Opts {
        login_grace_s: 1,
        ..Opts::default()
    });
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", b.port)).unwrap();
    sock.write_all(b"SSH-2.0-OpenSSH_9.2 banner-only\r\n")
        .unwrap();
    sock.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut seen = Vec::new();
    let end = std::io::Read::read_to_end(&mut sock, &mut seen);
    assert!(end.is_ok(), "walissh did not close the connection: {end:?}");
    assert!(seen.starts_with(b"SSH-2.0-"));
}

#[test]
fn an_address_cannot_hold_unlimited_connections_without_logging_in() {
    use std::io::Read;
    let b = Bastion::start();
    // What the server sends first, and how the read ended: EOF or an
    // error (a reset, a timeout) say different things when it fails.
    let banner = |s: &mut std::net::TcpStream| {
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let started = std::time::Instant::now();
        let mut buf = [0u8; 8];
        let mut n = 0;
        while n < buf.len() {
            match retrying(|| s.read(&mut buf[n..])) {
                Ok(0) => {
                    return (
                        buf[..n].to_vec(),
                        format!("EOF after {:?}", started.elapsed()),
                    );
                }
                Ok(k) => n += k,
                Err(e) => {
                    return (
                        buf[..n].to_vec(),
                        format!("{e} after {:?}", started.elapsed()),
                    );
                }
            }
        }
        (buf.to_vec(), "read".to_string())
    };
    // 64 connections that never log in each get the server's banner...
    let mut held = Vec::new();
    for i in 0..64 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", b.port)).unwrap();
        let (got, how) = banner(&mut s);
        assert_eq!(
            got,
            b"SSH-2.0-",
            "connection {i}: {how}; log:\n{}",
            b.log.text()
        );
        held.push(s);
    }
    // ... the next one is closed without a word.
    let mut refused = std::net::TcpStream::connect(("127.0.0.1", b.port)).unwrap();
    assert_eq!(banner(&mut refused).0, b"");
    b.log.wait_for("too many connections from this address");
    // Another address is not affected.
    let mut c = b.ssh_pw("alice:web1", ALICE_PW);
    c.args(["-b", "127.0.0.2", "echo other"]);
    let out = run(c, b"");
    assert_eq!(stdout(&out), "other\n", "{}", stderr(&out));
    drop(held);
}
