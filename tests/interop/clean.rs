//! What the agent runs unasked runs clean (issue 12, item 3): on a channel
//! of its own, with a fixed PATH and no rc files, in the prompt's
//! directory, so that what the user's shell makes of a name (an alias, a
//! function, a fake program early in PATH) cannot change what the policy
//! checked. The target account is made hostile all three ways, in the
//! start-up files its shells read; the real programs must run, their
//! output reach the model and the user's screen, and no trick leave its
//! marker.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::agent::*;
use crate::harness::*;
use crate::model::*;
use crate::terminal::prompt_end;

/// The hostile account's prompt (its rc file sets it): not `$ ` or `# `,
/// which the agent's own lines hold too.
const PROMPT: &str = "HOSTILE> ";

/// The hostile account as an ssh target (through the test sshd) and as a
/// local one, and erin (bob's key) whose `ai` is `auto`.
const HOSTILE_TARGETS: &str = r#"
[[targets]]
name = "hostile"
host = "127.0.0.1"
port = {sshd_port}
user = "walissh-hostile"

[[targets]]
name = "hostile-local"
kind = "local"
run_as = "walissh-hostile"

[[users]]
name = "erin"
authorized_keys = ["{bob_pub}"]
targets = ["hostile", "hostile-local"]
ai = "auto"
"#;

/// Held while a test uses the hostile account's home.
static HOME: Mutex<()> = Mutex::new(());

/// The hostile account's home, set up afresh.
struct Hostile {
    /// Where each trick that works leaves a file.
    marks: PathBuf,
    /// The directory the user is in when they ask, and what is in it.
    listing: PathBuf,
    file: String,
}

/// Makes `home`'s account hostile: its `~/.bashrc` (read by its login
/// shells, and, unguarded, by the bash sshd starts for an exec too) has
/// an alias `ls`, a function `uptime` (exported as well), and a PATH with
/// a fake `ls` first.
fn make_hostile(home: &Path) -> Hostile {
    let (marks, listing, fakebin) = (
        home.join("marks"),
        home.join("listing"),
        home.join("fakebin"),
    );
    for d in [&marks, &listing, &fakebin] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir(d).unwrap();
    }
    // The account writes its markers here.
    std::fs::set_permissions(&marks, std::fs::Permissions::from_mode(0o777)).unwrap();
    let file = format!("REAL-FILE-{}", std::process::id());
    std::fs::write(listing.join(&file), "").unwrap();
    let m = marks.display();
    let fake_ls = fakebin.join("ls");
    std::fs::write(
        &fake_ls,
        format!("#!/bin/sh\ntouch {m}/path-ls\necho FAKE-LS-IN-PATH\n"),
    )
    .unwrap();
    std::fs::set_permissions(&fake_ls, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rc = format!(
        "# Hostile on purpose (walissh's clean-run tests).\n\
         PS1='{PROMPT}'\n\
         shopt -s expand_aliases\n\
         alias ls='touch {m}/alias-ls; echo FAKE-LS'\n\
         uptime() {{ touch {m}/function-uptime; echo FAKE-UPTIME; }}\n\
         export -f uptime\n\
         PATH={fakebin}:$PATH\n\
         export PATH\n",
        fakebin = fakebin.display()
    );
    std::fs::write(home.join(".bashrc"), rc).unwrap();
    std::fs::write(home.join(".bash_profile"), ". ~/.bashrc\n").unwrap();
    // What earlier runs left in the history must not count.
    let _ = std::fs::remove_file(home.join(".bash_history"));
    Hostile {
        marks,
        listing,
        file,
    }
}

