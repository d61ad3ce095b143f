//! Recordings, storage failures and shutdown.

use serde_json::Value;

use crate::harness::*;

/// The asciicast v2 file of a session: its header and its events.
pub(crate) fn read_cast(path: &str) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let events = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    (header, events)
}

pub(crate) fn output_of(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e[1] == "o")
        .map(|e| e[2].as_str().unwrap())
        .collect()
}

#[test]
fn recording_is_asciicast_v2_without_typed_input() {
    let b = Bastion::start();
    let mut t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo REC-$((2+3))\r");
    t.expect("REC-5");
    // A secret typed with echo off must not reach the recording. READY is
    // printed only once echo is off, so the secret is never echoed.
    t.send("stty -echo; echo READY-$((1+1)); read PW; stty echo; echo GOT-${#PW}\r");
    t.expect("READY-2");
    t.send("hunter2-secret\r");
    t.expect("GOT-14");
    t.resize(30, 100);
    t.send("exit\r");
    t.wait();
    b.wait_kind("session_end");
    let sessions = b.sessions();
    assert_eq!(sessions.len(), 1);
    let s = &sessions[0];
    assert_eq!(s["user"], "bob");
    assert_eq!(s["target"], "web1");
    assert!(s["ended"].is_string());
    assert!(s["started"].as_str().unwrap().ends_with('Z'));
    assert!(s["client_addr"].as_str().unwrap().starts_with("127.0.0.1:"));
    // `audit --session` shows that session's events only, oldest first.
    let id = s["id"].as_str().unwrap();
    let mine = json_lines(&b.cli(&["audit", "--session", id, "--json"]));
    assert!(mine.iter().all(|e| e["session"] == id), "{mine:#?}");
    let kinds: Vec<&str> = mine.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["session_start", "command", "command", "session_end"]
    );
    // The shell's integration reports each command it ran; what was typed
    // to `read` with echo off is nowhere in the audit.
    assert_eq!(mine[1]["command"], "echo REC-$((2+3))");
    assert_eq!(mine[1]["exit_code"], 0);
    assert!(mine[1]["cwd"].as_str().unwrap().starts_with('/'));
    assert!(mine[2]["command"].as_str().unwrap().contains("read PW"));
    let all = stdout(&b.cli(&["audit", "--json"]));
    assert!(!all.contains("hunter2"), "{all}");
    let path = s["recording"].as_str().unwrap();
    assert!(path.ends_with(&format!("{}.cast", s["id"].as_str().unwrap())));
    let (header, events) = read_cast(path);
    assert_eq!(header["version"], 2);
    assert_eq!(header["width"], 80);
    assert_eq!(header["height"], 24);
    assert_eq!(header["env"]["TERM"], "xterm-256color");
    let out = output_of(&events);
    assert!(out.contains("REC-5"), "{out}");
    assert!(out.contains("GOT-14"));
    assert!(!std::fs::read_to_string(path).unwrap().contains("hunter2"));
    assert!(events.iter().all(|e| e[1] != "i"));
    assert!(events.iter().any(|e| e[1] == "r" && e[2] == "100x30"));
    let times: Vec<f64> = events.iter().map(|e| e[0].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));

    // asciinema itself reads it (it wants a terminal).
    let mut cat = std::process::Command::new("asciinema");
    cat.arg("cat").arg(path);
    let mut t = Terminal::spawn(&cat, 24, 80);
    t.expect("REC-5");
    assert_eq!(t.wait(), Some(0), "{}", t.screen.text());
}

#[test]
fn record_input_opts_in_to_typed_input() {
    let b = Bastion::start_with(Opts {
        record_input: true,
        ..Opts::default()
    });
    let mut t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo IN-$((1+2))\r");
    t.expect("IN-3");
    t.send("exit\r");
    t.wait();
    b.wait_kind("session_end");
    let path = b.sessions()[0]["recording"].as_str().unwrap().to_string();
    let (_, events) = read_cast(&path);
    let typed: String = events
        .iter()
        .filter(|e| e[1] == "i")
        .map(|e| e[2].as_str().unwrap())
        .collect();
    assert!(typed.contains("echo IN-$((1+2))"), "{typed}");
}

/// Makes the recordings directory impossible to create.
fn break_recordings(state: &std::path::Path) {
    std::fs::create_dir_all(state).unwrap();
    std::fs::write(state.join("recordings"), b"not a directory").unwrap();
}

