//! Agents and workflows from the config (issue 6): `?@` and `?@name`,
//! sequential, parallel and loop workflows, session state and
//! placeholders, skills, `check-config` on assembly errors, and SIGHUP
//! reload, against the scripted model server, the real OpenSSH client on a
//! real PTY and a real sshd target.
//!
//! As everywhere in this suite, waits are for events (text on the screen,
//! requests at the model server, audit rows, log lines), never for time.

use regex::Regex;
use serde_json::{Value, json};

use crate::agent::{
    ai_events, answer_run, ask, back_at_prompt, back_at_prompt_unaudited, bob, content, kinds,
    messages, user_commands,
};
use crate::harness::*;
use crate::model::*;

/// walissh asking `model`, with `toml` appended to its config, and bob at
/// his prompt on web1 (confirm mode).
use crate::agent::bob_with_ai as team;

/// A request's system message.
fn system(request: &Value) -> &str {
    let m = &messages(request)[0];
    assert_eq!(m["role"], "system", "{request:#}");
    content(m)
}

/// A request's last user message.
fn last_user(request: &Value) -> &str {
    let m = messages(request)
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap_or_else(|| panic!("no user message: {request:#}"));
    content(m)
}

/// A request's last message (which must be a tool result).
fn last_tool_result(request: &Value) -> &Value {
    let m = messages(request).last().unwrap();
    assert_eq!(m["role"], "tool", "{request:#}");
    m
}

/// The names of the tools a request offers.
fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The `▸ name` headings drawn on `plain` screen text, in order.
fn headings(plain: &str) -> Vec<String> {
    plain
        .lines()
        .filter_map(|l| l.split_once("▸ ").map(|(_, h)| h.trim().to_string()))
        .collect()
}

/// The screen from byte `from` on, escape sequences removed.
fn plain_since(t: &Terminal, from: usize) -> String {
    let raw = t.screen.since(from);
    String::from_utf8_lossy(&strip_escapes(raw.as_bytes()).0).into_owned()
}

// ---- a sequential workflow ----

const SEQUENTIAL: &str = r#"
[[agents]]
name = "collect"
description = "gathers facts"
instruction = "Collect facts about {question} on {target}."
output_key = "facts"
tools = ["run_command"]

[[agents]]
name = "advise"
description = "advises from the facts"
instruction = "Advise from these facts: {facts}"
tools = ["read_file"]

[[workflows]]
name = "triage"
description = "collect, then advise"
kind = "sequential"
members = ["collect", "advise"]
"#;

#[test]
fn a_sequential_workflow_passes_the_first_answer_to_the_second_agent() {
    let model = Model::start(vec![
        Reply::Sse(call("c1", "echo FACT-$((40+2))", "gather")),
        Reply::Sse(answer("Disk at 97 percent, FACT-42 seen.")),
        Reply::Sse(answer("Rotate the logs.")),
    ]);
    let (b, t) = team(&model, SEQUENTIAL);
    let start = ask(&t, "?@triage why is the disk full");
    let at = t.expect_from("▸ collect", start);
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("FACT-42", at);
    let at = t.expect_from("Disk at 97 percent, FACT-42 seen.", at);
    let at = t.expect_from("▸ advise", at);
    let at = t.expect_from("Rotate the logs.", at);
    back_at_prompt(&b, &t, at);
    assert_eq!(headings(&plain_since(&t, start)), ["collect", "advise"]);

    let reqs = model.wait_requests(3);
    assert_eq!(model.count(), 3);
    // The first agent: its own instruction, built-in keys filled, its own
    // tools, no end_loop outside a loop.
    let s = system(&reqs[0]);
    assert!(
        s.starts_with("Collect facts about «why is the disk full» on «web1».\n\n"),
        "{s}"
    );
    assert_eq!(tool_names(&reqs[0]), ["run_command"]);
    assert!(
        last_user(&reqs[0]).ends_with("Question: why is the disk full"),
        "{}",
        last_user(&reqs[0])
    );
    let r = content(last_tool_result(&reqs[1]));
    assert!(r.contains("FACT-42"), "{r}");
    // The second agent's placeholder holds the first agent's answer.
    let s = system(&reqs[2]);
    assert!(
        s.starts_with("Advise from these facts: «Disk at 97 percent, FACT-42 seen.»\n\n"),
        "{s}"
    );
    assert_eq!(tool_names(&reqs[2]), ["read_file"]);
    assert!(
        last_user(&reqs[2]).ends_with("Question: why is the disk full"),
        "{}",
        last_user(&reqs[2])
    );

    b.wait_count("ai_answer", 2);
    let ev = ai_events(&b);
    assert_eq!(
        kinds(&ev),
        [
            "ai_prompt",
            "ai_tool_call",
            "ai_tool_result",
            "ai_answer",
            "ai_answer"
        ],
        "{ev:#?}"
    );
    assert_eq!(ev[0]["text"], "?@triage why is the disk full");
    assert_eq!(ev[1]["decision"], "approved");
    assert_eq!(ev[3]["text"], "Disk at 97 percent, FACT-42 seen.");
    assert_eq!(ev[4]["text"], "Rotate the logs.");
}

