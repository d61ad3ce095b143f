//! The agent (issue 4): `?` questions answered by a ReAct loop that asks a
//! scripted OpenAI-compatible model server (real HTTP, real SSE) and runs
//! commands in the user's own shell, through the real OpenSSH client on a
//! real PTY, against a real sshd target.
//!
//! Every test waits on events (text on the screen, audit rows, requests at
//! the model server), never on time; the few time bounds asserted are lower
//! bounds the implementation guarantees (Retry-After, timeouts).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;
use crate::model::*;
use crate::terminal::prompt_end;

const RUN: &str = "Run? [y/N/e]";

/// The audit of a question answered after two commands ran.
const TWO_COMMANDS_RUN: [&str; 6] = [
    "ai_prompt",
    "ai_tool_call",
    "ai_tool_result",
    "ai_tool_call",
    "ai_tool_result",
    "ai_answer",
];

/// walissh with `[llm]` pointing at `model`.
fn bastion(model: &Model) -> Bastion {
    bastion_with(model, Opts::default())
}

/// walissh asking `model`, bob in `ai = "auto"`.
pub fn auto_bastion(model: &Model) -> Bastion {
    bastion_with(
        model,
        Opts {
            bob_ai: "auto",
            ..Opts::default()
        },
    )
}

pub fn bastion_with(model: &Model, opts: Opts) -> Bastion {
    Bastion::start_with(Opts {
        llm_url: Some(model.url()),
        ..opts
    })
}

/// `login`'s terminal, once its shell has run a command and is back at
/// its prompt.
pub fn ready(login: &std::process::Command) -> Terminal {
    let t = Terminal::spawn(login, 24, 80);
    t.send("echo READY-$((1+1))\r");
    let at = t.expect("READY-2");
    t.expect_from(prompt_end(), at);
    t
}

/// bob on web1 (bash, shell integration on), at the prompt.
pub fn bob(b: &Bastion) -> Terminal {
    ready(&b.ssh_bob("bob:web1"))
}

/// walissh asking `model`, with `ai` (TOML for `[ai]`), and bob at his
/// prompt.
pub fn bob_with_ai(model: &Model, ai: &str) -> (Bastion, Terminal) {
    let b = bastion_with(
        model,
        Opts {
            extra_toml: ai.into(),
            ..Opts::default()
        },
    );
    let t = bob(&b);
    (b, t)
}

/// A model server with `replies`, walissh asking it, and bob at his prompt.
pub fn bob_with_model(replies: Vec<Reply>) -> (Model, Bastion, Terminal) {
    let model = Model::start(replies);
    let b = bastion(&model);
    let t = bob(&b);
    (model, b, t)
}

/// Types `question` and Enter at the prompt; returns the screen offset
/// before it.
pub fn ask(t: &Terminal, question: &str) -> usize {
    let at = t.screen.end();
    t.send(&format!("{question}\r"));
    at
}

/// Waits for the agent's `Run? [y/N/e]` (after `from`) and answers it with
/// `key`; returns the offset past the question.
pub fn answer_run(t: &Terminal, from: usize, key: &str) -> usize {
    let at = t.expect_from(RUN, from);
    t.send(key);
    at
}

/// The agent is done (its last words end at `from`): the prompt comes
/// back, the next line typed reaches the shell (nothing was left in the
/// way, no keystroke of the exchange leaked into it), runs, and is audited
/// as the user's own command. Returns the offset past the next prompt.
pub fn back_at_prompt(b: &Bastion, t: &Terminal, from: usize) -> usize {
    let at = back_at_prompt_unaudited(t, from);
    b.wait_event(|e| e["kind"] == "command" && e["command"] == "echo BACK-$((2+3))");
    at
}

/// Like [`back_at_prompt`], without reading the audit (for while the config
/// file, which the audit CLI reads too, is broken).
pub fn back_at_prompt_unaudited(t: &Terminal, from: usize) -> usize {
    let at = t.expect_from(prompt_end(), from);
    t.send("echo BACK-$((2+3))\r");
    let at = t.expect_from("BACK-5", at);
    t.expect_from(prompt_end(), at)
}

/// The agent's audit events (`ai_*`), oldest first.
pub fn ai_events(b: &Bastion) -> Vec<Value> {
    b.audit()
        .into_iter()
        .filter(|e| e["kind"].as_str().unwrap_or("").starts_with("ai_"))
        .collect()
}

/// Once the question is answered, its `ai_*` events, which must be of
/// `expected` kinds, in order.
fn answered(b: &Bastion, expected: &[&str]) -> Vec<Value> {
    b.wait_kind("ai_answer");
    let ev = ai_events(b);
    assert_eq!(kinds(&ev), expected, "{ev:#?}");
    ev
}

pub fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["kind"].as_str().unwrap()).collect()
}

