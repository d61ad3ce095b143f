//! Redaction: scrubbing secrets from everything bound for the model
//! (walissh's redactor, as a library: see the README).
//!
//! This crate owns one judgement: which parts of a text are secrets, and
//! what the model sees instead. The text is first made plain (`plain`: no
//! escape sequences or control characters; the model gets that text), and
//! read through views that map back to it: full-width ASCII and HTML
//! quote entities as ASCII (`plain::folded`, `plain::entities`), rows a
//! terminal wrapped joined (`wrap`). Nothing not redacted is rewritten.
//! Each secret becomes a placeholder `[REDACTED:<kind>#<n>]`, `n` the same
//! for the same secret within a session (`Numbering`), and the text around
//! it is kept (the key name of an assignment, the scheme of an
//! `Authorization` header, the user and host of a URL), so the model still
//! understands what it reads. Patterns are compiled once, in
//! `Redactor::new`; a text with nothing that could be a secret costs a few
//! scans and comes back unchanged.
//!
//! The detectors, most specific first: walissh's own patterns here
//! (private-key blocks, the bastion's own credentials, `[ai] redact`
//! patterns, tokens with a known prefix, JWTs, passwords in URLs, headers,
//! hashes, generic assignments), keys and tools' flags (`pairs`), the
//! operator's rules (`[context] redact_rules`) and gitleaks' (`rules`),
//! the output of a command that reads a secret store (`commands`: on a
//! screen, after its prompt line; for the agent's commands,
//! `redact_output`, the whole of it),
//! the same in URL-encoded text once decoded (mapped back
//! to the characters that spell the secret), and base64 values whose
//! decoded text holds a secret. A finding whose text a `[context]
//! redact_allow` pattern matches is dropped (never the bastion's own
//! credentials). A
//! finding that overlaps one already taken, or a placeholder already in the
//! text, is dropped, so `password=[REDACTED:aws-key#1]` stays as it is. A
//! secret that ends its line takes the lines that look like its rest
//! (`wrapped`), and one the terminal wrapped is read in its rows joined
//! (`wrap`). The patterns lean towards redacting: a false positive costs
//! the model one value, a false negative leaks it. `corpus` measures both.
//!
//! What it leaves to others: where it is called and what is done with the
//! counts. The caller redacts each message (the question, screen text,
//! command output, tool results) on a blocking thread just before it
//! leaves the bastion, and audits the counts; the config checks `[ai]
//! redact` with [`compile_pattern`] and reads the rules file; the agent and
//! `walissh redact` build the redactor one way (walissh's
//! `context::redact::for_config`, over [`Redactor::build`]);
//! the session keeps one `Numbering`. `explain` lists what `redact`
//! replaces, from the same findings.

use std::collections::BTreeMap;
use std::ops::Range;

use regex::{Captures, Regex};

mod commands;
#[cfg(test)]
mod corpus;
pub mod escapes;
mod pairs;
mod panes;
mod plain;
mod prefilter;
mod rules;
pub use rules::{Origin, Rules};
mod wrap;

mod checks;
mod patterns;
mod spans;

use checks::*;
use patterns::*;
use spans::*;

/// `text` as the model reads it before redaction (see `plain`): for the
/// fuzz targets, which check what redaction keeps of it.
pub fn plain_text(text: &str) -> String {
    plain::plain(text).into_owned()
}

/// How many secrets of each kind one pass replaced, e.g. `[("aws-key", 2)]`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts(pub BTreeMap<String, usize>);

impl Counts {
    /// Secrets replaced, all kinds together.
    pub fn total(&self) -> usize {
        self.0.values().sum()
    }

