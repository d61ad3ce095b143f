//! Secrets in tables: a column whose header names a secret, and its
//! cells, in aligned text or with separators.
//!
//! What it leaves to others: `key: value` forms (`pairs`).

use super::*;

/// A table's secret column.
#[derive(Clone, Copy)]
pub(super) enum Column {
    /// Cells split at `sep`: how many a row has, and which is the secret.
    Split {
        sep: char,
        cells: usize,
        index: usize,
    },
    /// Columns aligned with blanks (`NAME   USERNAME   PASSWORD`): where
    /// the secret column starts, in bytes of an ASCII header.
    Aligned { at: usize },
}

pub(super) enum Cell {
    /// The secret column's cell, inside its quotes.
    Value(Range<usize>),
    /// A rule between rows (`|----|`, `+---+`).
    Rule,
    /// Not a row of this table.
    Other,
}

impl Column {
    /// The secret column of a header line, if it is one: cells split by
    /// `|`, `│`, `,` or a tab, at least two, one naming a secret.
    pub(super) fn header(line: &str, names_secret: impl Fn(&str) -> bool) -> Option<Column> {
        let Some(sep) = ['|', '│', '\t', ',']
            .into_iter()
            .find(|&c| line.contains(c))
        else {
            return Column::aligned(line, names_secret);
        };
        let cells = split_cells(line, sep);
        if cells.len() < 2 || cells.len() > 64 {
            return None;
        }
        let index = cells.iter().position(|c| names_secret(&line[c.clone()]))?;
        Some(Column::Split {
            sep,
            cells: cells.len(),
            index,
        })
    }

    /// A header of three or more names aligned with two blanks or more.
    pub(super) fn aligned(line: &str, names_secret: impl Fn(&str) -> bool) -> Option<Column> {
        let cells = aligned_names(line)?;
        let cell = cells.iter().find(|c| names_secret(&line[(*c).clone()]))?;
        Some(Column::Aligned { at: cell.start })
    }

    pub(super) fn cell(&self, line: &str) -> Cell {
        // The next prompt ends a table.
        if super::super::commands::prompt(line).is_some() {
            return Cell::Other;
        }
        let (sep, count, index) = match *self {
            Column::Split { sep, cells, index } => (sep, cells, index),
            Column::Aligned { at } => return aligned_cell(line, at),
        };
        let t = line.trim();
        if !t.is_empty() && t.chars().all(|c| "-+|=:│─┼├┤ ".contains(c)) {
            return Cell::Rule;
        }
        let pieces = split_cells(line, sep);
        match pieces.get(index) {
            Some(r) if pieces.len() == count => {
                let piece = &line[r.clone()];
                let lead = piece.len() - piece.trim_start().len();
                let inner = piece.trim();
                let quoted = inner.len() >= 2
                    && (inner.starts_with('"') && inner.ends_with('"')
                        || inner.starts_with('\'') && inner.ends_with('\''));
                let q = usize::from(quoted);
                let v = r.start + lead + q..r.start + lead + inner.len() - q;
                if v.is_empty() {
                    Cell::Rule
                } else {
                    Cell::Value(v)
                }
            }
            _ => Cell::Other,
        }
    }
}

/// The cells of a header of three or more names aligned with two blanks
/// or more (`NAME   USERNAME   PASSWORD`); a row of values
/// (`db-credentials  Opaque  2`) is none.
pub(super) fn aligned_names(line: &str) -> Option<Vec<Range<usize>>> {
    // A header is names only (`NAME  TYPE  DATA`): a row of values
    // (`db-credentials  Opaque  2`) is none. Its cells and the blanks
    // between them are letters, blanks, `_` and `-`, which most lines are
    // not: they are rejected in one pass, before any cell is cut.
    let name_byte = |b: &u8| b.is_ascii_alphabetic() || b" _-".contains(b);
    if line.len() > 512 || !line.as_bytes().iter().all(name_byte) || !line.contains("  ") {
        return None;
    }
    let mut cells = Vec::new();
    let mut start = None;
    let bytes = line.as_bytes();
    for i in 0..=bytes.len() {
        let gap = i == bytes.len() || (bytes[i] == b' ' && bytes.get(i + 1) == Some(&b' '));
        match (start, gap) {
            (None, false) if bytes[i] != b' ' => start = Some(i),
            (Some(s), true) => {
                cells.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    (cells.len() >= 3).then_some(cells)
}

/// An aligned header that names neither a secret nor a value
/// (`NAME  DIGEST  CREATED AT`, `fly secrets list`).
pub(super) fn plain_header(line: &str) -> bool {
    aligned_names(line).is_some_and(|cells| {
        cells.iter().all(|c| {
            let name = line[c.clone()].to_ascii_lowercase();
            ![
                "value", "data", "content", "secret", "password", "token", "key",
            ]
            .iter()
            .any(|w| name.contains(w))
        })
    })
}

/// The separator and cell count of a row split by `|` or `│`.
pub(super) fn row_shape(line: &str) -> Option<(char, usize)> {
    let sep = ['|', '│'].into_iter().find(|&c| line.contains(c))?;
    let n = split_cells(line, sep).len();
    (n >= 2).then_some((sep, n))
}

/// A rule between a table's rows (`+----+`, `|----|`).
pub(super) fn is_rule(line: &str) -> bool {
    line.trim().chars().all(|c| "-+|=:│─┼├┤ ".contains(c))
}

/// The word of `line` that starts at `at`, the column of a table aligned
/// with blanks; a row whose word does not start there ends the table.
pub(super) fn aligned_cell(line: &str, at: usize) -> Cell {
    let b = line.as_bytes();
    let starts = at < b.len() && b[at] != b' ' && (at == 0 || b[at - 1] == b' ');
    if !line.is_char_boundary(at) || !starts {
        return Cell::Other;
    }
    let end = line[at..]
        .find(char::is_whitespace)
        .map_or(line.len(), |e| at + e);
    Cell::Value(at..end)
}

/// The cells of a row, split at `sep`; in CSV (`,`) a double-quoted cell
/// holds commas and doubled quotes (`"a,""b"""`).
pub(super) fn split_cells(line: &str, sep: char) -> Vec<Range<usize>> {
    let mut cells = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' if sep == ',' => quoted = !quoted,
            c if c == sep && !quoted => {
                cells.push(start..i);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    cells.push(start..line.len());
    cells
}

/// `  root:password` under a secrets key (cloud-init's `chpasswd` list):
/// the part after the colon, when no blank follows the colon (`expire:
/// false` is YAML).
pub(super) fn name_and_secret(line: &str) -> Option<Range<usize>> {
    let t = line.trim_start().trim_start_matches("- ");
    let (name, secret) = t.split_once(':')?;
    let plain_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || "._-@".contains(c));
    let secret = secret.trim_end();
    if !plain_name || secret.is_empty() || secret.starts_with(char::is_whitespace) {
        return None;
    }
    let start = line.len() - t.len() + name.len() + 1;
    is_secret_value(secret, false).then_some(start..start + secret.len())
}

/// Whether the value at `start` of `line` stood in quotes.
pub(super) fn quoted_at(line: &str, start: usize) -> bool {
    line[..start].ends_with(['"', '\'', '`'])
}

/// `1) "requirepass"`, as redis-cli numbers a reply's items: the span of
/// the item's text.
pub(super) fn numbered_item(line: &str) -> Option<Range<usize>> {
    let t = line.trim_start();
    let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let r = t[digits..].strip_prefix(") \"")?;
    let inner = r.strip_suffix('"')?;
    let start = line.len() - r.len();
    (digits > 0).then_some(start..start + inner.len())
}