/// The events of `kind` among `events`.
pub fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// The commands audited as the user's own.
pub fn user_commands(b: &Bastion) -> Vec<String> {
    b.audit()
        .iter()
        .filter(|e| e["kind"] == "command")
        .map(|e| e["command"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Agent-run commands are not the user's: none of `commands` is audited
/// as a `command` event.
fn not_user_commands(b: &Bastion, commands: &[&str]) {
    let user = user_commands(b);
    for c in commands {
        assert!(
            !user.iter().any(|u| u == c),
            "{c:?} audited as the user's command: {user:?}"
        );
    }
}

pub fn messages(request: &Value) -> &Vec<Value> {
    request["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages: {request:#}"))
}

/// A request's last assistant message and the messages after it (which
/// must all be tool results).
pub fn last_turn(request: &Value) -> (&Value, Vec<&Value>) {
    let m = messages(request);
    let i = m
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .unwrap_or_else(|| panic!("no assistant message: {request:#}"));
    let after: Vec<&Value> = m[i + 1..].iter().collect();
    for t in &after {
        assert_eq!(t["role"], "tool", "after the assistant's turn: {request:#}");
    }
    (&m[i], after)
}

/// The `tool_calls` of an assistant message as (id, command).
fn tool_calls(assistant: &Value) -> Vec<(String, String)> {
    assistant["tool_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no tool_calls: {assistant:#}"))
        .iter()
        .map(|c| {
            assert_eq!(c["function"]["name"], "run_command", "{c:#}");
            let args: Value = serde_json::from_str(c["function"]["arguments"].as_str().unwrap())
                .unwrap_or_else(|e| panic!("arguments not JSON ({e}): {c:#}"));
            (
                c["id"].as_str().unwrap().to_string(),
                args["command"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

pub fn content(m: &Value) -> &str {
    m["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no content: {m:#}"))
}

/// A tool result for a command that ran: `$ command`, `exit code N`, then
/// the output, with no escape sequence in it.
pub fn assert_ran(result: &Value, id: &str, command: &str, exit_code: i32, output: &str) {
    assert_eq!(result["tool_call_id"], id, "{result:#}");
    let c = content(result);
    let head = format!("$ {command}\nexit code {exit_code}\n");
    assert!(c.starts_with(&head), "expected {head:?} first in: {c:?}");
    assert!(c[head.len()..].contains(output), "{output:?} not in: {c:?}");
    assert!(!c.contains('\x1b'), "escape sequences in: {c:?}");
}

/// The audit events of one exchange all belong to bob's session on web1.
fn all_in_one_session(events: &[Value]) {
    let session = &events[0]["session"];
    assert!(!session.is_null(), "{events:#?}");
    for e in events {
        assert_eq!(&e["session"], session, "{e}");
        assert_eq!(e["user"], "bob", "{e}");
        assert_eq!(e["target"], "web1", "{e}");
    }
}

/// The screen shows `RUN` this many times in all.
fn run_prompts(t: &Terminal) -> usize {
    t.screen.plain().matches(RUN).count()
}

fn scratch() -> tempfile::TempDir {
    visible_dir()
}

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// The rest of the line after `needle` (at or after `from`), once the line
/// is complete.
pub fn rest_of_line(t: &Terminal, needle: &str, from: usize) -> String {
    let at = t.expect_from(needle, from);
    t.screen.wait_for_from("\n", at);
    let rest = t.screen.since(at);
    rest.lines().next().unwrap_or("").trim().to_string()
}

#[test]
fn one_question_answered_with_one_approved_command() {
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call("call_1", "echo OUT-$((6*7))", "see what it prints")),
        Reply::Sse(answer("The disk has room to spare.")),
    ]);
    let sent = Instant::now();
    let at = ask(&t, "? why is the disk full");
    let at = t.expect_from("echo OUT-$((6*7))", at);
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("OUT-42", at);
    let at = t.expect_from("The disk has room to spare.", at);
    back_at_prompt(&b, &t, at);

    let reqs = model.wait_requests(2);
    eprintln!(
        "latency from Enter on the question to the model's first byte: {:?}",
        model.requests()[0].at.duration_since(sent)
    );
    let first = &reqs[0];
    assert_eq!(first["model"], "test-model");
    assert_eq!(first["stream"], true);
    assert_eq!(first["tools"][0]["function"]["name"], "run_command");
    assert_eq!(model.requests()[0].path, "/v1/chat/completions");
    let m = messages(first);
    assert_eq!(m[0]["role"], "system");
    assert_eq!(m[1]["role"], "user");
    let q = content(&m[1]);
    assert!(q.contains("why is the disk full"), "{q}");
    assert!(q.lines().any(|l| l.starts_with("cwd: /")), "{q}");
    let (assistant, results) = last_turn(&reqs[1]);
    assert_eq!(
        tool_calls(assistant),
        [("call_1".to_string(), "echo OUT-$((6*7))".to_string())]
    );
    assert_eq!(results.len(), 1);
    assert_ran(results[0], "call_1", "echo OUT-$((6*7))", 0, "OUT-42");

    let ev = answered(
        &b,
        &["ai_prompt", "ai_tool_call", "ai_tool_result", "ai_answer"],
    );
    all_in_one_session(&ev);
    assert_eq!(ev[0]["text"], "? why is the disk full");
    assert_eq!(ev[1]["command"], "echo OUT-$((6*7))");
    assert_eq!(ev[1]["decision"], "approved");
    assert_eq!(ev[2]["command"], "echo OUT-$((6*7))");
    assert_eq!(ev[2]["exit_code"], 0);
    assert!(ev[2]["output_bytes"].as_u64().unwrap() > 0, "{}", ev[2]);
    assert!(
        ev[3]["text"]
            .as_str()
            .unwrap()
            .contains("The disk has room to spare."),
        "{}",
        ev[3]
    );
    // The answer ended the exchange: no third request.
    assert_eq!(model.count(), 2);
    not_user_commands(&b, &["echo OUT-$((6*7))"]);
}

#[test]
fn a_question_in_zsh() {
    let Some(_) = zsh_user() else {
        eprintln!("skipped: needs root and zsh (CI installs zsh and runs as root)");
        return;
    };
    let model = Model::start(vec![
        Reply::Sse(call("z1", "pwd", "where")),
        Reply::Sse(answer("You are in /tmp.")),
    ]);
    let b = bastion(&model);
    // dave (bob's key) reaches only the zsh target.
    let t = Terminal::spawn(&b.ssh_bob("dave:zsh"), 24, 80);
    t.send("cd /tmp; echo IN-$((1+1))\r");
    let at = t.expect("IN-2");
    b.wait_event(|e| e["kind"] == "command" && e["command"] == "cd /tmp; echo IN-$((1+1))");
    // The question is typed at zsh's prompt, not ahead of it (ahead, the
    // terminal would echo it and zsh draw it again).
    t.expect_from("% ", at);
    let at = ask(&t, "? where am I");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("You are in /tmp.", at);
    // Keys typed before the prompt is back are the agent's (and dropped).
    let at = t.expect_from("% ", at);
    t.send("echo BACK-$((2+3))\r");
    t.expect_from("BACK-5", at);
    b.wait_event(|e| e["kind"] == "command" && e["command"] == "echo BACK-$((2+3))");
    let reqs = model.wait_requests(2);
    let (_, r) = last_turn(&reqs[1]);
    assert_ran(r[0], "z1", "pwd", 0, "/tmp");
    // zsh keeps the question on screen: it is not drawn a second time.
    let screen = t.screen.text();
    assert_eq!(screen.matches("? where am I").count(), 1, "{screen}");
    not_user_commands(&b, &["pwd"]);
}

#[test]
fn a_multi_step_investigation() {
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call("c1", "echo STEP-$((1+1))", "first look")),
        Reply::Sse(call("c2", "echo STEP-$((2+2))", "second look")),
        Reply::Sse(answer("Two looks, all clear.")),
    ]);
    let at = ask(&t, "? is everything fine");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("STEP-2", at);
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("STEP-4", at);
    let at = t.expect_from("Two looks, all clear.", at);
    back_at_prompt(&b, &t, at);

    let reqs = model.wait_requests(3);
    let (_, r) = last_turn(&reqs[1]);
    assert_ran(r[0], "c1", "echo STEP-$((1+1))", 0, "STEP-2");
    // The third request carries the whole investigation, in order.
    let m = messages(&reqs[2]);
    let ids: Vec<&str> = m
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c1", "c2"]);
    let (assistant, r) = last_turn(&reqs[2]);
    assert_eq!(tool_calls(assistant)[0].0, "c2");
    assert_ran(r[0], "c2", "echo STEP-$((2+2))", 0, "STEP-4");
    assert!(content(&m[1]).contains("is everything fine"));

    let ev = answered(&b, &TWO_COMMANDS_RUN);
    assert_eq!(ev[1]["command"], "echo STEP-$((1+1))");
    assert_eq!(ev[3]["command"], "echo STEP-$((2+2))");
    assert_eq!(ev[4]["exit_code"], 0);
    assert_eq!(model.count(), 3);
}

#[test]
fn commands_run_where_the_user_is() {
    let here = scratch();
    let dir = path(here.path(), "work dir");
    std::fs::create_dir(&dir).unwrap();
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call("c1", "pwd; echo \"var=$WALISSH_T\"", "where")),
        Reply::Sse(answer("You are in the work dir.")),
    ]);
    t.send(&format!(
        "cd '{dir}'; export WALISSH_T=env-$((3*3)); echo CD-$((1+2))\r"
    ));
    let at = t.expect("CD-3");
    t.expect_from(prompt_end(), at);
    let at = ask(&t, "? where am I");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("var=env-9", at);
    let at = t.expect_from("You are in the work dir.", at);
    back_at_prompt(&b, &t, at);

    let reqs = model.wait_requests(2);
    let q = content(&messages(&reqs[0])[1]);
    assert!(
        q.lines().any(|l| l.trim() == format!("cwd: {dir}")),
        "no `cwd: {dir}` line in: {q}"
    );
    let (_, r) = last_turn(&reqs[1]);
    assert_ran(r[0], "c1", "pwd; echo \"var=$WALISSH_T\"", 0, &dir);
    assert!(
        content(r[0]).contains("var=env-9"),
        "not the user's environment: {}",
        content(r[0])
    );
    // The user's shell is still where they left it.
    let at = t.screen.end();
    t.send("echo \"WHERE-$((1+1)):$PWD\"\r");
    assert_eq!(rest_of_line(&t, "WHERE-2:", at), dir);
}

#[test]
fn built_in_deny_rules_refuse_without_asking() {
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call("c1", "mkfs.ext4 /nonexistent-walissh", "format it")),
        Reply::Sse(answer("I may not format it.")),
    ]);
    let at = ask(&t, "? format the spare disk");
    let at = t.expect_from("refused", at);
    let at = t.expect_from("I may not format it.", at);
    back_at_prompt(&b, &t, at);
    assert_eq!(run_prompts(&t), 0, "a denied command was offered");

    let reqs = model.wait_requests(2);
    let (_, r) = last_turn(&reqs[1]);
    assert_eq!(r[0]["tool_call_id"], "c1");
    assert!(content(r[0]).contains("refused"), "{}", content(r[0]));
    assert!(!content(r[0]).contains("exit code"), "{}", content(r[0]));

    b.wait_kind("ai_answer");
    let ev = ai_events(&b);
    assert_eq!(kinds(&ev), ["ai_prompt", "ai_tool_call", "ai_answer"]);
    assert_eq!(ev[1]["command"], "mkfs.ext4 /nonexistent-walissh");
    assert_eq!(ev[1]["decision"], "denied_by_policy");
    not_user_commands(&b, &["mkfs.ext4 /nonexistent-walissh"]);
}

