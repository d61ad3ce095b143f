//! Live sessions from the console and the command line: watching one
//! over the console's WebSocket (a real WebSocket client, then a real
//! browser), and stopping one (an admin in the console, `walissh
//! sessions kill`), with what the SSH client sees and the audit rows.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::harness::*;
use crate::web::{
    Chromedriver, ERIN_PW, browser_log_in, click, cookie_of, curl, log_in, shot, text_of,
    type_into, wait_for,
};

pub(crate) const ADAM_PW: &str = "adam-admin-pw";

/// A bastion with the console, erin (auditor) and adam (admin), and
/// `more` of its config.
pub(crate) fn console_with(more: &str, opts: Opts) -> (Bastion, String) {
    let b = Bastion::start_with(Opts {
        extra_toml: format!(
            "[web]\nlisten = \"127.0.0.1:0\"\n\n[[users]]\nname = \"erin\"\npassword_hash = \"{}\"\nrole = \"auditor\"\n\n[[users]]\nname = \"adam\"\npassword_hash = \"{}\"\nrole = \"admin\"\n\n{more}",
            hash_of(ERIN_PW),
            hash_of(ADAM_PW),
        ),
        ..opts
    });
    let base = b.web_url();
    (b, base)
}

/// bob's terminal on web1, its session's id once it is audited.
fn bob_live(b: &Bastion) -> (Terminal, String) {
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo UP-$((1+1))\r");
    t.expect("UP-2");
    let start = b.wait_kind("session_start");
    (t, start["session"].as_str().unwrap().to_string())
}

pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The live view's upgrade request for session `id` on the console at
/// `base`, with a login's cookie and a page's origin.
pub(crate) fn view_request(
    (base, id): (&str, &str),
    cookie: Option<&str>,
    origin: &str,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let ws = format!("{}/sessions/{id}/watch", base.replacen("http", "ws", 1));
    let mut req = ws.as_str().into_client_request().unwrap();
    let h = req.headers_mut();
    h.insert("sec-websocket-protocol", "v2.asciicast".parse().unwrap());
    h.insert("origin", origin.parse().unwrap());
    if let Some(c) = cookie {
        h.insert("cookie", c.parse().unwrap());
    }
    req
}

type View =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads a live view's output events onto `seen` until it holds `want`.
pub(crate) async fn read_until(stream: &mut View, seen: &mut String, want: &str) {
    while !seen.contains(want) {
        let msg = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .unwrap_or_else(|_| panic!("{want} never came: {seen}"))
            .unwrap()
            .unwrap();
        let Message::Text(line) = msg else { continue };
        let event: serde_json::Value = serde_json::from_str(&line).unwrap();
        if event[1] == "o" {
            seen.push_str(event[2].as_str().unwrap());
        }
    }
}

/// Waits for a live view's close frame: its code.
pub(crate) async fn closed(stream: &mut View) -> u16 {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
            Ok(Some(Ok(Message::Close(frame)))) => return u16::from(frame.unwrap().code),
            Ok(Some(Ok(_))) => continue,
            other => panic!("the stream did not end cleanly: {other:?}"),
        }
    }
}

