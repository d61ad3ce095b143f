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
    /// Its regexes, as one question: does any of them match?
    regexes: Option<AnyOf>,
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
    /// Those literals, lowercase, sorted.
    literals: Vec<Vec<u8>>,
}

impl Anchored {
    fn new(rest: &Hir) -> Option<Anchored> {
        let mut literals = super::prefilter::starts(rest)?;
        literals.sort();
        let starts = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&literals)
            .ok()?;
        let regex = regex_automata::meta::Builder::new()
            .configure(
                regex_automata::meta::Config::new()
                    .nfa_size_limit(Some(NFA_LIMIT))
                    .hybrid_cache_capacity(DFA_LIMIT),
            )
            .build_from_hir(rest)
            .ok()?;
        Some(Anchored {
            regex,
            starts,
            literals,
        })
    }

    /// The matches in `text`, in order, each as its groups' spans; None
    /// when its literals are too close together to be tried one by one
    /// (each try may read a few hundred bytes: on `password=password=…`
    /// that is far more than one search). `places`: where its literals
    /// are, when the prefilter found them (`Sites::places`), so they are
    /// not looked for again.
    fn matches(
        &self,
        text: &[u8],
        places: Option<&[Range<usize>]>,
    ) -> Option<Vec<Vec<Option<Range<usize>>>>> {
        use regex_automata::{Anchored as At, Input};
        /// At least this many bytes a place, on average.
        const SPACING: usize = 16;
        let looked_for;
        let places = match places {
            Some(places) => places,
            None => {
                looked_for = self
                    .starts
                    .find_overlapping_iter(text)
                    .map(|m| m.range())
                    .collect::<Vec<_>>();
                &looked_for
            }
        };
        if places.len() * SPACING > text.len().max(SPACING) {
            return None;
        }
        // Overlapping literals come in the order they end: in the order
        // they start, each place once.
        let mut starts: Vec<usize> = places.iter().map(|p| p.start).collect();
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
    fn matches(
        &self,
        rest: &Regex,
        text: &[u8],
        places: Option<&[Range<usize>]>,
    ) -> Vec<Vec<Option<Range<usize>>>> {
        let tried = self.anchored.as_ref().and_then(|a| a.matches(text, places));
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
    /// The matches in `text`, in order, each as its groups' spans;
    /// `places`, where its literals are, if known.
    fn matches(
        &self,
        text: &[u8],
        places: Option<&[Range<usize>]>,
    ) -> Vec<Vec<Option<Range<usize>>>> {
        match &self.lead {
            Some(lead) => lead.matches(&self.regex, text, places),
            None => groups(&self.regex, text),
        }
    }

    /// Whether each of its matches starts at one of the literals the
    /// prefilter looks for, `needs` (in any case): then where the
    /// prefilter found them is where it is tried (`Anchored`).
    fn starts_at(&self, needs: &[Vec<u8>]) -> bool {
        let anchored = self.lead.as_ref().and_then(|l| l.anchored.as_ref());
        anchored.is_some_and(|a| {
            let mut needs: Vec<Vec<u8>> = needs.to_vec();
            needs.sort();
            needs == a.literals
        })
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
pub struct Rules {
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
        let regexes = match parts.is_empty() {
            true => None,
            false => Some(AnyOf::new(&parts)?),
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

/// An allow-list's regexes, asked one question: does any of them match?
/// The question is asked of every finding, and each holds a new value: a
/// lazy automaton met states it had not built on most of them
/// (`generic-api-key`'s list of ninety key names, matched anywhere in the
/// match, follows every partial name at once), 3.5% of the redactor's
/// time on text dense with secrets. So the automata are built whole, once:
/// the regexes' branches (any one matching is the whole matching) are cut
/// into as few groups as each fit in `DENSE_LIMIT`, since a group's states
/// are the product of its branches'. A branch too big alone is asked of a
/// lazy automaton.
struct AnyOf {
    whole: Vec<regex_automata::dfa::dense::DFA<Vec<u32>>>,
    /// The branches no whole automaton holds, or None.
    rest: Option<Regex>,
    /// All of them, lazily: asked should a whole automaton give up.
    all: Regex,
}

/// The most one whole allow-list automaton may take.
const DENSE_LIMIT: usize = 256 << 10;

impl AnyOf {
    /// `parts`: each a regex with its Unicode flag set.
    fn new(parts: &[String]) -> Result<AnyOf, String> {
        let lazy = |p: &str| Regex::new(p).map_err(|e| super::one_line(&e.to_string()));
        let all = lazy(&parts.join("|"))?;
        let parser = || regex_syntax::ParserBuilder::new().utf8(false).build();
        let mut branches = Vec::new();
        for p in parts {
            let hir = parser()
                .parse(p)
                .map_err(|e| super::one_line(&e.to_string()))?;
            flatten(&hir, &mut branches);
        }
        let (mut whole, mut left) = (Vec::new(), Vec::new());
        cover(&branches, &mut whole, &mut left);
        let rest = match left.is_empty() {
            true => None,
            false => Some(lazy(
                &left
                    .iter()
                    .map(|h| format!("(?:{h})"))
                    .collect::<Vec<_>>()
                    .join("|"),
            )?),
        };
        Ok(AnyOf { whole, rest, all })
    }

    fn is_match(&self, target: &[u8]) -> bool {
        use regex_automata::{Input, dfa::Automaton};
        let input = Input::new(target).earliest(true);
        let mut any = false;
        for dfa in &self.whole {
            match dfa.try_search_fwd(&input) {
                Ok(m) => any |= m.is_some(),
                Err(_) => return self.all.is_match(target),
            }
            if any {
                return true;
            }
        }
        self.rest.as_ref().is_some_and(|r| r.is_match(target))
    }
}

/// `hir`'s branches, each matching somewhere where `hir` does.
fn flatten(hir: &Hir, out: &mut Vec<Hir>) {
    match hir.kind() {
        HirKind::Alternation(branches) => branches.iter().for_each(|b| flatten(b, out)),
        HirKind::Capture(c) => flatten(&c.sub, out),
        _ => out.push(hir.clone()),
    }
}

/// Whole automata for `branches`, as few as fit; those too big alone go to
/// `left`.
fn cover(
    branches: &[Hir],
    whole: &mut Vec<regex_automata::dfa::dense::DFA<Vec<u32>>>,
    left: &mut Vec<Hir>,
) {
    use regex_automata::{dfa::dense, nfa::thompson};
    let nfa = thompson::Compiler::new()
        .configure(thompson::Config::new().utf8(false))
        .build_many_from_hir(branches);
    let dfa = nfa.ok().and_then(|nfa| {
        dense::Builder::new()
            .configure(
                dense::Config::new()
                    .dfa_size_limit(Some(DENSE_LIMIT))
                    .determinize_size_limit(Some(DENSE_LIMIT)),
            )
            .build_from_nfa(&nfa)
            .ok()
    });
    match dfa {
        Some(dfa) => whole.push(dfa),
        None if branches.len() == 1 => left.push(branches[0].clone()),
        None => {
            let (a, b) = branches.split_at(branches.len() / 2);
            cover(a, whole, left);
            cover(b, whole, left);
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
pub enum Origin {
    /// gitleaks' vendored set: a rule on file paths only is left out.
    Gitleaks,
    /// An operator's file (`[context] redact_rules`): every rule must have
    /// a regex, an id fit for a placeholder, and the file a bounded size.
    Operator,
}

/// The largest operator's rules file, in bytes.
pub(crate) const MAX_FILE_BYTES: usize = crate::MAX_RULES_FILE_BYTES;
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
    pub fn empty() -> Rules {
        Rules::parse("", Origin::Operator).expect("no rules parse")
    }

    /// Rules in gitleaks' TOML format. An Err is one line: the TOML's line,
    /// or the rule (its number, 1-based, and id) and what is wrong with it:
    /// a regex that does not compile or matches the empty string, no
    /// regex (for an operator's rule), an id used twice, a secret group
    /// the regex does not have, an allow-list that does not compile; and
    /// for an operator's file, one over `MAX_FILE_BYTES` or `MAX_RULES`.
    pub fn parse(text: &str, origin: Origin) -> Result<Rules, String> {
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
        let (mut literals, mut written, mut keywords, mut reach) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // The rules the prefilter tells where their literals are.
        let mut located = Vec::new();
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
            let mut any_case = None;
            if let Some((set, case)) = needs {
                let to = match case {
                    super::prefilter::Case::Any => {
                        any_case = Some(set.clone());
                        &mut literals
                    }
                    super::prefilter::Case::Written => &mut written,
                };
                to.extend(set.into_iter().map(|l| (l, index)));
            }
            keywords.extend(raw.keywords.into_iter().map(|k| (k.into_bytes(), index)));
            reach.push(breaks);
            let rule = Rule {
                id,
                regex,
                lead,
                secret_group: raw.secret_group,
                entropy: raw.entropy,
                allows,
            };
            if any_case.is_some_and(|set| rule.starts_at(&set)) {
                located.push(index);
            }
            rules.push(rule);
        }
        let keywords = Literals::with_written(literals, written, keywords, reach)?.locate(located);
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
        let sites = self.keywords.sites(text);
        self.find_in_windows(text, sites.windows, sites.places)
    }

    /// `find`, given where each rule may match (`Literals::sites` of
    /// `keywords`, or of a set chained to them).
    pub(super) fn find_in_windows(
        &self,
        text: &[u8],
        windows: Vec<Vec<Range<usize>>>,
        places: Vec<Option<Vec<Range<usize>>>>,
    ) -> Vec<Found> {
        let mut found = Vec::new();
        for (i, (windows, places)) in windows.into_iter().zip(places).enumerate() {
            for window in windows {
                // Its literals' places in the window, from its start.
                let within = places.as_ref().map(|places| {
                    let from = places.partition_point(|p| p.start < window.start);
                    let to = places.partition_point(|p| p.start < window.end);
                    places[from..to]
                        .iter()
                        .filter(|p| p.end <= window.end)
                        .map(|p| p.start - window.start..p.end - window.start)
                        .collect::<Vec<_>>()
                });
                self.find_in(i, text, window, within.as_deref(), &mut found);
            }
        }
        found
    }

    /// Rule `i`'s secrets in its `windows` of `text` (a profiler's view).
    #[cfg(test)]
    pub(super) fn find_in_windows_of(
        &self,
        i: usize,
        text: &[u8],
        windows: &[Range<usize>],
    ) -> Vec<Found> {
        let mut found = Vec::new();
        for w in windows {
            self.find_in(i, text, w.clone(), None, &mut found);
        }
        found
    }

    /// The secrets rule `i` finds in `text[window]`, a window of whole
    /// lines, with their positions in `text`.
    fn find_in(
        &self,
        i: usize,
        text: &[u8],
        window: Range<usize>,
        places: Option<&[Range<usize>]>,
        found: &mut Vec<Found>,
    ) {
        let rule = &self.rules[i];
        let offset = window.start;
        let text = &text[window];
        for groups in rule.matches(text, places) {
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
mod tests;