    /// Adds the counts of another pass (the caller redacts message by
    /// message and audits once per request).
    pub fn add(&mut self, other: &Counts) {
        for (kind, n) in &other.0 {
            *self.0.entry(kind.clone()).or_default() += n;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }
}

/// The largest operator's rules file (`[context] redact_rules`), in bytes.
pub const MAX_RULES_FILE_BYTES: usize = 1 << 20;

/// Compiles an operator's pattern (`[ai] redact`, `redact_allow`): a
/// config's validation checks it with this, and redaction uses what it
/// gives, so the two agree. Err is the regex error in one line.
pub fn compile_pattern(p: &str) -> Result<Regex, String> {
    let regex = Regex::new(p).map_err(|e| one_line(&e.to_string()))?;
    // `x*` would "match" between every two characters; it is a mistake,
    // and it would redact nothing.
    if regex.is_match("") {
        return Err("it matches the empty string".to_string());
    }
    Ok(regex)
}

/// A regex error says where it failed over several lines, with a caret;
/// a config error is one line, so keep the last one, which says what.
pub fn one_line(error: &str) -> String {
    let last = error
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or(error);
    last.strip_prefix("error: ").unwrap_or(last).to_string()
}

/// Literal credentials shorter than this are not looked for: they would
/// match ordinary words and numbers everywhere.
const MIN_SECRET_CHARS: usize = 4;

/// The prefix of every placeholder; a later rule never touches one.
const MARK: &str = "[REDACTED:";

/// One compiled rule.
struct Rule {
    kind: &'static str,
    regex: Regex,
    /// The indices of the groups named `s`, `s1`, `s2`…; empty: the whole
    /// match is the secret.
    secret_groups: Vec<usize>,
    check: Option<Check>,
}

impl Rule {
    fn new(kind: &'static str, regex: Regex, check: Option<Check>) -> Rule {
        let secret_groups = regex
            .capture_names()
            .enumerate()
            .filter(|(_, name)| name.is_some_and(is_secret_group))
            .map(|(i, _)| i)
            .collect();
        Rule {
            kind,
            regex,
            secret_groups,
            check,
        }
    }

    /// The span to replace in one match, if it is one to replace.
    fn secret(&self, caps: &Captures) -> Option<Range<usize>> {
        if self.check.is_some_and(|check| !check(caps)) {
            return None;
        }
        let span = if self.secret_groups.is_empty() {
            caps.get(0)?.range()
        } else {
            self.secret_groups
                .iter()
                .find_map(|&i| caps.get(i))?
                .range()
        };
        (!span.is_empty()).then_some(span)
    }

    /// This rule's secrets in `text`.
    fn spans<'t>(&'t self, text: &'t str) -> impl Iterator<Item = Range<usize>> + 't {
        self.regex
            .captures_iter(text)
            .filter_map(|caps| self.secret(&caps))
    }
}

/// Numbers the secrets of one session: the same secret gets the same
/// placeholder in every text, so the model can tell that two files hold
/// the same password without seeing it; and a number names one secret of
/// one kind: the kind it was first found as stays with it (a password
/// seen again in a URL is still `password#3`, never `url-password#3`).
/// Only a keyed hash of each secret is kept, never the secret.
#[derive(Default)]
pub struct Numbering {
    key: std::hash::RandomState,
    numbers: std::sync::Mutex<std::collections::HashMap<u64, (usize, String)>>,
    /// Numbers up to this one are taken (see `start_above`).
    after: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Numbering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Numbering")
    }
}

