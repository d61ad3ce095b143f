use crate::audit::Kind;
use std::time::Duration;

use rusqlite::{Connection, params};
use russh::keys::PrivateKey;

use super::*;
use crate::audit::{Audit, Event, chain, copies, db};
use crate::config::OnFailure;

/// The schema of the version before checkpoints were chained and session
/// rows were made from their events.
const OLD_SCHEMA: &str = "
CREATE TABLE sessions (id TEXT PRIMARY KEY, user TEXT NOT NULL, target TEXT NOT NULL,
    client_addr TEXT NOT NULL, started TEXT NOT NULL, ended TEXT, recording TEXT);
CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT NOT NULL, session TEXT,
    user TEXT, target TEXT, kind TEXT NOT NULL, fields TEXT NOT NULL, hash TEXT);
CREATE TABLE checkpoints (seq INTEGER PRIMARY KEY, ts TEXT NOT NULL, head TEXT NOT NULL,
    signature TEXT NOT NULL);
";

fn key() -> PrivateKey {
    PrivateKey::random(&mut rand::rng(), russh::keys::Algorithm::Ed25519).unwrap()
}

/// A database as the previous version left it: a session (its row's times
/// taken apart from its events', a few milliseconds off), chained rows,
/// and an unchained checkpoint over them.
fn old_database(path: &Path, key: &PrivateKey) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(OLD_SCHEMA).unwrap();
    let rows = [
        (
            "2026-01-01T00:00:00.010Z",
            "session_start",
            r#"{"client_addr":"127.0.0.1:5000","pty":false,"recording":null}"#,
        ),
        ("2026-01-01T00:00:01.000Z", "exec", r#"{"command":"true"}"#),
        (
            "2026-01-01T00:00:02.000Z",
            "session_end",
            r#"{"exit_status":0}"#,
        ),
    ];
    let mut prev = chain::genesis();
    for (i, (ts, kind, fields)) in rows.iter().enumerate() {
        let seq = i as i64 + 1;
        let row = chain::Row {
            seq,
            ts,
            session: Some("s1"),
            user: Some("bob"),
            target: Some("web1"),
            kind,
            fields,
        };
        prev = chain::link(&prev, &row);
        conn.execute(
            "INSERT INTO events (seq, ts, session, user, target, kind, fields, hash) VALUES (?1, ?2, 's1', 'bob', 'web1', ?3, ?4, ?5)",
            params![seq, ts, kind, fields, prev],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO sessions VALUES ('s1', 'bob', 'web1', '127.0.0.1:5000', '2026-01-01T00:00:00.004Z', '2026-01-01T00:00:02.003Z', NULL)",
        [],
    )
    .unwrap();
    let mut c = chain::Signed {
        seq: 3,
        head: prev,
        ts: "2026-01-01T00:00:03.000Z".into(),
        prev: None,
        signature: String::new(),
    };
    c.signature = chain::sign(key, &c.message()).unwrap();
    conn.execute(
        "INSERT INTO checkpoints VALUES (?1, ?2, ?3, ?4)",
        params![c.seq, c.ts, c.head, c.signature],
    )
    .unwrap();
}

/// The audit at `path` started as the bastion starts it (node `n1`),
/// signing with `key` every `every_events` events or minute.
fn signed(
    path: &Path,
    key: &PrivateKey,
    every_events: u64,
) -> (Audit, std::thread::JoinHandle<()>) {
    let checkpoints = chain::Checkpoints {
        key: Some(key.clone()),
        every_events,
        every: Duration::from_secs(60),
    };
    Audit::start((path, "n1"), OnFailure::Refuse, checkpoints, None).unwrap()
}

fn options(key: &PrivateKey) -> Options {
    Options::key(key.public_key().clone())
}

#[test]
fn a_database_of_the_previous_version_opens_verifies_and_chains_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let key = key();
    old_database(&path, &key);
    let report = verify(&path, &options(&key)).unwrap();
    assert!(report.broken.is_none(), "{}", report.line());
    // The new version opens it (its columns added), writes on, and its
    // first checkpoint names the old one.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (audit, thread) = signed(&path, &key, 1000);
        audit
            .event(Event::new(Kind::Exec).field("command", "ls"))
            .await;
        audit.flush().await;
        drop(audit);
        thread.join().unwrap();
    });
    let report = verify(&path, &options(&key)).unwrap();
    assert!(report.broken.is_none(), "{}", report.line());
    assert_eq!((report.events, report.copies), (4, 1), "{}", report.line());
    let conn = Connection::open(&path).unwrap();
    let last = db::checkpoints(&conn).unwrap().pop().unwrap();
    assert_eq!(last.prev.as_ref().unwrap().0, 3);
    assert_eq!(
        copies::read_head(&copies::head_path(&path)).unwrap(),
        Some(last)
    );
}

