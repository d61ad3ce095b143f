//! Commands whose output is a secret (`commands.toml`): the command is the
//! context a detector lacks.
//!
//! This file owns two judgements: whether a command line reads a secret
//! store (`Commands::reads_secret`), and where, in terminal text, the
//! output of such a command lies (`Commands::outputs`: a prompt line whose
//! command reads a secret store, then its output, to the next prompt of the
//! same shape). The rules are data, beside gitleaks' set; the word
//! splitting here is deliberately loose (quotes removed, operators split,
//! quoted strings split again, every word a possible program), so that a
//! wrapper or a pipeline cannot hide a rule's program: it errs towards
//! redacting. What is put in place of the output is the redactor's
//! (`mod.rs`).

use std::ops::Range;

use regex::{Regex, RegexSet};
use serde::Deserialize;

mod lines;
#[cfg(test)]
mod tests;

pub(super) use lines::prompt;
use lines::*;

/// The rules, compiled in.
const COMMANDS: &str = include_str!("commands.toml");

/// A command line longer than this is judged on its first bytes only: no
/// one types more, and the judgement stays linear.
const MAX_LINE: usize = 4096;
/// How far in a line a prompt may end: further on, a `$ ` is text.
const MAX_PROMPT: usize = 256;
/// Quoted strings are split again (`sh -c '…'`) this many times.
const MAX_DEPTH: usize = 3;
/// A command's output is read as secret for this many lines at most: a
/// line that only looks like a prompt (in a log, in a README) must not
/// hide the rest of a long text from the model.
const MAX_OUTPUT_LINES: usize = 400;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Words that name a public file where a rule's path would see a
    /// secret one (`/run/secrets/…/serviceaccount/ca.crt`).
    #[serde(default)]
    public: Vec<String>,
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: String,
    program: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    unless: Vec<String>,
    #[serde(default)]
    first: bool,
    #[serde(default)]
    line: bool,
    /// `args` are paths: a flag (`--password`, `-key`) is none.
    #[serde(default)]
    paths: bool,
}

struct Rule {
    id: String,
    /// The program must open the simple command (see `opens`).
    first: bool,
    /// Program and arguments may stand anywhere in the line, in any of
    /// its simple commands (`find /run/secrets -exec cat {} +`, `ls
    /// /run/secrets/* | xargs cat`).
    line: bool,
    /// Each must match one of the words after the program (indices into
    /// `Commands::patterns`).
    args: Vec<usize>,
    /// None may match a word after the program.
    unless: Vec<usize>,
}

/// The compiled rules.
pub(super) struct Commands {
    rules: Vec<Rule>,
    /// Every rule's `program`, at once: which rules a word may start.
    programs: RegexSet,
    /// Every rule's `args` and `unless`, each on its own: a word is
    /// matched against those of the rules its line's programs open.
    patterns: Vec<Regex>,
    /// The same, at once: for a line whose programs open so many rules
    /// that one search a word costs less than one each.
    all_patterns: RegexSet,
    /// The file's `public` words: matched by no rule's arguments.
    public: RegexSet,
    /// Which `patterns` are paths (of rules with `paths`).
    path_patterns: Vec<bool>,
    /// Lines already judged (`reading`): a screen is read again and again
    /// with the same prompt lines on it.
    memo: std::sync::Mutex<Memo>,
}

/// Command lines judged, and how each is read; bounded by their bytes,
/// forgotten all at once when full (a target printing endless new prompt
/// lines costs what no memo would).
#[derive(Default)]
struct Memo {
    lines: std::collections::HashMap<Box<str>, Option<Reading>>,
    bytes: usize,
}

/// The bytes of command lines a `Memo` holds at most.
const MEMO_BYTES: usize = 256 << 10;

/// A flag after the program that asks for help: nothing is read. (A bare
/// `help` counts only right after the program: `cat help /run/secrets/x`
/// reads both files.)
fn asks_for_help(word: &str) -> bool {
    matches!(word, "--help" | "-help" | "--version")
}

