//! MCP both ways (issue 19), against real peers: the reference servers
//! the MCP project publishes on npm (`server-filesystem` over stdio,
//! `server-everything` over stdio and streamable HTTP), installed by
//! `.ci/run` under `/opt/mcp-servers` (or `$WALISSH_MCP_SERVERS`); a server
//! that breaks on purpose (`mcp_broken.py`); and, for the bastion as an
//! MCP server, the official Python SDK's client (`mcp_client.py`) over a
//! real `ssh -s … mcp`.
//!
//! Waits are for events (text on the screen, requests at the model
//! server, audit rows, a server's own start-up line), never for time.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::agent::{ai_events, ask, back_at_prompt, bastion_with, bob, of_kind};
use crate::harness::*;
use crate::model::*;

const RUN: &str = "Run? [y/N/e]";

/// Where the reference servers are installed.
fn servers() -> PathBuf {
    let dir = std::env::var("WALISSH_MCP_SERVERS").unwrap_or_else(|_| "/opt/mcp-servers".into());
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("node_modules/.bin/mcp-server-everything").exists(),
        "the MCP reference servers are not installed in {}: run .ci/run's npm step",
        dir.display()
    );
    dir
}

fn bin(name: &str) -> String {
    servers()
        .join("node_modules/.bin")
        .join(name)
        .display()
        .to_string()
}

/// The names of the functions a request offers.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The last message of a request (a tool result), as text.
fn last_text(request: &Value) -> String {
    let m = request["messages"].as_array().unwrap().last().unwrap();
    m["content"].as_str().unwrap_or_default().to_string()
}

/// An agent `ops`, the entry, with `tools`; and `servers` (TOML).
fn agent_with(tools: &str, servers: &str) -> String {
    format!(
        "[ai]\nentry = \"ops\"\n\n{servers}\n\n[[agents]]\nname = \"ops\"\ninstruction = \"You run operations.\"\ntools = {tools}\n"
    )
}

/// A stdio server-filesystem over `dir`.
fn files_server(dir: &std::path::Path, extra: &str) -> String {
    format!(
        "[[mcp]]\nname = \"files\"\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"{}\"]\n{extra}\n",
        bin("mcp-server-filesystem"),
        dir.display()
    )
}

#[test]
fn an_agent_mixes_run_command_and_mcp_tools_under_their_rules() {
    let files = visible_dir();
    let note = files.path().join("note.txt");
    std::fs::write(&note, "release 7.4\npassword = hunter2hunter2\n").unwrap();
    let written = files.path().join("new.txt");
    let model = Model::start(vec![
        Reply::Sse(call("c1", "uname -s", "check")),
        Reply::Sse(tool_call(
            "c2",
            "mcp__files__read_text_file",
            json!({"path": note.display().to_string()}),
        )),
        Reply::Sse(tool_call(
            "c3",
            "mcp__files__write_file",
            json!({"path": written.display().to_string(), "content": "x"}),
        )),
        Reply::Sse(answer("Release 7.4.")),
    ]);
    let toml = agent_with(
        "[\"run_command\", \"mcp:files/*\"]",
        &files_server(files.path(), "approve = \"read_only\""),
    );
    let b = auto_bastion_with(&model, toml);
    let t = bob(&b);
    let at = ask(&t, "? which release");
    // The write is asked about, naming the server, the tool and the
    // arguments; the read-only read was not.
    let asked = t.expect_from(RUN, at);
    let screen = t.screen.plain();
    assert!(
        screen.contains("MCP server files, tool write_file"),
        "{screen}"
    );
    t.send("n");
    let answered = t.expect_from("Release 7.4.", asked);
    let requests = model.wait_requests(4);
    let first = offered(&requests[0]);
    assert!(first.contains(&"run_command".to_string()), "{first:?}");
    assert!(
        first.contains(&"mcp__files__read_text_file".to_string()),
        "{first:?}"
    );
    assert!(!first.contains(&"load_skill".to_string()), "{first:?}");
    assert!(
        last_text(&requests[1]).contains("Linux"),
        "{:#}",
        requests[1]
    );
    // The file's text reached the model, its secret did not.
    let read = last_text(&requests[2]);
    assert!(
        read.contains("release 7.4") && read.contains("[REDACTED"),
        "{read}"
    );
    assert!(!read.contains("hunter2hunter2"), "{read}");
    assert!(
        last_text(&requests[3]).contains("declined"),
        "{:#}",
        requests[3]
    );
    assert!(!written.exists(), "a declined call was made");
    back_at_prompt(&b, &t, answered);
    let ev = ai_events(&b);
    let calls = of_kind(&ev, "ai_tool_call");
    let read_row = calls
        .iter()
        .find(|e| e["tool"] == "read_text_file")
        .unwrap();
    assert_eq!(read_row["server"], "files");
    assert_eq!(read_row["decision"], "auto");
    assert!(
        read_row["arguments"].as_str().unwrap().contains("note.txt"),
        "{read_row}"
    );
    let write_row = calls.iter().find(|e| e["tool"] == "write_file").unwrap();
    assert_eq!(write_row["decision"], "denied_by_user");
    let results = of_kind(&ev, "ai_tool_result");
    let read_result = results
        .iter()
        .find(|e| e["tool"] == "read_text_file")
        .unwrap();
    assert!(read_result["size"].as_u64().unwrap() > 0, "{read_result}");
    assert!(read_result["error"].is_null(), "{read_result}");
    // The command ran as before, beside the MCP calls.
    assert!(
        calls
            .iter()
            .any(|e| e["command"] == "uname -s" && e["decision"] == "auto"),
        "{calls:?}"
    );
}

