//! What walissh saw typed into the shell: the lines ended by Enter, which
//! the shell's marks must fit before walissh believes them.
//!
//! Anything the interactive shell runs can print a mark with the session's
//! nonce: a line the user types, a file they source. A mark is only text
//! on the output side; walissh alone sees the input side. So a question
//! (Q) is believed only for a line that was typed here and ended with
//! Enter, with the same text, and a command start (C) only after an Enter
//! that no earlier mark took. The input side is the keys walissh forwarded
//! to the shell, the client's and the agent's own.
//!
//! The line is followed through the simple edits (Backspace, Ctrl-U,
//! Ctrl-C); after any other control key (arrows, Tab completion, history
//! search) its text is unknown and the caller checks the screen's echo
//! instead. Everything is bounded: a line of 4 KiB, the last 16 lines.
//! What it leaves to others: reading marks (`marks`), deciding what a mark
//! that does not fit costs (`Terminal`).

use std::collections::VecDeque;

/// Bytes of one line followed; beyond, its text is unknown.
const MAX_LINE: usize = 4096;
/// Lines kept, newest last; older ones are forgotten.
const MAX_LINES: usize = 16;

/// One line ended with Enter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entered {
    /// Its text, when only simple edits made it.
    pub(crate) text: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Typed {
    line: Vec<u8>,
    /// A key whose effect on the line walissh does not model was typed.
    unknown: bool,
    /// An escape sequence being read: one of walissh's own keys, or
    /// another (an edit walissh does not follow).
    escape: Vec<u8>,
    /// Bytes of a new nonce still to come (after `ROTATE`): not keys.
    nonce_left: usize,
    entered: VecDeque<Entered>,
    /// Keys forwarded since [`Typed::quiet`] last asked.
    since_asked: usize,
    /// Lines ended with Enter, ever.
    lines: u64,
}

/// A bracketed paste's markers: the text between them is literal.
const PASTE_START: &[u8] = b"\x1b[200~";
const PASTE_END: &[u8] = b"\x1b[201~";
/// The sequences walissh itself types, and what each does to the line.
const OWN_KEYS: [&[u8]; 4] = [PASTE_START, PASTE_END, super::ACCEPT, super::ROTATE];
/// Hex digits of a nonce given after `ROTATE`.
const NONCE_LEN: usize = 32;

impl Typed {
    /// Keys forwarded to the shell.
    pub(crate) fn keys(&mut self, data: &[u8]) {
        self.since_asked = self.since_asked.saturating_add(data.len());
        for &b in data {
            if self.nonce_left > 0 {
                self.nonce_left -= 1;
                continue;
            }
            if !self.escape.is_empty() || b == 0x1b {
                self.escape.push(b);
                let e = self.escape.as_slice();
                if e == super::ACCEPT {
                    self.enter();
                } else if e == super::ROTATE {
                    self.nonce_left = NONCE_LEN;
                } else if OWN_KEYS.contains(&e) {
                    // The paste's markers: the text between is literal.
                } else if OWN_KEYS.iter().any(|k| k.starts_with(e)) {
                    continue;
                } else {
                    // Arrows, function keys, Alt-anything.
                    self.unknown = true;
                }
                self.escape.clear();
                continue;
            }
            match b {
                b'\r' | b'\n' => self.enter(),
                0x7f | 0x08 => self.rub_out(),
                // Ctrl-U and Ctrl-C empty the line.
                0x15 | 0x03 => {
                    self.line.clear();
                    self.unknown = false;
                }
                // Ctrl-L clears the screen and redraws the line as it is.
                0x0c => {}
                0x00..0x20 => self.unknown = true,
                _ if self.line.len() < MAX_LINE => self.line.push(b),
                _ => self.unknown = true,
            }
        }
    }

    fn enter(&mut self) {
        let text = (!self.unknown).then(|| String::from_utf8_lossy(&self.line).into_owned());
        if self.entered.len() == MAX_LINES {
            self.entered.pop_front();
        }
        self.entered.push_back(Entered { text });
        self.lines += 1;
        self.line.clear();
        self.unknown = false;
    }

    /// Lines ended with Enter since the shell started.
    pub(crate) fn lines(&self) -> u64 {
        self.lines
    }

    /// The text of the last line ended with Enter, when only simple edits
    /// made it.
    pub(crate) fn last_text(&self) -> Option<String> {
        self.entered.back()?.text.clone()
    }

    /// Backspace: the last character, not the last byte.
    fn rub_out(&mut self) {
        while let Some(b) = self.line.pop() {
            if b & 0xc0 != 0x80 {
                break;
            }
        }
    }

    /// Whether nothing was typed since the last time this was asked, and
    /// the line at the prompt is empty: a line walissh types now would
    /// not join the user's.
    pub(crate) fn quiet(&mut self) -> bool {
        std::mem::take(&mut self.since_asked) == 0 && self.line.is_empty()
    }

