//! walissh's approval policy for commands the agent proposes, as a
//! library (see the README): enforced in code on the parsed command line,
//! never by asking the model.
//!
//! A line is read with bash's grammar (`parse`), and everything it runs
//! is found, wrappers and inner scripts included (`wrappers`). Then, in
//! this order:
//! - a line walissh cannot type or read safely, or whose program or
//!   evaluated text is not a literal, is **denied**: walissh cannot say
//!   what it would run;
//! - a line any of whose commands or redirections breaks a destructive
//!   rule (`deny`) or an `[ai] deny` glob is **denied**, in every mode;
//! - in `auto`, a line that passes the allow-list all the way down
//!   (`read_only`) **runs** unasked, as the same words quoted one by one;
//! - everything else **asks**, listing what the parser sees when the
//!   line holds more than one command or anything not a plain literal.
//!
//! The check is total and bounded: a line over [`MAX_LINE`] is refused,
//! parsing has a time budget, and reading through wrappers a word budget.
//! [`Policy::check_off_worker`] runs it on a blocking thread, so even a
//! bug in it cannot stall other sessions.
//!
//! What it leaves to others: where the modes and globs come from (walissh's
//! config), asking the user and running the command (walissh's agent and
//! session), and the second wall a command that runs unasked goes behind
//! (walissh's `upstream::sandbox`, which hides the same [`HIDDEN`] places).
//! The execution oracle (`oracle`, with the `oracle` feature) is test
//! support: it runs lines under real shells in a jail of logging stubs.

mod deny;
mod effects;
mod getopt;
mod globs;
mod parse;
mod paths;
mod read_only;
mod typing;
mod word;
mod wrappers;

pub use globs::Globs;
pub use paths::HIDDEN;
pub use typing::invisible;

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

/// A user's agent mode (`ai` in the config), from the strictest to the
/// most permissive (the order `min` uses).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AiMode {
    /// The agent refuses every command.
    Off,
    /// Every command that is not denied asks first.
    #[default]
    Confirm,
    /// Read-only commands on the allow-list run unasked, behind a wall.
    Auto,
}

/// What the policy says about a proposed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Never run, never offered; the reason goes back to the model.
    Deny(String),
    /// Show it and ask `Run? [y/N/e]`, after the commands the parser sees
    /// and what it changes in the user's shell.
    Ask(Prompt),
    /// Run without asking: the line with every word single-quoted, for a
    /// shell of walissh's own (no aliases, functions or rc files).
    Run(String),
}

/// What a `Run?` prompt shows before the question.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompt {
    /// The commands the parser sees (empty when the line is one command
    /// of plain literals: the line itself says it all).
    pub commands: Vec<String>,
    /// One line on what else it changes in the user's shell, if anything.
    pub changes: Option<String>,
}

/// Longest line the policy reads.
pub const MAX_LINE: usize = 16 * 1024;

/// How long a check may take on its blocking thread before the line is
/// refused. Parsing gives up well before; this is the last line.
const CHECK_BUDGET: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct Policy {
    rules: Arc<Rules>,
}

struct Rules {
    deny: Vec<glob::Pattern>,
    /// `[ai] prefixes`: a command typed at the prompt that starts with one
    /// would be caught as a question instead of run.
    prefixes: Vec<String>,
    /// `[ai] auto_network`: name lookups and connections may run unasked.
    network: bool,
    /// `[ai] sandbox_hide`: read as secrets too, so that either wall alone
    /// keeps them from an unasked line.
    hidden: Vec<glob::Pattern>,
}

impl Policy {
    /// `deny` are the `[ai] deny` globs (validated by the config).
    pub fn new(deny: &[String], prefixes: &[String], network: bool) -> Policy {
        Policy::hiding(deny, prefixes, network, &[])
    }

    /// [`Policy::new`], with the `[ai] sandbox_hide` globs.
    pub fn hiding(
        deny: &[String],
        prefixes: &[String],
        network: bool,
        hidden: &[String],
    ) -> Policy {
        Policy {
            rules: Arc::new(Rules {
                deny: deny
                    .iter()
                    .filter_map(|d| glob::Pattern::new(d).ok())
                    .collect(),
                prefixes: prefixes.to_vec(),
                network,
                hidden: paths::hiding(hidden.iter().map(String::as_str)),
            }),
        }
    }