#[test]
fn configured_deny_rules_reach_every_part_of_a_command() {
    let d = scratch();
    let semi = path(d.path(), "after-semicolon");
    let subst = path(d.path(), "in-substitution");
    let pipe = path(d.path(), "behind-pipe");
    let commands = [
        format!("echo one; touch {semi}"),
        format!("echo \"$(touch {subst})\""),
        format!("echo x | touch {pipe}"),
    ];
    let model = Model::start(vec![
        Reply::Sse(call("c1", &commands[0], "make a file")),
        Reply::Sse(call("c2", &commands[1], "make a file")),
        Reply::Sse(call("c3", &commands[2], "make a file")),
        Reply::Sse(answer("All three were refused.")),
    ]);
    let (b, t) = bob_with_ai(&model, "[ai]\ndeny = [\"touch *\"]\n");
    let at = ask(&t, "? make me some files");
    let at = t.expect_from("refused", at);
    let at = t.expect_from("refused", at);
    let at = t.expect_from("refused", at);
    let at = t.expect_from("All three were refused.", at);
    back_at_prompt(&b, &t, at);
    assert_eq!(run_prompts(&t), 0, "a denied command was offered");
    for f in [&semi, &subst, &pipe] {
        assert!(
            !Path::new(f).exists(),
            "{f} was created: a denied command ran"
        );
    }

    let reqs = model.wait_requests(4);
    for (i, id) in ["c1", "c2", "c3"].iter().enumerate() {
        let (_, r) = last_turn(&reqs[i + 1]);
        assert_eq!(r[0]["tool_call_id"], *id);
        assert!(content(r[0]).contains("refused"), "{}", content(r[0]));
    }
    b.wait_kind("ai_answer");
    let ev = ai_events(&b);
    let calls = of_kind(&ev, "ai_tool_call");
    assert_eq!(calls.len(), 3, "{ev:#?}");
    for (c, command) in calls.iter().zip(&commands) {
        assert_eq!(c["command"], command.as_str());
        assert_eq!(c["decision"], "denied_by_policy");
    }
    assert!(of_kind(&ev, "ai_tool_result").is_empty(), "{ev:#?}");
}

#[test]
fn confirm_declined_with_n_or_enter() {
    let d = scratch();
    let by_n = path(d.path(), "declined-n");
    let by_enter = path(d.path(), "declined-enter");
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call("c1", &format!("touch {by_n}"), "make a file")),
        Reply::Sse(call("c2", &format!("touch {by_enter}"), "make a file")),
        Reply::Sse(answer("Nothing was changed.")),
    ]);
    let at = ask(&t, "? make me some files");
    let at = answer_run(&t, at, "n");
    let at = answer_run(&t, at, "\r");
    let at = t.expect_from("Nothing was changed.", at);
    back_at_prompt(&b, &t, at);
    assert!(!Path::new(&by_n).exists(), "ran although declined with n");
    assert!(
        !Path::new(&by_enter).exists(),
        "ran although declined with Enter"
    );

    let reqs = model.wait_requests(3);
    for (i, id) in ["c1", "c2"].iter().enumerate() {
        let (_, r) = last_turn(&reqs[i + 1]);
        assert_eq!(r[0]["tool_call_id"], *id);
        assert!(!content(r[0]).contains("exit code"), "{}", content(r[0]));
    }
    let ev = answered(
        &b,
        &["ai_prompt", "ai_tool_call", "ai_tool_call", "ai_answer"],
    );
    assert_eq!(ev[1]["decision"], "denied_by_user");
    assert_eq!(ev[1]["command"], format!("touch {by_n}"));
    assert_eq!(ev[2]["decision"], "denied_by_user");
}

#[test]
fn confirm_edit_runs_the_edited_command() {
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call("c1", "echo ORIGINAL-$((1+1))", "show it")),
        Reply::Sse(answer("Edited and done.")),
    ]);
    let at = ask(&t, "? show me something");
    let at = answer_run(&t, at, "e");
    let at = t.expect_from("edit> ", at);
    let at = t.expect_from("echo ORIGINAL-$((1+1))", at);
    t.send("\x15");
    t.send("echo EDITED-$((2+2))");
    let at = t.expect_from("echo EDITED-$((2+2))", at);
    t.send("\r");
    let at = t.expect_from("EDITED-4", at);
    let at = t.expect_from("Edited and done.", at);
    back_at_prompt(&b, &t, at);
    assert!(
        !t.screen.plain().contains("ORIGINAL-2"),
        "the original command ran"
    );

    let reqs = model.wait_requests(2);
    let (_, r) = last_turn(&reqs[1]);
    assert_ran(r[0], "c1", "echo EDITED-$((2+2))", 0, "EDITED-4");
    let ev = answered(
        &b,
        &["ai_prompt", "ai_tool_call", "ai_tool_result", "ai_answer"],
    );
    assert_eq!(ev[1]["decision"], "edited");
    assert_eq!(ev[1]["command"], "echo EDITED-$((2+2))");
    assert_eq!(ev[2]["command"], "echo EDITED-$((2+2))");
    assert_eq!(ev[2]["exit_code"], 0);
    not_user_commands(&b, &["echo EDITED-$((2+2))"]);
}

#[test]
fn an_edit_is_checked_by_the_policy_again() {
    let d = scratch();
    let marker = path(d.path(), "edited-in");
    let model = Model::start(vec![
        Reply::Sse(call("c1", "echo harmless", "show it")),
        Reply::Sse(answer("The edit was refused.")),
    ]);
    let (b, t) = bob_with_ai(&model, "[ai]\ndeny = [\"touch *\"]\n");
    let at = ask(&t, "? show me something");
    let at = answer_run(&t, at, "e");
    let at = t.expect_from("edit> ", at);
    t.send("\x15");
    t.send(&format!("touch {marker}"));
    let at = t.expect_from(&format!("touch {marker}"), at);
    t.send("\r");
    let at = t.expect_from("refused", at);
    let at = t.expect_from("The edit was refused.", at);
    back_at_prompt(&b, &t, at);
    assert!(!Path::new(&marker).exists(), "the denied edit ran");

    let reqs = model.wait_requests(2);
    let (_, r) = last_turn(&reqs[1]);
    assert_eq!(r[0]["tool_call_id"], "c1");
    assert!(content(r[0]).contains("refused"), "{}", content(r[0]));
    b.wait_kind("ai_answer");
    let ev = ai_events(&b);
    let calls = of_kind(&ev, "ai_tool_call");
    assert_eq!(calls.len(), 1, "{ev:#?}");
    assert_eq!(calls[0]["decision"], "denied_by_policy");
    assert!(of_kind(&ev, "ai_tool_result").is_empty(), "{ev:#?}");
}

#[test]
fn auto_mode_runs_read_only_commands_unasked_and_asks_for_the_rest() {
    let d = scratch();
    let target = path(d.path(), "redirected");
    let write = format!("echo x > {target}");
    let model = Model::start(vec![
        Reply::Sse(call("c1", "echo AUTO-RAN", "look")),
        Reply::Sse(call("c2", &write, "write a file")),
        Reply::Sse(answer("One read, one write.")),
    ]);
    let b = auto_bastion(&model);
    let t = bob(&b);
    let at = ask(&t, "? look then write");
    // The first `Run?` is for the second turn's command: the read-only one
    // had run unasked before the model was asked again.
    let at = t.expect_from(RUN, at);
    assert_eq!(
        model.count(),
        2,
        "asked before the second turn: the read-only command was not run unasked"
    );
    assert!(t.screen.plain().contains(&write));
    t.send("y");
    let at = t.expect_from("One read, one write.", at);
    back_at_prompt(&b, &t, at);
    assert_eq!(run_prompts(&t), 1);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x\n");

    let reqs = model.wait_requests(3);
    let (_, r) = last_turn(&reqs[1]);
    assert_ran(r[0], "c1", "echo AUTO-RAN", 0, "AUTO-RAN");
    let (_, r) = last_turn(&reqs[2]);
    assert_ran(r[0], "c2", &write, 0, "");
    b.wait_kind("ai_answer");
    let ev = ai_events(&b);
    let calls = of_kind(&ev, "ai_tool_call");
    assert_eq!(calls.len(), 2, "{ev:#?}");
    assert_eq!(calls[0]["command"], "echo AUTO-RAN");
    assert_eq!(calls[0]["decision"], "auto");
    assert_eq!(calls[1]["command"], write.as_str());
    assert_eq!(calls[1]["decision"], "approved");
    assert_eq!(of_kind(&ev, "ai_tool_result").len(), 2);
}