// ---- a parallel workflow ----

const PARALLEL: &str = r#"
[[agents]]
name = "a"
description = "looker A"
instruction = "You are looker A for {question}."
output_key = "a_out"
tools = ["run_command"]

[[agents]]
name = "b"
description = "looker B"
instruction = "You are looker B for {question}."
output_key = "b_out"
tools = ["run_command"]

[[agents]]
name = "summary"
description = "sums up"
instruction = "Summarise: A={a_out} B={b_out}"
tools = ["read_file"]

[[workflows]]
name = "both"
description = "a and b at once"
kind = "parallel"
members = ["a", "b"]

[[workflows]]
name = "survey"
description = "both, then a summary"
kind = "sequential"
members = ["both", "summary"]
"#;

/// What both parallel members run: its own process id and when it began,
/// a mark of its own in `dir`, then a wait until both marks are there
/// before it says when it ended. Neither can end before the other has
/// begun: the overlap holds by construction, however slow the machine.
fn overlap(dir: &std::path::Path) -> String {
    let d = dir.display();
    format!(
        "echo START-$$-$(date +%s%N); touch {d}/m.$$; until [ $(ls {d} | wc -l) -ge 2 ]; do sleep 0.1; done; echo END-$$-$(date +%s%N)"
    )
}

/// The labels of the members' `Run ...? [y/N]` prompts on the screen so
/// far, in order (a prompt redrawn below another member's line counts
/// again).
fn prompt_labels(t: &Terminal) -> Vec<String> {
    let re = Regex::new(r"\[([a-z]+)\] Run `[^`]*`\? \[y/N\]").unwrap();
    re.captures_iter(&t.screen.plain())
        .map(|c| c[1].to_string())
        .collect()
}