/// walissh asking `model` with `toml`, bob in `auto`.
fn auto_bastion_with(model: &Model, toml: String) -> Bastion {
    bastion_with(
        model,
        Opts {
            bob_ai: "auto",
            extra_toml: toml,
            ..Opts::default()
        },
    )
}

/// server-everything over streamable HTTP on a free port, once it says it
/// listens.
struct Everything {
    child: Child,
    port: u16,
}

impl Everything {
    fn start() -> Everything {
        let port = free_port();
        let mut child = Command::new(bin("mcp-server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                err.read_line(&mut line).unwrap() > 0,
                "server-everything ended"
            );
            if line.contains("listening on port") {
                break;
            }
        }
        // Keep draining what it logs.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        Everything { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_streamable_http_server_is_asked_about_and_its_new_tools_are_read() {
    let everything = Everything::start();
    let model = Model::start(vec![
        Reply::Sse(tool_call(
            "c1",
            "mcp__every__get-sum",
            json!({"a": 2, "b": 40}),
        )),
        Reply::Sse(answer("It is 42.")),
    ]);
    let servers = format!(
        "[[mcp]]\nname = \"every\"\ntransport = \"http\"\nurl = \"{}\"\nheaders = {{ \"X-Walissh-Home\" = \"${{HOME}}\" }}\ntimeout_s = 20\n",
        everything.url()
    );
    let toml = agent_with(
        "[\"mcp:every/get-sum\", \"mcp:every/echo\", \"mcp:every/simulate-*\"]",
        &servers,
    );
    // bob in confirm: every call is asked about, whatever the tool says.
    let b = bastion_with(
        &model,
        Opts {
            extra_toml: toml,
            ..Opts::default()
        },
    );
    let t = bob(&b);
    let at = ask(&t, "? add them");
    let asked = t.expect_from(RUN, at);
    let screen = t.screen.plain();
    assert!(screen.contains("mcp every/get-sum"), "{screen}");
    assert!(screen.contains(r#"{"a":2,"b":40}"#), "{screen}");
    t.send("y");
    let answered = t.expect_from("It is 42.", asked);
    let requests = model.wait_requests(2);
    let first = offered(&requests[0]);
    assert!(
        first.contains(&"mcp__every__get-sum".to_string()),
        "{first:?}"
    );
    assert!(first.contains(&"mcp__every__echo".to_string()), "{first:?}");
    // Only what the agent lists is offered.
    assert!(
        !first.iter().any(|n| n.contains("long-running")),
        "{first:?}"
    );
    assert!(!first.contains(&"run_command".to_string()), "{first:?}");
    assert!(last_text(&requests[1]).contains("42"), "{:#}", requests[1]);
    // server-everything adds a tool and says so (tools/list_changed)
    // right after the session starts: by the second turn it is offered.
    let second = offered(&requests[1]);
    assert!(
        second.contains(&"mcp__every__simulate-research-query".to_string()),
        "{second:?}"
    );
    let ev = b.wait_event(|e| e["kind"] == "ai_tool_result" && e["tool"] == "get-sum");
    assert_eq!(ev["server"], "every");
    let call = b.wait_event(|e| e["kind"] == "ai_tool_call" && e["tool"] == "get-sum");
    assert_eq!(call["decision"], "approved");
    back_at_prompt(&b, &t, answered);
}

#[test]
fn servers_that_fail_hang_crash_or_babble_cost_one_line_each() {
    let broken = format!("{}/tests/interop/mcp_broken.py", env!("CARGO_MANIFEST_DIR"));
    let servers = format!(
        "[[mcp]]\nname = \"absent\"\ntransport = \"stdio\"\ncommand = \"/nonexistent/mcp-server\"\n\n\
         [[mcp]]\nname = \"slow\"\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"stdio\"]\ntimeout_s = 3\napprove = \"read_only\"\n\n\
         [[mcp]]\nname = \"crash\"\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = [\"{broken}\", \"crash\"]\ntimeout_s = 5\napprove = \"never\"\n\n\
         [[mcp]]\nname = \"babble\"\ntransport = \"stdio\"\ncommand = \"python3\"\nargs = [\"{broken}\", \"garbage\"]\ntimeout_s = 3\napprove = \"never\"\n",
        bin("mcp-server-everything")
    );
    let model = Model::start(vec![
        Reply::Sse(tool_call("c0", "mcp__slow__get-env", json!({}))),
        Reply::Sse(tool_call(
            "c1",
            "mcp__slow__trigger-long-running-operation",
            json!({"duration": 60, "steps": 2}),
        )),
        Reply::Sse(tool_call("c2", "mcp__crash__poke", json!({}))),
        Reply::Sse(tool_call("c3", "mcp__babble__poke", json!({}))),
        Reply::Sse(answer("Done despite them.")),
    ]);
    let toml = agent_with(
        "[\"mcp:absent/*\", \"mcp:slow/trigger-long-running-operation\", \"mcp:slow/get-env\", \"mcp:crash/*\", \"mcp:babble/*\"]",
        &servers,
    );
    let b = auto_bastion_with(&model, toml);
    let t = bob(&b);
    let at = ask(&t, "? try them");
    let at = t.expect_from(
        "MCP server absent: cannot start /nonexistent/mcp-server",
        at,
    );
    let at = t.expect_from("MCP server slow: no answer within 3 s", at);
    let at = t.expect_from("MCP server crash:", at);
    let at = t.expect_from("MCP server babble:", at);
    let at = t.expect_from("Done despite them.", at);
    let requests = model.wait_requests(5);
    let first = offered(&requests[0]);
    assert!(!first.iter().any(|n| n.contains("absent")), "{first:?}");
    // A stdio server gets PATH and the like of the bastion's environment,
    // nothing else (this test's cargo variables stand for the model's key).
    let env = last_text(&requests[1]);
    assert!(env.contains("PATH"), "{env}");
    assert!(!env.contains("CARGO_MANIFEST_DIR"), "{env}");
    assert!(
        last_text(&requests[2]).contains("no answer within 3 s"),
        "{:#}",
        requests[2]
    );
    assert!(
        last_text(&requests[3]).starts_with("error: the call of crash/poke failed"),
        "{:#}",
        requests[3]
    );
    assert!(
        last_text(&requests[4]).starts_with("error: the call of babble/poke failed"),
        "{:#}",
        requests[4]
    );
    // The question ended cleanly, the session and the bastion go on.
    back_at_prompt(&b, &t, at);
    let ev = ai_events(&b);
    let results = of_kind(&ev, "ai_tool_result");
    assert_eq!(results.len(), 4, "{results:#?}");
    assert!(
        results[1..].iter().all(|r| r["error"].is_string()),
        "{results:#?}"
    );
    let other = bob(&b);
    other.send("echo OTHER-$((3+4))\r");
    other.expect("OTHER-7");
}

#[test]
fn session_servers_end_with_their_session_and_with_the_bastion() {
    let files = visible_dir();
    // The server's command line names this directory: how it is found.
    let marker = files.path().display().to_string();
    let model = Model::start(vec![
        Reply::Sse(tool_call(
            "c1",
            "mcp__files__list_allowed_directories",
            json!({}),
        )),
        Reply::Sse(answer("First.")),
        Reply::Sse(tool_call(
            "c2",
            "mcp__files__list_allowed_directories",
            json!({}),
        )),
        Reply::Sse(answer("Second.")),
    ]);
    let toml = agent_with(
        "[\"mcp:files/list_allowed_directories\"]",
        &files_server(files.path(), "approve = \"never\""),
    );
    let mut b = auto_bastion_with(&model, toml);
    let mut t = bob(&b);
    let at = ask(&t, "? where");
    t.expect_from("First.", at);
    assert!(running(&marker), "the session's server is not running");
    t.send("exit\r");
    t.wait();
    wait_until(|| !running(&marker), "the server outlived its session");
    // A new session starts its own; SIGTERM to the bastion ends it.
    let t = bob(&b);
    let at = ask(&t, "? where again");
    t.expect_from("Second.", at);
    assert!(running(&marker));
    b.terminate();
    wait_until(|| !running(&marker), "the server outlived the bastion");
}

/// The official Python SDK's client, with `args`, over `ssh -s
/// LOGIN@bastion mcp`.
fn mcp_client_command(b: &Bastion, login: &str, args: &[&str]) -> Command {
    let ssh = b.ssh_bob(login);
    let mut ssh_args: Vec<String> = ssh
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let dest = ssh_args.pop().unwrap();
    ssh_args.extend(["-s".to_string(), dest, "mcp".to_string()]);
    let script = format!("{}/tests/interop/mcp_client.py", env!("CARGO_MANIFEST_DIR"));
    let mut c = Command::new("python3");
    c.arg(script)
        .args(args)
        .arg("--")
        .arg(ssh.get_program())
        .args(&ssh_args);
    c
}

/// The client's report (one JSON object) and exit status.
fn mcp_client(b: &Bastion, login: &str, args: &[&str]) -> (Value, Option<i32>) {
    let out = mcp_client_command(b, login, args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("mcp_client printed {text:?}: {e}"));
    (report, out.status.code())
}

/// `[ai]` for gateway tests whose client approves (`mcp_confirm`).
const ELICIT: &str = "[ai]\nmcp_confirm = \"elicitation\"\n";

/// walissh with bob's `ai` and `toml` appended, for gateway tests (no
/// model is asked: the client is the AI).
/// `command` run through the gateway by a client that accepts whatever
/// it is asked (`--elicit accept`, the box ticked); the client's report.
fn approving_client(b: &Bastion, command: &str) -> Value {
    let call = json!({ "command": command }).to_string();
    let args = [
        "--elicit",
        "accept",
        "--elicit-content",
        r#"{"run": true}"#,
        "--call",
        "run_command",
        &call,
    ];
    mcp_client(b, "bob:web1", &args).0
}

fn gateway(ai: &'static str, toml: &str) -> Bastion {
    let model = Model::start(vec![]);
    bastion_with(
        &model,
        Opts {
            bob_ai: ai,
            extra_toml: toml.into(),
            ..Opts::default()
        },
    )
}

#[test]
fn an_mcp_client_runs_commands_on_a_target_through_the_gateway() {
    let b = gateway(
        "auto",
        "[ai]\ndeny = [\"shutdown*\"]\nmcp_confirm = \"elicitation\"\n",
    );
    // Listed, and a read-only command runs unasked; its secret is
    // scrubbed from what goes back.
    let call = json!({"command": "uname -s; echo password=hunter2hunter2"}).to_string();
    let (r, code) = mcp_client(&b, "bob:web1", &["--call", "run_command", &call]);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["server"], "walissh");
    assert_eq!(r["tools"], json!(["run_command", "read_file"]));
    let text = r["result"]["text"].as_str().unwrap();
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(text.contains("Linux"), "{text}");
    assert!(
        !text.contains("hunter2hunter2") && text.contains("[REDACTED"),
        "{text}"
    );
    // read_file is a bounded read, under the same rules.
    let (r, _) = mcp_client(
        &b,
        "bob:web1",
        &["--call", "read_file", r#"{"path": "/etc/hostname"}"#],
    );
    let host = std::fs::read_to_string("/etc/hostname").unwrap();
    assert!(
        r["result"]["text"].as_str().unwrap().contains(host.trim()),
        "{r}"
    );
    // A denied command is refused, and does not run.
    let (r, _) = mcp_client(
        &b,
        "bob:web1",
        &["--call", "run_command", r#"{"command": "shutdown -h now"}"#],
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["text"]
            .as_str()
            .unwrap()
            .contains("refused by walissh's policy"),
        "{r}"
    );
    // What auto cannot prove read-only needs approval: refused with the
    // reason without elicitation, run when the user accepts, not when
    // they decline.
    let dir = visible_dir();
    let made = dir.path().join("made");
    let touch = json!({"command": format!("touch {}", made.display())}).to_string();
    let (r, _) = mcp_client(&b, "bob:web1", &["--call", "run_command", &touch]);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["text"]
            .as_str()
            .unwrap()
            .contains("cannot ask for it"),
        "{r}"
    );
    assert!(!made.exists());
    let declined = ["--elicit", "decline", "--call", "run_command", &touch];
    let (r, _) = mcp_client(&b, "bob:web1", &declined);
    assert_eq!(r["elicitations"].as_array().unwrap().len(), 1, "{r}");
    assert!(!made.exists());
    let r = approving_client(&b, &format!("touch {}", made.display()));
    let asked = r["elicitations"][0].as_str().unwrap();
    assert!(asked.contains("touch") && asked.contains("web1"), "{r}");
    assert!(made.exists(), "{r}");
    // The rows: via mcp, with the client's name.
    let rows: Vec<Value> = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "ai_tool_call")
        .collect();
    assert!(
        rows.iter()
            .all(|e| e["via"] == "mcp" && e["client"] == "walissh-test"),
        "{rows:#?}"
    );
    let decisions: Vec<&str> = rows
        .iter()
        .map(|e| e["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        decisions,
        [
            "auto",
            "auto",
            "denied_by_policy",
            "denied_by_user",
            "denied_by_user",
            "approved"
        ],
        "{rows:#?}"
    );
    let results = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "ai_tool_result" && e["via"] == "mcp")
        .count();
    assert_eq!(results, 3);
    assert!(
        b.audit()
            .iter()
            .any(|e| e["kind"] == "subsystem" && e["name"] == "mcp")
    );
}

#[test]
fn what_a_secret_file_prints_through_the_gateway_goes_whole() {
    // A bare value, no keyword beside it: only the command says it is a
    // secret, and the gateway scrubs a command's output as the agent
    // does, command and all.
    let b = gateway("confirm", "[ai]\nmcp_confirm = \"elicitation\"\n");
    let dir = visible_dir();
    let file = dir.path().join("db.password");
    std::fs::write(&file, "Zq8vK2mW9xLp4RtB\n").unwrap();
    let r = approving_client(&b, &format!("cat {}", file.display()));
    let text = r["result"]["text"].as_str().unwrap();
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(!text.contains("Zq8vK2mW9xLp4RtB"), "{text}");
    assert!(text.contains("[REDACTED"), "{text}");
    let result = b.wait_event(|e| e["kind"] == "ai_tool_result" && e["via"] == "mcp");
    assert_eq!(result["exit_code"], 0, "{result}");
}

#[test]
fn the_gateway_is_closed_to_users_whose_ai_is_off() {
    let b = gateway("off", "");
    let (r, code) = mcp_client(&b, "bob:web1", &[]);
    assert_eq!(code, Some(2), "{r}");
    assert!(b.audit().iter().all(|e| e["kind"] != "ai_tool_call"));
}

#[test]
fn in_confirm_the_gateway_asks_through_the_client_even_for_read_only_commands() {
    let b = gateway("confirm", ELICIT);
    let call = json!({"command": "uname -s"}).to_string();
    let (r, _) = mcp_client(&b, "bob:web1", &["--call", "run_command", &call]);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["text"]
            .as_str()
            .unwrap()
            .contains("bob has ai = confirm"),
        "{r}"
    );
    let r = approving_client(&b, "uname -s");
    assert_eq!(r["elicitations"].as_array().unwrap().len(), 1, "{r}");
    assert!(
        r["result"]["text"].as_str().unwrap().contains("Linux"),
        "{r}"
    );
    // Accepting the form without ticking the box runs nothing.
    let unticked = [
        "--elicit",
        "accept",
        "--elicit-content",
        r#"{"run": false}"#,
        "--call",
        "run_command",
        &call,
    ];
    let (r, _) = mcp_client(&b, "bob:web1", &unticked);
    assert_eq!(r["result"]["isError"], true, "{r}");
    let decisions: Vec<Value> = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "ai_tool_call")
        .map(|e| e["decision"].clone())
        .collect();
    assert_eq!(
        decisions,
        [
            json!("denied_by_user"),
            json!("approved"),
            json!("denied_by_user")
        ]
    );
}

