//! What `auto` runs unasked runs in a sandbox on the target (issue 30):
//! with the real bubblewrap (root over ssh, an ordinary account on a
//! local target), with util-linux `unshare` where the target has no
//! bwrap, and asked instead where no sandbox works. Each unasked line is
//! bounded in time and output.

use crate::agent::*;
use crate::harness::*;
use crate::model::*;

const RUN: &str = "Run? [y/N/e]";

/// fay: bob's key, the zsh target (a local shell of an ordinary
/// account), `ai = "auto"`; short limits for what runs unasked.
const FAY: &str = r#"
[ai]
auto_timeout_s = 2
auto_output_max = 65536

[[users]]
name = "fay"
authorized_keys = ["{bob_pub}"]
targets = ["zsh"]
ai = "auto"
"#;

/// A file on the host's own /tmp, which no sandbox shows.
struct Planted(std::path::PathBuf);

impl Planted {
    fn new() -> Planted {
        let path = std::env::temp_dir().join(format!("walissh-planted-{}", std::process::id()));
        std::fs::write(&path, "planted").unwrap();
        Planted(path)
    }
    fn name(&self) -> String {
        self.0.file_name().unwrap().to_string_lossy().into_owned()
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Asks one question on `login` whose model runs `ls -a /tmp`,
/// `sleep 5` and `seq 1 100000000`, all unasked; returns what the
/// model was told of each, and the `ai_tool_call` rows.
fn three_unasked(
    b: &Bastion,
    model: &Model,
    login: &str,
    prompt: &str,
) -> (Vec<String>, Vec<serde_json::Value>) {
    let t = Terminal::spawn(&b.ssh_bob(login), 24, 80);
    t.send("echo READY-$((1+1))\r");
    let at = t.expect("READY-2");
    b.wait_event(|e| e["kind"] == "command" && e["command"] == "echo READY-$((1+1))");
    t.expect_from(prompt, at);
    let at = ask(&t, "? look around");
    let at = t.expect_from("SANDBOX-DONE", at);
    t.expect_from(prompt, at);
    let reqs = model.wait_requests(4);
    let told: Vec<String> = reqs[1..]
        .iter()
        .map(|r| content(last_turn(r).1[0]).to_string())
        .collect();
    b.wait_kind("ai_answer");
    let ev = ai_events(b);
    let calls = of_kind(&ev, "ai_tool_call").into_iter().cloned().collect();
    assert!(!t.screen.plain().contains(RUN), "something was asked");
    (told, calls)
}

fn script() -> Model {
    Model::start(vec![
        Reply::Sse(call("s1", "ls -a /tmp", "look")),
        Reply::Sse(call("s2", "sleep 5", "wait")),
        Reply::Sse(call("s3", "seq 1 100000000", "count")),
        Reply::Sse(answer("SANDBOX-DONE")),
    ])
}

/// What the model was told and the rows say of the three lines, behind
/// `wall`.
fn walled_and_bounded(told: &[String], calls: &[serde_json::Value], wall: &str, planted: &Planted) {
    assert_eq!(calls.len(), 3, "{calls:#?}");
    for c in calls {
        assert_eq!(c["decision"], "auto", "{c}");
        assert_eq!(c["sandbox"], wall, "{c}");
    }
    // A private, empty /tmp.
    assert!(told[0].contains("exit code 0"), "{}", told[0]);
    assert!(!told[0].contains(&planted.name()), "{}", told[0]);
    // `sleep 5` ends at auto_timeout_s (2 s).
    assert!(
        told[1].contains("interrupted: it ran longer than 2 s"),
        "{}",
        told[1]
    );
    // `seq` ends at auto_output_max, and the model is told.
    assert!(
        told[2].contains("interrupted: it printed more than 65536 bytes"),
        "{}",
        told[2]
    );
}

/// bob (or fay) in `auto` on `login`: the three lines run behind `wall`,
/// on a target sshd whose logins run without `missing`.
fn three_behind(wall: &str, login: &str, prompt: &str, missing: &'static [&'static str]) {
    let planted = Planted::new();
    let model = script();
    let b = bastion_with(
        &model,
        Opts {
            bob_ai: "auto",
            extra_toml: FAY.into(),
            target_without: missing,
            ..Opts::default()
        },
    );
    let (told, calls) = three_unasked(&b, &model, login, prompt);
    walled_and_bounded(&told, &calls, wall, &planted);
}

#[test]
fn unasked_lines_run_behind_bwrap_as_root_over_ssh() {
    three_behind("bwrap", "bob:web1", "# ", &[]);
}

#[test]
fn unasked_lines_run_behind_bwrap_as_an_ordinary_account() {
    let Some(_) = zsh_user() else {
        panic!("the ordinary account's test needs root and zsh, as CI has them");
    };
    three_behind("bwrap", "fay:zsh", "% ", &[]);
}

#[test]
fn a_root_login_without_bwrap_gets_unshare() {
    three_behind("unshare", "bob:web1", "# ", &["/usr/bin/bwrap"]);
}

/// With no sandbox on the target, `require` asks what `auto` would run
/// unasked, says why once, and the approved line runs in the user's
/// shell; `prefer` runs it unasked with none.
fn without_any_sandbox(mode: &str) -> (Bastion, Terminal, Model) {
    let model = Model::start(vec![
        Reply::Sse(call("n1", "echo NO-WALL-RAN", "look")),
        Reply::Sse(answer("NO-WALL-DONE")),
    ]);
    let b = bastion_with(
        &model,
        Opts {
            bob_ai: "auto",
            extra_toml: format!("[ai]\nauto_sandbox = \"{mode}\"\n"),
            target_without: &["/usr/bin/bwrap", "/usr/bin/unshare"],
            ..Opts::default()
        },
    );
    let t = bob(&b);
    (b, t, model)
}

#[test]
fn require_asks_where_no_sandbox_works() {
    let (b, t, _model) = without_any_sandbox("require");
    let at = ask(&t, "? look");
    let at = t.expect_from("no sandbox works on this target", at);
    let at = t.expect_from(RUN, at);
    t.send("y");
    let at = t.expect_from("NO-WALL-DONE", at);
    back_at_prompt(&b, &t, at);
    let ev = ai_events(&b);
    let calls = of_kind(&ev, "ai_tool_call");
    assert_eq!(calls.len(), 1, "{ev:#?}");
    assert_eq!(calls[0]["decision"], "approved");
    assert!(
        calls[0].get("sandbox").is_none_or(|s| s.is_null()),
        "{}",
        calls[0]
    );
}

#[test]
fn prefer_runs_with_the_policy_alone_where_no_sandbox_works() {
    let (b, t, model) = without_any_sandbox("prefer");
    let at = ask(&t, "? look");
    let at = t.expect_from("NO-WALL-DONE", at);
    back_at_prompt(&b, &t, at);
    let reqs = model.wait_requests(2);
    assert_ran(
        last_turn(&reqs[1]).1[0],
        "n1",
        "echo NO-WALL-RAN",
        0,
        "NO-WALL-RAN",
    );
    let call = b.wait_kind("ai_tool_call");
    assert_eq!(call["decision"], "auto");
    assert_eq!(call["sandbox"], "none");
    assert!(!t.screen.plain().contains(RUN));
}
