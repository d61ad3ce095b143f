//! Rows a terminal wrapped, read whole.
//!
//! A screen's text holds a long line as rows: each but the last exactly
//! as wide as the terminal, the next row its continuation. A secret the
//! wrap cuts is two pieces to a rule: `github_pat_1AbC` at the end of one
//! row is too short for its rule, the rest of a key on the next row has
//! no prefix, a JWT loses its tail, a PEM marker reads `-----BEGIN RSA
//! PRIV`. So the detectors read a second text as well, a view
//! (`Joined`): the rows that may be wrapped ones joined back into their
//! line, a multiplexer's pane border (`│ `, `| `, ` │`) at the join left
//! out. A finding of the view counts only where it crosses a join: what
//! lies within a row, the text itself already showed. It is mapped back
//! to the text, across the line break and the border, and joins the
//! findings of the text (`extend`). The text the model gets keeps its rows.
//!
//! Which rows are wrapped ones is a guess, as nothing marks them: a row
//! as wide as a common terminal width (80, 132), as the widest row of the
//! text (a terminal's width, whichever it is: a wrapped row fills it), or
//! as a row next to it (a run of full rows), that ends
//! in a character of a word, the next row not blank (for the less sure
//! widths, a neighbour's or one row's: a word cut in two); or
//! one column short of that (the screen dropped the blank the wrap fell
//! on), ending and followed by a word's character: the view puts the
//! blank back. Two ordinary lines taken for one make no secret out of
//! nothing, as only a finding that crosses the join extends over it.
//! Aligned tables (`| a | b |`) are never joined, nor rows that start
//! as the row before did (fixed-format output: `ls -l`, a log's lines).
//!
//! The view holds each run of joined rows with the row before it and the
//! rows after it that look like the rest of a secret (a key's body under
//! a wrapped `BEGIN` marker), and the row after those (its `END`); a row is
//! in at most one window, so the view is never longer than the text, and
//! building it is one pass: linear, whatever the text holds.

use std::ops::Range;

use unicode_width::UnicodeWidthStr;

use super::{Span, Via};

/// Widths terminals often have: a row this wide is a wrapped one, should
/// a wider line elsewhere in the text hide the terminal's width.
const COMMON_WIDTHS: [usize; 2] = [80, 132];
/// A row narrower than this is never taken for a wrapped one.
const MIN_WIDTH: usize = 16;
/// Multiplexers' and boxes' vertical borders (`panes` splits at them too).
pub(super) const BORDERS: [char; 4] = ['│', '┃', '║', '|'];
/// No byte of the text: where the view adds a character.
const ADDED: usize = usize::MAX;

/// One row of the text.
struct Row {
    /// Its bytes, without the line break.
    all: Range<usize>,
    /// Its bytes inside a pane border, if it has one.
    body: Range<usize>,
    /// Its width in columns, borders and all.
    width: usize,
    /// An aligned table's row: never joined.
    table: bool,
}

impl Row {
    fn new(text: &str, all: Range<usize>) -> Row {
        let line = &text[all.clone()];
        let width = if line.is_ascii() {
            line.len()
        } else {
            line.width()
        };
        let mut row = Row {
            body: all.clone(),
            all,
            width,
            table: false,
        };
        // A border then a blank, or a border on both sides (a row the
        // pane wrapped fills it: `│…password=Xy│`, `│Zw sslmode=…  │`).
        let Some(b) = BORDERS.iter().copied().find(|&b| {
            line.strip_prefix(b)
                .is_some_and(|rest| rest.starts_with(' ') || rest.ends_with(b))
        }) else {
            return row;
        };
        let left = b.len_utf8() + usize::from(line[b.len_utf8()..].starts_with(' '));
        row.body.start += left;
        let inner = &line[left..];
        if let Some(inner) = inner.strip_suffix(b) {
            let inner = inner.strip_suffix(' ').unwrap_or(inner);
            row.body.end = row.body.start + inner.len();
            // `| key | value |`: a table, not a pane.
            let mut sep = [0; 4];
            let sep = b.encode_utf8(&mut sep);
            row.table = inner.split(&*sep).count() > 1;
        }
        row
    }
}

