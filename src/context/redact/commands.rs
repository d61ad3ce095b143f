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
    /// Every rule's `args` and `unless`, at once: each word is matched
    /// once, whatever the number of rules and words.
    patterns: RegexSet,
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
        let mut patterns: Vec<String> = Vec::new();
        for raw in file.rules {
            compile(&raw.id, &raw.program)?;
            programs.push(raw.program.clone());
            let mut index = |list: &[String]| -> Result<Vec<usize>, String> {
                list.iter()
                    .map(|p| {
                        compile(&raw.id, p)?;
                        patterns.push(p.clone());
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
        let patterns =
            RegexSet::new(&patterns).map_err(|e| format!("commands.toml: an argument: {e}"))?;
        let public =
            RegexSet::new(&file_public).map_err(|e| format!("commands.toml: public: {e}"))?;
        Ok(Commands {
            rules,
            programs,
            patterns,
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
        let mut last: Vec<Option<usize>> = vec![None; self.patterns.len()];
        let mut help = None;
        for (i, w) in words.iter().enumerate() {
            if self.public.is_match(w) {
                continue;
            }
            let flag = w.starts_with('-') && !w.contains('=');
            for p in self.patterns.matches(w).iter() {
                if !(flag && self.path_patterns[p]) {
                    last[p] = Some(i);
                }
            }
            if asks_for_help(w) {
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
    let l = line.trim_start().to_ascii_lowercase();
    ["error", "fatal", "usage:", "warning:", "err:", "e: "]
        .iter()
        .any(|p| l.starts_with(p))
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
        .any(|p| l.contains(p))
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

/// Whether a pipeline starts by printing a literal (`echo 'c2Vj…'`, not
/// `echo "$TOKEN"`, nor `kubectl … | base64 -d`).
fn echoes_literal(commands: &[Vec<String>]) -> bool {
    commands.first().is_some_and(|first| {
        matches!(first.first().map(String::as_str), Some("echo" | "printf"))
            && first[1..]
                .iter()
                .any(|w| !w.starts_with('-') && !w.contains('$') && w.len() >= 8)
    })
}

/// The pipelines of a command line: split at `;`, `&`, `&&`, `||` and
/// line breaks outside quotes and parentheses.
fn pipelines(line: &str) -> Vec<&str> {
    split_outside(line, false)
}

/// The stages of a pipeline: split at `|` outside quotes and parentheses.
fn stages(pipeline: &str) -> Vec<&str> {
    split_outside(pipeline, true)
}

/// `line` split outside quotes and parentheses: at `|` (`pipes`), or at
/// what separates pipelines.
fn split_outside(line: &str, pipes: bool) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut quote, mut depth, mut start) = (None, 0usize, 0);
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            // Within single quotes a backslash is itself (`'\'`).
            (Some('"'), '\\') | (None, '\\') => {
                chars.next();
            }
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, ';' | '&' | '\n') if depth == 0 && !pipes => {
                out.push(&line[start..i]);
                start = i + 1;
            }
            (None, '|') if depth == 0 && chars.peek().is_some_and(|&(_, n)| n == '|') => {
                if !pipes {
                    out.push(&line[start..i]);
                    start = i + 2;
                }
                chars.next();
            }
            (None, '|') if depth == 0 && pipes => {
                out.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&line[start..]);
    out.retain(|p| !p.trim().is_empty());
    out
}

/// The sink a pipeline ends in, if it ends in a program that prints no
/// secret of what it reads: a count or a digest (`| wc -c`,
/// `| sha256sum`), the public key (`wg genkey | tee privatekey | wg
/// pubkey`), a JSON object's keys or fields that name no secret (`| jq -r
/// '.data | keys[]'`, `| jq '{name, ttl}'`). Only the plainest pipelines
/// are trusted: what a shell would expand, glob, quote or comment
/// (`of=$SSH_TTY`, `/d?v/tty`, `/de''v/tty`, `# | wc -c`, `wc() {…}`)
/// might send the secret elsewhere, so such a pipeline is no sink. The
/// second wall is `sink_output`: a line of another shape is secret.
fn ends_in_sink(pipeline: &str, commands: &[Vec<String>]) -> Option<Sink> {
    // Nothing may reach the terminal on the way: no redirection, no
    // device (`tee /dev/stderr`), and between reader and sink only
    // programs that write to the pipe alone (not `xargs -t`, `perl`,
    // `jq`'s `debug`).
    // (`/proc/self/fd/2` is a device too; a group `(cat; wc -c)` or
    // `{ …; }` runs more than its last command.)
    let grouped = outside_quotes(pipeline).any(|c| c == '(' || c == '{');
    if grouped
        || pipeline.contains(['`', '>'])
        || pipeline.contains("/dev/")
        || pipeline.contains("/proc/")
    {
        return None;
    }
    let stages = stages(pipeline);
    let last = commands.last().filter(|_| stages.len() > 1)?;
    // Every stage but the sink in plain words; the sink's program by its
    // bare name (not `./wc`); jq's filter alone may be quoted.
    let plain = |t: &str| {
        t.chars()
            .all(|c| c.is_ascii_alphanumeric() || " \t_./:=,@%+-".contains(c))
    };
    let sink_stage = stages[stages.len() - 1].trim();
    let unquoted = match sink_stage.split_once('\'') {
        Some((before, rest)) => rest
            .split_once('\'')
            .filter(|(_, after)| !after.contains('\''))
            .map(|(_, after)| format!("{before}{after}"))?,
        None => sink_stage.to_string(),
    };
    if !stages[..stages.len() - 1].iter().all(|s| plain(s))
        || !plain(&unquoted)
        || last.first().is_none_or(|p| p.contains('/'))
    {
        return None;
    }
    let program_of = |stage: &str| {
        let first = stage.split_whitespace().next().unwrap_or("");
        first.rsplit('/').next().unwrap_or(first).to_string()
    };
    // The reader is no script and says nothing more (`-v`, `--debug`);
    // between it and the sink, filters that write to the pipe alone and
    // name no file (`tee f`, `sort -o f`, `xxd - f` write elsewhere).
    let reader = &stages[0];
    let scripted = matches!(
        program_of(reader).as_str(),
        "sed"
            | "awk"
            | "gawk"
            | "mawk"
            | "perl"
            | "python"
            | "python3"
            | "ruby"
            | "node"
            | "php"
            | "sh"
            | "bash"
            | "zsh"
            | "dash"
            | "xargs"
            | "find"
            | "tee"
    );
    let chatty = reader
        .split_whitespace()
        .any(|w| w.starts_with("-v") || w.starts_with("--v") || w.starts_with("--debug"));
    let quiet = stages[1..stages.len() - 1].iter().all(|stage| {
        matches!(
            program_of(stage).as_str(),
            "base64" | "base32" | "basenc" | "tr" | "cut" | "head" | "tail" | "grep"
        )
    });
    if scripted || chatty || !quiet {
        return None;
    }
    let program = last.first().map_or("", String::as_str);
    let filter = last.get(1..).unwrap_or_default();
    match program {
        "wc" => Some(Sink::Count),
        "sha256sum" | "sha1sum" | "sha512sum" | "md5sum" | "b2sum" | "cksum" => Some(Sink::Digest),
        "wg" | "awg" => (filter.first().is_some_and(|w| w == "pubkey")).then_some(Sink::PublicKey),
        // Flags that take no argument only: `--arg keys x`, `--rawfile
        // keys /run/secrets/db` must not pass for the filter.
        "jq" | "yq" | "gojq" => {
            let plain_flags = filter.iter().filter(|w| w.starts_with('-')).all(|w| {
                matches!(
                    w.as_str(),
                    "-r" | "-c"
                        | "-j"
                        | "-a"
                        | "-S"
                        | "-e"
                        | "-M"
                        | "-C"
                        | "-rc"
                        | "-cr"
                        | "--raw-output"
                        | "--compact-output"
                        | "--sort-keys"
                        | "--monochrome-output"
                        | "--color-output"
                        | "--exit-status"
                )
            });
            let mut operands = filter.iter().filter(|w| !w.starts_with('-'));
            (plain_flags
                && operands.next().is_some_and(|w| public_filter(w))
                && operands.next().is_none())
            .then_some(Sink::Fields)
        }
        _ => None,
    }
}

/// A jq filter that prints names or public fields only, and nothing else
/// (no `debug`, `stderr` or `error` to show the rest): a path, then one
/// stage of `keys[]`, `.metadata.name` or `{display_name, policies,
/// ttl}`. Not `length`: of a number it is the number (a PIN, a recovery
/// code).
fn public_filter(filter: &str) -> bool {
    let mut stages = filter.split('|').map(str::trim);
    let (first, last) = match (stages.next(), stages.next(), stages.next()) {
        (Some(only), None, _) => (".", only),
        (Some(first), Some(last), None) => (first, last),
        _ => return false,
    };
    let path = first == "."
        || first.starts_with('.')
            && first[1..].split('.').all(|f| {
                !f.is_empty() && f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            });
    path && public_projection(last)
}

/// The last stage of `public_filter`.
fn public_projection(stage: &str) -> bool {
    if matches!(
        stage,
        "keys" | "keys[]" | "keys_unsorted" | "keys_unsorted[]"
    ) {
        return true;
    }
    let fields = if let Some(inner) = stage.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        inner.split(',').map(str::trim).collect::<Vec<_>>()
    } else if stage.starts_with('.') {
        stage.split('.').skip(1).collect()
    } else {
        return false;
    };
    // Parts of a name that say secret, and whole names that may hold one
    // (`.data`, vault's token `id`).
    let secretish = [
        "token", "secret", "key", "pass", "auth", "cred", "private", "cookie", "session", "hash",
        "salt", "seed", "cert",
    ];
    let holders = [
        "data",
        "stringdata",
        "value",
        "values",
        "id",
        "env",
        "pin",
        "otp",
    ];
    // What is printed must be a name known to be public (allowed, not
    // guessed: `.pw`, `.dsn`, `.jwt` name no secret word and hold one);
    // `.metadata` whole is not, as it carries kubectl's last applied
    // configuration.
    let public = [
        "name",
        "namespace",
        "display_name",
        "policies",
        "ttl",
        "creation_time",
        "creationtimestamp",
        "expire_time",
        "type",
        "kind",
        "apiversion",
        "uid",
        "resourceversion",
        "version",
        "labels",
    ];
    let printed: &[&str] = if stage.starts_with('{') {
        &fields
    } else {
        &fields[fields.len().saturating_sub(1)..]
    };
    !fields.is_empty()
        && fields.iter().all(|f| {
            let f = f.to_ascii_lowercase();
            !f.is_empty()
                && f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !secretish.iter().any(|w| f.contains(w))
                && !holders.contains(&f.as_str())
        })
        && printed
            .iter()
            .all(|f| public.contains(&f.to_ascii_lowercase().as_str()))
}

/// Whether only wrappers stand before a program: `sudo -u app`, `env
/// X=1`, `time`, `nohup`, `timeout 10`.
fn opens(before: &[String]) -> bool {
    before.iter().all(|w| {
        w.starts_with('-')
            || w.contains('=')
            || w.bytes().all(|b| b.is_ascii_digit())
            || matches!(
                w.rsplit('/').next().unwrap_or(w),
                "sudo"
                    | "doas"
                    | "env"
                    | "exec"
                    | "command"
                    | "nohup"
                    | "time"
                    | "nice"
                    | "ionice"
                    | "stdbuf"
                    | "timeout"
                    | "builtin"
            )
    })
}

/// What tells a prompt line from output: its first character and the
/// character that ends the prompt.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Shape(Option<char>, Option<char>);

impl Shape {
    fn of(prompt: &str) -> Shape {
        Shape(prompt.chars().next(), prompt.chars().last())
    }

    /// A root prompt of `#` alone (dash's in a container): a secret's own
    /// comment lines take that shape (`# rotated by ops`), so only the
    /// prompt with nothing typed after it ends the output.
    fn bare(self) -> bool {
        self.0 == Some('#') && self.1 == Some('#')
    }
}

/// A line's prompt and the command after it: the prompt ends at the first
/// `$ # % > ❯ ➜ » ✗ λ →` followed by a space, within `MAX_PROMPT` bytes;
/// or at the `>` of a Windows prompt (`C:\Users\me>type x`) or of z/OS
/// UNIX's (`IBMUSER:/u/ibmuser: >cat x`).
pub(super) fn prompt(line: &str) -> Option<(&str, &str)> {
    let head = &line[..line.floor_char_boundary(MAX_PROMPT)];
    let bytes = head.as_bytes();
    // Most lines hold no prompt character at all: one look at the bytes
    // (every one above is `$ # % >` or not ASCII).
    if !bytes
        .iter()
        .any(|&b| matches!(b, b'$' | b'#' | b'%' | b'>') || !b.is_ascii())
    {
        return None;
    }
    if bytes.len() > 3
        && bytes[0].is_ascii_alphabetic()
        && &bytes[1..3] == b":\\"
        && let Some(i) = head.find('>')
    {
        return Some((&line[..=i], line[i + 1..].trim()));
    }
    let (i, c) = head.char_indices().find(|&(i, c)| {
        matches!(
            c,
            '$' | '#' | '%' | '>' | '❯' | '➜' | '»' | '✗' | '✔' | 'λ' | '→'
        ) && line[i + c.len_utf8()..].starts_with([' ', '\t'])
            // z/OS UNIX's `IBMUSER:/u/ibmuser: >cat x` (a command after
            // it: YAML's `key: >` is no prompt).
            || c == '>'
                && line[..i].ends_with(": ")
                && line[i + 1..].starts_with(|c: char| !c.is_whitespace())
    })?;
    // A prompt is a few words at most (`(venv) user@host:~$`, `[deploy@web2
    // app]$`, `~/tf main ✗`), not a sentence or a log line's fields
    // (`… sshd[1]: Invalid user $ vault kv get x`), nor code or a table's
    // cells (`KEY="v"  # note`, `| app | % |`).
    let before = line[..i].trim_start();
    let before = before.strip_prefix(['|', '│', '┃', '║']).unwrap_or(before);
    if words_outside_brackets(&line[..i]) > 4
        || outside_brackets(before).any(|c| "|\"'=".contains(c))
    {
        return None;
    }
    let end = i + c.len_utf8();
    Some((&line[..end], line[end..].trim()))
}

/// The characters of `s` outside quotes.
fn outside_quotes(s: &str) -> impl Iterator<Item = char> + '_ {
    let mut quote: Option<char> = None;
    s.chars().filter(move |&c| match quote {
        Some(q) => {
            if c == q {
                quote = None;
            }
            false
        }
        None if c == '\'' || c == '"' => {
            quote = Some(c);
            false
        }
        None => true,
    })
}

/// The characters of `s` outside brackets (`(main|MERGING)`, `(⎈|prod)`
/// in a git or kube prompt are a group's).
fn outside_brackets(s: &str) -> impl Iterator<Item = char> + '_ {
    let mut depth = 0usize;
    s.chars().filter(move |&c| {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth = depth.saturating_sub(1),
            _ => return depth == 0,
        }
        false
    })
}

/// How many blank-separated words `s` holds, a bracketed group (`[user@host
/// dir]`, `(venv)`) counting as one.
fn words_outside_brackets(s: &str) -> usize {
    let mut depth = 0usize;
    let mut words = 0;
    let mut in_word = false;
    for c in s.chars() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        let blank = c.is_whitespace() && depth == 0;
        if !blank && !in_word {
            words += 1;
        }
        in_word = !blank;
    }
    words
}

