//! The web console over real HTTP, driven by curl: logging in (roles,
//! the throttle's password check, the audit rows), the cookie's flags,
//! CSRF and cross-site refusals, the bounds on a request, and the
//! sessions list of a real SSH session.

use std::process::Command;

use crate::harness::*;

pub(crate) const ERIN_PW: &str = "erin-auditor-pw";

/// A bastion with the console on a port of its choosing, and erin, an
/// auditor; the console's base URL.
fn console() -> (Bastion, String) {
    console_with("")
}

/// `console`, with more keys of `[web]`.
fn console_with(web: &str) -> (Bastion, String) {
    let b = Bastion::start_with(Opts {
        extra_toml: format!(
            "[web]\nlisten = \"127.0.0.1:0\"\n{web}\n[[users]]\nname = \"erin\"\npassword_hash = \"{}\"\nrole = \"auditor\"\n",
            hash_of(ERIN_PW)
        ),
        ..Opts::default()
    });
    let base = b.web_url();
    (b, base)
}

/// What curl got: the status, the headers (lowercase names), the body.
pub(crate) struct Got {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Got {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// curl with `args` on `url`, headers included.
pub(crate) fn curl(url: &str, args: &[&str]) -> Got {
    let out = Command::new("curl")
        .args(["-s", "-i", "--max-time", "30"])
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no answer from {url}: {text:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Got {
        status,
        headers,
        body: body.to_string(),
    }
}

pub(crate) fn log_in(base: &str, user: &str, password: &str) -> Got {
    curl(
        &format!("{base}/login"),
        &[
            "--data-urlencode",
            &format!("user={user}"),
            "--data-urlencode",
            &format!("password={password}"),
        ],
    )
}

/// The cookie a login set, as a request sends it back.
pub(crate) fn cookie_of(got: &Got) -> String {
    let set = got.header("set-cookie").expect("a cookie");
    set.split(';').next().unwrap().to_string()
}

#[test]
fn only_auditors_and_admins_log_in_and_each_try_is_audited() {
    let (b, base) = console();
    assert_eq!(curl(&format!("{base}/healthz"), &[]).body, "ok\n");
    // No login: the way to the login page.
    let got = curl(&format!("{base}/sessions"), &[]);
    assert_eq!((got.status, got.header("location")), (303, Some("/login")));
    // A wrong password, and a right one without console access: the same
    // answer, a row each with the reason.
    let wrong = log_in(&base, "erin", "nope");
    let user = log_in(&base, "alice", ALICE_PW);
    assert_eq!((wrong.status, user.status), (401, 401));
    assert_eq!(wrong.body, user.body);
    assert!(wrong.header("set-cookie").is_none());
    let fails = b.wait_count("web_login_fail", 2);
    let reason = |u: &str| {
        fails
            .iter()
            .find(|e| e["user"] == u)
            .map(|e| e["reason"].clone())
    };
    assert_eq!(reason("erin").unwrap(), "bad_password");
    assert_eq!(reason("alice").unwrap(), "no_console_access");
    assert!(
        fails
            .iter()
            .all(|e| e["client_addr"].as_str().unwrap().starts_with("127.0.0.1:"))
    );
    // The password is never in the audit.
    let trail = serde_json::to_string(&b.audit()).unwrap();
    assert!(!trail.contains("nope") && !trail.contains(ALICE_PW));
    // erin, an auditor: in, with a cookie only this console's pages get.
    let got = log_in(&base, "erin", ERIN_PW);
    assert_eq!(
        (got.status, got.header("location")),
        (303, Some("/sessions"))
    );
    let set = got.header("set-cookie").unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(set.contains(flag), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP on loopback: {set}");
    let ok = b.wait_kind("web_login");
    assert_eq!(
        (ok["user"].as_str(), ok["role"].as_str()),
        (Some("erin"), Some("auditor"))
    );
    let page = curl(&format!("{base}/sessions"), &["-b", &cookie_of(&got)]);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<h1>Sessions</h1>"));
    for (name, value) in [
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("cache-control", "no-store"),
    ] {
        assert_eq!(page.header(name), Some(value));
    }
    assert!(
        page.header("content-security-policy")
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
}

#[test]
fn the_list_shows_ssh_sessions_filtered() {
    let (b, base) = console();
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo listed-$((2+3))");
    assert!(stdout(&out).contains("listed-5"));
    b.wait_kind("session_end");
    let cookie = cookie_of(&log_in(&base, "erin", ERIN_PW));
    let list = |query: &str| curl(&format!("{base}/sessions{query}"), &["-b", &cookie]).body;
    let all = list("");
    assert_eq!(all.matches("<tr data-session=").count(), 1, "{all}");
    assert!(all.contains("<td>alice</td><td>web1</td>"));
    assert!(list("?user=alice&target=web1&since=1h").contains("<td>alice</td>"));
    assert!(list("?user=carol").contains("No sessions."));
    assert!(list("?text=listed-%24%28%282%2B3%29%29").contains("<td>alice</td>"));
    assert!(list("?text=nothing-like-it").contains("No sessions."));
    let bad = curl(&format!("{base}/sessions?since=soonish"), &["-b", &cookie]);
    assert_eq!(bad.status, 400);
}

#[test]
fn forms_from_elsewhere_and_oversized_requests_are_refused() {
    let (b, base) = console();
    // A login posted from another site, even with the right password.
    let origin = "Origin: http://evil.example";
    let got = curl(
        &format!("{base}/login"),
        &[
            "-H",
            origin,
            "--data-urlencode",
            "user=erin",
            "--data-urlencode",
            &format!("password={ERIN_PW}"),
        ],
    );
    assert_eq!(got.status, 403);
    let got = log_in(&base, "erin", ERIN_PW);
    let cookie = cookie_of(&got);
    let page = curl(&format!("{base}/sessions"), &["-b", &cookie]).body;
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    assert_eq!(csrf.len(), 64);
    let logout = |args: &[&str]| {
        let mut all = vec!["-b", cookie.as_str()];
        all.extend_from_slice(args);
        curl(&format!("{base}/logout"), &all)
    };
    // Without the token, with another, or from another site: refused,
    // and the login lives on.
    assert_eq!(logout(&["--data", "csrf=0"]).status, 403);
    assert_eq!(
        logout(&[
            "-H",
            "Sec-Fetch-Site: cross-site",
            "--data",
            &format!("csrf={csrf}")
        ])
        .status,
        403
    );
    assert!(logout(&["--data", "nothing=here"]).status >= 400);
    assert_eq!(
        curl(&format!("{base}/sessions"), &["-b", &cookie]).status,
        200
    );
    // A body larger than any form: refused before it is read whole.
    let big = format!("user=erin&password={}", "x".repeat(64 * 1024));
    assert_eq!(
        curl(&format!("{base}/login"), &["--data", &big]).status,
        413
    );
    // With it: out, and the cookie is worth nothing any more.
    let out = logout(&[
        "-H",
        "Sec-Fetch-Site: same-origin",
        "--data",
        &format!("csrf={csrf}"),
    ]);
    assert_eq!((out.status, out.header("location")), (303, Some("/login")));
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    let after = curl(&format!("{base}/sessions"), &["-b", &cookie]);
    assert_eq!(
        (after.status, after.header("location")),
        (303, Some("/login"))
    );
    drop(b);
}

#[test]
fn guessing_locks_the_console_out_as_it_does_ssh() {
    let (b, base) = console();
    // The harness's limit is five failures an address.
    for _ in 0..5 {
        assert_eq!(log_in(&base, "erin", "guess").status, 401);
    }
    // Locked out: even the right password is refused, and said so.
    assert_eq!(log_in(&base, "erin", ERIN_PW).status, 401);
    let e = b.wait_event(|e| e["kind"] == "web_login_fail" && e["reason"] == "locked_out");
    assert_eq!(e["user"], "erin");
    // And the address's SSH logins with it: one throttle.
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "true");
    assert!(!out.status.success());
}

/// A terminal session of bob's on web1 that ran `echo WORD-$((6*7))`,
/// ended: its id.
fn finished_session(b: &Bastion, word: &str) -> String {
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send(&format!("echo {word}-$((6*7))\r"));
    t.expect(&format!("{word}-42"));
    t.send("exit\r");
    let end = b.wait_kind("session_end");
    end["session"].as_str().unwrap().to_string()
}

/// A session's page over HTTP: the player's place and the recording it
/// loads, the timeline of the session's rows, and the recording checked
/// against the digest its `session_end` row chained.
#[test]
fn a_finished_session_is_replayed_with_its_timeline_and_seal() {
    let (b, base) = console();
    let id = finished_session(&b, "replayed");
    let cookie = cookie_of(&log_in(&base, "erin", ERIN_PW));
    let list = curl(&format!("{base}/sessions"), &["-b", &cookie]).body;
    assert!(list.contains(&format!("href=\"/sessions/{id}\"")), "{list}");
    let page = curl(&format!("{base}/sessions/{id}"), &["-b", &cookie]);
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains(&format!("data-cast=\"/sessions/{id}/cast\""))
    );
    assert!(
        page.body.contains("<b>command</b> echo replayed-$((6*7))"),
        "{}",
        page.body
    );
    assert!(page.body.contains("Recording verified"), "{}", page.body);
    let cast = curl(&format!("{base}/sessions/{id}/cast"), &["-b", &cookie]);
    assert_eq!(cast.header("content-type"), Some("application/x-asciicast"));
    assert!(
        cast.body.lines().next().unwrap().contains("\"version\":2"),
        "{}",
        cast.body
    );
    assert!(cast.body.contains("replayed-42"));
    // A recording changed after the session: said so, loudly.
    let path = b
        .sessions()
        .into_iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap()["recording"]
        .as_str()
        .unwrap()
        .to_string();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"[9.9, \"o\", \"forged\"]\n");
    std::fs::write(&path, bytes).unwrap();
    let page = curl(&format!("{base}/sessions/{id}"), &["-b", &cookie]).body;
    assert!(page.contains("does NOT match"), "{page}");
    // Nothing for one not logged in, nor for ids that are no session's.
    assert_eq!(curl(&format!("{base}/sessions/{id}/cast"), &[]).status, 303);
    assert_eq!(
        curl(&format!("{base}/sessions/..%2Faudit.db"), &["-b", &cookie]).status,
        404
    );
    assert_eq!(
        curl(&format!("{base}/sessions/nope"), &["-b", &cookie]).status,
        404
    );
}

/// The console in a real browser: headless Chromium, driven through
/// chromedriver (WebDriver). An auditor logs in, opens a finished
/// session, plays it in the asciinema player and seeks from the
/// timeline. Screenshots of each page go to `target/console/`.
#[test]
fn in_a_browser_an_auditor_replays_a_session() {
    let (b, base) = console();
    let id = finished_session(&b, "browsed");
    let shots = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/console");
    std::fs::create_dir_all(&shots).unwrap();
    let driver = Chromedriver::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use fantoccini::Locator;
        let c = driver.client(b.dir.path()).await;
        browser_log_in(&c, &base, "erin", ERIN_PW).await;
        shot(&c, &shots.join("sessions.png")).await;
        // The cookie is not the page's to read.
        let seen: serde_json::Value = c.execute("return document.cookie", vec![]).await.unwrap();
        assert_eq!(seen, "");
        click(&c, &format!("a[href='/sessions/{id}']")).await;
        wait_for(&c, ".ap-player").await;
        // The recording's marker for the command is in the player.
        wait_for(&c, ".ap-marker-container").await;
        // Nothing played yet: the screen is blank. A row of the timeline
        // seeks the player and plays from there, and the command's output
        // shows.
        let before = text_of(&c, ".ap-term").await;
        assert!(!before.contains("browsed-42"), "{before:?}");
        let row = c
            .find(Locator::XPath("//ol[@class='timeline']/li[b='command']"))
            .await
            .unwrap();
        row.click().await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let text = text_of(&c, ".ap-term").await;
            if text.contains("browsed-42") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the player never showed the output: {text:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        shot(&c, &shots.join("session.png")).await;
        c.close().await.unwrap();
    });
}

/// Logs `user` in through the console's login page, in the browser, and
/// waits for the sessions list.
pub(crate) async fn browser_log_in(c: &fantoccini::Client, base: &str, user: &str, password: &str) {
    c.goto(&format!("{base}/login")).await.unwrap();
    type_into(c, "input[name=user]", user).await;
    type_into(c, "input[name=password]", password).await;
    click(c, "form.login button").await;
    wait_for(c, "table.sessions").await;
}

pub(crate) async fn type_into(c: &fantoccini::Client, css: &str, text: &str) {
    let field = c.find(fantoccini::Locator::Css(css)).await.unwrap();
    field.send_keys(text).await.unwrap();
}

pub(crate) async fn text_of(c: &fantoccini::Client, css: &str) -> String {
    let element = c.find(fantoccini::Locator::Css(css)).await.unwrap();
    element.text().await.unwrap()
}

pub(crate) async fn click(c: &fantoccini::Client, css: &str) {
    let element = c.find(fantoccini::Locator::Css(css)).await.unwrap();
    element.click().await.unwrap();
}

pub(crate) async fn wait_for(c: &fantoccini::Client, css: &str) {
    let waited = c.wait().for_element(fantoccini::Locator::Css(css)).await;
    waited.unwrap_or_else(|e| panic!("{css}: {e}"));
}

pub(crate) async fn shot(c: &fantoccini::Client, path: &std::path::Path) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(path, png).unwrap();
}