#[test]
fn a_command_waiting_for_a_password_is_interrupted() {
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call(
            "c1",
            "read -s -p 'Password: ' pw; echo \"got-$pw\"",
            "needs input",
        )),
        Reply::Sse(answer("It wanted a password.")),
    ]);
    let at = ask(&t, "? log in somewhere");
    answer_run(&t, at, "y");
    // Nothing is typed: walissh must notice the wait on its own.
    let reqs = model.wait_requests(2);
    let (_, r) = last_turn(&reqs[1]);
    assert_eq!(r[0]["tool_call_id"], "c1");
    let c = content(r[0]);
    assert!(
        c.starts_with("$ read -s -p 'Password: ' pw; echo \"got-$pw\"\n"),
        "{c:?}"
    );
    assert!(c.contains("interrupted"), "{c:?}");
    assert!(c.contains("waiting for input"), "{c:?}");
    let at = t.expect_from("It wanted a password.", at);
    back_at_prompt(&b, &t, at);
    b.wait_kind("ai_answer");
    let ev = ai_events(&b);
    assert_eq!(of_kind(&ev, "ai_tool_result").len(), 1, "{ev:#?}");
}

#[test]
fn a_command_past_its_timeout_is_interrupted() {
    let model = Model::start(vec![
        Reply::Sse(call("c1", "echo TICK-$((1+1)); sleep 617", "wait")),
        Reply::Sse(answer("That took too long.")),
    ]);
    let (b, t) = bob_with_ai(&model, "[ai]\ncommand_timeout_s = 3\n");
    let at = ask(&t, "? wait for it");
    let at = t.expect_from(RUN, at);
    let approved = Instant::now();
    t.send("y");
    let at = t.expect_from("TICK-2", at);
    let reqs = model.wait_requests(2);
    let waited = model.requests()[1].at.duration_since(approved);
    assert!(
        waited >= Duration::from_secs(3),
        "interrupted after {waited:?}, before its 3 s"
    );
    let (_, r) = last_turn(&reqs[1]);
    let c = content(r[0]);
    assert!(c.starts_with("$ echo TICK-$((1+1)); sleep 617\n"), "{c:?}");
    assert!(c.contains("interrupted"), "{c:?}");
    assert!(c.contains("TICK-2"), "{c:?}");
    let at = t.expect_from("That took too long.", at);
    back_at_prompt(&b, &t, at);
}

#[test]
fn ctrl_c_while_the_model_streams() {
    let (model, b, t) = bob_with_model(vec![Reply::Stall(vec![text("Let me look around")])]);
    let at = ask(&t, "? why is it slow");
    let at = t.expect_from("Let me look around", at);
    t.send("\x03");
    let at = t.expect_from("walissh: stopped", at);
    back_at_prompt(&b, &t, at);
    let e = b.wait_kind("ai_error");
    assert!(
        e["message"].as_str().unwrap_or("").contains("stopped"),
        "{e}"
    );
    assert_eq!(model.count(), 1);
    assert!(of_kind(&ai_events(&b), "ai_answer").is_empty());
}

/// Bob at a shell on web1, before a model with `replies`, his keys
/// recorded (so a test can tell when they reached walissh).
fn bob_recording_keys(replies: Vec<Reply>) -> (Model, Bastion, Terminal) {
    let model = Model::start(replies);
    let b = bastion_with(
        &model,
        Opts {
            record_input: true,
            ..Opts::default()
        },
    );
    let t = bob(&b);
    (model, b, t)
}

/// Waits until `keys` reached walissh: in the first session's recording.
fn wait_typed(b: &Bastion, keys: &str) {
    let path = b.sessions()[0]["recording"].as_str().unwrap().to_string();
    wait_until(
        || typed_so_far(&path).contains(keys),
        "the keys never reached walissh",
    );
}

/// Keys typed into the recording at `path` so far (its `"i"` events).
fn typed_so_far(path: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e[1] == "i")
        .filter_map(|e| e[2].as_str().map(str::to_string))
        .collect()
}

#[test]
fn keys_typed_while_the_model_thinks_are_dropped_and_after_its_answer_kept() {
    let (open, gate) = std::sync::mpsc::channel();
    let (model, b, t) = bob_recording_keys(vec![
        Reply::After(gate, answer("Nothing to do.")),
        Reply::Sse(answer("Still nothing.")),
    ]);
    let at = ask(&t, "? anything");
    model.wait_requests(1);
    // While the model thinks, nothing reads keys, and nothing typed then
    // may reach the prompt (a password typed for a command that never
    // asked must not run as a command line). The recording shows when
    // the keys reached walissh; then the answer comes.
    let early = "echo EARLY-$((4+4))\r";
    t.send(early);
    wait_typed(&b, early);
    open.send(()).unwrap();
    let at = t.expect_from("Nothing to do.", at);
    back_at_prompt(&b, &t, at);
    assert!(!t.screen.plain().contains("EARLY-8"));
    // Keys typed the moment an answer is shown, before the prompt is
    // back, are not lost: they run once, at the fresh prompt. (Whether
    // they come before the prompt's return or after depends on timing;
    // either way they must run exactly once.)
    let at = ask(&t, "? again");
    let at = t.expect_from("Still nothing.", at);
    t.send("echo AHEAD-$((5+5))\r");
    let at = t.expect_from("AHEAD-10", at);
    t.expect_from(prompt_end(), at);
    b.wait_event(|e| e["kind"] == "command" && e["command"] == "echo AHEAD-$((5+5))");
    let mine = user_commands(&b);
    assert_eq!(
        mine.iter().filter(|c| c.contains("AHEAD")).count(),
        1,
        "{mine:?}"
    );
    assert!(!mine.iter().any(|c| c.contains("EARLY")), "{mine:?}");
    assert_eq!(t.screen.plain().matches("AHEAD-10").count(), 1);
}

/// Ctrl-C typed once the answer is complete, before the prompt is back,
/// is type-ahead like any key: it reaches the shell in its place among
/// them. (It stopped the agent, which had nothing left to stop, and was
/// lost, with the keys that came with it.) The answer is complete when
/// the model's last turn ends, before its `ai_answer` row is written:
/// the keys are typed once that row is there (typed as soon as the
/// answer showed, they raced the end of the turn, and lost once in
/// five full runs). Whether they come before the prompt's return or
/// after depends on timing; either way the line before the Ctrl-C is
/// cleared and the one after it runs, once.
#[test]
fn ctrl_c_typed_after_the_answer_is_type_ahead() {
    let (model, b, t) = bob_with_model(vec![Reply::Sse(answer("Nothing to do."))]);
    // A prompt that takes a second to draw holds the terminal with the
    // seat that long after the answer: the keys below come in that time
    // (they would work as well after it).
    t.send("PS1=\"\\$(sleep 1)$PS1\"\r");
    let at = t.expect_from(prompt_end(), 0);
    t.expect_from(prompt_end(), at);
    let at = ask(&t, "? anything");
    let at = t.expect_from("Nothing to do.", at);
    b.wait_kind("ai_answer");
    t.send("echo CLEARED-$((3+3))\x03echo AFTER-$((6+6))\r");
    let at = t.expect_from("AFTER-12", at);
    t.expect_from(prompt_end(), at);
    b.wait_event(|e| e["kind"] == "command" && e["command"] == "echo AFTER-$((6+6))");
    let mine = user_commands(&b);
    assert!(!mine.iter().any(|c| c.contains("CLEARED")), "{mine:?}");
    assert!(!t.screen.plain().contains("CLEARED-6"));
    assert_eq!(t.screen.plain().matches("AFTER-12").count(), 1);
    assert_eq!(model.count(), 1);
}

