//! gitleaks' default secret-detection rules (MIT), and an operator's own
//! in the same format (`[context] redact_rules`), held as data.
//!
//! This file owns reading `gitleaks/gitleaks.toml` (vendored, at the version
//! in `gitleaks/VERSION`; `tools/update-gitleaks-rules TAG` replaces it) or
//! an operator's file (`Rules::parse` with `Origin::Operator`, held to
//! more: every rule has a regex and an id fit for a placeholder, the file
//! a bounded size) and running the rules the way gitleaks does: a rule runs only on text that
//! holds one of its keywords; its secret is its secret group, or its first
//! capture group that took part, or the whole match; a rule with an entropy
//! floor keeps only secrets above it (and its `generic` rules only secrets
//! with a digit); allow-lists (regexes on the secret, the match or the line,
//! and stop-words) and the file's global allow-list drop known harmless
//! values. Rules on file paths do not apply to terminal text and are left
//! out. What becomes of the spans found is the redactor's (`mod.rs`).
//!
//! The rules are Go RE2 regexes. They compile here under the `regex` crate
//! on bytes, with ASCII classes as in Go; [`Rules::load`] refuses a rule
//! that does not compile or that matches the empty string, and a unit test
//! holds the vendored file to that. A rule that opens with gitleaks' lazy
//! `[\w.-]{0,50}?` runs without it and is tried at its keywords (`Lead`,
//! `Anchored`): the same matches, for much less of its automaton.

use std::ops::Range;

use aho_corasick::AhoCorasick;
use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::hir::{Class, Hir, HirKind};
use serde::Deserialize;

use super::prefilter::Literals;

