//! Context governance (issue 5), asserted on the requests the scripted
//! model server receives: bounded over a long session, tool results never
//! without their calls, the context prefix once per request, the question
//! verbatim, secrets scrubbed, and the environment the target's own.

use serde_json::Value;

use crate::agent::{answer_run, ask, back_at_prompt, bastion_with, bob, content, messages};
use crate::harness::*;
use crate::model::*;

/// What a request may weigh with the default `[llm] context_tokens` of
/// 8192: its messages are cut to about 6900 tokens, counted as 3 bytes
/// each, plus the tool declarations and JSON escaping.
const REQUEST_BOUND: usize = 32 * 1024;

/// Every request's messages keep tool calls and results together: each
/// result answers a call made before it, each call has its result.
fn assert_groups_whole(request: &Value) {
    let msgs = messages(request);
    let mut open: Vec<String> = Vec::new();
    for m in msgs {
        match m["role"].as_str().unwrap() {
            "assistant" => {
                assert!(
                    open.is_empty(),
                    "calls without results: {open:?}\n{request:#}"
                );
                if let Some(calls) = m["tool_calls"].as_array() {
                    open = calls
                        .iter()
                        .map(|c| c["id"].as_str().unwrap().to_string())
                        .collect();
                }
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap();
                let at = open.iter().position(|o| o == id);
                assert!(at.is_some(), "a result without its call: {id}\n{request:#}");
                open.remove(at.unwrap());
            }
            _ => assert!(open.is_empty(), "calls without results: {open:?}"),
        }
    }
}

/// The context prefix is in the last user message, once, and it ends with
/// the question as asked.
fn assert_prefixed_once(request: &Value, question: &str) {
    let text = request.to_string();
    assert_eq!(text.matches("<session-context>").count(), 1, "{request:#}");
    let msgs = messages(request);
    let last_user = msgs.iter().rfind(|m| m["role"] == "user").unwrap();
    let c = content(last_user);
    assert!(c.starts_with("<session-context>"), "{c}");
    assert!(c.ends_with(&format!("\n\nQuestion: {question}")), "{c}");
}

#[test]
fn a_long_session_stays_within_its_bound() {
    const QUESTIONS: usize = 10;
    const CALLS: usize = 9;
    let dir = visible_dir();
    let big = dir.path().join("numbers");
    let numbers: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    std::fs::write(&big, numbers).unwrap();
    let big = big.display().to_string();
    // 10 questions of 10 turns: 9 commands that each print ~110 KB, then
    // the answer. 100 requests, 11 MB of output.
    let mut script = Vec::new();
    for q in 0..QUESTIONS {
        for c in 0..CALLS {
            let from = 1 + (q * CALLS + c) * 1000;
            let command = format!("tail -n +{from} {big} | head -n 20000");
            script.push(Reply::Sse(call(&format!("q{q}c{c}"), &command, "look")));
        }
        script.push(Reply::Sse(answer(&format!("Answer {q}."))));
    }
    let model = Model::start(script);
    let b = bastion_with(
        &model,
        Opts {
            bob_ai: "auto",
            extra_toml: "[ai]\nmax_steps = 20\n".into(),
            ..Opts::default()
        },
    );
    let t = bob(&b);
    let mut at = 0;
    for q in 0..QUESTIONS {
        let from = ask(&t, &format!("? question {q} about the numbers"));
        at = t.expect_from(&format!("Answer {q}."), from.max(at));
        at = back_at_prompt(&b, &t, at);
    }
    let requests = model.wait_requests(QUESTIONS * (CALLS + 1));
    let sizes: Vec<usize> = requests.iter().map(|r| r.to_string().len()).collect();
    eprintln!(
        "request sizes: first {}, largest {}, last {}",
        sizes[0],
        sizes.iter().max().unwrap(),
        sizes.last().unwrap()
    );
    for (i, r) in requests.iter().enumerate() {
        assert!(
            sizes[i] <= REQUEST_BOUND,
            "request {i} is {} bytes: the bound is {REQUEST_BOUND}",
            sizes[i]
        );
        assert_groups_whole(r);
        assert_prefixed_once(
            r,
            &format!("question {} about the numbers", i / (CALLS + 1)),
        );
    }
    // The history carries earlier questions bare: no prefix piles up.
    let last_first_turn = &requests[(QUESTIONS - 1) * (CALLS + 1)];
    let users: Vec<&str> = messages(last_first_turn)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(content)
        .collect();
    assert!(users.len() >= 2, "no history: {users:?}");
    assert_eq!(users[users.len() - 2], "question 8 about the numbers");
    assert!(
        users.len() <= 5,
        "more than 4 past questions kept: {users:?}"
    );
}