/// Keys typed once the answer's text shows, while the model's turn is not
/// yet over (its stream still open), are the prompt's: they run once the
/// answer is complete. (They fell in the gap between the text and the
/// turn's end, and were forgotten with the keys typed while it thought.)
#[test]
fn keys_typed_between_the_answer_and_the_end_of_its_turn_are_kept() {
    let (release, gate) = std::sync::mpsc::channel();
    let (model, b, t) = bob_recording_keys(vec![Reply::Hold(answer("Held open."), gate)]);
    let at = ask(&t, "? anything");
    let at = t.expect_from("Held open.", at);
    t.send("echo KEPT-$((7+7))\r");
    wait_typed(&b, "echo KEPT");
    assert!(
        b.audit().iter().all(|e| e["kind"] != "ai_answer"),
        "the turn was over"
    );
    release.send(()).unwrap();
    let at = t.expect_from("KEPT-14", at);
    t.expect_from(prompt_end(), at);
    b.wait_event(|e| e["kind"] == "command" && e["command"] == "echo KEPT-$((7+7))");
    assert_eq!(t.screen.plain().matches("KEPT-14").count(), 1);
    assert_eq!(model.count(), 1);
}

#[test]
fn ctrl_c_while_a_command_runs() {
    let (model, b, t) = bob_with_model(vec![Reply::Sse(call(
        "c1",
        "echo SLEEPING-$((3*3)); sleep 613",
        "wait",
    ))]);
    let at = ask(&t, "? wait for it");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("SLEEPING-9", at);
    t.send("\x03");
    let at = t.expect_from("walissh: stopped", at);
    let at = back_at_prompt(&b, &t, at);
    let e = b.wait_kind("ai_error");
    assert!(
        e["message"].as_str().unwrap_or("").contains("stopped"),
        "{e}"
    );
    // The command is gone, and the model was not asked again.
    t.send("pgrep -f 'sleep 613' >/dev/null; echo \"PGREP$((1+1)):$?\"\r");
    assert_eq!(rest_of_line(&t, "PGREP2:", at), "1", "sleep 613 still runs");
    assert_eq!(model.count(), 1);
    // The call has its result row, saying it was interrupted.
    let result = b.wait_kind("ai_tool_result");
    assert_eq!(result["command"], "echo SLEEPING-$((3*3)); sleep 613");
    assert!(
        result["interrupted"]
            .as_str()
            .unwrap_or("")
            .contains("stopped"),
        "{result}"
    );
    assert_eq!(result["depth"], 0, "{result}");
}

/// Asks one question of a failing model: the screen shows one line
/// `walissh: ...` that says `error`, the prompt comes back, and the
/// `ai_error` event says `error` too.
/// A question that fails with `error` on the screen, and an `ai_error`
/// row that says it, and names its case (`reason`).
fn fails_with(b: &Bastion, error: &str, reason: &str) -> (Terminal, Value) {
    let t = bob(b);
    let at = ask(&t, "? why is the disk full");
    let at = t.expect_from(error, at);
    let screen = t.screen.plain();
    let line = screen.lines().rfind(|l| l.contains(error)).unwrap();
    // What the terminal shows of it: the part after the last carriage
    // return (the spinner's frame before it was overwritten).
    let line = line.rsplit('\r').next().unwrap();
    assert!(
        line.starts_with("walissh: "),
        "not a walissh: line: {line:?}"
    );
    back_at_prompt(b, &t, at);
    let e = b.wait_kind("ai_error");
    assert!(e["message"].as_str().unwrap_or("").contains(error), "{e}");
    assert_eq!(e["reason"], reason, "{e}");
    (t, e)
}

#[test]
fn endpoint_down() {
    // The harness's default [llm] is a closed local port.
    let b = Bastion::start();
    fails_with(&b, "cannot reach the model endpoint", "model_unreachable");
    assert_eq!(of_kind(&ai_events(&b), "ai_error").len(), 1);
}

fn server_error() -> Reply {
    Reply::Status(
        500,
        r#"{"error":{"message":"overloaded","type":"server_error"}}"#.into(),
        vec![],
    )
}

/// A refusal the endpoint gives at once (not retried).
fn refusal(status: u16, message: &str) -> Reply {
    let body = format!(r#"{{"error":{{"message":"{message}","type":"invalid_request_error"}}}}"#);
    Reply::Status(status, body, vec![])
}

#[test]
fn a_wrong_api_key() {
    let model = Model::start(vec![refusal(401, "Incorrect API key provided")]);
    let b = bastion(&model);
    fails_with(
        &b,
        "the model endpoint refused the API key (Incorrect API key provided)",
        "model_key",
    );
    assert_eq!(model.count(), 1, "a refused key was retried");
}

#[test]
fn an_unknown_model() {
    let model = Model::start(vec![refusal(404, "model not found")]);
    let b = bastion(&model);
    fails_with(
        &b,
        "does not know model test-model (model not found)",
        "model_unknown",
    );
    assert_eq!(model.count(), 1);
}

#[test]
fn a_persistent_server_error_after_retries() {
    let model = Model::start((0..4).map(|_| server_error()).collect());
    let b = bastion(&model);
    fails_with(&b, "the model endpoint answered 500", "model_status");
    // One try and three retries, all scripted; nothing after.
    assert_eq!(model.count(), 4);
    assert!(model.requests().iter().all(|r| r.scripted));
}

#[test]
fn rate_limited_then_answered() {
    let (model, b, t) = bob_with_model(vec![
        Reply::Status(
            429,
            r#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#.into(),
            vec![("Retry-After".into(), "1".into())],
        ),
        Reply::Sse(answer("Answered after the wait.")),
    ]);
    let at = ask(&t, "? why is the disk full");
    let at = t.expect_from("Answered after the wait.", at);
    back_at_prompt(&b, &t, at);
    let r = model.requests();
    assert_eq!(r.len(), 2);
    let gap = r[1].at.duration_since(r[0].at);
    assert!(
        gap >= Duration::from_millis(950),
        "retried after {gap:?}, not honouring Retry-After: 1"
    );
    b.wait_kind("ai_answer");
    assert!(of_kind(&ai_events(&b), "ai_error").is_empty());
}

#[test]
fn garbage_from_the_endpoint() {
    let model = Model::start(vec![Reply::Raw("data: not json\n\n".into())]);
    let b = bastion(&model);
    fails_with(&b, "not a chat completion", "model_not_chat");
}

#[test]
fn an_endpoint_that_hangs_past_the_timeout() {
    let model = Model::start(vec![Reply::Hang]);
    let b = bastion_with(
        &model,
        Opts {
            llm_timeout_s: 1,
            ..Opts::default()
        },
    );
    let t = bob(&b);
    let at = ask(&t, "? why is the disk full");
    let at = t.expect_from("did not answer within 1 s", at);
    let shown = Instant::now();
    back_at_prompt(&b, &t, at);
    let asked = model.requests()[0].at;
    assert!(
        shown.duration_since(asked) >= Duration::from_millis(950),
        "gave up after {:?}, before its 1 s",
        shown.duration_since(asked)
    );
    let e = b.wait_kind("ai_error");
    assert_eq!(e["reason"], "model_timeout", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap_or("")
            .contains("did not answer within 1 s"),
        "{e}"
    );
}

#[test]
fn arguments_in_one_chunk() {
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call_whole("whole_1", "echo WHOLE-$((1+4))")),
        Reply::Sse(answer("It said five.")),
    ]);
    let at = ask(&t, "? count to five");
    let at = t.expect_from("echo WHOLE-$((1+4))", at);
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("WHOLE-5", at);
    let at = t.expect_from("It said five.", at);
    back_at_prompt(&b, &t, at);
    let reqs = model.wait_requests(2);
    let (assistant, r) = last_turn(&reqs[1]);
    assert_eq!(
        tool_calls(assistant),
        [("whole_1".to_string(), "echo WHOLE-$((1+4))".to_string())]
    );
    assert_ran(r[0], "whole_1", "echo WHOLE-$((1+4))", 0, "WHOLE-5");
    let e = b.wait_kind("ai_tool_call");
    assert_eq!(e["decision"], "approved");
}