/// The simple commands of a command line, each as its words: quotes and
/// backslashes removed, split at `| ; & ( ) < >` and backquotes; a word
/// that held quoted spaces or operators (`sh -c '…'`) is split again.
fn simple_commands(line: &str, depth: usize) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut word = String::new();
    let mut quoted_text = false;
    let mut chars = line.chars();
    let end_word = |word: &mut String, quoted: &mut bool, commands: &mut Vec<Vec<String>>| {
        if word.is_empty() {
            return;
        }
        let w = std::mem::take(word);
        // `X="$(cat /run/secrets/x)"` captures what it reads: nothing of
        // it is printed.
        let again = *quoted
            && depth < MAX_DEPTH
            && w.contains([' ', '\t', '|', ';', '&', '\n'])
            && !captures(&w);
        *quoted = false;
        let inner = if again {
            simple_commands(&w, depth + 1)
        } else {
            Vec::new()
        };
        if let Some(last) = commands.last_mut() {
            last.push(w);
        }
        // The quoted text's own commands go before the current one, which
        // goes on with the words after the quotes.
        let current = commands.pop().unwrap_or_default();
        commands.extend(inner);
        commands.push(current);
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted_text = true;
                word.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                quoted_text = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            '\\' => word.extend(chars.next()),
            ' ' | '\t' | '\n' => end_word(&mut word, &mut quoted_text, &mut commands),
            '(' if word.ends_with("=$") => {
                // An assignment's command substitution: skipped whole.
                let mut depth = 1;
                for c in chars.by_ref() {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                }
                end_word(&mut word, &mut quoted_text, &mut commands);
            }
            // A redirection's file is the command's argument
            // (`cat < /run/secrets/x`).
            '<' | '>' => end_word(&mut word, &mut quoted_text, &mut commands),
            '|' | ';' | '&' | '(' | ')' | '`' => {
                end_word(&mut word, &mut quoted_text, &mut commands);
                if commands.last().is_some_and(|c| !c.is_empty()) {
                    commands.push(Vec::new());
                }
            }
            c => word.push(c),
        }
    }
    end_word(&mut word, &mut quoted_text, &mut commands);
    commands.retain(|c| !c.is_empty());
    commands
}