/// How two rows join.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Join {
    /// Row to row, the border left out.
    Hard,
    /// With a blank between them, which the screen dropped.
    Soft,
}

fn word_char(c: char) -> bool {
    !c.is_whitespace() && !BORDERS.contains(&c)
}

/// Whether `row` and the row after it, `next`, may be one line the
/// terminal wrapped at one of `widths`.
fn join(text: &str, row: &Row, next: &Row, full: impl Fn(usize) -> Option<bool>) -> Option<Join> {
    if row.table || next.table {
        return None;
    }
    let (left, right) = (&text[row.body.clone()], &text[next.body.clone()]);
    let last = left.chars().next_back()?;
    let first = right.chars().next()?;
    if right.trim_start().is_empty() {
        return None;
    }
    // Fixed-format output (`ls -l`, a log) has rows of one width that all
    // start alike; a row's continuation does not start as the row did,
    // nor as a line of its own (`region = …`, `API_TOKEN=…`).
    let alike = right
        .get(..4)
        .is_some_and(|r| left.starts_with(r) && r.bytes().any(|b| b.is_ascii_alphanumeric()));
    if alike {
        return None;
    }
    // Nor does a prompt continue a row (`root@web1:~# systemctl …` after
    // a long line).
    if assignment(right) || super::commands::prompt(right).is_some() {
        return None;
    }
    if let Some(sure) = full(row.width) {
        // Under a command line, at a width less sure, a line of words is
        // its output (`No value found at …`); one token may be its rest.
        if !sure
            && super::commands::prompt(left).is_some()
            && right.trim().contains(char::is_whitespace)
        {
            return None;
        }
        if !sure {
            // A width one row alone has: only a word cut in two, and not
            // into a row of aligned columns (`db_user    app` in a table).
            let r = right.trim_start();
            let first_word = r.split_whitespace().next().unwrap_or("");
            let aligned = r[first_word.len()..].starts_with("  ");
            return (word_char(last) && word_char(first) && !aligned).then_some(Join::Hard);
        }
        let joins = if last == ' ' {
            // A blank at the edge, then a word; two are padding.
            !left.ends_with("  ") && word_char(first)
        } else {
            // A word cut before its blank (`PRIVATE| KEY`), or anywhere.
            word_char(last) && (word_char(first) || last.is_ascii_alphanumeric())
        };
        return joins.then_some(Join::Hard);
    }
    (full(row.width + 1) == Some(true) && word_char(last) && word_char(first)).then_some(Join::Soft)
}

/// The width of the line number `line` starts with (`  7 KEY=…`):
/// blanks, digits, one blank.
fn numbered(line: &str) -> Option<usize> {
    let blanks = line.len() - line.trim_start_matches(' ').len();
    let digits = line[blanks..]
        .bytes()
        .take_while(u8::is_ascii_digit)
        .count();
    let g = blanks + digits + 1;
    (digits > 0 && g >= 4 && line.as_bytes().get(g - 1) == Some(&b' ')).then_some(g)
}

/// Whether `row` starts with a name and its value (`key=value`, `key:
/// value`, `key = value`); base64's padding (`Zw==`) is none.
fn assignment(row: &str) -> bool {
    let name = row
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || b"_.-".contains(b))
        .count();
    // A name is short: `…Kg8EH=a08200f9`, the end of an Atlassian
    // token, is the rest of a row.
    if name == 0 || name > 40 || row.as_bytes()[0].is_ascii_digit() {
        return false;
    }
    let rest = row[name..].trim_start_matches([' ', '\t']);
    let Some(value) = rest.strip_prefix(['=', ':']) else {
        return false;
    };
    // Not a JSON string's end either (`…emc="}}}`: base64's padding).
    let value = value.trim_start_matches([' ', '\t']);
    let json_end = value
        .strip_prefix(['"', '\''])
        .is_some_and(|v| v.is_empty() || v.starts_with(['}', ']', ',']));
    !json_end
        && value
            .chars()
            .next()
            .is_some_and(|c| !matches!(c, '=' | ':'))
}