impl Commands {
    /// The vendored rules; an Err names the rule that does not compile (a
    /// unit test holds the file to compiling).
    pub(super) fn load() -> Result<Commands, String> {
        let mut file: File =
            toml::from_str(COMMANDS).map_err(|e| format!("commands.toml: {}", e.message()))?;
        let compile =
            |id: &str, p: &str| Regex::new(p).map_err(|e| format!("commands.toml: rule {id}: {e}"));
        let mut rules = Vec::new();
        let mut programs = Vec::new();
        let mut path_patterns = Vec::new();
        let file_public = std::mem::take(&mut file.public);
        let mut patterns: Vec<Regex> = Vec::new();
        let mut sources: Vec<String> = Vec::new();
        for raw in file.rules {
            compile(&raw.id, &raw.program)?;
            programs.push(raw.program.clone());
            let mut index = |list: &[String]| -> Result<Vec<usize>, String> {
                list.iter()
                    .map(|p| {
                        patterns.push(compile(&raw.id, p)?);
                        sources.push(p.clone());
                        Ok(patterns.len() - 1)
                    })
                    .collect()
            };
            let args = index(&raw.args)?;
            let unless = index(&raw.unless)?;
            path_patterns.resize(patterns.len(), false);
            for &p in &args {
                path_patterns[p] = raw.paths;
            }
            rules.push(Rule {
                args,
                unless,
                first: raw.first,
                line: raw.line,
                id: raw.id,
            });
        }
        let programs =
            RegexSet::new(&programs).map_err(|e| format!("commands.toml: a program: {e}"))?;
        let all_patterns =
            RegexSet::new(&sources).map_err(|e| format!("commands.toml: an argument: {e}"))?;
        let public =
            RegexSet::new(&file_public).map_err(|e| format!("commands.toml: public: {e}"))?;
        Ok(Commands {
            rules,
            programs,
            patterns,
            all_patterns,
            public,
            path_patterns,
            memo: Default::default(),
        })
    }

    /// The index of the rule that says `line`'s output is a secret, if
    /// one does and no sink swallows it (tests' shorthand for `reading`).
    #[cfg(test)]
    fn reads_secret(&self, line: &str) -> Option<usize> {
        self.reading(line)
            .filter(|r| r.sunk.is_none())
            .map(|r| r.rule)
    }

    /// How `line`'s output is read, if a rule says it holds a secret.
    pub(super) fn reading(&self, line: &str) -> Option<Reading> {
        let line = &line[..line.floor_char_boundary(MAX_LINE)];
        let lock = || self.memo.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = lock().lines.get(line).cloned() {
            return known;
        }
        let reading = self.read_line(line);
        let mut m = lock();
        if m.bytes + line.len() > MEMO_BYTES {
            *m = Memo::default();
        }
        m.bytes += line.len();
        m.lines.insert(line.into(), reading.clone());
        reading
    }

    /// `reading`, worked out.
    fn read_line(&self, line: &str) -> Option<Reading> {
        // Windows paths (`type C:\Users\me\.sonar\token.txt`): a
        // backslash there separates, it escapes nothing.
        let windows;
        let line = if line.contains(":\\") || line.contains("%\\") {
            windows = line.replace('\\', "/");
            windows.as_str()
        } else {
            line
        };
        // Each pipeline (`a | b`, between `;`, `&&`, `||`) on its own: one
        // that ends in a program that prints no secret (`| wc -c`) is
        // read as sunk. The rules for a whole line read the words of the
        // other pipelines as one.
        let (mut rest, mut sunk_words) = (Vec::new(), Vec::new());
        let (mut found, mut sunk, mut sinks) = (None, None, Vec::new());
        for pipeline in pipelines(line) {
            let commands = simple_commands(pipeline, 0);
            // A decoding counts only of a literal; the commands after it
            // are judged still (`echo "$B" | base64 -d | jq .password`).
            let rule = commands.iter().find_map(|words| {
                self.judge(words, false)
                    .filter(|&r| self.rules[r].id != "decode" || echoes_literal(&commands))
            });
            if let Some(kind) = ends_in_sink(pipeline, &commands) {
                sinks.push(kind);
                sunk = sunk.or(rule);
                sunk_words.extend(commands.into_iter().flatten());
            } else {
                found = found.or(rule);
                rest.extend(commands.into_iter().flatten());
            }
        }
        let reading = match found.or_else(|| self.judge(&rest, true)) {
            Some(rule) => Reading { rule, sunk: None },
            // Sinks of one kind, or every line is read as the secret.
            None => Reading {
                rule: sunk.or_else(|| self.judge(&sunk_words, true))?,
                sunk: sinks
                    .first()
                    .copied()
                    .filter(|k| sinks.iter().all(|s| s == k)),
            },
        };
        // A secret a line prints into a program that takes it (`echo
        // "$PW" | docker login --password-stdin`) is not printed.
        let consumed = rest.iter().chain(&sunk_words).any(|w| {
            matches!(
                w.as_str(),
                "--password-stdin" | "--with-token" | "--stdin" | "chpasswd"
            )
        });
        let printed = matches!(
            self.rules[reading.rule].id.as_str(),
            "secret-variable" | "new-secret"
        );
        (!(consumed && printed)).then_some(reading)
    }

