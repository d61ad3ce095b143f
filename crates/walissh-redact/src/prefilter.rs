//! Where each of walissh's own rules can match, found in one pass.
//!
//! Most rules need a word or a prefix (`password`, `ghp_`, `-----BEGIN`):
//! every match holds one of a few literals. `needs` reads those literals
//! off the rule's pattern, and one Aho-Corasick pass over the text (ASCII
//! case folded, so it finds more than the rule would, never less) says
//! which lines hold them. A rule then runs only on those lines, and on as
//! many lines around them as its matches can cross (its reach, counted on
//! the pattern by `max_line_breaks`). Text dense with secrets costs each
//! rule the lines it can match on, not all of the text; before, a rule
//! that may cross lines read all of it, a cost per match on text with a
//! key every line.
//!
//! It only says where a match cannot be; what matches is the rules'. A
//! rule with no literal to look for reads the whole text, and so does one
//! with no bound on the lines it crosses, once its literal is there.

use std::collections::BTreeMap;
use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use regex_syntax::hir::{Class, Hir, HirKind};

/// A literal shorter than this says too little to be worth looking for.
const MIN_LEN: usize = 3;
/// At most this many literals for one rule: more, and the rule has none.
const MAX_SET: usize = 256;

/// A set of literals: one of them is in every match. Lowercase ASCII when
/// read in any case (`Case::Any`), as written when read as they are.
type Set = Vec<Vec<u8>>;

/// How a pattern's literals are read off it: in any ASCII case, so each
/// letter is one whatever the pattern allows of it; or as written, a
/// letter in either case being two (`(?i)key` is eight literals).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Case {
    Any,
    Written,
}

/// Literals to look for, each some rules', and how many lines around one
/// each rule reads: where the rules can match, found in one pass. A rule
/// may also have gates, gitleaks' keywords: it runs only on a text that
/// holds one of them somewhere, as gitleaks runs it.
pub(super) struct Literals {
    /// Every literal, each once, matched without regard to ASCII case.
    automaton: AhoCorasick,
    /// Those literals, in the automaton's order (for `chain`).
    literals: Vec<Vec<u8>>,
    /// The rules (their places in what `new` was given) each literal is
    /// in every match of: where it is, the rule reads.
    owners: Vec<Vec<usize>>,
    /// The same for rules whose matches hold it as written: each with
    /// that spelling, which the text's must be.
    written: Vec<Vec<(usize, Vec<u8>)>>,
    /// The rules each literal opens (a gitleaks keyword).
    opens: Vec<Vec<usize>>,
    /// Whether each rule has gates, so reads nothing until one opens.
    gated: Vec<bool>,
    /// Each rule's reach: how many lines its matches may cross, so how
    /// many lines either side of its literal's it reads; None: all of the
    /// text, once one of its literals is there.
    reach: Vec<Option<usize>>,
    /// Rules with no literal: they read all of every text (once open).
    always: Vec<usize>,
    /// Rules that are given where their literals are (`sites`), for each
    /// match of theirs starts at one of them: they need not look again.
    located: Vec<bool>,
}

/// Where each rule may match (`Literals::sites`): its windows, and for a
/// rule `located`, where each of its literals is, in the order they
/// start (None for the others).
pub(super) struct Sites {
    pub(super) windows: Vec<Vec<Range<usize>>>,
    pub(super) places: Vec<Option<Vec<Range<usize>>>>,
}

impl Literals {
    /// `literals`: each with its rule; `gates`: the same, for the words
    /// that open a rule; `reach`: each rule's, in order.
    #[cfg(test)]
    pub(super) fn new(
        literals: impl IntoIterator<Item = (Vec<u8>, usize)>,
        gates: impl IntoIterator<Item = (Vec<u8>, usize)>,
        reach: Vec<Option<usize>>,
    ) -> Result<Literals, String> {
        Literals::with_written(literals, [], gates, reach)
    }

