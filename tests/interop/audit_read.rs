//! `walissh audit` for people (issue 20): filters that combine, `--follow`
//! as events are written, and `audit search` over commands (FTS5), on the
//! real audit file of real sessions.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::harness::*;

fn lines(out: &std::process::Output) -> Vec<Value> {
    json_lines(out)
}

#[test]
fn filters_combine_and_times_bound() {
    let b = Bastion::start();
    let out = exec(b.ssh_bob("bob:web1"), "echo BOB-ONE");
    assert!(stdout(&out).contains("BOB-ONE"));
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo ALICE-ONE");
    assert!(stdout(&out).contains("ALICE-ONE"));
    b.wait_count("session_end", 2);
    let alice_execs = lines(&b.cli(&["audit", "--json", "--user", "alice", "--kind", "exec"]));
    assert_eq!(alice_execs.len(), 1, "{alice_execs:#?}");
    assert_eq!(alice_execs[0]["command"], "echo ALICE-ONE");
    let two_kinds = lines(&b.cli(&[
        "audit",
        "--json",
        "--user",
        "bob",
        "--kind",
        "exec",
        "--kind",
        "session_end",
    ]));
    let kinds: Vec<&str> = two_kinds
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["exec", "session_end"], "{two_kinds:#?}");
    let session = alice_execs[0]["session"].as_str().unwrap();
    let one = lines(&b.cli(&["audit", "--json", "--session", session, "--target", "web1"]));
    assert!(one.iter().all(|e| e["session"] == session) && !one.is_empty());
    assert!(!lines(&b.cli(&["audit", "--json", "--since", "1h", "--kind", "exec"])).is_empty());
    assert!(lines(&b.cli(&["audit", "--json", "--until", "2000-01-01T00:00:00Z"])).is_empty());
    let bad = b.cli_any(&["audit", "--since", "last tuesday"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("RFC 3339"), "{}", stderr(&bad));
    // A kind misspelt is said, not shown as no events.
    let bad = b.cli_any(&["audit", "--kind", "exec", "--kind", "sesion_end"]);
    assert_eq!(bad.status.code(), Some(1));
    let err = stderr(&bad);
    assert!(
        err.contains("--kind sesion_end: no such kind") && err.contains("session_end"),
        "{err}"
    );
    // Without --json: one line per event, key=value.
    let human = stdout(&b.cli(&["audit", "--user", "alice", "--kind", "exec"]));
    assert!(
        human.contains("kind=exec") && human.contains("command=\"echo ALICE-ONE\""),
        "{human}"
    );
}

#[test]
fn follow_prints_events_as_they_are_written() {
    let b = Bastion::start();
    let mut follow = Command::new(walissh_bin())
        .args(["audit", "--config"])
        .arg(&b.config)
        .args(["--follow", "--json", "--kind", "exec"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    for i in 0..2 {
        let out = exec(b.ssh_bob("bob:web1"), format!("echo FOLLOWED-{i}"));
        assert!(stdout(&out).contains(&format!("FOLLOWED-{i}")));
        let line = lines.next().unwrap().unwrap();
        let ev: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(ev["command"], format!("echo FOLLOWED-{i}"), "{line}");
    }
    let _ = follow.kill();
    let _ = follow.wait();
}

#[test]
fn search_finds_commands_by_their_words() {
    let b = Bastion::start();
    for cmd in [
        "echo needle-in-a-haystack",
        "echo hay only",
        "true \"quoted\" needle",
    ] {
        let _ = exec(b.ssh_bob("bob:web1"), cmd);
    }
    b.wait_count("session_end", 3);
    let found = lines(&b.cli(&["audit", "search", "needle", "--json"]));
    let commands: Vec<&str> = found
        .iter()
        .map(|e| e["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        commands,
        ["echo needle-in-a-haystack", "true \"quoted\" needle"],
        "{found:#?}"
    );
    // Whatever is typed is a phrase, never FTS5 syntax.
    let none = b.cli(&["audit", "search", "NEAR(\"x", "--json"]);
    assert!(lines(&none).is_empty());
}

#[test]
fn recordings_mark_commands_and_agent_actions_and_play_back() {
    use crate::model::*;
    let model = Model::start(vec![
        Reply::Sse(call("c1", "uname -s", "kernel")),
        Reply::Sse(answer("Linux it is.")),
    ]);
    let b = crate::agent::auto_bastion(&model);
    let mut t = crate::agent::bob(&b);
    t.send("echo MARK-$((1+1))\r");
    let at = t.expect("MARK-2");
    let at = crate::agent::ask(&t, "? what kernel").max(at);
    t.expect_from("Linux it is.", at);
    b.wait_kind("ai_answer");
    t.send("exit\r");
    t.wait();
    let end = b.wait_event(|e| e["kind"] == "session_end" && e["recording_sha256"].is_string());
    let session = end["session"].as_str().unwrap();
    let listed = stdout(&b.cli(&["play", session, "--markers"]));
    let labels: Vec<&str> = listed
        .lines()
        .map(|l| l.split_once("s  ").map_or("", |x| x.1))
        .collect();
    for expected in [
        "$ echo MARK-$((1+1))",
        "? what kernel",
        "ai $ uname -s (auto)",
        "ai: Linux it is.",
    ] {
        assert!(labels.contains(&expected), "{expected:?} not in:\n{listed}");
    }
    // Played back, fast, it is what the user saw.
    let played = stdout(&b.cli(&["play", session, "--speed", "1000"]));
    assert!(
        played.contains("MARK-2") && played.contains("Linux it is."),
        "{played}"
    );
    let from = stdout(&b.cli(&["play", session, "--speed", "1000", "--from", "what kernel"]));
    assert!(from.contains("Linux it is."), "{from}");
    let none = b.cli_any(&["play", session, "--from", "no such marker"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(stderr(&none).contains("--markers"), "{}", stderr(&none));
    // asciinema itself plays the file, markers and all.
    let path = b
        .sessions()
        .into_iter()
        .find(|s| s["id"] == session)
        .and_then(|s| s["recording"].as_str().map(str::to_string))
        .unwrap();
    let mut play = Command::new("asciinema");
    play.args(["play", "-s", "1000"]).arg(&path);
    let mut p = Terminal::spawn(&play, 24, 80);
    p.expect("MARK-2");
    assert_eq!(p.wait(), Some(0), "{}", p.screen.text());
}