/// The vendored file, compiled in: the rules cannot go missing on a host.
const GITLEAKS: &str = include_str!("gitleaks/gitleaks.toml");
/// Its gitleaks release.
const VERSION: &str = include_str!("gitleaks/VERSION");

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    allowlist: Option<RawAllow>,
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRule {
    id: String,
    regex: Option<String>,
    #[serde(default)]
    secret_group: usize,
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    allowlists: Vec<RawAllow>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawAllow {
    #[serde(default)]
    regexes: Vec<String>,
    regex_target: Option<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
    condition: Option<String>,
}

/// What an allow-list's regexes are matched against.
#[derive(Clone, Copy)]
enum Target {
    Secret,
    Match,
    Line,
}

/// One allow-list: a finding it matches is not a secret.
struct Allow {
    /// Its regexes, as one (any of them matches).
    regexes: Option<Regex>,
    target: Target,
    /// Words a secret holding one is allowed for, any case: one automaton,
    /// as generic rules have about 1500 of them.
    stopwords: Option<AhoCorasick>,
    /// All its criteria must match (`condition = "AND"`), not any.
    all: bool,
    /// It also names paths, which terminal text never matches.
    has_paths: bool,
}

/// One compiled rule.
struct Rule {
    id: String,
    /// The pattern, without its lead when it has one.
    regex: Regex,
    lead: Option<Lead>,
    secret_group: usize,
    entropy: Option<f64>,
    allows: Vec<Allow>,
}

/// A lazy lead: the `[\w.-]{0,50}?` before the keyword of a hundred of
/// gitleaks' rules. Most of such a rule's automaton, and of the work of
/// every match, went to it. A leftmost match starts as far back over the
/// lead's bytes as they run before the rest of the pattern matches, up
/// to its bound, the rest being the same (the lead is lazy, so the first
/// keyword from that start is the leftmost one). So the rule runs without
/// it, and its matches are walked back (`start`), which is what the
/// allow-lists that read the whole match (`random_access`) see.
struct Lead {
    bytes: [bool; 256],
    max: usize,
    /// The rest, tried where it can start, when it starts with a literal.
    anchored: Option<Anchored>,
}

/// A pattern (the rest after a lead) that starts with one of a few
/// literals (a keyword), tried anchored at each of them instead of
/// searched for. An unanchored automaton follows every keyword of the
/// last few hundred bytes at once, each at its own count: on each text
/// with new values it met states it had never built (0.7 ms of each
/// 64 KiB of the corpus, for `generic-api-key` alone). Anchored, it
/// follows one. A leftmost match starts at the first place it can, so
/// trying the places in order, from the end of the last match on, finds
/// the same matches.
struct Anchored {
    regex: regex_automata::meta::Regex,
    /// Where a match may start: its literals, in any ASCII case.
    starts: AhoCorasick,
}

impl Anchored {
    fn new(rest: &Hir) -> Option<Anchored> {
        let starts = super::prefilter::starts(rest)?;
        let starts = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(starts)
            .ok()?;
        let regex = regex_automata::meta::Builder::new()
            .configure(
                regex_automata::meta::Config::new()
                    .nfa_size_limit(Some(NFA_LIMIT))
                    .hybrid_cache_capacity(DFA_LIMIT),
            )
            .build_from_hir(rest)
            .ok()?;
        Some(Anchored { regex, starts })
    }

    /// The matches in `text`, in order, each as its groups' spans; None
    /// when its literals are too close together to be tried one by one
    /// (each try may read a few hundred bytes: on `password=password=…`
    /// that is far more than one search).
    fn matches(&self, text: &[u8]) -> Option<Vec<Vec<Option<Range<usize>>>>> {
        use regex_automata::{Anchored as At, Input};
        /// At least this many bytes a place, on average.
        const SPACING: usize = 16;
        // Overlapping literals come in the order they end: in the order
        // they start, each place once.
        let mut starts: Vec<usize> = Vec::new();
        for m in self.starts.find_overlapping_iter(text) {
            if (starts.len() + 1) * SPACING > text.len().max(SPACING) {
                return None;
            }
            starts.push(m.start());
        }
        starts.sort_unstable();
        starts.dedup();
        let mut caps = self.regex.create_captures();
        let mut out = Vec::new();
        let mut from = 0;
        for start in starts {
            if start < from {
                continue;
            }
            let input = Input::new(text).range(start..).anchored(At::Yes);
            self.regex.search_captures(&input, &mut caps);
            let Some(whole) = caps.get_match() else {
                continue;
            };
            from = whole.end().max(start + 1);
            out.push(
                (0..caps.group_len())
                    .map(|g| caps.get_group(g).map(|s| s.range()))
                    .collect(),
            );
        }
        Some(out)
    }
}

impl Lead {
    /// The lead of a pattern that starts with one, and the rest of it: a
    /// lazy repetition from zero of a class of ASCII bytes, first in the
    /// pattern.
    fn split(hir: &Hir) -> Option<(Lead, Hir)> {
        let HirKind::Concat(parts) = hir.kind() else {
            return None;
        };
        let HirKind::Repetition(r) = parts.first()?.kind() else {
            return None;
        };
        let HirKind::Class(class) = r.sub.kind() else {
            return None;
        };
        if r.min != 0 || r.greedy {
            return None;
        }
        let ranges: Vec<(u32, u32)> = match class {
            Class::Bytes(c) => c
                .ranges()
                .iter()
                .map(|r| (r.start().into(), r.end().into()))
                .collect(),
            Class::Unicode(c) => c
                .ranges()
                .iter()
                .map(|r| (r.start().into(), r.end().into()))
                .collect(),
        };
        let mut bytes = [false; 256];
        for (start, end) in ranges {
            if end >= 0x80 {
                return None;
            }
            bytes[start as usize..=end as usize].fill(true);
        }
        let rest = Hir::concat(parts[1..].to_vec());
        let lead = Lead {
            bytes,
            max: usize::try_from(r.max?).ok()?,
            anchored: Anchored::new(&rest),
        };
        Some((lead, rest))
    }

    /// The matches of a rule whose pattern had this lead, its `rest` the
    /// regex of the rest of it: each as its groups' spans, the whole match
    /// (group 0) with its lead.
    fn matches(&self, rest: &Regex, text: &[u8]) -> Vec<Vec<Option<Range<usize>>>> {
        let tried = self.anchored.as_ref().and_then(|a| a.matches(text));
        let mut all = tried.unwrap_or_else(|| groups(rest, text));
        // Where the search for each match began: a lead walks back no
        // further.
        let mut from = 0;
        for groups in &mut all {
            if let Some(Some(whole)) = groups.first_mut() {
                let end = whole.end;
                whole.start = self.start(text, whole.start, from);
                from = end;
            }
        }
        all
    }

    /// Where a match of the rest that starts at `at` starts with its
    /// lead, no further back than `floor` (where the search began).
    fn start(&self, text: &[u8], at: usize, floor: usize) -> usize {
        let mut start = at;
        while start > floor && at - start < self.max && self.bytes[usize::from(text[start - 1])] {
            start -= 1;
        }
        start
    }
}

impl Rule {
    /// The matches in `text`, in order, each as its groups' spans.
    fn matches(&self, text: &[u8]) -> Vec<Vec<Option<Range<usize>>>> {
        match &self.lead {
            Some(lead) => lead.matches(&self.regex, text),
            None => groups(&self.regex, text),
        }
    }
}

/// The matches of `regex` in `text`, in order, each as its groups' spans.
fn groups(regex: &Regex, text: &[u8]) -> Vec<Vec<Option<Range<usize>>>> {
    regex
        .captures_iter(text)
        .map(|c| c.iter().map(|m| m.map(|m| m.range())).collect())
        .collect()
}

/// One secret a rule found, in the text it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) rule: usize,
    pub(crate) span: Range<usize>,
}

/// The rules, ready to run.
pub(crate) struct Rules {
    rules: Vec<Rule>,
    /// Where each rule may match: the literals every match of it holds,
    /// the lines around them it reads (as many as one of its matches may
    /// cross), and its keywords, one of which must be somewhere in a text
    /// for it to run there. A rule with no literal reads all of a text
    /// its keywords open.
    keywords: Literals,
    global: Option<Allow>,
}

