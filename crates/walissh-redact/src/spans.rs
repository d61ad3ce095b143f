//! What the redactor does with what its rules found: findings that are
//! public or masked after all, encoded text decoded to be read again
//! (base64, URL escapes), overlapping spans merged, placeholders already
//! in the text kept; and the helpers that compile a rule.
//!
//! What it leaves to others: the rules (`patterns`, `rules`), the pass
//! over a text (`Redactor`).

use super::checks::*;
use super::*;

/// Whether what a rule found at `range` of `t` is no secret after all:
/// masked, an example, or public by its name or shape. A command's output
/// is never taken for masked.
pub(super) fn public_or_masked(t: &str, range: Range<usize>, command: bool) -> bool {
    // A token shape masked in documentation (`ghp_xxxx…`). A finding over
    // lines is a block, no value: a banner of `*****` between two PEM
    // keys it spans masks neither.
    let value = &t[range.clone()];
    let masked = !command && !value.contains('\n') && masked_or_example(value);
    masked
        || names_public_key(t, range.start)
        || digest(t, range.start)
        || public_token(value)
        || PUBLIC_PREFIXES
            .iter()
            .any(|p| t[..range.start].ends_with(p))
}

/// Base64 `text` decoded, if it is base64 of printable UTF-8 text.
/// Padding may be there or not, as programs print it either way.
pub(super) fn decode_base64(text: &str) -> Option<String> {
    use base64::Engine;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    let text = String::from_utf8(LENIENT.decode(text).ok()?).ok()?;
    let printable = text
        .chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'));
    printable.then_some(text)
}

/// Whether base64 `text` starts with a PEM private key's `BEGIN` line,
/// whatever follows (a piece of it, the rest on the rows below).
pub(super) fn encodes_private_key(text: &str) -> bool {
    use base64::Engine;
    let head = &text[..text.len().min(64) / 4 * 4];
    base64::engine::general_purpose::STANDARD
        .decode(head)
        .is_ok_and(|d| d.starts_with(b"-----BEGIN") && d.windows(11).any(|w| w == b"PRIVATE KEY"))
}