impl Numbering {
    /// The numbers, held for all of one text's placeholders (`Numbers`).
    fn lock(&self) -> Numbers<'_> {
        Numbers {
            numbers: self.numbers.lock().unwrap_or_else(|e| e.into_inner()),
            numbering: self,
        }
    }

    /// New numbers start above those in `text` (a conversation restored
    /// from an earlier session, numbered there): the model must not take
    /// a new secret for an old one.
    pub fn start_above(&self, text: &str) {
        let highest = text
            .match_indices(MARK)
            .filter_map(|(i, _)| {
                let rest = &text[i..text.floor_char_boundary(i + 80)];
                let hash = rest.find('#')?;
                let end = rest.find(']')?;
                rest.get(hash + 1..end)?.parse::<usize>().ok()
            })
            .max()
            .unwrap_or(0);
        self.after
            .fetch_max(highest, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A `Numbering` locked while one text's placeholders are written.
struct Numbers<'n> {
    numbers: std::sync::MutexGuard<'n, std::collections::HashMap<u64, (usize, String)>>,
    numbering: &'n Numbering,
}

impl Numbers<'_> {
    /// Writes to `out` the placeholder for `secret`, found as `kind`:
    /// `[REDACTED:kind#n]` with the kind and number it first had; and
    /// returns that kind.
    fn write(&mut self, secret: &str, kind: &str, out: &mut String) -> &str {
        use std::fmt::Write;
        use std::hash::BuildHasher;
        let n = &self.numbering;
        let h = n.key.hash_one(secret);
        let next = self.numbers.len() + 1 + n.after.load(std::sync::atomic::Ordering::Relaxed);
        let (number, kind) = self
            .numbers
            .entry(h)
            .or_insert_with(|| (next, kind.to_string()));
        let _ = write!(out, "{MARK}{kind}#{number}]");
        kind
    }
}

/// A secret found: where, and of what kind, an index into the redactor's
/// kinds. Kinds are in the order of the detectors, most specific first,
/// so the lower one wins when two findings overlap (`merge`). `via` says
/// how it was read (`explain` names the rule from the kind and this).
struct Span {
    range: Range<usize>,
    kind: usize,
    via: Via,
}

/// How a finding was read: in the text as it is, or once decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Via {
    #[default]
    Text,
    /// In URL-encoded text once decoded (`find_url_encoded`).
    UrlEncoded,
    /// A line of output of a command that reads a secret store, by the
    /// command rule with this index (`commands`).
    Command(usize),
}

/// One finding, as `walissh redact --explain` lists it: where it is in
/// the plain text (`plain`, what the redactor works on), of what kind
/// (the placeholder's), and which rule found it (`walissh:<kind>`, `keys`,
/// `operator:<id>`, `gitleaks:<id>`, `base64`, `url-encoded`…). Never the
/// secret itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Bytes of the plain text.
    pub span: Range<usize>,
    /// 1-based line and column (in characters) of its first character.
    pub start: (usize, usize),
    /// 1-based line and column (in characters) of its last character.
    pub end: (usize, usize),
    pub kind: String,
    pub rule: String,
}

/// Scrubs secrets from text bound for the model.
pub struct Redactor {
    rules: Vec<Rule>,
    /// Where each rule can match, these and then gitleaks': one pass over
    /// the text finds the literals the rules need, and each runs only on
    /// the lines around its own.
    prefilter: prefilter::Literals,
    /// Those of walissh's rules with no literal that stay within a line.
    lines: Option<prefilter::Lines>,
    /// Keys that name a secret and tools' password flags.
    pairs: pairs::Pairs,
    /// The operator's rules (`[context] redact_rules`), after walissh's
    /// own, before gitleaks'; none by default.
    operator: rules::Rules,
    /// gitleaks' rules, after walissh's own.
    gitleaks: rules::Rules,
    /// Commands whose output is a secret, and the kind their output gets.
    commands: commands::Commands,
    output_kind: usize,
    /// Values that must pass (`[context] redact_allow`): a finding whose
    /// text one of them matches is not one, but for the bastion's own
    /// credentials.
    allow: Vec<Regex>,
    /// The rule of the bastion's own credentials, if it holds any.
    credential: Option<usize>,
    /// The rules of `[ai] redact`'s patterns.
    custom: Range<usize>,
    /// Every kind a finding may have: walissh's rules', `password` (keys),
    /// the operator's ids, gitleaks' ids, `base64-secret`.
    kinds: Vec<String>,
    /// What a placeholder looks like.
    placeholder: Regex,
    /// A base64 value long enough to hold a secret.
    base64: Regex,
    /// A run of URL-encoded text: it holds at least one `%XX`.
    url_encoded: Regex,
}

