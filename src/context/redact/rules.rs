//! gitleaks' default secret-detection rules (MIT), held as data.
//!
//! This file owns reading `gitleaks/gitleaks.toml` (vendored, at the version
//! in `gitleaks/VERSION`; `tools/update-gitleaks-rules TAG` replaces it) and
//! running its rules the way gitleaks does: a rule runs only on text that
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
//! holds the vendored file to that.

use std::ops::Range;

use aho_corasick::AhoCorasick;
use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;

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
    regexes: Vec<Regex>,
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
    regex: Regex,
    secret_group: usize,
    entropy: Option<f64>,
    allows: Vec<Allow>,
    /// The most line breaks one of its matches holds, None when that is
    /// unbounded: a match holding a keyword lies within that many lines of
    /// the keyword's, either way.
    reach: Option<usize>,
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
    /// Every keyword of every rule, matched without regard to ASCII case.
    keywords: AhoCorasick,
    /// The rule each keyword belongs to.
    keyword_rule: Vec<usize>,
    /// Rules with no keyword: they run on every text.
    always: Vec<usize>,
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
            '}' if !class => {
                if !std::mem::take(&mut repeat) {
                    out.push_str("\\}");
                    continue;
                }
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
    let build = |unicode: bool| {
        RegexBuilder::new(pattern)
            .unicode(unicode)
            .size_limit(64 << 20)
            .dfa_size_limit(16 << 20)
            .build()
    };
    let regex = build(false)
        .or_else(|_| build(true))
        .map_err(|e| super::one_line(&e.to_string()))?;
    if regex.is_match(b"") {
        return Err("it matches the empty string".to_string());
    }
    Ok(regex)
}

