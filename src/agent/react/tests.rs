//! Tests of `agent::react`.

use super::*;
use crate::agent::scripted::{chunk, llm, server, sse};

struct FakeHost {
    streamed: String,
    approvals: Vec<Approval>,
    ran: Vec<String>,
    /// For each command run, whether it ran clean.
    clean: Vec<bool>,
    audit: Vec<(String, Value)>,
    /// What `wall` answers.
    wall: Result<Wall, String>,
    /// Commands that need four eyes, and the second approvals given, in
    /// reverse order (popped).
    four_eyes: Vec<&'static str>,
    seconds: Vec<Second>,
    /// Commands a second approval was asked for.
    asked_second: Vec<String>,
}

impl Default for FakeHost {
    fn default() -> Self {
        FakeHost {
            streamed: String::new(),
            approvals: Vec::new(),
            ran: Vec::new(),
            clean: Vec::new(),
            audit: Vec::new(),
            wall: Ok(Wall::Bwrap),
            four_eyes: Vec::new(),
            seconds: Vec::new(),
            asked_second: Vec::new(),
        }
    }
}

impl Host for FakeHost {
    fn thinking(&mut self) {}
    fn stream(&mut self, text: &str) {
        self.streamed.push_str(text);
    }
    fn refused(&mut self, command: &str, why: &str) {
        self.streamed
            .push_str(&format!("[refused {command}: {why}]"));
    }
    fn called(&mut self, call: &str, error: Option<&str>) {
        self.streamed
            .push_str(&format!("[called {call}: {error:?}]"));
    }
    async fn approve(&mut self, _command: &str, _reason: &str, _prompt: &Prompt) -> Approval {
        self.approvals.pop().unwrap_or(Approval::No)
    }
    async fn four_eyes(&mut self, command: &str) -> bool {
        self.four_eyes.contains(&command)
    }
    async fn second(&mut self, command: &str, _reason: &str) -> Second {
        self.asked_second.push(command.to_string());
        self.seconds.pop().unwrap_or(Second::TimedOut)
    }
    async fn wall(&mut self) -> Result<Wall, String> {
        self.wall.clone()
    }
    async fn run(&mut self, command: &str, clean: Option<(&str, Wall)>) -> Outcome {
        self.ran.push(command.to_string());
        self.clean.push(clean.is_some());
        Outcome {
            exit_code: Some(0),
            output: format!("output of {command}"),
            output_bytes: 10,
            ..Outcome::default()
        }
    }
    async fn audit(&mut self, kind: Kind, fields: Vec<(&'static str, Value)>) {
        let obj: serde_json::Map<String, Value> = fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        self.audit.push((kind.to_string(), Value::Object(obj)));
    }

    async fn audit_ahead(
        &mut self,
        kind: Kind,
        fields: Vec<(&'static str, Value)>,
    ) -> Result<(), &'static str> {
        self.audit(kind, fields).await;
        Ok(())
    }
}

fn call(id: &str, args: &str) -> String {
    sse(&[chunk(
        json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": "run_command", "arguments": args}}]}),
    )])
}

fn text(t: &str) -> String {
    sse(&[chunk(json!({"content": t}))])
}

const LIMITS: QuestionLimits = QuestionLimits {
    max_steps: 4,
    wall: Duration::from_secs(30),
};

/// Asks one question against a scripted model (one SSE body per
/// request); returns the answer, the host, and the requests made.
async fn ask(
    script: Vec<String>,
    mode: AiMode,
    approvals: Vec<Approval>,
) -> (Result<String, String>, FakeHost, Vec<Value>) {
    let host = FakeHost {
        approvals,
        ..Default::default()
    };
    ask_with(script, mode, host).await
}

async fn ask_with(
    script: Vec<String>,
    mode: AiMode,
    mut host: FakeHost,
) -> (Result<String, String>, FakeHost, Vec<Value>) {
    let (url, seen) = server(script.into_iter().map(|b| (200, b, true)).collect()).await;
    let model = Model::new(&llm(&url)).unwrap();
    let config = crate::config::Config::parse("", "test.toml", false).unwrap();
    let redactor = crate::context::redact::for_config(&config).unwrap();
    let mut agent = Agent::new(&config, Default::default(), redactor);
    agent.limits = LIMITS;
    let brief = Brief::default();
    let Some(crate::agent::team::Item::Agent(spec)) = agent.team.get("walissh") else {
        panic!("no built-in agent")
    };
    let ask = Ask {
        model: &model,
        agent: &agent,
        mode,
        brief: &brief,
        spec,
        in_loop: false,
        mcp: None,
    };
    let mut memory = Memory::new(&agent.context);
    let a = answer(ask, "q", &mut memory, &mut host).await;
    let requests = seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    (a, host, requests)
}

/// The content of the last message of a request.
fn last_message(request: &Value) -> &str {
    let msgs = request["messages"].as_array().unwrap();
    msgs.last().unwrap()["content"].as_str().unwrap()
}

#[tokio::test]
async fn a_question_answered_with_one_approved_command() {
    let script = vec![
        call("c1", r#"{"command": "df -h", "reason": "disk"}"#),
        text("/ is 97% full."),
    ];
    let (a, host, requests) = ask(script, AiMode::Confirm, vec![Approval::Yes]).await;
    assert_eq!(a.unwrap(), "/ is 97% full.");
    assert_eq!(host.ran, ["df -h"]);
    // Approved: run as the user saw it, not clean.
    assert_eq!(host.clean, [false]);
    assert_eq!(host.streamed, "/ is 97% full.");
    let kinds: Vec<&str> = host.audit.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["ai_tool_call", "ai_tool_result", "ai_answer"]);
    assert_eq!(host.audit[0].1["decision"], "approved");
    // The second request carried the call and its result.
    let msgs = requests[1]["messages"].as_array().unwrap();
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "c1");
    assert_eq!(msgs[3]["role"], "tool");
    assert!(last_message(&requests[1]).contains(
        "exit code 0\n<output source=\"target\" trusted=\"no\">\noutput of df -h\n</output>"
    ));
    assert_eq!(requests[1]["tools"][0]["function"]["name"], "run_command");
}