impl Redactor {
    /// `extra`: the `[ai] redact` regexes (the config checked them; an Err
    /// names one that does not compile); `secrets`: literal credentials the
    /// bastion holds (target passwords, its API key); empty or very short
    /// (< 4 chars) ones are ignored. With no operator's rules and nothing
    /// allowed: walissh builds its redactor from the config
    /// (`context::redact::for_config`, through [`Redactor::build`]).
    pub fn new(extra: &[String], secrets: &[String]) -> Result<Redactor, String> {
        Redactor::build(extra, secrets, rules::Rules::empty(), Vec::new())
    }

    /// The redactor with everything it may be given: `extra` and
    /// `secrets` as in [`Redactor::new`], the operator's rules (gitleaks'
    /// format, [`Rules::parse`]) and values that must pass (`allow`).
    pub fn build(
        extra: &[String],
        secrets: &[String],
        operator: rules::Rules,
        allow: Vec<Regex>,
    ) -> Result<Redactor, String> {
        let mut rules: Vec<Rule> = KEYS.iter().map(builtin).collect();
        let mut credential = None;
        if let Some(regex) = literals(secrets) {
            credential = Some(rules.len());
            rules.push(Rule::new("bastion-credential", regex, None));
        }
        // The operator's patterns come before the guesses: they know their
        // secrets better than any heuristic.
        let custom_start = rules.len();
        for p in extra {
            let regex = compile_pattern(p)
                .map_err(|e| format!("[ai] redact pattern {p:?} is invalid: {e}"))?;
            rules.push(Rule::new("custom", regex, None));
        }
        let custom = custom_start..rules.len();
        rules.extend(SHAPES.iter().map(builtin));
        let patterns: Vec<&str> = rules.iter().map(|r| r.regex.as_str()).collect();
        let gitleaks = rules::Rules::load()?;
        let prefilter = prefilter::prefilter(&patterns)?.chain(gitleaks.keywords())?;
        let kinds: Vec<String> = rules
            .iter()
            .map(|r| r.kind.to_string())
            .chain(std::iter::once("password".to_string()))
            .chain((0..operator.len()).map(|i| operator.id(i).to_string()))
            .chain((0..gitleaks.len()).map(|i| gitleaks.id(i).to_string()))
            .chain(["secret-output".to_string(), "base64-secret".to_string()])
            .collect();
        let placeholder = Regex::new(r"\[REDACTED:[a-z0-9_-]{1,64}(?:#[0-9]{1,9})?\]")
            .expect("the placeholder pattern compiles");
        let base64 = Regex::new(r"[A-Za-z0-9+/]{24,}={0,2}").expect("the base64 pattern compiles");
        let url_encoded = Regex::new(
            r"[A-Za-z0-9._~!*'()+=&:/?@%-]*%[0-9A-Fa-f]{2}[A-Za-z0-9._~!*'()+=&:/?@%-]*",
        )
        .expect("the URL-encoding pattern compiles");
        let lines = prefilter::Lines::new(&patterns, prefilter.always());
        Ok(Redactor {
            base64,
            url_encoded,
            rules,
            lines,
            prefilter,
            pairs: pairs::Pairs::new(),
            operator,
            gitleaks,
            commands: commands::Commands::load()?,
            output_kind: kinds.len() - 2,
            allow,
            credential,
            custom,
            kinds,
            placeholder,
        })
    }

    /// `text` as the model may see it: without escape sequences or control
    /// characters (see `plain`), and with every secret replaced by a
    /// placeholder `[REDACTED:<kind>#<n>]`, `n` from `numbering` (one per
    /// session); and how many of each kind were replaced. Placeholders
    /// already in the text are left as they are.
    pub fn redact(&self, text: &str, numbering: &Numbering) -> (String, Counts) {
        let text = plain::plain(text);
        let spans = self.spans(&text);
        if spans.is_empty() {
            return (text.into_owned(), Counts::default());
        }
        self.render(&text, &spans, numbering)
    }