#[test]
fn a_parallel_workflow_runs_its_members_at_once_in_whole_labelled_lines() {
    // Each member gets a call and then an answer; the replies are the same
    // for both, as the server answers in arrival order.
    let marks = visible_dir();
    let overlap = overlap(marks.path());
    let model = Model::start(vec![
        Reply::Sse(call("p1", &overlap, "time it")),
        Reply::Sse(call("p1", &overlap, "time it")),
        Reply::Sse(answer("Looked: fine.")),
        Reply::Sse(answer("Looked: fine.")),
        Reply::Sse(answer("Summary: both fine.")),
    ]);
    let (b, t) = team(&model, PARALLEL);
    // The user's own shell's process id, to tell its commands apart.
    let at = t.screen.end();
    t.send("echo $$-SHELL$((1+1))\r");
    let at = t.expect_from("-SHELL2", at);
    let shell_pid: u64 = Regex::new(r"(\d+)-SHELL2")
        .unwrap()
        .captures(&t.screen.plain())
        .expect("the shell's pid")[1]
        .parse()
        .unwrap();
    t.expect_from(crate::terminal::prompt_end(), at);

    let start = ask(&t, "?@survey look around");
    let at = t.expect_from("▸ both (in parallel: a, b)", start);
    // One question at a time: the first member's, then the second's.
    let p1 = t.expect_from("`? [y/N]", at);
    t.send("y");
    let p2 = t.expect_from("`? [y/N]", p1);
    let mut labels = prompt_labels(&t);
    // A waiting prompt is drawn again below another member's line.
    labels.dedup();
    assert_eq!(labels.len(), 2, "{labels:?}");
    let (first, second) = (&labels[0], &labels[1]);
    assert_ne!(first, second);
    // The first member's command prints while the second's question
    // waits on its line; then the second is let run.
    t.expect_from(&format!("[{first}] START-"), p1);
    t.send("y");
    let end_a = t.expect_from("[a] END-", p2);
    let end_b = t.expect_from("[b] END-", p2);
    let at = t.expect_from("▸ summary", end_a.max(end_b));
    let at = t.expect_from("Summary: both fine.", at);
    back_at_prompt(&b, &t, at);

    // From the target's side: each member's command ran in a process of
    // its own, not the user's shell, and they overlapped in time.
    let screen = plain_since(&t, start);
    let token = Regex::new(r"(START|END)-(\d+)-(\d+)").unwrap();
    let output_line = Regex::new(r"^│ \[([a-z]+)\] (START|END)-(\d+)-(\d+)$").unwrap();
    let mut times: std::collections::HashMap<(String, String), (u64, u128)> = Default::default();
    for raw in screen.split('\n') {
        // What the terminal shows of a line: the part after its last
        // carriage return (a line drawn above a waiting prompt erases the
        // prompt, and the prompt comes back below).
        let line = raw.trim_end_matches('\r').rsplit('\r').next().unwrap();
        let labels = line.matches("[a]").count() + line.matches("[b]").count();
        if labels == 0 {
            continue;
        }
        // Blocks stay whole: one member per line, its label first.
        assert_eq!(labels, 1, "two members on one line: {line:?}\n{screen}");
        assert!(
            line.starts_with("│ [a] ") || line.starts_with("│ [b] "),
            "a labelled line that does not start with its label: {line:?}\n{screen}"
        );
        let outputs = token.find_iter(line).count();
        assert!(outputs <= 1, "two outputs on one line: {line:?}\n{screen}");
        if outputs == 1 {
            let c = output_line
                .captures(line)
                .unwrap_or_else(|| panic!("an output line with more on it: {line:?}\n{screen}"));
            let key = (c[1].to_string(), c[2].to_string());
            let value = (c[3].parse().unwrap(), c[4].parse().unwrap());
            assert!(
                times.insert(key.clone(), value).is_none(),
                "{key:?} twice:\n{screen}"
            );
        }
    }
    let get = |m: &str, what: &str| {
        *times
            .get(&(m.to_string(), what.to_string()))
            .unwrap_or_else(|| panic!("no {what} line of [{m}]:\n{screen}"))
    };
    let (a_start, a_end, b_start, b_end) = (
        get("a", "START"),
        get("a", "END"),
        get("b", "START"),
        get("b", "END"),
    );
    assert_eq!(a_start.0, a_end.0, "[a]'s lines from two processes");
    assert_eq!(b_start.0, b_end.0, "[b]'s lines from two processes");
    assert_ne!(a_start.0, b_start.0, "both members in one process");
    assert_ne!(
        a_start.0, shell_pid,
        "[a]'s command ran in the user's shell"
    );
    assert_ne!(
        b_start.0, shell_pid,
        "[b]'s command ran in the user's shell"
    );
    assert!(
        a_start.1 < b_end.1 && b_start.1 < a_end.1,
        "the commands did not overlap: a {}..{}, b {}..{}",
        a_start.1,
        a_end.1,
        b_start.1,
        b_end.1
    );

    let reqs = model.wait_requests(5);
    assert_eq!(model.count(), 5);
    let mut firsts: Vec<&str> = reqs[..2]
        .iter()
        .map(|r| system(r).split("\n\n").next().unwrap())
        .collect();
    firsts.sort();
    assert_eq!(
        firsts,
        [
            "You are looker A for «look around».",
            "You are looker B for «look around»."
        ]
    );
    for r in &reqs[..4] {
        assert_eq!(tool_names(r), ["run_command"], "{r:#}");
    }
    // What the members stored reached the next member of the sequence.
    let s = system(&reqs[4]);
    assert!(
        s.starts_with("Summarise: A=«Looked: fine.» B=«Looked: fine.»\n\n"),
        "{s}"
    );

    // Audited under the same policy, each row naming its member; not the
    // user's commands.
    b.wait_count("ai_tool_result", 2);
    let ev = ai_events(&b);
    for kind in ["ai_tool_call", "ai_tool_result"] {
        let mut agents: Vec<&str> = ev
            .iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| {
                assert_eq!(e["command"], overlap.as_str(), "{e}");
                e["agent"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no agent: {e}"))
            })
            .collect();
        agents.sort();
        assert_eq!(agents, ["a", "b"], "{ev:#?}");
    }
    for e in ev.iter().filter(|e| e["kind"] == "ai_tool_call") {
        assert_eq!(e["decision"], "approved", "{e}");
    }
    for e in ev.iter().filter(|e| e["kind"] == "ai_tool_result") {
        assert_eq!(e["exit_code"], 0, "{e}");
    }
    assert!(
        !user_commands(&b).contains(&overlap),
        "{:?}",
        user_commands(&b)
    );
}

// ---- loops ----

const LOOP: &str = r#"
[[agents]]
name = "probe"
description = "probes"
instruction = "Probe round for {question}; last verdict: {verdict}."
output_key = "probe_out"
tools = ["run_command"]

