//! The option tables of `auto`, checked against the real programs (tests
//! only).
//!
//! A table says, for each option it admits, whether the option takes the
//! next word as its value or leaves it to be an operand. A table that is
//! wrong lets a word pass unchecked: an option modelled as taking a value
//! eats the next word, whose own options are then never read
//! (journalctl's `-n`, lsof's `-g`, once). So every spelling the table
//! admits is run with the real program, in the oracle's jail (the
//! program copied there, every other program a stub, nothing real
//! reachable), followed by a marker word, and compared with a spelling
//! whose reading nobody disputes:
//!
//! - a flag, or a short option whose value is optional (only an attached
//!   value counts, so the next word is an operand): `-x MARK` must do
//!   what `-x -- MARK` does;
//! - a short option with a value: `-x MARK` must do what `-xMARK` does;
//! - a long option with a required value: `--xx MARK` must do what
//!   `--xx=MARK` does; one whose value is read only when attached:
//!   `--xx=MARK` must be accepted;
//! - a long flag: `--xx MARK` must do what `--xx -- MARK` does.
//!
//! "Does" is the exit status and everything printed, digits masked (a
//! PID or a time may change between two runs). Every spelling must also
//! draw none of getopt's complaints (an option the program does not
//! know, one that takes no argument, one missing its argument): that is
//! an error the table did not predict.
//!
//! What it leaves out: programs that are scripts (`zgrep`) or are not
//! installed are skipped and named; a program that fails the same way
//! for both spellings (it cannot reach a service in the jail) passes
//! without telling much, which is why the count of pairs is printed.

use crate::oracle::{Oracle, Shell};

use super::getopt::Spec;
use super::read_only::specs;
use super::word::quote;

/// The word after each option: a name no program knows, which reads as
/// an operand, and whose first letter is no program's option.
const MARK: &str = "@walissh-mark";

/// What getopt and its kin print for an option the program does not read
/// as the table does.
const COMPLAINTS: &[&str] = &[
    "unrecognized option",
    "unrecognised option",
    "invalid option",
    "unknown option",
    "illegal option",
    "doesn't allow an argument",
    "does not allow an argument",
    "requires an argument",
    "option requires",
    "ambiguous option",
];

/// Options (`*`: all of a program's) whose reading differs from getopt's
/// in a way the table and its check already model, with why: the
/// comparison would fail for the wrong reason. Skipped, and counted.
const QUIRKS: &[(&str, &str, &str)] = &[
    (
        "journalctl",
        "-n",
        "takes the next word only when it is a number; the check asks unless the value is a count",
    ),
    (
        "getconf",
        "*",
        "reads `--` as a variable name, not as the end of options",
    ),
    ("whereis", "*", "reads `--` as a name to look for"),
    (
        "iostat",
        "*",
        "reads `--` as an option it does not know (sysstat's own parser), not as the end of options",
    ),
    (
        "locale",
        "*",
        "reads `--` as a category name, not as the end of options",
    ),
];

/// One spelling and the spelling it must match.
struct Pair {
    option: String,
    given: Vec<String>,
    like: Vec<String>,
}

fn pairs(spec: &Spec) -> Vec<Pair> {
    let words = |w: &[&str]| -> Vec<String> { w.iter().map(|s| s.to_string()).collect() };
    let mut out = Vec::new();
    for c in spec.flags.chars().chain(spec.optional.chars()) {
        let o = format!("-{c}");
        out.push(Pair {
            given: words(&[&o, MARK]),
            like: words(&[&o, "--", MARK]),
            option: o,
        });
    }
    for c in spec.values.chars() {
        let o = format!("-{c}");
        out.push(Pair {
            given: words(&[&o, MARK]),
            like: words(&[&format!("{o}{MARK}")]),
            option: o,
        });
    }
    for name in spec.long_flags.iter().chain(spec.long_optional) {
        let o = format!("--{name}");
        out.push(Pair {
            given: words(&[&o, MARK]),
            like: words(&[&o, "--", MARK]),
            option: o,
        });
    }
    for name in spec.long_values {
        let o = format!("--{name}");
        let attached = format!("{o}={MARK}");
        if spec.long_required.contains(name) || !spec.long_attached {
            out.push(Pair {
                given: words(&[&o, MARK]),
                like: words(&[&attached]),
                option: o,
            });
        } else {
            out.push(Pair {
                given: words(&[&attached]),
                like: words(&[&attached]),
                option: o,
            });
        }
    }
    out
}

/// Runs the real program with `args`: its exit status and output, digits
/// masked. None when the jail cut the run short.
fn outcome(oracle: &Oracle, exe: &str, args: &[String]) -> Option<String> {
    let mut line = quote(exe);
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    line.push_str(" 2>&1; s=$?; enable echo; echo \"exit $s\"");
    let (_, output) = oracle.run_with_output(Shell::Bash, &line).ok()?;
    Some(
        output
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect(),
    )
}

