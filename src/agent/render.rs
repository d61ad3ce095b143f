//! How the agent looks in the user's terminal: its text behind a coloured
//! gutter, word-wrapped to the terminal's width as it streams, and its
//! status lines (a proposed command, `Run? [y/N/e]`, a refusal, an exit
//! status, an error).
//!
//! The [`Painter`] only produces bytes and keeps track of the column its
//! last byte left the cursor in; the session decides when they are shown.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// What the seat asks of the pump that writes to the client.
pub(crate) enum Draw {
    /// Bytes for the client's screen.
    Show(Vec<u8>),
    /// A command's output for the client's screen: the seat waits for it
    /// to be written (`session::Shared::output_written`).
    Output(Vec<u8>),
    /// Animate a spinner until the next `Show`.
    Spin,
    /// The question is done: see `Terminal::agent_done`.
    Done { fresh_prompt: bool },
    /// The seat is giving the shell this nonce: see
    /// `Terminal::expect_nonce`. Sent before the keys that give it.
    Nonce(String),
}

/// The gutter in front of every line the agent writes: a cyan bar.
const GUTTER: &str = "\x1b[36m\u{2502}\x1b[0m ";
/// Back to the row's first column, and the row erased: every status line
/// starts so.
const ERASE_ROW: &str = "\r\x1b[2K";
/// The gutter's width on screen.
const GUTTER_WIDTH: usize = 2;
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const RESET: &str = "\x1b[0m";

/// Spinner frames, drawn while the model thinks.
pub(crate) const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// One spinner frame, drawn over the current line.
pub(crate) fn spinner_frame(n: usize) -> Vec<u8> {
    format!(
        "\r\x1b[K{DIM}{} thinking…{RESET}",
        SPINNER[n % SPINNER.len()]
    )
    .into_bytes()
}

/// Erases the spinner's line.
pub(crate) const SPINNER_CLEAR: &[u8] = b"\r\x1b[K";

pub(crate) struct Painter {
    cols: usize,
    /// The cursor's column, counted from the start of the line (gutter
    /// included); 0 at the start of a line.
    col: usize,
    /// The word being streamed, as far as it is on the current line.
    word: String,
    /// A space is due before the next word, if it goes on this line.
    space: bool,
}

impl Painter {
    pub(crate) fn new(cols: u32) -> Painter {
        Painter {
            cols: cols as usize,
            col: 0,
            word: String::new(),
            space: false,
        }
    }

    pub(crate) fn resize(&mut self, cols: u32) {
        self.cols = cols as usize;
    }

    /// Width available for text on one line.
    fn width(&self) -> usize {
        self.cols.saturating_sub(GUTTER_WIDTH).max(10)
    }

    /// Streamed text from the model, wrapped at word boundaries. Every
    /// character is shown as soon as it arrives; a word that turns out not
    /// to fit is moved to the next line whole.
    pub(crate) fn text(&mut self, text: &str) -> Vec<u8> {
        let mut out = String::new();
        for c in text.chars() {
            match c {
                '\n' => {
                    self.word.clear();
                    self.newline(&mut out);
                }
                c if c.is_whitespace() => {
                    self.word.clear();
                    self.space = self.col > GUTTER_WIDTH;
                }
                // Control characters from the model never reach the
                // terminal: they could move the cursor or change modes.
                c if c.is_control() => {}
                // Nor, raw, what shows nothing or reorders the line (a
                // bidi override): it is spelt out, as in the approval line.
                c if hidden(c) => {
                    let mut spelt = String::new();
                    spell(c, &mut spelt);
                    spelt.chars().for_each(|c| self.letter(c, &mut out));
                }
                c => self.letter(c, &mut out),
            }
        }
        out.into_bytes()
    }

