//! Four-eyes: a command of the agent that needs a second person's
//! approval after the user's. The user says `y`, sees `waiting for a
//! second approval`, and an approver answers: an admin in a real
//! browser, by a form over HTTP, or `walissh approve` on the host; or
//! nobody does in time, or the user withdraws it with Ctrl-C.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agent::{ai_events, answer_run, ask, back_at_prompt, bastion_with, last_turn};
use crate::harness::*;
use crate::live::{ADAM_PW, console_with};
use crate::model::*;
use crate::web::{Chromedriver, browser_log_in, click, cookie_of, curl, log_in, shot, wait_for};

const WAITING: &str = "waiting for a second approval";

/// `[ai] four_eyes` on `echo FOUR*`, with the console (erin auditor,
/// adam admin) and the model's `replies`; bob's terminal on web1.
fn four_eyes(replies: Vec<Reply>, timeout_s: u64) -> (Model, Bastion, String, Terminal) {
    let model = Model::start(replies);
    let ai = format!("[ai]\nfour_eyes = [\"echo FOUR*\"]\nfour_eyes_timeout_s = {timeout_s}\n");
    let (b, base) = console_with(
        &ai,
        Opts {
            llm_url: Some(model.url()),
            ..Opts::default()
        },
    );
    let t = crate::agent::bob(&b);
    (model, b, base, t)
}

/// The one request waiting, as `walissh approvals --json` lists it.
pub(crate) fn waiting_one(b: &Bastion) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = json_lines(&b.cli(&["approvals", "--json"]));
        if let [one] = listed.as_slice() {
            return one.clone();
        }
        assert!(Instant::now() < deadline, "no request waits: {listed:?}");
        // The list is the daemon's; the request is put there after `y`.
        std::thread::yield_now();
    }
}

/// The first `ai_tool_call` row, once it is written (a refusal's is
/// queued, not written ahead).
fn the_call(b: &Bastion) -> Value {
    b.wait_kind("ai_tool_call")
}

/// bob says y, adam approves in the browser (the approvals page, opened
/// before the request came, shows it without a reload by hand), and the
/// command runs; its row names adam.
#[test]
fn in_a_browser_an_admin_gives_the_second_approval() {
    let (model, b, base, t) = four_eyes(
        vec![
            Reply::Sse(call("c1", "echo FOUR-$((2*2))", "restart it")),
            Reply::Sse(answer("Restarted.")),
        ],
        120,
    );
    let shots = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/console");
    std::fs::create_dir_all(&shots).unwrap();
    let driver = Chromedriver::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = driver.client(b.dir.path()).await;
        browser_log_in(&c, &base, "adam", ADAM_PW).await;
        c.goto(&format!("{base}/approvals")).await.unwrap();
        wait_for(&c, "#approvals").await;
        let at = ask(&t, "? restart the service");
        let at = answer_run(&t, at, "y");
        t.expect_from(WAITING, at);
        // The page shows it by itself, the command exactly as it runs.
        wait_for(&c, "section.approval").await;
        let card = crate::web::text_of(&c, "section.approval").await;
        assert!(card.contains("echo FOUR-$((2*2))"), "{card}");
        assert!(card.contains("restart the service"), "{card}");
        shot(&c, &shots.join("approvals.png")).await;
        click(&c, "section.approval button.approve").await;
        wait_for(&c, "#approvals p.none").await;
        c.close().await.unwrap();
    });
    let at = t.expect("approved by adam");
    let at = t.expect_from("FOUR-4", at);
    let at = t.expect_from("Restarted.", at);
    back_at_prompt(&b, &t, at);
    let row = the_call(&b);
    assert_eq!(row["decision"], "approved");
    assert_eq!(row["approver"], "adam");
    let reqs = model.wait_requests(2);
    let (_, results) = last_turn(&reqs[1]);
    assert!(results[0]["content"].as_str().unwrap().contains("FOUR-4"));
}

