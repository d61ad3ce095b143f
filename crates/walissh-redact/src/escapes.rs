//! Text as a reader sees it: terminal escape sequences and control
//! characters taken out, for every text bound for the model (a screen's
//! context, a command's captured output, anything the redactor reads).
//! One reader, streaming (`Reader`, fed in chunks, for a command's
//! output as it comes) or whole (`plain`), so what a capture keeps and
//! what the redactor judges are read alike.
//!
//! What is taken out: CSI sequences (`ESC [` … final byte, and the one-char
//! C1 form), OSC, DCS, SOS, PM and APC strings (to BEL or `ESC \`, or to
//! the end of a text cut short), two-character `ESC x` sequences, C0
//! controls but tab and newline, and characters that show nothing
//! (zero-width ones, bidi controls, Unicode tags: see `invisible`). CAN
//! and SUB cancel a sequence, and a line break ends a control sequence cut
//! short. A carriage return ends a line: `\r\n` is one newline, a lone
//! `\r` (a progress line redrawn) is one too, so two words it separated
//! stay apart. One pass, no backtracking: linear in the text, whatever it
//! holds.
//!
//! It errs toward keeping text, not toward drawing what a terminal draws:
//! a terminal (and `vte`, which `vt100` and the prompt probe read with)
//! takes the `p` after `ESC [ 1 ; 3` and a line break as the sequence's
//! end, and `password=` would reach the detectors as `assword=` (found by
//! the fuzz target). What the user's terminal is sent is another matter:
//! `terminal::sanitize` decides that, sequence by sequence, as the
//! terminal will read it.

use std::borrow::Cow;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Text,
    Esc,
    Csi,
    /// An OSC, DCS, SOS, PM or APC string, to its terminator.
    Str,
    StrEsc,
    /// After a `\r`: a `\n` next is the same line end.
    Cr,
}

/// Characters that show nothing: zero-width ones, the soft hyphen, bidi
/// controls, the BOM and Unicode tags. Inside a key they hide it from the
/// detectors (`pass\u{200b}word=…` reads as `password=…` on a screen), and
/// tags carry text the user never sees to the model.
pub(crate) fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{61c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

/// The characters of `text` that are not ASCII: the ASCII bytes between
/// them are skipped, not decoded.
pub(crate) fn non_ascii(text: &str) -> impl Iterator<Item = char> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let skip = text.as_bytes()[at..].iter().position(|b| !b.is_ascii())?;
        let c = text[at + skip..].chars().next()?;
        at += skip + c.len_utf8();
        Some(c)
    })
}

/// The reader, fed in chunks: a sequence, a line end or a character may
/// be split between two.
#[derive(Clone, Copy, Debug, Default)]
pub struct Reader {
    state: State,
    /// The start of a character the last chunk cut (at most 3 bytes).
    carry: [u8; 4],
    carried: usize,
}

