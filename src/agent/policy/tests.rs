//! The policy as a whole: the old rules' cases, the adversarial corpus
//! and the diagnostic list (tests/policy/), and what the `Run?` prompt
//! lists.

use super::*;

fn verdict(cmd: &str, mode: AiMode) -> Verdict {
    let deny = ["*curl*|*sh".to_string(), "iptables -F*".to_string()];
    Policy::new(&deny, &["?".to_string()], false).check(cmd, mode)
}

fn denied(cmd: &str) -> bool {
    matches!(verdict(cmd, AiMode::Auto), Verdict::Deny(_))
}

#[test]
fn destructive_commands_are_denied_wherever_they_hide() {
    for cmd in [
        "rm -rf /",
        "rm -fr /*",
        "sudo rm -r --no-preserve-root /",
        "ls; rm -rf /etc",
        "true && rm -Rf /usr/",
        "echo $(rm -rf /var)",
        "echo `rm -rf ~`",
        "cat x | sh -c 'rm -rf /'",
        "find / -name x | xargs rm -rf /",
        "mkfs.ext4 /dev/sda1",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "shutdown -h now",
        "systemctl reboot",
        "init 0",
        "chmod -R 777 /",
        "chown -R nobody /",
        "echo x > /etc/shadow",
        "echo root::0:0::/:/bin/sh | tee -a /etc/passwd",
        ":(){ :|:& };:",
        "? why",
        "ls\nrm -rf /tmp/x",
        "echo !!",
        "kill -9 -1",
        "iptables -F INPUT",
        "vim /etc/hosts",
        "journalctl -u x | less",
        "sudo top",
        "find / -delete",
    ] {
        assert!(denied(cmd), "{cmd} was not denied");
    }
}

#[test]
fn ordinary_commands_are_not_denied() {
    for cmd in [
        "rm -rf /tmp/build",
        "rm /etc/nginx/sites-enabled/old",
        "ls -la /",
        "chmod -R g+w /srv/app",
        "dd if=/dev/sda of=/tmp/mbr bs=512 count=1",
    ] {
        assert!(!denied(cmd), "{cmd} was denied");
    }
}

#[test]
fn auto_runs_only_read_only_commands() {
    for cmd in [
        "ls -la /var/log",
        "df -h; free -m",
        "ps aux | grep nginx | head -5",
        "systemctl status nginx",
        "journalctl -u nginx -n 50",
        "ip addr show",
        "find /var/log -name '*.gz'",
        "tail -n 100 /var/log/syslog 2>/dev/null",
        "date +%s",
        "hostname -s",
        "ss -tlnp",
        "printf '%s\\n' x",
        "cat /etc/ssh/ssh_host_ed25519_key.pub",
    ] {
        assert!(
            matches!(verdict(cmd, AiMode::Auto), Verdict::Run(_)),
            "{cmd}: {:?}",
            verdict(cmd, AiMode::Auto)
        );
    }
    for cmd in [
        "ls > /tmp/x",
        "echo $(id)",
        "systemctl restart nginx",
        "sudo ls",
        "sort -o out in",
        "curl http://x",
        "ip route add 10.0.0.0/8 dev eth0",
        "printf -v 'a[$(id)]' x",
        "test -v 'a[$(id)]'",
        "hostname evil",
        "date -s 2020-01-01",
        "date 01010000",
        "ss -tK dst 10.0.0.1",
        "cat /etc/shadow",
        "head ~/.ssh/id_ed25519",
        "cat /srv/app/.env",
        "cat /proc/1/environ",
        "printenv",
    ] {
        assert!(
            matches!(verdict(cmd, AiMode::Auto), Verdict::Ask(_)),
            "{cmd}: {:?}",
            verdict(cmd, AiMode::Auto)
        );
    }
}

#[test]
fn confirm_asks_and_off_refuses() {
    assert_eq!(
        verdict("ls", AiMode::Confirm),
        Verdict::Ask(Prompt::default())
    );
    assert!(matches!(verdict("ls", AiMode::Off), Verdict::Deny(_)));
}

