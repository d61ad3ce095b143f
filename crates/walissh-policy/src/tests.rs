//! The policy as a whole: the old rules' cases, the adversarial corpus
//! and the diagnostic list (tests/policy/), and what the `Run?` prompt
//! lists.

use super::*;
use crate::oracle::conformance::corpus;

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
        // A backslash and a backtick the quoting brought together.
        "ls -la /v 's: 'a'\\''`$('r -rf //RRRRRRRog",
    ] {
        let first = policy.check(line, AiMode::Auto);
        if let Verdict::Run(script) = &first {
            let again = policy.check(script, AiMode::Auto);
            assert_eq!(again, first, "{line:?} and its quoted form {script:?}");
        }
    }
}

/// The execution oracle (`oracle::conformance`): each line of both
/// corpora and a stream of generated ones runs under real bash, dash and
/// zsh in a jail where every program is a logging stub. A line the policy
/// runs unasked must run exactly the programs and argv the policy read,
/// in every shell, and its quoted script under bash (what runs it) too;
/// for every line it asks about, every program bash ran must be one the
/// policy saw (and lists before `Run?`). walissh's tests type the asked
/// lines through its own integration.
#[test]
fn what_the_policy_reads_is_what_the_shells_run() {
    use crate::oracle::Oracle;
    use crate::oracle::conformance::{self, Runs};
    let Some(oracle) = Oracle::new(None) else {
        eprintln!("skipped: this machine cannot build the oracle's jail");
        return;
    };
    let t = conformance::check(&oracle, &policy(), &conformance::lines(), Runs::Shells);
    eprintln!(
        "oracle: {} lines; {} auto-run lines matched in every shell; \
         {} other lines checked under bash; {} runs cut short",
        t.lines, t.auto_checked, t.seen_checked, t.unchecked
    );
    assert!(t.auto_checked > 100, "{} lines run unasked", t.auto_checked);
    t.assert_holds(t.auto_checked);
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

/// tr's sets, held to the real tr: every set `auto` runs writes only
/// printable characters, newlines and tabs (a range from an escape, `\n-~`,
/// ran through ESC before it was read as one).
#[test]
fn what_tr_runs_unasked_writes_no_control_character() {
    let policy = policy();
    let (mut ran, mut asked) = (0, 0);
    for set in [
        r"\n-~", r"\t-~", r"\a", r"\033", r"\r", r"\v", r"\f", r"\b", r"\e", r"\x1b", r"\n", r"\t",
        r"\\", r"\\-~", r"A-Z", r"\n\t", r"[a*3]", r"a-z", r" -~",
    ] {
        if !runs_unasked(&policy, &format!("tr a-z '{set}'")) {
            asked += 1;
            continue;
        }
        ran += 1;
        let mut tr = std::process::Command::new("tr")
            .args(["a-z", set])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("tr runs");
        use std::io::Write as _;
        let mut input = tr.stdin.take().unwrap();
        input.write_all(b"abcdefghijklmnopqrstuvwxyz").unwrap();
        drop(input);
        let out = tr.wait_with_output().unwrap().stdout;
        assert!(
            out.iter()
                .all(|&b| b == b'\n' || b == b'\t' || (0x20..0x7f).contains(&b)),
            "tr a-z '{set}' ran unasked and wrote {out:?}"
        );
    }
    assert!(ran >= 5 && asked >= 5, "{ran} ran, {asked} asked");
}

/// `[ai] four_eyes`: a glob names a command however the line spells,
/// wraps or orders it, and a line that may run it in a way the parser
/// does not read waits too (the hostile review of issue 35: options
/// before the subcommand, interpreters, commands in options, the loader,
/// a copied binary, a script file).
#[test]
fn four_eyes_globs_see_through_spellings_and_wrappers() {
    let globs = Globs::new(&[
        "systemctl restart *".into(),
        "reboot".into(),
        "kubectl delete *".into(),
    ])
    .unwrap();
    for line in [
        "systemctl restart nginx",
        "  systemctl restart nginx  ",
        "sudo systemctl restart nginx",
        "sudo -u root /usr/bin/systemctl restart nginx",
        "env FOO=1 systemctl 'restart' \"nginx\"",
        "systemctl\\ restart nginx; ls",
        "ls && /sbin/reboot",
        "sh -c 'systemctl restart nginx'",
        "systemctl $ACTION nginx",
        "$CMD restart nginx",
        "eval \"$X\"",
        "systemctl restart nginx | cat",
        "nice -n 5 systemctl restart nginx",
        // Options before the subcommand.
        "systemctl -q restart nginx",
        "systemctl --no-block restart nginx",
        "kubectl -n prod delete pod x",
        "kubectl -v=1 delete pod x",
        // The program named elsewhere than as a command.
        "python3 -c 'import os; os.system(\"systemctl restart nginx\")'",
        "perl -e 'system(\"systemctl restart nginx\")'",
        "awk 'BEGIN{system(\"systemctl restart nginx\")}'",
        "ssh -o ProxyCommand='systemctl restart nginx' localhost true",
        "GIT_SSH_COMMAND='systemctl restart nginx' git fetch",
        "/lib64/ld-linux-x86-64.so.2 /usr/bin/systemctl restart nginx",
        "cp /usr/bin/systemctl /tmp/sc",
        "printf 'systemctl restart nginx\\n' > /tmp/x; sh /tmp/x",
        "echo systemctl restart nginx",
        // Code the parser does not read, whatever it names.
        "python3 -c 'import os; os.system(\"system\"+\"ctl restart nginx\")'",
        "sh /tmp/x",
        "/tmp/sc restart nginx",
        "./sc restart nginx",
        "BASH_ENV=/tmp/x bash -c true",
    ] {
        assert!(globs.matches(line), "{line:?} should need four eyes");
    }
    for line in [
        "systemctl status nginx",
        "sudo systemctl status nginx",
        "/usr/bin/systemctl is-active nginx",
        "systemctl -q is-active nginx",
        "ls -l /etc",
        "journalctl -u nginx",
        "rebooted",
        "df -h; uptime",
        "kubectl get pods -n prod",
        "cat /etc/systemd/system/nginx.service",
    ] {
        assert!(!globs.matches(line), "{line:?} should not need four eyes");
    }
    assert!(!Globs::default().matches("reboot"));
    assert!(Globs::new(&["[".into()]).is_err());
}
