//! The policy held to the shells (test support, beside the oracle):
//! lines are read by the policy and run in the oracle's jail, and what
//! ran is compared with what the policy read. It owns the lines (the
//! corpora of `tests/policy/` and a deterministic stream of generated
//! ones) and the comparison; what it leaves to its callers is the
//! assertion: the crate's tests check the shells, walissh's check typed
//! runs through its own integration.

use std::collections::HashSet;
use std::path::Path;

use super::{Oracle, Shell};
use crate::{AiMode, Policy, Verdict, wrappers};

/// Asked lines checked through the typed path: one in this many (a typed
/// run takes a prompt's round trip).
const TYPED_EVERY: usize = 4;

/// What [`check`] compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// A line the policy runs unasked must run exactly the programs and
    /// argv the policy read, under bash, dash and zsh, and its quoted
    /// script under bash (what runs it) too; for every line it asks about,
    /// every program bash ran must be one the policy saw (and lists before
    /// `Run?`).
    Shells,
    /// An approved line is typed into an interactive bash through the
    /// oracle's integration, one asked line in four: the keystroke path
    /// must run what `bash -c` runs, and nothing the policy did not see.
    Typed,
}

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct Tally {
    pub lines: usize,
    /// Lines run unasked whose runs matched in every shell.
    pub auto_checked: usize,
    /// Asked lines (every one under [`Runs::Shells`]; under
    /// [`Runs::Typed`], one in four is run).
    pub seen_checked: usize,
    pub typed_checked: usize,
    /// Runs the jail cut short (its time bound, on a loaded machine).
    pub unchecked: usize,
    pub failures: Vec<String>,
}

impl Tally {
    /// Fails, naming every mismatch, on any run that did not match what
    /// the policy read, or when more than one run in twenty of `checked`
    /// was cut short (the check would then say little).
    pub fn assert_holds(&self, checked: usize) {
        assert!(
            self.unchecked * 20 <= checked,
            "{} runs cut short",
            self.unchecked
        );
        assert!(self.failures.is_empty(), "{}", self.failures.join("\n"));
    }
}

/// The lines of a corpus file under `tests/policy/`, `#` comments and
/// blank lines left out.
pub fn corpus(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/policy")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// The lines the policy is held to: the diagnostics an SRE runs, the
/// adversarial corpus, and 600 generated lines.
pub fn lines() -> Vec<String> {
    let mut lines = corpus("diagnostics.txt");
    lines.extend(corpus("adversarial.tsv").into_iter().map(|l| {
        l.splitn(3, '\t')
            .nth(2)
            .unwrap_or_else(|| panic!("no line in {l:?}"))
            .to_string()
    }));
    lines.extend(generated(600));
    lines
}

/// Each of `lines`, read by `policy` in `auto`, run by `oracle` as `runs`
/// says. A run the jail cuts short is tried again, then left unchecked and
/// counted; a mismatch is always a failure.
pub fn check(oracle: &Oracle, policy: &Policy, lines: &[String], runs: Runs) -> Tally {
    let mut tally = Tally {
        lines: lines.len(),
        ..Tally::default()
    };
    for line in lines {
        let seen = wrappers::see(line);
        match policy.check(line, AiMode::Auto) {
            Verdict::Run(_) if runs == Runs::Typed => {}
            Verdict::Run(script) => {
                let want: Vec<Vec<String>> = seen
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
                unasked(oracle, line, &script, want, &mut tally);
                tally.auto_checked += 1;
            }
            // Nothing runs.
            Verdict::Deny(_) => {}
            Verdict::Ask(_) => {
                let known: HashSet<String> = seen
                    .runs
                    .iter()
                    .filter_map(|r| r.first().and_then(|w| w.lit.as_deref()).map(base))
                    .collect();
                tally.seen_checked += 1;
                let typed = runs == Runs::Typed && tally.seen_checked.is_multiple_of(TYPED_EVERY);
                if runs == Runs::Shells || typed {
                    asked(oracle, line, &known, typed, &mut tally);
                }
            }
        }
    }
    tally
}

/// A line run unasked, `want` the argv the policy read: in every shell,
/// and its quoted `script` under bash, nothing else runs. `||` and `&&`
/// run what the stubs' exit codes choose, so there only what ran must
/// have been read.
fn unasked(
    oracle: &Oracle,
    line: &str,
    script: &str,
    mut want: Vec<Vec<String>>,
    tally: &mut Tally,
) {
    want.sort();
    let chained = line.contains("||") || line.contains("&&");
    let runs = [
        (Shell::Bash, line),
        (Shell::Zsh, line),
        (Shell::Dash, line),
        (Shell::Bash, script),
    ];
    for (shell, text) in runs {
        if !oracle.has(shell) {
            continue;
        }
        match oracle.run(shell, text).or_else(|_| oracle.run(shell, text)) {
            Ok(mut ran) => {
                ran.sort();
                let mut left = want.clone();
                let extra = ran
                    .iter()
                    .any(|argv| match left.iter().position(|w| w == argv) {
                        Some(i) => {
                            left.remove(i);
                            false
                        }
                        None => true,
                    });
                if extra || (!chained && !left.is_empty()) {
                    tally.failures.push(format!(
                        "{shell:?} {text:?}: ran {ran:?}, policy read {want:?}"
                    ));
                }
            }
            Err(e) => {
                eprintln!("unchecked: {shell:?} {text:?}: {e}");
                tally.unchecked += 1;
            }
        }
    }
}

/// An asked line under bash: every program that ran is one the policy saw
/// (`known`). `typed`: typed into an interactive bash too, where it must
/// run what `bash -c` ran.
fn asked(oracle: &Oracle, line: &str, known: &HashSet<String>, typed: bool, tally: &mut Tally) {
    let Ok(ran) = oracle.run(Shell::Bash, line) else {
        return;
    };
    let unseen = |how: &str, ran: &[Vec<String>], failures: &mut Vec<String>| {
        for argv in ran {
            if !known.contains(&argv[0]) {
                failures.push(format!(
                    "{how} {line:?} ran {argv:?}, which the policy did not see"
                ));
            }
        }
    };
    if !typed {
        unseen("bash", &ran, &mut tally.failures);
        return;
    }
    match oracle.run_typed(line) {
        Ok(typed) => {
            unseen("typed", &typed, &mut tally.failures);
            // `printf` stays a builtin when typed (the integration needs
            // it), so what it evaluates runs there only; process
            // substitutions get other descriptors.
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
            // Process substitutions run on their own: the typed shell may
            // exit (and hang its terminal up) before one has started.
            let racy = line.contains("<(") || line.contains(">(");
            if typed != plain && !line.contains("printf") && !racy {
                tally.failures.push(format!(
                    "typed {line:?} ran {typed:?}, bash -c ran {plain:?}"
                ));
            }
            tally.typed_checked += 1;
        }
        Err(e) => {
            eprintln!("unchecked typed: {line:?}: {e}");
            tally.unchecked += 1;
        }
    }
}

/// Lines built from words a model might use, in every quoting, joined by
/// every operator auto accepts: a deterministic stream, so a failure
/// names its line.
pub fn generated(count: usize) -> Vec<String> {
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