/// The live view over a real WebSocket: refused without a login, from
/// another site's page, and for a session that is not live; with an
/// auditor's login, the player's protocol (`v2.asciicast`), the
/// recording's header and what is already on screen, then a line typed
/// over SSH as it comes; the stream ends when the session does, and the
/// watch is audited.
#[test]
fn a_live_session_streams_over_a_websocket() {
    let (b, base) = console_with("", Opts::default());
    let (t, id) = bob_live(&b);
    let cookie = cookie_of(&log_in(&base, "erin", ERIN_PW));
    let upgrade = |cookie: Option<&str>, origin: &str| view_request((&base, &id), cookie, origin);
    let own = base.clone();
    rt().block_on(async {
        // No login, another site's page: no stream.
        let refused = tokio_tungstenite::connect_async(upgrade(None, &own)).await;
        assert!(refused.is_err(), "opened without a login");
        let elsewhere = upgrade(Some(&cookie), "https://evil.example");
        assert!(tokio_tungstenite::connect_async(elsewhere).await.is_err());
        let (mut stream, answer) = tokio_tungstenite::connect_async(upgrade(Some(&cookie), &own))
            .await
            .expect("the live view opens");
        assert_eq!(
            answer.headers().get("sec-websocket-protocol").unwrap(),
            "v2.asciicast"
        );
        let header: serde_json::Value = match stream.next().await.unwrap().unwrap() {
            Message::Text(t) => serde_json::from_str(&t).unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(header["version"], 2);
        assert_eq!(header["width"], 80);
        // What was on screen before the viewer joined, then what comes.
        let mut seen = String::new();
        read_until(&mut stream, &mut seen, "UP-2").await;
        t.send("echo WATCHED-$((3*3))\r");
        read_until(&mut stream, &mut seen, "WATCHED-9").await;
        // Read-only: what the viewer sends goes nowhere.
        let _ = stream.send(Message::Text("rm -rf /\r".into())).await;
        t.send("exit\r");
        // The stream ends with the session, as the player reads an end.
        assert_eq!(closed(&mut stream).await, 1000);
    });
    let watched = b.wait_kind("session_watched");
    assert_eq!(
        (watched["session"].as_str(), watched["by"].as_str()),
        (Some(id.as_str()), Some("erin"))
    );
    assert!(
        !b.audit()
            .iter()
            .any(|e| e["kind"] == "command" && e["command"] == "rm -rf /")
    );
    // A session that is no longer live has no view.
    b.wait_kind("session_end");
    rt().block_on(async {
        let gone = tokio_tungstenite::connect_async(upgrade(Some(&cookie), &own)).await;
        assert!(gone.is_err());
    });
}

/// An admin stops a live session from the console: the SSH client shows
/// the one line and exits, `session_killed` says who and why. An auditor
/// may not, nor a form without the login's CSRF token.
#[test]
fn an_admin_stops_a_session_and_its_user_is_told() {
    let (b, base) = console_with("", Opts::default());
    let (mut t, id) = bob_live(&b);
    let stop = format!("{base}/sessions/{id}/stop");
    let erin = cookie_of(&log_in(&base, "erin", ERIN_PW));
    let page = curl(&format!("{base}/sessions/{id}"), &["-b", &erin]).body;
    assert!(
        page.contains(&format!("data-live=\"/sessions/{id}/watch\"")),
        "{page}"
    );
    assert!(!page.contains("Stop this session"), "{page}");
    let adam_login = log_in(&base, "adam", ADAM_PW);
    let adam = cookie_of(&adam_login);
    let page = curl(&format!("{base}/sessions/{id}"), &["-b", &adam]).body;
    assert!(page.contains("Stop this session"), "{page}");
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_string();
    let erin_csrf = curl(&format!("{base}/sessions"), &["-b", &erin])
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_string();
    let form = |csrf: &str| format!("csrf={csrf}&reason=incident+4711+review");
    let by_erin = curl(&stop, &["-b", &erin, "--data", &form(&erin_csrf)]);
    assert_eq!(by_erin.status, 403);
    let forged = curl(&stop, &["-b", &adam, "--data", &form("not-the-token")]);
    assert_eq!(forged.status, 403);
    assert!(!b.audit().iter().any(|e| e["kind"] == "session_killed"));
    let done = curl(&stop, &["-b", &adam, "--data", &form(&csrf)]);
    assert_eq!(done.status, 303, "{}", done.body);
    t.expect("walissh: this session was ended by an administrator: incident 4711 review");
    t.wait();
    let killed = b.wait_kind("session_killed");
    assert_eq!(killed["session"], id.as_str());
    assert_eq!(killed["user"], "bob");
    assert_eq!(killed["by"], "adam");
    assert_eq!(killed["reason"], "incident 4711 review");
    assert_eq!(killed["via"], "console");
    b.wait_kind("session_end");
    // Gone: a second stop finds nothing.
    let again = curl(&stop, &["-b", &adam, "--data", &form(&csrf)]);
    assert_eq!(again.status, 409);
}

/// `walissh sessions kill ID --reason TEXT`, on the bastion's host: the
/// same line for the user, the same row, by the account that ran it.
#[test]
fn sessions_kill_from_the_command_line() {
    let b = Bastion::start();
    let (mut t, id) = bob_live(&b);
    let out = b.cli(&["sessions", "kill", &id, "--reason", "patching the host"]);
    assert!(stdout(&out).contains(&format!("ended session {id} (bob@web1)")));
    t.expect("walissh: this session was ended by an administrator: patching the host");
    t.wait();
    let killed = b.wait_kind("session_killed");
    assert_eq!(killed["by"], format!("unix:{}", me()).as_str());
    assert_eq!(killed["via"], "cli");
    b.wait_kind("session_end");
    let out = b.cli_any(&["sessions", "kill", &id, "--reason", "again"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("no session {id} is open on this bastion")),
        "{}",
        stderr(&out)
    );
    // A reason is required, and the user is told it, so it is not empty.
    let out = b.cli_any(&["sessions", "kill", "abc", "--reason", " "]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("a reason is needed"),
        "{}",
        stderr(&out)
    );
}

/// Stopping a session ends its whole connection: a client that shares
/// it (OpenSSH's ControlMaster) cannot open another session on it
/// without logging in again.
#[test]
fn a_stopped_session_takes_its_connection_with_it() {
    let b = Bastion::start();
    let sock = b.dir.path().join("master.sock");
    let base = b.ssh_bob("bob:web1");
    let mut args: Vec<String> = base
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let dest = args.pop().unwrap();
    let shared = |extra: &[&str]| {
        let mut c = std::process::Command::new(base.get_program());
        c.args(&args).args(extra).arg(&dest);
        c
    };
    let control = format!("ControlPath={}", sock.display());
    let master = shared(&["-o", "ControlMaster=yes", "-o", &control]);
    let mut t = Terminal::spawn(&master, 24, 80);
    t.send("echo MASTER-$((2+2))\r");
    t.expect("MASTER-4");
    let id = b.wait_kind("session_start")["session"]
        .as_str()
        .unwrap()
        .to_string();
    // The connection is shared: a second session rides on it, and stays.
    let second = exec(
        shared(&["-o", "ControlMaster=no", "-o", &control]),
        "echo RIDE",
    );
    assert_eq!(stdout(&second), "RIDE\n");
    let mut riding = shared(&["-o", "ControlMaster=no", "-o", &control]);
    riding.arg("echo STAYING; exec sleep 300");
    let (mut rider, out, _) = spawn_captured(riding);
    out.wait_for("STAYING");
    b.cli(&["sessions", "kill", &id, "--reason", "connection review"]);
    t.expect("this session was ended by an administrator: connection review");
    t.wait();
    // The other session on the connection ends with it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(rider.wait().unwrap()));
    let ended = rx.recv_timeout(std::time::Duration::from_secs(60));
    assert!(ended.is_ok(), "the other session on the connection went on");
    let check = shared(&["-o", &control, "-O", "check"]).output().unwrap();
    assert!(!check.status.success(), "the master still runs");
}

/// The console in a real browser, live: an auditor watches bob's session
/// and sees a line typed over SSH appear; then an admin stops it, and
/// bob's ssh shows the line and exits. Screenshots go to
/// `target/console/`.
#[test]
fn in_a_browser_a_live_session_is_watched_and_stopped() {
    let (b, base) = console_with("", Opts::default());
    let (mut t, id) = bob_live(&b);
    let shots = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/console");
    std::fs::create_dir_all(&shots).unwrap();
    let driver = Chromedriver::start();
    rt().block_on(async {
        let c = driver.client(b.dir.path()).await;
        browser_log_in(&c, &base, "erin", ERIN_PW).await;
        c.goto(&format!("{base}/sessions/{id}")).await.unwrap();
        wait_for(&c, ".ap-term").await;
        // What was on screen before the page opened, then what is typed.
        until(&c, "UP-2").await;
        t.send("echo SEEN-LIVE-$((6*7))\r");
        until(&c, "SEEN-LIVE-42").await;
        shot(&c, &shots.join("live.png")).await;
        click(&c, "nav form button").await;
        wait_for(&c, "form.login").await;
        browser_log_in(&c, &base, "adam", ADAM_PW).await;
        c.goto(&format!("{base}/sessions/{id}")).await.unwrap();
        wait_for(&c, "form.stop").await;
        type_into(&c, "form.stop input[name=reason]", "watched in the browser").await;
        shot(&c, &shots.join("stop.png")).await;
        click(&c, "form.stop button").await;
        // The browser posts the form on its own: the row says it did.
        b.wait_kind("session_killed");
        c.close().await.unwrap();
    });
    t.expect("walissh: this session was ended by an administrator: watched in the browser");
    t.wait();
    let watched = b.wait_kind("session_watched");
    assert_eq!(watched["by"], "erin");
    let killed = b.wait_kind("session_killed");
    assert_eq!(
        (killed["by"].as_str(), killed["via"].as_str()),
        (Some("adam"), Some("console"))
    );
}

/// Waits until the player's terminal shows `text`.
async fn until(c: &fantoccini::Client, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let shown = text_of(c, ".ap-term").await;
        if shown.contains(text) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never shown: {text}; shown: {shown:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