[[agents]]
name = "judge"
description = "judges"
instruction = "Judge this probe: {probe_out}."
output_key = "verdict"
tools = ["run_command"]

[[workflows]]
name = "until-fixed"
description = "probe and judge until it is fixed"
kind = "loop"
members = ["probe", "judge"]
max_iterations = 5
"#;

#[test]
fn a_loop_ended_early_by_its_member() {
    let model = Model::start(vec![
        Reply::Sse(answer("PROBE-1")),
        Reply::Sse(answer("VERDICT-1 not yet")),
        Reply::Sse(answer("PROBE-2")),
        Reply::Sse(tool_call("e1", "end_loop", json!({"reason": "fixed"}))),
        Reply::Sse(answer("VERDICT-2 fixed")),
        Reply::Sse(answer("NEVER-ASKED")),
    ]);
    let (b, t) = team(&model, LOOP);
    let start = ask(&t, "?@until-fixed is it fixed");
    let at = t.expect_from("VERDICT-1 not yet", start);
    let at = t.expect_from("PROBE-2", at);
    let at = t.expect_from("VERDICT-2 fixed", at);
    back_at_prompt(&b, &t, at);
    let screen = plain_since(&t, start);
    assert_eq!(headings(&screen), ["probe", "judge", "probe", "judge"]);
    assert!(!screen.contains("NEVER-ASKED"), "{screen}");

    // Five requests: two rounds, the second judge's call and its answer.
    let reqs = model.wait_requests(5);
    assert_eq!(model.count(), 5, "the loop went on after end_loop");
    for r in &reqs {
        assert!(
            tool_names(r).iter().any(|n| n == "end_loop"),
            "end_loop not offered inside the loop: {r:#}"
        );
    }
    assert!(
        system(&reqs[0]).starts_with("Probe round for «is it fixed»; last verdict: (empty).\n\n"),
        "{}",
        system(&reqs[0])
    );
    assert!(
        system(&reqs[1]).starts_with("Judge this probe: «PROBE-1».\n\n"),
        "{}",
        system(&reqs[1])
    );
    assert!(
        system(&reqs[2])
            .starts_with("Probe round for «is it fixed»; last verdict: «VERDICT-1 not yet».\n\n"),
        "{}",
        system(&reqs[2])
    );
    assert!(
        system(&reqs[3]).starts_with("Judge this probe: «PROBE-2».\n\n"),
        "{}",
        system(&reqs[3])
    );
    // The judge was told the loop ends with its answer.
    let r = last_tool_result(&reqs[4]);
    assert_eq!(r["tool_call_id"], "e1");
    assert!(content(r).contains("loop ends"), "{}", content(r));
    let answers: Vec<Value> = b.wait_count("ai_answer", 4);
    let texts: Vec<&str> = answers
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        ["PROBE-1", "VERDICT-1 not yet", "PROBE-2", "VERDICT-2 fixed"]
    );
}

#[test]
fn a_loop_stopped_by_max_iterations() {
    let toml = r#"
[[agents]]
name = "probe"
description = "probes"
instruction = "Probe again. Previous: {probe_out}."
output_key = "probe_out"
tools = ["run_command"]

[[workflows]]
name = "thrice"
description = "probe three times"
kind = "loop"
members = ["probe"]
max_iterations = 3
"#;
    let model = Model::start(vec![
        Reply::Sse(answer("PROBE-1")),
        Reply::Sse(answer("PROBE-2")),
        Reply::Sse(answer("PROBE-3")),
        Reply::Sse(answer("NEVER-ASKED")),
    ]);
    let (b, t) = team(&model, toml);
    let start = ask(&t, "?@thrice keep probing");
    let at = t.expect_from("PROBE-1", start);
    let at = t.expect_from("PROBE-2", at);
    let at = t.expect_from("PROBE-3", at);
    back_at_prompt(&b, &t, at);
    let screen = plain_since(&t, start);
    assert_eq!(headings(&screen), ["probe", "probe", "probe"]);
    assert!(!screen.contains("NEVER-ASKED"), "{screen}");
    let reqs = model.wait_requests(3);
    assert_eq!(model.count(), 3, "the loop ran past max_iterations");
    let previous: Vec<&str> = reqs
        .iter()
        .map(|r| system(r).split("\n\n").next().unwrap())
        .collect();
    assert_eq!(
        previous,
        [
            "Probe again. Previous: (empty).",
            "Probe again. Previous: «PROBE-1».",
            "Probe again. Previous: «PROBE-2».",
        ]
    );
    for r in &reqs {
        assert!(tool_names(r).iter().any(|n| n == "end_loop"), "{r:#}");
    }
    b.wait_count("ai_answer", 3);
    assert!(
        !ai_events(&b).iter().any(|e| e["kind"] == "ai_error"),
        "{:#?}",
        ai_events(&b)
    );
}