/// adam denies (a form over HTTP): the command does not run, and the
/// model is told. An auditor may not answer, nor a form without the
/// login's CSRF token.
#[test]
fn a_denied_command_does_not_run_and_the_model_is_told() {
    let (model, b, base, t) = four_eyes(
        vec![
            Reply::Sse(call("c1", "echo FOUR-$((3*3))", "look")),
            Reply::Sse(answer("It was denied.")),
        ],
        120,
    );
    let at = ask(&t, "? try it");
    let at = answer_run(&t, at, "y");
    t.expect_from(WAITING, at);
    let id = waiting_one(&b)["id"].as_str().unwrap().to_string();
    let csrf_of = |cookie: &str| {
        curl(&format!("{base}/approvals"), &["-b", cookie])
            .body
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or("")
            .to_string()
    };
    let erin = cookie_of(&log_in(&base, "erin", crate::web::ERIN_PW));
    let page = curl(&format!("{base}/approvals"), &["-b", &erin]).body;
    assert!(page.contains("Only a admin other than bob"), "{page}");
    let url = format!("{base}/approvals/{id}");
    let by_erin = curl(
        &url,
        &[
            "-b",
            &erin,
            "--data",
            &format!("csrf={}&answer=deny", csrf_of(&erin)),
        ],
    );
    assert_eq!(by_erin.status, 403);
    let adam = cookie_of(&log_in(&base, "adam", ADAM_PW));
    let forged = curl(&url, &["-b", &adam, "--data", "csrf=nope&answer=deny"]);
    assert_eq!(forged.status, 403);
    let denied = curl(
        &url,
        &[
            "-b",
            &adam,
            "--data",
            &format!("csrf={}&answer=deny", csrf_of(&adam)),
        ],
    );
    assert_eq!(denied.status, 303, "{}", denied.body);
    let at = t.expect("denied by adam: not run");
    let at = t.expect_from("It was denied.", at);
    back_at_prompt(&b, &t, at);
    assert!(!t.screen.plain().contains("FOUR-9"));
    let row = the_call(&b);
    assert_eq!(row["decision"], "denied_by_approver");
    assert_eq!(row["approver"], "adam");
    assert!(!ai_events(&b).iter().any(|e| e["kind"] == "ai_tool_result"));
    // The answer is a row of its own; the refused tries made none.
    let answers = b.wait_count("four_eyes_answer", 1);
    assert_eq!(answers.len(), 1, "{answers:?}");
    let a = &answers[0];
    assert_eq!(
        (
            a["by"].as_str(),
            a["approve"].as_bool(),
            a["via"].as_str(),
            a["result"].as_str()
        ),
        (Some("adam"), Some(false), Some("console"), Some("taken"))
    );
    assert_eq!(
        (a["user"].as_str(), a["request"].as_str()),
        (Some("bob"), Some(id.as_str()))
    );
    let reqs = model.wait_requests(2);
    let (_, results) = last_turn(&reqs[1]);
    let told = results[0]["content"].as_str().unwrap();
    assert!(told.contains("second approver (adam) denied it"), "{told}");
    // Both requests to the model are timed for /metrics, with the
    // decision of the call.
    let metrics = curl(&format!("{base}/metrics"), &[]).body;
    for line in [
        "walissh_model_request_seconds_count{outcome=\"ok\"} 2",
        "walissh_agent_tool_calls_total{decision=\"denied_by_approver\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} not in:\n{metrics}"
        );
    }
}

/// Nobody answers within `four_eyes_timeout_s`: denied, not run, the
/// model told.
#[test]
fn an_unanswered_request_times_out_and_is_denied() {
    let (model, b, _base, t) = four_eyes(
        vec![
            Reply::Sse(call("c1", "echo FOUR-$((4*4))", "look")),
            Reply::Sse(answer("Nobody approved.")),
        ],
        1,
    );
    let at = ask(&t, "? try it");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from(WAITING, at);
    let at = t.expect_from("no second approval in time: not run", at);
    let at = t.expect_from("Nobody approved.", at);
    back_at_prompt(&b, &t, at);
    assert!(!t.screen.plain().contains("FOUR-16"));
    let row = the_call(&b);
    assert_eq!(row["decision"], "denied_by_approver");
    assert!(row.get("approver").is_none());
    let reqs = model.wait_requests(2);
    let (_, results) = last_turn(&reqs[1]);
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("no second approval came in time")
    );
    assert!(json_lines(&b.cli(&["approvals", "--json"])).is_empty());
}