/// chromedriver on a port of its own, for the test's life.
pub(crate) struct Chromedriver {
    child: std::process::Child,
    port: u16,
}

impl Chromedriver {
    pub(crate) fn start() -> Chromedriver {
        let port = free_port();
        let mut child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromedriver (tools/test-peers installs chromium-driver)");
        // It says when it listens; what it says after is drained.
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("started successfully") {
            line.clear();
            let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
            assert!(n > 0, "chromedriver ended before it listened");
        }
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        Chromedriver { child, port }
    }

    /// A browser session: headless Chromium with a profile of its own
    /// under `dir`, nothing fetched from the network.
    pub(crate) async fn client(&self, dir: &std::path::Path) -> fantoccini::Client {
        let profile = dir.join("chromium-profile");
        let caps = serde_json::json!({
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--disable-quic",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.display()),
                ]
            }
        });
        let serde_json::Value::Object(caps) = caps else {
            unreachable!()
        };
        fantoccini::ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a browser session")
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The console over TLS, with a certificate made by openssl for the
/// test: curl checks it against that certificate, the login's cookie is
/// `Secure`, and plain HTTP on the port gets nothing.
#[test]
fn over_tls_the_console_is_checked_and_its_cookie_secure() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (
        dir.path().join("console.pem"),
        dir.path().join("console.key"),
    );
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ])
        .args([
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let (b, base) = console_with(&format!(
        "tls_cert = \"{}\"\ntls_key = \"{}\"\n",
        cert.display(),
        key.display()
    ));
    let https = base.replace("http://", "https://");
    let ca = cert.display().to_string();
    assert_eq!(
        curl(&format!("{https}/healthz"), &["--cacert", &ca]).body,
        "ok\n"
    );
    let got = curl(
        &format!("{https}/login"),
        &[
            "--cacert",
            &ca,
            "--data-urlencode",
            "user=erin",
            "--data-urlencode",
            &format!("password={ERIN_PW}"),
        ],
    );
    assert_eq!(got.status, 303);
    assert!(got.header("set-cookie").unwrap().contains("; Secure"));
    // Plain HTTP on the TLS port: no answer a browser would take.
    let plain = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .arg(format!("{base}/healthz"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "000");
    // An unknown certificate: curl refuses it (the console is what it says).
    let unchecked = Command::new("curl")
        .args(["-s", "--max-time", "10"])
        .arg(format!("{https}/healthz"))
        .output()
        .unwrap();
    assert!(!unchecked.status.success());
    drop(b);
}

/// The systemd watchdog (`WatchdogSec=`) is fed while `/healthz` is: a
/// WATCHDOG=1 after READY=1, again and again.
#[test]
fn the_watchdog_is_fed_while_healthy() {
    let b = Bastion::start_with(Opts {
        watchdog_usec: Some(300_000),
        ..Opts::default()
    });
    let mut fed = 0;
    for _ in 0..20 {
        if b.next_notification().contains("WATCHDOG=1") {
            fed += 1;
            if fed == 3 {
                break;
            }
        }
    }
    assert_eq!(fed, 3);
}

/// `/metrics`: Prometheus text that Prometheus's own Python parser reads,
/// counting what the audit saw (logins both ways, a session, the console's
/// logins), behind a bearer token when one is set.
#[test]
fn metrics_are_prometheus_text_of_what_the_audit_saw() {
    let b = Bastion::start_with(Opts {
        extra_toml:
            "[web]\nlisten = \"127.0.0.1:0\"\nmetrics_token_env = \"WALISSH_TEST_METRICS\"\n".into(),
        ..Opts::default()
    });
    let base = b.web_url();
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo counted");
    assert!(stdout(&out).contains("counted"));
    assert!(
        !exec(b.ssh_pw("alice:web1", "wrong"), "true")
            .status
            .success()
    );
    b.wait_kind("session_end");
    // No token, a wrong one: nothing.
    assert_eq!(curl(&format!("{base}/metrics"), &[]).status, 401);
    let wrong = curl(
        &format!("{base}/metrics"),
        &["-H", "Authorization: Bearer nope"],
    );
    assert_eq!(wrong.status, 401);
    let got = curl(
        &format!("{base}/metrics"),
        &["-H", &format!("Authorization: Bearer {METRICS_TOKEN}")],
    );
    assert_eq!(got.status, 200);
    let parsed = Command::new("python3")
        .args(["-c", PARSE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut p| {
            use std::io::Write;
            p.stdin.take().unwrap().write_all(got.body.as_bytes())?;
            p.wait_with_output()
        })
        .unwrap();
    assert!(
        parsed.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&parsed.stderr),
        got.body
    );
    let samples = String::from_utf8_lossy(&parsed.stdout).into_owned();
    for line in [
        "walissh_logins_total{result=\"ok\"} 1.0",
        "walissh_logins_total{result=\"failed\"} 1.0",
        "walissh_sessions_total{target=\"web1\"} 1.0",
        "walissh_sessions_live{target=\"web1\"} 0.0",
        "walissh_audit_queue_depth 0.0",
        "walissh_recording_errors_total 0.0",
    ] {
        assert!(
            samples.lines().any(|l| l == line),
            "{line} not in:\n{samples}"
        );
    }
    // Each write of the audit is timed: the rows above took some.
    let writes = samples
        .lines()
        .find_map(|l| l.strip_prefix("walissh_audit_write_seconds_count "))
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no audit write times in:\n{samples}"));
    assert!(writes >= 1.0, "{samples}");
}

const METRICS_TOKEN: &str = "metrics-token-for-the-test";

/// Reads Prometheus text with the `prometheus_client` parser (PyPI's,
/// installed by tools/test-peers) and prints each sample as name{labels} value.
const PARSE: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join('%s="%s"' % kv for kv in sorted(s.labels.items()))
        print("%s%s %s" % (s.name, "{%s}" % labels if labels else "", float(s.value)))
"#;

/// `walissh sessions --active`: the sessions open now, each with its
/// node; one that ended is not among them.
#[test]
fn active_sessions_are_listed_with_their_node() {
    let b = Bastion::start();
    let done = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo over");
    assert!(stdout(&done).contains("over"));
    b.wait_kind("session_end");
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo open-$((1+1))\r");
    t.expect("open-2");
    let active = json_lines(&b.cli(&["sessions", "--json", "--active"]));
    assert_eq!(active.len(), 1, "{active:?}");
    assert_eq!(
        (active[0]["user"].as_str(), active[0]["ended"].is_null()),
        (Some("bob"), true)
    );
    let host = this_host();
    assert_eq!(active[0]["node"], host.as_str());
    assert_eq!(b.sessions().len(), 2);
    t.send("exit\r");
    b.wait_count("session_end", 2);
    assert!(json_lines(&b.cli(&["sessions", "--json", "--active"])).is_empty());
    // Every row carries its node, and every session (ended too).
    assert!(b.audit().iter().all(|e| e["node"] == host.as_str()));
    let all = json_lines(&b.cli(&["sessions", "--json"]));
    assert!(all.iter().all(|s| s["node"] == host.as_str()), "{all:?}");
}

/// `[server] node_name` names the bastion in the audit: the rows and
/// sessions written after a restart under a new name carry it, the ones
/// before keep theirs.
#[test]
fn the_node_name_is_in_every_row() {
    let mut b = Bastion::start();
    let out = exec(b.ssh_bob("bob:web1"), "echo first");
    assert!(stdout(&out).contains("first"));
    b.wait_kind("session_end");
    assert!(b.terminate().success());
    let text = std::fs::read_to_string(&b.config).unwrap();
    assert!(text.contains("[server]\n"), "{text}");
    std::fs::write(
        &b.config,
        text.replacen("[server]\n", "[server]\nnode_name = \"bastion-a\"\n", 1),
    )
    .unwrap();
    b.restart();
    let out = exec(b.ssh_bob("bob:web1"), "echo second");
    assert!(stdout(&out).contains("second"));
    b.wait_count("session_end", 2);
    let sessions = json_lines(&b.cli(&["sessions", "--json"]));
    let nodes: Vec<&str> = sessions
        .iter()
        .map(|s| s["node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, [this_host().as_str(), "bastion-a"]);
    let last = b.audit().into_iter().last().unwrap();
    assert_eq!(last["node"], "bastion-a", "{last}");
    // The chain holds either way.
    b.cli(&["audit", "verify"]);
}

/// This machine's name, as `hostname` prints it.
fn this_host() -> String {
    let out = Command::new("hostname").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A login lasts only while its user may still use the console: a reload
/// that takes erin's role away ends hers at her next request.
#[test]
fn a_role_taken_away_by_a_reload_ends_the_login() {
    let (b, base) = console();
    let cookie = cookie_of(&log_in(&base, "erin", ERIN_PW));
    assert_eq!(
        curl(&format!("{base}/sessions"), &["-b", &cookie]).status,
        200
    );
    let text = std::fs::read_to_string(&b.config).unwrap();
    std::fs::write(
        &b.config,
        text.replace("role = \"auditor\"", "role = \"user\""),
    )
    .unwrap();
    b.reload();
    let after = curl(&format!("{base}/sessions"), &["-b", &cookie]);
    assert_eq!(
        (after.status, after.header("location")),
        (303, Some("/login"))
    );
}

/// The console's connections are bounded: a client that sends a request
/// head slowly is cut off, and one address cannot hold every connection
/// (the others still get in).
#[test]
fn slow_and_greedy_clients_do_not_hold_the_console() {
    use std::io::{Read, Write};
    let (_b, base) = console();
    let addr = base.trim_start_matches("http://").to_string();
    // A head that never ends: the connection is closed (after a 408),
    // well before the test's own deadline.
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    slow.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut got = Vec::new();
    let read = slow.read_to_end(&mut got);
    assert!(read.is_ok(), "not closed: {read:?}");
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
    // A body that never ends: answered 408 (it held no place among the
    // requests served meanwhile).
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    slow.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    slow.write_all(
        b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nuser=",
    )
    .unwrap();
    assert_eq!(curl(&format!("{base}/healthz"), &[]).body, "ok\n");
    let mut got = Vec::new();
    let _ = slow.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    // One address holds 32 connections at most; a 33rd is closed at once.
    let held: Vec<std::net::TcpStream> = (0..32)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    // Each is being served: a request on the last one is answered.
    let mut last = held.last().unwrap();
    last.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = [0u8; 12];
    last.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
    let mut over = std::net::TcpStream::connect(&addr).unwrap();
    over.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let _ = over.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut none = Vec::new();
    let _ = over.read_to_end(&mut none);
    assert!(none.is_empty(), "{}", String::from_utf8_lossy(&none));
    drop(held);
    // Given back: the next one is served.
    let healthz = format!("{base}/healthz");
    wait_until(
        || {
            let out = Command::new("curl")
                .args(["-s", &healthz])
                .output()
                .unwrap();
            out.stdout == b"ok\n"
        },
        "the console to serve again",
    );
}