    /// A `Sifter` for the output of a command line read as `reading`.
    pub(super) fn sifter(&self, command: String, reading: &Reading) -> Sifter {
        Sifter {
            command,
            decodes: self.id(reading.rule) == "decode",
            sunk: reading.sunk,
            public: false,
        }
    }

    /// A rule's id, as `explain` names it.
    pub(super) fn id(&self, rule: usize) -> &str {
        self.rules.get(rule).map_or("?", |r| r.id.as_str())
    }

    /// The rule a simple command's words meet, trying every word as the
    /// program (after `sudo`, `docker exec NAME`, `ssh HOST`, …); or, with
    /// `line`, the rules that read the whole line's words as one, in any
    /// order. Each word is matched once against every pattern, and where
    /// each pattern last matched is kept: linear in the words.
    fn judge(&self, words: &[String], line: bool) -> Option<usize> {
        // Most lines run no program a rule names: their words need not be
        // matched against every argument pattern.
        let programs: Vec<_> = words
            .iter()
            .map(|w| self.programs.matches(w.rsplit('/').next().unwrap_or(w)))
            .collect();
        if !programs.iter().any(|m| m.matched_any()) {
            return None;
        }
        // Only the arguments of the rules those programs open are read,
        // each on its own small automaton: one set of all of them met new
        // states on every new word (`arguments`).
        let mut wanted: Vec<usize> = programs
            .iter()
            .flat_map(|names| names.iter())
            .filter(|&r| self.rules[r].line == line)
            .flat_map(|r| self.rules[r].args.iter().chain(&self.rules[r].unless))
            .copied()
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut last: Vec<Option<usize>> = vec![None; self.patterns.len()];
        let mut help = None;
        // A word said again is matched once (`cat cat cat …`).
        let mut known: std::collections::HashMap<&str, Vec<usize>> = Default::default();
        for (i, w) in words.iter().enumerate() {
            let matched = known
                .entry(w.as_str())
                .or_insert_with(|| self.arguments(w, &wanted));
            for &p in matched.iter() {
                last[p] = Some(i);
            }
            if asks_for_help(w) && !self.public.is_match(w) {
                help = Some(i);
            }
        }
        // In a line, anywhere; in a command, after the program.
        let after = |p: usize, i: usize| last[p].is_some_and(|l| line || l > i);
        for (i, names) in programs.iter().enumerate() {
            for r in names.iter() {
                let rule = &self.rules[r];
                let help_next = words.get(i + 1).is_some_and(|w| w == "help");
                if rule.line != line
                    || rule.first && !opens(&words[..i])
                    || !line && (help_next || help.is_some_and(|h| h > i))
                {
                    continue;
                }
                let met = rule.args.iter().all(|&p| after(p, i))
                    && !rule.unless.iter().any(|&p| after(p, i));
                if met {
                    return Some(r);
                }
            }
        }
        None
    }

    /// Which of the `wanted` argument patterns `word` counts for (past
    /// `ONE_BY_ONE` of them, every pattern it matches: the others are
    /// never asked of it): none when it is public, and a flag is no path.
    fn arguments(&self, word: &str, wanted: &[usize]) -> Vec<usize> {
        // One by one, each automaton is small; past this many, the set's
        // one search costs less.
        const ONE_BY_ONE: usize = 12;
        let flag = word.starts_with('-') && !word.contains('=');
        let counts = |p: usize| !(flag && self.path_patterns[p]);
        let matched: Vec<usize> = match wanted.len() > ONE_BY_ONE {
            true => self
                .all_patterns
                .matches(word)
                .into_iter()
                .filter(|&p| counts(p))
                .collect(),
            false => wanted
                .iter()
                .copied()
                .filter(|&p| counts(p) && self.patterns[p].is_match(word))
                .collect(),
        };
        match matched.is_empty() || self.public.is_match(word) {
            true => Vec::new(),
            false => matched,
        }
    }