/// Whether a whole line looks like the rest of a secret a program or the
/// terminal broke at a width: one long token of secret characters (16 or
/// more, with a digit or both cases).
pub(super) fn rest_of_secret(line: &str) -> bool {
    // Base64 may end with padding; an `=` elsewhere is an assignment.
    let line = line.trim_end_matches('=');
    line.len() >= 16
        && !line.starts_with('/')
        && line
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/_-".contains(&b))
        && (line.bytes().any(|b| b.is_ascii_digit())
            || (line.bytes().any(|b| b.is_ascii_uppercase())
                && line.bytes().any(|b| b.is_ascii_lowercase())))
}

/// The text with the rows that may be wrapped ones joined, and how to
/// map a span of it back (see the module's comment).
pub(super) struct Joined {
    pub(super) text: String,
    /// Each run of the view copied from the text, in order: where it
    /// starts in the view, and in the text (`ADDED`: a character the view
    /// added, a blank or a line break between windows).
    runs: Vec<(usize, usize)>,
    /// Each join, in order: where the row before it ends in the view, and
    /// where the row after it starts.
    joins: Vec<(usize, usize)>,
    /// Where each window ends in the view, in order.
    windows: Vec<usize>,
}

impl Joined {
    /// The view of `text`; None when no rows join.
    pub(super) fn new(text: &str) -> Option<Joined> {
        let mut rows = Vec::new();
        let mut widest = 0;
        let mut start = 0;
        // The width of a line-number column (`vim` with `number`, `less
        // -N`): rows that start with as many blanks are the numbered
        // line's continuation, their text after the gutter.
        let mut gutter: Option<usize> = None;
        for line in text.split('\n') {
            let mut row = Row::new(text, start..start + line.len());
            widest = widest.max(row.width);
            match (numbered(line), gutter) {
                (Some(g), _) => gutter = Some(g),
                (None, Some(g))
                    if line.len() > g
                        && line.as_bytes()[..g].iter().all(|&b| b == b' ')
                        && line.as_bytes()[g] != b' ' =>
                {
                    row.body.start = row.all.start + g;
                }
                _ => gutter = None,
            }
            rows.push(row);
            start += line.len() + 1;
        }
        // The terminal's width: a common one, or the widest row's when two
        // rows have it; less surely, a row's neighbour's (a run of full
        // rows), or the widest row's alone.
        let widest_twice = rows.iter().filter(|r| r.width == widest).count() >= 2;
        let width = |w: usize| {
            w >= MIN_WIDTH && (COMMON_WIDTHS.contains(&w) || (w == widest && widest_twice))
        };
        let joins: Vec<Option<Join>> = (0..rows.len().saturating_sub(1))
            .map(|i| {
                let w = rows[i].width;
                let neighbour =
                    w >= MIN_WIDTH && ((i > 0 && rows[i - 1].width == w) || rows[i + 1].width == w);
                let full = |x: usize| match () {
                    _ if width(x) => Some(true),
                    _ if (x == w && neighbour) || (x == widest && x >= MIN_WIDTH) => Some(false),
                    _ => None,
                };
                join(text, &rows[i], &rows[i + 1], full)
            })
            .collect();
        if joins.iter().all(Option::is_none) {
            return None;
        }
        let mut view = Joined {
            text: String::new(),
            runs: Vec::new(),
            joins: Vec::new(),
            windows: Vec::new(),
        };
        // Each window: a run of joined rows, the row before it, the rows
        // after it that look like a secret's rest, and one more.
        let mut done = 0;
        let mut r = 0;
        while r < joins.len() {
            if joins[r].is_none() {
                r += 1;
                continue;
            }
            let first = r.saturating_sub(1).max(done);
            let mut last = r + 1;
            while last < joins.len() && joins[last].is_some() {
                last += 1;
            }
            while last + 1 < rows.len() && rest_of_secret(&text[rows[last + 1].all.clone()]) {
                last += 1;
            }
            last = (last + 1).min(rows.len() - 1);
            // The rows after it may start another run of joins: the
            // window takes it too.
            while last < joins.len() && joins[last].is_some() {
                last += 1;
            }
            view.window(text, &rows, &joins, first..=last);
            done = last + 1;
            r = last + 1;
        }
        Some(view)
    }