    /// A command that starts a shell began, having taken its Enter: the
    /// keys typed so far were its line, not keys typed ahead at the new
    /// shell's prompt, when no other came after that Enter. (Its prompt
    /// may come in the same read as the command's start, the first time
    /// `quiet` is asked; on a loaded host it did, and the shell went
    /// unfollowed.)
    pub(crate) fn line_taken(&mut self) {
        if self.entered.is_empty() && self.line.is_empty() {
            self.since_asked = 0;
        }
    }

    /// A command started: it took the oldest Enter not yet taken. `false`
    /// if there was none.
    pub(crate) fn take_enter(&mut self) -> bool {
        self.entered.pop_front().is_some()
    }

    /// A command line ended without a command (an empty line): it took
    /// the oldest Enter if that ended an empty line.
    pub(crate) fn take_empty(&mut self) {
        if self
            .entered
            .front()
            .is_some_and(|e| e.text.as_deref().is_some_and(|t| t.trim().is_empty()))
        {
            self.entered.pop_front();
        }
    }

    /// A question with `text` was reported: the line typed with that text,
    /// or, when `echoed` says the screen shows it, a line whose text is
    /// unknown. Taken with every older line. `false` if there is none.
    pub(crate) fn take_question(&mut self, text: &str, echoed: impl Fn() -> bool) -> bool {
        let exact = self
            .entered
            .iter()
            .position(|e| e.text.as_deref().is_some_and(|t| same(t, text)));
        let found = exact.or_else(|| {
            let unknown = self.entered.iter().position(|e| e.text.is_none())?;
            echoed().then_some(unknown)
        });
        match found {
            Some(at) => {
                self.entered.drain(..=at);
                true
            }
            None => false,
        }
    }
}

/// Whether a reported question is the line typed: its end (a program may
/// have read the start of a line typed ahead, as `read -n1` does), with
/// the control characters and outer blanks the shells drop.
fn same(typed: &str, reported: &str) -> bool {
    let clean = |s: &str| -> String {
        s.chars()
            .filter(|c| !c.is_control())
            .collect::<String>()
            .trim()
            .to_string()
    };
    let reported = clean(reported);
    !reported.is_empty() && clean(typed).ends_with(&reported)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(keys: &[u8]) -> Typed {
        let mut t = Typed::default();
        t.keys(keys);
        t
    }

    #[test]
    fn a_question_fits_only_the_line_typed() {
        let mut t = typed(b"? why\r");
        assert!(!t.take_question("? evil", || false));
        assert!(t.take_question("? why", || false));
        // Taken: the same text once more does not fit.
        assert!(!t.take_question("? why", || true));
    }

    #[test]
    fn simple_edits_are_followed() {
        let mut t = typed("? wgh\x7f\x7fhy \u{b0}\x7fC\r".as_bytes());
        assert!(t.take_question("? why C", || false));
        let mut t = typed(b"ls\x15? ok\r");
        assert!(t.take_question("? ok", || false));
        let mut t = typed(b"\x1b[200~? pasted\x1b[201~\r");
        assert!(t.take_question("? pasted", || false));
        // Typed ahead: a program read the `x`, the shell got the rest.
        let mut t = typed(b"x? second\r");
        assert!(t.take_question("? second", || false));
    }

    #[test]
    fn walissh_s_own_keys_are_read_as_what_they_do() {
        let mut t = typed(b"\x1b[212~0123456789abcdef0123456789abcdef\x05\x15");
        t.keys(b"\x1b[200~echo \xc2\xb0 !!\x1b[201~\x1b[210~");
        assert_eq!(
            t.entered.pop_front(),
            Some(Entered {
                text: Some("echo \u{b0} !!".into())
            })
        );
    }

    #[test]
    fn unknown_edits_need_the_echo() {
        let mut t = typed(b"? wy\x1b[Dh\r");
        assert!(!t.take_question("? why", || false));
        assert!(t.take_question("? why", || true));
    }

    #[test]
    fn each_command_start_takes_an_enter() {
        let mut t = typed(b"ls\rpwd\r");
        assert!(t.take_enter());
        assert!(t.take_enter());
        assert!(!t.take_enter());
        // Split across reads, as keys come.
        let mut t = typed(b"l");
        t.keys(b"s");
        assert!(!t.take_enter());
        t.keys(b"\r");
        assert!(t.take_enter());
    }

    #[test]
    fn it_stays_bounded() {
        let mut t = typed(&[b'x'; 10 * MAX_LINE]);
        t.keys(&b"\r".repeat(4 * MAX_LINES));
        assert_eq!(t.entered.len(), MAX_LINES);
        assert!(t.line.capacity() <= 2 * MAX_LINE);
    }
}
