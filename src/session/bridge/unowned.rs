//! Lines typed at prompts walissh does not own (a shell without the
//! integration, one a command shows: see `nested::may_show_a_shell`):
//! read off the screen model, since no mark says what they are. Each line
//! the keys end on what looks like a shell's prompt is audited as a
//! command, or, when it is a question, refused (its line end taken out,
//! so the shell runs nothing). A heuristic, documented as such.
//!
//! What it leaves to others: the screen model (`terminal::screen`), what
//! a prompt looks like (`terminal::prompt`), the pumps' loop (`bridge`).

use bytes::Bytes;

use super::Pumps;
use crate::session::audit_rows;
use crate::terminal::screen::ScreenView;

impl Pumps<'_> {
    /// For prompts walissh does not own (a shell without integration, one
    /// a command shows: see `nested::may_show_a_shell`): each line the
    /// keys end (Enter, or Ctrl-J) on what looks like a shell's prompt is
    /// audited as a command (no exit status, no directory: the screen does
    /// not say), or, when it is a question (it starts with an `[ai]
    /// prefixes` entry), refused: its line end is taken out of the keys
    /// returned, so the shell runs nothing (the line stays, to be edited or
    /// cleared), and `true` says the user must be told. A heuristic,
    /// documented as such: it reads what the screen shows, so input typed
    /// with echo off is never seen, and it can mistake a program's prompt
    /// for a shell's.
    ///
    /// `line` holds the keys typed on the line so far, over all chunks: the
    /// client may send a line in several pieces, and the shell's echo of
    /// the first ones may or may not be on the screen yet when Enter comes.
    pub(super) async fn off_screen(
        &self,
        typed: Bytes,
        line: &mut Typing,
        depth: usize,
    ) -> (Bytes, bool) {
        let Some(screen) = self.screen else {
            return (typed, false);
        };
        if line.depth != depth {
            *line = Typing {
                depth,
                ..Typing::default()
            };
        }
        // Where the line ends walissh takes out are: most chunks have none,
        // and pass on as they came.
        let mut dropped = Vec::new();
        // The screen, asked once a chunk: later lines of one chunk are
        // typed ahead of what it shows.
        let mut snap = None;
        let mut from = 0;
        while let Some(end) = memchr::memchr3(b'\r', b'\n', CTRL_O, &typed[from..]) {
            let end = from + end;
            line.add(&typed[from..end]);
            let keys = Line::of(std::mem::take(&mut line.keys));
            let first = snap.is_none();
            if first && !keys.is_empty() {
                snap = Some(screen.view().await);
            }
            let prefixes = &self.conn.live.agent.prefixes;
            match keys.judge(snap.as_ref(), first, line.refused, prefixes) {
                Judged::Question => {
                    // The shell still holds the line: so does walissh.
                    dropped.push(end);
                    line.refused = true;
                    line.keys = keys.keys;
                }
                Judged::Command(command) => {
                    audit_rows::screen_command(&self.conn.bastion.audit, self.ids, command, depth)
                        .await;
                    line.refused = false;
                }
                Judged::Nothing => line.refused = false,
            }
            from = end + 1;
        }
        line.add(&typed[from..]);
        if matches!(&snap, Some(Some(v)) if v.stale) {
            // Bulk output outran the model: start it afresh for next time.
            screen.prompt();
        }
        if dropped.is_empty() {
            return (typed, false);
        }
        // The pieces between them, in order.
        let mut kept = Vec::with_capacity(typed.len());
        let mut start = 0;
        for at in dropped {
            kept.extend_from_slice(&typed[start..at]);
            start = at + 1;
        }
        kept.extend_from_slice(&typed[start..]);
        (Bytes::from(kept), true)
    }
}

/// What the user is told of a question typed at a prompt walissh does not
/// own.
pub(super) const UNOWNED_QUESTION: &str = "questions are asked only at the prompt of a shell walissh \
    integrated (bash, zsh), and this prompt is not one: the line was not run (it is still \
    there: edit it, or clear it with Ctrl-C)";

/// Ctrl-O: bash's and zsh's "run this line and fetch the next" ends a
/// line too.
const CTRL_O: u8 = 0x0f;

/// The line being typed at a prompt walissh does not own, over the
/// client's chunks: the client may send a line in several pieces, and
/// the shell's echo of the first ones may or may not be on the screen yet
/// when Enter comes.
#[derive(Default)]
pub(super) struct Typing {
    keys: Vec<u8>,
    /// Its last Enter was refused: the shell still holds the line, and the
    /// screen shows walissh's notice where it was.
    refused: bool,
    /// The depth of the prompt it is typed at: another one starts afresh.
    depth: usize,
}