    /// Adds rows `rows` of `text` as one window.
    fn window(
        &mut self,
        text: &str,
        rows: &[Row],
        joins: &[Option<Join>],
        span: std::ops::RangeInclusive<usize>,
    ) {
        if !self.text.is_empty() {
            self.add("\n");
        }
        let (first, last) = (*span.start(), *span.end());
        let mut from = rows[first].all.start;
        for r in first..last {
            let Some(join) = joins[r] else { continue };
            self.copy(text, from..rows[r].body.end);
            let left = self.text.len();
            if join == Join::Soft {
                self.add(" ");
            }
            self.joins.push((left, self.text.len()));
            from = rows[r + 1].body.start;
        }
        self.copy(text, from..rows[last].all.end);
        self.windows.push(self.text.len());
    }

    fn copy(&mut self, text: &str, range: Range<usize>) {
        if !range.is_empty() {
            self.runs.push((self.text.len(), range.start));
            self.text.push_str(&text[range]);
        }
    }

    fn add(&mut self, s: &str) {
        self.runs.push((self.text.len(), ADDED));
        self.text.push_str(s);
    }

    /// Where byte `at` of the view is in the text; None for one it added.
    fn at(&self, at: usize) -> Option<usize> {
        let run = self.runs.partition_point(|r| r.0 <= at).checked_sub(1)?;
        let (view, text) = self.runs[run];
        (text != ADDED).then(|| text + at - view)
    }

    /// `span` of the view as a span of the text, if it crosses a join:
    /// it holds bytes of the rows on both sides of one, in one window.
    pub(super) fn back(&self, span: Range<usize>) -> Option<Range<usize>> {
        let (a, b) = (span.start, span.end);
        let j = self.joins.partition_point(|j| j.0 <= a);
        if self.joins.get(j).is_none_or(|j| j.1 >= b) {
            return None;
        }
        let window = |p: usize| self.windows.partition_point(|&e| e <= p);
        if window(a) != window(b - 1) {
            return None;
        }
        let start = (a..b).find_map(|p| self.at(p))?;
        let end = (a..b).rev().find_map(|p| self.at(p))? + 1;
        Some(start..end)
    }
}

/// `found`, the findings of `text`, with those of its view (`find` reads
/// it) that cross a join. A finding of the view and those of the text it
/// overlaps, in a chain, become one span of the most specific kind among
/// them (the lowest, a command's output first, as in `merge`): the piece
/// of a secret in one row that a rule found must not leave the rest of it
/// out.
pub(super) fn extend(text: &str, found: &mut Vec<Span>, find: impl FnOnce(&str) -> Vec<Span>) {
    let Some(view) = Joined::new(text) else {
        return;
    };
    let crossing: Vec<Span> = find(&view.text)
        .into_iter()
        .filter(|s| !s.range.is_empty())
        .filter_map(|s| {
            Some(Span {
                range: view.back(s.range)?,
                ..s
            })
        })
        .collect();
    absorb(found, crossing);
}

/// `found` with the findings of a view (`more`, mapped back to the text):
/// a finding of the view and those of the text it overlaps, in a chain,
/// become one span of the most specific kind among them.
pub(super) fn absorb(found: &mut Vec<Span>, more: Vec<Span>) {
    if more.is_empty() {
        return;
    }
    let crossing = more;
    let mut all: Vec<(Span, bool)> = found
        .drain(..)
        .map(|s| (s, false))
        .chain(crossing.into_iter().map(|s| (s, true)))
        .collect();
    all.sort_by_key(|(s, _)| s.range.start);
    let mut i = 0;
    while i < all.len() {
        let mut end = all[i].0.range.end;
        let mut j = i + 1;
        while j < all.len() && all[j].0.range.start < end {
            end = end.max(all[j].0.range.end);
            j += 1;
        }
        let group = &all[i..j];
        if group.iter().any(|(_, crossing)| *crossing) {
            let best = group
                .iter()
                .map(|(s, _)| s)
                .min_by_key(|s| (!matches!(s.via, Via::Command(_)), s.kind))
                .expect("a group holds a span");
            found.push(Span {
                range: group[0].0.range.start..end,
                kind: best.kind,
                via: best.via,
            });
        } else {
            found.extend(group.iter().map(|(s, _)| Span {
                range: s.range.clone(),
                kind: s.kind,
                via: s.via,
            }));
        }
        i = j;
    }
}

