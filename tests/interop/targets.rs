//! Choosing a target: in the login name, implied, from the menu, denied.

use crate::harness::*;

#[test]
fn hash_separator_and_only_target() {
    let b = Bastion::start();
    assert_eq!(
        stdout(&exec(b.ssh_pw("alice#web1", ALICE_PW), "echo via-hash")),
        "via-hash\n"
    );
    // alice may reach only web1, so naming no target goes there.
    assert_eq!(
        stdout(&exec(b.ssh_pw("alice", ALICE_PW), "echo only-target")),
        "only-target\n"
    );
    let starts: Vec<_> = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "session_start")
        .collect();
    assert!(starts.iter().all(|e| e["target"] == "web1"), "{starts:#?}");
}

#[test]
fn forbidden_and_missing_targets_get_the_same_answer() {
    let b = Bastion::start();
    let mut answers = Vec::new();
    for target in ["web2", "nosuch"] {
        let out = exec(
            b.ssh_pw(&format!("alice:{target}"), ALICE_PW),
            "echo not-reached",
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(stdout(&out).is_empty());
        answers.push(stderr(&out).replace(target, "T"));
        let ev = b.wait_event(|e| e["kind"] == "target_denied" && e["requested"] == target);
        assert_eq!(ev["user"], "alice");
    }
    assert_eq!(answers[0], answers[1]);
    assert!(
        answers[0].contains("does not exist or you may not reach it"),
        "{}",
        answers[0]
    );
    assert!(b.audit().iter().all(|e| e["kind"] != "session_start"));
}

#[test]
fn exec_without_a_target_lists_the_allowed_ones() {
    let b = Bastion::start();
    let out = exec(b.ssh_bob("bob"), "true");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("you may reach: web1, local"), "{err}");
}

#[test]
fn menu_with_arrows_and_with_digits() {
    let b = Bastion::start();
    // Arrow down to the second entry (local), then Enter.
    let mut t = Terminal::spawn(&b.ssh_bob("bob"), 24, 80);
    t.expect("choose a target");
    t.expect("2) local");
    t.send("\x1b[B");
    t.send("\r");
    t.expect("connecting to local");
    t.send("echo MENU-$((3*3))\r");
    t.expect("MENU-9");
    t.send("exit\r");
    assert_eq!(t.wait(), Some(0));
    b.wait_event(|e| e["kind"] == "session_start" && e["target"] == "local");

    // Digit 1 then Enter: web1.
    let mut t = Terminal::spawn(&b.ssh_pw("carol", CAROL_PW), 24, 80);
    t.expect("4) down");
    t.send("1\r");
    t.expect("connecting to web1");
    t.send("echo DIGIT-$((2*2))\r");
    t.expect("DIGIT-4");
    t.send("exit\r");
    assert_eq!(t.wait(), Some(0));
    b.wait_event(|e| e["kind"] == "session_start" && e["target"] == "web1" && e["user"] == "carol");
}

#[test]
fn leaving_the_menu_starts_nothing() {
    let b = Bastion::start();
    let mut t = Terminal::spawn(&b.ssh_bob("bob"), 24, 80);
    t.expect("choose a target");
    t.send("q");
    t.expect("no target chosen");
    assert_eq!(t.wait(), Some(1));
    // A later session's start is the sentinel: events are written in order.
    exec(b.ssh_bob("bob:web1"), "true");
    let starts = b.wait_count("session_start", 1);
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0]["target"], "web1");
}