impl Allow {
    fn new(raw: RawAllow) -> Result<Allow, String> {
        let regexes = raw
            .regexes
            .iter()
            // An allow-list regex may match the empty string (`^$`-like):
            // it only ever lets a finding go, so that is harmless.
            .map(|p| {
                let p = &from_go(p);
                RegexBuilder::new(p)
                    .unicode(false)
                    .build()
                    .or_else(|_| Regex::new(p))
                    .map_err(|e| super::one_line(&e.to_string()))
            })
            .collect::<Result<_, _>>()?;
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
        let regexes =
            (!self.regexes.is_empty()).then(|| self.regexes.iter().any(|r| r.is_match(target)));
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

/// Where a text's lines start, to find the lines around a position in
/// logarithmic time: a text with a keyword every few bytes on one long
/// line must not cost a walk back to its start for each.
struct Lines {
    /// The start of every line; the first is 0.
    starts: Vec<usize>,
    len: usize,
}

impl Lines {
    fn new(text: &[u8]) -> Lines {
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', text).map(|i| i + 1));
        Lines {
            starts,
            len: text.len(),
        }
    }

    /// Whole lines around `span`: `reach` lines before its first and after
    /// its last; all of the text when the reach is unbounded.
    fn around(&self, span: Range<usize>, reach: Option<usize>) -> Range<usize> {
        let Some(reach) = reach else {
            return 0..self.len;
        };
        let line = |at: usize| self.starts.partition_point(|&s| s <= at) - 1;
        let first = line(span.start).saturating_sub(reach);
        let last = line(span.end.saturating_sub(1).max(span.start))
            .saturating_add(reach)
            .saturating_add(1);
        self.starts[first]..self.starts.get(last).map_or(self.len, |&s| s)
    }
}

/// `windows` sorted and joined where they touch or overlap.
fn merged(mut windows: Vec<Range<usize>>) -> Vec<Range<usize>> {
    windows.sort_by_key(|w| w.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(windows.len());
    for w in windows {
        match out.last_mut() {
            Some(last) if w.start <= last.end => last.end = last.end.max(w.end),
            _ => out.push(w),
        }
    }
    out
}

/// The line of `text` around `span`.
fn line_of(text: &[u8], span: &Range<usize>) -> Range<usize> {
    let start = memchr::memrchr(b'\n', &text[..span.start]).map_or(0, |i| i + 1);
    let end = memchr::memchr(b'\n', &text[span.end..]).map_or(text.len(), |i| span.end + i);
    start..end
}

impl Rules {
    /// The vendored rules. An Err names the first rule that does not
    /// compile or that matches the empty string.
    pub(crate) fn load() -> Result<Rules, String> {
        Rules::parse(GITLEAKS).map_err(|e| format!("{e} (gitleaks {})", VERSION.trim()))
    }

    fn parse(text: &str) -> Result<Rules, String> {
        let file: File = toml::from_str(text).map_err(|e| format!("gitleaks rules: {e}"))?;
        let mut rules = Vec::new();
        let mut words = Vec::new();
        let mut keyword_rule = Vec::new();
        let mut always = Vec::new();
        for raw in file.rules {
            // Rules on file names only: nothing to look for in text.
            let Some(pattern) = raw.regex else { continue };
            let id = raw.id;
            let reach = super::max_line_breaks(&from_go(&pattern));
            let regex = compile(&pattern).map_err(|e| format!("gitleaks rule {id}: {e}"))?;
            let allows = raw
                .allowlists
                .into_iter()
                .map(Allow::new)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("gitleaks rule {id}: allowlist: {e}"))?;
            let index = rules.len();
            if raw.keywords.is_empty() {
                always.push(index);
            }
            for k in raw.keywords {
                words.push(k.to_lowercase());
                keyword_rule.push(index);
            }
            rules.push(Rule {
                id,
                regex,
                secret_group: raw.secret_group,
                entropy: raw.entropy,
                allows,
                reach,
            });
        }
        let keywords = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&words)
            .map_err(|e| format!("gitleaks keywords: {e}"))?;
        let global = file.allowlist.map(Allow::new).transpose()?;
        Ok(Rules {
            rules,
            keywords,
            keyword_rule,
            always,
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
    /// in it. Here a rule reads only the lines around its keywords
    /// (`around`): on output dense with secrets nearly every keyword is
    /// somewhere, and 200 rules each reading all of it cost more than the
    /// budget. A rule's keyword is a literal part of what it matches, so
    /// its secrets are there; the lines around take in a key and a value
    /// that a rule lets stand on different lines.
    pub(crate) fn find(&self, text: &[u8]) -> Vec<Found> {
        let lines = Lines::new(text);
        let mut windows: Vec<Vec<Range<usize>>> = vec![Vec::new(); self.rules.len()];
        for &i in &self.always {
            windows[i].push(0..text.len());
        }
        for m in self.keywords.find_overlapping_iter(text) {
            let i = self.keyword_rule[m.pattern().as_usize()];
            windows[i].push(lines.around(m.range(), self.rules[i].reach));
        }
        let mut found = Vec::new();
        for (i, windows) in windows.into_iter().enumerate() {
            for window in merged(windows) {
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
        for caps in rule.regex.captures_iter(text) {
            let Some(whole) = caps.get(0) else { continue };
            let secret = match rule.secret_group {
                0 => (1..caps.len())
                    .find_map(|g| caps.get(g).filter(|m| !m.is_empty()))
                    .unwrap_or(whole),
                g => match caps.get(g) {
                    Some(m) => m,
                    None => continue,
                },
            };
            if secret.is_empty() || !self.keeps(rule, text, secret.range(), whole.range()) {
                continue;
            }
            found.push(Found {
                rule: i,
                span: offset + secret.start()..offset + secret.end(),
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

    #[test]
    fn a_rule_that_matches_the_empty_string_is_refused() {
        let file = "[[rules]]\nid = \"bad\"\nregex = '''x*'''\nkeywords = [\"x\"]\n";
        let err = Rules::parse(file).err().unwrap();
        assert!(err.contains("bad") && err.contains("empty"), "{err}");
        let file = "[[rules]]\nid = \"broken\"\nregex = '''(x'''\n";
        assert!(Rules::parse(file).err().unwrap().contains("broken"));
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
        let mut run = vec![false; rules.len()];
        for &i in &rules.always {
            run[i] = true;
        }
        for m in rules.keywords.find_overlapping_iter(text) {
            run[rules.keyword_rule[m.pattern().as_usize()]] = true;
        }
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

    #[test]
    fn lines_around_a_keyword() {
        let text: String = (0..20).map(|i| format!("line{i}\n")).collect();
        let lines = Lines::new(text.as_bytes());
        let at = text.find("line10").unwrap();
        let from = |l: &str| text.find(l).unwrap();
        assert_eq!(
            &text[lines.around(at..at + 6, Some(2))],
            &text[from("line8")..from("line13")]
        );
        // At the ends, as much as there is; unbounded, everything.
        assert_eq!(&text[lines.around(0..1, Some(8))], &text[..from("line9")]);
        let end = text.len();
        assert_eq!(
            &text[lines.around(end - 1..end, Some(2))],
            &text[from("line17")..]
        );
        assert_eq!(lines.around(at..at + 6, None), 0..end);
        // One long line is read once, however many keywords it holds.
        let long = b"key ".repeat(1000);
        let lines = Lines::new(&long);
        let windows = (0..1000)
            .map(|i| lines.around(i * 4..i * 4 + 3, Some(9)))
            .collect();
        assert_eq!(merged(windows), vec![0..long.len()]);
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

    #[test]
    fn entropy_of_uniform_and_repeated_text() {
        assert_eq!(entropy(b"aaaa"), 0.0);
        assert!((entropy(b"abcd") - 2.0).abs() < 1e-9);
    }
}