/// A session ends once: a second `session_end` (a reap of a session
/// already ended, to put a digest-less end last) is broken, though every
/// row is chained and signed.
#[test]
fn a_session_that_ends_twice_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let key = key();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (audit, thread) = signed(&path, &key, 1000);
        let ev = |kind| {
            let mut e = Event::new(kind);
            (e.session, e.user, e.target) =
                (Some("s1".into()), Some("bob".into()), Some("web1".into()));
            e
        };
        audit
            .event(ev(Kind::SessionStart).field("client_addr", "127.0.0.1:1"))
            .await;
        audit
            .event(ev(Kind::SessionEnd).field("reason", "client_closed"))
            .await;
        audit
            .event(
                ev(Kind::SessionEnd)
                    .field("reason", "node_reaped")
                    .field("recording_unreached", true),
            )
            .await;
        audit.flush().await;
        drop(audit);
        thread.join().unwrap();
    });
    let report = verify(&path, &options(&key)).unwrap();
    let (seq, what) = report.broken.clone().unwrap();
    assert_eq!(
        (seq, what.as_str()),
        (Some(3), "session s1 ends twice"),
        "{}",
        report.line()
    );
}

#[test]
fn the_unsigned_tail_is_bounded_by_the_checkpoint_interval() {
    let f = Freshness::of(1000, Duration::from_secs(60));
    assert_eq!(f.events, 2 * 1000 + db::BATCH as u64);
    assert_eq!(f.span, Duration::from_secs(120));
    // A zero in the config is read as the writer reads it: at least 1.
    assert_eq!(
        Freshness::of(0, Duration::ZERO).span,
        Duration::from_secs(2)
    );
}

#[test]
fn a_database_behind_its_head_file_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let key = key();
    let start = |path: &Path| {
        let checkpoints = chain::Checkpoints {
            key: Some(key.clone()),
            every_events: 1000,
            every: Duration::from_secs(60),
        };
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let (audit, thread) = Audit::start((path, "n1"), OnFailure::Refuse, checkpoints, None)?;
            audit
                .event(Event::new(Kind::Exec).field("command", "ls"))
                .await;
            audit.flush().await;
            drop(audit);
            thread.join().unwrap();
            Ok::<(), String>(())
        })
    };
    start(&path).unwrap();
    let old = dir.path().join("old.db");
    std::fs::copy(&path, &old).unwrap();
    start(&path).unwrap();
    std::fs::copy(&old, &path).unwrap();
    let e = start(&path).unwrap_err();
    assert!(e.contains("rolled back or cut"), "{e}");
}

/// A state directory for the retention tests: the database's path, the
/// recordings' directory with one recording (`s1.cast`) and its digest,
/// and the audit key.
struct Aged {
    dir: tempfile::TempDir,
    path: std::path::PathBuf,
    recordings: std::path::PathBuf,
    key: PrivateKey,
    cast: std::path::PathBuf,
    sha: String,
    bytes: u64,
}