    /// In terminal text: each line of output of a command that reads a
    /// secret, from the first character that is not a space to the line's
    /// end, with the rule's id. A command is a prompt line's text after the
    /// prompt; its output runs to the next line with a prompt of the same
    /// shape (same first character, same prompt character), or the end.
    pub(super) fn outputs(&self, text: &str) -> Vec<(Range<usize>, usize)> {
        let mut found = Vec::new();
        // The rule, the prompt's shape, the lines read so far, and the
        // command's lines.
        let mut reading: Option<(usize, Shape, usize, Sifter)> = None;
        // A command line continued with `\` on the lines below (`> …`).
        let mut continued: Option<(String, Shape)> = None;
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let start = at;
            at += line.len();
            let body = line.trim_end_matches(['\n', '\r']);
            if let Some((mut command, shape)) = continued.take() {
                let more = body.trim_start().trim_start_matches("> ");
                command.push(' ');
                command.push_str(more.trim_end_matches('\\'));
                if more.ends_with('\\') && command.len() < MAX_LINE {
                    continued = Some((command, shape));
                } else if let Some(r) = self.reading(&command) {
                    let sifter = self.sifter(command, &r);
                    reading = Some((r.rule, shape, 0, sifter));
                }
                continue;
            }
            let prompt = prompt(body);
            if let (Some((_, shape, _, _)), Some((p, command))) = (&reading, prompt)
                && *shape == Shape::of(p)
                && (!shape.bare() || command.is_empty())
            {
                reading = None;
            }
            if let Some((id, shape, lines, mut sifter)) = reading.take() {
                let lead = body.len() - body.trim_start().len();
                if lead < body.len() && !sifter.leaves(body) {
                    found.push((start + lead..start + body.len(), id));
                }
                reading = (lines + 1 < MAX_OUTPUT_LINES).then_some((id, shape, lines + 1, sifter));
                continue;
            }
            if let Some((p, command)) = prompt {
                if command.ends_with('\\') {
                    continued = Some((command.trim_end_matches('\\').to_string(), Shape::of(p)));
                } else if let Some(r) = self.reading(command) {
                    let sifter = self.sifter(command.to_string(), &r);
                    reading = Some((r.rule, Shape::of(p), 0, sifter));
                }
            }
        }
        found
    }
}

/// How a command line's output is read (`Commands::reading`): the rule
/// that names its secret, and whether its pipeline ends in a sink that
/// prints none of it (`| wc -c`, `| jq 'keys[]'`): then only the lines of
/// a program complaining are secret, as they may quote what they read
/// (`wc: hunter2: No such file` from `wc --files0-from=-`, jq's `string
/// ("hunter2") has no keys`).
#[derive(Clone)]
pub(super) struct Reading {
    pub(super) rule: usize,
    sunk: Option<Sink>,
}

/// What a sink prints, so its output lines can be held to that shape:
/// a line of another shape (a secret a reader wrote to the terminal
/// itself, `set -x`'s trace, a verbose flag's dump) is secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sink {
    /// `wc`: counts.
    Count,
    /// `sha256sum`, `md5sum`, `cksum`…: a digest or checksum, and `-`.
    Digest,
    /// `wg pubkey`: one key.
    PublicKey,
    /// `jq` with a public filter: names and public fields, whose shape is
    /// any; only a complaint (which may quote what it read) is secret.
    Fields,
}

/// Which lines of a secret command's output show no secret, and are left
/// to the other detectors: the command failing (`error_line`), a password
/// prompt (`Password (will be hidden):`), a public field of what it read
/// (`certificate-authority-data: …`, and the rows the terminal wrapped it
/// into), or plain words the command line spells itself (`echo
/// ${DB_PASSWORD:-not set}` prints `not set`).
pub(super) struct Sifter {
    command: String,
    /// The command decodes a literal: what reads as prose or JSON
    /// (`{"alg":"RS256"}`) is what it says, left to the detectors.
    decodes: bool,
    /// The pipeline ends in a sink (see `Reading`).
    sunk: Option<Sink>,
    /// The line before was a public field as wide as a screen: a row of
    /// one token under it is its value, wrapped.
    public: bool,
}

impl Sifter {
    /// Whether `line`, the next line of the output, is left.
    pub(super) fn leaves(&mut self, line: &str) -> bool {
        let l = line.trim();
        if let Some(sink) = self.sunk {
            return sink_output(sink, l);
        }
        // Only a certificate's data goes on over rows of its own: under
        // any other field, a bare token is what the file holds.
        let wrapped = self.public && !l.is_empty() && !l.contains([' ', ':']);
        let public = wrapped || public_field(l);
        self.public = (wrapped || certificate_field(l)) && line.chars().count() >= 64;
        // A line the program masked itself (`Deploying with token [MASKED]`).
        // (A password that only starts like a placeholder, `yourP4ss!`,
        // is not one.)
        let masked = super::masked_or_example(l) && !super::pairs::random_looking(l)
            || l.contains("[MASKED]");
        let prose = self.decodes && readable(l);
        public || masked || prose || error_line(l) || password_prompt(l) || {
            let words = l.bytes().all(|b| b.is_ascii_alphabetic() || b == b' ');
            words && l.contains(' ') && self.command.contains(l)
        }
    }
}