    /// `new`, with `written`: literals each with its rule, that the rule's
    /// matches hold as written (`literals`' in any case).
    pub(super) fn with_written(
        literals: impl IntoIterator<Item = (Vec<u8>, usize)>,
        written: impl IntoIterator<Item = (Vec<u8>, usize)>,
        gates: impl IntoIterator<Item = (Vec<u8>, usize)>,
        reach: Vec<Option<usize>>,
    ) -> Result<Literals, String> {
        /// Each literal's rules: those it is in, in any case and as
        /// written, and those it opens.
        #[derive(Default)]
        struct Roles {
            owners: Vec<usize>,
            written: Vec<(usize, Vec<u8>)>,
            opens: Vec<usize>,
        }
        let mut table: BTreeMap<Vec<u8>, Roles> = BTreeMap::new();
        let mut has = vec![false; reach.len()];
        let mut gated = vec![false; reach.len()];
        for (literal, rule) in literals {
            has[rule] = true;
            table
                .entry(literal.to_ascii_lowercase())
                .or_default()
                .owners
                .push(rule);
        }
        for (literal, rule) in written {
            has[rule] = true;
            table
                .entry(literal.to_ascii_lowercase())
                .or_default()
                .written
                .push((rule, literal));
        }
        for (gate, rule) in gates {
            gated[rule] = true;
            table
                .entry(gate.to_ascii_lowercase())
                .or_default()
                .opens
                .push(rule);
        }
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::DFA))
            .build(table.keys())
            .map_err(|e| format!("literals to look for: {e}"))?;
        let literals = table.keys().cloned().collect();
        let (mut owners, mut written, mut opens) = (Vec::new(), Vec::new(), Vec::new());
        for roles in table.into_values() {
            owners.push(roles.owners);
            written.push(roles.written);
            opens.push(roles.opens);
        }
        Ok(Literals {
            automaton,
            literals,
            owners,
            written,
            opens,
            gated,
            always: (0..reach.len()).filter(|&i| !has[i]).collect(),
            located: vec![false; reach.len()],
            reach,
        })
    }

    /// These rules are given where their literals are (`Sites::places`).
    pub(super) fn locate(mut self, rules: impl IntoIterator<Item = usize>) -> Literals {
        for rule in rules {
            self.located[rule] = true;
        }
        self
    }

    /// `sites`' windows alone.
    #[cfg(test)]
    pub(super) fn windows(&self, text: &[u8]) -> Vec<Vec<Range<usize>>> {
        self.sites(text).windows
    }

    /// For each rule, in order: the windows of `text` where it may match,
    /// whole lines from the line break before them (so a match sees before
    /// it what it sees in all of the text), merged, in order. A match of
    /// the rule that holds its literal lies whole in one window. And where
    /// the literals of the rules `located` are.
    pub(super) fn sites(&self, text: &[u8]) -> Sites {
        let rules = self.reach.len();
        let mut windows: Vec<Vec<Range<usize>>> = vec![Vec::new(); rules];
        let mut places: Vec<Vec<Range<usize>>> = vec![Vec::new(); rules];
        for &i in &self.always {
            windows[i].push(0..text.len());
        }
        let starts: Vec<usize> = std::iter::once(0)
            .chain(memchr::memchr_iter(b'\n', text).map(|i| i + 1))
            .collect();
        let start = |line: usize| starts.get(line).copied().unwrap_or(text.len());
        // The line each rule last took: another literal on it costs
        // nothing more (one long line with a literal every few bytes must
        // not cost a search per literal).
        let mut last: Vec<usize> = vec![usize::MAX; rules];
        // The line a literal starts on. Literals come in the order they
        // end, so it only moves down, but for one holding a line break.
        let mut line = 0;
        let mut open = vec![false; rules];
        for m in self.automaton.find_overlapping_iter(text) {
            for &rule in &self.opens[m.pattern().as_usize()] {
                open[rule] = true;
            }
            while start(line + 1) <= m.start() {
                line += 1;
            }
            while start(line) > m.start() {
                line -= 1;
            }
            let breaks = memchr::memchr_iter(b'\n', &text[m.range()]).count();
            let found = &text[m.range()];
            let p = m.pattern().as_usize();
            let written = self.written[p]
                .iter()
                .filter(|(_, spelt)| spelt.as_slice() == found)
                .map(|(rule, _)| rule);
            for &rule in self.owners[p].iter().chain(written) {
                if self.located[rule] {
                    places[rule].push(m.range());
                }
                if last[rule] == line && breaks == 0 {
                    continue;
                }
                last[rule] = line;
                windows[rule].push(match self.reach[rule] {
                    Some(reach) => {
                        let first = start(line.saturating_sub(reach)).saturating_sub(1);
                        first..start(line.saturating_add(breaks + reach + 1))
                    }
                    None => 0..text.len(),
                });
            }
        }
        let windows = windows
            .into_iter()
            .enumerate()
            .map(|(i, w)| match self.gated[i] && !open[i] {
                true => Vec::new(),
                false => merged(w),
            })
            .collect();
        let places = places
            .into_iter()
            .zip(&self.located)
            .map(|(mut p, &located)| {
                located.then(|| {
                    p.sort_by_key(|r| r.start);
                    p
                })
            })
            .collect();
        Sites { windows, places }
    }

    /// The rules with no literal: they read all of every text.
    pub(super) fn always(&self) -> &[usize] {
        &self.always
    }

    /// These rules', then `other`'s, found in one pass: `windows` gives
    /// this set's rules first, then `other`'s.
    pub(super) fn chain(&self, other: &Literals) -> Result<Literals, String> {
        let offset = self.reach.len();
        // Each literal with each rule of `roles` (owners or opens).
        let of = |set: &Literals, roles: &[Vec<usize>], offset: usize| -> Vec<(Vec<u8>, usize)> {
            set.literals
                .iter()
                .zip(roles)
                .flat_map(|(l, rules)| rules.iter().map(move |&r| (l.clone(), r + offset)))
                .collect()
        };
        let written = |set: &Literals, offset: usize| -> Vec<(Vec<u8>, usize)> {
            set.written
                .iter()
                .flatten()
                .map(|(r, spelt)| (spelt.clone(), r + offset))
                .collect()
        };
        let mut reach = self.reach.clone();
        reach.extend(&other.reach);
        let literals =
            of(self, &self.owners, 0)
                .into_iter()
                .chain(of(other, &other.owners, offset));
        let spelt = written(self, 0).into_iter().chain(written(other, offset));
        let gates = of(self, &self.opens, 0)
            .into_iter()
            .chain(of(other, &other.opens, offset));
        let located = self.located.iter().chain(&other.located);
        let located: Vec<usize> = (0..)
            .zip(located)
            .filter(|(_, l)| **l)
            .map(|(i, _)| i)
            .collect();
        let chained = Literals::with_written(literals, spelt, gates, reach)?.locate(located);
        // A rule of either with no literal still reads everything (`new`
        // finds those of both again, from the literals each has).
        debug_assert_eq!(chained.always.len(), self.always.len() + other.always.len());
        Ok(chained)
    }

    /// Which rules a text opens: those with no gates, and those with one
    /// of theirs somewhere in it.
    #[cfg(test)]
    pub(super) fn open(&self, text: &[u8]) -> Vec<bool> {
        let mut open: Vec<bool> = self.gated.iter().map(|g| !g).collect();
        for m in self.automaton.find_overlapping_iter(text) {
            for &rule in &self.opens[m.pattern().as_usize()] {
                open[rule] = true;
            }
        }
        open
    }

    /// How many of the first `rules` rules have literals to look for (a
    /// chained set's first), of how many.
    #[cfg(test)]
    pub(super) fn coverage(&self, rules: usize) -> (usize, usize) {
        let without = self.always.iter().filter(|&&i| i < rules).count();
        (rules - without, rules)
    }
}

