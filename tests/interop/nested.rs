//! Nested shells: the audit and the agent follow the user into `sudo -i`,
//! `bash` and `exec bash`, and nothing is typed into programs that are
//! not shells (issue 16). Run as root against the local sshd, so `sudo -i`
//! needs no password.

use serde_json::Value;

use crate::agent::{ask, bob, content, last_turn, messages};
use crate::harness::*;
use crate::model::*;
use crate::terminal::prompt_end;

/// The `command` row of `command`, once it is audited.
fn row(b: &Bastion, command: &str) -> Value {
    b.wait_event(|e| e["kind"] == "command" && e["command"] == command)
}

/// Types `line` and waits for the next prompt after what it prints;
/// returns the offset past that prompt. What it prints is looked for only
/// after the line's echo has ended (`exit` prints `exit`).
fn run(t: &Terminal, line: &str, prints: &str, from: usize) -> usize {
    run_to(t, line, prints, prompt_end(), from)
}

/// [`run`], for a shell whose prompt ends with `prompt`.
fn run_to(t: &Terminal, line: &str, prints: &str, prompt: &str, from: usize) -> usize {
    t.send(&format!("{line}\r"));
    let at = t.screen.wait_for_from(&format!("{line}\r\n"), from);
    let at = t.expect_from(prints, at);
    t.expect_from(prompt, at)
}

/// Starts a nested shell with `starter` and waits for its prompt. Keys
/// typed after it wait while walissh installs its integration.
fn enter(t: &Terminal, starter: &str, from: usize) -> usize {
    t.send(&format!("{starter}\r"));
    // The line ends (the shell may draw it again first), then the new
    // shell's prompt comes.
    let at = t.expect_from(starter, from);
    let at = t.screen.wait_for_from("\n", at);
    t.expect_from(prompt_end(), at)
}

#[test]
fn sudo_i_is_audited_inside_and_the_agent_works_there() {
    if !is_root()
        || std::process::Command::new("sudo")
            .arg("-V")
            .output()
            .is_err()
    {
        eprintln!("skipped: needs root and sudo (CI installs sudo and runs as root)");
        return;
    }
    let model = Model::start(vec![
        Reply::Sse(call("call_1", "id -u", "which account")),
        Reply::Sse(answer("You are root here.")),
        Reply::Sse(answer("Back in the login shell.")),
    ]);
    let b = crate::agent::auto_bastion(&model);
    let t = bob(&b);
    let at = enter(&t, "sudo -i", t.screen.end());
    run(&t, "id -u; echo ID-$((1+2))", "ID-3", at);
    let id = row(&b, "id -u; echo ID-$((1+2))");
    assert_eq!(id["depth"], 1, "{id}");
    assert_eq!(id["shell_user"], "root", "{id}");
    assert_eq!(id["exit_code"], 0, "{id}");
    assert!(id.get("host").is_none(), "the same host: {id}");
    assert_eq!(id["cwd"], "/root", "{id}");

    // A question at the nested prompt: the agent's command runs there, as
    // root, and is asked even in `auto` (a root shell is judged as root).
    let asked = ask(&t, "? who am i here");
    let at_run = t.expect_from("Run as root@", asked);
    t.send("y");
    let done = t.expect_from("You are root here.", at_run);
    let at = t.expect_from(prompt_end(), done);
    let reqs = model.wait_requests(2);
    let first = content(&messages(&reqs[0])[1]).to_string();
    assert!(first.contains("you are root on"), "{first}");
    assert!(first.contains("via `sudo -i`"), "{first}");
    let (_, results) = last_turn(&reqs[1]);
    assert!(content(results[0]).contains('0'), "{}", results[0]);
    // Its rows say where it ran: as root, one shell deep.
    for kind in ["ai_tool_call", "ai_tool_result"] {
        let ev = b.wait_event(|e| e["kind"] == kind && e["command"] == "id -u");
        assert_eq!(ev["depth"], 1, "{ev}");
        assert_eq!(ev["shell_user"], "root", "{ev}");
    }

    // Nothing of walissh's in the nested shell's history.
    let at = run(&t, "history 6; echo HIST-$((2+2))", "HIST-4", at);
    let shown = t.screen.since(asked);
    assert!(
        !shown.contains("133;P") && !shown.contains("head -n1") && !shown.contains("__ws"),
        "{shown}"
    );

    // `exit`: `sudo -i` gets its row, with its exit status, at depth 0.
    run(&t, "exit", "logout", at);
    let sudo = row(&b, "sudo -i");
    assert_eq!(sudo["depth"], 0, "{sudo}");
    assert_eq!(sudo["exit_code"], 0, "{sudo}");
    let back = ask(&t, "? and now");
    t.expect_from("Back in the login shell.", back);
    let reqs = model.wait_requests(3);
    let third = content(&messages(&reqs[2])[1]).to_string();
    assert!(!third.contains("nested shell"), "{third}");
    assert!(!t.screen.text().contains(";w="), "walissh's marks leaked");
}