    /// One character of a word. Columns are counted as the terminal
    /// counts them: CJK and most emoji take two, combining marks none.
    fn letter(&mut self, c: char, out: &mut String) {
        let w = c.width().unwrap_or(0);
        let end = GUTTER_WIDTH + self.width();
        if self.word.is_empty() && std::mem::take(&mut self.space) {
            if self.col + 2 > end {
                self.newline(out);
            } else {
                out.push(' ');
                self.col += 1;
            }
        }
        if self.col == 0 {
            out.push_str(GUTTER);
            self.col = GUTTER_WIDTH;
        }
        if w > 0 && self.col + w > end {
            let on_line = self.word.width();
            if on_line > 0 && on_line < self.width() {
                // Take the word back and put it on the next line.
                out.push_str(&format!("\x1b[{on_line}D\x1b[K"));
                self.newline(out);
                out.push_str(GUTTER);
                out.push_str(&self.word);
                self.col = GUTTER_WIDTH + on_line;
            } else {
                self.newline(out);
                out.push_str(GUTTER);
                self.col = GUTTER_WIDTH;
                self.word.clear();
            }
        }
        out.push(c);
        self.word.push(c);
        self.col += w;
    }

    fn newline(&mut self, out: &mut String) {
        self.space = false;
        if self.col == 0 {
            // An empty line of the answer keeps its gutter.
            out.push_str(GUTTER.trim_end());
        }
        out.push_str("\r\n");
        self.col = 0;
    }

    /// Ends the current line, if anything is on it.
    pub(crate) fn end_line(&mut self) -> Vec<u8> {
        let mut out = String::new();
        self.word.clear();
        self.space = false;
        if self.col > 0 {
            out.push_str("\r\n");
            self.col = 0;
        }
        out.into_bytes()
    }

    /// A whole line of its own, behind the gutter. The row is erased
    /// first, from its first column: whatever a command left on it (a
    /// fake gutter line, say) is gone before the line is drawn.
    fn line(&mut self, body: &str) -> Vec<u8> {
        let mut out = self.end_line();
        out.extend_from_slice(format!("{ERASE_ROW}{GUTTER}{body}\r\n").as_bytes());
        out
    }

    /// Which agent of a workflow speaks now.
    pub(crate) fn heading(&mut self, agent: &str) -> Vec<u8> {
        let agent = printable(agent);
        self.line(&format!("{BOLD}▸ {agent}{RESET}"))
    }

    /// A command the agent is about to run (and why, if it said).
    pub(crate) fn command(&mut self, command: &str, reason: &str) -> Vec<u8> {
        // Exactly as it runs: what `printable` would hide or join is
        // spelt out.
        let command = exact(command);
        let reason = printable(reason);
        if reason.is_empty() {
            self.line(&format!("{BOLD}$ {command}{RESET}"))
        } else {
            self.line(&format!("{BOLD}$ {command}{RESET}  {DIM}# {reason}{RESET}"))
        }
    }

    /// What the policy's parser sees the line run, one command a line,
    /// shown before `Run?` when it is more than the line says plainly.
    pub(crate) fn listing(&mut self, commands: &[String]) -> Vec<u8> {
        let mut out = Vec::new();
        if commands.is_empty() {
            return out;
        }
        let count = commands.len();
        let head = if count == 1 {
            "it runs:".to_string()
        } else {
            format!("it runs {count} commands:")
        };
        out.extend(self.line(&format!("{DIM}{head}{RESET}")));
        for c in commands {
            out.extend(self.line(&format!("{DIM}  \u{2192} {}{RESET}", printable(c))));
        }
        out
    }

    /// What a line changes in the user's shell, before the question.
    pub(crate) fn changes(&mut self, what: &str) -> Vec<u8> {
        self.line(&format!("{YELLOW}! {}{RESET}", printable(what)))
    }

    /// The approval question, naming the account in a nested shell
    /// (`Run as root@web1?`); the cursor stays after it.
    pub(crate) fn ask(&mut self, account: Option<&str>) -> Vec<u8> {
        let mut out = self.end_line();
        let question = match account {
            Some(a) => format!("Run as {}? [y/N/e] ", printable(a)),
            None => "Run? [y/N/e] ".to_string(),
        };
        out.extend_from_slice(format!("{ERASE_ROW}{GUTTER}{question}\x1b[K").as_bytes());
        self.col = GUTTER_WIDTH + question.width();
        out
    }

    /// The user's answer to `Run?`, echoed, ending the line.
    pub(crate) fn answered(&mut self, key: &str) -> Vec<u8> {
        self.col = 0;
        format!("{key}\r\n").into_bytes()
    }