// ---- ?@ and ?@name ----

const LISTED: &str = r#"
[[agents]]
name = "disk"
description = "looks at disks"
instruction = "You look at disks: {question}"
tools = ["run_command", "read_file"]

[[agents]]
name = "net"
description = "looks at the network"
instruction = "You look at the network."

[[workflows]]
name = "triage"
description = "disk then net"
kind = "sequential"
members = ["disk", "net"]

[ai]
entry = "triage"
"#;

const LISTING: [&str; 4] = [
    "@walissh, agent: the built-in agent: investigates with shell commands",
    "@disk, agent: looks at disks",
    "@net, agent: looks at the network",
    "@triage (entry), sequential workflow: disk then net",
];

/// The listing is drawn after `from`, in order; returns the offset past it.
fn listing_after(t: &Terminal, from: usize) -> usize {
    let mut at = from;
    for line in LISTING {
        at = t.expect_from(line, at);
    }
    at
}

#[test]
fn names_are_listed_and_run_and_an_unknown_name_is_said() {
    let model = Model::start(vec![
        Reply::Sse(answer("DISK-ANSWER")),
        Reply::Sse(answer("ENTRY-DISK")),
        Reply::Sse(answer("ENTRY-NET")),
    ]);
    let (b, t) = team(&model, LISTED);
    for line in ["?@", "?@ "] {
        let start = ask(&t, line);
        let at = listing_after(&t, start);
        back_at_prompt(&b, &t, at);
        let screen = plain_since(&t, start);
        assert!(!screen.contains("walissh: no agent"), "{screen}");
    }
    let start = ask(&t, "?@nosuch what now");
    let at = t.expect_from("walissh: no agent or workflow named `nosuch`", start);
    let at = listing_after(&t, at);
    back_at_prompt(&b, &t, at);
    // Listing asks no model.
    assert_eq!(model.count(), 0);

    let start = ask(&t, "?@disk why is it full");
    let at = t.expect_from("DISK-ANSWER", start);
    back_at_prompt(&b, &t, at);
    let reqs = model.wait_requests(1);
    assert!(
        system(&reqs[0]).starts_with("You look at disks: «why is it full»\n\n"),
        "{}",
        system(&reqs[0])
    );
    assert_eq!(tool_names(&reqs[0]), ["run_command", "read_file"]);
    assert!(
        last_user(&reqs[0]).ends_with("Question: why is it full"),
        "{}",
        last_user(&reqs[0])
    );

    // A plain question runs the entry.
    let start = ask(&t, "? and the network");
    let at = t.expect_from("ENTRY-DISK", start);
    let at = t.expect_from("ENTRY-NET", at);
    back_at_prompt(&b, &t, at);
    assert_eq!(headings(&plain_since(&t, start)), ["disk", "net"]);
    let reqs = model.wait_requests(3);
    assert!(
        system(&reqs[1]).starts_with("You look at disks: «and the network»\n\n"),
        "{}",
        system(&reqs[1])
    );
    assert!(
        system(&reqs[2]).starts_with("You look at the network.\n\n"),
        "{}",
        system(&reqs[2])
    );
    assert_eq!(model.count(), 3);
}

// ---- skills ----