/// walissh's rules with no literal whose matches stay within a line (a
/// shadow file's `user:$6$…`, pwdump's rows, kubeadm's token list): one
/// search for all of them at once finds the lines any of them may match
/// on, and each reads only those, not all of the text (it was 0.1 ms per
/// rule for 64 KiB, and most texts have none of their lines).
pub(super) struct Lines {
    any: regex_automata::meta::Regex,
    rules: Vec<usize>,
}

impl Lines {
    /// Of `patterns` (walissh's rules, in order), those in `without`
    /// (the rules with no literal) whose matches cross no line.
    pub(super) fn new(patterns: &[&str], without: &[usize]) -> Option<Lines> {
        let (rules, hirs): (Vec<usize>, Vec<Hir>) = without
            .iter()
            .filter(|&&i| i < patterns.len() && super::max_line_breaks(patterns[i]) == Some(0))
            .filter_map(|&i| Some((i, regex_syntax::parse(patterns[i]).ok()?)))
            .unzip();
        if rules.is_empty() {
            return None;
        }
        let any = regex_automata::meta::Builder::new()
            .configure(
                regex_automata::meta::Config::new()
                    .which_captures(regex_automata::nfa::thompson::WhichCaptures::Implicit),
            )
            .build_many_from_hir(&hirs)
            .ok()?;
        Some(Lines { any, rules })
    }