    /// `text` with each of `spans` (disjoint, in order) replaced by its
    /// placeholder, and the counts by kind.
    fn render(&self, text: &str, spans: &[Span], numbering: &Numbering) -> (String, Counts) {
        let mut counts = Counts::default();
        let mut out = String::with_capacity(text.len());
        let mut numbers = numbering.lock();
        let mut done = 0;
        for span in spans {
            out.push_str(&text[done..span.range.start]);
            let found = &text[span.range.clone()];
            let kind = numbers.write(found, &self.kinds[span.kind], &mut out);
            match counts.0.get_mut(kind) {
                Some(count) => *count += 1,
                None => {
                    counts.0.insert(kind.to_string(), 1);
                }
            }
            done = span.range.end;
        }
        out.push_str(&text[done..]);
        (out, counts)
    }

    /// What `redact` would replace in `text`, in order: each finding's
    /// place in the plain text, its kind and its rule (see `Finding`).
    pub fn explain(&self, text: &str) -> Vec<Finding> {
        let text = plain::plain(text);
        let spans = self.spans(&text);
        // Lines and columns in one walk over the text, span by span.
        let (mut at, mut line, mut col) = (0, 1, 1);
        let mut walk = |to: usize| {
            for c in text[at..to].chars() {
                match c {
                    '\n' => (line, col) = (line + 1, 1),
                    _ => col += 1,
                }
            }
            at = to;
            (line, col)
        };
        spans
            .into_iter()
            .map(|s| {
                let start = walk(s.range.start);
                let last = text[..s.range.end]
                    .char_indices()
                    .next_back()
                    .map_or(s.range.start, |(i, _)| i.max(s.range.start));
                let end = walk(last);
                Finding {
                    start,
                    end,
                    kind: self.kinds[s.kind].clone(),
                    rule: self.rule(&s),
                    span: s.range,
                }
            })
            .collect()
    }

    /// The findings `redact` replaces in plain `text`, disjoint and in
    /// order: every detector's (`find`), less those `[context]
    /// redact_allow` lets pass, merged with the placeholders already there
    /// (`merge`), each taking the lines of its rest (`wrapped`). A secret
    /// the terminal wrapped is found whole in the rows joined, and goes
    /// whole (`wrap::extend`).
    fn spans(&self, text: &str) -> Vec<Span> {
        self.spans_in_views(text, 0)
    }

    /// `spans`, `depth` views deep. Each view undoes something, so a view
    /// of a view ends; the bound is the second wall, should one not (one
    /// that undid nothing once overflowed the stack).
    fn spans_in_views(&self, text: &str, depth: usize) -> Vec<Span> {
        const MAX_VIEWS: usize = 4;
        if depth >= MAX_VIEWS {
            return self.spans_here(text);
        }
        // Full-width keys are read as keys; the text keeps its characters.
        let mapped = |view: &str, from: &[usize]| {
            let mut spans = self.spans_in_views(view, depth + 1);
            for s in &mut spans {
                s.range = from[s.range.start]..from[s.range.end];
            }
            spans
        };
        if let Some((folded, from)) = plain::folded(text) {
            return mapped(&folded, &from);
        }
        // Quotes written as HTML entities, or escaped twice (JSON in a
        // string in JSON), slashes escaped in JSON: read as they are, and
        // decoded.
        let mut spans = self.spans_here(text);
        for (view, from) in plain::entities(text)
            .into_iter()
            .chain(plain::unescaped(text))
        {
            wrap::absorb(&mut spans, mapped(&view, &from));
        }
        spans.sort_by_key(|s| s.range.start);
        spans
    }

