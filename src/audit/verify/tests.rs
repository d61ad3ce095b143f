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
