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
        let checkpoints = chain::Checkpoints {
            key: Some(key.clone()),
            every_events: 1000,
            every: Duration::from_secs(60),
        };
        let (audit, thread) =
            Audit::start((&path, "n1"), OnFailure::Refuse, checkpoints, None).unwrap();
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

/// Retention: rows older than the cutoff go, with their checkpoints and
/// sessions, and a signed marker takes their place; an open session keeps
/// its rows whatever their age; a recording deleted by retention is said
/// in the chain. `verify` passes after each pass, and fails when the
/// marker or the first row kept is tampered with.
#[test]
fn a_pruned_chain_verifies_from_its_marker() {
    use crate::audit::prune::Ask;
    use std::time::SystemTime;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let recordings = dir.path().join("recordings");
    std::fs::create_dir(&recordings).unwrap();
    let key = key();
    let day = Duration::from_secs(86_400);
    let ago = |days: u32| SystemTime::now() - day * days;
    let session = |id: &str, kind: Kind, days: u32| {
        let mut ev = Event::new(kind).user("bob");
        (ev.session, ev.target, ev.ts) = (Some(id.into()), Some("web1".into()), ago(days));
        ev
    };
    let cast = recordings.join("s1.cast");
    std::fs::write(&cast, "{\"version\": 2}\n").unwrap();
    let (sha, bytes) = chain::file_digest(&cast).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let run = |steps: &dyn Fn(&Audit) -> Vec<crate::audit::prune::Pruned>| {
        let checkpoints = chain::Checkpoints {
            key: Some(key.clone()),
            every_events: 2,
            every: Duration::from_secs(60),
        };
        let (audit, thread) =
            Audit::start((&path, "n1"), OnFailure::Refuse, checkpoints, None).unwrap();
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
    assert_eq!(done[0].through, Some(s2_start - 1));
    assert_eq!(done[0].events, (s2_start - 1) as u64);
    assert_eq!(done[0].sessions, 1);
    let first: i64 = conn
        .query_row("SELECT MIN(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    assert_eq!(first, s2_start);
    let report = verify(&path, &options(&key)).unwrap();
    assert!(report.broken.is_none(), "{}", report.line());
    assert_eq!(report.pruned_through, Some(s2_start - 1));
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