    /// [`Policy::check`] on a blocking thread, within a time budget.
    pub async fn check_off_worker(&self, command: &str, mode: AiMode) -> Verdict {
        let policy = self.clone();
        let command = command.to_string();
        let task = tokio::task::spawn_blocking(move || policy.check(&command, mode));
        match tokio::time::timeout(CHECK_BUDGET, task).await {
            Ok(Ok(verdict)) => verdict,
            Ok(Err(_)) => Verdict::Deny("walissh's policy failed to read it".into()),
            Err(_) => Verdict::Deny("walissh's policy could not read it in time".into()),
        }
    }

    pub fn check(&self, command: &str, mode: AiMode) -> Verdict {
        if mode == AiMode::Off {
            return Verdict::Deny("the agent is off for this user".into());
        }
        if command.len() > MAX_LINE {
            return Verdict::Deny(format!(
                "the command is longer than {} KiB",
                MAX_LINE / 1024
            ));
        }
        if let Some(why) = typing::typing_problem(command) {
            return Verdict::Deny(why.into());
        }
        let rules = &self.rules;
        if rules
            .prefixes
            .iter()
            .any(|p| command.starts_with(p.as_str()))
        {
            return Verdict::Deny("it starts like a question to the agent".into());
        }
        let seen = wrappers::see(command);
        if let Some(why) = &seen.opaque {
            return Verdict::Deny(why.clone());
        }
        // Where bash's grammar (as tree-sitter has it) cannot read the
        // line, the rules below cannot be trusted to have seen it all.
        if let Some(why) = &seen.unknown {
            return Verdict::Deny(format!(
                "{why}: walissh cannot check it; write it more simply"
            ));
        }
        if let Some(why) = rules.denied(command, &seen) {
            return Verdict::Deny(why);
        }
        if let Some(why) = hidden(command) {
            return Verdict::Deny(why);
        }
        // Approved lines are typed into the user's shell: what they would
        // do to it is judged too.
        if let Some(why) = effects::denied(command, &seen) {
            return Verdict::Deny(why);
        }
        if mode == AiMode::Auto
            && read_only::allows(&seen, rules.network).is_ok()
            && !rules.names_hidden(&seen)
            && let Some(quoted) = &seen.script.quoted
        {
            return Verdict::Run(quoted.clone());
        }
        Verdict::Ask(Prompt {
            commands: listing(&seen),
            changes: effects::changes(command, &seen),
        })
    }

    /// Why `command` may not run unasked in `auto`, for tests and the
    /// figures in docs/agent.md.
    #[cfg(test)]
    pub fn why_not_auto(&self, command: &str) -> Option<String> {
        read_only::allows(&wrappers::see(command), self.rules.network).err()
    }
}

impl Rules {
    /// Whether a word of the line (or a redirection's file) names a path
    /// of `[ai] sandbox_hide`, or one under it.
    fn names_hidden(&self, seen: &wrappers::Seen) -> bool {
        if self.hidden.is_empty() {
            return false;
        }
        let words = seen.runs.iter().flatten();
        let targets = seen
            .script
            .redirects
            .iter()
            .filter_map(|r| r.target.as_ref());
        words
            .chain(targets)
            .filter_map(|w| w.lit.as_deref())
            .any(|v| {
                let v = v.rsplit_once('=').map_or(v, |(_, after)| after);
                paths::under(&paths::normalise(v), &self.hidden)
            })
    }

    fn denied(&self, command: &str, seen: &wrappers::Seen) -> Option<String> {
        // A function that reaches a function of the line, itself or
        // through another (`a(){ b|b& }; b(){ a|a& }; a`): the shape of a
        // fork bomb. Lines that define helpers for each other are rare.
        let defined: Vec<&str> = seen.functions.iter().map(|(n, _)| n.as_str()).collect();
        for (name, calls) in &seen.functions {
            if let Some(called) = calls.iter().find(|c| defined.contains(&c.as_str())) {
                return Some(format!(
                    "a fork bomb's shape: the function {name} runs the function {called}"
                ));
            }
        }
        for pattern in &self.deny {
            if pattern.matches(command.trim()) {
                return Some(format!("matches the deny rule `{pattern}`"));
            }
        }
        for run in &seen.runs {
            let text = run.iter().map(|w| w.text()).collect::<Vec<_>>().join(" ");
            for pattern in &self.deny {
                if pattern.matches(&text) {
                    return Some(format!("`{text}` matches the deny rule `{pattern}`"));
                }
            }
            if let Some(why) = deny::command(run) {
                return Some(why);
            }
        }
        seen.redirects.iter().find_map(deny::redirect)
    }
}