/// URL-encoded `text` (`%XX`, and `+` for a space) decoded, and for each
/// byte of the decoded text (and its end) where it starts in `text`; None
/// when the decoded bytes are not UTF-8.
pub(super) fn decode_url(text: &str) -> Option<(String, Vec<usize>)> {
    let bytes = text.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut from = Vec::with_capacity(bytes.len() + 1);
    let mut i = 0;
    while i < bytes.len() {
        from.push(i);
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', hi, lo]) => hex(*hi).zip(hex(*lo)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    from.push(bytes.len());
    Some((String::from_utf8(out).ok()?, from))
}

/// `user:password` (docker's `auth`, HTTP basic), the password a secret:
/// a user name's characters, then the password right after the colon
/// (`owner: platform-team` is YAML, not a credential).
pub(super) fn credentials(decoded: &str) -> bool {
    decoded.split_once(':').is_some_and(|(user, pass)| {
        !user.is_empty()
            && user.len() <= 128
            && user
                .chars()
                .all(|c| c.is_alphanumeric() || "._-@\\+".contains(c))
            && !pass.starts_with(char::is_whitespace)
            && !pass.trim_end().contains(char::is_whitespace)
            && pairs::is_secret_value(pass.trim_end(), false)
    })
}

/// The findings as disjoint spans, in order. The most specific rule goes
/// first: a finding that overlaps one already taken, or a placeholder
/// already in the text, is dropped (a generic `key: rest of the line` rule
/// must not swallow the text after a token a specific rule found).
pub(super) fn merge(mut spans: Vec<Span>, marks: &[Range<usize>]) -> Vec<Span> {
    spans.retain(|s| !s.range.is_empty());
    // A command's output goes whole, whatever else was found in it; of
    // two findings of one kind at one place, the longer (a URL's encoded
    // password read as it stands, not the piece its decoding spells).
    spans.sort_by_key(|s| {
        (
            !matches!(s.via, Via::Command(_)),
            s.kind,
            s.range.start,
            std::cmp::Reverse(s.range.end),
        )
    });
    // Taken spans by start; they never overlap, so the one starting last
    // before a span's end is the only one that can reach into it.
    let mut taken: BTreeMap<usize, Span> = BTreeMap::new();
    for m in marks {
        taken.insert(
            m.start,
            Span {
                range: m.clone(),
                kind: usize::MAX,
                via: Via::Text,
            },
        );
    }
    for s in spans {
        let clashes = taken
            .range(..s.range.end)
            .next_back()
            .is_some_and(|(_, t)| t.range.end > s.range.start);
        if !clashes {
            taken.insert(s.range.start, s);
        }
    }
    taken
        .into_values()
        .filter(|s| s.kind != usize::MAX)
        .collect()
}

/// The most line breaks one match of `pattern` can hold, None when that
/// is unbounded (or the pattern does not parse here). Decided on the
/// parsed pattern, so it is exact: both the pieces of `find_own` and the
/// windows of gitleaks' rules (`rules`) rest on it.
pub(super) fn max_line_breaks(pattern: &str) -> Option<usize> {
    use regex_syntax::hir::{Class, Hir, HirKind};
    fn breaks(hir: &Hir) -> Option<usize> {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => Some(0),
            HirKind::Literal(l) => Some(l.0.iter().filter(|&&b| b == b'\n').count()),
            HirKind::Class(Class::Unicode(c)) => Some(usize::from(
                c.ranges()
                    .iter()
                    .any(|r| r.start() <= '\n' && '\n' <= r.end()),
            )),
            HirKind::Class(Class::Bytes(c)) => Some(usize::from(
                c.ranges()
                    .iter()
                    .any(|r| r.start() <= b'\n' && b'\n' <= r.end()),
            )),
            HirKind::Repetition(r) => match breaks(&r.sub)? {
                0 => Some(0),
                b => r.max.map(|max| b.saturating_mul(max as usize)),
            },
            HirKind::Capture(c) => breaks(&c.sub),
            HirKind::Concat(v) => v
                .iter()
                .try_fold(0usize, |a, h| Some(a.saturating_add(breaks(h)?))),
            HirKind::Alternation(v) => v.iter().try_fold(0usize, |a, h| Some(a.max(breaks(h)?))),
        }
    }
    breaks(&parse_as_gitleaks(pattern)?)
}

/// `pattern` parsed as gitleaks' rules compile (`rules::compile`): on
/// bytes first, then with Unicode.
pub(super) fn parse_as_gitleaks(pattern: &str) -> Option<regex_syntax::hir::Hir> {
    regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()
        .or_else(|| regex_syntax::parse(pattern).ok())
}

pub(super) fn builtin(p: &Pattern) -> Rule {
    let regex = Regex::new(p.regex).expect("built-in redaction pattern compiles");
    Rule::new(p.kind, regex, p.check)
}

/// One pattern for all the bastion's credentials, longest first so that a
/// password that contains another is replaced whole.
pub(super) fn literals(secrets: &[String]) -> Option<Regex> {
    let mut secrets: Vec<&str> = secrets
        .iter()
        .map(String::as_str)
        .filter(|s| s.chars().count() >= MIN_SECRET_CHARS)
        .collect();
    if secrets.is_empty() {
        return None;
    }
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    let alternation: Vec<String> = secrets.into_iter().map(regex::escape).collect();
    Some(Regex::new(&alternation.join("|")).expect("escaped literals compile"))
}

pub(super) fn is_secret_group(name: &str) -> bool {
    name.strip_prefix('s')
        .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit()))
}

/// Where the placeholders already in `text` are.
/// Only the exact shape counts: a `[REDACTED:` that goes on with anything
/// else shields nothing that follows it.
pub(super) fn placeholders(shape: &Regex, text: &str) -> Vec<Range<usize>> {
    if !text.contains(MARK) {
        return Vec::new();
    }
    shape.find_iter(text).map(|m| m.range()).collect()
}
