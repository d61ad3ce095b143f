//! Several bastions on one PostgreSQL audit (issue 37): two walissh nodes,
//! each with its own state directory but the same host and audit keys,
//! write one hash chain into a real PostgreSQL server (Debian's, a
//! throwaway cluster), and every node's CLI reads every node's rows. A
//! node killed with SIGKILL ends its own sessions when it starts again; a
//! node that will not come back is reaped from another.

use serde_json::Value;

use crate::harness::*;

/// A throwaway PostgreSQL and its URL; None (said) where it cannot run.
fn postgres() -> Option<(Postgres, String)> {
    if !is_root() {
        eprintln!("skipped: running PostgreSQL as its own account needs root (CI runs as root)");
        return None;
    }
    let Some(pg) = Postgres::start(free_port()) else {
        eprintln!("skipped: no PostgreSQL server installed");
        return None;
    };
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", pg.port);
    Some((pg, url))
}

/// A node named `node` on the PostgreSQL at `url`, with the console and
/// an auditor (erin), and `extra` config.
fn node(url: &str, node: &str, extra: &str) -> Opts {
    Opts {
        audit_toml: format!("database = \"{url}\""),
        server_toml: format!("node_name = \"{node}\""),
        extra_toml: format!(
            "{extra}\n[web]\nlisten = \"127.0.0.1:0\"\n\n[[users]]\nname = \"erin\"\npassword_hash = \"{}\"\nrole = \"auditor\"\n",
            hash_of(crate::web::ERIN_PW)
        ),
        ..Opts::default()
    }
}

/// `opts`, with the host and audit keys of the node whose state is `from`
/// copied in before it starts, as an operator would copy them.
fn keys_of(from: std::path::PathBuf, opts: Opts) -> Opts {
    Opts {
        prepare: Some(Box::new(move |state, _| {
            std::fs::create_dir_all(state).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(state, std::fs::Permissions::from_mode(0o700)).unwrap();
            for key in ["audit_key", "host_ed25519"] {
                std::fs::copy(from.join(key), state.join(key)).unwrap();
            }
        })),
        ..opts
    }
}

/// Two nodes, `n1` and `n2`, on the PostgreSQL at `url`; n2 gets n1's host
/// and audit keys.
fn two_nodes(url: &str) -> (Bastion, Bastion) {
    let n1 = Bastion::start_with(node(url, "n1", ""));
    let n2 = Bastion::start_with(keys_of(n1.state.clone(), node(url, "n2", "")));
    (n1, n2)
}