#[test]
fn check_config_names_unknown_servers_and_bad_entries_by_line() {
    let (code, err) = check_config(&agent_with(
        "[\"run_command\", \"mcp:nosuch/*\"]",
        "[[mcp]]\nname = \"files\"\ntransport = \"stdio\"\ncommand = \"x\"\n",
    ));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("FILE:") && err.contains("agents.tools"),
        "{err}"
    );
    assert!(err.contains("unknown MCP server `nosuch`"), "{err}");
    let (code, err) = check_config("[[mcp]]\nname = \"web\"\ntransport = \"http\"\n");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("FILE:3") && err.contains("needs a `url`"),
        "{err}"
    );
}

#[test]
fn a_client_gets_four_calls_at_once_and_its_calls_end_when_it_leaves() {
    let b = gateway("auto", "");
    // Six slow calls at once: four run, two are told the gateway is busy.
    // The client gives up (its deadline) with four under way: they stop,
    // and their rows come before the session's end.
    // Silent and endless, yet read-only: it runs unasked (a long `sleep`
    // is asked).
    let call = json!({"command": "seq 97 inf | grep -c never"}).to_string();
    let (r, code) = mcp_client(
        &b,
        "bob:web1",
        &[
            "--timeout",
            "8",
            "--parallel",
            "6",
            "--call",
            "run_command",
            &call,
        ],
    );
    assert_eq!(code, Some(2), "{r}");
    let busy: Vec<&Value> = r["results"].as_array().unwrap().iter().collect();
    assert_eq!(busy.len(), 2, "{r}");
    assert!(
        busy.iter()
            .all(|x| x["text"].as_str().unwrap().starts_with("busy")),
        "{r}"
    );
    b.wait_kind("session_end");
    // Oldest first: every result before the end.
    let rows = b.audit();
    let end = rows
        .iter()
        .position(|e| e["kind"] == "session_end")
        .unwrap();
    let results: Vec<(usize, &Value)> = rows
        .iter()
        .enumerate()
        .filter(|(_, e)| e["kind"] == "ai_tool_result" && e["via"] == "mcp")
        .collect();
    assert_eq!(results.len(), 4, "{rows:#?}");
    assert!(
        results
            .iter()
            .all(|(i, e)| *i < end && e["interrupted"] == "the client went away"),
        "{rows:#?}"
    );
    wait_until(|| !running("seq 97 inf"), "a call outlived its client");
    // A message past the gateway's bound is dropped unread: nothing runs,
    // and the next client is served.
    let big =
        json!({"command": "touch /tmp/walissh-never", "pad": "x".repeat(100_000)}).to_string();
    let (r, code) = mcp_client(
        &b,
        "bob:web1",
        &["--timeout", "5", "--call", "run_command", &big],
    );
    assert_eq!(code, Some(2), "{r}");
    let (r, _) = mcp_client(
        &b,
        "bob:web1",
        &["--call", "run_command", r#"{"command": "uname -s"}"#],
    );
    assert!(
        r["result"]["text"].as_str().unwrap().contains("Linux"),
        "{r}"
    );
}

/// A gateway session on `b` kept open while `change` is made and the
/// config reloaded: the call made after it is refused with `why` (an MCP
/// error), nothing runs, and its row says `reason`.
fn narrowed_under_a_live_session(b: &Bastion, change: impl FnOnce(), why: &str, reason: &str) {
    let dir = visible_dir();
    let go = dir.path().join("go");
    let go_path = go.display().to_string();
    let args = [
        "--wait-for",
        &go_path,
        "--call",
        "run_command",
        r#"{"command": "uname -s"}"#,
    ];
    let client = mcp_client_command(b, "bob:web1", &args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The session is up (its subsystem row is in), then the change is
    // made and reloaded, then the client calls.
    b.wait_event(|e| e["kind"] == "subsystem" && e["name"] == "mcp");
    change();
    assert!(b.reload().contains("config reloaded"));
    std::fs::write(&go, "").unwrap();
    let out = client.wait_with_output().unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(r["result"]["errorCode"], -32600, "{r}");
    assert!(r["result"]["text"].as_str().unwrap().contains(why), "{r}");
    let row = b.wait_event(|e| e["kind"] == "ai_tool_call");
    assert_eq!(row["decision"], "denied_by_policy", "{row}");
    assert_eq!(row["reason"], reason, "{row}");
    assert_eq!(
        (&row["via"], &row["command"]),
        (&json!("mcp"), &json!("uname -s"))
    );
    assert!(b.audit().iter().all(|e| e["kind"] != "ai_tool_result"));
}

/// `narrowed_under_a_live_session` with a config edit.
fn reload_narrows(change: impl Fn(String) -> String, why: &str, reason: &str) {
    let b = gateway("auto", "");
    let edit = || {
        let config = std::fs::read_to_string(&b.config).unwrap();
        std::fs::write(&b.config, change(config)).unwrap();
    };
    narrowed_under_a_live_session(&b, edit, why, reason);
}

#[test]
fn a_reload_that_turns_ai_off_reaches_a_live_gateway_session() {
    reload_narrows(
        |c| c.replace("ai = \"auto\"", "ai = \"off\""),
        "ai is off now",
        "ai_off",
    );
}

#[test]
fn a_reload_that_takes_the_target_away_reaches_a_live_gateway_session() {
    reload_narrows(
        |c| c.replace("targets = [\"web1\", \"local\"]", "targets = [\"local\"]"),
        "may no longer reach web1",
        "target_not_allowed",
    );
}

/// The key a gateway session logged in with, put in the KRL
/// (`ssh-keygen -k`) and reloaded: its next call is refused, as a new
/// session of that key would be.
#[test]
fn a_key_revoked_under_a_live_gateway_session_runs_no_more_calls() {
    let keys = tempfile::tempdir().unwrap();
    let krl = keys.path().join("revoked.krl");
    // Nothing revoked yet: an empty list of keys.
    std::fs::write(&krl, "").unwrap();
    let b = gateway(
        "auto",
        &format!("[auth]\nrevoked_keys = \"{}\"\n", krl.display()),
    );
    let revoke = || {
        let out = Command::new("ssh-keygen")
            .args(["-q", "-k", "-f"])
            .arg(&krl)
            .arg(b.bob_key.with_extension("pub"))
            .output()
            .unwrap();
        assert!(out.status.success(), "ssh-keygen -k: {}", stderr(&out));
    };
    narrowed_under_a_live_session(
        &b,
        revoke,
        "login is no longer valid",
        "credentials_revoked",
    );
    // A new session of the key is refused at its start, as before.
    let (r, code) = mcp_client(&b, "bob:web1", &[]);
    assert_eq!(code, Some(2), "{r}");
}

/// `[ai] mcp_confirm` defaults to "refuse": a client that declares
/// elicitation and accepts whatever it is asked gets only what the policy
/// runs unasked; nothing is asked of it.
#[test]
fn by_default_the_gateway_takes_no_approval_from_the_client() {
    let dir = visible_dir();
    let made = dir.path().join("made");
    let touch = format!("touch {}", made.display());
    let b = gateway("auto", "");
    let r = approving_client(&b, &touch);
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["text"].as_str().unwrap();
    assert!(text.contains("mcp_confirm = \"refuse\""), "{text}");
    assert_eq!(r["elicitations"], json!([]), "{r}");
    assert!(!made.exists(), "{r}");
    // What the policy runs unasked still runs.
    let r = approving_client(&b, "uname -s");
    assert!(
        r["result"]["text"].as_str().unwrap().contains("Linux"),
        "{r}"
    );
    let rows: Vec<Value> = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "ai_tool_call")
        .collect();
    let decisions: Vec<&Value> = rows.iter().map(|e| &e["decision"]).collect();
    assert_eq!(
        decisions,
        [&json!("denied_by_policy"), &json!("auto")],
        "{rows:#?}"
    );
    assert!(
        rows[0]["reason"].as_str().unwrap().contains("mcp_confirm"),
        "{rows:#?}"
    );
    // In confirm everything needs approval: nothing runs.
    let b = gateway("confirm", "");
    let r = approving_client(&b, "uname -s");
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["text"]
            .as_str()
            .unwrap()
            .contains("bob has ai = confirm"),
        "{r}"
    );
    assert_eq!(r["elicitations"], json!([]), "{r}");
    assert!(b.audit().iter().all(|e| e["kind"] != "ai_tool_result"));
}