/// A Go RE2 pattern as the `regex` crate reads it: Go takes a `{` that
/// does not start a repetition (`{{ x }}`) as a literal, where `regex`
/// wants it escaped. Everything else the rules use reads the same.
fn from_go(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.char_indices().peekable();
    let (mut class, mut repeat) = (false, false);
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                out.push(c);
                if let Some((_, next)) = chars.next() {
                    out.push(next);
                }
                continue;
            }
            '[' if !class => {
                class = true;
                out.push(c);
                // A `]` first in a class (or after `^`) is a literal.
                if let Some(&(_, '^')) = chars.peek() {
                    out.push('^');
                    chars.next();
                }
                if let Some(&(_, ']')) = chars.peek() {
                    out.push_str("\\]");
                    chars.next();
                }
                continue;
            }
            ']' if class => class = false,
            '{' if !class => {
                repeat = repetition(&pattern[i..]);
                if !repeat {
                    out.push_str("\\{");
                    continue;
                }
            }
            // Closing a repetition, or a literal.
            '}' if !class && !std::mem::take(&mut repeat) => {
                out.push_str("\\}");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

/// Whether `s` (starting at a `{`) is a repetition: `{n}`, `{n,}`, `{n,m}`.
fn repetition(s: &str) -> bool {
    let Some(end) = s.find('}') else {
        return false;
    };
    let inner = &s[1..end];
    let (min, max) = inner.split_once(',').unwrap_or((inner, "0"));
    !min.is_empty()
        && min.bytes().all(|b| b.is_ascii_digit())
        && max.bytes().all(|b| b.is_ascii_digit())
}

/// Compiles one gitleaks regex: bytes, ASCII classes as in Go, larger
/// limits than the default (some rules repeat wide classes 50 times).
fn compile(pattern: &str) -> Result<Regex, String> {
    let pattern = &from_go(pattern);
    let regex = build(pattern, false)
        .or_else(|_| build(pattern, true))
        .map_err(|e| super::one_line(&e.to_string()))?;
    if regex.is_match(b"") {
        return Err("it matches the empty string".to_string());
    }
    Ok(regex)
}

/// A gitleaks regex built with larger limits than the default (some
/// rules repeat wide classes 50 times).
fn build(pattern: &str, unicode: bool) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .unicode(unicode)
        .size_limit(NFA_LIMIT)
        .dfa_size_limit(DFA_LIMIT)
        .build()
}

/// The limits `build` and `Anchored` compile gitleaks' rules under.
const NFA_LIMIT: usize = 64 << 20;
const DFA_LIMIT: usize = 16 << 20;

/// `compile`, with the pattern's lead apart when it has one (`Lead`).
fn compile_with_lead(pattern: &str) -> Result<(Regex, Option<Lead>), String> {
    let regex = compile(pattern)?;
    let split = super::parse_as_gitleaks(&from_go(pattern)).and_then(|hir| Lead::split(&hir));
    let Some((lead, rest)) = split else {
        return Ok((regex, None));
    };
    // The rest, printed as the regex crate reads it; its groups keep
    // their numbers, as the lead has none.
    match build(&rest.to_string(), false) {
        Ok(rest) if rest.captures_len() == regex.captures_len() => Ok((rest, Some(lead))),
        _ => Ok((regex, None)),
    }
}

impl Allow {
    fn new(raw: RawAllow) -> Result<Allow, String> {
        // An allow-list regex may match the empty string (`^$`-like): it
        // only ever lets a finding go, so that is harmless.
        let mut parts = Vec::new();
        for p in &raw.regexes {
            let p = from_go(p);
            let ascii = RegexBuilder::new(&p).unicode(false).build().is_ok();
            if !ascii {
                Regex::new(&p).map_err(|e| super::one_line(&e.to_string()))?;
            }
            parts.push(format!("(?{}u:{p})", if ascii { "-" } else { "" }));
        }
        // Any of them, as one regex: each finding pays one search, not one
        // per regex (gitleaks' global list has thirteen).
        let regexes = match parts.is_empty() {
            true => None,
            false => {
                Some(Regex::new(&parts.join("|")).map_err(|e| super::one_line(&e.to_string()))?)
            }
        };
        let target = match raw.regex_target.as_deref() {
            None | Some("secret") => Target::Secret,
            Some("match") => Target::Match,
            Some("line") => Target::Line,
            Some(other) => return Err(format!("unknown regexTarget {other:?}")),
        };
        Ok(Allow {
            regexes,
            target,
            stopwords: stopwords(&raw.stopwords)?,
            all: raw.condition.as_deref() == Some("AND"),
            has_paths: !raw.paths.is_empty(),
        })
    }

    /// Whether this allow-list lets the finding go.
    fn allows(&self, secret: &[u8], matched: &[u8], line: &[u8]) -> bool {
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => matched,
            Target::Line => line,
        };
        // Each criterion the list has, as a verdict; paths never match
        // terminal text.
        let regexes = self.regexes.as_ref().map(|r| r.is_match(target));
        let stopwords = self.stopwords.as_ref().map(|words| words.is_match(secret));
        let paths = self.has_paths.then_some(false);
        let mut verdicts = [regexes, stopwords, paths].into_iter().flatten().peekable();
        match self.all {
            true => verdicts.peek().is_some() && verdicts.all(|v| v),
            false => verdicts.any(|v| v),
        }
    }
}

/// An automaton for an allow-list's stop-words, matched in any case as
/// gitleaks does; None when there are none.
fn stopwords(words: &[String]) -> Result<Option<AhoCorasick>, String> {
    if words.is_empty() {
        return Ok(None);
    }
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .kind(Some(aho_corasick::AhoCorasickKind::DFA))
        .build(words)
        .map(Some)
        .map_err(|e| format!("stop-words: {e}"))
}