impl Typing {
    /// Keys typed on the line. Ctrl-C throws the line away, as the shell
    /// does.
    fn add(&mut self, keys: &[u8]) {
        /// Keys kept for one line, at most: past this it is not read.
        const LINE_MAX: usize = 4096;
        let keys = match memchr::memrchr(0x03, keys) {
            Some(at) => {
                self.keys.clear();
                self.refused = false;
                &keys[at + 1..]
            }
            None => keys,
        };
        self.keys.extend_from_slice(keys);
        if self.keys.len() > LINE_MAX {
            // Not text: the line is judged by the screen alone.
            self.keys.clear();
            self.keys.push(0);
        }
    }
}

/// The keys of one line typed at a prompt walissh does not own.
struct Line {
    keys: Vec<u8>,
    /// The keys as text, when they only add text (no edit, no control).
    text: Option<String>,
}

/// What becomes of a line.
enum Judged {
    /// A question: refused.
    Question,
    /// A command, read off the prompt's line: audited.
    Command(String),
    Nothing,
}

impl Line {
    fn of(keys: Vec<u8>) -> Line {
        let text = std::str::from_utf8(&keys)
            .ok()
            .filter(|t| !t.chars().any(char::is_control))
            .map(str::to_string);
        Line { keys, text }
    }

    fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Judges the line by `snap`, the screen when the chunk's first line
    /// ended (`None`: not asked; `Some(None)`: the model is gone). Only the
    /// `first` line of a chunk is read off the screen: the others were
    /// typed ahead of it; nor is a line whose last Enter was `refused`
    /// (the screen shows the notice there). Where the screen cannot say,
    /// the keys decide, and keys that cannot say (edited past following)
    /// refuse a line that was refused before: a question reaching a shell
    /// runs as a glob, and a program at a prompt walissh does not own
    /// reading a line that starts with `?` is rarer.
    fn judge(
        &self,
        snap: Option<&Option<ScreenView>>,
        first: bool,
        refused: bool,
        prefixes: &[String],
    ) -> Judged {
        if self.is_empty() {
            return Judged::Nothing;
        }
        let asked = |t: &str| prefixes.iter().any(|p| t.starts_with(p.as_str()));
        // What the keys say: a question, not one, or (edited) unknown.
        let typed = match &self.text {
            Some(text) => Some(asked(text)),
            None => self.since_line_start(&asked),
        };
        let by_keys = match typed {
            Some(true) => Judged::Question,
            None if refused => Judged::Question,
            _ => Judged::Nothing,
        };
        let Some(Some(view)) = snap.filter(|s| s.as_ref().is_some_and(|v| !v.stale)) else {
            return by_keys;
        };
        if view.alternate {
            return Judged::Nothing;
        }
        if !first || refused {
            return by_keys;
        }
        let Some(text) = &self.text else {
            // After an edit (an arrow, Tab, Home) the line is what the
            // screen shows, if its echo has come back.
            let line = &view.cursor_line;
            let Some(end) = crate::terminal::prompt::end(line) else {
                return Judged::Nothing;
            };
            return match asked(line[end..].trim_start()) || typed == Some(true) {
                true => Judged::Question,
                false => Judged::Nothing,
            };
        };
        // Keys that only add text are joined to what the screen shows.
        match crate::terminal::prompt::command(&on_screen(&view.cursor_line, text)) {
            Some(c) if asked(&c) => Judged::Question,
            Some(c) => Judged::Command(c),
            None => Judged::Nothing,
        }
    }

    /// What edited keys say of the line's start: the text typed after the
    /// last key that takes the cursor to the line's start (Ctrl-A, Ctrl-U,
    /// Home), or from the first key, is a question or not; `None` when
    /// keys after it rub text out or move the cursor (that text is then
    /// unknown).
    fn since_line_start(&self, asked: &impl Fn(&str) -> bool) -> Option<bool> {
        const LINE_START: [&[u8]; 6] = [
            b"\x01", b"\x15", b"\x1b[H", b"\x1bOH", b"\x1b[1~", b"\x1b[7~",
        ];
        let keys = &self.keys;
        let start = LINE_START
            .iter()
            .filter_map(|k| memchr::memmem::rfind(keys, k).map(|at| at + k.len()))
            .max()
            .unwrap_or(0);
        let after = &keys[start..];
        // Only text after it: Backspace, Ctrl-W, arrows make it unknown.
        if after.iter().any(|&b| b < 0x20 || b == 0x7f) {
            return None;
        }
        // A prefix is short: at most 256 bytes are read.
        Some(asked(&String::from_utf8_lossy(
            &after[..after.len().min(256)],
        )))
    }
}

/// The line a shell shows once `keys` (printable ASCII) are typed at the
/// cursor's line `shown`, whose end may already echo the first of them:
/// the longest end of `shown` that begins `keys` is taken as that echo.
fn on_screen(shown: &str, keys: &str) -> String {
    let echoed = (0..=keys.len().min(shown.len()))
        .rev()
        .find(|&k| keys.is_char_boundary(k) && shown.ends_with(&keys[..k]))
        .unwrap_or(0);
    format!("{}{keys}", &shown[..shown.len() - echoed])
}