#[test]
fn a_skill_is_loaded_and_followed() {
    let dir = visible_dir();
    let skill = dir.path().join("probe-disk");
    std::fs::create_dir(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: probe-disk\ndescription: Checks a disk in one step.\n---\n\
         # Probe the disk\n\nRun `echo SKILL-STEP-$((40+2))` and report what it printed.\n",
    )
    .unwrap();
    std::fs::write(skill.join("check.sh"), "echo FROM-SCRIPT\n").unwrap();
    let step = "echo SKILL-STEP-$((40+2))";
    let model = Model::start(vec![
        Reply::Sse(tool_call("s1", "load_skill", json!({"name": "probe-disk"}))),
        Reply::Sse(call("c1", step, "the skill says so")),
        Reply::Sse(answer("The skill's step printed SKILL-STEP-42.")),
    ]);
    let (b, t) = team(
        &model,
        &format!("[ai]\nskills_dir = \"{}\"\n", dir.path().display()),
    );
    let start = ask(&t, "? is the disk ok");
    let at = t.expect_from(step, start);
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("SKILL-STEP-42", at);
    let at = t.expect_from("The skill's step printed", at);
    back_at_prompt(&b, &t, at);

    let reqs = model.wait_requests(3);
    // The skill is listed, and the tool to load it offered.
    let s = system(&reqs[0]);
    assert!(
        s.contains(
            "\n\nSkills you can load with load_skill when one fits the task:\n\
             - probe-disk: Checks a disk in one step."
        ),
        "{s}"
    );
    assert!(
        tool_names(&reqs[0]).iter().any(|n| n == "load_skill"),
        "{:?}",
        tool_names(&reqs[0])
    );
    // Its instructions and script came back as the tool's result.
    let r = last_tool_result(&reqs[1]);
    assert_eq!(r["tool_call_id"], "s1");
    let c = content(r);
    assert!(
        c.contains("Run `echo SKILL-STEP-$((40+2))` and report what it printed."),
        "{c}"
    );
    assert!(
        c.contains("check.sh") && c.contains("echo FROM-SCRIPT"),
        "{c}"
    );
    // What it said to run ran, under the policy (asked, approved).
    let r = last_tool_result(&reqs[2]);
    assert_eq!(r["tool_call_id"], "c1");
    let c = content(r);
    assert!(c.starts_with(&format!("$ {step}\nexit code 0\n")), "{c}");
    assert!(c.contains("SKILL-STEP-42"), "{c}");

    b.wait_kind("ai_answer");
    let ev = ai_events(&b);
    assert_eq!(
        kinds(&ev),
        [
            "ai_prompt",
            "ai_skill",
            "ai_tool_call",
            "ai_tool_result",
            "ai_answer"
        ],
        "{ev:#?}"
    );
    assert_eq!(ev[1]["name"], "probe-disk");
    assert_eq!(ev[2]["command"], step);
    assert_eq!(ev[2]["decision"], "approved");
    assert_eq!(ev[3]["exit_code"], 0);
}

// ---- check-config ----

use crate::harness::check_config as check;

/// Lines 1-14.
const TEAM: &str = "[[agents]]\n\
name = \"collect\"\n\
description = \"gathers facts\"\n\
instruction = \"Collect facts about {question}.\"\n\
output_key = \"facts\"\n\
\n\
[[agents]]\n\
name = \"diagnose\"\n\
instruction = \"Diagnose from {facts}.\"\n\
\n\
[[workflows]]\n\
name = \"triage\"\n\
kind = \"sequential\"\n\
members = [\"collect\", \"diagnose\"]\n";

#[test]
fn check_config_names_each_assembly_error() {
    let skills = concat!(env!("CARGO_MANIFEST_DIR"), "/etc/skills");
    // One user: a config nobody could log in with is refused.
    let user = "[[users]]\nname = \"u\"\nauthorized_keys = [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHMTPR0d+PrPU0WH3b7gJLajZMMutiK2XEYTom1UgY8S u@h\"]\n";
    let good = format!("{TEAM}\n{user}\n[ai]\nentry = \"triage\"\nskills_dir = \"{skills}\"\n");
    let (code, err) = check(&good);
    assert_eq!(code, Some(0), "{err}");

    let no_skill_md = visible_dir();
    std::fs::create_dir(no_skill_md.path().join("broken")).unwrap();
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "a missing member",
            TEAM.replace("\"diagnose\"]", "\"ghost\"]"),
            "FILE:14: key `workflows.members`: ",
            "workflow `triage`: no agent or workflow named `ghost`",
        ),
        (
            "an unknown placeholder",
            TEAM.replace("{facts}", "{fatcs}"),
            "FILE:9: key `agents.instruction`: ",
            "agent `diagnose`: unknown placeholder {fatcs}",
        ),
        (
            "a cycle",
            format!(
                "{TEAM}\n[[workflows]]\nname = \"outer\"\nkind = \"sequential\"\nmembers = [\"inner\"]\n\n\
                 [[workflows]]\nname = \"inner\"\nkind = \"sequential\"\nmembers = [\"collect\", \"outer\"]\n"
            ),
            "FILE:17: key `workflows.members`: ",
            "workflow `outer` contains itself",
        ),
        (
            "an unknown entry",
            format!("{TEAM}\n[ai]\nentry = \"ghost\"\n"),
            "FILE:17: key `ai.entry`: ",
            "no agent or workflow named `ghost`",
        ),
        (
            "a workflow run in parallel",
            format!(
                "{TEAM}\n[[workflows]]\nname = \"fanout\"\nkind = \"parallel\"\nmembers = [\"collect\", \"triage\"]\n"
            ),
            "FILE:19: key `workflows.members`: ",
            "parallel workflow `fanout`: `triage` is a workflow",
        ),
        (
            "a loop without max_iterations",
            format!(
                "{TEAM}\n[[workflows]]\nname = \"again\"\nkind = \"loop\"\nmembers = [\"collect\"]\n"
            ),
            "FILE:17: key `workflows.max_iterations`: ",
            "loop `again` needs max_iterations",
        ),
        (
            "a skills dir that is not there",
            format!("{TEAM}\n[ai]\nskills_dir = \"/nonexistent/walissh-skills\"\n"),
            "FILE:17: key `ai.skills_dir`: ",
            "/nonexistent/walissh-skills",
        ),
        (
            "a skill folder without SKILL.md",
            format!(
                "{TEAM}\n[ai]\nskills_dir = \"{}\"\n",
                no_skill_md.path().display()
            ),
            "FILE:17: key `ai.skills_dir`: ",
            "broken/SKILL.md",
        ),
    ];
    for (what, config, head, says) in cases {
        let (code, err) = check(&config);
        assert_eq!(code, Some(1), "{what}: {err}");
        assert!(
            err.starts_with(&format!("walissh: {head}")),
            "{what}: expected {head:?} first: {err}"
        );
        assert!(err.contains(says), "{what}: expected {says:?} in: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
    }
}