#[test]
fn unwritable_recordings_refuse_new_sessions_by_default() {
    let b = Bastion::start_with(Opts {
        prepare: Some(Box::new(|state, _| break_recordings(state))),
        ..Opts::default()
    });
    let mut c = b.ssh_bob("bob:web1");
    c.args(["-tt", "echo not-reached"]);
    let out = run(c, b"");
    assert_eq!(out.status.code(), Some(1));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!all.contains("not-reached"));
    assert!(
        all.contains("session recordings cannot be written"),
        "{all}"
    );
    let ev = b.wait_kind("storage_error");
    assert_eq!(ev["user"], "bob");
    assert!(b.audit().iter().all(|e| e["kind"] != "session_start"));
    // Exec sessions are recorded too (`[audit] record_exec`): refused
    // the same way, not a way around the recording.
    let out = exec(b.ssh_bob("bob:web1"), "echo exec-refused");
    assert!(!stdout(&out).contains("exec-refused"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("session recordings cannot be written"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn unwritable_recordings_warn_when_configured_to_continue() {
    let b = Bastion::start_with(Opts {
        on_failure: "continue",
        prepare: Some(Box::new(|state, _| break_recordings(state))),
        ..Opts::default()
    });
    let mut c = b.ssh_bob("bob:web1");
    c.args(["-tt", "echo reached-$((1+1))"]);
    let out = run(c, b"");
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(all.contains("reached-2"), "{all}");
    assert!(
        all.contains("WARNING: session recordings cannot be written"),
        "{all}"
    );
    let start = b.wait_kind("session_start");
    assert_eq!(start["pty"], true);
    let s = b.sessions();
    assert_eq!(s[0]["recording"], Value::Null);
}

#[test]
fn sigterm_tells_users_and_closes_their_sessions() {
    let mut b = Bastion::start();
    assert!(b.next_notification().contains("READY=1"));
    let mut t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo LIVE-$((7+1))\r");
    t.expect("LIVE-8");
    let exec_cmd = with(
        b.ssh_pw("alice:web1", ALICE_PW),
        "echo started; exec sleep 600",
    );
    let (mut exec, exec_out, _) = spawn_captured(exec_cmd);
    exec_out.wait_for("started");

    let status = b.terminate();
    assert!(status.success(), "walissh exited with {status:?}");
    assert!(b.next_notification().contains("STOPPING=1"));
    t.expect("the bastion is shutting down");
    t.wait();
    exec.wait().unwrap();
    // Every session's row is closed, and both ends are audited.
    let sessions = b.sessions();
    assert_eq!(sessions.len(), 2);
    assert!(
        sessions.iter().all(|s| s["ended"].is_string()),
        "{sessions:#?}"
    );
    let ends = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "session_end")
        .count();
    assert_eq!(ends, 2);
    assert!(b.log.text().contains("stopped"));
}

#[test]
fn a_failing_audit_database_refuses_new_sessions() {
    let b = Bastion::start();
    // Break the database under the running bastion: its writes now fail.
    let db = rusqlite::Connection::open(b.state.join("audit.db")).unwrap();
    db.execute_batch("DROP TABLE events").unwrap();
    exec(b.ssh_pw("alice:web1", ALICE_PW), "true");
    b.log.wait_for("audit database write failed");
    // Unwritten events still reach the log, as JSON.
    b.log.wait_for("unwritten audit event");

    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo not-reached");
    assert_eq!(out.status.code(), Some(1));
    assert!(!stdout(&out).contains("not-reached"));
    assert!(
        stderr(&out).contains("the audit database cannot be written; new sessions are refused"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sigterm_while_a_target_is_still_connecting_closes_the_session() {
    let mut b = Bastion::start();
    let (mut client, _, err) = spawn_captured(with(b.ssh_pw("carol:tarpit", CAROL_PW), "true"));
    b.wait_kind("session_start");
    assert!(b.terminate().success());
    err.wait_for("the bastion is shutting down");
    client.wait().unwrap();
    let end = b.wait_kind("session_end");
    assert_eq!(end["target"], "tarpit");
    assert!(b.sessions()[0]["ended"].is_string());
}

#[test]
fn a_reload_checks_key_files_as_a_start_does() {
    let b = Bastion::start();
    let good = std::fs::read_to_string(&b.config).unwrap();
    let key = b.dir.path().join("garbage_key");
    std::fs::write(&key, "this is not a key").unwrap();
    let broken = good.replacen(
        "[upstream]\n",
        &format!("[upstream]\nidentity = \"{}\"\n", key.display()),
        1,
    );
    assert_ne!(broken, good);
    std::fs::write(&b.config, &broken).unwrap();
    let from = b.log.end();
    let line = b.reload();
    assert!(line.contains("reload failed"), "{line}");
    b.log.wait_for_from("garbage_key", from);
    // Back to the good config, it reloads.
    std::fs::write(&b.config, &good).unwrap();
    assert!(b.reload().contains("config reloaded"));
}