#[test]
fn bash_two_levels_deep_and_exec_bash() {
    let b = Bastion::start();
    let t = bob(&b);
    let at = enter(&t, "bash", t.screen.end());
    let at = enter(&t, "bash", at);
    let at = run(&t, "echo TWO-$((1+1))", "TWO-2", at);
    assert_eq!(row(&b, "echo TWO-$((1+1))")["depth"], 2);
    // `exec bash` replaces the innermost shell: the same depth.
    let at = enter(&t, "exec bash", at);
    let at = run(&t, "echo EXEC-$((2+1))", "EXEC-3", at);
    assert_eq!(row(&b, "echo EXEC-$((2+1))")["depth"], 2);
    let at = run(&t, "exit", "exit", at);
    let at = run(&t, "echo ONE-$((0+1))", "ONE-1", at);
    assert_eq!(row(&b, "echo ONE-$((0+1))")["depth"], 1);
    let at = run(&t, "exit", "exit", at);
    run(&t, "echo ZERO-$((0+0))", "ZERO-0", at);
    assert_eq!(row(&b, "echo ZERO-$((0+0))")["depth"], 0);
    // Each `bash` has its row, with the depth it was typed at.
    let starters: Vec<Value> = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "command" && e["command"] == "bash")
        .map(|e| e["depth"].clone())
        .collect();
    assert_eq!(starters, vec![Value::from(1), Value::from(0)]);
    assert!(!t.screen.text().contains(";w="), "walissh's marks leaked");
}

#[test]
fn prompts_of_programs_get_nothing_typed() {
    let (model, b, t) = crate::agent::bob_with_model(vec![]);
    // A `read` prompt that looks like mysql's: `?` reaches it as input.
    let at = t.screen.end();
    // The prompt is built so the command line's echo does not show it:
    // keys typed before `read` runs would race bash's line editor.
    t.send("read -p \"$(printf 'my%s> ' sql)\" x; echo \"GOT-$x\"\r");
    let at = t.expect_from("mysql> ", at);
    t.send("? hello\r");
    let at = t.expect_from("GOT-? hello", at);
    t.expect_from(prompt_end(), at);
    // python3's prompt: nothing is typed into it either.
    let at = t.screen.end();
    t.send("python3 -q\r");
    let at = t.expect_from(">>> ", at);
    t.send("print('PY-' + str(6*7))\r");
    let at = t.expect_from("PY-42", at);
    t.send("exit()\r");
    t.expect_from(prompt_end(), at);
    let text = t.screen.plain();
    assert!(
        !text.contains("133;P") && !text.contains("BASH_VERSION"),
        "{text}"
    );
    assert_eq!(model.count(), 0, "no question reached the model");
    let _ = b;
}

#[test]
fn the_screen_is_what_the_shell_alone_shows() {
    if !is_root()
        || std::process::Command::new("sudo")
            .arg("-V")
            .output()
            .is_err()
    {
        eprintln!("skipped: needs root and sudo");
        return;
    }
    let b = Bastion::start();
    let steps = |t: &Terminal| -> String {
        t.send("echo READY-$((1+1))\r");
        let from = t.expect("READY-2");
        let at = t.expect_from(prompt_end(), from);
        let at = enter(t, "sudo -i", at);
        let at = run(t, "echo IN-$((3+4))", "IN-7", at);
        run(t, "exit", "logout", at);
        // As a terminal draws it: walissh's Enter redraws the line in
        // place, which shows the same.
        let nz = |n| std::num::NonZeroU16::new(n).unwrap();
        let mut screen = vt100::Parser::new(nz(24), nz(80), 0);
        screen.process(t.screen.text().as_bytes());
        let text = screen.screen().contents();
        text[text.find("READY-2").unwrap()..].to_string()
    };
    let direct = steps(&Terminal::spawn(&b.ssh_direct(), 24, 80));
    let via = steps(&Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80));
    assert_eq!(via, direct);
}