fn aged() -> Aged {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let recordings = dir.path().join("recordings");
    std::fs::create_dir(&recordings).unwrap();
    let cast = recordings.join("s1.cast");
    std::fs::write(&cast, "{\"version\": 2}\n").unwrap();
    let (sha, bytes) = chain::file_digest(&cast).unwrap();
    Aged {
        dir,
        path,
        recordings,
        key: key(),
        cast,
        sha,
        bytes,
    }
}

/// `days` days ago.
fn ago(days: u32) -> std::time::SystemTime {
    std::time::SystemTime::now() - Duration::from_secs(86_400) * days
}

/// An event of bob's session `id` on web1, of `kind`, `days` old.
fn aged_event(id: &str, kind: Kind, days: u32) -> Event {
    let mut ev = Event::new(kind).user("bob");
    (ev.session, ev.target, ev.ts) = (Some(id.into()), Some("web1".into()), ago(days));
    ev
}

/// Retention: rows older than the cutoff go, with their checkpoints and
/// sessions, and a signed marker takes their place; an open session keeps
/// its rows whatever their age; a recording deleted by retention is said
/// in the chain. `verify` passes after each pass, and fails when the
/// marker or the first row kept is tampered with.
#[test]
fn a_pruned_chain_verifies_from_its_marker() {
    use crate::audit::prune::Ask;
    let Aged {
        dir,
        path,
        recordings,
        key,
        cast,
        sha,
        bytes,
    } = aged();
    let session = aged_event;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let run = |steps: &dyn Fn(&Audit) -> Vec<crate::audit::prune::Pruned>| {
        let (audit, thread) = signed(&path, &key, 2);
        let done = steps(&audit);
        drop(audit);
        thread.join().unwrap();
        done
    };
    let done = run(&|audit| {
        runtime.block_on(async {
            // s1: ten days ago, recorded, ended. s2: nine days ago, open.
            let start = session("s1", Kind::SessionStart, 10)
                .field("client_addr", "127.0.0.1:1")
                .field("recording", cast.display().to_string());
            audit.event(start).await;
            for _ in 0..5 {
                audit
                    .event(session("s1", Kind::Exec, 10).field("command", "ls"))
                    .await;
            }
            let end = session("s1", Kind::SessionEnd, 10)
                .field("recording_sha256", sha.clone())
                .field("recording_bytes", bytes);
            audit.event(end).await;
            // Signed right after s1's end, whatever the batches were: the
            // writer signs what is written before any pass (this one does
            // nothing else).
            let none = Ask {
                audit_before: None,
                recordings: None,
                bucket: false,
            };
            audit.prune(none).await.unwrap();
            audit
                .event(session("s2", Kind::SessionStart, 9).field("client_addr", "127.0.0.1:2"))
                .await;
            audit
                .event(session("s2", Kind::Exec, 9).field("command", "old"))
                .await;
            audit
                .event(Event::new(Kind::Exec).field("command", "new"))
                .await;
            // The recordings older than five days go; the rows stay.
            let recordings = Some((recordings.clone(), ago(5)));
            let kept = audit
                .prune(Ask {
                    audit_before: None,
                    recordings,
                    bucket: false,
                })
                .await
                .unwrap();
            audit.flush().await;
            // Its session's row says it was retention: verify passes
            // without the file.
            let report = verify(&path, &options(&key)).unwrap();
            assert!(report.broken.is_none(), "{}", report.line());
            // Then the rows older than five days, but the open session's.
            let p = audit
                .prune(Ask {
                    audit_before: Some(ago(5)),
                    recordings: None,
                    bucket: false,
                })
                .await
                .unwrap();
            audit
                .event(Event::new(Kind::Exec).field("command", "after"))
                .await;
            audit.flush().await;
            vec![kept, p]
        })
    });
    assert_eq!(done[0].recordings, 1);
    assert!(!cast.exists());
    let done = &done[1..];
    let conn = Connection::open(&path).unwrap();
    let s2_start: i64 = conn
        .query_row("SELECT start_seq FROM sessions WHERE id = 's2'", [], |r| {
            r.get(0)
        })
        .unwrap();
    // Up to a checkpoint, before the open session's start.
    let through = done[0].through.expect("nothing pruned");
    assert!(through < s2_start, "{through} {s2_start}");
    assert_eq!(done[0].events, through as u64);
    assert_eq!(done[0].sessions, 1);
    let first: i64 = conn
        .query_row("SELECT MIN(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(first, through + 1);
    let report = verify(&path, &options(&key)).unwrap();
    assert!(report.broken.is_none(), "{}", report.line());
    assert_eq!(report.pruned_through, Some(through));
    assert!(report.line().contains("pruned"), "{}", report.line());
    // A row deleted after the marker shows.
    let backup = dir.path().join("before-tamper.db");
    std::fs::copy(&path, &backup).unwrap();
    conn.execute("DELETE FROM events WHERE seq = ?1", [first])
        .unwrap();
    let report = verify(&path, &options(&key)).unwrap();
    let (_, what) = report.broken.clone().expect("a deleted first row passed");
    assert!(what.contains("first row"), "{what}");
    // So does a marker moved back to hide rows deleted after it.
    std::fs::copy(&backup, &path).unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute("UPDATE pruned SET seq = seq + 1", []).unwrap();
    let report = verify(&path, &options(&key)).unwrap();
    let (_, what) = report.broken.expect("a moved marker passed");
    assert!(what.contains("pruned marker"), "{what}");
}

/// What the hostile review of retention found: rows edited to look old
/// stop the pass (it relinks them to a signed checkpoint first); a pass
/// that deletes every row leaves a chain that goes on after a restart;
/// and the recording pass deletes only files of the recordings directory,
/// chosen from chained rows, whatever the sessions table says.
#[test]
fn retention_goes_by_the_chain_and_survives_deleting_everything() {
    use crate::audit::prune::Ask;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let recordings = dir.path().join("recordings");
    std::fs::create_dir(&recordings).unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let key = key();
    let old = |kind: Kind| aged_event("s1", kind, 10);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let start = || signed(&path, &key, 2);
    // Old rows, then new ones; a clean stop signs the head.
    let (audit, thread) = start();
    runtime.block_on(async {
        let start = old(Kind::SessionStart)
            .field("client_addr", "127.0.0.1:1")
            .field("recording", victim.display().to_string());
        audit.event(start).await;
        audit.event(old(Kind::SessionEnd)).await;
        for i in 0..4 {
            audit
                .event(Event::new(Kind::Exec).field("command", format!("new {i}")))
                .await;
        }
        audit.flush().await;
    });
    drop(audit);
    thread.join().unwrap();
    // Every row made to look old: the pass finds the chain broken and
    // deletes nothing.
    let conn = Connection::open(&path).unwrap();
    conn.execute("UPDATE events SET ts = '1970-01-01T00:00:00.000Z'", [])
        .unwrap();
    let (audit, thread) = start();
    let refused = runtime.block_on(audit.prune(Ask {
        audit_before: Some(ago(5)),
        recordings: None,
        bucket: false,
    }));
    drop(audit);
    thread.join().unwrap();
    let e = refused.expect_err("a pass over edited rows went on");
    assert!(e.contains("the chain is broken at seq 1"), "{e}");
    assert_eq!(
        conn.query_row("SELECT COUNT(*) FROM events", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        6
    );
    assert!(super::super::prune::marker(&conn).unwrap().is_none());
    drop(conn);
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(copies::head_path(&path)).unwrap();
    // Honest rows, all old, and a session row pointed at a file outside
    // the recordings directory: the recording pass leaves it, and the
    // rows pass deletes every row; the chain goes on after a restart.
    let (audit, thread) = start();
    runtime.block_on(async {
        let start = old(Kind::SessionStart)
            .field("client_addr", "127.0.0.1:1")
            .field("recording", victim.display().to_string());
        audit.event(start).await;
        audit.event(old(Kind::Exec).field("command", "ls")).await;
        audit.event(old(Kind::SessionEnd)).await;
        audit.flush().await;
    });
    drop(audit);
    thread.join().unwrap();
    let (audit, thread) = start();
    let done = runtime.block_on(async {
        let recordings = Some((recordings.clone(), ago(5)));
        let kept = audit
            .prune(Ask {
                audit_before: None,
                recordings,
                bucket: false,
            })
            .await
            .unwrap();
        let rows = audit
            .prune(Ask {
                audit_before: Some(ago(5)),
                recordings: None,
                bucket: false,
            })
            .await
            .unwrap();
        audit.flush().await;
        (kept, rows)
    });
    drop(audit);
    thread.join().unwrap();
    assert!(
        victim.exists(),
        "a file outside the recordings directory was deleted"
    );
    let conn = Connection::open(&path).unwrap();
    let left: i64 = conn
        .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
        .unwrap();
    assert!(done.1.through.is_some(), "{:?}", done.1);
    let report = verify(&path, &options(&key)).unwrap();
    assert!(report.broken.is_none(), "{}", report.line());
    let (audit, thread) = start();
    runtime.block_on(async {
        audit
            .event(Event::new(Kind::Exec).field("command", "after"))
            .await;
        audit.flush().await;
    });
    drop(audit);
    thread.join().unwrap();
    let report = verify(&path, &options(&key)).unwrap();
    assert!(
        report.broken.is_none(),
        "{} ({left} rows were left)",
        report.line()
    );
    assert_eq!(report.events, (left + 1) as u64, "{}", report.line());
}

/// What a retention pass costs (run by hand: `cargo test --release --lib
/// retention_costs -- --ignored --nocapture`): 100,000 rows ten days old,
/// then a pass (two chunks of at most 50,000) and verify from the marker.
/// Prints the figures; asserts only that it pruned and verifies.
#[test]
#[ignore]
fn retention_costs() {
    use crate::audit::prune::Ask;
    use std::time::{Instant, SystemTime};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let key = key();
    let (audit, thread) = signed(&path, &key, 1000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let old = SystemTime::now() - Duration::from_secs(10 * 86_400);
    let n = 100_000;
    let written = Instant::now();
    let (chunks, pass) = runtime.block_on(async {
        for i in 0..n {
            let mut ev = Event::new(Kind::Exec).field("command", format!("ls /srv/{i}"));
            ev.ts = old;
            audit.event(ev).await;
        }
        audit.flush().await;
        let written = written.elapsed();
        let began = Instant::now();
        let mut chunks = 0;
        let before = Some(SystemTime::now() - Duration::from_secs(5 * 86_400));
        while audit
            .prune(Ask {
                audit_before: before,
                recordings: None,
                bucket: false,
            })
            .await
            .unwrap()
            .through
            .is_some()
        {
            chunks += 1;
        }
        eprintln!("wrote {n} rows in {written:?}");
        (chunks, began.elapsed())
    });
    drop(audit);
    thread.join().unwrap();
    let began = Instant::now();
    let report = verify(&path, &options(&key)).unwrap();
    eprintln!(
        "pruned {n} rows in {chunks} passes: {pass:?} ({:.1} µs a row); verify after: {:?}; {}",
        pass.as_secs_f64() * 1e6 / n as f64,
        began.elapsed(),
        report.line()
    );
    assert!(chunks >= 2 && report.broken.is_none());
}

/// The second review of retention: what is not chained, or not signed,
/// decides nothing. A junk marker stops the pass; a session_end put past
/// the chain's signed part does not end a session for it; and rows made
/// to look old (their hashes no longer link to a signed checkpoint) stop
/// the recordings pass before it deletes anything.
#[test]
fn retention_is_not_fooled_by_what_is_not_chained() {
    use crate::audit::prune::Ask;
    let Aged {
        dir: _dir,
        path,
        recordings,
        key,
        cast,
        sha,
        bytes,
    } = aged();
    let at = aged_event;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let session = |ask: Option<Ask>, steps: &dyn Fn(&Audit)| {
        let (audit, thread) = signed(&path, &key, 2);
        steps(&audit);
        let done = ask.map(|a| runtime.block_on(audit.prune(a)));
        runtime.block_on(audit.flush());
        drop(audit);
        thread.join().unwrap();
        done
    };
    // s2: started ten days ago, still open, and a session_end for it put
    // past the chain: s2 is still open for the pass. Then s1: recorded,
    // ended today.
    let conn = Connection::open(&path).unwrap();
    let rows = Ask {
        audit_before: Some(ago(5)),
        recordings: None,
        bucket: false,
    };
    let done = session(Some(rows.clone()), &|audit| {
        runtime.block_on(async {
            audit
                .event(at("s2", Kind::SessionStart, 10).field("client_addr", "127.0.0.1:2"))
                .await;
            audit
                .event(at("s2", Kind::Exec, 10).field("command", "old"))
                .await;
            audit.flush().await;
        });
        Connection::open(&path)
            .unwrap()
            .execute(
                "INSERT INTO events (seq, ts, session, user, target, kind, fields) VALUES (1000, '1970-01-01T00:00:00.000Z', 's2', 'bob', 'web1', 'session_end', '{}')",
                [],
            )
            .unwrap();
    });
    assert_eq!(
        done.unwrap().unwrap().through,
        None,
        "an open session's rows went"
    );
    conn.execute("DELETE FROM events WHERE seq = 1000", [])
        .unwrap();
    session(None, &|audit| {
        runtime.block_on(async {
            let start = at("s1", Kind::SessionStart, 0)
                .field("client_addr", "127.0.0.1:1")
                .field("recording", cast.display().to_string());
            audit.event(start).await;
            let end = at("s1", Kind::SessionEnd, 0)
                .field("recording_sha256", sha.clone())
                .field("recording_bytes", bytes);
            audit.event(end).await;
        })
    });
    // A marker no key signed stops the pass.
    let hash: String = conn
        .query_row("SELECT hash FROM events WHERE seq = 1", [], |r| r.get(0))
        .unwrap();
    conn.execute(
        "INSERT INTO pruned (id, seq, head, cp_seq, cp, ts, signature) VALUES (1, 1, ?1, 0, '', '', 'junk')",
        [&hash],
    )
    .unwrap();
    let e = session(Some(rows), &|_| {}).unwrap().unwrap_err();
    assert!(e.contains("pruned marker is not signed"), "{e}");
    conn.execute("DELETE FROM pruned", []).unwrap();
    // Every row made to look old (without the audit key, the chain's
    // hashes cannot be made to agree with a signed checkpoint): the pass
    // refuses, and the recording stays.
    let times: Vec<(i64, String)> = conn
        .prepare("SELECT seq, ts FROM events")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    conn.execute("UPDATE events SET ts = '1970-01-01T00:00:00.000Z'", [])
        .unwrap();
    let recordings_ask = Ask {
        audit_before: None,
        recordings: Some((recordings.clone(), ago(5))),
        bucket: false,
    };
    let e = session(Some(recordings_ask), &|_| {}).unwrap().unwrap_err();
    assert!(e.contains("the chain is broken"), "{e}");
    assert!(cast.exists(), "a recording deleted on rows made old");
    for (seq, ts) in &times {
        conn.execute("UPDATE events SET ts = ?2 WHERE seq = ?1", params![seq, ts])
            .unwrap();
    }
    let report = verify(&path, &options(&key)).unwrap();
    assert!(report.broken.is_none(), "{:?}", report.broken);
}