    /// The edit line, redrawn whole after each key. Only its tail is shown
    /// when it is wider than the terminal.
    pub(crate) fn edit_line(&mut self, text: &str) -> Vec<u8> {
        let room = self.width().saturating_sub(7).max(1);
        let text = printable(text);
        // The widest tail that fits, in columns.
        let mut used = 0;
        let start = text
            .char_indices()
            .rev()
            .take_while(|(_, c)| {
                used += c.width().unwrap_or(0);
                used <= room
            })
            .last()
            .map_or(text.len(), |(at, _)| at);
        let shown = &text[start..];
        self.col = GUTTER_WIDTH + 6 + shown.width();
        format!("\r\x1b[K{GUTTER}edit> {shown}").into_bytes()
    }

    /// A command the policy refused.
    pub(crate) fn refused(&mut self, command: &str, why: &str) -> Vec<u8> {
        let (command, why) = (exact(command), printable(why));
        self.line(&format!(
            "{RED}refused{RESET} {BOLD}{command}{RESET}: {why}"
        ))
    }

    /// How a command ended, when that is worth a line: not for exit 0.
    pub(crate) fn outcome(&mut self, exit: Option<i32>, interrupted: Option<&str>) -> Vec<u8> {
        match ending(exit, interrupted) {
            Some(e) => self.line(&format!("{DIM}{e}{RESET}")),
            None => Vec::new(),
        }
    }

    /// Something the user should know, as one dim line.
    pub(crate) fn notice(&mut self, message: &str) -> Vec<u8> {
        let mut out = self.end_line();
        let message = printable(message);
        out.extend_from_slice(format!("{DIM}walissh: {message}{RESET}\r\n").as_bytes());
        out
    }

    /// A failure of the question, as one line.
    pub(crate) fn error(&mut self, message: &str) -> Vec<u8> {
        let mut out = self.end_line();
        let message = printable(message);
        out.extend_from_slice(format!("{RED}walissh: {message}{RESET}\r\n").as_bytes());
        out
    }

    /// The cursor is at the start of a line again (the shell printed a
    /// command's output, which the session made end with a line break).
    pub(crate) fn at_line_start(&mut self) {
        self.col = 0;
    }

    /// Output the painter did not draw was shown (a command's, streamed):
    /// it left the cursor inside a line or at the start of one, and the
    /// next status line must start on a line of its own.
    pub(crate) fn after_output(&mut self, mid_line: bool) {
        self.word.clear();
        self.space = false;
        // The exact column is not known; only whether it is the first.
        self.col = usize::from(mid_line);
    }
}

/// The output of a command run apart from the user's shell, made fit for
/// their terminal as it streams: no PTY stood between the command and
/// walissh, so nothing turned its bare `\n` into `\r\n`. Everything
/// else passes as it is, as a command's output in the user's shell does.
#[derive(Debug, Default)]
pub(crate) struct Unterminated {
    /// The last byte seen was `\r`: a `\n` after it is already whole.
    after_cr: bool,
    /// The last byte shown left the cursor inside a line.
    mid_line: bool,
}

impl Unterminated {
    pub(crate) fn feed(&mut self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len() + data.len() / 16);
        for &b in data {
            if b == b'\n' && !self.after_cr {
                out.push(b'\r');
            }
            out.push(b);
            self.after_cr = b == b'\r';
        }
        if let Some(&last) = data.last() {
            self.mid_line = last != b'\n';
        }
        out
    }

    /// Whether the output so far ends inside a line.
    pub(crate) fn mid_line(&self) -> bool {
        self.mid_line
    }
}

/// One whole line of a parallel member, its name in front.
pub(crate) fn labelled(label: &str, line: &str) -> Vec<u8> {
    let (label, line) = (printable(label), printable(line));
    format!("{GUTTER}\x1b[36m[{label}]{RESET} {line}\r\n").into_bytes()
}

/// How a command ended, as the user is shown it: nothing for a success
/// (or an unknown status).
pub(crate) fn ending(exit: Option<i32>, interrupted: Option<&str>) -> Option<String> {
    match (interrupted, exit) {
        (Some(why), _) => Some(format!("interrupted: {why}")),
        (None, Some(code)) if code != 0 => Some(format!("exit {code}")),
        _ => None,
    }
}

/// Text from the model or a command line, without control characters.
pub(crate) fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().filter(|c| !c.is_control()) {
        match hidden(c) {
            true => spell(c, &mut out),
            false => out.push(c),
        }
    }
    out
}