    /// Each of these rules' windows in `text`: the lines where one of
    /// them matched, each from the line break before it. A line where
    /// one matched is every one's: the search goes on from the next line,
    /// so a match of one on it may have hidden another's.
    pub(super) fn narrow(&self, text: &[u8], windows: &mut [Vec<Range<usize>>]) {
        let mut lines = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let input = regex_automata::Input::new(text).range(at..);
            // Where a match ends is enough: these rules stay within a
            // line, and no rule matches empty, so the match is on the line
            // of its last byte (no search backwards for its start).
            let Some(m) = self.any.search_half(&input) else {
                break;
            };
            let last = m.offset().saturating_sub(1).max(at);
            let start = memchr::memrchr(b'\n', &text[..last]).unwrap_or(0);
            let end = memchr::memchr(b'\n', &text[last..]).map_or(text.len(), |i| last + i + 1);
            lines.push(start..end);
            at = end.max(m.offset() + 1);
        }
        for &i in &self.rules {
            windows[i] = lines.clone();
        }
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

/// The literals of walissh's own `patterns`, in order: what `needs`
/// reads off each, and its reach (`max_line_breaks`).
pub(super) fn prefilter(patterns: &[&str]) -> Result<Literals, String> {
    let (mut literals, mut written) = (Vec::new(), Vec::new());
    let mut reach = Vec::new();
    for (i, pattern) in patterns.iter().enumerate() {
        let breaks = super::max_line_breaks(pattern);
        reach.push(breaks);
        let Ok(hir) = regex_syntax::parse(pattern) else {
            continue;
        };
        if let Some((set, case)) = literals_of(&hir) {
            let to = if case == Case::Any {
                &mut literals
            } else {
                &mut written
            };
            to.extend(set.into_iter().map(|l| (l, i)));
        }
    }
    Literals::with_written(literals, written, [], reach)
}

/// The literals of a pattern (`needs`), parsed as it compiles.
///
/// Anchors need no care. A window runs from the line break before its
/// first line to just after its last line's, reach lines either side of
/// a literal's (all of the text, for a rule whose matches have no bound
/// on the lines they cross): a match that began at a window's start or
/// ended at its end, where the window could move `\A`, `^` or `\z`,
/// would cross one line more than the rule's matches can
/// (`windows_find_what_the_whole_text_does`).
pub(super) fn literals_of(hir: &Hir) -> Option<(Set, Case)> {
    let any = needs(hir, Case::Any)?;
    // As written, where a match's case is known: a rule for `TOKEN=` then
    // reads none of the lines that say `token` (most of the ones that say
    // either), for what its literals find in any case is checked. Not
    // where a letter may be in either case: `(?i)password` is 256
    // spellings, each checked wherever `password` is, to rule out none.
    match needs(hir, Case::Written) {
        Some(written) if min_len(&written) >= min_len(&any) && written.len() <= any.len() => {
            Some((written, Case::Written))
        }
        _ => Some((any, Case::Any)),
    }
}

/// The literals one of which every match of `hir` starts with, ASCII
/// lowercase; None when some match may start with anything.
pub(super) fn starts(hir: &Hir) -> Option<Set> {
    let prefix = info(hir, Case::Any).prefix;
    prefix.iter().all(|l| !l.is_empty()).then_some(prefix)
}

/// The literals one of which every match of `hir` holds; None when there
/// is no such set of at most `MAX_SET`, each `MIN_LEN` long or more.
fn needs(hir: &Hir, case: Case) -> Option<Set> {
    let info = info(hir, case);
    better(info.factor, info.exact).filter(|set| min_len(set) >= MIN_LEN)
}

/// What is known of the strings a piece of a pattern matches.
struct Info {
    /// All of them, if they are few.
    exact: Option<Set>,
    /// Literals one of which each of them holds.
    factor: Option<Set>,
    /// Literals one of which each of them starts with, and ends with
    /// (`{""}` when nothing is known): what the pieces before and after
    /// it multiply with (`gh(?:p_|ithub_pat_)` needs `ghp_` or
    /// `github_pat_`, though neither branch is known whole).
    prefix: Set,
    suffix: Set,
}

/// The set that says nothing: every string starts with the empty one.
fn nothing() -> Set {
    vec![Vec::new()]
}

impl Info {
    /// Of a piece whose strings are all known (or none are).
    fn exact(exact: Option<Set>) -> Info {
        Info {
            prefix: exact.clone().unwrap_or_else(nothing),
            suffix: exact.clone().unwrap_or_else(nothing),
            exact,
            factor: None,
        }
    }
}

fn info(hir: &Hir, case: Case) -> Info {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::exact(Some(nothing())),
        HirKind::Literal(l) => {
            let set = vec![match case {
                Case::Any => l.0.to_ascii_lowercase(),
                Case::Written => l.0.to_vec(),
            }];
            Info {
                factor: Some(set.clone()),
                ..Info::exact(Some(set))
            }
        }
        HirKind::Class(class) => Info::exact(class_members(class, case)),
        HirKind::Capture(c) => info(&c.sub, case),
        HirKind::Repetition(r) => {
            let sub = info(&r.sub, case);
            let exact = match (r.min, r.max, &sub.exact) {
                (min, Some(max), Some(e)) if max == min && max <= 8 => {
                    (0..max).try_fold(nothing(), |acc, _| product(&acc, e))
                }
                // `x?`: nothing, or the piece once.
                (0, Some(1), Some(e)) => union(vec![nothing(), e.clone()]),
                _ => None,
            };
            // Each match holds the piece at least once, and starts and
            // ends with it.
            let once = r.min >= 1;
            let factor = once.then(|| better(sub.factor, sub.exact)).flatten();
            let (prefix, suffix) = match (&exact, once) {
                (Some(e), _) => (e.clone(), e.clone()),
                (None, true) => (sub.prefix, sub.suffix),
                (None, false) => (nothing(), nothing()),
            };
            Info {
                exact,
                factor,
                prefix,
                suffix,
            }
        }
        HirKind::Concat(parts) => concat(parts, case),
        HirKind::Alternation(alts) => {
            let infos: Vec<Info> = alts.iter().map(|a| info(a, case)).collect();
            let exact = infos
                .iter()
                .map(|i| i.exact.clone())
                .collect::<Option<Vec<Set>>>()
                .and_then(union);
            let ends = |end: fn(&Info) -> &Set| {
                union(infos.iter().map(|i| end(i).clone()).collect()).unwrap_or_else(nothing)
            };
            let (prefix, suffix) = (ends(|i| &i.prefix), ends(|i| &i.suffix));
            // Each branch must need something, or the whole needs nothing.
            let factor = infos
                .into_iter()
                .map(|i| {
                    let ends = better(Some(i.prefix), Some(i.suffix));
                    better(better(i.factor, i.exact), ends).filter(|s| min_len(s) > 0)
                })
                .collect::<Option<Vec<Set>>>()
                .and_then(union);
            Info {
                exact,
                factor,
                prefix,
                suffix,
            }
        }
    }
}