// ---- SIGHUP ----

const SRE: &str = r#"
[[agents]]
name = "sre"
description = "the on-call engineer"
instruction = "You are the on-call SRE for {target}."
"#;

#[test]
fn sighup_adds_an_agent_for_a_live_session_and_new_logins() {
    let model = Model::start(vec![
        Reply::Sse(answer("SRE-ANSWER-1")),
        Reply::Sse(answer("SRE-ANSWER-2")),
    ]);
    let (b, t) = team(&model, "");
    let start = ask(&t, "?@");
    // With no `[ai] entry`, the built-in agent is the entry.
    let at = t.expect_from(
        "@walissh (entry), agent: the built-in agent: investigates with shell commands",
        start,
    );
    back_at_prompt(&b, &t, at);
    assert!(!plain_since(&t, start).contains("@sre"));
    let before = b.wait_event(|e| e["kind"] == "ai_prompt" && e["text"] == "?@");

    let mut text = std::fs::read_to_string(&b.config).unwrap();
    text.push_str(SRE);
    std::fs::write(&b.config, text).unwrap();
    let line = b.reload();
    assert!(line.contains("config reloaded"), "{line}");

    // The same session, not dropped, sees the new agent.
    let start = ask(&t, "?@");
    let at = t.expect_from("@sre, agent: the on-call engineer", start);
    back_at_prompt(&b, &t, at);
    let start = ask(&t, "?@sre what broke");
    let at = t.expect_from("SRE-ANSWER-1", start);
    back_at_prompt(&b, &t, at);
    let reqs = model.wait_requests(1);
    assert!(
        system(&reqs[0]).starts_with("You are the on-call SRE for «web1».\n\n"),
        "{}",
        system(&reqs[0])
    );
    let after = b.wait_event(|e| e["kind"] == "ai_prompt" && e["text"] == "?@sre what broke");
    assert_eq!(after["session"], before["session"], "not the same session");

    // So does a new login.
    let t2 = bob(&b);
    let at = ask(&t2, "?@sre and now");
    let at = t2.expect_from("SRE-ANSWER-2", at);
    back_at_prompt(&b, &t2, at);
    let reqs = model.wait_requests(2);
    assert!(
        system(&reqs[1]).starts_with("You are the on-call SRE for «web1».\n\n"),
        "{}",
        system(&reqs[1])
    );
    let newer = b.wait_event(|e| e["kind"] == "ai_prompt" && e["text"] == "?@sre and now");
    assert_ne!(newer["session"], before["session"]);
}

