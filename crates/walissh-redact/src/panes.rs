//! Panes side by side (tmux, screen, a TUI's columns), read apart.
//!
//! A screen split by a vertical border holds two texts, row by row: a
//! prompt and what its command printed in the right pane, a long token
//! the left pane wrapped at its own edge. Read as one text, neither is
//! there: the prompt is not at a line's start, the wrapped rows are not
//! next to each other. `split` gives each pane as a text of its own, with
//! where each of its bytes is in the screen's text; the redactor reads
//! both and maps what it finds back (`Pane::back`), a line at a time, so
//! the other pane's text is never taken with it.
//!
//! The border is a column of `│`, `┃` or `║` at the same character
//! position in at least `MIN_ROWS` rows; or of `|` (screen's, a plain
//! terminal's split), when the right pane holds a prompt and a command,
//! and no other `|`, as a table's columns do not. Rows without it are
//! blank in both panes (the text is read whole anyway). One pass over the
//! text to count, one to cut, one to build the panes: linear.

use std::collections::HashMap;
use std::ops::Range;

use super::wrap::BORDERS;

/// Rows that must show the border at one column.
const MIN_ROWS: usize = 3;

/// One pane's text, and where each of its bytes is in the screen's text
/// (one more entry, for its end).
pub(super) struct Pane {
    pub(super) text: String,
    from: Vec<usize>,
}

impl Pane {
    fn new() -> Pane {
        Pane {
            text: String::new(),
            from: Vec::new(),
        }
    }

    fn push(&mut self, text: &str, range: Range<usize>) {
        self.from.extend(range.clone());
        self.text.push_str(&text[range]);
    }

    fn newline(&mut self, at: usize) {
        self.from.push(at);
        self.text.push('\n');
    }

    /// `span` of the pane as spans of the screen's text, one per line of
    /// the pane it covers.
    pub(super) fn back(&self, span: Range<usize>) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut start = span.start;
        while start < span.end {
            let end = self.text[start..span.end]
                .find('\n')
                .map_or(span.end, |i| start + i);
            if end > start {
                out.push(self.from[start]..self.from[end - 1] + 1);
            }
            start = end + 1;
        }
        out
    }
}

/// The left and right panes of `text`, or none when no border splits it.
pub(super) fn split(text: &str) -> Vec<Pane> {
    if !may_hold_border(text) || !text.contains(BORDERS) {
        return Vec::new();
    }
    // Rows with a border at each character column (a border in the first
    // or last column is a box's side, not a split).
    let mut count: HashMap<usize, usize> = HashMap::new();
    for line in text.lines() {
        // Most rows hold no border: counting their characters is wasted.
        if !may_hold_border(line) {
            continue;
        }
        let last = line.chars().count().saturating_sub(1);
        for (col, c) in line.chars().enumerate() {
            if BORDERS.contains(&c) && col > 0 && col < last {
                *count.entry(col).or_default() += 1;
            }
        }
    }
    let Some((&column, _)) = count
        .iter()
        .filter(|(_, n)| **n >= MIN_ROWS)
        .max_by_key(|(col, n)| (**n, std::cmp::Reverse(**col)))
    else {
        return Vec::new();
    };
    // Each row: where it starts, its length without its line break, where
    // it ends, and where the border cuts it (its place, its length, and
    // whether it is `|`).
    let mut cuts = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let cut = body
            .char_indices()
            .nth(column)
            .filter(|(_, c)| BORDERS.contains(c));
        let cut = cut.map(|(i, c)| (i, c.len_utf8(), c == '|'));
        cuts.push((at, body.len(), at + line.len(), cut));
        at += line.len();
    }
    // A table's columns have more `|` to the right, and no prompt: judged
    // before the panes are built, as most texts with a `|` are no screen
    // split in two.
    let rights = || {
        cuts.iter()
            .filter_map(|&(at, len, _, cut)| cut.map(|(i, n, _)| &text[at + i + n..at + len]))
    };
    let ascii = cuts
        .iter()
        .any(|(.., cut)| cut.is_some_and(|(_, _, bar)| bar));
    let pane = !rights().any(|r| r.contains('|'))
        && rights()
            .any(|r| super::commands::prompt(r).is_some_and(|(_, command)| !command.is_empty()));
    if ascii && !pane {
        return Vec::new();
    }
    // A row without the border is the screen's text's alone: the panes
    // are only as long as the split rows.
    let (mut left, mut right) = (Pane::new(), Pane::new());
    for &(at, len, end, cut) in &cuts {
        if let Some((i, n, _)) = cut {
            left.push(text, at..at + i);
            right.push(text, at + i + n..at + len);
        }
        left.newline(end - 1);
        right.newline(end - 1);
    }
    left.from.push(text.len());
    right.from.push(text.len());
    vec![left, right]
}

/// Whether `text` holds a byte a border starts with (`|`, or the first
/// of the three the box-drawing ones share): one fast scan, for the rows
/// that cannot hold one.
fn may_hold_border(text: &str) -> bool {
    debug_assert!(
        BORDERS
            .iter()
            .all(|c| *c == '|' || c.to_string().as_bytes()[0] == 0xE2)
    );
    memchr::memchr2(b'|', 0xE2, text.as_bytes()).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screen_split_in_two_reads_as_two_texts() {
        let text = "a b │ $ cat x\nc d │ s3cr3t\ne f │ $\n";
        let panes = split(text);
        assert_eq!(panes[0].text, "a b \nc d \ne f \n");
        assert_eq!(panes[1].text, " $ cat x\n s3cr3t\n $\n");
        // Mapped back, a line at a time.
        let s = panes[1].text.find("s3cr3t").unwrap();
        let back = panes[1].back(s..s + 6);
        assert_eq!(back.len(), 1);
        assert_eq!(&text[back[0].clone()], "s3cr3t");
        let across = panes[0].back(0..panes[0].text.len());
        assert_eq!(across.len(), 3);
        assert_eq!(&text[across[1].clone()], "c d ");
    }

    #[test]
    fn a_box_or_a_few_borders_split_nothing() {
        assert!(split("│ a │\n│ b │\n│ c │\n").is_empty());
        assert!(split("a │ b\nc │ d\n").is_empty());
        assert!(split("plain text\n").is_empty());
    }
}