/// A character that shows nothing or reorders what is around it: a
/// zero-width one, a bidi override, a tag. (Spaces of other scripts are
/// not: they show as spaces.)
fn hidden(c: char) -> bool {
    crate::agent::policy::invisible(c) && !c.is_whitespace()
}

/// `c` as JSON spells it: `\u202e`, an astral one as two.
fn spell(c: char, out: &mut String) {
    let mut units = [0u16; 2];
    for u in c.encode_utf16(&mut units) {
        out.push_str(&format!("\\u{u:04x}"));
    }
}

/// `s` with every control and invisible character (zero-width, bidi
/// overrides, tags) spelled out as JSON spells it (`\u202e`, astral ones
/// as two): what a person must be able to read exactly before approving
/// it, where [`printable`] would drop a control and leave a bidi override
/// to reorder the line. JSON stays JSON: an edited line still parses.
pub(crate) fn exact(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c.is_control() || crate::agent::policy::invisible(c) {
            true => spell(c, &mut out),
            false => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_spells_out_what_would_hide_or_reorder_text() {
        assert_eq!(
            exact("mcp s/a\u{202e}b\u{1b}[2J"),
            "mcp s/a\\u202eb\\u001b[2J"
        );
        assert_eq!(exact("tag\u{e0041}"), "tag\\udb40\\udc41");
        assert_eq!(exact("plain é 漢字"), "plain é 漢字");
        // Spelled as JSON spells it: the shown arguments parse back.
        let raw = serde_json::json!({"a": "x\u{200b}y"}).to_string();
        let back: serde_json::Value = serde_json::from_str(&exact(&raw)).unwrap();
        assert_eq!(back["a"], "x\u{200b}y");
    }

    #[test]
    fn wide_characters_are_wrapped_by_the_columns_they_take() {
        for answer in [
            "磁盘已满。请删除旧的日志文件，然后重新启动服务。检查 /var/log 目录。",
            "Done 🎉🎉 the disk 🧹 is clean now 🚀🚀🚀 and nginx runs again ✅",
            "e\u{301}e\u{301}e\u{301} combining marks take no column at all here",
        ] {
            let cols = 20;
            let mut p = Painter::new(u32::from(cols));
            let mut out = Vec::new();
            // Streamed a few characters at a time, as the model sends it.
            let chars: Vec<char> = answer.chars().collect();
            for piece in chars.chunks(3) {
                out.extend(p.text(&piece.iter().collect::<String>()));
            }
            out.extend(p.end_line());
            let rows = screen(cols, &out);
            let shown: String = rows
                .iter()
                .map(|l| l.trim_start_matches('\u{2502}').trim())
                .collect::<Vec<_>>()
                .join(" ");
            // Every character is on the screen, none cut or overwritten.
            let squash = |s: &str| s.split_whitespace().collect::<String>();
            assert_eq!(squash(&shown), squash(answer), "{rows:#?}");
            // Each row is the painter's, behind its gutter: the terminal
            // never had to wrap a line the painter thought fitted.
            for row in rows.iter().filter(|r| !r.is_empty()) {
                assert!(row.starts_with('\u{2502}'), "{rows:#?}");
            }
        }
    }

    /// The approval lines are drawn over whatever a command left on their
    /// rows (the review's fake gutter line, printed where the cursor was
    /// left), and the command is shown exactly: read by vt100, the rows
    /// say the command that runs and the question, and nothing else.
    #[test]
    fn the_approval_lines_erase_what_a_command_left_on_their_rows() {
        let mut p = Painter::new(80);
        let mut bytes = b"output\r\n".to_vec();
        // A command's last output: a forged prompt with no line end, then
        // the cursor back at the row's start.
        bytes.extend_from_slice("\u{2502} $ ls -l /tmp  \u{2502} Run? [y/N/e] y\r".as_bytes());
        p.after_output(false);
        bytes.extend(p.command("rm -rf /srv/\u{200b}data", ""));
        bytes.extend(p.ask(None));
        let rows = screen(80, &bytes);
        assert_eq!(
            rows,
            [
                "output",
                "\u{2502} $ rm -rf /srv/\\u200bdata",
                "\u{2502} Run? [y/N/e]"
            ],
            "{rows:#?}"
        );
    }

    /// A bidi override or a zero-width character in an answer or a reason
    /// reaches the terminal spelt out, never raw; other scripts' spaces
    /// are spaces (between words, as every space is).
    #[test]
    fn what_shows_nothing_is_spelt_out_in_answers_and_reasons() {
        let mut p = Painter::new(80);
        let answer =
            String::from_utf8(p.text("safe\u{202e}txt.exe and a\u{200b}b, \u{3000}ok")).unwrap();
        assert!(
            !answer.contains('\u{202e}') && !answer.contains('\u{200b}'),
            "{answer:?}"
        );
        assert!(
            answer.contains("safe\\u202etxt.exe") && answer.contains("a\\u200bb"),
            "{answer:?}"
        );
        assert!(answer.ends_with(", ok"), "{answer:?}");
        let line = String::from_utf8(p.command("ls", "list \u{202e}secret")).unwrap();
        assert!(
            line.contains("list \\u202esecret") && !line.contains('\u{202e}'),
            "{line:?}"
        );
    }

    /// What a terminal `cols` wide shows, row by row, after `bytes`.
    fn screen(cols: u16, bytes: &[u8]) -> Vec<String> {
        let nz = |n: u16| std::num::NonZeroU16::new(n).unwrap();
        let mut p = vt100::Parser::new(nz(12), nz(cols), 0);
        p.process(bytes);
        let rows: Vec<String> = p
            .screen()
            .rows(0, cols)
            .map(|r| r.trim_end().to_string())
            .collect();
        let last = rows
            .iter()
            .rposition(|r| !r.is_empty())
            .map_or(0, |i| i + 1);
        rows[..last].to_vec()
    }

    #[test]
    fn streamed_text_wraps_at_words_behind_the_gutter() {
        let mut p = Painter::new(22);
        let mut out = p.text("The disk is ful");
        out.extend(p.text("l because of old logs.\n\nDone"));
        out.extend(p.end_line());
        assert_eq!(
            screen(22, &out),
            [
                "\u{2502} The disk is full",
                "\u{2502} because of old logs.",
                "\u{2502}",
                "\u{2502} Done"
            ]
        );
    }

    #[test]
    fn a_word_streamed_in_pieces_moves_whole_to_the_next_line() {
        let mut p = Painter::new(16);
        let mut out = Vec::new();
        for piece in ["Check the ", "conf", "iguration", " now"] {
            out.extend(p.text(piece));
        }
        out.extend(p.end_line());
        assert_eq!(
            screen(16, &out),
            [
                "\u{2502} Check the",
                "\u{2502} configuration",
                "\u{2502} now"
            ]
        );
    }

    #[test]
    fn long_words_are_cut_and_control_characters_dropped() {
        let mut p = Painter::new(12);
        let mut out = p.text("abcdefghijklmn\x1b[2J!");
        out.extend(p.end_line());
        assert_eq!(
            screen(12, &out),
            ["\u{2502} abcdefghij", "\u{2502} klmn[2J!"]
        );
    }

    #[test]
    fn output_without_a_terminal_gets_its_carriage_returns() {
        let mut u = Unterminated::default();
        let mut out = u.feed(b"one\ntwo\r");
        assert!(u.mid_line());
        // A CR at the end of one piece and its LF in the next stay one break.
        out.extend(u.feed(b"\nthree\r\n"));
        assert!(!u.mid_line());
        out.extend(u.feed(b"four"));
        assert_eq!(out, b"one\r\ntwo\r\nthree\r\nfour");
        assert!(u.mid_line());
        // The next status line starts on its own line.
        let mut p = Painter::new(80);
        p.after_output(u.mid_line());
        out.extend(p.outcome(Some(2), None));
        assert_eq!(
            screen(80, &out),
            ["one", "two", "three", "four", "\u{2502} exit 2"]
        );
    }

    #[test]
    fn status_lines_start_on_their_own_line() {
        let mut p = Painter::new(80);
        let mut out = p.text("Let me look");
        out.extend(p.command("df -h", "disk"));
        out.extend(p.ask(None));
        out.extend(p.answered("y"));
        out.extend(p.outcome(Some(1), None));
        out.extend(p.error("the model endpoint answered 500: x"));
        assert_eq!(
            screen(80, &out),
            [
                "\u{2502} Let me look",
                "\u{2502} $ df -h  # disk",
                "\u{2502} Run? [y/N/e] y",
                "\u{2502} exit 1",
                "walissh: the model endpoint answered 500: x"
            ]
        );
    }
}
