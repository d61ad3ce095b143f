//! Fuzzes the agent's approval policy (src/agent/policy/): the line read
//! with tree-sitter-bash, wrappers looked through, deny rules, the `auto`
//! allow-list. On any line it must never panic; `Run` comes only in
//! `auto`; the quoted script a `Run` gives is itself a `Run` (the same
//! script again) with as many commands as the line; and what `confirm`
//! denies, `auto` denies too.
//!
//! Run: cargo +nightly fuzz run policy (from the repository's top), with
//! the seeds in fuzz/corpus/policy/.

#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;

/// What the policy needs of the crate: `crate::config::AiMode`, with the
/// variants of the real enum (src/config.rs).
mod config {
    #[allow(dead_code)]
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub enum AiMode {
        Off,
        #[default]
        Confirm,
        Auto,
    }
}

#[path = "../../src/agent/policy/mod.rs"]
#[allow(dead_code)]
mod policy;

// A second copy of the parser, to count a line's commands: the policy's
// own modules are private to it.
#[path = "../../src/agent/policy/parse.rs"]
#[allow(dead_code)]
mod parse;
#[path = "../../src/agent/policy/word.rs"]
#[allow(dead_code)]
mod word;

use config::AiMode;
use policy::{Policy, Verdict};

/// As in the policy's own tests: two deny globs, the default prefixes.
fn policy(network: bool) -> Policy {
    let deny = ["*curl*|*sh".to_string(), "iptables -F*".to_string()];
    Policy::new(&deny, &["?".to_string(), "ai:".to_string()], network)
}

static POLICY: LazyLock<Policy> = LazyLock::new(|| policy(false));
static NETWORK: LazyLock<Policy> = LazyLock::new(|| policy(true));

/// A verdict that depends on the clock: the parse ran out of its time
/// budget (possible on a loaded machine). Comparisons skip those.
fn timed_out(v: &Verdict) -> bool {
    matches!(v, Verdict::Deny(why) if why.contains("too long to read"))
}

/// The number of commands in `line`, `None` when its parse gave up.
fn commands(line: &str) -> Option<usize> {
    let s = parse::parse(line);
    (!s.gave_up).then_some(s.commands.len())
}

fn check_auto_run(p: &Policy, line: &str, auto: &Verdict) {
    let Verdict::Run(script) = auto else { return };
    let again = p.check(script, AiMode::Auto);
    if timed_out(&again) {
        return;
    }
    assert_eq!(
        again,
        Verdict::Run(script.clone()),
        "the quoted form of {line:?} is not run as itself"
    );
    if let (Some(a), Some(b)) = (commands(line), commands(script)) {
        assert_eq!(
            a, b,
            "{line:?} and its quoted form {script:?} differ in commands"
        );
    }
}

/// What `auto` says of `line` under `p` keeps the rules: what confirm
/// denied it denies, and what it runs is itself run as is.
fn auto_holds(p: &Policy, line: &str, confirm: &Verdict) {
    let auto = p.check(line, AiMode::Auto);
    if matches!(confirm, Verdict::Deny(_)) && !timed_out(confirm) && !timed_out(&auto) {
        assert!(
            matches!(auto, Verdict::Deny(_)),
            "confirm denied {line:?} ({confirm:?}) but auto said {auto:?}"
        );
    }
    check_auto_run(p, line, &auto);
}

fuzz_target!(|data: &[u8]| {
    let line = &*String::from_utf8_lossy(data);
    let p = &*POLICY;

    let off = p.check(line, AiMode::Off);
    assert!(matches!(off, Verdict::Deny(_)), "off did not deny {line:?}");
    let confirm = p.check(line, AiMode::Confirm);
    assert!(!matches!(confirm, Verdict::Run(_)), "confirm ran {line:?}");
    auto_holds(p, line, &confirm);
    // With `auto_network` on, more lines run unasked; the same rules hold.
    auto_holds(&NETWORK, line, &confirm);
});