/// What checking one program's spec found.
#[derive(Default)]
struct Tally {
    checked: usize,
    quirks: usize,
    cut: usize,
    failures: Vec<String>,
}

/// Checks every spelling `spec` admits against the real program `exe`.
fn check(oracle: &Oracle, name: &str, exe: &str, spec: &Spec, tally: &mut Tally) {
    for pair in pairs(spec) {
        let quirk = QUIRKS
            .iter()
            .any(|(n, o, _)| *n == name && (*o == "*" || *o == pair.option));
        if quirk {
            tally.quirks += 1;
            continue;
        }
        let (Some(given), Some(like)) = (
            outcome(oracle, exe, &pair.given),
            outcome(oracle, exe, &pair.like),
        ) else {
            tally.cut += 1;
            continue;
        };
        tally.checked += 1;
        let lower = given.to_lowercase();
        if let Some(c) = COMPLAINTS.iter().find(|c| lower.contains(*c)) {
            tally.failures.push(format!(
                "{name} {}: \"{c}\": {}",
                pair.given.join(" "),
                given.trim()
            ));
        } else if given != like {
            tally.failures.push(format!(
                "{name} {}: {:?}\n    but {}: {:?}",
                pair.given.join(" "),
                given.trim(),
                pair.like.join(" "),
                like.trim()
            ));
        }
    }
}

/// The oracle, with a shorter bound: a program that waits is cut short.
fn oracle() -> Option<Oracle> {
    // No typed runs here: the tables are read with `bash -c`.
    let mut oracle = Oracle::new(None)?;
    oracle.set_timeout(std::time::Duration::from_secs(3));
    Some(oracle)
}

#[test]
fn every_option_the_tables_admit_reads_as_the_program_reads_it() {
    let Some(oracle) = oracle() else {
        eprintln!("skipped: this machine cannot build the oracle's jail");
        return;
    };
    let (mut tally, mut programs, mut skipped) = (Tally::default(), 0, Vec::new());
    for (names, spec) in specs() {
        for name in names {
            let Some(exe) = oracle.install(name) else {
                skipped.push(*name);
                continue;
            };
            programs += 1;
            check(&oracle, name, &exe, &spec, &mut tally);
        }
    }
    eprintln!(
        "tables: {} (program, option) pairs checked against {programs} real programs; \
         {} skipped as known quirks, {} cut short; not installed or scripts: {}",
        tally.checked,
        tally.quirks,
        tally.cut,
        skipped.join(" ")
    );
    // coreutils, procps and util-linux alone are some fifty programs: far
    // fewer means the check looked at almost nothing.
    assert!(
        programs >= 40,
        "only {programs} of the tables' programs are installed"
    );
    // Debian 12 with what .ci/run installs checks 1175 (issue 36's figure):
    // far fewer means a table or the check lost its reach.
    assert!(
        tally.checked >= 1000,
        "only {} pairs checked",
        tally.checked
    );
    assert!(
        tally.cut * 20 <= tally.checked,
        "{} runs cut short",
        tally.cut
    );
    let failures = &tally.failures;
    assert!(
        failures.is_empty(),
        "{} wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The mistakes this check exists for, made on purpose: each is found.
#[test]
fn the_check_finds_a_wrong_table() {
    let Some(oracle) = oracle() else {
        return;
    };
    for (name, wrong) in [
        // a value taken for a flag: `tac -s X FILE` eats X (systemctl's
        // `-t` was this: `-t status restart nginx` restarts nginx)
        ("tac", Spec::short("s", "")),
        // a flag taken for a value: the next word, an option, unread
        ("cat", Spec::short("", "n")),
        // an option the program does not have
        ("ls", Spec::long("", "", &["long"], &[])),
        // a flag taken for a value, in a program that is not GNU's
        ("journalctl", Spec::short("", "k")),
    ] {
        let exe = oracle
            .install(name)
            .expect("coreutils and systemd are installed");
        let mut tally = Tally::default();
        check(&oracle, name, &exe, &wrong, &mut tally);
        assert_eq!(tally.failures.len(), 1, "{name}: {:?}", tally.failures);
    }
}

/// A letter or name listed twice (a flag and a value option at once) is
/// read as the first list that has it: the table's own contradiction,
/// found without running anything (systemctl's `-t` was one; dig's and
/// host's, whose programs are not installed here, too).
#[test]
fn no_option_is_listed_twice() {
    let mut twice = Vec::new();
    for (names, spec) in specs() {
        for c in spec.flags.chars() {
            if spec.values.contains(c) || spec.optional.contains(c) {
                twice.push(format!("{names:?} -{c}"));
            }
        }
        for c in spec.values.chars().filter(|c| spec.optional.contains(*c)) {
            twice.push(format!("{names:?} -{c}"));
        }
        for l in spec.long_flags {
            if spec.long_values.contains(l) || spec.long_optional.contains(l) {
                twice.push(format!("{names:?} --{l}"));
            }
        }
    }
    assert!(twice.is_empty(), "{twice:#?}");
}