/// Secrets of each kind, planted on the screen, in command output and in
/// the question; none may reach the model.
const SECRETS: &[(&str, &str)] = &[
    ("aws", "AKIAIOSFODNN7EXAMPLE"),
    ("private key", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"),
    ("github", "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"),
    ("gitlab", "glpat-Ab3dEf6hIj9kLm2nOp5q"),
    ("slack", "xoxb-1234567890-abcdefghijklmnop"),
    ("openai", "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA"),
    ("gcp", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    ("jwt", "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"),
    ("url password", "S3cretPassw0rdInUrl"),
    ("password", "hunter2-correct-horse"),
    ("auth header", "abc123def456ghi789jkl"),
    ("env", "tok9f8e7d6c5b4a3"),
    ("azure", "q83jd9K2lmZx7PqRsT0uVwXyZab12cdEfGh34IjKlMn=="),
];

fn secrets_file() -> String {
    let s = |kind: &str| SECRETS.iter().find(|(k, _)| *k == kind).unwrap().1;
    [
        format!("aws_access_key_id = {}", s("aws")),
        "-----BEGIN OPENSSH PRIVATE KEY-----".to_string(),
        s("private key").to_string(),
        "-----END OPENSSH PRIVATE KEY-----".to_string(),
        format!("GITHUB_TOKEN={}", s("github")),
        format!("remote: https://oauth2:{}@gitlab.example.com/x.git", s("gitlab")),
        format!("slack {}", s("slack")),
        format!("OPENAI_API_KEY={}", s("openai")),
        format!("maps key {}", s("gcp")),
        format!("token eyJhbGciOiJIUzI1NiJ9.{}.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", s("jwt")),
        format!("url https://deploy:{}@git.example.com/repo.git", s("url password")),
        format!("db_password: {}", s("password")),
        format!("DefaultEndpointsProtocol=https;AccountName=x;AccountKey={};EndpointSuffix=core.windows.net", s("azure")),
        format!("export API_TOKEN={}", s("env")),
    ]
    .join("\n")
        + "\n"
}

#[test]
fn secrets_never_reach_the_model() {
    let dir = visible_dir();
    let file = dir.path().join("app.env");
    std::fs::write(&file, secrets_file()).unwrap();
    let file = file.display().to_string();
    let question = format!(
        "why does curl -H 'Authorization: Bearer {}' fail",
        SECRETS.iter().find(|(k, _)| *k == "auth header").unwrap().1
    );
    let model = Model::start(vec![
        Reply::Sse(call("c1", &format!("cat {file}"), "read the config")),
        Reply::Sse(answer("Rotate those keys.")),
    ]);
    let b = bastion_with(&model, Opts::default());
    let t = bob(&b);
    // On the screen and in a command's output before the question...
    t.send(&format!("cat {file}; echo SHOWN-$((1+1))\r"));
    let at = t.expect("SHOWN-2");
    b.wait_event(|e| {
        e["kind"] == "command" && e["command"].as_str().unwrap_or("").starts_with("cat ")
    });
    // ...in the question, and in the agent's command output.
    let at = ask(&t, &format!("? {question}")).max(at);
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("Rotate those keys.", at);
    back_at_prompt(&b, &t, at);
    let requests = model.wait_requests(2);
    for r in &requests {
        let text = r.to_string();
        for (kind, secret) in SECRETS {
            assert!(
                !text.contains(secret),
                "the {kind} secret reached the model:\n{r:#}"
            );
        }
        assert!(text.contains("[REDACTED:"), "{r:#}");
    }
    // The first request's context holds the secrets the screen showed
    // before the question, each in its place (not only the question's).
    let c = content(
        messages(&requests[0])
            .iter()
            .rfind(|m| m["role"] == "user")
            .unwrap(),
    );
    let context = &c[..c.find("</session-context>").expect("no context")];
    assert!(context.matches("[REDACTED:").count() >= 2, "{context}");
    // The question kept its words, the secret its place.
    let first = &requests[0];
    let last_user = content(
        messages(first)
            .iter()
            .rfind(|m| m["role"] == "user")
            .unwrap(),
    );
    // (The placeholder's number is the session's, whatever it is.)
    let question = last_user
        .rsplit("\n\nQuestion: ")
        .next()
        .unwrap_or_default();
    let numbered = question
        .strip_prefix("why does curl -H 'Authorization: Bearer [REDACTED:auth-header#")
        .and_then(|rest| rest.strip_suffix("]' fail"));
    assert!(
        numbered.is_some_and(|n| n.parse::<u32>().is_ok()),
        "{last_user}"
    );
    let redacted = b.wait_kind("ai_redacted");
    assert!(
        redacted["total"].as_u64().unwrap() >= SECRETS.len() as u64,
        "{redacted}"
    );
}

#[test]
fn long_commands_and_many_errors_keep_the_prefix_within_its_share() {
    let model = Model::start(vec![Reply::Sse(answer("Lots of errors."))]);
    let b = bastion_with(&model, Opts::default());
    let t = bob(&b);
    // Twelve long command lines, each printing 30 error lines.
    for n in 0..12 {
        let filler = "x".repeat(1500);
        t.send(&format!(
            "echo {filler} >/dev/null; for i in $(seq 30); do echo \"error: disk $i failed\"; done; echo DONE-{n}-$((1+1))\r"
        ));
        t.expect(&format!("DONE-{n}-2"));
    }
    b.wait_count("command", 12);
    let at = ask(&t, "? what is failing");
    let at = t.expect_from("Lots of errors.", at);
    back_at_prompt(&b, &t, at);
    let r = &model.wait_requests(1)[0];
    let size = r.to_string().len();
    assert!(size <= REQUEST_BOUND, "the request is {size} bytes");
    assert_prefixed_once(r, "what is failing");
    let c = content(messages(r).iter().rfind(|m| m["role"] == "user").unwrap());
    // The context prefix keeps to a third of the request budget (the
    // default 8192 tokens, at 2.5 bytes a token), whole as it would be
    // about 7 KiB.
    let prefix = &c[..c.find("</session-context>").expect("no context")];
    assert!(
        prefix.len() <= 8192 * 5 / 2 / 3,
        "the prefix is {} bytes",
        prefix.len()
    );
    // The context kept the newest of it.
    assert!(c.contains("error: disk 30 failed"), "{c}");
    assert!(c.contains("[exit 0]"), "{c}");
}

#[test]
fn the_environment_is_the_targets() {
    let model = Model::start(vec![Reply::Sse(answer("Noted."))]);
    let b = bastion_with(&model, Opts::default());
    let t = bob(&b);
    t.send("cd /tmp\r");
    b.wait_event(|e| e["kind"] == "command" && e["command"] == "cd /tmp");
    let at = ask(&t, "? where am I");
    let at = t.expect_from("Noted.", at);
    back_at_prompt(&b, &t, at);
    let r = &model.wait_requests(1)[0];
    let c = content(messages(r).iter().rfind(|m| m["role"] == "user").unwrap());
    // Facts from the target's probe: its login user, shell and kernel.
    assert!(c.contains(&format!("\nuser: {}\n", me())), "{c}");
    assert!(c.contains("\nkernel: Linux "), "{c}");
    assert!(c.contains("\nshell: /"), "{c}");
    assert!(c.contains("\ncwd: /tmp\n"), "{c}");
    assert!(c.contains("\ntarget: web1\n"), "{c}");
}

#[test]
fn a_local_targets_environment_is_its_accounts() {
    let Some(user) = zsh_user() else {
        eprintln!("skipped: needs root and zsh (CI installs zsh and runs as root)");
        return;
    };
    let model = Model::start(vec![Reply::Sse(answer("Noted."))]);
    let b = bastion_with(&model, Opts::default());
    // dave reaches the zsh target: a local shell run as another account
    // than walissh's own.
    let t = Terminal::spawn(&b.ssh_bob("dave:zsh"), 24, 80);
    t.send("echo IN-$((1+1))\r");
    let at = t.expect("IN-2");
    // The question is typed at zsh's prompt, not ahead of it.
    t.expect_from("% ", at);
    let at = ask(&t, "? who am I");
    t.expect_from("Noted.", at);
    let r = &model.wait_requests(1)[0];
    let c = content(messages(r).iter().rfind(|m| m["role"] == "user").unwrap());
    assert!(c.contains(&format!("\nuser: {user}\n")), "{c}");
    assert!(c.contains("\nshell: /usr/bin/zsh\n"), "{c}");
    assert!(!c.contains("\nuser: root\n"), "{c}");
}

/// A bastion that keeps conversations (`[context] restore`).
fn restoring(model: &Model) -> Bastion {
    bastion_with(
        model,
        Opts {
            extra_toml: "[context]\nrestore = true\n".into(),
            ..Opts::default()
        },
    )
}

/// The user logs out, and the session is over.
fn leave(b: &Bastion, t: &mut Terminal) {
    t.send("exit\r");
    t.wait();
    b.wait_kind("session_end");
}

#[test]
fn a_conversation_comes_back_when_restore_is_on() {
    let model = Model::start(vec![
        Reply::Sse(answer("First answer.")),
        Reply::Sse(answer("Second answer.")),
    ]);
    let b = restoring(&model);
    let mut t = bob(&b);
    let at = ask(&t, "? the first question");
    let at = t.expect_from("First answer.", at);
    back_at_prompt(&b, &t, at);
    leave(&b, &mut t);
    // A new session of the same user on the same target.
    let t = bob(&b);
    let at = ask(&t, "? the second question");
    t.expect_from("Second answer.", at);
    let second = &model.wait_requests(2)[1];
    let msgs = messages(second);
    let texts: Vec<(&str, &str)> = msgs
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), content(m)))
        .collect();
    assert_eq!(texts[1], ("user", "the first question"), "{texts:?}");
    assert_eq!(texts[2], ("assistant", "First answer."), "{texts:?}");
    assert_prefixed_once(second, "the second question");
}