/// Shannon entropy of `s`, in bits per byte.
pub(crate) fn entropy(s: &[u8]) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in s {
        counts[usize::from(b)] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// The line of `text` around `span`.
fn line_of(text: &[u8], span: &Range<usize>) -> Range<usize> {
    let start = memchr::memrchr(b'\n', &text[..span.start]).map_or(0, |i| i + 1);
    let end = memchr::memchr(b'\n', &text[span.end..]).map_or(text.len(), |i| span.end + i);
    start..end
}

/// Whose rules a file holds: it decides what is refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Origin {
    /// gitleaks' vendored set: a rule on file paths only is left out.
    Gitleaks,
    /// An operator's file (`[context] redact_rules`): every rule must have
    /// a regex, an id fit for a placeholder, and the file a bounded size.
    Operator,
}

/// The largest operator's rules file, in bytes.
pub(crate) const MAX_FILE_BYTES: usize = crate::config::REDACT_RULES_MAX_BYTES;
/// The most rules an operator's file may hold.
pub(crate) const MAX_RULES: usize = 1000;

/// A TOML error in one line: where (line of the file) and what.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let what = super::one_line(e.message());
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {what}")
        }
        None => what,
    }
}

/// Whether `id` can name a placeholder's kind (`[REDACTED:<id>#1]`), as
/// the placeholder pattern reads it.
fn placeholder_kind(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl Rules {
    /// Where the rules' keywords are, to be found in one pass with other
    /// literals (`Literals::chain`).
    pub(super) fn keywords(&self) -> &Literals {
        &self.keywords
    }

    /// The vendored rules. An Err names the first rule that does not
    /// compile or that matches the empty string.
    pub(crate) fn load() -> Result<Rules, String> {
        Rules::parse(GITLEAKS, Origin::Gitleaks)
            .map_err(|e| format!("gitleaks rules: {e} (gitleaks {})", VERSION.trim()))
    }

    /// No rules: what runs when an operator has none.
    pub(crate) fn empty() -> Rules {
        Rules::parse("", Origin::Operator).expect("no rules parse")
    }

    /// Rules in gitleaks' TOML format. An Err is one line: the TOML's line,
    /// or the rule (its number, 1-based, and id) and what is wrong with it:
    /// a regex that does not compile or matches the empty string, no
    /// regex (for an operator's rule), an id used twice, a secret group
    /// the regex does not have, an allow-list that does not compile; and
    /// for an operator's file, one over `MAX_FILE_BYTES` or `MAX_RULES`.
    pub(crate) fn parse(text: &str, origin: Origin) -> Result<Rules, String> {
        let operator = origin == Origin::Operator;
        if operator && text.len() > MAX_FILE_BYTES {
            return Err(format!(
                "{} bytes, more than the {} a rules file may have",
                text.len(),
                MAX_FILE_BYTES
            ));
        }
        let file: File = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        if operator && file.rules.len() > MAX_RULES {
            return Err(format!(
                "{} rules, more than the {MAX_RULES} a rules file may have",
                file.rules.len()
            ));
        }
        let mut rules = Vec::new();
        let (mut literals, mut keywords, mut reach) = (Vec::new(), Vec::new(), Vec::new());
        let mut ids = std::collections::HashSet::new();
        for (n, raw) in file.rules.into_iter().enumerate() {
            let id = raw.id;
            let at = format!("rule {} `{id}`", n + 1);
            if !ids.insert(id.clone()) {
                return Err(format!("{at}: the id is used by an earlier rule"));
            }
            if operator && !placeholder_kind(&id) {
                return Err(format!(
                    "{at}: an id is 1 to 64 of a-z, 0-9, '-' and '_' (it names the placeholder)"
                ));
            }
            let Some(pattern) = raw.regex else {
                if operator {
                    return Err(format!(
                        "{at}: no regex (rules on file paths only do not apply to terminal text)"
                    ));
                }
                // Rules on file names only: nothing to look for in text.
                continue;
            };
            let go = from_go(&pattern);
            let breaks = super::max_line_breaks(&go);
            let (regex, lead) =
                compile_with_lead(&pattern).map_err(|e| format!("{at}: regex: {e}"))?;
            let groups = regex.captures_len() - 1;
            if raw.secret_group > groups {
                return Err(format!(
                    "{at}: secretGroup {} but the regex has {groups} groups",
                    raw.secret_group
                ));
            }
            let allows = raw
                .allowlists
                .into_iter()
                .map(Allow::new)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{at}: allowlist: {e}"))?;
            let index = rules.len();
            // A rule reads the lines around what every match of it holds,
            // once one of its keywords is anywhere in the text: a keyword
            // need not be part of the match (`airtable` a line above its
            // token).
            let needs =
                super::parse_as_gitleaks(&go).and_then(|hir| super::prefilter::literals_of(&hir));
            literals.extend(needs.into_iter().flatten().map(|l| (l, index)));
            keywords.extend(raw.keywords.into_iter().map(|k| (k.into_bytes(), index)));
            reach.push(breaks);
            rules.push(Rule {
                id,
                regex,
                lead,
                secret_group: raw.secret_group,
                entropy: raw.entropy,
                allows,
            });
        }
        let keywords = Literals::new(literals, keywords, reach)?;
        let global = file
            .allowlist
            .map(Allow::new)
            .transpose()
            .map_err(|e| format!("[allowlist]: {e}"))?;
        Ok(Rules {
            rules,
            keywords,
            global,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.rules.len()
    }

    /// The id of rule `i` (`aws-access-token`, `generic-api-key`…).
    pub(crate) fn id(&self, i: usize) -> &str {
        &self.rules[i].id
    }

    /// Every secret the rules find in `text`, rule by rule.
    ///
    /// gitleaks runs a rule over a whole file once its keyword is anywhere
    /// in it. Here such a rule reads only the lines around the literals
    /// every match of it holds, read off its pattern (`Literals::windows`):
    /// on output dense with secrets nearly every keyword is somewhere, and
    /// 200 rules each reading all of it cost more than the budget. A
    /// keyword is not always part of the match (`airtable` in a line
    /// above the token), so it only opens the rule; the lines around a
    /// literal take in a key and a value a rule lets stand apart.
    pub(crate) fn find(&self, text: &[u8]) -> Vec<Found> {
        self.find_in_windows(text, self.keywords.windows(text))
    }

    /// `find`, given where each rule may match (`Literals::windows` of
    /// `keywords`, or of a set chained to them).
    pub(super) fn find_in_windows(
        &self,
        text: &[u8],
        windows: Vec<Vec<Range<usize>>>,
    ) -> Vec<Found> {
        let mut found = Vec::new();
        for (i, windows) in windows.into_iter().enumerate() {
            for window in windows {
                self.find_in(i, text, window, &mut found);
            }
        }
        found
    }

    /// The secrets rule `i` finds in `text[window]`, a window of whole
    /// lines, with their positions in `text`.
    fn find_in(&self, i: usize, text: &[u8], window: Range<usize>, found: &mut Vec<Found>) {
        let rule = &self.rules[i];
        let offset = window.start;
        let text = &text[window];
        for groups in rule.matches(text) {
            let Some(Some(whole)) = groups.first().cloned() else {
                continue;
            };
            let secret = match rule.secret_group {
                0 => groups[1..]
                    .iter()
                    .flatten()
                    .find(|m| !m.is_empty())
                    .map_or(whole.clone(), Range::clone),
                g => match groups.get(g).cloned().flatten() {
                    Some(m) => m,
                    None => continue,
                },
            };
            if secret.is_empty() || !self.keeps(rule, text, secret.clone(), whole) {
                continue;
            }
            found.push(Found {
                rule: i,
                span: offset + secret.start..offset + secret.end,
            });
        }
    }

    /// Whether a secret a rule matched passes its entropy floor and no
    /// allow-list lets it go.
    fn keeps(&self, rule: &Rule, text: &[u8], secret: Range<usize>, whole: Range<usize>) -> bool {
        let value = &text[secret.clone()];
        if let Some(floor) = rule.entropy {
            if entropy(value) <= floor {
                return false;
            }
            if rule.id.starts_with("generic") && !value.iter().any(u8::is_ascii_digit) {
                return false;
            }
        }
        let line = &text[line_of(text, &whole)];
        let matched = &text[whole];
        !rule
            .allows
            .iter()
            .chain(self.global.as_ref())
            .any(|a| a.allows(value, matched, line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vendored_rule_compiles_and_none_matches_nothing() {
        let rules = Rules::load().unwrap();
        assert!(rules.len() >= 200, "{} rules", rules.len());
        assert!(VERSION.starts_with('v'));
    }

    /// A rule run without its lead (`Lead`), and tried at its keywords
    /// (`Anchored`), finds what its whole pattern finds: the same
    /// matches, from the same starts, with the same groups, checked
    /// against the regex crate on the whole pattern.
    #[test]
    fn a_rule_without_its_lead_matches_as_the_whole_pattern() {
        #[derive(serde::Deserialize)]
        struct Raw {
            rules: Vec<RawRegex>,
        }
        #[derive(serde::Deserialize)]
        struct RawRegex {
            id: String,
            regex: Option<String>,
        }
        let raw: Raw = toml::from_str(GITLEAKS).unwrap();
        let rules = Rules::load().unwrap();
        let mut texts = vec![
            super::super::corpus::bulk(32 << 10),
            // Runs longer than the lead's bound before a keyword, a match
            // right after another, keywords inside the run, at the start.
            format!("{}api_key = \"Zx9Qw3Er5Ty7Ui1Op2As4Df6\"\n", "a".repeat(70)),
            "key=Zx9Qw3Er5Ty7Ui1Op2\nsecret_token=Zx9Qw3Er5Ty7Ui1Op2 auth=Zx9Qw3Er5Ty7Ui1Op2"
                .to_string(),
            "my.password.key-secret_auth: Zx9Qw3Er5Ty7Ui1Op2As4,token:Zx9Qw3Er5Ty7Ui1Op2As4\n"
                .to_string(),
            "random_access_key=AbCdEfGh1234567890 x-api-version=2024-11-30T10:00:00".to_string(),
            // A match that ends in a lead's byte (JSON's `\n`, escaped):
            // the next one's lead stops there.
            "{\"env\": \"key=Zx9Qw3Er5Ty7Ui1Op2\\nmy_token=Zx9Qw3Er5Ty7Ui1Op2\\n\"}".to_string(),
        ];
        for word in [
            "discord",
            "mailgun",
            "lob",
            "gocardless",
            "password",
            "sumologic",
            "heroku",
        ] {
            texts.push(format!(
                "{0}_{1}_api_key = 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n{0}{0}: key-0123456789abcdef0123456789abcdef\n",
                "x.y-z".repeat(12),
                word
            ));
        }
        let (mut led, mut anchored) = (0, 0);
        for r in raw.rules {
            let Some(pattern) = r.regex else { continue };
            let Some(rule) = rules.rules.iter().find(|x| x.id == r.id) else {
                continue;
            };
            let Some(lead) = &rule.lead else { continue };
            led += 1;
            anchored += usize::from(lead.anchored.is_some());
            let whole = compile(&pattern).unwrap();
            for text in &texts {
                let text = text.as_bytes();
                let expected: Vec<Vec<Option<Range<usize>>>> = whole
                    .captures_iter(text)
                    .map(|c| c.iter().map(|m| m.map(|m| m.range())).collect())
                    .collect();
                let got = rule.matches(text);
                assert_eq!(got, expected, "{}", r.id);
            }
        }
        assert!(led >= 90, "{led} rules with a lead");
        assert!(anchored >= 90, "{anchored} of them tried at their keywords");
    }

    #[test]
    fn a_rule_that_matches_the_empty_string_is_refused() {
        let file = "[[rules]]\nid = \"bad\"\nregex = '''x*'''\nkeywords = [\"x\"]\n";
        let err = Rules::parse(file, Origin::Gitleaks).err().unwrap();
        assert!(err.contains("bad") && err.contains("empty"), "{err}");
        let file = "[[rules]]\nid = \"broken\"\nregex = '''(x'''\n";
        assert!(
            Rules::parse(file, Origin::Gitleaks)
                .err()
                .unwrap()
                .contains("broken")
        );
    }

    #[test]
    fn rules_find_their_secrets_and_allow_lists_let_go() {
        let rules = Rules::load().unwrap();
        let ids = |t: &str| -> Vec<String> {
            rules
                .find(t.as_bytes())
                .iter()
                .map(|f| format!("{}={}", rules.id(f.rule), &t[f.span.clone()]))
                .collect()
        };
        let age = "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ";
        assert!(
            ids(age).iter().any(|f| f.starts_with("age-secret-key=")),
            "{:?}",
            ids(age)
        );
        let vault = "token: hvs.CAESIJlWh3X9ZjYzWJ0rjKNb6NjXa2QbGT5Q3BbUo3y1RhWOGh4KHGh2cy5oOHZ2Q3VzR2ZpV0V5dU1aZ2pnY1FLUDM";
        assert!(
            ids(vault).iter().any(|f| f.contains("vault")),
            "{:?}",
            ids(vault)
        );
        // A keyword with nothing secret after it: nothing found, and the
        // rules without the keyword never ran.
        assert!(ids("the api answered in 20 ms").is_empty());
    }

    /// Each rule over the whole text once one of its keywords is anywhere
    /// in it, as gitleaks runs them.
    fn find_whole(rules: &Rules, text: &[u8]) -> Vec<Found> {
        let run = rules.keywords.open(text);
        let mut found = Vec::new();
        for i in (0..rules.len()).filter(|&i| run[i]) {
            rules.find_in(i, text, 0..text.len(), &mut found);
        }
        found
    }

    #[test]
    fn reading_around_keywords_finds_what_reading_everything_finds() {
        let rules = Rules::load().unwrap();
        let text = crate::context::redact::corpus::bulk(256 << 10);
        let windowed = rules.find(text.as_bytes());
        let whole = find_whole(&rules, text.as_bytes());
        assert!(whole.len() > 300, "{} findings", whole.len());
        let missed: Vec<_> = whole
            .iter()
            .filter(|f| !windowed.contains(f))
            .map(|f| format!("{}: {:?}", rules.id(f.rule), &text[f.span.clone()]))
            .collect();
        assert!(missed.is_empty(), "{missed:#?}");
    }

    /// A keyword need not be in the match: Airtable's token two lines
    /// below the word, in JSON. It still opens the rule only somewhere in
    /// the text, as gitleaks runs it.
    #[test]
    fn a_keyword_opens_its_rule_and_the_match_is_found_where_it_is() {
        let rules = Rules::load().unwrap();
        let token = format!("pat{}.{}", "Q3vX9kLm2Rt7bW", "3f9a1c7e".repeat(8));
        let airtable = |text: &str| {
            rules
                .find(text.as_bytes())
                .iter()
                .any(|f| rules.id(f.rule) == "airtable-personnal-access-token")
        };
        let json = format!("{{\n  \"provider\": \"airtable\",\n  \"pat\": \"{token}\"\n}}\n");
        assert!(airtable(&json), "{json}");
        let far = format!("airtable\n{}\"pat\": \"{token}\"\n", "x\n".repeat(500));
        assert!(airtable(&far));
        assert!(!airtable(&format!("\"pat\": \"{token}\"\n")));
    }

    #[test]
    fn go_patterns_read_as_go_reads_them() {
        assert_eq!(from_go(r"\$?{{[^}]+}}"), r"\$?\{\{[^}]+\}\}");
        assert_eq!(from_go(r"a{2,5}b{3}c{1,}"), r"a{2,5}b{3}c{1,}");
        assert_eq!(from_go(r"[^]]+"), r"[^\]]+");
        assert_eq!(from_go(r"\{x"), r"\{x");
        for p in [r"\$?{{[^}]+}}", r"[^:]+:\[[^]]+]", r"x{2}"] {
            compile(&format!("a{p}")).unwrap();
        }
    }

    /// An operator's file is held to more than the vendored one: each
    /// refusal names the rule (number and id) or the TOML line, in one line.
    #[test]
    fn an_operators_rules_are_refused_with_the_rule_and_why() {
        let op = |text: &str| {
            Rules::parse(text, Origin::Operator)
                .err()
                .unwrap_or_default()
        };
        let rule =
            |id: &str, regex: &str| format!("[[rules]]\nid = {id:?}\nregex = '''{regex}'''\n");
        let good = rule("acme-token", "acme_[a-z0-9]{20}");
        let rules = Rules::parse(&good, Origin::Operator).unwrap();
        assert_eq!(rules.len(), 1);
        let token = format!("x acme_{} y", "a1".repeat(10));
        let found = rules.find(token.as_bytes());
        assert_eq!(found.len(), 1);
        assert_eq!(&token[found[0].span.clone()], &token[2..27]);
        for (text, expected) in [
            (rule("bad", "(x"), "rule 1 `bad`: regex:"),
            (
                rule("empty", "x*"),
                "rule 1 `empty`: regex: it matches the empty string",
            ),
            (
                format!("{good}{}", rule("acme-token", "y+")),
                "rule 2 `acme-token`: the id is used by an earlier rule",
            ),
            (
                "[[rules]]\nid = \"p\"\npath = '''x'''\n".into(),
                "rule 1 `p`: no regex",
            ),
            (
                rule("Acme.Token", "acme"),
                "rule 1 `Acme.Token`: an id is 1 to 64",
            ),
            (
                format!("{good}secretGroup = 2\n"),
                "secretGroup 2 but the regex has 0 groups",
            ),
            (
                format!("{good}[[rules.allowlists]]\nregexes = ['''(''']\n"),
                "rule 1 `acme-token`: allowlist:",
            ),
            (
                "[[rules]]\nregex = 'x'\n".into(),
                "line 1: missing field `id`",
            ),
            ("\n\n[[rules]\n".into(), "line 3:"),
            (
                (0..=MAX_RULES)
                    .map(|i| rule(&format!("r{i}"), "xy"))
                    .collect(),
                "1001 rules, more than the 1000",
            ),
            (
                format!("# {}\n", "x".repeat(MAX_FILE_BYTES)),
                "bytes, more than",
            ),
        ] {
            let err = op(&text);
            assert!(err.contains(expected), "{expected:?} in {err:?}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
        // A rule on paths only is left out of the vendored set, not refused.
        let paths = "[[rules]]\nid = \"p\"\npath = '''x'''\n";
        assert_eq!(Rules::parse(paths, Origin::Gitleaks).unwrap().len(), 0);
        assert_eq!(Rules::empty().len(), 0);
        assert!(Rules::empty().find(b"anything at all").is_empty());
    }

    #[test]
    fn an_operators_allow_lists_let_their_values_go() {
        let text = "[allowlist]\nregexes = ['''^acme_0+$''']\n\n[[rules]]\nid = \"acme-token\"\nregex = '''acme_[a-z0-9]{20}'''\nkeywords = [\"acme_\"]\n[[rules.allowlists]]\nstopwords = [\"example\"]\n";
        let rules = Rules::parse(text, Origin::Operator).unwrap();
        let zeros = format!("acme_{}", "0".repeat(20));
        let example = format!("acme_example{}", "1".repeat(13));
        let real = format!("acme_{}", "b2".repeat(10));
        assert!(rules.find(zeros.as_bytes()).is_empty());
        assert!(rules.find(example.as_bytes()).is_empty());
        assert_eq!(rules.find(real.as_bytes()).len(), 1);
    }

    /// The redactor with an operator's rules and allow-list, as
    /// `Redactor::for_config` builds it.
    fn operated(rules: &str, allow: &[&str], held: &[&str]) -> super::super::Redactor {
        let allow = allow
            .iter()
            .map(|a| regex::Regex::new(a).unwrap())
            .collect();
        let held: Vec<String> = held.iter().map(|s| s.to_string()).collect();
        let rules = Rules::parse(rules, Origin::Operator).unwrap();
        super::super::Redactor::build(&[], &held, rules, allow).unwrap()
    }

    const ACME: &str = "[[rules]]\nid = \"acme-token\"\nregex = '''acme_[a-z0-9]{20}'''\n";

    #[test]
    fn operator_rules_redact_with_their_id_and_come_before_gitleaks() {
        let r = operated(ACME, &[], &[]);
        let token = format!("acme_{}", "c3".repeat(10));
        let text = format!("deploying with {token}\ndone\n");
        let numbering = super::super::Numbering::default();
        let (out, counts) = r.redact(&text, &numbering);
        assert_eq!(out, "deploying with [REDACTED:acme-token#1]\ndone\n");
        assert_eq!(counts.0.get("acme-token"), Some(&1));
        let found = r.explain(&text);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rule, "operator:acme-token");
        assert_eq!((found[0].start, found[0].end), ((1, 16), (1, 40)));
    }

    #[test]
    fn allowed_values_pass_but_the_bastions_own_credentials_never() {
        let token = format!("ghp_{}", "a1B2".repeat(9));
        let text = format!("password=changeme123\ntoken {token}\nheld hunter2-held\n");
        let none = operated("", &[], &["hunter2-held"]);
        let (out, _) = none.redact(&text, &Default::default());
        assert!(
            !out.contains("changeme123") && !out.contains(&token),
            "{out}"
        );
        // Anchored: the value itself. A search: any part of it.
        let r = operated(
            "",
            &["^changeme[0-9]*$", "a1B2a1B2", "hunter2"],
            &["hunter2-held"],
        );
        let (out, counts) = r.redact(&text, &Default::default());
        assert!(out.contains("password=changeme123\n"), "{out}");
        assert!(out.contains(&token), "{out}");
        assert!(!out.contains("hunter2-held"), "{out}");
        assert_eq!(counts.total(), 1, "{counts:?}");
        let found = r.explain(&text);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rule, "walissh:bastion-credential");
    }

    /// The agent's redactor and `walissh redact`'s come from the config one
    /// way; a rules file's fault is named by the config's file, line and
    /// key, the rules file, the rule and why.
    #[test]
    fn the_config_builds_the_redactor_and_names_a_bad_rule() {
        use crate::config::{Config, RulesFile};
        let text = "[ai]\nredact = [\"corp-[0-9]{6}\"]\n\n[context]\nredact_allow = [\"^changeme$\"]\nredact_rules = \"r.toml\"\n";
        // The file is read at load, from disk: here it is given as read.
        let mut config =
            Config::parse(&text.replace("redact_rules", "# "), "w.toml", false).unwrap();
        let r = super::super::Redactor::for_config(&config).unwrap();
        let (out, _) = r.redact("id corp-123456\npassword=changeme\n", &Default::default());
        assert_eq!(out, "id [REDACTED:custom#1]\npassword=changeme\n");
        config.context.redact_rules_file = Some(RulesFile {
            path: "/etc/walissh/r.toml".into(),
            text: format!("{ACME}\n[[rules]]\nid = \"loose\"\nregex = '''a?'''\n"),
        });
        let e = super::super::Redactor::for_config(&config).err().unwrap().0;
        assert_eq!(
            e,
            "w.toml:1: key `context.redact_rules`: /etc/walissh/r.toml: \
             rule 2 `loose`: regex: it matches the empty string"
        );
        config.context.redact_rules_file.as_mut().unwrap().text = ACME.into();
        let r = super::super::Redactor::for_config(&config).unwrap();
        let token = format!("acme_{}", "z9".repeat(10));
        assert_eq!(r.explain(&token)[0].rule, "operator:acme-token");
    }

    /// `explain` lists what `redact` replaces, in order, with lines and
    /// columns in characters of the plain text, and each detector's name.
    #[test]
    fn explain_lists_what_redact_replaces() {
        let r = super::super::Redactor::new(&["corp-[0-9]{6}".into()], &[]).unwrap();
        let aws = "AKIAIOSFODNN7EXAMPLE";
        let text = format!(
            "\x1b[31mé {aws}\x1b[0m\nid corp-123456\ndb_password = s3cr3t-Value9\nhttps://x.example/?u=%70assword%3D{}\n",
            "Zq9".repeat(4)
        );
        let (out, counts) = r.redact(&text, &Default::default());
        let found = r.explain(&text);
        assert_eq!(found.len(), counts.total(), "{found:#?}\n{out}");
        let listed: Vec<(String, &str)> = found
            .iter()
            .map(|f| {
                let ((l1, c1), (l2, c2)) = (f.start, f.end);
                (format!("{l1}:{c1}-{l2}:{c2}"), f.rule.as_str())
            })
            .collect();
        assert_eq!(listed[0], ("1:3-1:22".into(), "walissh:aws-key"));
        assert_eq!(listed[1], ("2:4-2:14".into(), "ai.redact:1"));
        assert_eq!(listed[2].0, "3:15-3:27");
        assert_eq!(listed[3].1, "url-encoded");
        let plain = super::super::plain::plain(&text);
        assert_eq!(&plain[found[0].span.clone()], aws);
        let kinds: Vec<&str> = found.iter().map(|f| f.kind.as_str()).collect();
        for kind in &kinds {
            assert!(
                out.contains(&format!("[REDACTED:{kind}#")),
                "{kind} in {out}"
            );
        }
    }

    #[test]
    fn entropy_of_uniform_and_repeated_text() {
        assert_eq!(entropy(b"aaaa"), 0.0);
        assert!((entropy(b"abcd") - 2.0).abs() < 1e-9);
    }
}
