//! Tests of `terminal`.

use super::*;

const N: &str = "feedbeef";

impl Terminal {
    fn feed(&mut self, data: &[u8]) -> Processed {
        self.output(Bytes::copy_from_slice(data))
    }
}

fn m(s: &str) -> String {
    s.replace("{N}", N)
}

impl Terminal {
    /// Keys walissh forwarded to the shell.
    fn typed_keys(&self, keys: &str) {
        self.typed.lock().unwrap().keys(keys.as_bytes());
    }
}

#[test]
fn bootstrap_traces_are_cut_and_the_banner_kept() {
    let mut t = Terminal::integrated(N, false);
    let first =
        t.feed(b"Linux 6.1 motd\r\nLast login: today\r\n\x1b[?2004hroot@h:~# \x1b[?2004l\r\r\n");
    assert!(first.to_client.is_empty());
    let rest = t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07\x1b]133;D;0;w={N}\x07\x1b]133;A;w={N}\x07root@h:~# \x1b]133;B;w={N}\x07").as_bytes());
    assert_eq!(
        String::from_utf8(rest.to_client.to_vec()).unwrap(),
        "Linux 6.1 motd\r\nLast login: today\r\nroot@h:~# "
    );
    assert!(rest.finished.is_empty());
    assert!(t.deadline().is_none());
}

#[test]
fn a_two_line_prompt_is_cut_whole() {
    let mut t = Terminal::integrated(N, false);
    let out =
        t.feed(m("banner\r\n[user@h ~]\r\n$ \r\n\x1b]133;W;w={N};lines=1;nl=1\x07").as_bytes());
    assert_eq!(&out.to_client[..], b"banner\r\n");
}

#[test]
fn commands_are_recorded_with_cwd_and_status() {
    let mut t = Terminal::integrated(N, false);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
    t.typed_keys("ls -l\r");
    let out = t.feed(
            m("\x1b]7;w={N};/tmp\x07$ ls\r\n\x1b]133;C;w={N};cmd=ls -l\x07\x1b[1mfile\x1b[0m\r\n\x1b]133;D;2;w={N}\x07$ ")
                .as_bytes(),
        );
    assert_eq!(&out.to_client[..], b"$ ls\r\n\x1b[1mfile\x1b[0m\r\n$ ");
    let r = &out.finished[0];
    assert_eq!(r.command.as_deref(), Some("ls -l"));
    assert_eq!(r.cwd.as_deref(), Some("/tmp"));
    assert_eq!(r.exit_code, Some(2));
    assert_eq!(r.output.text(), "file\n");
    assert_eq!(t.history.len(), 1);
}

#[test]
fn a_forged_end_does_not_end_the_command() {
    let mut t = Terminal::integrated(N, false);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
    t.typed_keys("printf x\r");
    t.feed(m("\x1b]133;C;w={N};cmd=printf x\x07").as_bytes());
    let out = t.feed(b"\x1b]133;D;0\x07");
    assert!(out.finished.is_empty());
    assert_eq!(&out.to_client[..], b"\x1b]133;D;0\x07");
    let out = t.feed(m("\x1b]133;D;0;w={N}\x07").as_bytes());
    assert_eq!(out.finished.len(), 1);
}

#[test]
fn questions_are_reported_where_they_were_asked() {
    let mut t = Terminal::integrated(N, false);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
    t.typed_keys("? why\r");
    let out = t.feed(m("$ \r\x1b[K\r\x1b]133;Q;w={N};kept=0;text=? why\x07$ ").as_bytes());
    assert_eq!(&out.to_client[..], b"$ \r\x1b[K\r$ ");
    let q = Question {
        text: "? why".into(),
        kept: false,
        prompt: Vec::new(),
    };
    assert_eq!(out.questions, vec![(7, q)]);
    assert!(out.finished.is_empty());
}