/// A concatenation: runs of parts whose strings are known multiply out,
/// and so do a run and the start of the part after it; the best of those
/// and of the parts' own factors is its factor.
fn concat(parts: &[Hir], case: Case) -> Info {
    let mut best = None;
    // What every match of the parts so far ends with: the known strings
    // since the last part not known whole, after that part's suffix.
    let mut run: Set = nothing();
    // The same from the first part on, while every part is known whole.
    let mut exact: Option<Set> = Some(nothing());
    let mut prefix: Option<Set> = None;
    for part in parts {
        let part = info(part, case);
        best = better(best, part.factor);
        if let Some(e) = &part.exact {
            exact = exact.and_then(|x| product(&x, e));
            run = match product(&run, e) {
                Some(p) => p,
                None => {
                    best = better(best, Some(run));
                    e.clone()
                }
            };
            continue;
        }
        best = better(better(best, product(&run, &part.prefix)), Some(run));
        if prefix.is_none() {
            prefix = Some(match &exact {
                Some(x) => product(x, &part.prefix).unwrap_or_else(|| x.clone()),
                None => nothing(),
            });
        }
        exact = None;
        run = part.suffix;
    }
    // Every part known whole: their product, unless it grew too large;
    // then nothing is known of the start (`run` is only what it ends with).
    let prefix = prefix.or_else(|| exact.clone()).unwrap_or_else(nothing);
    Info {
        factor: better(best, Some(run.clone())),
        exact,
        prefix,
        suffix: run,
    }
}

/// The members of a small class, as literals: in `Case::Any`, lowercase,
/// a letter in any case being one (`(?i)p` is `[Pp]`).
fn class_members(class: &Class, case: Case) -> Option<Set> {
    let lower = |b: Vec<u8>| match case {
        Case::Any => b.to_ascii_lowercase(),
        Case::Written => b,
    };
    /// More members than this, and the class is not multiplied out.
    const MAX_MEMBERS: usize = 10;
    let mut set: Set = match class {
        Class::Unicode(c) => {
            let count: u32 = c.ranges().iter().map(|r| r.len() as u32).sum();
            if count > 2 * MAX_MEMBERS as u32 {
                return None;
            }
            c.iter()
                .flat_map(|r| r.start()..=r.end())
                .map(|ch| lower(ch.to_string().into_bytes()))
                .collect()
        }
        Class::Bytes(c) => {
            let count: usize = c.ranges().iter().map(|r| r.len()).sum();
            if count > 2 * MAX_MEMBERS {
                return None;
            }
            c.iter()
                .flat_map(|r| r.start()..=r.end())
                .map(|b| lower(vec![b]))
                .collect()
        }
    };
    set.sort();
    set.dedup();
    (set.len() <= MAX_MEMBERS).then_some(set)
}

/// Every string of `a` followed by one of `b`; None when too many.
fn product(a: &Set, b: &Set) -> Option<Set> {
    if a.len() * b.len() > MAX_SET {
        return None;
    }
    let mut out: Set = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| [x.as_slice(), y].concat()))
        .collect();
    out.sort();
    out.dedup();
    Some(out)
}

/// The sets together; None when too many.
fn union(sets: Vec<Set>) -> Option<Set> {
    let mut out: Set = sets.into_iter().flatten().collect();
    out.sort();
    out.dedup();
    (out.len() <= MAX_SET).then_some(out)
}

fn min_len(set: &Set) -> usize {
    set.iter().map(Vec::len).min().unwrap_or(0)
}