/// `walissh serve` on `b`'s config (changed by `edit`) with a state
/// directory of its own, as a second machine would: it must refuse to
/// start, saying `why`.
fn refused_twin(b: &Bastion, edit: impl Fn(String) -> String, why: &str) {
    let twin = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&b.config).unwrap();
    let state = twin.path().join("state");
    let text = edit(text.replace(&b.state.display().to_string(), &state.display().to_string()));
    std::fs::write(twin.path().join("w.toml"), text).unwrap();
    let out = std::process::Command::new(walissh_bin())
        .args(["serve", "--config"])
        .arg(twin.path().join("w.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(why), "{}", stderr(&out));
}

/// erin (an auditor) logged in to a node's console.
struct Erin {
    base: String,
    cookie: String,
}

impl Erin {
    fn on(b: &Bastion) -> Erin {
        let base = b.web_url();
        let login = crate::web::log_in(&base, "erin", crate::web::ERIN_PW);
        let cookie = crate::web::cookie_of(&login);
        Erin { base, cookie }
    }

    /// The console's answer to `path`, as erin gets it.
    fn get(&self, path: &str) -> crate::web::Got {
        let cookie = format!("Cookie: {}", self.cookie);
        crate::web::curl(&format!("{}{path}", self.base), &["-H", &cookie])
    }
}

fn nodes_of(rows: &[Value]) -> std::collections::BTreeSet<String> {
    rows.iter()
        .filter_map(|r| r["node"].as_str().map(str::to_string))
        .collect()
}

fn verifies(b: &Bastion) -> Value {
    let out = b.cli_any(&["audit", "verify", "--json"]);
    let report: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert!(out.status.success(), "{report}");
    assert_eq!(report["broken"], Value::Null, "{report}");
    report
}

#[test]
fn two_nodes_write_one_chain_into_postgresql() {
    let Some((_pg, url)) = postgres() else {
        return;
    };
    let (mut n1, mut n2) = two_nodes(&url);
    // Both nodes at once, so their batches interleave in the chain.
    std::thread::scope(|s| {
        for (name, b) in [("A", &n1), ("B", &n2)] {
            s.spawn(move || {
                for i in 0..8 {
                    let out = exec(b.ssh_bob("bob:web1"), format!("echo {name}-$((40+{i}))"));
                    assert_eq!(
                        stdout(&out),
                        format!("{name}-{}\n", 40 + i),
                        "{}",
                        stderr(&out)
                    );
                }
            });
        }
    });
    // Every node reads every node's rows, and the one chain verifies.
    for b in [&n1, &n2] {
        let execs: Vec<Value> = b
            .audit()
            .into_iter()
            .filter(|e| e["kind"] == "exec")
            .collect();
        assert_eq!(execs.len(), 16, "{execs:?}");
        assert_eq!(nodes_of(&execs), ["n1", "n2"].map(String::from).into());
        let sessions = b.sessions();
        assert_eq!(sessions.len(), 16, "{sessions:?}");
        assert_eq!(nodes_of(&sessions), ["n1", "n2"].map(String::from).into());
        let report = verifies(b);
        assert!(report["events"].as_u64().unwrap() >= 16 * 3, "{report}");
    }

    // n1's console lists n2's sessions too.
    let theirs: Vec<String> = n2
        .sessions()
        .iter()
        .filter(|s| s["node"] == "n2")
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    let erin = Erin::on(&n1);
    let page = erin.get("/sessions");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        theirs.iter().all(|id| page.body.contains(id.as_str())),
        "{theirs:?}: {}",
        page.body
    );

    // A session on n2 is stopped from n1 (the database carries the ask).
    let mut on2 = Terminal::spawn(&n2.ssh_bob("bob:web1"), 24, 80);
    on2.send("echo ON-TWO-$((1+2))\r");
    on2.expect("ON-TWO-3");
    let live = json_lines(&n1.cli(&["sessions", "--active", "--json"]));
    let id = live
        .iter()
        .find(|s| s["node"] == "n2")
        .and_then(|s| s["id"].as_str())
        .unwrap_or_else(|| panic!("n2's session is not listed live on n1: {live:?}"))
        .to_string();
    // n1's console copy has it live; once it ends, the next page says so
    // (the copy takes again what it had open).
    let page_of = |id: &str| erin.get(&format!("/sessions/{id}")).body;
    assert!(page_of(&id).contains("Live:"));
    let out = n1.cli(&["sessions", "kill", &id, "--reason", "moved to n1"]);
    assert!(stdout(&out).contains(&id), "{}", stdout(&out));
    on2.expect("ended by an administrator: moved to n1");
    assert!(on2.wait().is_some());
    n1.wait_event(|e| e["kind"] == "session_end" && e["session"] == id.as_str());
    assert!(!page_of(&id).contains("Live:"));
    let killed = n1.wait_event(|e| e["kind"] == "session_killed" && e["session"] == id.as_str());
    assert_eq!(
        (killed["node"].as_str(), killed["via"].as_str()),
        (Some("n2"), Some("cli")),
        "{killed}"
    );
    assert_eq!(killed["by"], format!("unix:{}", me()), "{killed}");

    // A second bastion under a running node's name would end that node's
    // live sessions at its start: it is refused.
    refused_twin(&n1, |t| t, "node name n1 is held by a running bastion");

    // n1 dies with a session open: n2 still shows it live, as n1's; n1's
    // next start ends it, and only it.
    let mut t = Terminal::spawn(&n1.ssh_bob("bob:web1"), 24, 80);
    t.send("echo ON-N1-$((1+1))\r");
    t.expect("ON-N1-2");
    let mut t2 = Terminal::spawn(&n2.ssh_bob("bob:web1"), 24, 80);
    t2.send("echo ON-N2-$((2+2))\r");
    t2.expect("ON-N2-4");
    n1.kill();
    let _ = t.wait();
    let live = json_lines(&n2.cli(&["sessions", "--active", "--json"]));
    assert_eq!(
        nodes_of(&live),
        ["n1", "n2"].map(String::from).into(),
        "{live:?}"
    );
    n1.restart();
    let ended = n2.wait_event(|e| e["kind"] == "session_end" && e["reason"] == "bastion_restart");
    assert_eq!(ended["node"], "n1", "{ended}");
    let live = json_lines(&n1.cli(&["sessions", "--active", "--json"]));
    assert_eq!(nodes_of(&live), ["n2"].map(String::from).into(), "{live:?}");

    // n2 dies and stays down: reaped from n1, by name; not while it runs.
    let alive = n1.cli_any(&["sessions", "--reap", "n2"]);
    assert!(!alive.status.success());
    assert!(
        stderr(&alive).contains("node n2 is running"),
        "{}",
        stderr(&alive)
    );
    n2.kill();
    let _ = t2.wait();
    let refused = n1.cli_any(&["sessions", "--reap", "n1"]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("n1 is this node"),
        "{}",
        stderr(&refused)
    );
    // Its recording is out of n1's reach (another machine's disk): the end
    // says so instead of carrying a digest.
    let open = json_lines(&n1.cli(&["sessions", "--active", "--json"]));
    assert_eq!(open.len(), 1, "{open:?}");
    // A stop cannot reach a node that is down: said, with what to do.
    let id2 = open[0]["id"].as_str().unwrap();
    let down = n1.cli_any(&["sessions", "kill", id2, "--reason", "x"]);
    assert!(!down.status.success());
    assert!(
        stderr(&down)
            .contains("which is not running: end its sessions with `walissh sessions --reap n2`"),
        "{}",
        stderr(&down)
    );
    std::fs::remove_file(open[0]["recording"].as_str().unwrap()).unwrap();
    let out = n1.cli(&["sessions", "--reap", "n2"]);
    assert!(
        stdout(&out).starts_with("1 session(s) of node n2 ended"),
        "{}",
        stdout(&out)
    );
    let reaped = n1.wait_event(|e| e["reason"] == "node_reaped");
    assert_eq!(
        (reaped["reaped_node"].as_str(), reaped["node"].as_str()),
        (Some("n2"), Some("n1"))
    );
    assert_eq!(reaped["recording_unreached"], true, "{reaped}");
    assert_eq!(reaped["by"], format!("unix:{}", me()), "{reaped}");
    assert!(json_lines(&n1.cli(&["sessions", "--active", "--json"])).is_empty());
    verifies(&n1);
}