#[test]
fn while_the_agent_works_only_its_commands_output_is_shown() {
    let mut t = Terminal::integrated(N, true);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
    t.typed_keys("? why\r\x05\x15df\r");
    // The question, then the shell's redraw of its prompt: hidden.
    let out = t.feed(
            m("\r\x1b[K\x1b]133;Q;w={N};kept=0;text=? why\x07\r\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07")
                .as_bytes(),
        );
    assert_eq!(&out.to_client[..], b"\r\x1b[K");
    assert_eq!(out.questions.len(), 1);
    // The echo of the typed command is hidden, its output shown, the
    // prompt after it hidden.
    let out = t.feed(
            m("df\r\n\x1b]133;C;w={N};cmd=df\x07/dev/sda1 97%\r\n\x1b]133;D;0;w={N}\x07\x1b]133;A;w={N}\x07$ ")
                .as_bytes(),
        );
    assert_eq!(&out.to_client[..], b"/dev/sda1 97%\r\n");
    assert_eq!(out.finished[0].output.text(), "/dev/sda1 97%\n");
    assert!(out.line_done);
    // Done: hidden until the fresh prompt starts (not a redraw of the
    // old one), then all shown.
    t.agent_done(true);
    t.typed_keys("\x05\x15\r");
    let out = t.feed(m("\r\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
    assert!(out.to_client.is_empty());
    let out = t.feed(m("\r\n\x1b]133;D;0;w={N}\x07\x1b]133;A;w={N}\x07$ ").as_bytes());
    assert_eq!(&out.to_client[..], b"$ ");
    assert!(out.finished.is_empty() && out.line_done);
    assert_eq!(&t.feed(b"typed").to_client[..], b"typed");
}

#[test]
fn a_question_keeps_the_last_line_of_its_prompt() {
    let mut t = Terminal::integrated(N, true);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
    t.typed_keys("? why\r");
    t.feed(m("\x1b]133;A;w={N}\x07[me@h ~]\r\n\x1b[1m$").as_bytes());
    t.feed(b" ");
    let out = t.feed(
        m("\x1b[0m\x1b]133;B;w={N}\x07\r\x1b[K\x1b]133;Q;w={N};kept=0;text=? why\x07").as_bytes(),
    );
    assert_eq!(out.questions[0].1.prompt, b"\x1b[1m$ \x1b[0m");
}

#[test]
fn giving_up_shows_everything_held_and_still_reads_marks() {
    let mut t = Terminal::integrated(N, false);
    t.feed(b"slow rc> ");
    assert_eq!(t.give_up(), b"slow rc> ");
    assert_eq!(&t.feed(b"x").to_client[..], b"x");
    t.typed_keys("ls\r");
    t.feed(m("\x1b]133;C;w={N};cmd=ls\x07").as_bytes());
    let out = t.feed(m("\x1b]133;D;0;w={N}\x07").as_bytes());
    assert_eq!(out.finished.len(), 1);
    assert!(out.to_client.is_empty());
}

#[test]
fn marks_that_do_not_fit_what_was_typed_are_dropped_and_reported() {
    let mut t = Terminal::integrated(N, true);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
    t.typed_keys("printf forged\r");
    // The command's own start takes its Enter; a second start, a
    // question nobody typed and a fake command line are dropped.
    let out = t.feed(
        m("\x1b]133;C;w={N};cmd=printf forged\x07\
               \x1b]133;Q;w={N};kept=0;text=? evil\x07\
               \x1b]133;C;w={N};cmd=rm -rf /home/alice\x07\
               \x1b]133;D;0;w={N}\x07")
        .as_bytes(),
    );
    assert!(out.questions.is_empty());
    assert_eq!(out.finished.len(), 1);
    assert_eq!(out.finished[0].command.as_deref(), Some("printf forged"));
    let i = out.integrity.expect("reported");
    assert_eq!((i.mark, i.dropped), ("Q", 1));
    assert!(String::from_utf8_lossy(&out.to_client).contains("walissh: ignored a question"));
    // Reported once a minute at most: the C was counted, not reported.
    let out = t.feed(m("\x1b]133;Q;w={N};kept=1;text=? again\x07").as_bytes());
    assert!(out.integrity.is_none() && out.questions.is_empty());
    assert_eq!(t.dropped, 2);
}

/// A second start while a command runs, with an Enter typed ahead to
/// take (a forgery riding on type-ahead), no longer replaces the
/// running command's row: both are kept, the second marked.
#[test]
fn a_start_while_a_command_runs_keeps_both_rows() {
    let mut t = Terminal::integrated(N, false);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
    t.typed_keys("make deploy\rls\r");
    let out = t.feed(
        m("\x1b]133;C;w={N};cmd=make deploy\x07building\r\n\
               \x1b]133;C;w={N};cmd=ls\x07\
               \x1b]133;D;0;w={N}\x07")
        .as_bytes(),
    );
    let rows: Vec<_> = out
        .finished
        .iter()
        .map(|r| (r.command.as_deref(), r.exit_code, r.overlapped))
        .collect();
    assert_eq!(
        rows,
        [
            (Some("make deploy"), None, false),
            (Some("ls"), Some(0), true)
        ]
    );
}

#[test]
fn a_question_typed_with_edits_is_checked_against_its_echo() {
    let mut t = Terminal::integrated(N, false);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
    t.feed(m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
    // `? wy`, Left, `h`: readline redraws the end of the line.
    t.typed_keys("? wy\x1b[Dh\r");
    let out = t.feed(m("? wy\x08hy\x08\x1b]133;Q;w={N};kept=0;text=? why\x07").as_bytes());
    assert_eq!(out.questions.len(), 1);
    t.feed(m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
    t.typed_keys("? a\x1b[Db\r");
    let out = t.feed(m("? ba\x1b]133;Q;w={N};kept=0;text=? other\x07").as_bytes());
    assert!(out.questions.is_empty());
}

#[test]
fn a_question_recalled_by_reverse_search_is_read_off_its_redraws() {
    let mut t = Terminal::integrated(N, false);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
    let prompt = m("\x1b]133;A;w={N}\x07root@vm:~# \x1b]133;B;w={N}\x07");
    t.feed(prompt.as_bytes());
    t.typed_keys("\x12HIST-\x1b[C\x01? \r");
    let echo = "\r(reverse-i-search)`': \x1b[K\x08\x08\x08H': echo \x1b[7mH\x1b[27mIST-$((0+1))\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x1b[1@I': echo \x1b[7mHI\x1b[27m\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x1b[1@S': echo \x1b[7mHIS\x1b[27m\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x1b[1@T': echo \x1b[7mHIST\x1b[27m\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x08\x1b[1@-': echo \x1b[7mHIST-\x1b[27m\x08\x08\x08\x08\x08\r\x1b[16Proot@vm:~# echo HIST-\x08\x08\x08\x08\x08H\x08\x08\x08\x08\x08\x08\x1b[2@? \r\x1b[K";
    let out = t.feed(
        m(&format!(
            "{echo}\x1b]133;Q;w={N};kept=0;text=? echo HIST-$((0+1))\x07"
        ))
        .as_bytes(),
    );
    assert_eq!(out.questions.len(), 1);
}

/// bash wipes the line before it reports the question: the echo is
/// read before the wipe too. After Ctrl-L (which changes nothing of
/// the line) and after edits walissh does not follow, a real question
/// is asked; a different text still is not.
#[test]
fn a_question_is_read_before_bash_wipes_its_line() {
    let mut t = Terminal::integrated(N, false);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
    let prompt = m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07");
    t.feed(prompt.as_bytes());
    // Ctrl-L, then the question: followed as typed.
    t.typed_keys("\x0c? why\r");
    let out =
        t.feed(m("\x1b[H\x1b[2J$ ? why\r\x1b[K\x1b]133;Q;w={N};kept=0;text=? why\x07").as_bytes());
    assert_eq!(out.questions.len(), 1);
    // Left and Backspace inside it, then the wipe.
    t.feed(prompt.as_bytes());
    t.typed_keys("? whyy\x1b[D\x7f\r");
    let echo = "? whyy\x08\x08y \x08\x08\r\x1b[K";
    let out = t.feed(m(&format!("{echo}\x1b]133;Q;w={N};kept=0;text=? why\x07")).as_bytes());
    assert_eq!(out.questions.len(), 1);
    // A forgery after the same wipe is not believed.
    t.feed(prompt.as_bytes());
    t.typed_keys("? a\x1b[Db\r");
    let out = t.feed(m("? ba\r\x1b[K\x1b]133;Q;w={N};kept=0;text=? other\x07").as_bytes());
    assert!(out.questions.is_empty());
}

#[test]
fn a_fresh_prompt_is_one_nothing_has_drawn_over() {
    let mut t = Terminal::integrated(N, true);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1;keys=1;paste=1\x07").as_bytes());
    assert_eq!(
        t.caps(),
        Caps {
            keys: true,
            paste: true
        }
    );
    assert!(!t.at_prompt());
    t.feed(m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
    assert!(t.at_prompt());
    // A right prompt, a redraw: still there.
    t.feed(b"\x1b[s   [12:00]\x1b[u");
    assert!(t.at_prompt());
    // A forged prompt, then a pager's screen: not the shell's.
    t.feed(m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
    t.feed(b"\x1b[?1049h\x1b[Hline 1");
    assert!(!t.at_prompt());
    t.feed(m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
    t.feed(b"commit 1\r\ncommit 2\r\n:");
    assert!(!t.at_prompt());
}

/// A login shell integrated as alice on web1, following nested shells.
fn following() -> Terminal {
    let mut t = Terminal::integrated(N, false).follow_nested(vec!["?".into()]);
    t.feed(m("\x1b]133;W;w={N};lines=0;nl=1;keys=1;paste=1;user=alice;host=web1\x07").as_bytes());
    t
}

/// The login shell says it is ready once: a W said again later (by a
/// line the user runs, or a program holding the nonce) changes
/// neither what walissh believes the shell bound nor who it runs as.
#[test]
fn a_second_ready_mark_changes_nothing() {
    let mut t = following();
    let again = m("\x1b]133;W;w={N};lines=0;nl=1;keys=0;paste=0;user=bob;host=x\x07");
    let out = t.feed(again.as_bytes());
    assert!(out.to_client.is_empty());
    assert_eq!(
        t.caps(),
        Caps {
            keys: true,
            paste: true
        }
    );
    assert_eq!(t.place().user.as_deref(), Some("alice"));
}

/// On a loaded host the command's start and the new shell's prompt
/// come in one read: the keys typed before it were its own line, and
/// the shell is probed all the same. Keys typed after its Enter are
/// typed ahead: no probe then, nothing would join them.
#[test]
fn a_prompt_in_the_same_read_as_its_command_start_is_probed() {
    let mut t = following();
    t.typed_keys("zsh\r");
    let both = m("\x1b]133;C;w={N};cmd=zsh\x07host% ");
    let out = t.feed(both.as_bytes());
    let probe = out.type_in.expect("a probe at the prompt");
    assert!(probe.starts_with(b" printf '"));
    assert!(t.deadline().is_some(), "keys wait while walissh types");

    let mut t = following();
    t.typed_keys("zsh\rls\r");
    let out = t.feed(both.as_bytes());
    assert!(out.type_in.is_none(), "a line typed ahead gets no probe");
}

/// The nonce in a probe walissh typed.
fn probe_nonce(probe: &[u8]) -> String {
    let text = String::from_utf8(probe.to_vec()).unwrap();
    let after = text.split("\\007' ").nth(1).unwrap();
    after.split(' ').next().unwrap().to_string()
}

/// Runs `starter` at the login shell up to the nested shell's prompt,
/// and returns the nonce walissh gave it.
fn nest(t: &mut Terminal, starter: &str, prompt: &str, user: &str) -> String {
    t.typed_keys(&format!("{starter}\r"));
    let start = t.feed(m(&format!("\x1b]133;C;w={{N}};cmd={starter}\x07")).as_bytes());
    assert!(start.type_in.is_none());
    let shown = t.feed(prompt.as_bytes());
    assert_eq!(
        &shown.to_client[..],
        prompt.as_bytes(),
        "its prompt is shown"
    );
    let probe = shown.type_in.expect("a probe at the prompt");
    assert!(
        probe.starts_with(b" printf '"),
        "{:?}",
        String::from_utf8_lossy(&probe)
    );
    assert!(t.deadline().is_some(), "keys wait while walissh types");
    let n = probe_nonce(&probe);
    let answer = t.feed(
        format!(" printf ...\r\n\x1b]133;P;w={n};bash=5.2.15(1)-release;zsh=\x07\r\n{prompt}")
            .as_bytes(),
    );
    assert!(answer.to_client.is_empty(), "the probe leaves no trace");
    let bootstrap = answer.type_in.expect("the bootstrap after the answer");
    assert!(bootstrap.starts_with(b" eval \"$(head -n1)\"\r"));
    assert!(String::from_utf8_lossy(&bootstrap).contains(&format!("__ws_n={n};")));
    let ready = t.feed(
            format!(" eval \"$(head -n1)\"\r\n\x1b]133;W;w={n};lines=0;nl=1;keys=1;paste=1;user={user};host=web1\x07\x1b]133;D;0;w={n}\x07\x1b]133;A;w={n}\x07{prompt}\x1b]133;B;w={n}\x07").as_bytes(),
        );
    assert!(
        ready.to_client.is_empty(),
        "the prompt drawn again is not shown twice"
    );
    assert!(t.deadline().is_none());
    n
}

#[test]
fn sudo_i_is_followed_and_its_commands_carry_depth_and_account() {
    let mut t = following();
    let n = nest(&mut t, "sudo -i", "root@web1:~# ", "root");
    assert_eq!(t.place().depth, 1);
    assert_eq!(t.place().user.as_deref(), Some("root"));
    assert_eq!(t.place().via.as_deref(), Some("sudo -i"));
    t.typed_keys("id -u\r");
    let out = t.feed(
            format!("id -u\r\n\x1b]133;C;w={n};cmd=id -u\x070\r\n\x1b]133;D;0;w={n}\x07\x1b]133;A;w={n}\x07root@web1:~# \x1b]133;B;w={n}\x07").as_bytes(),
        );
    assert_eq!(&out.to_client[..], b"id -u\r\n0\r\nroot@web1:~# ");
    let r = &out.finished[0];
    assert_eq!(r.command.as_deref(), Some("id -u"));
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(r.place.depth, 1);
    assert_eq!(r.place.user.as_deref(), Some("root"));
    assert_eq!(r.place.host, None, "the same host");
    // A question at the nested prompt is caught with its nonce.
    t.typed_keys("? why\r");
    let q = t.feed(format!("\r\x1b[K\x1b]133;Q;w={n};kept=0;text=? why\x07").as_bytes());
    assert_eq!(q.questions.len(), 1);
    // `exit`: the login shell speaks again, and `sudo -i` ends.
    t.typed_keys("exit\r");
    let back = t.feed(
        m("exit\r\nlogout\r\n\x1b]133;D;0;w={N}\x07\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07")
            .as_bytes(),
    );
    assert_eq!(&back.to_client[..], b"exit\r\nlogout\r\n$ ");
    let starter = back.finished.last().unwrap();
    assert_eq!(starter.command.as_deref(), Some("sudo -i"));
    assert_eq!(starter.exit_code, Some(0));
    assert_eq!(starter.place.depth, 0);
    assert_eq!(starter.place.user.as_deref(), Some("alice"));
    assert_eq!(t.place().depth, 0);
    // The nested shell's nonce means nothing now.
    let late = format!("\x1b]133;D;0;w={n}\x07");
    assert_eq!(&t.feed(late.as_bytes()).to_client[..], late.as_bytes());
}

#[test]
fn two_levels_and_a_host_that_differs() {
    let mut t = following();
    let n1 = nest(&mut t, "sudo -i", "root@web1:~# ", "root");
    // From the root shell, `ssh db1` into a bash there.
    let inner = {
        let prompt = "app@db1:~$ ";
        t.typed_keys("ssh db1\r");
        t.feed(format!("\x1b]133;C;w={n1};cmd=ssh db1\x07").as_bytes());
        let probe = t.feed(prompt.as_bytes()).type_in.unwrap();
        let n = probe_nonce(&probe);
        t.feed(format!("\x1b]133;P;w={n};bash=5.1.4(1)-release;zsh=\x07").as_bytes());
        t.feed(format!("\x1b]133;W;w={n};lines=0;nl=1;keys=1;paste=1;user=app;host=db1\x07\x1b]133;A;w={n}\x07{prompt}\x1b]133;B;w={n}\x07").as_bytes());
        n
    };
    assert_eq!(t.place().depth, 2);
    assert_eq!(t.place().host.as_deref(), Some("db1"));
    t.typed_keys("ls\r");
    let out =
        t.feed(format!("\x1b]133;C;w={inner};cmd=ls\x07\x1b]133;D;0;w={inner}\x07").as_bytes());
    assert_eq!(out.finished[0].place.depth, 2);
    assert_eq!(out.finished[0].place.host.as_deref(), Some("db1"));
    // The login shell speaks: both nested shells have ended.
    let back = t.feed(m("\x1b]133;D;130;w={N}\x07").as_bytes());
    assert_eq!(t.place().depth, 0);
    assert_eq!(
        back.finished.last().unwrap().command.as_deref(),
        Some("sudo -i")
    );
    assert_eq!(back.finished.last().unwrap().exit_code, Some(130));
}

#[test]
fn programs_and_password_prompts_get_nothing_typed() {
    let mut t = following();
    for (line, screen) in [
        ("python3", "Python 3.11\r\n>>> "),
        ("read -p 'mysql> ' x", "mysql> "),
        ("sudo -k -i", "[sudo] password for alice: "),
        ("less /etc/hosts", "\x1b[?1049h127.0.0.1 localhost\r\n~ $ "),
    ] {
        t.typed_keys(&format!("{line}\r"));
        t.feed(m(&format!("\x1b]133;C;w={{N}};cmd={line}\x07")).as_bytes());
        let out = t.feed(screen.as_bytes());
        assert!(out.type_in.is_none(), "{line}");
        assert_eq!(&out.to_client[..], screen.as_bytes());
        t.feed(m("\x1b]133;D;0;w={N}\x07").as_bytes());
    }
}

#[test]
fn su_after_its_password_is_followed_but_type_ahead_is_not_joined() {
    let mut t = following();
    t.typed_keys("su -\r");
    t.feed(m("\x1b]133;C;w={N};cmd=su -\x07").as_bytes());
    assert!(t.feed(b"Password: ").type_in.is_none());
    t.typed_keys("secret\r");
    assert!(t.feed(b"\r\n").type_in.is_none());
    assert!(t.feed(b"root@web1:~# ").type_in.is_some());
    // A line being typed at the prompt: no probe joins it.
    let mut t = following();
    t.typed_keys("bash\r");
    t.feed(m("\x1b]133;C;w={N};cmd=bash\x07").as_bytes());
    t.typed_keys("ls");
    assert!(t.feed(b"alice@web1:~$ ").type_in.is_none());
}

/// A question an rc file asks as the nested shell starts (`read -p
/// "Ticket number > "` in `sudo su - app`) is not a prompt: no probe
/// is typed into it, and the shell's own prompt after it gets one.
#[test]
fn a_question_from_an_rc_file_gets_no_probe() {
    let mut t = following();
    t.typed_keys("sudo su - app\r");
    t.feed(m("\x1b]133;C;w={N};cmd=sudo su - app\x07").as_bytes());
    assert!(t.feed(b"\r\n").type_in.is_none());
    for question in [&b"Ticket number > "[..], b"mysql> "] {
        assert!(t.feed(question).type_in.is_none());
    }
    // Once answered, walissh gives that shell up and says so, once;
    // its prompt gets no probe, and it is read off the screen.
    t.typed_keys("T-123\r");
    let answered = t.feed(b"T-123\r\n");
    assert!(answered.type_in.is_none());
    let shown = String::from_utf8_lossy(&answered.to_client).into_owned();
    assert_eq!(shown, format!("T-123\r\n{GAVE_UP}\r\n"));
    let prompt = t.feed(b"app@web1:~$ ");
    assert!(prompt.type_in.is_none());
    assert_eq!(&prompt.to_client[..], b"app@web1:~$ ");
    assert_eq!(t.unowned().load(Ordering::Relaxed), 1);
    assert!(t.deadline().is_none());
}

/// A password's question answered is no reason to give up: the
/// shell's prompt after it gets the probe.
#[test]
fn a_password_answered_before_the_prompt_is_no_question() {
    let mut t = following();
    t.typed_keys("sudo su - app\r");
    t.feed(m("\x1b]133;C;w={N};cmd=sudo su - app\x07").as_bytes());
    assert!(t.feed(b"[sudo] password for bob: ").type_in.is_none());
    // While it runs, its screen is not the shell's prompt.
    assert_eq!(t.unowned().load(Ordering::Relaxed), 1);
    t.typed_keys("secret\r");
    assert!(t.feed(b"\r\n").type_in.is_none());
    assert!(t.feed(b"app@web1:~$ ").type_in.is_some());
}

#[test]
fn a_shell_that_does_not_answer_is_left_as_it_is() {
    let mut t = following();
    t.typed_keys("ssh old\r");
    t.feed(m("\x1b]133;C;w={N};cmd=ssh old\x07").as_bytes());
    let probe = t.feed(b"old% ").type_in.unwrap();
    // tcsh: an error, and its prompt again; nothing is shown.
    let out = t.feed(b" printf ...\r\nIllegal variable name.\r\nold% ");
    assert!(out.to_client.is_empty());
    assert!(t.give_up().is_empty());
    assert!(t.deadline().is_none());
    assert_eq!(t.place().depth, 0);
    // Its commands are read off the screen, at depth 1.
    assert_eq!(t.unowned().load(Ordering::Relaxed), 1);
    // From here on its output is shown as it is, and its marks (none)
    // would not count with the probe's nonce.
    let n = probe_nonce(&probe);
    let late = format!("ls\r\n\x1b]133;W;w={n};lines=0\x07");
    assert_eq!(&t.feed(late.as_bytes()).to_client[..], late.as_bytes());
    // A shell that answers it is not bash or zsh: its redraw is dropped.
    let mut t = following();
    t.typed_keys("sh\r");
    t.feed(m("\x1b]133;C;w={N};cmd=sh\x07").as_bytes());
    let probe = t.feed(b"$ ").type_in.unwrap();
    let n = probe_nonce(&probe);
    let out = t.feed(format!(" printf ...\r\n\x1b]133;P;w={n};bash=;zsh=\x07").as_bytes());
    assert!(out.type_in.is_none() && out.to_client.is_empty());
    assert!(t.feed(b"$ ").to_client.is_empty());
    assert_eq!(&t.feed(b"ls\r\n").to_client[..], b"ls\r\n");
    assert_eq!(t.unowned().load(Ordering::Relaxed), 1);
    // `exit`: the login shell speaks, and `sh` ends.
    let back = t.feed(m("\x1b]133;D;0;w={N}\x07").as_bytes());
    assert_eq!(back.finished[0].command.as_deref(), Some("sh"));
    assert_eq!(t.unowned().load(Ordering::Relaxed), 0);
}

/// A command cut at the scripts' limit may have started a shell in what
/// was cut: so it is taken for one, however its length is counted (bash
/// without a multibyte locale cuts 4000 bytes, 2000 characters of `é`);
/// a short command that starts none is not.
#[test]
fn a_command_cut_at_the_limit_may_start_a_shell() {
    for (cmd, unowned) in [
        ("é".repeat(2000), 1),
        ("x".repeat(bootstrap::COMMAND_MAX), 1),
        ("echo hi".to_string(), 0),
    ] {
        let mut t = following();
        t.typed_keys(&format!("{cmd}\r"));
        t.feed(m(&format!("\x1b]133;C;w={{N}};cmd={cmd}\x07")).as_bytes());
        assert_eq!(
            t.unowned().load(Ordering::Relaxed),
            unowned,
            "{} bytes",
            cmd.len()
        );
    }
}