fn markers(h: &Hostile) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(&h.marks)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// erin, in auto mode, on `target` (the hostile account), asks a question;
/// the model runs `ls` and `uptime`, both read-only, so unasked.
fn auto_commands_run_clean_on(target: &str) {
    let Some((_, home)) = hostile_user() else {
        eprintln!("skipped: needs root (CI runs as root) for the hostile account");
        return;
    };
    // One test at a time in the account's one home.
    let _home = HOME.lock().unwrap_or_else(|e| e.into_inner());
    let h = make_hostile(&home);
    let model = Model::start(vec![
        Reply::Sse(calls(&[
            ("c1", "ls", "what is here"),
            ("c2", "uptime", "how loaded"),
        ])),
        Reply::Sse(answer("CLEAN-ANSWER: one file, some load.")),
    ]);
    let b = bastion_with(
        &model,
        Opts {
            extra_toml: HOSTILE_TARGETS.into(),
            ..Opts::default()
        },
    );
    let t = Terminal::spawn(&b.ssh_bob(&format!("erin:{target}")), 24, 80);
    // The user's own shell is hostile: its ls and uptime are fakes.
    t.send(&format!(
        "cd {}; ls; uptime; echo HOSTILE-$((1+1))\r",
        h.listing.display()
    ));
    let at = t.expect("HOSTILE-2");
    let shown = t.screen.plain();
    assert!(
        shown.contains("FAKE-LS\r\n") && shown.contains("FAKE-UPTIME\r\n"),
        "{shown}"
    );
    assert_eq!(markers(&h), ["alias-ls", "function-uptime"]);
    for m in markers(&h) {
        std::fs::remove_file(h.marks.join(m)).unwrap();
    }
    let at = t.expect_from(PROMPT, at);

    let asked = ask(&t, "? what is here, and how loaded is it");
    let at = t.expect_from("CLEAN-ANSWER", asked.max(at));
    // The user saw the real programs' output, and no fake's.
    let seen = t.screen.since(asked);
    assert!(seen.contains(&format!("{}\r\n", h.file)), "{seen:?}");
    assert!(seen.contains("load average"), "{seen:?}");
    assert!(!seen.contains("FAKE"), "{seen:?}");
    // Back at the prompt, in the shell as it was; the agent's commands are
    // not in its history.
    let at = t.expect_from(PROMPT, at);
    t.send("echo HIST$((1+1)):$(history | grep -cE '^ *[0-9]+ +(ls|uptime)$')\r");
    assert_eq!(rest_of_line(&t, "HIST2:", at), "0", "typed into the shell");

    // The model got the real output, in the prompt's directory.
    let reqs = model.wait_requests(2);
    let (_, r) = last_turn(&reqs[1]);
    assert_eq!(r.len(), 2, "{:#}", reqs[1]);
    assert_ran(r[0], "c1", "ls", 0, &h.file);
    assert_ran(r[1], "c2", "uptime", 0, "load average");
    for result in r {
        assert!(!content(result).contains("FAKE"), "{}", content(result));
    }
    assert_eq!(
        markers(&h),
        Vec::<String>::new(),
        "a trick of the shell ran"
    );

    b.wait_kind("ai_answer");
    let ev = ai_events(&b);
    let calls = of_kind(&ev, "ai_tool_call");
    assert_eq!(calls.len(), 2, "{ev:#?}");
    for (c, command) in calls.iter().zip(["ls", "uptime"]) {
        assert_eq!(c["command"], command);
        assert_eq!(c["decision"], "auto");
        assert_eq!(c["user"], "erin");
        assert_eq!(c["target"], target);
    }
    let results = of_kind(&ev, "ai_tool_result");
    assert_eq!(results.len(), 2, "{ev:#?}");
    assert!(results.iter().all(|r| r["exit_code"] == 0), "{ev:#?}");
}

#[test]
fn auto_commands_run_clean_on_an_ssh_target() {
    auto_commands_run_clean_on("hostile");
}

#[test]
fn auto_commands_run_clean_on_a_local_target() {
    auto_commands_run_clean_on("hostile-local");
}

/// A file whose one line a clean command prints before it waits for
/// ever in a pipe, and how to tell whether that command still runs. (The
/// policy runs `tail -f` only after asking: it never ends by itself, and
/// `sleep` unasked only for a few seconds. `seq` from a number unique to
/// this test to infinity, counted by a `grep` that never matches, is
/// read-only, silent, and stays.)
struct Followed {
    _dir: tempfile::TempDir,
    file: String,
    line: String,
    seconds: u32,
}

impl Followed {
    fn new() -> Followed {
        let dir = visible_dir();
        let file = dir.path().join("followed").display().to_string();
        let line = format!("FOLLOWED-{}", std::process::id());
        std::fs::write(&file, format!("{line}\n")).unwrap();
        Followed {
            _dir: dir,
            file,
            line,
            seconds: 100_000 + std::process::id(),
        }
    }

    /// Never ends by itself; both sides of the pipe must be stopped.
    fn command(&self) -> String {
        format!(
            "cat {} && seq {} inf | grep -c never",
            self.file, self.seconds
        )
    }