/// `walissh approvals` lists the waiting command for sites without the
/// console, and `walissh approve ID` gives the second approval as the
/// host account that ran it. A command the globs do not name runs as
/// before, with one approval (a literal one: `echo $X` could be
/// `echo FOUR…`, and would wait).
#[test]
fn approvals_from_the_command_line() {
    let model = Model::start(vec![
        Reply::Sse(call("c1", "echo PLAIN-TWO", "look")),
        Reply::Sse(call("c2", "env echo FOUR-$((5*5))", "wrapped")),
        Reply::Sse(answer("Both ran.")),
    ]);
    let b = bastion_with(
        &model,
        Opts {
            extra_toml: "[ai]\nfour_eyes = [\"echo FOUR*\"]\n".into(),
            ..Opts::default()
        },
    );
    let t = crate::agent::bob(&b);
    let at = ask(&t, "? do both");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("PLAIN-TWO\r\n", at);
    // The glob names `echo FOUR…` however it is wrapped.
    let at = answer_run(&t, at, "y");
    let at = t.expect_from(WAITING, at);
    let listed = b.cli(&["approvals"]);
    let line = stdout(&listed);
    assert!(line.contains("bob@web1"), "{line}");
    assert!(line.contains("$ env echo FOUR-$((5*5))"), "{line}");
    let one = waiting_one(&b);
    assert_eq!(one["command"], "env echo FOUR-$((5*5))");
    assert_eq!(one["question"], "do both");
    let id = one["id"].as_str().unwrap();
    let out = b.cli_any(&["approve", "0000000000000000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no such approval is waiting"),
        "{}",
        stderr(&out)
    );
    let out = b.cli(&["approve", id]);
    assert!(stdout(&out).starts_with("approved: "), "{}", stdout(&out));
    let results: Vec<String> = b
        .wait_count("four_eyes_answer", 2)
        .into_iter()
        .filter(|e| e["via"] == "cli")
        .map(|e| e["result"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(results, ["gone", "taken"]);
    let who = format!("unix:{}", me());
    let at = t.expect_from(&format!("approved by {who}"), at);
    let at = t.expect_from("Both ran.", at);
    back_at_prompt(&b, &t, at);
    let calls = b.wait_count("ai_tool_call", 2);
    assert!(calls[0].get("approver").is_none());
    assert_eq!(calls[1]["approver"], who.as_str());
    let _ = model;
}

/// Ctrl-C while it waits withdraws the request: nothing runs, the
/// approvers' list is empty again, and the question ends as stopped.
#[test]
fn ctrl_c_withdraws_a_waiting_request() {
    let (_model, b, _base, t) = four_eyes(
        vec![Reply::Sse(call("c1", "echo FOUR-$((6*6))", "look"))],
        120,
    );
    let at = ask(&t, "? try it");
    let at = answer_run(&t, at, "y");
    t.expect_from(WAITING, at);
    waiting_one(&b);
    t.send("\x03");
    t.expect_from("stopped by the user", at);
    b.wait_event(|e| e["kind"] == "ai_error");
    assert!(json_lines(&b.cli(&["approvals", "--json"])).is_empty());
    assert!(!t.screen.plain().contains("FOUR-36"));
    assert!(!ai_events(&b).iter().any(|e| e["kind"] == "ai_tool_call"));
}

/// `[[targets]] four_eyes`: every command of the agent there waits, even
/// one `auto` would run unasked.
#[test]
fn a_four_eyes_target_asks_for_everything() {
    let model = Model::start(vec![
        Reply::Sse(call("c1", "uptime", "load")),
        Reply::Sse(answer("Fine.")),
    ]);
    let b = bastion_with(
        &model,
        Opts {
            bob_ai: "auto",
            extra_toml: "[[targets]]\nname = \"vault\"\nhost = \"127.0.0.1\"\nport = {sshd_port}\nuser = \"{me}\"\nfour_eyes = true\n\n[[users]]\nname = \"vic\"\nauthorized_keys = [\"{bob_pub}\"]\ntargets = [\"vault\"]\nai = \"auto\"\n".into(),
            ..Opts::default()
        },
    );
    let t = crate::agent::ready(&b.ssh_bob("vic:vault"));
    let at = ask(&t, "? how loaded");
    // Read-only, so unasked elsewhere in auto; here, asked first.
    let at = answer_run(&t, at, "y");
    let at = t.expect_from(WAITING, at);
    let id = waiting_one(&b)["id"].as_str().unwrap().to_string();
    b.cli(&["approve", &id, "--deny"]);
    let at = t.expect_from("denied by unix:", at);
    t.expect_from("Fine.", at);
    let row = the_call(&b);
    assert_eq!(row["decision"], "denied_by_approver");
    let _ = model;
}

/// A shell walissh carries (a local target's, here as walissh's own
/// account) cannot reach the control socket's answers: its user could
/// otherwise approve their own command, or end others' sessions.
#[test]
fn a_shell_walissh_carries_cannot_approve_or_kill() {
    let b = Bastion::start();
    let run = format!(
        "{} approve 0123456789abcdef -c {}; {} sessions kill x --reason y -c {}",
        walissh_bin(),
        b.config.display(),
        walissh_bin(),
        b.config.display()
    );
    let out = exec(b.ssh_bob("bob:local"), &run);
    let err = stderr(&out);
    assert_eq!(
        err.matches("refused: this runs inside a session walissh carries")
            .count(),
        2,
        "{err}"
    );
    // From the host itself (the test's own process), the same socket
    // answers.
    let out = b.cli_any(&["approve", "0123456789abcdef"]);
    assert!(
        stderr(&out).contains("no such approval is waiting"),
        "{}",
        stderr(&out)
    );
}