#[cfg(test)]
mod tests {
    use super::{Judged, Line, on_screen};
    use crate::terminal::screen::ScreenView;

    /// A line typed as a question is refused wherever the screen cannot
    /// say what the line is (a later line of a chunk, a stale or gone
    /// model); in a full-screen program nothing is; at a program's own
    /// prompt it passes; at a shell's, read off the screen, it is refused
    /// whatever edits made it.
    #[test]
    fn lines_at_unowned_prompts_are_judged_by_the_screen() {
        let prefixes = ["?".to_string(), "ai:".to_string()];
        let view = |line: &str, alternate: bool, stale: bool| ScreenView {
            cursor_line: line.into(),
            alternate,
            stale,
            ..ScreenView::default()
        };
        let judged = |keys: &str, snap: Option<ScreenView>, first: bool, refused: bool| {
            Line::of(keys.as_bytes().to_vec()).judge(Some(&snap), first, refused, &prefixes)
        };
        let judge =
            |keys: &str, snap: Option<ScreenView>, first: bool| judged(keys, snap, first, false);
        let question = |j: Judged| matches!(j, Judged::Question);
        assert!(question(judge("? x", Some(view("$ ", false, false)), true)));
        assert!(question(judge(
            "? ça",
            Some(view("$ ? ça", false, false)),
            true
        )));
        assert!(question(judge("? x", Some(view("", false, false)), false)));
        assert!(question(judge("? x", Some(view("", false, true)), true)));
        assert!(question(judge("? x", None, true)));
        // Home, then `? ` before a command: the screen's line is a
        // question, and so are the keys before its echo is back.
        let edited = "echo RAN\x01? ";
        assert!(question(judge(
            edited,
            Some(view("$ ? echo RAN", false, false)),
            true
        )));
        assert!(question(judge(
            edited,
            Some(view("$ ", false, false)),
            true
        )));
        assert!(question(judge(
            "x\x1b[H? ",
            Some(view("$ x", false, false)),
            true
        )));
        assert!(question(judge(
            "x\x1bOHai: ",
            Some(view("$ x", false, false)),
            true
        )));
        // A `?` inside a line edited with an arrow is a glob, not a question.
        let glob = judge("ls fil\x1b[D?", Some(view("$ ls fil?", false, false)), true);
        assert!(!question(glob));
        assert!(!question(judge(
            "? x",
            Some(view("mysql> ", false, false)),
            true
        )));
        assert!(!question(judge("?x", Some(view("~ ", true, false)), true)));
        let ls = judge("ls -l", Some(view("$ ", false, false)), true);
        assert!(matches!(ls, Judged::Command(c) if c == "ls -l"));
        assert!(matches!(
            judge("", Some(view("$ ? x", false, false)), true),
            Judged::Nothing
        ));
        // A line refused before is refused again whatever the screen now
        // shows (the notice), and so is one edited past following; after
        // Ctrl-U, what follows is the line.
        let below_the_notice = || Some(view("", false, false));
        assert!(question(judged("? x", below_the_notice(), true, true)));
        assert!(question(judged("? xls", below_the_notice(), true, true)));
        assert!(question(judged(
            "? x\x7f\x7f\x7fls",
            below_the_notice(),
            true,
            true
        )));
        assert!(!question(judged(
            "? x\x15ls",
            below_the_notice(),
            true,
            true
        )));
        assert!(!question(judge(
            "? x\x15ls",
            Some(view("$ ls", false, false)),
            true
        )));
    }

    /// A line typed at an unowned prompt: Ctrl-C throws it away, as the
    /// shell does, and it is bounded.
    #[test]
    fn ctrl_c_ends_a_line_being_typed() {
        let mut t = super::Typing::default();
        t.add(b"? x");
        t.refused = true;
        t.add(b"\x03ls");
        assert_eq!(t.keys, b"ls");
        assert!(!t.refused);
        t.add(&[b'a'; 5000]);
        assert_eq!(t.keys, [0]);
    }

    #[test]
    fn keys_echoed_already_are_not_counted_twice() {
        let keys = "echo DASH-$((2+2))";
        assert_eq!(on_screen("# ", keys), format!("# {keys}"));
        assert_eq!(on_screen("# echo DA", keys), format!("# {keys}"));
        assert_eq!(on_screen(&format!("# {keys}"), keys), format!("# {keys}"));
        assert_eq!(on_screen("", "ls"), "ls");
        assert_eq!(on_screen("é$ ", "ls"), "é$ ls");
        // Keys with characters of several bytes, their echo not back yet
        // or back in part (a review found the old split panicked).
        assert_eq!(on_screen("$ ", "ü"), "$ ü");
        assert_eq!(on_screen("$ caf", "café"), "$ café");
        assert_eq!(on_screen("$ é", "éé"), "$ éé");
    }
}