/// Secrets of the classes an outside corpus got past the first redactor:
/// a password flag, a label in Chinese, a key inside `grep --color`'s
/// codes, docker's base64 `auth`. None reaches the model, in the recent
/// commands' context, in the question or in the agent's command output;
/// the same password keeps one number in every place; and a conversation
/// restored in a new session brings none of them back.
#[test]
fn secrets_of_every_class_never_reach_the_model_and_keep_their_number() {
    const FLAG_PW: &str = "Fl4g-Pass_91x";
    const LABEL_PW: &str = "Zh0ngWen-Mima7";
    const COLOURED: &str = "AKIAQ7TESTKEYZ7XAMP";
    const DOCKER_TOKEN: &str = "Dock3r-T0ken-x9Yq";
    let docker_auth = base64(&format!("deployer:{DOCKER_TOKEN}"));
    let dir = visible_dir();
    let file = dir.path().join("ops.txt");
    std::fs::write(
        &file,
        format!(
            "  512  mysql -u root -p'{FLAG_PW}' -h db.internal\n\
             数据库密码: {LABEL_PW}\n\
             /etc/app/env:AWS_ACCESS_KEY_ID=\x1b[01;31m\x1b[K{COLOURED}\x1b[m\x1b[K\n\
             {{\"auths\": {{\"https://index.docker.io/v1/\": {{\"auth\": \"{docker_auth}\"}}}}}}\n"
        ),
    )
    .unwrap();
    let file = file.display().to_string();
    let model = Model::start(vec![
        Reply::Sse(call("c1", &format!("cat {file}"), "read it")),
        Reply::Sse(answer("They match.")),
        Reply::Sse(answer("Still rotated.")),
    ]);
    let b = restoring(&model);
    let mut t = bob(&b);
    t.send(&format!("cat {file}; echo SHOWN-$((2+2))\r"));
    let at = t.expect("SHOWN-4");
    b.wait_event(|e| {
        e["kind"] == "command" && e["command"].as_str().unwrap_or("").starts_with("cat ")
    });
    let at = ask(&t, &format!("? does mysql -p'{FLAG_PW}' match the file")).max(at);
    let at = answer_run(&t, at, "y");
    let at = t.expect_from("They match.", at);
    back_at_prompt(&b, &t, at);
    leave(&b, &mut t);
    let t = bob(&b);
    let at = ask(&t, "? and now");
    t.expect_from("Still rotated.", at);
    let requests = model.wait_requests(3);
    for r in &requests {
        let text = r.to_string();
        for secret in [
            FLAG_PW,
            LABEL_PW,
            COLOURED,
            DOCKER_TOKEN,
            docker_auth.as_str(),
        ] {
            assert!(!text.contains(secret), "{secret} reached the model:\n{r:#}");
        }
    }
    // The flag's password: one number in the context, the question and
    // the command's output alike.
    let second = requests[1].to_string();
    let numbers: Vec<&str> = second
        .match_indices("-p'[REDACTED:")
        .map(|(i, _)| {
            let rest = &second[i..];
            &rest[rest.find('#').unwrap()..rest.find(']').unwrap()]
        })
        .collect();
    assert!(numbers.len() >= 3, "{second}");
    assert!(numbers.iter().all(|n| *n == numbers[0]), "{numbers:?}");
    // The restored conversation came back, scrubbed.
    let third = requests[2].to_string();
    assert!(third.contains("They match."), "{third}");
    assert!(third.contains("[REDACTED:"), "{third}");
}