#[test]
fn two_tool_calls_in_one_turn() {
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(calls(&[
            ("t1", "echo FIRST-$((1+1))", "one"),
            ("t2", "echo SECOND-$((2+2))", "two"),
        ])),
        Reply::Sse(answer("Both ran, in order.")),
    ]);
    let at = ask(&t, "? run two things");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("FIRST-2", at);
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("SECOND-4", at);
    let at = t.expect_from("Both ran, in order.", at);
    back_at_prompt(&b, &t, at);

    let reqs = model.wait_requests(2);
    let (assistant, r) = last_turn(&reqs[1]);
    assert_eq!(
        tool_calls(assistant),
        [
            ("t1".to_string(), "echo FIRST-$((1+1))".to_string()),
            ("t2".to_string(), "echo SECOND-$((2+2))".to_string())
        ]
    );
    assert_eq!(r.len(), 2);
    assert_ran(r[0], "t1", "echo FIRST-$((1+1))", 0, "FIRST-2");
    assert_ran(r[1], "t2", "echo SECOND-$((2+2))", 0, "SECOND-4");
    let ev = answered(&b, &TWO_COMMANDS_RUN);
    assert_eq!(ev[2]["command"], "echo FIRST-$((1+1))");
    assert_eq!(ev[4]["command"], "echo SECOND-$((2+2))");
    assert_eq!(model.count(), 2);
}

#[test]
fn the_step_limit_stops_the_loop() {
    let model = Model::start(
        (1..=5)
            .map(|i| Reply::Sse(call(&format!("s{i}"), &format!("echo step-{i}"), "again")))
            .collect(),
    );
    let b = bastion_with(
        &model,
        Opts {
            bob_ai: "auto",
            extra_toml: "[ai]\nmax_steps = 3\n".into(),
            ..Opts::default()
        },
    );
    let t = bob(&b);
    let at = ask(&t, "? keep going");
    let e = b.wait_kind("ai_error");
    let message = e["message"].as_str().unwrap();
    let at = t.expect_from(&format!("walissh: {message}"), at);
    back_at_prompt(&b, &t, at);
    // Three turns of the model, each with its command run; no fourth.
    assert_eq!(model.count(), 3);
    let ev = ai_events(&b);
    assert_eq!(of_kind(&ev, "ai_tool_result").len(), 3, "{ev:#?}");
    assert!(of_kind(&ev, "ai_answer").is_empty());
}

#[test]
fn users_with_the_agent_off_never_reach_the_model() {
    let model = Model::start(vec![Reply::Sse(answer("Should not be asked."))]);
    let b = bastion(&model);
    let t = ready(&b.ssh_pw("carol:web1", CAROL_PW));
    let at = ask(&t, "? why");
    let at = t.expect_from("the agent is off for your account", at);
    back_at_prompt(&b, &t, at);
    let p = b.wait_kind("ai_prompt");
    assert_eq!(p["user"], "carol");
    assert_eq!(p["text"], "? why");
    assert_eq!(model.count(), 0);
    assert_eq!(kinds(&ai_events(&b)), ["ai_prompt"]);
}

#[test]
fn a_model_repeating_itself_is_stopped() {
    let mut script: Vec<Reply> = (1..=5)
        .map(|i| Reply::Sse(call(&format!("r{i}"), "echo same-again", "again")))
        .collect();
    script.push(Reply::Sse(answer("Should not get this far.")));
    let model = Model::start(script);
    let b = auto_bastion(&model);
    let t = bob(&b);
    let at = ask(&t, "? keep going");
    let e = b.wait_kind("ai_error");
    let message = e["message"].as_str().unwrap();
    let at = t.expect_from(&format!("walissh: {message}"), at);
    back_at_prompt(&b, &t, at);
    // Stopped before the script ran out, well within the step limit.
    assert!(model.count() < 5, "asked {} times", model.count());
    let ev = ai_events(&b);
    assert!(of_kind(&ev, "ai_answer").is_empty(), "{ev:#?}");
    assert!(of_kind(&ev, "ai_tool_result").len() < 5, "{ev:#?}");
}

#[test]
fn long_output_reaches_the_model_bounded_with_the_cut_said() {
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call("c1", "seq 1 100000", "count")),
        Reply::Sse(answer("That was a lot of numbers.")),
    ]);
    let at = ask(&t, "? count for me");
    let at = answer_run(&t, at, "y");
    // The user sees it all.
    let at = t.expect_from("99999\r\n100000\r\n", at);
    let at = t.expect_from("That was a lot of numbers.", at);
    back_at_prompt(&b, &t, at);
    let reqs = model.wait_requests(2);
    let (_, r) = last_turn(&reqs[1]);
    let c = content(r[0]);
    assert!(
        c.starts_with(
            "$ seq 1 100000\nexit code 0\n<output source=\"target\" trusted=\"no\">\n1\n2\n3\n"
        ),
        "{:?}",
        &c[..c.len().min(200)]
    );
    assert!(
        c.ends_with("\n99999\n100000\n</output>"),
        "{:?}",
        &c[c.len().saturating_sub(200)..]
    );
    assert!(c.len() < 32 * 1024, "{} bytes given to the model", c.len());
    assert!(c.contains("cut"), "the cut is not said");
    // The audit counts it all.
    let result = b.wait_kind("ai_tool_result");
    assert!(
        result["output_bytes"].as_u64().unwrap() >= 588_895,
        "{result}"
    );
}

#[test]
fn the_recording_shows_the_exchange() {
    let model = Model::start(vec![
        Reply::Sse(call("c1", "echo REC-$((3+4))", "record it")),
        Reply::Sse(answer("Recorded for posterity.")),
    ]);
    let b = bastion(&model);
    let mut t = bob(&b);
    let at = ask(&t, "? what is recorded");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("Recorded for posterity.", at);
    back_at_prompt(&b, &t, at);
    t.send("exit\r");
    assert_eq!(t.wait(), Some(0));
    b.wait_kind("session_end");
    let path = b.sessions()[0]["recording"].as_str().unwrap().to_string();
    let (_, events) = crate::lifecycle::read_cast(&path);
    let out = crate::lifecycle::output_of(&events);
    let plain = String::from_utf8(strip_escapes(out.as_bytes()).0).unwrap();
    for seen in [
        "? what is recorded",
        "$ echo REC-$((3+4))",
        RUN,
        "REC-7",
        "Recorded for posterity.",
        "BACK-5",
    ] {
        assert!(
            plain.contains(seen),
            "{seen:?} not in the recording:\n{plain}"
        );
    }
}

/// The agent's command `dd` reads one byte of what the user types while it
/// runs (once it says READING: the terminal is then in line mode); the
/// rest of the line is typeahead the shell runs afterwards.
const READS_ONE_BYTE: &str =
    "echo READING; dd bs=1 count=1 of=/dev/null 2>/dev/null; echo AGENT-DONE";

#[test]
fn a_line_typed_ahead_during_a_command_is_the_users_and_audited() {
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call("c1", READS_ONE_BYTE, "read a byte")),
        Reply::Sse(answer("Done reading.")),
    ]);
    let at = ask(&t, "? read something");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("READING\r\n", at);
    t.send("xecho TYPED-$((3*3))\r");
    let at = t.expect_from("AGENT-DONE", at);
    // The user's line runs as soon as the agent's command is done, while
    // the model answers: either may show first.
    let typed = t.expect_from("TYPED-9", at);
    let answered = t.expect_from("Done reading.", at);
    back_at_prompt(&b, &t, typed.max(answered));
    // The user's line is audited as theirs; the agent's is a tool result.
    b.wait_event(|e| e["kind"] == "command" && e["command"] == "echo TYPED-$((3*3))");
    let result = b.wait_kind("ai_tool_result");
    assert_eq!(result["command"], READS_ONE_BYTE);
    assert_eq!(result["exit_code"], 0);
    not_user_commands(&b, &[READS_ONE_BYTE]);
    assert_eq!(model.count(), 2);
}