/// The set that says more: longer literals, up to four bytes (a literal
/// that long is rare enough in text), then fewer of them.
fn better(a: Option<Set>, b: Option<Set>) -> Option<Set> {
    match (a, b) {
        (Some(a), Some(b)) => {
            let key = |s: &Set| (min_len(s).min(4), std::cmp::Reverse(s.len()), min_len(s));
            Some(if key(&b) > key(&a) { b } else { a })
        }
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needed(pattern: &str) -> Option<Vec<String>> {
        let hir = regex_syntax::parse(pattern).unwrap();
        needs(&hir, Case::Any).map(|set| {
            set.into_iter()
                .map(|l| String::from_utf8(l).unwrap())
                .collect()
        })
    }

    #[test]
    fn literals_are_read_off_the_pattern() {
        assert_eq!(needed(r"ghp_[A-Za-z0-9]{36}").unwrap(), ["ghp_"]);
        // `(?i)`: a letter in either case is one; Unicode's Kelvin sign
        // is a `k` too, and the separator multiplies out.
        assert_eq!(
            needed(r"(?i)token[=:]\S+").unwrap(),
            ["token:", "token=", "to\u{212a}en:", "to\u{212a}en="]
        );
        assert_eq!(
            needed(r"(?:xox[bp]|xoxa)-[0-9]+").unwrap(),
            ["xoxa-", "xoxb-", "xoxp-"]
        );
        // Each branch needs its own word.
        assert_eq!(
            needed(r"(?m)(?:^|\s)(?:passwd|secret)=(\S+)").unwrap(),
            ["passwd=", "secret="]
        );
        // `\b` adds nothing, and takes nothing away.
        assert_eq!(needed(r"(?-u:\b)AKIA[0-9A-Z]{16}").unwrap(), ["akia"]);
        // A branch not known whole still starts with something, and what
        // comes before it multiplies with that.
        assert_eq!(
            needed(r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})").unwrap(),
            ["gho_", "ghp_", "ghr_", "ghs_", "ghu_", "github_pat_"]
        );
        // And ends with something the part after it multiplies with.
        assert_eq!(
            needed(r"[a-z]+(?:_key|_pw)=\S+").unwrap(),
            ["_key=", "_pw="]
        );
    }

    /// A run known whole that grew too large to multiply out says nothing
    /// of how its strings start: what ends them is no prefix.
    #[test]
    fn a_run_too_large_to_multiply_has_no_prefix() {
        // Taking its last digit for its start, the prefilter looked for
        // `xyz` and a digit, and never read `xyza123`.
        let p = prefilter(&[r"xyz(?:[ab][0-9][0-9][0-9])+[^a-z]"]).unwrap();
        assert!(!p.windows(b"xyza123 ")[0].is_empty());
        let hir = regex_syntax::parse(r"ab[0-9][0-9][0-9]").unwrap();
        let i = info(&hir, Case::Any);
        assert_eq!(i.exact, None);
        assert!(
            i.prefix
                .iter()
                .all(|p| b"ab".starts_with(p) || p.starts_with(b"ab")),
            "{:?}",
            i.prefix
        );
    }

    /// Patterns made of the pieces literals are read from (known runs,
    /// classes, branches, repetitions, runs too large to multiply out),
    /// checked against what the regex crate matches in text made of what
    /// each piece matches: every match holds one of the literals `needs`
    /// reads off its pattern.
    mod every_match_holds_a_literal {
        use super::*;

        /// A piece of a pattern, and strings it matches.
        const PIECES: &[(&str, &[&str])] = &[
            ("ab", &["ab"]),
            ("x", &["x"]),
            ("xyz", &["xyz"]),
            ("[ab]", &["a", "b"]),
            ("[0-9]", &["0", "7"]),
            ("[0-9a]", &["a", "3"]),
            ("(?:ab|x)", &["ab", "x"]),
            ("(?:a|b[0-9])", &["a", "b4"]),
            ("y?", &["", "y"]),
            ("(?:xy)+", &["xy", "xyxy"]),
            ("[a-z]+", &["q", "abq"]),
            ("z{2}", &["zz"]),
            ("[ab][0-9][0-9][0-9]", &["a123", "b900"]),
            ("(?i:ab)", &["AB", "aB"]),
            ("KEY", &["KEY"]),
            ("[Kk]ey", &["Key", "key"]),
            ("(?i:k)EY", &["kEY", "KEY"]),
            ("(?:[ab][0-9]{3})+", &["a123", "b456a789"]),
            ("(?:q|)", &["", "q"]),
            ("[xyz]{0,2}", &["", "zy"]),
            ("(?:ab|[0-9]+q)", &["ab", "12q"]),
        ];

        fn piece() -> impl proptest::strategy::Strategy<Value = (usize, usize)> {
            use proptest::strategy::Strategy;
            (0..PIECES.len()).prop_flat_map(|i| (proptest::strategy::Just(i), 0..PIECES[i].1.len()))
        }

        proptest::proptest! {
            #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
            #[test]
            fn on_generated_patterns(
                left in proptest::collection::vec(piece(), 1..6),
                right in proptest::collection::vec(piece(), 0..4),
                use_right in proptest::bool::ANY,
            ) {
                let pattern = |p: &[(usize, usize)]| p.iter().map(|&(i, _)| PIECES[i].0).collect::<String>();
                let sample = |p: &[(usize, usize)]| p.iter().map(|&(i, j)| PIECES[i].1[j]).collect::<String>();
                let pattern = match right.is_empty() {
                    true => pattern(&left),
                    false => format!("(?:{}|{})", pattern(&left), pattern(&right)),
                };
                let chosen = if use_right && !right.is_empty() { &right } else { &left };
                let text = format!("- {} -", sample(chosen));
                let regex = regex::Regex::new(&pattern).unwrap();
                proptest::prop_assert!(regex.is_match(&text), "{pattern} on {text:?}");
                let hir = regex_syntax::parse(&pattern).unwrap();
                for case in [Case::Any, Case::Written] {
                    let Some(set) = needs(&hir, case) else {
                        continue;
                    };
                    for m in regex.find_iter(&text) {
                        let found = match case {
                            Case::Any => m.as_str().to_ascii_lowercase(),
                            Case::Written => m.as_str().to_string(),
                        };
                        proptest::prop_assert!(
                            set.iter().any(|l| found.contains(std::str::from_utf8(l).unwrap())),
                            "{pattern} ({case:?}): {:?} holds none of {set:?}",
                            m.as_str()
                        );
                    }
                }
            }
        }
    }

    /// Patterns with anchors and line breaks, read in their windows and in
    /// all of a text: the same matches, so a window never moves an
    /// anchor (`literals_of`) nor cuts a match that crosses lines.
    mod windows_find_what_the_whole_text_does {
        use super::*;

        const PIECES: &[&str] = &[
            "key",
            "=",
            r"\n",
            r"\s",
            r"\S+",
            "[a-z]+",
            r"[;\n]",
            r"\z",
            r"\A",
            "(?m:$)",
            r"(?:[\s;]|\z)",
            r"(?:\n|=)",
            "(?:;|)",
            r"(?:\A|\s)",
            r"\s*",
        ];
        const WORDS: &[&str] = &[
            "key", "=", "ab", ";", " ", "\n", "\n", "key=x", "KEY", "Key",
        ];
        /// The literal between the pieces: as written, or in either case.
        const MIDDLES: &[&str] = &["key", "KEY", "(?i:key)", "[Kk]ey"];

        proptest::proptest! {
            #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
            #[test]
            fn on_generated_patterns(
                before in proptest::collection::vec(0..PIECES.len(), 0..4),
                after in proptest::collection::vec(0..PIECES.len(), 0..4),
                words in proptest::collection::vec(0..WORDS.len(), 0..24),
                middle in 0..MIDDLES.len(),
            ) {
                let piece = |v: &[usize]| v.iter().map(|&i| PIECES[i]).collect::<String>();
                let pattern = format!("{}{}{}", piece(&before), MIDDLES[middle], piece(&after));
                let text: String = words.iter().map(|&i| WORDS[i]).collect();
                let p = prefilter(&[&pattern]).unwrap();
                let regex = regex::Regex::new(&pattern).unwrap();
                let whole: Vec<_> = regex.find_iter(&text).map(|m| m.range()).collect();
                let mut windowed: Vec<_> = p.windows(text.as_bytes())[0]
                    .iter()
                    .flat_map(|w| {
                        regex
                            .find_iter(&text[w.clone()])
                            .map(|m| w.start + m.start()..w.start + m.end())
                            .collect::<Vec<_>>()
                    })
                    .collect();
                windowed.dedup();
                proptest::prop_assert_eq!(whole, windowed, "{} on {:?}", pattern, text);
            }
        }
    }

    /// A gate opens its rule anywhere in the text; where the rule reads
    /// is still its literal's lines.
    #[test]
    fn a_gate_opens_a_rule_that_reads_around_its_literal() {
        let text = b"airtable\nx\ny\npat=1\nz\n";
        let p = Literals::new(
            [(b"pat=".to_vec(), 0)],
            [(b"airtable".to_vec(), 0)],
            vec![Some(0)],
        )
        .unwrap();
        assert_eq!(p.windows(text)[0], vec![12..19]);
        assert_eq!(p.open(text), [true]);
        assert!(p.windows(b"pat=1\n")[0].is_empty());
        assert_eq!(p.open(b"pat=1\n"), [false]);
    }

    #[test]
    fn two_sets_are_found_in_one_pass() {
        let text = b"a\nb secret=x\nc\ntoken d\ne";
        let mine = prefilter(&[r"secret=\S+", r"[0-9]{40}"]).unwrap();
        let theirs = Literals::new([(b"token".to_vec(), 0)], [], vec![Some(1)]).unwrap();
        let mut both = mine.windows(text);
        both.extend(theirs.windows(text));
        assert_eq!(mine.chain(&theirs).unwrap().windows(text), both);
    }

    #[test]
    fn a_pattern_with_nothing_sure_to_look_for_reads_everything() {
        // A shape of random characters, a branch with no literal, short
        // literals, and anchors a line read alone would move.
        for p in [
            r"[A-Za-z0-9]{40}",
            r"(?:token|[0-9]{8})=\S+",
            r"ab[0-9a-f]+",
            r"(?:password)?=\S+",
        ] {
            assert_eq!(needed(p), None, "{p}");
        }
        // `x?` is nothing or `x`.
        assert_eq!(needed(r"\$2[ab]?\$").unwrap(), ["$2$", "$2a$", "$2b$"]);
        // `(?m)` anchors are a line's, and a line is read whole.
        assert_eq!(needed(r"(?m)^secret=\S+").unwrap(), ["secret="]);
    }

    /// A rule whose literal is spelt one way reads only the lines that
    /// spell it so; one in any case, every line that holds it.
    #[test]
    fn a_literal_in_one_case_is_looked_for_in_that_case() {
        let p = prefilter(&[r"(?m)^[A-Z_]*TOKEN=\S+", r"(?i)token=\S+"]).unwrap();
        let text = b"a_token=1\nB_TOKEN=2\nToken=3\n";
        let w = p.windows(text);
        assert_eq!(w[0], vec![9..20]);
        assert_eq!(w[1], vec![0..text.len()]);
        assert_eq!(
            literals_of(&regex_syntax::parse("KEY=").unwrap())
                .unwrap()
                .1,
            Case::Written
        );
        assert_eq!(
            literals_of(&regex_syntax::parse("(?i)key=").unwrap())
                .unwrap()
                .1,
            Case::Any
        );
    }

    #[test]
    fn lines_around_a_literal() {
        let text: String = (0..20).map(|i| format!("line{i}\n")).collect();
        let from = |l: &str| text.find(l).unwrap();
        let literals = |reach| Literals::new([(b"line10".to_vec(), 0)], [], vec![reach]).unwrap();
        // Two lines either side, from the line break before them.
        let w = literals(Some(2)).windows(text.as_bytes());
        assert_eq!(w[0], vec![from("line8") - 1..from("line13")]);
        // At the ends, as much as there is; unbounded, everything.
        let w = Literals::new([(b"line0".to_vec(), 0)], [], vec![Some(8)]).unwrap();
        assert_eq!(w.windows(text.as_bytes())[0], vec![0..from("line9")]);
        let w = Literals::new([(b"line19".to_vec(), 0)], [], vec![Some(2)]).unwrap();
        assert_eq!(
            w.windows(text.as_bytes())[0],
            vec![from("line17") - 1..text.len()]
        );
        assert_eq!(
            literals(None).windows(text.as_bytes())[0],
            vec![0..text.len()]
        );
        // One long line is read once, however many literals it holds, and
        // a literal in any case is found.
        let long = b"KEY ".repeat(1000);
        let w = Literals::new([(b"key".to_vec(), 0)], [], vec![Some(9)]).unwrap();
        assert_eq!(w.windows(&long)[0], vec![0..long.len()]);
        // A literal that holds a line break reads its lines and those
        // around both.
        let w = Literals::new([(b"line3\nline4".to_vec(), 0)], [], vec![Some(1)]).unwrap();
        assert_eq!(
            w.windows(text.as_bytes())[0],
            vec![from("line2") - 1..from("line6")]
        );
    }

    #[test]
    fn anchored_rules_read_their_lines_too() {
        let p = prefilter(&[
            r"secret=\S+$",
            r"\Asecret=\S+",
            r"secret=\S+\n\S+",
            r"secret=\S+\n\z",
            r"secret=(?s:.)+",
            // gitleaks' end of a token: a space, a line break, or the
            // text's end.
            r"\b(secret=[a-z]{1,3})(?:[\s;]|$)",
        ])
        .unwrap();
        assert!(p.always.is_empty());
        let text = "a\nb secret=x\nc\nd";
        let w = p.windows(text.as_bytes());
        // The line, from the line break before it; and a line either side
        // for the rules whose matches cross one.
        assert_eq!(w[0], vec![1..13]);
        assert_eq!(w[1], vec![1..13]);
        assert_eq!(w[2], vec![0..15]);
        assert_eq!(w[3], vec![0..15]);
        assert_eq!(w[5], vec![0..15]);
        // No bound on the lines a match crosses: all of the text, once
        // the literal is there.
        assert_eq!(w[4], vec![0..text.len()]);
        assert!(p.windows(b"a\nb\n")[4].is_empty());
        // Where the window's edges are not the text's, its anchors
        // match nothing the whole text's would not.
        let regex = regex::Regex::new(r"\b(secret=[a-z]{1,3})(?:[\s;]|$)").unwrap();
        let window = &text[w[5][0].clone()];
        assert_eq!(regex.find(window).map(|m| m.as_str()), Some("secret=x\n"));
    }
}