/// Whether `l` is a line `sink` prints: all a count or a digest shows,
/// and for jq's fields anything but a program's complaint.
fn sink_output(sink: Sink, l: &str) -> bool {
    let mut words = l.split_whitespace();
    match sink {
        Sink::Count => {
            words.all(|w| w.bytes().all(|b| b.is_ascii_digit()) || matches!(w, "-" | "total"))
        }
        Sink::Digest => {
            words.all(|w| w.bytes().all(|b| b.is_ascii_hexdigit()) || matches!(w, "-" | "*-"))
        }
        Sink::PublicKey => {
            l.is_empty()
                || l.len() == 44
                    && l.ends_with('=')
                    && l.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
        }
        Sink::Fields => !complaint(l),
    }
}

/// `Password:`, `Enter passphrase for key '/root/.ssh/id_ed25519':`: a
/// question, nothing after it.
fn password_prompt(l: &str) -> bool {
    let lower = l.to_ascii_lowercase();
    l.len() <= 100
        && lower.ends_with(':')
        && ["password", "passphrase", "passcode"]
            .iter()
            .any(|w| lower.contains(w))
}

/// A program's complaint (`wc: …: No such file`, `jq: error …`,
/// `hunter2: FAILED` from `sha256sum -c`): a word and `: `, or an error;
/// not a JSON field (`"display_name": "…"`, what jq prints).
fn complaint(l: &str) -> bool {
    error_line(l)
        || l.split_once(": ").is_some_and(|(head, _)| {
            !head.is_empty() && !head.starts_with('"') && !head.contains(char::is_whitespace)
        })
}

/// `certificate-authority-data: LS0t…`: a kubeconfig's certificate, the
/// one public field a terminal wraps into rows of base64.
fn certificate_field(l: &str) -> bool {
    l.split_once(':').is_some_and(|(key, _)| {
        key.trim()
            .trim_matches('"')
            .to_ascii_lowercase()
            .starts_with("certificate-authority")
            || key
                .trim()
                .to_ascii_lowercase()
                .starts_with("client-certificate")
    })
}

/// `key: value` with a key that names something public: a certificate (a
/// kubeconfig's `certificate-authority-data`), where or who (`server`,
/// `user: ADMIN` below `pass show`'s password).
fn public_field(l: &str) -> bool {
    let Some((key, value)) = l.split_once(':') else {
        return false;
    };
    let key = key.trim().trim_matches('"').to_ascii_lowercase();
    !value.trim().is_empty()
        && matches!(
            key.as_str(),
            "certificate-authority-data"
                | "certificate-authority"
                | "client-certificate-data"
                | "client-certificate"
                | "server"
                | "cluster"
                | "namespace"
                | "context"
                | "current-context"
                | "name"
                | "user"
                | "username"
                | "login"
                | "url"
                | "website"
                | "host"
                | "port"
                | "kind"
                | "apiversion"
        )
}

/// A line of a command's output that is the command failing, not what
/// it read (`cat: /run/secrets/x: No such file or directory`, `Error
/// from server (NotFound)`): left to the other detectors, so the model
/// can see why.
fn error_line(line: &str) -> bool {
    let l = line.trim_start();
    ["error", "fatal", "usage:", "warning:", "err:", "e: "]
        .iter()
        .any(|p| super::pairs::starts_with_ci(l, p))
        || [
            ": no such file",
            ": permission denied",
            ": not found",
            "(notfound)",
            "(forbidden)",
            ": command not found",
            "is a directory",
            "no value found at",
        ]
        .iter()
        .any(|p| super::pairs::contains_ci(l, p))
}

/// Decoded text that says what it is, for the detectors to judge: prose,
/// JSON, `key: value` (`{"alg":"RS256"}`, `owner: platform-team`); a bare
/// token is not.
pub(super) fn readable(t: &str) -> bool {
    let words = || t.split_whitespace();
    t.starts_with('{')
        || t.contains(": ")
        || t.contains(" = ")
        || words().nth(2).is_some()
        || words().nth(1).is_some()
            && words().all(|w| {
                w.trim_end_matches([',', '.', '!'])
                    .chars()
                    .all(char::is_alphabetic)
            })
}