#[test]
fn a_question_typed_ahead_while_the_agent_works_is_not_asked() {
    // The model never finishes its second turn: the first question is
    // still being answered when the second reaches the prompt.
    let (model, b, t) = bob_with_model(vec![
        Reply::Sse(call("c1", READS_ONE_BYTE, "read a byte")),
        Reply::Stall(vec![text("Thinking it over")]),
    ]);
    let at = ask(&t, "? first");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("READING\r\n", at);
    t.send("x? second\r");
    let at = t.expect_from("another question was being answered", at);
    model.wait_requests(2);
    t.send("\x03");
    let at = t.expect_from("walissh: stopped", at);
    back_at_prompt(&b, &t, at);
    let prompts = b.wait_count("ai_prompt", 2);
    assert_eq!(prompts[1]["text"], "? second");
    let errors = b.wait_count("ai_error", 2);
    assert!(errors[0]["message"].as_str().unwrap().contains("not asked"));
    assert!(errors[1]["message"].as_str().unwrap().contains("stopped"));
    assert_eq!(model.count(), 2, "the second question reached the model");
}

#[test]
fn a_question_left_at_run_ends_at_the_time_limit() {
    let model = Model::start(vec![Reply::Sse(call("c1", "echo NEVER-$((1+1))", "wait"))]);
    // Long enough for Run? to be drawn first on a loaded machine.
    let (b, t) = bob_with_ai(&model, "[ai]\nmax_time_s = 5\n");
    let asked = Instant::now();
    let at = ask(&t, "? wait for me");
    let at = t.expect_from(RUN, at);
    let at = t.expect_from(
        "walissh: the question took longer than its time limit (5 s)",
        at,
    );
    assert!(asked.elapsed() >= Duration::from_secs(5));
    back_at_prompt(&b, &t, at);
    let e = b.wait_kind("ai_error");
    assert!(e["message"].as_str().unwrap().contains("time limit"), "{e}");
    assert!(!t.screen.text().contains("NEVER-2"));
    assert!(of_kind(&ai_events(&b), "ai_tool_result").is_empty());
}

/// Another user logs in on another connection and runs a command: the
/// bastion still serves.
fn someone_else_gets_in(b: &Bastion, n: u32) {
    let cmd = format!("echo OTHER-$(({n}*7))");
    let (mut child, out, _) = spawn_captured(with(b.ssh_pw("alice:web1", ALICE_PW), cmd));
    out.wait_for(&format!("OTHER-{}", n * 7));
    assert!(child.wait().unwrap().success());
}

/// The model proposes `case x in a) ls;; esac` (once, the old policy parser
/// looped for ever on it and the bastion died): while the question is
/// answered and after, another user still gets in, and the question ends
/// with a refusal, a question or a run, then the answer, not a hang.
fn a_case_line_neither_hangs_the_question_nor_the_bastion(mode: &'static str) {
    const CASE: &str = "case x in a) ls;; esac";
    let model = Model::start(vec![
        Reply::Sse(call("k1", CASE, "look")),
        Reply::Sse(answer("CASE-ANSWERED")),
    ]);
    let b = bastion_with(
        &model,
        Opts {
            bob_ai: mode,
            ..Opts::default()
        },
    );
    let t = bob(&b);
    let at = ask(&t, "? try a case");
    // The model's reply with the line is on its way to the policy.
    model.wait_requests(1);
    someone_else_gets_in(&b, 1);
    // A `case` is no simple command: it is asked in both modes, with the
    // `ls` it runs listed above the question.
    let at = t.expect_from(RUN, at);
    assert!(
        t.screen.text().contains("\u{2192} ls"),
        "{}",
        t.screen.text()
    );
    t.send("n");
    let at = t.expect_from("CASE-ANSWERED", at);
    back_at_prompt(&b, &t, at);
    someone_else_gets_in(&b, 2);
    let ev = answered_any(&b);
    let calls = of_kind(&ev, "ai_tool_call");
    assert_eq!(calls.len(), 1, "{ev:#?}");
    assert_eq!(calls[0]["command"], CASE);
    assert_eq!(calls[0]["decision"], "denied_by_user");
}

/// Once the question is answered, its `ai_*` events.
fn answered_any(b: &Bastion) -> Vec<Value> {
    b.wait_kind("ai_answer");
    ai_events(b)
}

#[test]
fn a_case_line_in_confirm_mode_neither_hangs_the_question_nor_the_bastion() {
    a_case_line_neither_hangs_the_question_nor_the_bastion("confirm");
}

#[test]
fn a_case_line_in_auto_mode_neither_hangs_the_question_nor_the_bastion() {
    a_case_line_neither_hangs_the_question_nor_the_bastion("auto");
}

/// The README's tour (`docs/tour.cast`) is this session's recording. To
/// record it again:
/// `WALISSH_TOUR_OUT=$PWD/docs/tour.cast cargo test --test interop the_tour`.
#[test]
fn the_tour_question_is_answered_and_recorded() {
    let model = Model::start(vec![
        Reply::Sse(call("c1", "df -h /", "see how full the root filesystem is")),
        Reply::Sse(call("c2", "du -sh /var/log", "the usual suspect: logs")),
        Reply::Sse(answer(
            "Nothing is close to full here: the root filesystem has room, and \
             /var/log is small. If it fills up later, look there first: \
             `journalctl --vacuum-size=200M` trims the journal.",
        )),
    ]);
    let b = auto_bastion(&model);
    // No warm-up command: the recording is what a person would see. Keys
    // typed before the integration is in wait for it.
    let mut t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.expect(prompt_end());
    let at = ask(&t, "? why is the disk full");
    let at = t.expect_from("Filesystem", at);
    let at = t.expect_from("trims the journal.", at);
    t.expect_from(prompt_end(), at);
    t.send("exit\r");
    t.wait();
    b.wait_kind("session_end");
    let events = ai_events(&b);
    let calls = of_kind(&events, "ai_tool_call");
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(calls.iter().all(|c| c["decision"] == "auto"), "{calls:#?}");

    let path = b.sessions()[0]["recording"].as_str().unwrap().to_string();
    let (_, events) = crate::lifecycle::read_cast(&path);
    let out = crate::lifecycle::output_of(&events);
    for seen in [
        "why is the disk full",
        "df -h /",
        "Filesystem",
        "trims the journal.",
    ] {
        assert!(
            out.contains(seen),
            "{seen:?} is not in the recording: {out}"
        );
    }
    if let Some(to) = std::env::var_os("WALISSH_TOUR_OUT") {
        std::fs::copy(&path, to).unwrap();
    }
}