fn base64(s: &str) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in s.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                T[((n >> (18 - 6 * i)) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

/// Issue 33, class 1: a command that reads a secret store prints a bare
/// value no detector can tell from text. The command is the context: its
/// output reaches the model as placeholders, one per line, whether the
/// user ran it before the question or the agent ran it; the user's screen
/// shows it as it is.
#[test]
fn the_output_of_a_command_that_reads_a_secret_store_never_reaches_the_model() {
    let dir = visible_dir();
    let secrets = dir.path().join("run").join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    // Plain words and a digit: no key, no known shape.
    let value = format!("lantern {} harbor", 40 + 1);
    std::fs::write(secrets.join("db_password"), format!("{value}\n")).unwrap();
    let file = secrets.join("db_password").display().to_string();
    let model = Model::start(vec![
        Reply::Sse(call("c1", &format!("cat {file}"), "read the password")),
        Reply::Sse(answer("It is set.")),
    ]);
    let b = bastion_with(&model, Opts::default());
    let t = bob(&b);
    t.send(&format!("cat {file}\r"));
    let at = t.expect(&value);
    b.wait_event(|e| {
        e["kind"] == "command" && e["command"].as_str().unwrap_or("").starts_with("cat ")
    });
    let at = ask(&t, "? is the database password set").max(at);
    let at = answer_run(&t, at, "y");
    // The user sees what the command printed.
    let at = t.expect_from(&value, at);
    let at = t.expect_from("It is set.", at);
    back_at_prompt(&b, &t, at);
    let requests = model.wait_requests(2);
    for r in &requests {
        let text = r.to_string();
        assert!(
            !text.contains("lantern"),
            "the secret reached the model:\n{r:#}"
        );
    }
    let tool = requests[1].to_string();
    assert!(
        tool.contains("[REDACTED:secret-output#"),
        "{:#}",
        requests[1]
    );
}