#[test]
fn ssh_to_another_sshd_from_the_target_is_followed() {
    if !is_root() {
        eprintln!("skipped: needs root (the second sshd takes root's key)");
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("id_ed25519");
    let other = Sshd::start(&keygen(&key));
    let b = Bastion::start();
    let t = bob(&b);
    let config = keys.path().join("config");
    std::fs::write(
        &config,
        format!(
            "Host other\n HostName 127.0.0.1\n Port {}\n User root\n IdentityFile {}\n \
             StrictHostKeyChecking no\n UserKnownHostsFile /dev/null\n LogLevel ERROR\n",
            other.port,
            key.display()
        ),
    )
    .unwrap();
    let login = format!("ssh -F {} other", config.display());
    let at = enter(&t, &login, t.screen.end());
    let at = run(&t, "echo SSH-$((5+5))", "SSH-10", at);
    let inside = row(&b, "echo SSH-$((5+5))");
    assert_eq!(inside["depth"], 1, "{inside}");
    assert_eq!(inside["shell_user"], "root", "{inside}");
    run(&t, "exit", "logout", at);
    let ssh = row(&b, &login);
    assert_eq!(ssh["depth"], 0, "{ssh}");
    assert_eq!(ssh["exit_code"], 0, "{ssh}");
}

#[test]
fn from_zsh_a_password_prompt_gets_nothing_and_zsh_and_bash_are_followed() {
    let Some(zsh_user) = zsh_user() else {
        eprintln!("skipped: needs root and zsh (CI installs zsh and runs as root)");
        return;
    };
    let b = Bastion::start();
    let t = Terminal::spawn(&b.ssh_pw("carol:zsh", CAROL_PW), 24, 80);
    // zsh's prompt here is `host% ` (its mark for a line without an end
    // is a `%` too).
    let host = String::from_utf8(
        std::process::Command::new("uname")
            .arg("-n")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let prompt = format!("{}% ", host.trim());
    t.send("echo READY-$((1+1))\r");
    let at = t.expect("READY-2");
    let at = t.expect_from(&prompt, at);
    // `su -` asks for root's password: nothing is typed into it.
    t.send("su -\r");
    let asked = t.expect_from("Password:", at);
    t.send("\x03");
    let at = t.expect_from(&prompt, asked);
    // A nested zsh, then a bash inside it.
    t.send("zsh\r");
    let at = t.expect_from("zsh", at);
    let at = t.screen.wait_for_from("\n", at);
    let at = t.expect_from(&prompt, at);
    t.send("echo ZSH-$((2+2))\r");
    let at = t.expect_from("ZSH-4", at);
    let at = t.expect_from(&prompt, at);
    let z = row(&b, "echo ZSH-$((2+2))");
    assert_eq!(z["depth"], 1, "{z}");
    assert_eq!(z["shell_user"], zsh_user, "{z}");
    // Nothing of walissh's in the nested zsh's history.
    t.send("fc -l -5; echo FC-$((1+1))\r");
    let listed = t.expect_from("FC-2", at);
    let history = t.screen.since(at)[..listed - at].to_string();
    assert!(
        !history.contains("133;P") && !history.contains("head -n1"),
        "{history}"
    );
    let at = t.expect_from(&prompt, listed);
    t.send("bash\r");
    let at = t.expect_from("bash", at);
    let at = t.screen.wait_for_from("\n", at);
    let at = t.expect_from("$ ", at);
    // The account's bash keeps its history with `ignoredups`: a line the
    // same as the last one saved gets no entry, and so no command line in
    // its mark. This one is new every run.
    let line = format!("echo BASH-$((3+3)) {}", std::process::id());
    t.send(&format!("{line}\r"));
    t.expect_from("BASH-6", at);
    let inner = row(&b, &line);
    assert_eq!(inner["depth"], 2, "{inner}");
    let text = t.screen.plain();
    assert!(
        !text.contains("133;P") && !text.contains("head -n1"),
        "{text}"
    );
}

#[test]
fn a_dash_started_from_the_prompt_is_read_off_the_screen() {
    let b = Bastion::start();
    let t = bob(&b);
    let at = t.screen.end();
    t.send("dash\r");
    let at = t.expect_from("dash", at);
    let at = t.screen.wait_for_from("\n", at);
    let at = t.expect_from(prompt_end(), at);
    t.send("echo DASH-$((2+2))\r");
    let at = t.expect_from("DASH-4", at);
    let at = t.expect_from(prompt_end(), at);
    let inside = row(&b, "echo DASH-$((2+2))");
    assert_eq!(inside["detected"], "screen", "{inside}");
    assert_eq!(inside["depth"], 1, "{inside}");
    // dash prints nothing as it exits: the login shell's prompt follows.
    t.send("exit\r");
    let at = t.screen.wait_for_from("exit\r\n", at);
    t.expect_from(prompt_end(), at);
    let dash = row(&b, "dash");
    assert_eq!(dash["depth"], 0, "{dash}");
    assert_eq!(dash["exit_code"], 0, "{dash}");
    let text = t.screen.plain();
    assert!(
        !text.contains("133;P") && !text.contains("printf '"),
        "{text}"
    );
}

/// An rc file that asks a question as the nested shell starts (`read -p
/// "Ticket number > "`, as a review's `.bashrc` did in `sudo su - app`)
/// gets the user's answer, and nothing the user typed runs as a command.
/// Here the question comes in the same read as the command's start, so
/// the old rule would not have probed it either: the rule itself (no
/// probe at `... > `) is pinned by the terminal model's unit test
/// `a_question_from_an_rc_file_gets_no_probe`. (That shell is then
/// followed only if its prompt comes in output of its own, after the keys
/// typed: here the answer's echo and the prompt come together, and
/// walissh leaves it unintegrated.)
#[test]
fn a_question_in_an_rc_file_gets_the_users_answer_not_the_probe() {
    let b = Bastion::start();
    let t = bob(&b);
    let dir = visible_dir();
    let rc = dir.path().join("ticketrc");
    std::fs::write(
        &rc,
        "read -r -p 'Ticket number > ' t; echo \"TICKET=[$t]\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&rc, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let starter = format!("bash --rcfile {}", rc.display());
    t.send(&format!("{starter}\r"));
    let at = t.expect(&starter);
    let at = t.expect_from("Ticket number > ", at);
    t.send("T-123\r");
    let at = t.expect_from("TICKET=[T-123]", at);
    let at = t.expect_from(prompt_end(), at);
    // The nested shell works; the user's answer ran as no command.
    run(&t, "echo IN-$((2+5))", "IN-7", at);
    assert!(
        !t.screen.text().contains("command not found"),
        "{}",
        t.screen.text()
    );
}

/// A nested shell whose login asks a question before its prompt (issue
/// 32): walissh types nothing into it, gives up following that shell
/// once the user answered, and says so once. Its commands are then read
/// off the screen, and a question typed at its prompt is refused with one
/// line and never reaches it.
#[test]
fn a_shell_that_asks_before_its_prompt_is_given_up_and_said_so_once() {
    let Some(user) = ticket_user() else {
        eprintln!("skipped: needs root (CI runs as root)");
        return;
    };
    let b = Bastion::start();
    let t = bob(&b);
    let at = t.screen.end();
    t.send(&format!("su - {user}\r"));
    let at = t.expect_from("Ticket number > ", at);
    t.send("T-9\r");
    // The notice comes on a line of its own, before or after the rc
    // file's next line, as the output's reads fall.
    let said = t.expect_from("asked a question before its prompt", at);
    let at = t.expect_from("TICKET=[T-9]", at).max(said);
    let at = t.expect_from("$ ", at);
    let at = run_to(&t, "echo IN-$((2+5))", "IN-7", "$ ", at);
    let inside = row(&b, "echo IN-$((2+5))");
    assert_eq!(inside["detected"], "screen", "{inside}");
    assert_eq!(inside["depth"], 1, "{inside}");
    let at = refused_question(&t, at, "$ ");
    run(&t, "exit", "logout", at);
    row(&b, &format!("su - {user}"));
    let text = t.screen.plain();
    assert_eq!(
        text.matches("asked a question before its prompt").count(),
        1,
        "{text}"
    );
    assert!(
        !text.contains("133;P") && !text.contains("printf '"),
        "{text}"
    );
    assert!(b.audit().iter().all(|e| e["kind"] != "ai_prompt"));
}

/// Types a question at a prompt walissh does not own: it is refused with
/// one line, and the shell runs nothing (no glob, no "not found"); the
/// line stays until Ctrl-C clears it. Returns the offset past the prompt
/// after that.
fn refused_question(t: &Terminal, from: usize, prompt: &str) -> usize {
    const REFUSED: &str = "questions are asked only at the prompt";
    t.send("? what is ???\r");
    let at = t.expect_from(REFUSED, from);
    // Enter again: the line the shell still holds is refused again.
    t.send("\r");
    let at = t.expect_from(REFUSED, at + REFUSED.len());
    t.send("\x03");
    let at = t.expect_from(prompt, at);
    let after = t.screen.since(from);
    assert!(!after.contains("not found"), "{after}");
    at
}

/// Shells no command line says it starts (Python's `pty.spawn`,
/// `script`) are read off the screen, and questions at their prompts are
/// refused with one line, never passed to them (issue 32).
#[test]
fn shells_under_pty_spawn_and_script_are_read_off_the_screen() {
    let b = Bastion::start();
    let t = bob(&b);
    let starters = [
        r#"python3 -c 'import pty; pty.spawn("/bin/dash")'"#,
        "script -q -c dash /dev/null",
        r#"python3 -c 'import pty; pty.spawn("/bin/bash")'"#,
    ];
    let mut at = t.screen.end();
    for (i, starter) in starters.iter().enumerate() {
        t.send(&format!("{starter}\r"));
        at = t.expect_from(starter, at);
        at = t.screen.wait_for_from("\n", at);
        at = t.expect_from(prompt_end(), at);
        let line = format!("echo SPAWNED-{i}-$((2+2))");
        at = run(&t, &line, &format!("SPAWNED-{i}-4"), at);
        let inside = row(&b, &line);
        assert_eq!(inside["detected"], "screen", "{inside}");
        assert_eq!(inside["depth"], 1, "{inside}");
        at = refused_question(&t, at, prompt_end());
        if starter.contains("bash") {
            // `? ` put before a command with Home: the line the shell
            // would run is a question, and the command does not run.
            t.send("echo RAN-$((40+2))\x01? \r");
            at = t.expect_from("questions are asked only at the prompt", at);
            t.send("\x03");
            at = t.expect_from(prompt_end(), at);
            assert!(!t.screen.since(at).contains("RAN-42"));
            assert!(!t.screen.plain().contains("RAN-42"), "{}", t.screen.plain());
        }
        t.send("exit\r");
        at = t.screen.wait_for_from("exit\r\n", at);
        at = t.expect_from(prompt_end(), at);
        row(&b, starter);
    }
    // No question reached the agent.
    let audit = b.audit();
    assert!(audit.iter().all(|e| e["kind"] != "ai_prompt"), "{audit:#?}");
}

/// A question typed at a program's own prompt is the program's (the
/// contract): MariaDB's `[(none)]> `, run from an integrated shell, gets
/// `? select` as typed, and nothing is refused or audited as a command.
#[test]
fn a_question_at_a_programs_prompt_reaches_the_program() {
    let b = Bastion::start();
    let t = bob(&b);
    let at = t.screen.end();
    // The prompt is put together, so the command's echo does not show it.
    let program = r#"python3 -c "print('GOT[' + input('MariaDB ' + '[(none)]> ') + ']')""#;
    t.send(&format!("{program}\r"));
    let at = t.expect_from("MariaDB [(none)]> ", at);
    t.send("? select\r");
    let at = t.expect_from("GOT[? select]", at);
    t.expect_from(prompt_end(), at);
    row(&b, program);
    let text = t.screen.plain();
    assert!(!text.contains("questions are asked only"), "{text}");
    assert!(
        b.audit()
            .iter()
            .all(|e| e["command"] != "? select" && e["kind"] != "ai_prompt"),
        "{:#?}",
        b.audit()
    );
}