/// The review's attack on `Run?` (issue 32): a file the agent reads holds
/// sequences that enter the alternate screen, move the cursor, leave it,
/// and print a fake gutter line, so that the next `Run?` would show one
/// command while another runs. Read by a terminal emulator (vt100) at the
/// moment `Run?` is shown, through a real `ssh` PTY, the cursor's row
/// says `Run?` and nothing else, and the command row above it the exact
/// command that runs; for each variation. (The fake lines stay where the
/// file printed them, as its output, above the real ones.)
#[test]
fn the_run_prompt_shows_the_command_that_runs_whatever_a_file_printed() {
    const FAKE: &str =
        "\x1b[36m\u{2502}\x1b[0m $ echo harmless\r\n\x1b[36m\u{2502}\x1b[0m Run? [y/N/e] ";
    let variations = [
        format!("notes\r\n\x1b[?47h\x1b[1;1H\x1b[?47l{FAKE}"),
        format!("notes\r\n\x1b[?1047h\x1b[3;1H\x1b[?1047l{FAKE}"),
        format!("notes\r\n\x1b[?1049h\x1b[2;1H\x1b7\x1b[?1049l\x1b8{FAKE}"),
        format!("notes\r\n\x1b[?1049h\x1b[2;1H\x1b[s\x1b[?1049l\x1b[u{FAKE}"),
        format!("notes\r\n\x1b[A\x1b[A\x1bM\x1b[1;1H{FAKE}"),
        format!("notes\r\n\x1b[?47h\x1b[5;1H{FAKE}"),
    ];
    let dir = visible_dir();
    for (i, attack) in variations.iter().enumerate() {
        let notes = dir.path().join(format!("notes{i}.txt"));
        std::fs::write(&notes, attack).unwrap();
        let (_model, _b, t) = bob_with_model(vec![
            Reply::Sse(call(
                "call_1",
                &format!("cat {}", notes.display()),
                "read them",
            )),
            Reply::Sse(call("call_2", "echo REAL-$((6*7))", "the real one")),
            Reply::Sse(answer("Done.")),
        ]);
        let at = ask(&t, "? what do the notes say");
        let at = answer_run(&t, at, "y");
        let at = t.expect_from("echo REAL-$((6*7))", at);
        t.expect_from(RUN, at);
        let nz = |n| std::num::NonZeroU16::new(n).unwrap();
        let mut vt = vt100::Parser::new(nz(24), nz(80), 0);
        vt.process(t.screen.text().as_bytes());
        let (row, _) = vt.screen().cursor_position();
        let rows: Vec<String> = vt.screen().rows(0, 80).collect();
        let question = &rows[row as usize];
        assert_eq!(
            question.trim_end(),
            "\u{2502} Run? [y/N/e]",
            "{i}: {rows:#?}"
        );
        // The command the question is about: the nearest command row
        // above it (the parser's listing may come between).
        let command = rows[..row as usize]
            .iter()
            .rev()
            .find(|r| r.starts_with("\u{2502} $ "))
            .unwrap();
        assert!(
            command.starts_with("\u{2502} $ echo REAL-$((6*7))") && !command.contains("harmless"),
            "{i}: {rows:#?}"
        );
        let at = answer_run(&t, at, "y");
        t.expect_from("REAL-42", at);
    }
}

/// A question typed with ordinary editing is asked (issue 32): Ctrl-L,
/// Left and Backspace inside it, Tab completion, Ctrl-W, Ctrl-A/E, a line
/// recalled with Up or Ctrl-R. bash wipes the line before it reports the
/// question, which once made walissh drop every one of these as "not
/// typed here" and write a false `integrity` row. Real bash and zsh, each
/// asked, none an `integrity` row.
#[test]
fn questions_typed_with_ordinary_editing_are_asked() {
    edited_questions_are_asked("bob:web1", prompt_end());
    match zsh_user() {
        // dave (bob's key) reaches only the zsh target.
        Some(_) => edited_questions_are_asked("dave:zsh", "% "),
        None => eprintln!("zsh skipped: needs root and zsh (CI installs zsh and runs as root)"),
    }
}

fn edited_questions_are_asked(login: &str, prompt: &str) {
    let edits = [
        "\x0c? after ctrl l\r",
        "? leftx\x1b[D\x7f\r",
        "? tab /et\t\r",
        "? ctrl w junk\x17\r",
        "ctrl a\x01? \x05 e\r",
        "\x1b[A\x01? \r",
        "\x12HIST-\x1b[C\x01? \r",
    ];
    let replies = (0..edits.len())
        .map(|i| Reply::Sse(answer(&format!("ANSWER-{i}-OK"))))
        .collect();
    let model = Model::start(replies);
    let b = bastion(&model);
    let t = Terminal::spawn(&b.ssh_bob(login), 24, 80);
    t.send("echo HIST-$((0+1))\r");
    let at = t.expect("HIST-1\r\n");
    let mut at = t.expect_from(prompt, at);
    for (i, keys) in edits.iter().enumerate() {
        t.send(keys);
        at = t.expect_from(&format!("ANSWER-{i}-OK"), at);
        at = t.expect_from(prompt, at);
    }
    assert_eq!(model.count(), edits.len(), "{login}");
    // Every question's row (written as the answers were).
    let prompts = b.wait_count("ai_prompt", edits.len());
    assert_eq!(prompts.len(), edits.len(), "{login}: {prompts:#?}");
    assert!(
        b.audit().iter().all(|e| e["kind"] != "integrity"),
        "{login}: {:#?}",
        b.audit()
    );
}

/// What the thief in [`a_program_reading_the_terminal_in_the_shells_place_gets_no_command`]
/// runs: it joins the shell's foreground process group, waits for its
/// cue and for the shell to be back in its line editor, stops the shell,
/// and reads the terminal in its place, logging every byte; on walissh's
/// new-nonce key it answers with the best R mark it can (the new nonce
/// alone: it never read the shell's memory), and at the first Enter it
/// lets the shell go on.
const THIEF: &str = r#"
import os, re, signal, sys, time
d = sys.argv[1]
shell = os.getppid()
os.setpgid(0, os.getpgid(shell))
def wait(cond):
    while not cond():
        time.sleep(0.01)
wait(lambda: os.path.exists(d + "/go"))
def reading():
    f = open("/proc/%d/syscall" % shell).read().split()
    return f[0] in ("0", "270", "7") and (f[0] != "0" or f[1] == "0x0")
wait(reading)
os.kill(shell, signal.SIGSTOP)
tty = os.open("/dev/tty", os.O_RDWR)
open(d + "/armed", "w").close()
got, answered = b"", False
with open(d + "/stolen.log", "wb", buffering=0) as log:
    while True:
        b = os.read(tty, 4096)
        if not b:
            break
        log.write(b)
        got += b
        m = re.search(rb"\x1b\[212~([0-9a-f]{32})", got)
        if m and not answered:
            os.write(tty, b"\x1b]133;R;w=" + m.group(1) + b"\x07")
            answered = True
        if answered and b"\r" in got[m.end():]:
            break
os.kill(shell, signal.SIGCONT)
"#;

/// A program that reads the terminal in the shell's place (issue 32): it
/// joined the shell's foreground process group and stopped the shell, so
/// the prompt walissh last saw is still the shell's, but the keys walissh
/// types go to the program. It takes walissh's new-nonce key and answers
/// with the new nonce; without the old one (which only the shell's memory
/// and its own marks hold) that is no answer, so walissh types nothing
/// more: the approved command never reaches the program, and the tool
/// result says why. With the old rule (the command typed right after the
/// key) the program's log held the command.
#[test]
fn a_program_reading_the_terminal_in_the_shells_place_gets_no_command() {
    let dir = visible_dir();
    let d = dir.path().display().to_string();
    std::fs::write(dir.path().join("thief.py"), THIEF).unwrap();
    let (_model, b, t) = bob_with_model(vec![
        Reply::Sse(call("call_1", &format!("touch {d}/go"), "the cue")),
        Reply::Sse(call("call_2", "echo STOLEN-$((6*7))", "the real one")),
        Reply::Sse(answer("ANSWERED-OK")),
    ]);
    let at = t.screen.end();
    t.send(&format!("python3 {d}/thief.py {d} &\r"));
    let at = t.expect_from("[1] ", at);
    t.expect_from(prompt_end(), at);
    let at = ask(&t, "? go");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("echo STOLEN-$((6*7))", at);
    let armed = dir.path().join("armed");
    let start = Instant::now();
    while !armed.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the thief never armed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let at = answer_run(&t, at, "y");
    t.expect_from("ANSWERED-OK", at);
    let result =
        b.wait_event(|e| e["kind"] == "ai_tool_result" && e["command"] == "echo STOLEN-$((6*7))");
    let why = result["interrupted"].as_str().unwrap_or_default();
    assert!(why.contains("did not confirm"), "{result}");
    let log = std::fs::read(dir.path().join("stolen.log")).unwrap();
    assert!(
        memchr::memmem::find(&log, b"\x1b[212~").is_some(),
        "the thief read the terminal: {log:?}"
    );
    assert!(
        memchr::memmem::find(&log, b"STOLEN").is_none(),
        "the approved command reached the thief: {log:?}"
    );
    // The shell goes on once the thief lets it.
    wait_for_enter_in(&dir.path().join("stolen.log"));
    t.send("echo BACK-$((2+3))\r");
    t.expect_from("BACK-5", at);
}

/// Waits until the thief's log holds the Enter that lets the shell go.
fn wait_for_enter_in(log: &Path) {
    let start = Instant::now();
    while !std::fs::read(log).is_ok_and(|l| l.contains(&b'\r')) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no Enter reached the thief"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