    /// `spans` of the text as it stands, no view decoded.
    fn spans_here(&self, text: &str) -> Vec<Span> {
        // A public key is no secret, whatever its shape (`public key:`
        // and `peer:` in `wg show`, `PublicKey = …`).
        let find = |t: &str| {
            let mut found = self.find(t);
            // Several rules find most secrets: each place is judged once.
            let mut judged = std::collections::HashMap::new();
            found.retain(|s| {
                let command = matches!(s.via, Via::Command(_));
                *judged
                    .entry((s.range.start, s.range.end, command))
                    .or_insert_with(|| !public_or_masked(t, s.range.clone(), command))
            });
            found
        };
        let mut found = find(text);
        for side in plain::word_diff(text).iter().flatten() {
            found.extend(find(side));
        }
        // Panes side by side: each read as a screen of its own.
        for pane in panes::split(text) {
            let mut more = find(&pane.text);
            wrap::extend(&pane.text, &mut more, find);
            let back = more
                .iter()
                .flat_map(|s| {
                    pane.back(s.range.clone()).into_iter().map(|range| Span {
                        range,
                        kind: s.kind,
                        via: s.via,
                    })
                })
                .collect();
            wrap::absorb(&mut found, back);
        }
        wrap::extend(text, &mut found, find);
        if !self.allow.is_empty() {
            found.retain(|s| {
                Some(s.kind) == self.credential
                    || !text
                        .get(s.range.clone())
                        .is_some_and(|v| self.allow.iter().any(|a| a.is_match(v)))
            });
        }
        let mut spans = merge(found, &placeholders(&self.placeholder, text));
        wrap::wrapped(text, &mut spans);
        spans
    }

    /// The rule that found a span, as `explain` names it.
    fn rule(&self, s: &Span) -> String {
        match s.via {
            Via::UrlEncoded => return "url-encoded".to_string(),
            Via::Command(i) => return format!("command:{}", self.commands.id(i)),
            Via::Text => {}
        }
        let pairs = self.rules.len();
        let operator = pairs + 1..pairs + 1 + self.operator.len();
        let gitleaks = operator.end..operator.end + self.gitleaks.len();
        let kind = self.kinds.get(s.kind).map_or("?", String::as_str);
        match s.kind {
            i if Some(i) == self.credential => format!("walissh:{kind}"),
            i if self.custom.contains(&i) => format!("ai.redact:{}", i - self.custom.start + 1),
            i if i < pairs => format!("walissh:{kind}"),
            i if i == pairs => "keys".to_string(),
            i if operator.contains(&i) => format!("operator:{kind}"),
            i if gitleaks.contains(&i) => format!("gitleaks:{kind}"),
            _ if kind == "base64-secret" => "base64".to_string(),
            _ => format!("walissh:{kind}"),
        }
    }

    /// Every finding in `text`, in no order: of every rule, in URL-encoded
    /// text once decoded, and base64 values whose decoded text holds a
    /// secret.
    fn find(&self, text: &str) -> Vec<Span> {
        let mut spans = self.find_plain(text);
        spans.extend(self.find_url_encoded(text));
        spans.extend(self.find_base64(text));
        spans.extend(self.find_outputs(text));
        spans
    }

    /// The lines of output of commands that read a secret store, on a
    /// screen's text: after a prompt line whose command a rule of
    /// `commands.toml` names (`cat /run/secrets/db`, `vault kv get`).
    fn find_outputs(&self, text: &str) -> Vec<Span> {
        self.commands
            .outputs(text)
            .into_iter()
            .map(|(range, rule)| Span {
                range,
                kind: self.output_kind,
                via: Via::Command(rule),
            })
            .collect()
    }