#[test]
fn a_broken_config_on_sighup_is_rejected_and_the_old_one_kept() {
    let model = Model::start(vec![
        Reply::Sse(answer("OLD-CONFIG-1")),
        Reply::Sse(answer("OLD-CONFIG-2")),
        Reply::Sse(answer("NEW-CONFIG-3")),
    ]);
    let (b, t) = team(&model, SRE);
    let good = std::fs::read_to_string(&b.config).unwrap();
    // A new instruction, and a workflow whose member does not exist.
    let changed = good.replace(
        "You are the on-call SRE for {target}.",
        "You are the NEW SRE.",
    );
    assert_ne!(changed, good);
    let broken = format!(
        "{changed}\n[[workflows]]\nname = \"broken\"\nkind = \"sequential\"\nmembers = [\"ghost\"]\n"
    );
    let ghost_line = broken.lines().count();
    assert!(broken.lines().last().unwrap().contains("ghost"));
    std::fs::write(&b.config, &broken).unwrap();
    let from = b.log.end();
    let line = b.reload();
    assert!(line.contains("reload failed"), "{line}");
    // The error, with file, line and key, is in the log.
    let error = format!(
        "{}:{ghost_line}: key `workflows.members`",
        b.config.display()
    );
    b.log.wait_for_from(&error, from);
    assert!(
        b.log.since(from).contains("`ghost`"),
        "{}",
        b.log.since(from)
    );

    // The live session still works, with the old config.
    let start = ask(&t, "?@");
    let at = t.expect_from("@sre, agent: the on-call engineer", start);
    back_at_prompt_unaudited(&t, at);
    assert!(!plain_since(&t, start).contains("@broken"));
    let at = ask(&t, "?@sre still there");
    let at = t.expect_from("OLD-CONFIG-1", at);
    back_at_prompt_unaudited(&t, at);
    let reqs = model.wait_requests(1);
    assert!(
        system(&reqs[0]).starts_with("You are the on-call SRE for «web1».\n\n"),
        "{}",
        system(&reqs[0])
    );

    // A new login works, with the old config too.
    let t2 = bob(&b);
    let at = ask(&t2, "?@sre new login");
    let at = t2.expect_from("OLD-CONFIG-2", at);
    back_at_prompt_unaudited(&t2, at);
    let reqs = model.wait_requests(2);
    assert!(
        system(&reqs[1]).starts_with("You are the on-call SRE for «web1».\n\n"),
        "{}",
        system(&reqs[1])
    );

    // Mended, the file is taken at the next reload.
    std::fs::write(&b.config, &changed).unwrap();
    let line = b.reload();
    assert!(line.contains("config reloaded"), "{line}");
    let at = ask(&t, "?@sre and now");
    let at = t.expect_from("NEW-CONFIG-3", at);
    back_at_prompt(&b, &t, at);
    let reqs = model.wait_requests(3);
    assert!(
        system(&reqs[2]).starts_with("You are the NEW SRE.\n\n"),
        "{}",
        system(&reqs[2])
    );

    // The audit (read with the mended file: the admin commands read the
    // config too): one live session throughout, a second for the new
    // login, every question answered.
    let prompt = |text: &str| {
        b.wait_event(|e| e["kind"] == "ai_prompt" && e["text"] == text)["session"].clone()
    };
    let live = prompt("?@sre still there");
    assert_eq!(prompt("?@sre and now"), live);
    assert_ne!(prompt("?@sre new login"), live);
    let answers: Vec<String> = b
        .wait_count("ai_answer", 3)
        .iter()
        .map(|e| e["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(answers, ["OLD-CONFIG-1", "OLD-CONFIG-2", "NEW-CONFIG-3"]);
}

#[test]
fn a_reload_never_widens_a_live_sessions_rights() {
    let model = Model::start(vec![
        Reply::Sse(call("c1", "uptime", "load")),
        Reply::Sse(answer("Load is low.")),
    ]);
    let (b, t) = team(&model, "");
    // bob turned off while his session is open: his next question is refused.
    let text = std::fs::read_to_string(&b.config).unwrap();
    let off = text.replacen(
        "targets = [\"web1\", \"local\"]\nai = \"confirm\"",
        "targets = [\"web1\", \"local\"]\nai = \"off\"",
        1,
    );
    assert_ne!(off, text, "bob's block was not found");
    std::fs::write(&b.config, off).unwrap();
    let line = b.reload();
    assert!(line.contains("config reloaded"), "{line}");
    let at = ask(&t, "? are you there");
    let at = t.expect_from("the agent is off for your account", at);
    back_at_prompt(&b, &t, at);
    assert_eq!(model.count(), 0, "a request reached the model");
    // Turned to auto: the session keeps the confirm it logged in with, so
    // even a read-only command asks.
    let auto = text.replacen("ai = \"confirm\"", "ai = \"auto\"", 1);
    assert_ne!(auto, text, "bob's ai line was not found");
    std::fs::write(&b.config, auto).unwrap();
    assert!(b.reload().contains("config reloaded"));
    let at = ask(&t, "? how loaded is it");
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("Load is low.", at);
    back_at_prompt(&b, &t, at);
    let call = b.wait_kind("ai_tool_call");
    assert_eq!(call["decision"], "approved");
}