#[test]
fn an_approved_command_that_ignores_term_stops_when_its_client_leaves() {
    let b = gateway("confirm", ELICIT);
    // bob in confirm: approved through the client, then the client gives
    // up while it runs.
    let call = json!({"command": "trap '' TERM; sleep 95"}).to_string();
    let approve = [
        "--timeout",
        "6",
        "--elicit",
        "accept",
        "--elicit-content",
        r#"{"run": true}"#,
    ];
    let mut args = approve.to_vec();
    args.extend(["--call", "run_command", &call]);
    let (r, code) = mcp_client(&b, "bob:web1", &args);
    assert_eq!(code, Some(2), "{r}");
    let row = b.wait_event(|e| e["kind"] == "ai_tool_result" && e["via"] == "mcp");
    assert_eq!(row["interrupted"], "the client went away", "{row}");
    wait_until(
        || !running("sleep 95"),
        "an approved command outlived its client",
    );
}

/// Four-eyes through the gateway too: a command the globs name waits,
/// after the client's approval, for a second person's, even in auto
/// where the policy would run it unasked; `walissh approve` gives it and
/// the row names who did.
#[test]
fn four_eyes_holds_through_the_gateway() {
    let b = gateway(
        "auto",
        "[ai]\nmcp_confirm = \"elicitation\"\nfour_eyes = [\"echo FOUR*\"]\n",
    );
    let call = json!({ "command": "echo FOUR-GATE" }).to_string();
    let args = [
        "--elicit",
        "accept",
        "--elicit-content",
        r#"{"run": true}"#,
        "--call",
        "run_command",
        &call,
    ];
    let client = mcp_client_command(&b, "bob:web1", &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let waiting = crate::four_eyes::waiting_one(&b);
    assert_eq!(waiting["command"], "echo FOUR-GATE");
    assert!(
        waiting["question"]
            .as_str()
            .unwrap()
            .contains("MCP gateway"),
        "{waiting}"
    );
    b.cli(&["approve", waiting["id"].as_str().unwrap()]);
    let out = client.wait_with_output().unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(
        r["result"]["text"].as_str().unwrap().contains("FOUR-GATE"),
        "{r}"
    );
    let row = b.wait_event(|e| e["kind"] == "ai_tool_call" && e["via"] == "mcp");
    assert_eq!(row["decision"], "approved");
    assert_eq!(row["approver"], format!("unix:{}", me()).as_str());
}