/// A secret that ends its line goes on over lines that look like its
/// rest (`rest_of_secret`): a program (`base64`, `fold`) broke it at a
/// width, or the terminal did at one `Joined` did not take for one. Up to
/// four lines, never into the next finding.
pub(super) fn wrapped(text: &str, spans: &mut [Span]) {
    const MAX_LINES: usize = 4;
    for i in 0..spans.len() {
        let limit = spans.get(i + 1).map_or(text.len(), |n| n.range.start);
        let mut end = spans[i].range.end;
        for _ in 0..MAX_LINES {
            let Some(after) = text[end..].strip_prefix('\n') else {
                break;
            };
            let line = after.split('\n').next().unwrap_or("");
            let line_end = end + 1 + line.len();
            if line_end > limit || !rest_of_secret(line) {
                break;
            }
            end = line_end;
        }
        spans[i].range.end = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(text: &str) -> Joined {
        Joined::new(text).expect("rows join")
    }

    #[test]
    fn rows_as_wide_as_the_widest_join() {
        let (a, b) = (
            format!("ab{}", "x".repeat(28)),
            format!("cd{}", "x".repeat(28)),
        );
        let text = format!("short\n{a}\n{b}\nend\nmore");
        let v = view(&text);
        assert_eq!(v.text, format!("short\n{a}{b}end\nmore"));
        let at = v.text.find("xend").unwrap();
        // `xe` crosses the join: it maps back over the line break.
        let back = v.back(at..at + 2).unwrap();
        assert_eq!(&text[back], "x\ne");
        // Within one row: not a finding of the view's own.
        assert_eq!(v.back(at + 1..at + 3), None);
        // Nor two lines of their own.
        assert!(Joined::new(&format!("{a}\nregion = {}", "y".repeat(21))).is_none());
    }

    #[test]
    fn pane_borders_are_left_out_at_a_join() {
        let a = "y".repeat(30);
        let text = format!("│ 1{a} │\n│ 2{a} │\n│ end{} │", " ".repeat(28));
        let v = view(&text);
        assert_eq!(v.text, format!("│ 1{a}2{a}end{} │", " ".repeat(28)));
        let at = v.text.find("y2").unwrap();
        let back = v.back(at..at + a.len() + 2).unwrap();
        assert_eq!(&text[back], format!("y │\n│ 2{a}"));
        // A table is never joined.
        let table = "| key      | value1 |\n| other    | value2 |\n| x | y |";
        assert!(Joined::new(table).is_none());
    }

    #[test]
    fn a_dropped_blank_is_put_back() {
        let text = format!(
            "{} -----BEGIN RSA\nPRIVATE KEY-----\n{}",
            "z".repeat(64),
            "w".repeat(80)
        );
        let v = view(&text);
        assert!(
            v.text.contains("-----BEGIN RSA PRIVATE KEY-----"),
            "{}",
            v.text
        );
        let at = v.text.find("RSA PRIVATE").unwrap();
        let back = v.back(at..at + 11).unwrap();
        assert_eq!(&text[back], "RSA\nPRIVATE");
    }

    #[test]
    fn ordinary_rows_do_not_join() {
        assert!(Joined::new("one\ntwo three\nfour").is_none());
        // Padding is not a wrap.
        let padded = format!("{}  \nnext", "p".repeat(30));
        assert!(Joined::new(&padded).is_none());
    }
}