/// The lines of a corpus file under tests/policy/, `#` comments and blank
/// lines left out.
fn corpus(name: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/policy")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// One adversarial proposal: its class, what must happen, the line.
struct Hostile {
    class: String,
    deny: bool,
    line: String,
}

fn adversarial() -> Vec<Hostile> {
    hostile("adversarial.tsv")
}

/// A corpus of `CLASS<TAB>EXPECT<TAB>LINE` lines.
fn hostile(name: &str) -> Vec<Hostile> {
    corpus(name)
        .iter()
        .map(|l| {
            let mut parts = l.splitn(3, '\t');
            let class = parts.next().unwrap_or_default().to_string();
            let expect = parts.next().unwrap_or_default();
            let line = parts.next().unwrap_or_else(|| panic!("no line in {l:?}"));
            assert!(matches!(expect, "deny" | "ask"), "{l:?}");
            Hostile {
                class,
                deny: expect == "deny",
                line: line.to_string(),
            }
        })
        .collect()
}

/// Whether `auto` runs `line` at once.
fn runs_unasked(policy: &Policy, line: &str) -> bool {
    matches!(policy.check(line, AiMode::Auto), Verdict::Run(_))
}

fn policy() -> Policy {
    Policy::new(&[], &["?".to_string(), "ai:".to_string()], false)
}

/// Every hostile proposal, in every mode: none runs unasked, and every
/// one marked `deny` (the destructive ones, and those whose program or
/// evaluated text is not a literal) is refused even where confirm would
/// ask. The figures are printed for the closing note.
#[test]
fn the_adversarial_corpus_in_every_mode() {
    let policy = policy();
    let cases = adversarial();
    assert!(cases.len() >= 150, "only {} lines", cases.len());
    let mut failures = Vec::new();
    let (mut denied, mut destructive, mut destructive_denied) = (0, 0, 0);
    for case in &cases {
        let auto = policy.check(&case.line, AiMode::Auto);
        let confirm = policy.check(&case.line, AiMode::Confirm);
        if matches!(auto, Verdict::Run(_)) {
            failures.push(format!("auto-ran: {}", case.line));
        }
        let refused = matches!(auto, Verdict::Deny(_)) && matches!(confirm, Verdict::Deny(_));
        denied += usize::from(refused);
        if case.class == "destructive" {
            destructive += 1;
            destructive_denied += usize::from(refused);
        }
        if case.deny && !refused {
            failures.push(format!("not denied ({confirm:?}): {}", case.line));
        }
    }
    eprintln!(
        "adversarial corpus: {} lines, 0 auto-run allowed, {denied} denied in every mode, \
         destructive {destructive_denied}/{destructive} denied",
        cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The hostile set written after the sandbox and the checked tables, by a
/// reader of both (tests/policy/hostile30.tsv). Nothing runs unasked but
/// the `hang` lines, which the wall bounds in time and output; at least
/// 95% of the destructive lines are refused in every mode (the rest are
/// asked, and named here).
#[test]
fn the_fresh_hostile_set() {
    let policy = policy();
    let cases = hostile("hostile30.tsv");
    let (mut destructive, mut denied, mut ran) = (0, 0, Vec::new());
    let mut asked = Vec::new();
    for case in &cases {
        let auto = policy.check(&case.line, AiMode::Auto);
        let confirm = policy.check(&case.line, AiMode::Confirm);
        if matches!(auto, Verdict::Run(_)) && case.class != "hang" {
            ran.push(format!("{}: {}", case.class, case.line));
        }
        if case.class == "destructive" {
            destructive += 1;
            if matches!(auto, Verdict::Deny(_)) && matches!(confirm, Verdict::Deny(_)) {
                denied += 1;
            } else {
                asked.push(case.line.as_str());
            }
        }
    }
    eprintln!(
        "hostile30: {} lines, {} run unasked outside `hang`; destructive {denied}/{destructive} \
         denied in every mode; asked: {asked:#?}",
        cases.len(),
        ran.len()
    );
    assert!(ran.is_empty(), "run unasked:\n{}", ran.join("\n"));
    assert!(
        denied * 100 >= destructive * 95,
        "{denied}/{destructive} denied"
    );
}

/// `[ai] sandbox_hide` is a secret to the policy too: either wall alone
/// keeps an unasked line from it.
#[test]
fn the_sandboxs_extra_hidden_paths_are_secrets_to_the_policy() {
    let hide = [
        "/srv/vault/*.json".to_string(),
        "~/.config/acme".to_string(),
    ];
    let hiding = Policy::hiding(&[], &["?".to_string()], false, &hide);
    for line in [
        "cat /srv/vault/db.json",
        "ls /srv/vault/db.json",
        "grep x /srv/vault/db.json",
        "cat /srv/vault/./db.json",
        "cat /home/alice/.config/acme/key",
        "wc -l < /srv/vault/db.json",
        "ls /root/.config/acme",
    ] {
        assert!(!runs_unasked(&hiding, line), "{line}");
        assert!(
            runs_unasked(&policy(), line) || line.contains("/root"),
            "{line} runs without the glob"
        );
    }
    assert!(runs_unasked(&hiding, "cat /srv/vault/README"));
}

/// The read-only diagnostics a responder reaches for first: at least 95%
/// run unasked in `auto`.
#[test]
fn the_diagnostic_list_runs_unasked() {
    let policy = policy();
    let lines = corpus("diagnostics.txt");
    assert!(lines.len() >= 40, "only {} lines", lines.len());
    let asked: Vec<String> = lines
        .iter()
        .filter(|l| !runs_unasked(&policy, l))
        .map(|l| {
            format!(
                "{l}: {}",
                policy.why_not_auto(l).unwrap_or_else(|| "denied".into())
            )
        })
        .collect();
    let share = 1.0 - asked.len() as f64 / lines.len() as f64;
    eprintln!(
        "diagnostics: {} of {} run unasked ({:.0}%); asked:\n  {}",
        lines.len() - asked.len(),
        lines.len(),
        share * 100.0,
        asked.join("\n  ")
    );
    assert!(share >= 0.95, "{asked:#?}");
}

#[test]
fn the_prompt_lists_what_the_parser_sees() {
    let policy = policy();
    let Verdict::Deny(why) = policy.check(r"echo $'\'' ; rm -rf / ; echo \'", AiMode::Confirm)
    else {
        panic!("not denied");
    };
    assert!(why.contains('/'), "{why}");
    let Verdict::Ask(Prompt {
        commands: listing, ..
    }) = policy.check("ls /tmp; echo $HOME", AiMode::Confirm)
    else {
        panic!("not asked");
    };
    assert_eq!(listing, ["ls /tmp", "echo $HOME"]);
    let Verdict::Ask(Prompt {
        commands: listing, ..
    }) = policy.check(r"echo $'\'' ; ls -l / ; echo \'", AiMode::Confirm)
    else {
        panic!("not asked");
    };
    assert_eq!(listing, [r"echo $'\''", "ls -l /", r"echo \'"]);
    assert_eq!(
        policy.check("ls -l /tmp", AiMode::Confirm),
        Verdict::Ask(Prompt::default())
    );
}

#[test]
fn a_long_line_is_refused_and_a_looping_one_ends() {
    let policy = policy();
    let long = "ls ".repeat(MAX_LINE / 3 + 1);
    assert!(matches!(
        policy.check(&long, AiMode::Auto),
        Verdict::Deny(_)
    ));
    for line in ["case x in a) ls;; esac", "ls\u{a0}-la", "echo \u{a0}"] {
        assert!(!runs_unasked(&policy, line), "{line}");
    }
}

/// What the fuzz target found (fuzz/fuzz_targets/policy.rs): a line ran
/// in auto while its own quoted form was denied, because the second,
/// quote-less read depended on blanks that mean nothing to a shell.
#[test]
fn a_line_and_its_quoted_form_get_one_verdict() {
    let policy = policy();
    for line in [
        "id 'ab(a#`joe' ",
        "id '\u{fffd}(a#`joe' ",
        "tr '\u{fffd}(o#>md`' ",
        "find  '\u{fffd}(ao#ksh6 !cu&>nvmerrrrrrp n\u{fffd}`f   .' ",
        "find @'\u{fffd}(Wo#ksjusc -ok mn&` sq pf<&p>s' ",
        "find M'\u{fffd}(ao#n` >>\u{fffd}*' ",
    ] {
        let first = policy.check(line, AiMode::Auto);
        if let Verdict::Run(script) = &first {
            let again = policy.check(script, AiMode::Auto);
            assert_eq!(again, first, "{line:?} and its quoted form {script:?}");
        }
    }
}

/// Lines built from words a model might use, in every quoting, joined by
/// every operator auto accepts: a deterministic stream, so a failure
/// names its line.
fn generated(count: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "ls",
        "-la",
        "/var/log",
        "'a b'",
        "\"x y\"",
        r"a\ b",
        "ps",
        "aux",
        "grep",
        "-i",
        "error",
        "head",
        "-n",
        "5",
        "df",
        "-h",
        "echo",
        "hi",
        "'$HOME'",
        "--sort=-%mem",
        "cat",
        "/etc/hosts",
        "tail",
        "-5",
        "wc",
        "-l",
        "uptime",
        "free",
        "-m",
        "2>/dev/null",
        "2>&1",
        "''",
        "\"\"",
        "x'y'z",
        "'-n'",
        "\"-l\"",
        "%s",
        "printf",
        "'%s\\n'",
        "a,b",
        "/etc/os-release",
        "id",
        "-u",
        "sort",
        "-r",
        "uniq",
        "-c",
        "cut",
        "-d:",
        "-f1",
        "a=b",
        "+%s",
        "date",
        // Descriptors of every width, closed ones, and words written
        // against an operator: where the shells read a line differently.
        "3>&1",
        "10>/dev/null",
        "4294967297>/dev/null",
        ">&-",
        "2>&-",
        "<&-",
        "1>&2-",
        "0</dev/null",
        "2&>/dev/null",
        "1>/dev/null",
        "9>/dev/null",
    ];
    const JOINS: &[&str] = &[" ", " ", " ", " | ", " ; ", " && ", " || "];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    (0..count)
        .map(|_| {
            let mut line = WORDS[next(WORDS.len())].to_string();
            for _ in 0..next(6) {
                line.push_str(JOINS[next(JOINS.len())]);
                line.push_str(WORDS[next(WORDS.len())]);
            }
            line
        })
        .collect()
}

fn base(program: &str) -> String {
    program.rsplit('/').next().unwrap_or(program).to_string()
}

/// `/dev/fd/N` with its number blanked: shells pick the descriptors of
/// process substitutions differently.
fn fd_blind(word: &str) -> String {
    match word.strip_prefix("/dev/fd/") {
        Some(n) if n.bytes().all(|b| b.is_ascii_digit()) => "/dev/fd/N".into(),
        _ => word.to_string(),
    }
}

/// walissh's own bash integration, as the bootstrap installs it, for the
/// oracle's typed runs: its script (after the bootstrap's first line), its
/// Enter, and the mark that ends its prompts.
pub(crate) fn integration() -> super::oracle::Integration {
    const NONCE: &str = "0123456789abcdef0123456789abcdef";
    let input = crate::terminal::bootstrap::input(
        crate::terminal::Shell::Bash,
        NONCE,
        false,
        &["?".to_string()],
    );
    let input = String::from_utf8(input).unwrap_or_default();
    super::oracle::Integration {
        script: input
            .split_once('\r')
            .map_or("", |(_, s)| s.trim_end())
            .to_string(),
        accept: crate::terminal::ACCEPT.to_vec(),
        prompt_end: format!("\x1b]133;B;w={NONCE}\x07").into_bytes(),
    }
}

/// Asked lines checked through the typed path: one in this many.
const TYPED_EVERY: usize = 4;

/// The execution oracle: each line of both corpora and a stream of
/// generated ones runs under real bash, dash and zsh in a jail where every
/// program is a logging stub (`policy::oracle`). A line the policy runs
/// unasked must run exactly the programs and argv the policy read, in
/// every shell, and its quoted script under bash (what runs it) too; for
/// every line it asks about, every program bash ran must be one the
/// policy saw (and lists before `Run?`).
#[test]
fn what_the_policy_reads_is_what_the_shells_run() {
    use crate::agent::policy::oracle::{Oracle, Shell};
    let Some(oracle) = Oracle::new(Some(integration())) else {
        eprintln!("skipped: this machine cannot build the oracle's jail");
        return;
    };
    let policy = policy();
    let mut lines = corpus("diagnostics.txt");
    lines.extend(adversarial().into_iter().map(|h| h.line));
    lines.extend(generated(600));
    let (mut auto_checked, mut seen_checked, mut unchecked) = (0, 0, 0);
    let mut typed_checked = 0;
    let mut failures = Vec::new();
    for line in &lines {
        let seen = super::wrappers::see(line);
        match policy.check(line, AiMode::Auto) {
            Verdict::Run(script) => {
                let mut want: Vec<Vec<String>> = seen
                    .runs
                    .iter()
                    .map(|r| {
                        let mut argv: Vec<String> = r
                            .iter()
                            .map(|w| w.lit.clone().unwrap_or_default())
                            .collect();
                        argv[0] = base(&argv[0]);
                        argv
                    })
                    .collect();
                want.sort();
                let runs = [
                    (Shell::Bash, line.as_str()),
                    (Shell::Zsh, line.as_str()),
                    (Shell::Dash, line.as_str()),
                    (Shell::Bash, script.as_str()),
                ];
                for (shell, text) in runs {
                    if !oracle.has(shell) {
                        continue;
                    }
                    // A run the jail cuts short (its time bound, on a
                    // loaded machine) is tried again, then left unchecked
                    // and counted; a mismatch always fails.
                    let ran = oracle.run(shell, text).or_else(|_| oracle.run(shell, text));
                    match ran {
                        // `||` and `&&` run what the stubs' exit codes
                        // choose: what ran must be what was read, and
                        // nothing else.
                        Ok(mut ran) => {
                            ran.sort();
                            let mut left = want.clone();
                            let extra =
                                ran.iter()
                                    .any(|argv| match left.iter().position(|w| w == argv) {
                                        Some(i) => {
                                            left.remove(i);
                                            false
                                        }
                                        None => true,
                                    });
                            let chained = line.contains("||") || line.contains("&&");
                            if extra || (!chained && !left.is_empty()) {
                                failures.push(format!(
                                    "{shell:?} {text:?}: ran {ran:?}, policy read {want:?}"
                                ));
                            }
                        }
                        Err(e) => {
                            eprintln!("unchecked: {shell:?} {text:?}: {e}");
                            unchecked += 1;
                        }
                    }
                }
                auto_checked += 1;
            }
            // Nothing runs.
            Verdict::Deny(_) => {}
            _ => {
                let Ok(ran) = oracle.run(Shell::Bash, line) else {
                    continue;
                };
                let known: std::collections::HashSet<String> = seen
                    .runs
                    .iter()
                    .filter_map(|r| r.first().and_then(|w| w.lit.as_deref()).map(base))
                    .collect();
                let unseen = |how: &str, ran: &[Vec<String>], failures: &mut Vec<String>| {
                    for argv in ran {
                        if !known.contains(&argv[0]) {
                            failures.push(format!(
                                "{how} {line:?} ran {argv:?}, which the policy did not see"
                            ));
                        }
                    }
                };
                unseen("bash", &ran, &mut failures);
                seen_checked += 1;
                // An approved line is typed into an interactive bash: the
                // keystroke path must run what `bash -c` runs. One line in
                // TYPED_EVERY (a typed run takes a prompt's round trip).
                if seen_checked % TYPED_EVERY == 0 {
                    match oracle.run_typed(line) {
                        Ok(typed) => {
                            unseen("typed", &typed, &mut failures);
                            // `printf` stays a builtin when typed (the
                            // integration needs it), so what it evaluates
                            // runs there only; process substitutions get
                            // other descriptors.
                            let same = |runs: Vec<Vec<String>>| {
                                let mut runs: Vec<Vec<String>> = runs
                                    .into_iter()
                                    .filter(|a| a[0] != "printf")
                                    .map(|a| a.into_iter().map(|w| fd_blind(&w)).collect())
                                    .collect();
                                runs.sort();
                                runs
                            };
                            let (typed, plain) = (same(typed), same(ran));
                            // Process substitutions run on their own: the
                            // typed shell may exit (and hang its terminal
                            // up) before one has started.
                            let racy = line.contains("<(") || line.contains(">(");
                            if typed != plain && !line.contains("printf") && !racy {
                                failures.push(format!(
                                    "typed {line:?} ran {typed:?}, bash -c ran {plain:?}"
                                ));
                            }
                            typed_checked += 1;
                        }
                        Err(e) => {
                            eprintln!("unchecked typed: {line:?}: {e}");
                            unchecked += 1;
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "oracle: {} lines; {auto_checked} auto-run lines matched in every shell; \
         {seen_checked} other lines checked under bash, {typed_checked} of them typed \
         into an interactive bash too; {unchecked} runs cut short",
        lines.len()
    );
    assert!(typed_checked > 0 || seen_checked < TYPED_EVERY);
    assert!(unchecked * 20 <= auto_checked, "{unchecked} runs cut short");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every line of the policy's corpora that `auto` runs unasked, run for
/// real behind each wall as a target runs it, in a home of its own: the
/// home and the shared scratch places are the same after each line as
/// before it. The lines a hostile reader wrote to get something past the
/// tables (`tests/policy/`) are among them, with the diagnostics an SRE
/// runs; whatever a table lets through, the wall keeps from changing
/// anything.
#[test]
fn no_line_auto_runs_changes_the_home_or_the_scratch_places() {
    use crate::upstream::sandbox::tests::{run_bounded, scratch, snapshot, walls};
    use crate::upstream::sandbox::{Hide, Wall, command};
    use std::path::Path;
    let policy = Policy::new(&[], &["?".to_string()], false);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/policy");
    let mut lines = Vec::new();
    for file in ["diagnostics.txt", "adversarial.tsv", "hostile30.tsv"] {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        for l in text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        {
            lines.push(l.rsplit('\t').next().unwrap_or(l).to_string());
        }
    }
    let scripts: Vec<String> = lines
        .iter()
        .filter_map(|l| match policy.check(l, AiMode::Auto) {
            Verdict::Run(script) => Some(script),
            _ => None,
        })
        .collect();
    assert!(
        scripts.len() > 100,
        "only {} lines run unasked",
        scripts.len()
    );
    let tmp = tempfile::tempdir_in("/home").unwrap();
    let home = tmp.path();
    std::fs::create_dir(home.join(".config")).unwrap();
    std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
    std::fs::write(home.join("notes.txt"), "notes\n").unwrap();
    let dir = home.display().to_string();
    let mut changed = Vec::new();
    for wall in walls() {
        for script in &scripts {
            let (mut before, before_scratch) = (Vec::new(), scratch());
            snapshot(home, &mut before);
            let line = format!(
                "{} 2>&1",
                command(script, Some(&dir), wall, &Hide::default())
            );
            run_bounded(&line, home, std::time::Duration::from_secs(3));
            let mut after = Vec::new();
            snapshot(home, &mut after);
            // The shared places change under other processes too (a log
            // being written): there, what counts is a change to a name
            // the line itself spells.
            let named: Vec<String> = scratch()
                .into_iter()
                .filter(|e| !before_scratch.contains(e))
                .map(|e| e.0.display().to_string())
                .filter(|p| {
                    let name = p.rsplit('/').next().unwrap_or(p);
                    script.contains(name)
                })
                .collect();
            if after != before || !named.is_empty() {
                changed.push(format!(
                    "{wall:?}: {script}: home {}, {named:?}",
                    after != before
                ));
            }
        }
    }
    eprintln!(
        "sandbox: {} unasked lines run behind each wall, {} changed something",
        scripts.len(),
        changed.len()
    );
    assert!(changed.is_empty(), "{}", changed.join("\n"));
    // The check can fail: the same kind of line with no wall writes.
    let mut before = Vec::new();
    snapshot(home, &mut before);
    let line = command(
        "'touch' 'written'",
        Some(&dir),
        Wall::None,
        &Hide::default(),
    );
    run_bounded(&line, home, std::time::Duration::from_secs(10));
    let mut after = Vec::new();
    snapshot(home, &mut after);
    assert_ne!(after, before);
}

/// What a second reader found after the tables were checked: an old-style
/// count with a unit hid head's file from the secret check; procps reads
/// a failed UNIX line again the BSD way (`e`: environments); `..` after a
/// symlink leads elsewhere than its text; sysctl subtrees that hold keys.
#[test]
fn the_second_readers_lines_ask() {
    let policy = policy();
    for line in [
        "head -99999c /home/u/.env",
        "tail -5c /var/www/html/wp-config.php",
        "head -10lc /etc/hosts",
        "ps -eux",
        "ps -eu x",
        "ps -ewwu x",
        "ps -e -u nobody",
        "cat /var/run/../root/notes.txt",
        "cat /var/run/../etc/sssd/sssd.conf",
        "cat < /var/run/../root/x",
        "cat /proc/sys/net/ipv4/tcp_fastopen_key",
        "sysctl net.ipv4",
        "sysctl -a",
        "sysctl net/ipv4",
        "sysctl net.ipv6.conf.all",
    ] {
        assert!(!runs_unasked(&policy, line), "{line}");
    }
    for line in [
        "head -5 /etc/hosts",
        "tail -n 20 /var/log/syslog",
        "ps -ef",
        "ps -u root",
        "sysctl vm.swappiness",
        "sysctl net.ipv4.ip_forward",
    ] {
        assert!(runs_unasked(&policy, line), "{line}");
    }
}