/// Commands hidden where the grammar sees only text but a shell may run
/// code: in quotes inside arithmetic and `${…}` (`$(( '$(reboot)' ))`,
/// `"${x:-'$(reboot)'}"`), in values evaluated later (`x='a[$(reboot)]';
/// echo $((x))`), behind escaped backticks. The line is read once more
/// with every quote and backslash taken out; a destructive command found
/// that way is denied. It errs towards denying: `echo 'a; reboot'` is
/// refused too.
fn hidden(command: &str) -> Option<String> {
    if command.contains("\\`") {
        return Some("backticks inside backticks: walissh cannot read them reliably".into());
    }
    if !command.contains(['\'', '"', '\\']) {
        return None;
    }
    let seen = wrappers::see(&bare(command));
    let defined: Vec<&str> = seen.functions.iter().map(|(n, _)| n.as_str()).collect();
    let bomb = seen
        .functions
        .iter()
        .any(|(_, calls)| calls.iter().any(|c| defined.contains(&c.as_str())));
    let why = seen
        .runs
        .iter()
        .find_map(|r| deny::command(r))
        .or_else(|| seen.redirects.iter().find_map(deny::redirect))
        .or_else(|| bomb.then(|| "a fork bomb's shape".to_string()))?;
    Some(format!("{why} (in text a shell may still run)"))
}

/// What a `Run?` prompt lists before the question: every command the
/// line runs, one per line, when there is more than one or anything is
/// not a plain literal. Nothing for one command of plain literals: the
/// line itself says it all.
fn listing(seen: &wrappers::Seen) -> Vec<String> {
    let runs = &seen.runs;
    let all_literal = runs.iter().all(|r| r.iter().all(|w| w.lit.is_some()));
    if runs.len() <= 1 && all_literal && seen.unknown.is_none() && seen.script.plain {
        return Vec::new();
    }
    let mut shown: Vec<String> = runs
        .iter()
        .take(MAX_LISTED)
        .map(|r| {
            r.iter()
                .map(|w| w.raw.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    if runs.len() > MAX_LISTED {
        shown.push(format!("… and {} more commands", runs.len() - MAX_LISTED));
    }
    shown
}

/// `command` with every quote and backslash taken out, blanks trimmed at
/// both ends and runs of blanks made one space. Blanks between words
/// mean nothing to a shell, but tree-sitter's recovery from the errors
/// such text is full of can depend on them; without this, a line and its
/// own quoted form (`id 'a(#`joe' ` and `'id' 'a(#`joe'`) could be read
/// differently. Newlines are kept: they separate commands.
fn bare(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    for c in command.chars().filter(|c| !matches!(c, '\'' | '"' | '\\')) {
        let blank = matches!(c, ' ' | '\t');
        if blank && (out.is_empty() || out.ends_with([' ', '\n'])) {
            continue;
        }
        out.push(if blank { ' ' } else { c });
    }
    while out.ends_with([' ', '\n']) {
        out.pop();
    }
    out
}

/// Commands listed before `Run?` at most; the rest are counted.
const MAX_LISTED: usize = 20;

/// The number of commands in `line`, `None` when its parse gave up: what
/// the fuzzed property compares a line and its quoted form by.
pub fn commands(line: &str) -> Option<usize> {
    let script = parse::parse(line);
    (!script.gave_up).then_some(script.commands.len())
}

#[cfg(any(test, feature = "oracle"))]
pub mod oracle;
#[cfg(test)]
mod speed;
#[cfg(test)]
mod tables;
#[cfg(test)]
mod tests;

/// The README's example, run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