    /// Waits until no `seq` of the command is left (stopping takes the
    /// target a moment after walissh gave the command up).
    fn wait_gone(&self) {
        let pattern = format!("seq {} inf", self.seconds);
        let start = Instant::now();
        loop {
            let st = std::process::Command::new("pgrep")
                .args(["-f", &pattern])
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap();
            if st.code() == Some(1) {
                return;
            }
            if start.elapsed() > DEADLINE {
                let ps = std::process::Command::new("ps")
                    .args(["-eo", "pid,ppid,pgid,sid,stat,args"])
                    .output()
                    .unwrap();
                panic!(
                    "{pattern} still runs:\n{}",
                    String::from_utf8_lossy(&ps.stdout)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Ctrl-C while a command the policy ran unasked runs on `target`: the
/// question stops, and so does all of the command.
fn ctrl_c_stops_a_clean_command_on(target: &str) {
    let f = Followed::new();
    let model = Model::start(vec![Reply::Sse(call("k1", &f.command(), "follow it"))]);
    let b = auto_bastion(&model);
    let t = ready_on(&b, target);
    let at = ask(&t, "? follow the file");
    let at = t.expect_from(&format!("{}\r\n", f.line), at);
    t.send("\x03");
    let at = t.expect_from("walissh: stopped", at);
    back_at_prompt(&b, &t, at);
    f.wait_gone();
    let e = b.wait_kind("ai_error");
    assert!(e["message"].as_str().unwrap().contains("stopped"), "{e}");
    let call = b.wait_kind("ai_tool_call");
    assert_eq!(call["decision"], "auto");
    assert_eq!(model.count(), 1);
}

/// bob at his prompt on `target`.
fn ready_on(b: &Bastion, target: &str) -> Terminal {
    let t = Terminal::spawn(&b.ssh_bob(&format!("bob:{target}")), 24, 80);
    t.send("echo READY-$((1+1))\r");
    let at = t.expect("READY-2");
    t.expect_from(prompt_end(), at);
    t
}

#[test]
fn ctrl_c_stops_a_clean_command_on_an_ssh_target() {
    ctrl_c_stops_a_clean_command_on("web1");
}

#[test]
fn ctrl_c_stops_a_clean_command_on_a_local_target() {
    ctrl_c_stops_a_clean_command_on("local");
}

#[test]
fn a_clean_command_past_its_timeout_is_stopped_and_the_model_told() {
    let f = Followed::new();
    let model = Model::start(vec![
        Reply::Sse(call("k1", &f.command(), "follow it")),
        Reply::Sse(answer("TIMED-ANSWER")),
    ]);
    let b = bastion_with(
        &model,
        Opts {
            bob_ai: "auto",
            extra_toml: "[ai]\ncommand_timeout_s = 2\n".into(),
            ..Opts::default()
        },
    );
    let t = bob(&b);
    let at = ask(&t, "? follow the file");
    let reqs = model.wait_requests(2);
    let waited = model.requests()[1]
        .at
        .duration_since(model.requests()[0].at);
    let (_, r) = last_turn(&reqs[1]);
    let c = content(r[0]);
    // What the model was told says why, should it have stopped early.
    assert!(
        waited >= Duration::from_secs(2),
        "stopped after {waited:?}, before its 2 s: {c:?}"
    );
    assert!(
        c.starts_with(&format!(
            "$ {}\ninterrupted: it ran longer than 2 s\n",
            f.command()
        )),
        "{c:?}"
    );
    assert!(c.contains(&f.line), "{c:?}");
    let at = t.expect_from("interrupted: it ran longer than 2 s", at);
    let at = t.expect_from("TIMED-ANSWER", at);
    back_at_prompt(&b, &t, at);
    f.wait_gone();
}

#[test]
fn long_output_of_a_clean_command_reaches_the_screen_whole_and_the_model_bounded() {
    let dir = visible_dir();
    let file = dir.path().join("numbers");
    // Under `[ai] auto_output_max` (1 MiB): what runs unasked is bounded.
    let numbers: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    std::fs::write(&file, &numbers).unwrap();
    let command = format!("cat {}", file.display());
    let model = Model::start(vec![
        Reply::Sse(call("c1", &command, "count")),
        Reply::Sse(answer("NUMBERS-DONE")),
    ]);
    let b = auto_bastion(&model);
    let t = bob(&b);
    let at = ask(&t, "? count for me");
    // The user sees it all, paced by their terminal, with whole line ends.
    let at = t.expect_from("99999\r\n100000\r\n", at);
    let at = t.expect_from("NUMBERS-DONE", at);
    back_at_prompt(&b, &t, at);
    let reqs = model.wait_requests(2);
    let (_, r) = last_turn(&reqs[1]);
    let c = content(r[0]);
    let head =
        format!("$ {command}\nexit code 0\n<output source=\"target\" trusted=\"no\">\n1\n2\n3\n");
    assert!(c.starts_with(&head), "{:?}", &c[..c.len().min(200)]);
    assert!(
        c.ends_with("\n99999\n100000\n</output>"),
        "{:?}",
        &c[c.len().saturating_sub(200)..]
    );
    assert!(c.len() < 32 * 1024, "{} bytes given to the model", c.len());
    assert!(c.contains("cut"), "the cut is not said");
    let result = b.wait_kind("ai_tool_result");
    assert_eq!(result["output_bytes"], numbers.len() as u64, "{result}");
    let call = b.wait_kind("ai_tool_call");
    assert_eq!(call["decision"], "auto");
}
