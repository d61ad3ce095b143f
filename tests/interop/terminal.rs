//! The terminal model: shell integration the user never sees, and the
//! commands it reports (issue 3).

use serde_json::Value;

use crate::harness::*;

/// The prompt's last characters for the account the tests log in as.
pub(crate) fn prompt_end() -> &'static str {
    if is_root() { "# " } else { "$ " }
}

/// What a login shows up to its first prompt, with the one line that
/// differs between two logins (the time of the last one) blanked.
fn login_screen(t: &Terminal) -> String {
    let end = t.expect(prompt_end());
    let text = t.screen.text()[..end].to_string();
    text.lines()
        .map(|l| {
            if l.starts_with("Last login:") {
                "Last login: <time>"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_login_screen_is_what_a_direct_login_shows() {
    let b = Bastion::start();
    let direct = Terminal::spawn(&b.ssh_direct(), 24, 80);
    let expected = login_screen(&direct);
    let via = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    assert_eq!(login_screen(&via), expected);
    // No trace of the bootstrap in the shell's history either.
    via.send("history\r");
    via.send("echo DONE-$((2*3))\r");
    let end = via.expect("DONE-6");
    let text = via.screen.text()[..end].to_string();
    assert!(!text.contains("eval") && !text.contains("__ws"), "{text}");
    // The integration is live (not the fallback after a timeout): the
    // command was reported by its marks.
    let c = b.wait_event(|e| e["kind"] == "command" && e["command"] == "echo DONE-$((2*3))");
    assert_eq!(c["exit_code"], 0);
}

/// The `command` events of the audit, oldest first.
fn commands(b: &Bastion, n: usize) -> Vec<Value> {
    b.wait_count("command", n)
}

#[test]
fn commands_are_audited_with_status_and_directory() {
    let b = Bastion::start();
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("cd /tmp\r");
    t.send("false\r");
    // The process that prints A-2 is the one Ctrl-C interrupts, whenever
    // the keystroke lands.
    t.send("sh -c 'echo A-$((1+1)); exec sleep 600'\r");
    t.expect("A-2");
    t.send("\x03");
    // Ctrl-C flushes what is typed ahead (as on any terminal): wait until
    // the interrupted command is reported before typing on.
    commands(&b, 3);
    t.send("printf '\\033]133;D;0\\007'; echo FORGED-$((3+3))\r");
    t.expect("FORGED-6");
    let c = commands(&b, 4);
    assert_eq!(c[0]["command"], "cd /tmp");
    assert_eq!(c[0]["exit_code"], 0);
    assert_eq!(c[1]["command"], "false");
    assert_eq!(c[1]["exit_code"], 1);
    assert_eq!(c[1]["cwd"], "/tmp");
    assert_eq!(c[2]["command"], "sh -c 'echo A-$((1+1)); exec sleep 600'");
    assert_eq!(c[2]["exit_code"], 130);
    // The forged "command finished" did not end the command early: one
    // event, after its whole output.
    assert_eq!(
        c[3]["command"],
        "printf '\\033]133;D;0\\007'; echo FORGED-$((3+3))"
    );
    assert_eq!(c[3]["exit_code"], 0);
    assert!(c[3]["output_bytes"].as_u64().unwrap() >= "FORGED-6".len() as u64);
    // ... and it reached the user's terminal as it was printed.
    assert!(t.screen.text().contains("\x1b]133;D;0\x07"));
    assert!(!t.screen.text().contains(";w="), "walissh's marks leaked");
}

/// Bash's hooks make the command line's mark without a fork when the
/// line typed is the command bash runs (one line, no history expansion
/// in it), and fall back to the history's text otherwise: every row
/// holds what bash ran.
#[test]
fn command_lines_are_what_bash_ran_with_or_without_history_expansion() {
    let b = Bastion::start();
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.expect(prompt_end());
    let row = |command: &str| {
        b.wait_event(|e| {
            e["kind"] == "command" && e["command"].as_str().map(str::trim) == Some(command)
        })
    };
    t.send("echo HIST-$((2+2))\r");
    assert_eq!(row("echo HIST-$((2+2))")["exit_code"], 0);
    // `!!` is expanded: the row holds the line bash ran.
    t.send("!! again\r");
    t.expect("HIST-4 again");
    row("echo HIST-$((2+2)) again");
    // Two lines, one command (cmdhist joins them in the history).
    t.send("for i in 1 2; do\r");
    t.send("echo LOOP-$i; done\r");
    t.expect("LOOP-2");
    let joined = b.wait_event(|e| {
        e["kind"] == "command"
            && e["command"]
                .as_str()
                .is_some_and(|c| c.starts_with("for i in 1 2; do"))
    });
    assert!(
        joined["command"]
            .as_str()
            .unwrap()
            .contains("echo LOOP-$i; done"),
        "{joined}"
    );
    // A line the history leaves out (a leading space, with Debian's
    // `ignoreboth`) is still audited with its text.
    t.send(" echo SPACED-$((1+2))\r");
    t.expect("SPACED-3");
    row("echo SPACED-$((1+2))");
    // A line carried on to the next, then accepted by another key than
    // Enter (Ctrl-O): PS2 made the hook let go of the first line.
    t.send("true &&\r");
    t.send("echo PS2-$((2+3))\x0f");
    t.expect("PS2-5");
    row("true && echo PS2-$((2+3))");
    // walissh's Enter hook pressed by hand (a key no keyboard sends), the
    // line changed, and run with Ctrl-O: the hook never ran, and the row
    // holds what ran.
    // (Readline takes the Ctrl-U into the broken key, so the line runs
    // whole: what matters is that its row is what ran, not the line the
    // hook would have kept.)
    t.send("echo harmless\x1b[209~\x15echo RAN-$((6*7))\x0f");
    t.expect("RAN-42");
    b.wait_event(|e| {
        e["kind"] == "command"
            && e["command"]
                .as_str()
                .is_some_and(|c| c.contains("echo RAN-$((6*7))"))
    });
    let ran: Vec<Value> = commands(&b, 6);
    assert!(
        ran.iter().all(|c| c["command"] != "echo harmless"),
        "{ran:?}"
    );
    // Nothing of the hooks shows.
    let text = t.screen.text();
    assert!(!text.contains("__ws") && !text.contains(";w="), "{text}");
}

#[test]
fn a_zsh_login_gets_the_same_integration() {
    let Some(_) = zsh_user() else {
        eprintln!("skipped: needs root and zsh (CI installs zsh and runs as root)");
        return;
    };
    let b = Bastion::start();
    let t = Terminal::spawn(&b.ssh_pw("carol:zsh", CAROL_PW), 24, 80);
    t.send("cd /tmp\r");
    t.send("echo Z-$((4+4))\r");
    t.expect("Z-8");
    let c = commands(&b, 2);
    assert_eq!(c[0]["command"], "cd /tmp");
    assert_eq!(c[1]["command"], "echo Z-$((4+4))");
    assert_eq!(c[1]["cwd"], "/tmp");
    assert!(!t.screen.text().contains(";w="), "walissh's marks leaked");
    assert!(
        !t.screen.text().contains("head -n1"),
        "the bootstrap showed"
    );
    t.send("fc -l 1; echo END-$((1+8))\r");
    let end = t.expect("END-9");
    let listed = t.screen.text()[..end].to_string();
    let history = listed.rsplit("fc -l 1").next().unwrap();
    assert!(
        !history.contains("eval") && !history.contains("__ws"),
        "{history}"
    );
    assert!(history.contains("cd /tmp"), "{history}");
}

#[test]
fn a_shell_without_integration_just_works() {
    if !is_root() {
        eprintln!("skipped: needs root for the sh account (CI runs as root)");
        return;
    }
    // JAIL_USER's login shell is /bin/sh: no bootstrap, no marks; commands
    // are read off the screen model when Enter is pressed at a prompt.
    let b = Bastion::start();
    let mut t = Terminal::spawn(&b.ssh_pw("carol:jail", CAROL_PW), 24, 80);
    t.expect("$ ");
    // Type, let the echo come back, then Enter: the heuristic reads the
    // line off the screen.
    t.send("echo SH-$((5+5))");
    t.expect("echo SH-$((5+5))");
    t.send("\r");
    let at = t.expect("SH-10");
    t.screen.wait_for_from("$ ", at);
    t.send("exit 3\r");
    assert_eq!(t.wait(), Some(3));
    assert!(!t.screen.text().contains("head -n1"));
    b.wait_kind("session_end");
    let c = b.wait_count("command", 1);
    assert_eq!(c[0]["command"], "echo SH-$((5+5))");
    assert_eq!(c[0]["detected"], "screen");
    assert_eq!(c[0]["exit_code"], Value::Null);
}

#[test]
fn questions_at_the_prompt_are_caught_and_nothing_else_is() {
    // The harness points [llm] at a closed port: caught questions reach the
    // agent, which says it cannot reach the model.
    let b = Bastion::start();
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    let unreachable = "walissh: cannot reach the model endpoint";
    t.send("? why is the disk full\r");
    let at = t.expect_from(unreachable, 0);
    // The agent is done once the prompt is back: type on only then.
    let at = t.expect_from(prompt_end(), at);
    t.send("ai: restart nginx\r");
    let at = t.expect_from(unreachable, at);
    t.expect_from(prompt_end(), at);
    // Not caught: a leading space, a prefix inside the line, a continuation
    // line, and `read` reading a line that starts with the prefix.
    t.send(" ?x=1; echo SPACE-$((1+1))\r");
    t.send("echo a?b INSIDE-$((2+2))\r");
    let at = t.expect("INSIDE-4");
    t.send("echo CONT \\\r");
    // At the continuation prompt.
    t.expect_from("> ", at);
    t.send("? continued\r");
    t.expect("CONT ? continued");
    // Typed once `read` runs: a line typed while readline still holds the
    // terminal in raw mode is no line to `read` (direct to sshd too).
    t.send("echo READING-$((1+2)); read -r L; echo \"READ-[$L]\"\r");
    t.expect("READING-3");
    t.send("? to read\r");
    t.expect("READ-[? to read]");
    let prompts = b.wait_count("ai_prompt", 2);
    assert_eq!(prompts[0]["text"], "? why is the disk full");
    assert_eq!(prompts[1]["text"], "ai: restart nginx");
    assert_eq!(prompts[0]["target"], "web1");
    // Each question went to the agent, and failed there, once.
    let errors = b.wait_count("ai_error", 2);
    for e in &errors {
        let m = e["message"].as_str().unwrap_or("");
        assert!(m.contains("cannot reach the model endpoint"), "{e}");
    }
    // The caught lines never reached the shell: no command ran for them.
    let cmds = commands(&b, 4);
    assert!(
        cmds.iter()
            .all(|c| !c["command"].as_str().unwrap_or("").starts_with('?'))
    );
    let audit = b.audit();
    assert_eq!(audit.iter().filter(|e| e["kind"] == "ai_prompt").count(), 2);
    assert_eq!(audit.iter().filter(|e| e["kind"] == "ai_error").count(), 2);
}

#[test]
fn a_question_in_less_or_vi_is_a_search() {
    let b = Bastion::start();
    let t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("seq 1 500 > /tmp/walissh-seq-$PPID; less /tmp/walissh-seq-$PPID\r");
    let at = t.expect("\r\n23\r\n");
    t.send("G");
    let at = t.screen.wait_for_from("(END)", at);
    // Searching back for 250 puts it at the top: 251 shows below it.
    t.send("?250\r");
    let at = t.screen.wait_for_from("251", at);
    t.send("q");
    commands(&b, 1);
    t.send("vi /tmp/walissh-seq-$PPID\r");
    t.screen.wait_for_from("500L", at);
    t.send("G?123\r:s/123/FOUND-VI/\r:wq\r");
    commands(&b, 2);
    t.send("grep -c FOUND-VI /tmp/walissh-seq-$PPID; rm /tmp/walissh-seq-$PPID\r");
    let c = commands(&b, 3);
    assert_eq!(c[2]["exit_code"], 0, "vi did not write the change: {c:#?}");
    assert!(b.audit().iter().all(|e| e["kind"] != "ai_prompt"));
}

#[test]
fn users_with_the_agent_off_are_refused() {
    let b = Bastion::start();
    let t = Terminal::spawn(&b.ssh_pw("carol:web1", CAROL_PW), 24, 80);
    t.send("? why\r");
    t.expect("the agent is off for your account");
    let p = b.wait_kind("ai_prompt");
    assert_eq!(p["user"], "carol");
    assert_eq!(p["text"], "? why");
}