/// `walissh migrate` brings a new database to the schema and says so; a
/// second run has nothing to do. A password in the URL is refused, naming
/// the file, line and key, without echoing it.
#[test]
fn migrate_makes_the_schema_once() {
    let Some((_pg, url)) = postgres() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("walissh.toml");
    let text = format!(
        "[server]\nstate_dir = \"{}\"\n[audit]\ndatabase = \"{url}\"\n",
        dir.path().join("state").display()
    );
    std::fs::write(&config, &text).unwrap();
    let migrate = || {
        let out = std::process::Command::new(walissh_bin())
            .args(["migrate", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    assert!(migrate().contains("applied V1__audit"));
    assert!(migrate().contains("schema up to date"));
    let with_password = text.replace("postgres@", "postgres:s3cret@");
    let (code, said) = check_config(&with_password);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(":4: key `audit.database`: no password here"),
        "{said}"
    );
    assert!(!said.contains("s3cret"), "{said}");
}

/// PostgreSQL goes down under a live session and comes back: under
/// `on_failure = "refuse"` new sessions are refused with one line and
/// /healthz says 503 meanwhile; the rows of the outage are written once it
/// is back, without a restart, and the chain verifies.
#[test]
fn a_postgresql_outage_is_refused_then_caught_up() {
    let Some((pg, url)) = postgres() else {
        return;
    };
    let b = Bastion::start_with(Opts {
        audit_toml: format!("database = \"{url}\""),
        extra_toml: "[web]\nlisten = \"127.0.0.1:0\"\n".to_string(),
        ..Opts::default()
    });
    let mut t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo BEFORE-$((1+1))\r");
    t.expect("BEFORE-2");
    b.wait_event(|e| e["command"] == "echo BEFORE-$((1+1))");

    pg.stop();
    t.send("echo DURING-$((2+2))\r");
    t.expect("DURING-4");
    let broken = b.log.wait_for("audit database write failed");
    let health = format!("{}/healthz", b.web_url());
    assert_eq!(http_status(&health), "503");
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo NEW-$((3+3))");
    assert!(!stdout(&out).contains("NEW-6"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("cannot be written"),
        "{}",
        stderr(&out)
    );
    // The readers say what is wrong in one line.
    let down = b.cli_any(&["audit"]);
    assert!(!down.status.success());
    assert!(stderr(&down).contains(&url), "{}", stderr(&down));

    pg.resume();
    caught_up(&b, broken, &health);
    t.send("exit\r");
    t.wait();
    b.wait_event(|e| e["kind"] == "session_end" && e["user"] == "bob");
    assert!(
        b.audit()
            .iter()
            .any(|e| e["kind"] == "command" && e["command"] == "echo DURING-$((2+2))"),
        "the outage's command row is missing"
    );
    verifies(&b);
}

/// Runs `sql` on the test's PostgreSQL as its superuser, around walissh.
fn psql(url: &str, sql: &str) -> String {
    let out = std::process::Command::new("psql")
        .args([url, "-Atqc", sql])
        .output()
        .unwrap();
    assert!(out.status.success(), "{sql}: {}", stderr(&out));
    stdout(&out)
}

/// The hash chain has no secret: whoever can write the database can
/// rewrite its unsigned tail and link it again. A node links after a head
/// only when the last writer signed it with the audit key, so such a tail
/// is refused (and new sessions with it, under `refuse`), never signed
/// over; and a node with another audit key does not start.
#[test]
fn a_head_changed_around_walissh_is_never_linked_after() {
    let Some((_pg, url)) = postgres() else {
        return;
    };
    let b = Bastion::start_with(Opts {
        audit_toml: format!("database = \"{url}\""),
        ..Opts::default()
    });
    let out = exec(b.ssh_bob("bob:web1"), "echo FIRST-$((1+1))");
    assert_eq!(stdout(&out), "FIRST-2\n");
    b.wait_count("session_end", 1);
    // Another node's key: refused at its start, naming the fix.
    let stranger = |t: String| t.replacen("[server]\n", "[server]\nnode_name = \"stranger\"\n", 1);
    refused_twin(&b, stranger, "is not signed with this node's audit key");

    // The last row goes, behind walissh's back: the head no longer is the
    // one signed, and nothing is linked after it.
    let last = psql(
        &url,
        "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events) RETURNING kind",
    );
    assert_eq!(last.trim(), "session_end");
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo NEW-$((3+3))");
    assert!(!stdout(&out).contains("NEW-6"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("cannot be written"),
        "{}",
        stderr(&out)
    );
    b.log
        .wait_for("around walissh; nothing is linked after them");
    let count = psql(&url, "SELECT count(*) FROM events WHERE \"user\" = 'alice'");
    assert_eq!(count.trim(), "0", "a row was linked after the changed head");
}

/// sha256 of `bytes`, as the audit writes digests.
fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Recordings go to a real S3-compatible server (Garage): each uploaded
/// when its session ends, the object's digest the one its `session_end`
/// holds; an upload that fails (the server down) is done by the next start
/// from the local spool; and `play` and `audit verify` read the objects
/// when the local copies are gone.
#[test]
fn recordings_go_to_a_real_object_store() {
    let Some(mut garage) = Garage::start() else {
        eprintln!("skipped: no garage (tools/test-peers installs it)");
        return;
    };
    let mut b = Bastion::start_with(Opts {
        extra_toml: format!(
            "[recordings]\nstore = \"s3://casts/walissh\"\n\n[web]\nlisten = \"127.0.0.1:0\"\n\n\
             [[users]]\nname = \"erin\"\npassword_hash = \"{}\"\nrole = \"auditor\"\n",
            hash_of(crate::web::ERIN_PW)
        ),
        env: garage.env(),
        ..Opts::default()
    });
    let mut t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo UPLOADED-$((6*7))\r");
    t.expect("UPLOADED-42");
    t.send("exit\r");
    t.wait();
    let end = b.wait_kind("session_end");
    let session = end["session"].as_str().unwrap().to_string();
    let name = format!("{session}.cast");
    let key = format!("walissh/{name}");
    wait_until(|| garage.object(&key).is_some(), "the recording's object");
    let object = garage.object(&key).unwrap();
    assert_eq!(sha256(&object), end["recording_sha256"].as_str().unwrap());
    assert_eq!(
        object.len() as u64,
        end["recording_bytes"].as_u64().unwrap()
    );
    assert!(String::from_utf8_lossy(&object).contains("UPLOADED-42"));

    // The store goes down: the next recording waits in the spool, and the
    // next start uploads it.
    garage.stop();
    let out = exec(b.ssh_bob("bob:web1"), "echo SPOOLED-$((2+3))");
    assert_eq!(stdout(&out), "SPOOLED-5\n");
    b.log.wait_for("recording not uploaded; tried again");
    let ends = b.wait_count("session_end", 2);
    let spooled = ends[1]["session"].as_str().unwrap().to_string();
    assert!(b.terminate().success());
    garage.resume();
    b.restart();
    let key = format!("walissh/{spooled}.cast");
    wait_until(
        || garage.object(&key).is_some(),
        "the spooled recording's object",
    );
    assert_eq!(
        sha256(&garage.object(&key).unwrap()),
        ends[1]["recording_sha256"].as_str().unwrap()
    );

    // Local copies gone: the objects are read instead.
    for id in [&session, &spooled] {
        std::fs::remove_file(b.state.join("recordings").join(format!("{id}.cast"))).unwrap();
    }
    let played = b.cli(&["play", &session, "--speed", "1000"]);
    assert!(
        stdout(&played).contains("UPLOADED-42"),
        "{}",
        stdout(&played)
    );
    let report: Value =
        serde_json::from_str(stdout(&b.cli(&["audit", "verify", "--json"])).trim()).unwrap();
    assert_eq!(
        (report["broken"].clone(), report["recordings"].as_u64()),
        (Value::Null, Some(2)),
        "{report}"
    );
    // The console replays it from the bucket, sealed.
    let erin = Erin::on(&b);
    let page = erin.get(&format!("/sessions/{session}"));
    assert!(page.body.contains("Recording verified"), "{}", page.body);
    let cast = erin.get(&format!("/sessions/{session}/cast"));
    assert_eq!(cast.status, 200);
    assert!(cast.body.contains("UPLOADED-42"));

    // An object changed in the bucket is neither played nor verified.
    let forged = b.dir.path().join("forged.cast");
    let text = String::from_utf8(object)
        .unwrap()
        .replace("UPLOADED-42", "UPLOADED-43");
    std::fs::write(&forged, text).unwrap();
    garage.put(&format!("walissh/{name}"), &forged);
    let refused = b.cli_any(&["play", &session]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("is not the recording the audit holds"),
        "{}",
        stderr(&refused)
    );
    assert!(!stdout(&refused).contains("UPLOADED-43"));
    std::fs::remove_dir_all(b.state.join("fetched")).unwrap();
    let page = erin.get(&format!("/sessions/{session}"));
    assert!(page.body.contains("does NOT match"), "{}", page.body);
    let broken = b.cli_any(&["audit", "verify", "--json"]);
    assert!(!broken.status.success());
    assert!(
        stdout(&broken).contains("was changed after it closed"),
        "{}",
        stdout(&broken)
    );
}

/// A live session's recording reaches the bucket in parts while it runs
/// (every `upload_every_s`), so a node killed mid-session loses at most
/// that much of it: the session is played from its parts joined. The
/// node's next start ends the session, uploads the whole recording (the
/// digest its end holds) and deletes the parts.
#[test]
fn a_live_recording_reaches_the_bucket_in_parts() {
    let Some(garage) = Garage::start() else {
        eprintln!("skipped: no garage (tools/test-peers installs it)");
        return;
    };
    let mut b = Bastion::start_with(Opts {
        extra_toml: "[recordings]\nstore = \"s3://casts/walissh\"\nupload_every_s = 1\n".into(),
        env: garage.env(),
        ..Opts::default()
    });
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo LIVE-$((6*7))\r");
    t.expect("LIVE-42");
    let session = b.wait_kind("session_start")["session"]
        .as_str()
        .unwrap()
        .to_string();
    let name = format!("{session}.cast");
    let parts = format!("walissh/parts/{name}/");
    let joined = || -> String {
        let keys = garage.list(&parts);
        let bytes: Vec<u8> = keys
            .iter()
            .flat_map(|k| garage.object(k).unwrap())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    wait_until(
        || joined().contains("LIVE-42"),
        "the live output in the parts",
    );
    assert!(garage.object(&format!("walissh/{name}")).is_none());

    // The node dies with the session open, and its disk with it: the
    // parts are what is left, and play joins them.
    b.kill();
    drop(t);
    let local = b.state.join("recordings").join(&name);
    let aside = b.dir.path().join("aside.cast");
    std::fs::rename(&local, &aside).unwrap();
    let played = b.cli(&["play", &session, "--speed", "1000"]);
    assert!(stdout(&played).contains("LIVE-42"), "{}", stdout(&played));
    assert!(
        stderr(&played).contains("played unverified"),
        "{}",
        stderr(&played)
    );

    // The disk comes back: the next start ends the session and uploads
    // the whole, and the parts go.
    std::fs::rename(&aside, &local).unwrap();
    b.restart();
    let end = b.wait_kind("session_end");
    let key = format!("walissh/{name}");
    wait_until(|| garage.object(&key).is_some(), "the whole recording");
    assert_eq!(
        sha256(&garage.object(&key).unwrap()),
        end["recording_sha256"].as_str().unwrap()
    );
    wait_until(|| garage.list(&parts).is_empty(), "the parts deleted");
}

/// A session on n2, watched from n1's console: relayed through the
/// database (sealed with a key drawn from the shared audit key), the
/// recording so far, then a line typed over SSH as it comes, then the end
/// with the session. The page shows it live; n2, which carries it, writes
/// `session_watched` with the node that asked.
#[test]
fn a_session_on_another_node_is_watched_from_this_ones_console() {
    use crate::live::{closed, read_until, rt, view_request};
    let Some((_pg, url)) = postgres() else {
        return;
    };
    let (n1, n2) = two_nodes(&url);
    let t = Terminal::spawn(&n2.ssh_bob("bob:web1"), 24, 80);
    t.send("echo THERE-$((2*5))\r");
    t.expect("THERE-10");
    let id = n2.wait_kind("session_start")["session"]
        .as_str()
        .unwrap()
        .to_string();
    let erin = Erin::on(&n1);
    let page = erin.get(&format!("/sessions/{id}"));
    assert!(
        page.body
            .contains(&format!("data-live=\"/sessions/{id}/watch\"")),
        "{}",
        page.body
    );
    rt().block_on(async {
        let (mut view, _) = tokio_tungstenite::connect_async(view_request(
            (&erin.base, &id),
            Some(&erin.cookie),
            &erin.base,
        ))
        .await
        .expect("the view of n2's session opens on n1");
        let mut seen = String::new();
        read_until(&mut view, &mut seen, "THERE-10").await;
        t.send("echo RELAYED-$((4*4))\r");
        read_until(&mut view, &mut seen, "RELAYED-16").await;
        t.send("exit\r");
        assert_eq!(closed(&mut view).await, 1000);
    });
    let watched = n2.wait_kind("session_watched");
    assert_eq!(
        (
            watched["session"].as_str(),
            watched["by"].as_str(),
            watched["via_node"].as_str(),
            watched["node"].as_str()
        ),
        (Some(id.as_str()), Some("erin"), Some("n1"), Some("n2")),
        "{watched}"
    );
}

/// The whole deployment at once: PostgreSQL, Garage, two nodes sharing
/// the host and audit keys and the bucket, HAProxy in TCP mode in front.
/// Logins through HAProxy reach both nodes; commands and an agent
/// question run; n1 is killed with SIGKILL and logins go on through n2;
/// every session and command row is in PostgreSQL, every recording in the
/// bucket with the chain's digest, and `audit verify` passes.
#[test]
fn the_cluster_behind_haproxy_outlives_a_node() {
    use crate::model::{Model, Reply, answer};
    let Some((_pg, url)) = postgres() else {
        return;
    };
    let Some(garage) = Garage::start() else {
        eprintln!("skipped: no garage (tools/test-peers installs it)");
        return;
    };
    let model = Model::start(vec![Reply::Sse(answer("Both nodes answer."))]);
    let opts = |name: &str| Opts {
        env: garage.env(),
        llm_url: Some(model.url()),
        ..node(&url, name, "[recordings]\nstore = \"s3://casts/walissh\"\n")
    };
    let mut n1 = Bastion::start_with(opts("n1"));
    // The same config on both: bob's key too.
    let n2 = Bastion::start_with(Opts {
        bob_key: Some(n1.bob_key.clone()),
        ..keys_of(n1.state.clone(), opts("n2"))
    });
    let Some(lb) = Haproxy::start(&[n1.port, n2.port]) else {
        eprintln!("skipped: no haproxy (tools/test-peers installs it)");
        return;
    };
    let through = |i: usize| {
        let out = exec(n2.ssh_bob_at(lb.port, "bob:web1"), format!("echo LB-{i}"));
        assert_eq!(stdout(&out), format!("LB-{i}\n"), "{}", stderr(&out));
    };
    for i in 0..8 {
        through(i);
    }
    let mut t = crate::agent::ready(&n2.ssh_bob_at(lb.port, "bob:web1"));
    let at = crate::agent::ask(&t, "? are both nodes up");
    t.expect_from("Both nodes answer.", at);
    t.send("exit\r");
    assert!(t.wait().is_some());
    let ends = n2.wait_count("session_end", 9);
    assert_eq!(
        nodes_of(&ends),
        ["n1", "n2"].map(String::from).into(),
        "{ends:?}"
    );
    n2.wait_kind("ai_answer");
    let object = |id: &str| garage.object(&format!("walissh/{id}.cast"));
    for end in &ends {
        let id = end["session"].as_str().unwrap();
        wait_until(|| object(id).is_some(), "every recording in the bucket");
    }

    // n1 dies: HAProxy sends the next logins on to n2.
    n1.kill();
    for i in 8..12 {
        through(i);
    }
    let ends = n2.wait_count("session_end", 13);
    assert_eq!(psql(&url, "SELECT count(*) FROM sessions").trim(), "13");
    let commands = psql(&url, "SELECT count(*) FROM events WHERE kind = 'exec'");
    assert_eq!(commands.trim(), "12");
    for end in &ends {
        let id = end["session"].as_str().unwrap();
        wait_until(|| object(id).is_some(), "every recording in the bucket");
        assert_eq!(
            sha256(&object(id).unwrap()),
            end["recording_sha256"].as_str().unwrap(),
            "{end}"
        );
    }
    let report = verifies(&n2);
    assert_eq!(report["recordings"].as_u64(), Some(13), "{report}");
}

/// Retention on the shared audit and the bucket (`[audit] keep_days`,
/// `[recordings] keep_days`): a node whose clock is three days on
/// (libfaketime; Garage on the same clock, as S3 refuses a skewed
/// signature) prunes, at its start, what the other node wrote: the rows up
/// to the last signed checkpoint, replaced by one signed marker, and the
/// recordings' objects, each with a chained `recording_pruned` row.
/// `audit verify` still passes, and the first node's console copy drops
/// what went.
#[test]
fn retention_prunes_the_shared_audit_and_the_bucket() {
    let Some((_pg, url)) = postgres() else {
        return;
    };
    let Some(clock) = faked_clock("+3d") else {
        eprintln!("skipped: no libfaketime (tools/test-peers installs faketime)");
        return;
    };
    let Some(mut garage) = Garage::start() else {
        eprintln!("skipped: no garage (tools/test-peers installs it)");
        return;
    };
    let store = "[recordings]\nstore = \"s3://casts/walissh\"\n";
    let mut n1 = Bastion::start_with(Opts {
        env: garage.env(),
        ..node(&url, "n1", store)
    });
    for word in ["OLD-1", "OLD-2"] {
        exec(n1.ssh_bob("bob:web1"), format!("echo {word}"));
    }
    let ids: Vec<String> = n1
        .wait_count("session_end", 2)
        .iter()
        .map(|e| e["session"].as_str().unwrap().to_string())
        .collect();
    let key = |id: &str| format!("walissh/{id}.cast");
    for id in &ids {
        wait_until(
            || garage.object(&key(id)).is_some(),
            "the recording's object",
        );
    }
    let listed = |b: &Bastion| Erin::on(b).get("/sessions").body;
    assert!(listed(&n1).contains(&ids[0]));
    // Its last head signed as it stops: what it wrote is under a
    // checkpoint.
    assert!(n1.terminate().success());

    garage.on_clock(clock.clone());
    let mut env = garage.env();
    env.extend(clock);
    let n2 = Bastion::start_with(Opts {
        env,
        audit_toml: format!("database = \"{url}\"\nkeep_days = 1"),
        ..keys_of(
            n1.state.clone(),
            node(&url, "n2", &format!("{store}keep_days = 1\n")),
        )
    });
    // The recordings first (while their sessions' rows are there), then
    // the rows.
    let line = n2.log.wait_line_from(&["retention:"], 0);
    assert!(line.contains("what was older is deleted"), "{line}");
    assert!(line.contains("objects=2"), "{line}");
    let line = n2
        .log
        .wait_line_from(&["retention: what was older is deleted through="], 0);
    assert!(!line.contains("events=0"), "{line}");
    for id in &ids {
        assert!(
            garage.object(&key(id)).is_none(),
            "{id} is still in the bucket"
        );
        let starts = psql(
            &url,
            &format!(
                "SELECT count(*) FROM events WHERE session = '{id}' AND kind <> 'recording_pruned'"
            ),
        );
        assert_eq!(starts.trim(), "0");
    }
    assert_eq!(psql(&url, "SELECT count(*) FROM pruned").trim(), "1");
    let pruned = psql(
        &url,
        "SELECT count(*) FROM events WHERE kind = 'recording_pruned'",
    );
    assert_eq!(pruned.trim(), "2");
    let report = verifies(&n2);
    assert!(report["pruned_through"].as_i64().is_some(), "{report}");

    // n1's console copy, kept from before, drops what went.
    n1.restart();
    let page = listed(&n1);
    for id in &ids {
        assert!(!page.contains(id.as_str()), "{id} still listed");
    }
}

/// TLS to PostgreSQL: a server that takes no connection without TLS,
/// with a certificate for `localhost` from a private CA. `sslmode=require`
/// with `[audit] database_ca_file` checks it, chain and name, and the
/// audit is written over TLS (`pg_stat_ssl` says so); a CA that did not
/// sign it, or a host name it does not carry, stops the start in one
/// line, and so does `sslmode=disable` against this server.
#[test]
fn the_audit_reaches_postgresql_over_verified_tls() {
    let Some((pg, _)) = postgres() else {
        return;
    };
    let ca = pg.with_tls();
    let b = Bastion::start_with(Opts {
        audit_toml: format!(
            "database = \"postgres://postgres@localhost:{}/postgres?sslmode=require\"\ndatabase_ca_file = \"{}\"",
            pg.port,
            ca.display()
        ),
        ..Opts::default()
    });
    let out = exec(b.ssh_bob("bob:web1"), "echo OVER-TLS");
    assert_eq!(stdout(&out), "OVER-TLS\n");
    b.wait_kind("session_end");
    let url = format!(
        "postgres://postgres@localhost:{}/postgres?sslmode=require",
        pg.port
    );
    let tls = psql(
        &url,
        "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
         WHERE a.application_name = 'walissh' AND s.ssl",
    );
    assert_ne!(tls.trim(), "0", "no walissh connection over TLS");
    verifies(&b);

    // The same server, misnamed or signed by another CA, or asked
    // without TLS: refused, said.
    let other = make_ca(b.dir.path(), "other");
    let ours = format!("@localhost:{}/postgres?sslmode=require", pg.port);
    let (ca_line, other_line) = (ca.display().to_string(), other.display().to_string());
    refused_twin(&b, |t| t.replace(&ca_line, &other_line), "certificate");
    let misnamed = format!("@127.0.0.1:{}/postgres?sslmode=require", pg.port);
    refused_twin(&b, |t| t.replace(&ours, &misnamed), "certificate");
    let plain = format!("@localhost:{}/postgres?sslmode=disable", pg.port);
    refused_twin(&b, |t| t.replace(&ours, &plain), "no encryption");
}

/// Wrong passwords count across nodes: a guesser who spreads tries over
/// the nodes behind the load balancer is locked out when the failures of
/// all of them reach `auth_max_failures` (5 here), on every node; and an
/// account's slow path counts its failures on every node.
#[test]
fn failed_logins_count_across_nodes() {
    let Some((_pg, url)) = postgres() else {
        return;
    };
    let (n1, n2) = two_nodes(&url);
    for (b, n) in [(&n1, 3), (&n2, 2)] {
        for _ in 0..n {
            let out = exec(b.ssh_pw("alice:web1", "wrong"), "true");
            assert_eq!(out.status.code(), Some(255));
        }
    }
    for b in [&n1, &n2] {
        let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo should-not-run");
        assert_eq!(out.status.code(), Some(255), "{}", stdout(&out));
        assert!(!stdout(&out).contains("should-not-run"));
    }
    let locked = n1.wait_event(|e| e["kind"] == "auth_fail" && e["reason"] == "locked_out");
    assert_eq!(locked["user"], "alice", "{locked}");
    // Another address is not affected.
    let mut c = n2.ssh_pw("alice:web1", ALICE_PW);
    c.args(["-b", "127.0.0.2", "echo other-address"]);
    assert_eq!(stdout(&run(c, b"")), "other-address\n");

    // Guesses at one account spread over addresses and nodes: its slow
    // path (10 failures free, then each try waits) counts every node's.
    let guess = |b: &Bastion, i: u8| {
        let mut c = b.ssh_pw("carol:web1", "wrong");
        c.args(["-b", &format!("127.0.0.{i}"), "true"]);
        assert_eq!(run(c, b"").status.code(), Some(255));
    };
    for i in 0..6 {
        guess(&n2, 10 + i);
    }
    for i in 0..5 {
        guess(&n1, 20 + i);
    }
    let slowed = "an account's slow path";
    assert!(!n1.log.text().contains(slowed), "{}", n1.log.text());
    guess(&n1, 30);
    let line = n1.log.wait_line_from(&[slowed], 0);
    assert!(line.contains("failures=11"), "{line}");
}