impl Reader {
    /// Reads `bytes`, appending what is kept to `out`. Bytes that are not
    /// UTF-8 are read as U+FFFD, as a terminal reads them.
    pub fn feed(&mut self, bytes: &[u8], out: &mut String) {
        let mut bytes = bytes;
        if self.carried > 0 {
            // The cut character, completed by the first bytes of this
            // chunk (and what follows it in them, when that is text).
            let old = self.carried;
            let take = (4 - old).min(bytes.len());
            let mut joint = self.carry;
            joint[old..old + take].copy_from_slice(&bytes[..take]);
            self.carried = 0;
            let used = match std::str::from_utf8(&joint[..old + take]) {
                Ok(text) => {
                    self.read(text, out);
                    take
                }
                Err(e) if e.valid_up_to() > 0 => {
                    let valid = e.valid_up_to();
                    self.read(
                        std::str::from_utf8(&joint[..valid]).unwrap_or_default(),
                        out,
                    );
                    valid - old
                }
                Err(e) => match e.error_len() {
                    Some(bad) => {
                        self.read("\u{fffd}", out);
                        bad.saturating_sub(old)
                    }
                    // Still cut: this chunk was shorter than the rest of it.
                    None => {
                        self.carry = joint;
                        self.carried = old + take;
                        return;
                    }
                },
            };
            bytes = &bytes[used..];
        }
        let mut at = 0;
        while at < bytes.len() {
            match std::str::from_utf8(&bytes[at..]) {
                Ok(text) => {
                    self.read(text, out);
                    return;
                }
                Err(e) => {
                    let valid = at + e.valid_up_to();
                    // Valid up to there: no error can come of it.
                    let text = std::str::from_utf8(&bytes[at..valid]).unwrap_or_default();
                    self.read(text, out);
                    match e.error_len() {
                        Some(bad) => {
                            self.read("\u{fffd}", out);
                            at = valid + bad;
                        }
                        None => {
                            let rest = &bytes[valid..];
                            self.carry[..rest.len()].copy_from_slice(rest);
                            self.carried = rest.len();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The stream ended: a character it cut reads as U+FFFD, as
    /// `String::from_utf8_lossy` reads it.
    pub fn finish(&mut self, out: &mut String) {
        if std::mem::take(&mut self.carried) > 0 {
            self.read("\u{fffd}", out);
        }
    }

    /// Reads whole characters.
    fn read(&mut self, text: &str, out: &mut String) {
        let mut at = 0;
        while at < text.len() {
            // In text, a run of what is kept as it is goes over whole.
            if matches!(self.state, State::Text) {
                let run = text.as_bytes()[at..]
                    .iter()
                    .position(|b| !plain_ascii(b))
                    .unwrap_or(text.len() - at);
                out.push_str(&text[at..at + run]);
                at += run;
            }
            let Some(c) = text[at..].chars().next() else {
                break;
            };
            at += c.len_utf8();
            self.state = match (self.state, c) {
                // CAN and SUB cancel any sequence (ECMA-48).
                (State::Esc | State::Csi | State::Str | State::StrEsc, '\x18' | '\x1a') => {
                    State::Text
                }
                // A line break ends a control sequence cut short: its
                // parameters never span lines, and what follows is text.
                (State::Esc | State::Csi, '\n' | '\r') => {
                    out.push('\n');
                    if c == '\r' { State::Cr } else { State::Text }
                }
                (State::Esc, '[') => State::Csi,
                (State::Esc, ']' | 'P' | 'X' | '^' | '_') => State::Str,
                // `ESC ( B` and the like: one more character.
                (State::Esc, ' '..='/') => State::Esc,
                (State::Esc, _) => State::Text,
                (State::Csi, '\u{40}'..='\u{7e}') => State::Text,
                (State::Csi, _) => State::Csi,
                (State::Str, '\x07' | '\u{9c}') => State::Text,
                (State::Str, '\x1b') => State::StrEsc,
                (State::Str, _) => State::Str,
                (State::StrEsc, '\\') => State::Text,
                (State::StrEsc, _) => State::Str,
                (State::Text | State::Cr, '\x1b') => State::Esc,
                (State::Text | State::Cr, '\u{9b}') => State::Csi,
                (State::Text | State::Cr, '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}') => {
                    State::Str
                }
                (State::Cr, '\n') => State::Text,
                // NUL separates `/proc/*/environ`'s variables: a line break
                // keeps them apart (`HOME=/root` then `DB_PASSWORD=…`).
                (State::Text | State::Cr, '\0') => {
                    out.push('\n');
                    State::Text
                }
                (_, '\r') => {
                    out.push('\n');
                    State::Cr
                }
                (_, c) if keep(c) => {
                    out.push(c);
                    State::Text
                }
                (_, _) => State::Text,
            };
        }
    }
}

/// Kept as it is: printable (and not invisible), a line break or a tab.
fn keep(c: char) -> bool {
    ((c >= ' ' && c != '\x7f' && !('\u{80}'..'\u{a0}').contains(&c)) || c == '\n' || c == '\t')
        && !invisible(c)
}

/// ASCII kept as it is: printable, a line break or a tab.
fn plain_ascii(b: &u8) -> bool {
    (b' '..0x7f).contains(b) || matches!(b, b'\n' | b'\t')
}

/// `text` without escape sequences, control characters and invisible
/// ones; borrowed when it had none.
pub fn plain(text: &str) -> Cow<'_, str> {
    // ASCII a byte at a time, and only the other characters decoded.
    let ascii_kept = |b: &u8| plain_ascii(b) || !b.is_ascii();
    if text.as_bytes().iter().all(ascii_kept) && non_ascii(text).all(keep) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    Reader::default().read(text, &mut out);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fed a byte at a time, or in any two pieces, the reader keeps what
    /// it keeps of the whole.
    #[test]
    fn chunks_read_as_the_whole() {
        let texts = [
            "a\x1b[01;3\npassword=x",
            "one\r\ntwo\rthree\x08\x00",
            "ok\x1b]0;title\x07 密码：ｐａ\u{200b}ss\r",
            "a\u{9b}31mb\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\c",
        ];
        for text in texts {
            let whole = plain(text).into_owned();
            let bytes = text.as_bytes();
            for cut in 0..=bytes.len() {
                let (mut r, mut out) = (Reader::default(), String::new());
                r.feed(&bytes[..cut], &mut out);
                r.feed(&bytes[cut..], &mut out);
                assert_eq!(out, whole, "{text:?} cut at {cut}");
            }
            let (mut r, mut out) = (Reader::default(), String::new());
            for b in bytes {
                r.feed(std::slice::from_ref(b), &mut out);
            }
            assert_eq!(out, whole, "{text:?} a byte at a time");
        }
    }

    /// Bytes that are not UTF-8 read as `String::from_utf8_lossy` reads
    /// them, however the stream is cut.
    #[test]
    fn bytes_that_are_not_utf8_read_as_replacement_characters() {
        let bytes = b"a\xffb\xe5\xaf\x86c\xe5x\xf0\x9f\x98\x80\xf0\x9f\x98 \xed\xa0\x80\xc3";
        let whole = plain(&String::from_utf8_lossy(bytes)).into_owned();
        for cut in 0..=bytes.len() {
            for second in cut..=bytes.len() {
                let (mut r, mut out) = (Reader::default(), String::new());
                r.feed(&bytes[..cut], &mut out);
                r.feed(&bytes[cut..second], &mut out);
                r.feed(&bytes[second..], &mut out);
                r.finish(&mut out);
                assert_eq!(out, whole, "cut at {cut} and {second}");
            }
        }
        let (mut r, mut out) = (Reader::default(), String::new());
        r.feed(b"a\xffb\xe5\xaf", &mut out);
        r.feed(b"\x86c\xe5", &mut out);
        r.feed(b"x", &mut out);
        assert_eq!(out, "a\u{fffd}b密c\u{fffd}x");
    }
}