    /// `output` of `command` as the model may see it: every line replaced
    /// when the command reads a secret store (their count kept, so the
    /// model sees that it printed something), else as `redact` makes it.
    pub fn redact_output(
        &self,
        command: &str,
        output: &str,
        numbering: &Numbering,
    ) -> (String, Counts) {
        let Some(reading) = self.commands.reading(command) else {
            return self.redact(output, numbering);
        };
        let rule = reading.rule;
        let text = plain::plain(output);
        let mut sifter = self.commands.sifter(command.to_string(), &reading);
        let mut spans = Vec::new();
        // The lines left to the detectors (the command failing, a prompt,
        // a public field, what a sink printed), read in one pass below.
        let mut left: Vec<Range<usize>> = Vec::new();
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let start = at;
            at += line.len();
            let body = line.trim_end_matches(['\n', '\r']);
            if sifter.leaves(body) {
                // Lines left one after another are one block: a key's
                // lines go together.
                match left.last_mut() {
                    Some(block) if text[block.end..start].trim_start_matches('\r') == "\n" => {
                        block.end = start + body.len();
                    }
                    _ => left.push(start..start + body.len()),
                }
                continue;
            }
            // (A line of blanks is an empty value, not a reversed range.)
            let lead = body.len() - body.trim_start().len();
            let value = start + lead..start + lead + body.trim().len();
            let placeholder = self
                .placeholder
                .find(&text[value.clone()])
                .is_some_and(|m| m.len() == value.len());
            if !value.is_empty() && !placeholder {
                spans.push(Span {
                    range: value,
                    kind: self.output_kind,
                    via: Via::Command(rule),
                });
            }
        }
        if !left.is_empty() {
            // What the detectors find, cut to the blocks left: the lines
            // replaced whole are the command's, and a finding that goes on
            // into them (a key whose middle row looks like a digest) still
            // takes its part of a block.
            for s in self.spans(&text) {
                let first = left.partition_point(|l| l.end <= s.range.start);
                for block in left[first..].iter().take_while(|l| l.start < s.range.end) {
                    let range = s.range.start.max(block.start)..s.range.end.min(block.end);
                    if !range.is_empty() {
                        spans.push(Span { range, ..s });
                    }
                }
            }
            spans.sort_by_key(|s| s.range.start);
        }
        self.render(&text, &spans, numbering)
    }

    /// Base64 values whose decoded text holds a secret, whole. The decoded
    /// runs are searched as one text, a line each (see
    /// `find_url_encoded`); a finding marks every run it touches.
    fn find_base64(&self, text: &str) -> Vec<Span> {
        let kind = self.kinds.len() - 1;
        let mut secret: Vec<(Range<usize>, bool)> = Vec::new();
        let mut joined = String::new();
        // Where each decoded run's text starts in `joined`, and which run
        // of `secret` it is (a PEM row that does not decode has no text).
        let (mut starts, mut runs) = (Vec::new(), Vec::new());
        for m in self.base64.find_iter(text) {
            let Some(decoded) = decode_base64(m.as_str()) else {
                // The first row of a PEM key's base64 that the terminal
                // wrapped (`tls.key: LS0tLS1CRUdJTiBFQyBQUklW…`): its
                // rows below go with it (`wrapped`).
                if encodes_private_key(m.as_str()) {
                    secret.push((m.range(), true));
                }
                continue;
            };
            secret.push((
                m.range(),
                decoded.contains("PRIVATE KEY") || credentials(&decoded),
            ));
            starts.push(joined.len());
            runs.push(secret.len() - 1);
            joined.push_str(&decoded);
            joined.push('\n');
        }
        if !joined.is_empty() {
            for f in self.find_plain(&joined) {
                let first = starts.partition_point(|&s| s <= f.range.start) - 1;
                let last = starts.partition_point(|&s| s < f.range.end.max(1)) - 1;
                for &run in &runs[first..=last.max(first)] {
                    secret[run].1 = true;
                }
            }
        }
        secret
            .into_iter()
            .filter(|(_, s)| *s)
            .map(|(range, _)| Span {
                range,
                kind,
                via: Via::Text,
            })
            .collect()
    }

    /// The findings of walissh's own rules, each run only on the windows
    /// of the text where the prefilter says it can match: on text dense
    /// with secrets, each line holds a few kinds, not all of them.
    #[cfg(test)]
    fn find_own(&self, text: &str) -> Vec<Span> {
        let mut windows = self.prefilter.windows(text.as_bytes());
        windows.truncate(self.rules.len());
        self.narrow(text, &mut windows);
        self.find_own_in(text, windows)
    }

    /// The windows of the rules with no literal that stay within a line,
    /// narrowed to the lines one of them may match on (`Lines`).
    fn narrow(&self, text: &str, windows: &mut [Vec<Range<usize>>]) {
        if let Some(lines) = &self.lines {
            lines.narrow(text.as_bytes(), windows);
        }
    }

    /// `find_own`, given each rule's windows.
    fn find_own_in(&self, text: &str, windows: Vec<Vec<Range<usize>>>) -> Vec<Span> {
        let mut spans = Vec::new();
        for (i, windows) in windows.into_iter().enumerate() {
            for w in windows {
                spans.extend(self.rules[i].spans(&text[w.clone()]).map(|r| Span {
                    range: w.start + r.start..w.start + r.end,
                    kind: i,
                    via: Via::Text,
                }));
            }
        }
        spans
    }

    /// The secrets in URL-encoded runs of `text` (`p%40ss`, a query string
    /// inside a redirect URL, JSON sent as a form), found in the decoded
    /// text and mapped back to the encoded characters that spell them, so
    /// only the secret goes and the rest of the URL stays. All runs are
    /// decoded into one text, a line each, and searched once: text made of
    /// thousands of short runs must not cost a search per run.
    fn find_url_encoded(&self, text: &str) -> Vec<Span> {
        let mut joined = String::new();
        // Where each byte of `joined` came from in `text`, and where each
        // run ends in `joined`.
        let mut from: Vec<usize> = Vec::new();
        let mut ends: Vec<usize> = Vec::new();
        for m in self.url_encoded.find_iter(text) {
            let Some((decoded, map)) = decode_url(m.as_str()) else {
                continue;
            };
            joined.push_str(&decoded);
            from.extend(map.into_iter().map(|i| m.start() + i));
            ends.push(joined.len());
            joined.push('\n');
        }
        if joined.is_empty() {
            return Vec::new();
        }
        self.find_plain(&joined)
            .into_iter()
            .filter_map(|s| {
                // A finding is cut to the run it starts in (a line break
                // between runs is in none of them).
                let mut start = s.range.start;
                if ends.binary_search(&start).is_ok() {
                    start += 1;
                }
                let run = ends.partition_point(|&e| e <= start);
                let end = s.range.end.min(*ends.get(run)?);
                (end > start).then(|| Span {
                    range: from[start]..from[end],
                    kind: s.kind,
                    via: Via::UrlEncoded,
                })
            })
            .collect()
    }

    /// Every finding of every rule in `text`, in no order.
    fn find_plain(&self, text: &str) -> Vec<Span> {
        // One pass finds where walissh's rules and gitleaks' may match.
        let prefilter::Sites {
            mut windows,
            mut places,
        } = self.prefilter.sites(text.as_bytes());
        let theirs = windows.split_off(self.rules.len());
        let their_places = places.split_off(self.rules.len());
        self.narrow(text, &mut windows);
        let mut spans = self.find_own_in(text, windows);
        let pairs = self.rules.len();
        spans.extend(self.pairs.find(text).into_iter().map(|range| Span {
            range,
            kind: pairs,
            via: Via::Text,
        }));
        // The operator's rules (`[context] redact_rules`), then gitleaks'.
        // gitleaks' secrets are sometimes wider than the secret (the user
        // with the password, a webhook's host with its path): where one of
        // walissh's rules, tuned to keep that context, found it too, its
        // span wins in `merge`. A rule's secret group may end inside a
        // character.
        let gitleaks = pairs + 1 + self.operator.len();
        let found = [
            (self.operator.find(text.as_bytes()), pairs + 1),
            (
                self.gitleaks
                    .find_in_windows(text.as_bytes(), theirs, their_places),
                gitleaks,
            ),
        ];
        for (found, first) in found {
            spans.extend(found.into_iter().map(|f| Span {
                range: text.floor_char_boundary(f.span.start)..text.ceil_char_boundary(f.span.end),
                kind: first + f.rule,
                via: Via::Text,
            }));
        }
        spans
    }
}

#[cfg(test)]
mod tests;

/// The README's example, run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