/// `NAME=$(…)`: a word that assigns what a command prints.
fn captures(word: &str) -> bool {
    word.split_once("=$(").is_some_and(|(name, _)| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Commands {
        Commands::load().unwrap()
    }

    #[test]
    fn the_rules_compile() {
        assert!(rules().rules.len() > 20);
    }

    #[test]
    fn commands_that_read_a_secret_store() {
        let c = rules();
        for line in [
            "docker exec api cat /run/secrets/db_password",
            "sudo -u app cat /var/run/secrets/kubernetes.io/serviceaccount/token",
            "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d",
            "kubectl -n prod get secrets/db --output=yaml",
            "vault kv get -field=password secret/db",
            "vault read -field=value secret/x",
            "cat config/master.key",
            "cat /etc/mongod/keyfile",
            "snyk config get api",
            "npm config get //registry.npmjs.org/:_authToken",
            "gh auth token",
            "gcloud auth print-access-token",
            "aws configure get aws_secret_access_key",
            "aws ecr get-login-password --region eu-west-1",
            "op read op://vault/db/password",
            "pass show prod/db",
            "pass prod/db",
            "openssl rand -base64 32",
            "wg genkey",
            "printenv DB_PASSWORD",
            "echo \"$API_TOKEN\"",
            "echo ${GITHUB_PAT}",
            "jq -r .password creds.json",
            "yq '.db.password' values.yaml",
            "ssh db1 'sudo cat /root/.pgpass'",
            "kubectl exec -it api-0 -- sh -c 'cat /var/run/secrets/app/token'",
            "sops -d secrets.enc.yaml",
            "consul keygen",
            "docker swarm join-token -q worker",
            "ceph auth get-key client.admin",
            "psql -tAc \"select rolpassword from pg_authid where rolname='app'\"",
            "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'",
            "xclip -o -selection clipboard",
            "type %USERPROFILE%\\.sonar\\token.txt",
            "sh -c 'tr \"\\0\" \"\\n\" < /proc/1/environ | grep ^SECRET_KEY= | cut -d= -f2-'",
            "sudo pass show db",
            "base64 -w0 ~/.ssh/deploy_ed25519",
            "cat help /run/secrets/db_password",
            "cat < /run/secrets/db_password",
            "while read -r l; do echo \"$l\"; done < /run/secrets/x",
            "find /run/secrets -type f -exec cat {} +",
            "ls /run/secrets/* | xargs cat",
            "for f in /run/secrets/*; do echo \"$f: $(cat $f)\"; done",
            "python3 -c \"print(open('/run/secrets/db').read())\"",
            "tr -dc A-Za-z0-9 </dev/urandom | head -c 32",
            "php artisan key:generate --show",
            "kubectl get secret db --template='{{.data.password | base64decode}}'",
            "redis-cli get app:db_password",
            "echo ${DB_PASSWORD:-}",
            "echo \"db: $DB_PASSWORD\"",
            "ansible-vault view group_vars/all/vault.yml",
            "cat /etc/rabbitmq/.erlang.cookie",
            "argocd admin initial-password -n argocd",
            "cat /etc/zabbix/zabbix_agentd.psk",
            "cat /proc/2231/environ",
            "cat 配置/密钥.txt",
            "bin/elasticsearch-reset-password -u elastic -b",
            "cat /etc/openvpn/client/auth.txt",
            "kubectl get secret x -o json | jq -r '.data.password' | base64 -d",
            "cat /run/secrets/a | wc -c; cat /run/secrets/b",
            "kubectl get secret x -o json | jq .data",
            "cat /run/secrets/a | tee /dev/stderr | wc -c",
            "cat /run/secrets/a | xargs -t echo | wc -c",
            "kubectl get secret x -o json | jq '.data | debug | keys'",
            "kubectl get secret x -o json | jq '(.data | error), {name}'",
        ] {
            assert!(c.reads_secret(line).is_some(), "{line}");
        }
    }

    #[test]
    fn commands_that_print_no_secret() {
        let c = rules();
        for line in [
            "kubectl get secrets",
            "kubectl describe secret db",
            "vault kv metadata get secret/db",
            "vault status",
            "docker secret ls",
            "ls /run/secrets",
            "cat /etc/passwd",
            "cat ~/.ssh/id_rsa.pub",
            "cat ~/.ssh/known_hosts ~/.ssh/config ~/.ssh/authorized_keys",
            "vault kv get -help",
            "vault help kv",
            "cat /etc/pam.d/common-password",
            "kubectl get secrets -o wide",
            "echo $SSH_AUTH_SOCK $PASSWORD_STORE_DIR",
            "tail -f /var/log/token-renewer.log",
            "openssl s_client -connect h:443 -cert c.pem -key client.key",
            "cat /etc/ssl/certs/site.pem",
            "echo $PATH",
            "echo $PWD $OLDPWD $HOME",
            "pass ls",
            "wg show",
            "aws configure list",
            "git config --get user.email",
            "jq .items[0].metadata.name pods.json",
            "tail -f /var/log/nginx/access.log",
            "rclone config create offsite webdav user backup pass Orchid-63",
            "result=$(cat ~/.vault-token)",
            "PGPASSWORD=\"$(cat /run/secrets/pg)\" psql -c 'select 1'",
            "grep -rn password config/",
            "grep -i token app.log",
            "openssl rsa -in jwt-signing.key -pubout",
            "aws ssm get-parameter --name /shop/prod/scaling",
            "pass show -c infra/core-sw1",
            "kubectl get secret app-env -o json | jq -r '.data | keys[]'",
            "vault token lookup -format=json | jq '.data | {display_name, policies, ttl}'",
            "umask 077; wg genkey | wg pubkey",
            "kubectl get secret x -o json | jq .metadata.name",
            "cat /run/secrets/db_password | wc -c",
            "kubectl -n g get secret a -o jsonpath='{.data.admin-user}'",
            "grep -rEc 'token=[A-Za-z0-9_]{20,}' /var/log/app/",
            "kubectl create secret generic x --from-file=password=./pw.txt -o name",
            "head -3 /var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
        ] {
            assert_eq!(c.reads_secret(line), None, "{line}");
        }
        // The sinks among them are read as sinks, not missed by the rules.
        for (line, sink) in [
            (
                "kubectl get secret app-env -o json | jq -r '.data | keys[]'",
                Sink::Fields,
            ),
            (
                "kubectl get secret x -o json | jq .metadata.name",
                Sink::Fields,
            ),
            ("umask 077; wg genkey | wg pubkey", Sink::PublicKey),
            ("cat /run/secrets/db_password | wc -c", Sink::Count),
            ("cat /run/secrets/db_password | sha256sum", Sink::Digest),
        ] {
            assert_eq!(c.reading(line).and_then(|r| r.sunk), Some(sink), "{line}");
        }
    }

    #[test]
    fn the_output_runs_to_the_next_prompt_of_the_same_shape() {
        let c = rules();
        let text = "root@db1:~# ls\nfile\nroot@db1:~# cat /run/secrets/pw\n  s3cr3t-one\n\n# not a prompt\nroot@db1:~# ls\nafter\n";
        let spans: Vec<&str> = c
            .outputs(text)
            .iter()
            .map(|(r, _)| &text[r.clone()])
            .collect();
        assert_eq!(spans, ["s3cr3t-one", "# not a prompt"]);
        // To the end of the text when no prompt follows.
        // A prompt in a log line is no prompt.
        let text = "Jun  1 web1 sshd[1]: Invalid user $ vault kv get x from 1.2.3.4\nAccepted password for root\n";
        assert!(c.outputs(text).is_empty());
        // A command continued on the lines below.
        let text =
            "$ kubectl get secret db \\\n>   -o jsonpath='{.data.pw}' | base64 -d\ns3cr3t\n$ ls\n";
        let spans: Vec<&str> = c
            .outputs(text)
            .iter()
            .map(|(r, _)| &text[r.clone()])
            .collect();
        assert_eq!(spans, ["s3cr3t"]);
        let text = "$ gh auth token\ngho_abc\n";
        let spans: Vec<&str> = c
            .outputs(text)
            .iter()
            .map(|(r, _)| &text[r.clone()])
            .collect();
        assert_eq!(spans, ["gho_abc"]);
    }

    #[test]
    fn lines_of_a_secret_output_that_show_no_secret_are_left() {
        let c = rules();
        let sifter = |line: &str| {
            let reading = c.reading(line).expect("a secret command");
            c.sifter(line.to_string(), &reading)
        };
        let mut s = sifter("echo ${DB_PASSWORD:-not set}");
        assert!(s.leaves("not set"));
        assert!(s.leaves("Password (will be hidden): "));
        assert!(!s.leaves("hunter2-x9"));
        let mut s = sifter("kubectl config view --raw");
        let ca = format!(
            "    certificate-authority-data: {}",
            "LS0tLS1CRUdJTi".repeat(8)
        );
        assert!(s.leaves(&ca));
        assert!(s.leaves("Q0VSVElGSUNBVEUtLS0tLQ=="));
        assert!(!s.leaves("    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ=="));
        // A short public field says nothing of the line under it.
        let mut s = sifter("cat /run/secrets/creds");
        assert!(s.leaves("username: bob"));
        assert!(!s.leaves("Hunter2Secret"));
        // Nor does a long one: only a certificate's data wraps.
        let mut s = sifter("cat /run/secrets/creds");
        assert!(s.leaves(&format!(
            "url: https://{}.example.com/login",
            "x".repeat(60)
        )));
        assert!(!s.leaves("Hunter2Secret"));
        // Under a sink, a program's complaint may quote what it read.
        let mut s = sifter("cat /run/secrets/db | wc --files0-from=-");
        assert!(!s.leaves("wc: hunter2-x9: No such file or directory"));
        assert!(s.leaves("0 total"));
        let mut s = sifter("kubectl get secret x -o json | jq '.data.password | keys'");
        assert!(!s.leaves("jq: error (at <stdin>:0): string (\"aHVudGVy...) has no keys"));
        let mut s = sifter("kubectl get secret x -o json | jq -r '.data | keys[]'");
        assert!(s.leaves("password"));
        let mut s = sifter("vault token lookup -format=json | jq '.data | {display_name, ttl}'");
        assert!(s.leaves("  \"display_name\": \"oidc-anna\","));
    }

    /// What a reader of the code tried: a secret's own line shaped as a
    /// bare prompt, git's and kube-ps1's prompts, sinks that write
    /// elsewhere on the way, jq flags that pose as the filter.
    #[test]
    fn attacks_on_the_command_guard() {
        let c = rules();
        let spans = |text: &str| -> Vec<String> {
            c.outputs(text)
                .iter()
                .map(|(r, _)| text[r.clone()].to_string())
                .collect()
        };
        let found =
            spans("# cat /run/secrets/db\n# rotated 2024-05-01 by ops\nXk9mP2vLq8nR4tZw\n# \n");
        assert!(found.iter().any(|s| s == "Xk9mP2vLq8nR4tZw"), "{found:?}");
        for p in [
            "user@host:~/repo (main|MERGING)$ ",
            "user@host:~/repo (main=)$ ",
            "(⎈|prod:default) user@host:~$ ",
            "(venv) user@host ~/app (main) $ ",
        ] {
            let text = format!("{p}cat /run/secrets/db\nXk9mP2vLq8nR4tZw\n{p}\n");
            assert_eq!(spans(&text), ["Xk9mP2vLq8nR4tZw"], "{p}");
        }
        let long = format!(
            "/var/lib/docker/overlay2/{}/merged/app$ ",
            "ab12".repeat(16)
        );
        let text = format!("{long}cat /run/secrets/db\nXk9mP2vLq8nR4tZw\n");
        assert_eq!(spans(&text), ["Xk9mP2vLq8nR4tZw"]);
        for line in [
            "cat /run/secrets/db | tee /proc/self/fd/2 | wc -c",
            "sed 'w /proc/self/fd/2' /run/secrets/db | wc -c",
            "cat /run/secrets/db | sort -o out | wc -c",
            // (`tee f` may write to a link to the terminal.)
            "wg genkey | tee privatekey | wg pubkey",
            "cat /run/secrets/db | (cat; wc -c)",
            "perl -pe 'print STDERR' /run/secrets/db | wc -c",
            "kubectl get secret db -o json -v=9 | jq keys",
            "kubectl get secret db -o json | jq -r --arg keys x '.data.password'",
            "echo 1 | cat /run/secrets/db | jq -r --rawfile keys /run/secrets/db '$keys'",
        ] {
            assert!(c.reads_secret(line).is_some(), "{line}");
        }
    }

    #[test]
    fn z_os_and_pane_prompts_and_code_that_only_looks_like_one() {
        assert!(prompt("IBMUSER:/u/ibmuser: >cat x.pw").is_some());
        assert!(prompt("| $ cat /run/secrets/x").is_some());
        assert!(prompt("KEY=\"v\"  # note").is_none());
        assert!(prompt("| app | % | caching_sha2_password |").is_none());
        assert_eq!(
            pipelines("a | b; c && d || e & f"),
            ["a | b", " c ", " d ", " e ", " f"]
        );
        assert_eq!(pipelines("sh -c 'a; b' ; c"), ["sh -c 'a; b' ", " c"]);
    }

    /// A line read again gets the reading it got first, and the lines
    /// remembered stay within their bytes, however many new ones come.
    #[test]
    fn lines_judged_are_remembered_within_a_bound() {
        let c = Commands::load().unwrap();
        let secret = "cat /run/secrets/db_password";
        for _ in 0..2 {
            assert_eq!(
                c.reading(secret)
                    .map(|r| c.id(r.rule).to_string())
                    .as_deref(),
                Some("secret-file")
            );
            assert!(c.reading("ls -l /srv").is_none());
        }
        for i in 0..MEMO_BYTES / 64 {
            let line = format!("echo {i:0>59}");
            assert!(c.reading(&line).is_none(), "{line}");
            assert!(c.memo.lock().unwrap().bytes <= MEMO_BYTES);
        }
        assert!(c.memo.lock().unwrap().lines.len() < MEMO_BYTES / 64);
        assert!(c.reading(secret).is_some());
    }

    #[test]
    fn splitting_is_total_on_any_input() {
        for line in [
            "'unclosed",
            "\"a\\",
            "\\",
            "a|||b",
            "((((",
            "$(echo 'x|y' \"z;w\")",
        ] {
            let _ = simple_commands(line, 0);
            let _ = rules().reads_secret(line);
        }
        let deep = "sh -c '".repeat(50);
        let _ = simple_commands(&deep, 0);
    }
}