#[tokio::test]
async fn denied_commands_never_run_and_the_model_is_told() {
    let script = vec![
        call("c1", r#"{"command": "ls; rm -rf /"}"#),
        call("c2", r#"{"command": "ls /tmp"}"#),
        text("done"),
    ];
    let (a, host, requests) = ask(script, AiMode::Auto, vec![]).await;
    assert_eq!(a.unwrap(), "done");
    // The denied one never ran; the read-only one ran unasked in auto.
    assert_eq!(host.ran, ["ls /tmp"]);
    // Run unasked: clean.
    assert_eq!(host.clean, [true]);
    assert_eq!(host.audit[0].1["decision"], "denied_by_policy");
    assert_eq!(host.audit[1].1["decision"], "auto");
    assert!(last_message(&requests[1]).starts_with("refused by walissh's policy"));
}

#[tokio::test]
async fn declined_edited_and_malformed_calls() {
    let script = vec![
        call("c1", r#"{"command": "systemctl restart nginx"}"#),
        call("c2", r#"{"command": "uptime"}"#),
        call("c3", r#"{"command": "unterminated"#),
        text("ok"),
    ];
    // approve() pops from the end: first No, then Edited.
    let approvals = vec![Approval::Edited("uptime -p".into()), Approval::No];
    let (a, host, requests) = ask(script, AiMode::Confirm, approvals).await;
    assert_eq!(a.unwrap(), "ok");
    assert_eq!(host.ran, ["uptime -p"]);
    assert_eq!(host.clean, [false]);
    assert_eq!(host.audit[0].1["decision"], "denied_by_user");
    assert_eq!(host.audit[1].1["decision"], "edited");
    assert!(last_message(&requests[3]).contains("not valid JSON"));
}

#[tokio::test]
async fn a_secret_in_the_users_edit_does_not_reach_the_model() {
    let secret = "Zq7xW2pL9vKm4RtY8nBc3HdF";
    let edit = format!("curl -s -H 'Authorization: Bearer {secret}' http://localhost/health");
    let script = vec![
        call("c1", r#"{"command": "curl -s http://localhost/health"}"#),
        text("ok"),
    ];
    let (a, host, requests) = ask(script, AiMode::Confirm, vec![Approval::Edited(edit)]).await;
    assert_eq!(a.unwrap(), "ok");
    assert_eq!(host.audit[0].1["decision"], "edited");
    // The second request carries the result and the tool cache.
    let sent = requests[1].to_string();
    assert!(sent.contains("Authorization: Bearer"), "{sent}");
    assert!(!sent.contains(secret), "{sent}");
}

#[tokio::test]
async fn the_step_limit_and_repeats_stop_the_loop() {
    let script = (0..4)
        .map(|_| call("c", r#"{"command": "uptime"}"#))
        .collect();
    let (a, host, _) = ask(script, AiMode::Auto, vec![]).await;
    let e = a.unwrap_err();
    assert!(e.contains("same command"), "{e}");
    assert_eq!(host.ran.len(), MAX_REPEATS);
    assert_eq!(host.audit.last().unwrap().0, "ai_error");
}

#[tokio::test]
async fn read_file_is_a_bounded_read_only_command() {
    let read = |args: &str| {
        let call = ToolCall {
            id: "r".into(),
            name: "read_file".into(),
            arguments: args.into(),
        };
        command_of(&call).map(|(c, _)| c)
    };
    assert_eq!(
        read(r#"{"path": "/var/log/it's.log", "from_line": 10, "lines": 5000}"#).unwrap(),
        r"tail -n +10 -- '/var/log/it'\''s.log' | head -n 400"
    );
    assert!(read(r#"{"lines": 3}"#).unwrap_err().contains("missing"));
    // It runs unasked in auto mode, as the read-only command it is.
    let script = vec![
        sse(&[chunk(
            json!({"tool_calls": [{"index": 0, "id": "r1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\": \"/etc/hosts\"}"}}]}),
        )]),
        text("ok"),
    ];
    let (a, host, _) = ask(script, AiMode::Auto, vec![]).await;
    assert_eq!(a.unwrap(), "ok");
    assert_eq!(host.ran, ["tail -n +1 -- '/etc/hosts' | head -n 100"]);
    assert_eq!(host.clean, [true]);
    assert_eq!(host.audit[0].1["decision"], "auto");
}

#[tokio::test]
async fn at_most_five_calls_run_per_turn() {
    let calls: Vec<Value> = (0..7)
            .map(|i| json!({"index": i, "id": format!("c{i}"), "type": "function",
                "function": {"name": "run_command", "arguments": format!("{{\"command\": \"echo {i}\"}}")}}))
            .collect();
    let script = vec![sse(&[chunk(json!({"tool_calls": calls}))]), text("ok")];
    let (a, host, requests) = ask(script, AiMode::Auto, vec![]).await;
    assert_eq!(a.unwrap(), "ok");
    assert_eq!(host.ran.len(), MAX_CALLS_PER_TURN);
    // The extra calls are dropped from the history, and the model told.
    let msgs = requests[1]["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3 + MAX_CALLS_PER_TURN);
    assert_eq!(
        msgs[2]["tool_calls"].as_array().unwrap().len(),
        MAX_CALLS_PER_TURN
    );
    assert!(
        last_message(&requests[1])
            .ends_with("(your 2 further calls were dropped: at most 5 per turn)")
    );
}

#[test]
fn long_output_is_cut_with_the_cut_said() {
    let o = Outcome {
        exit_code: Some(1),
        output: "x".repeat(10_000),
        ..Default::default()
    };
    let d = describe("cat big", &o);
    assert!(d.starts_with("$ cat big\nexit code 1\n"));
    assert!(d.contains("[... 6000 bytes cut ...]"));
}

/// Four-eyes: a command the policy would run unasked is asked first, then
/// a second person; the approver goes on its row. A denial, or no answer
/// in time, keeps it from running, and the model is told.
#[tokio::test]
async fn four_eyes_commands_wait_for_a_second_person() {
    let script = vec![
        call("c1", r#"{"command": "uptime"}"#),
        call("c2", r#"{"command": "df -h"}"#),
        call("c3", r#"{"command": "free -m"}"#),
        text("done"),
    ];
    let host = FakeHost {
        approvals: vec![Approval::Yes, Approval::Yes, Approval::Yes],
        four_eyes: vec!["uptime", "df -h", "free -m"],
        seconds: vec![
            Second::TimedOut,
            Second::Denied { by: "bob".into() },
            Second::Approved { by: "bob".into() },
        ],
        ..Default::default()
    };
    let (a, host, requests) = ask_with(script, AiMode::Auto, host).await;
    assert_eq!(a.unwrap(), "done");
    // Read-only in auto, but four-eyes: asked, and typed (not clean).
    assert_eq!(host.ran, ["uptime"]);
    assert_eq!(host.clean, [false]);
    assert_eq!(host.asked_second, ["uptime", "df -h", "free -m"]);
    let calls: Vec<&Value> = host
        .audit
        .iter()
        .filter(|(k, _)| k == "ai_tool_call")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(calls[0]["decision"], "approved");
    assert_eq!(calls[0]["approver"], "bob");
    assert_eq!(calls[1]["decision"], "denied_by_approver");
    assert_eq!(calls[1]["approver"], "bob");
    assert_eq!(calls[2]["decision"], "denied_by_approver");
    assert!(calls[2].get("approver").is_none());
    assert!(last_message(&requests[2]).contains("second approver (bob) denied it"));
    assert!(last_message(&requests[3]).contains("no second approval came in time"));
}
