//! The output of the commands the agent runs, made safe for the user's
//! terminal on its way there.
//!
//! A command the agent runs prints whatever its files and programs hold,
//! and target content can arrange what that is: output is untrusted. A
//! terminal does more with bytes than draw them: it sets the clipboard
//! (OSC 52), plants hyperlinks whose text is not their target (OSC 8),
//! answers queries by typing into the shell (device attributes, cursor
//! position, DECRQSS), takes device control strings, hides what is typed
//! after it (SGR 8), and moves the cursor over lines already drawn, such
//! as walissh's own "Run?" line. So the sequences that pass are an allow
//! list, decided one sequence at a time by a small state machine that
//! reads each byte once (sequences may be split across chunks):
//!
//! - text, and the controls `\t \n \r \b BEL`;
//! - colours and attributes (SGR), without conceal;
//! - moves and erasures inside the current line;
//! - inside the alternate screen (full-screen programs: `top`, `less`),
//!   moves and erasures anywhere, scroll regions, keypad and charset
//!   modes: that screen is the program's and goes when it ends. Whichever
//!   of its modes (47, 1047, 1049) a program asks for, the terminal is
//!   given 1049, which saves the cursor on the way in and puts it back on
//!   the way out, and saving or restoring the cursor (`ESC 7`/`8`, `CSI
//!   s`/`u`) is dropped: with 47 or 1047, or a save inside, a program could
//!   leave the screen with the cursor anywhere on the user's, over lines
//!   already drawn, such as the next `Run?` (a review did);
//! - the private modes full-screen programs use (the alternate screen,
//!   cursor visibility, cursor keys, mouse reports, bracketed paste),
//!   undone by [`Sanitizer::finish`] if the command leaves them on.
//!
//! Everything else is dropped: OSC (titles, clipboard, hyperlinks,
//! palette), DCS, APC, PM, SOS, queries of every kind, resets, C1
//! controls written as UTF-8, other C0 controls. Output with none of the
//! bytes that start such things is passed on without a copy.
//!
//! It owns nothing else: the user's own commands never pass here (walissh
//! is not their terminal emulator); which output is the agent's is the
//! caller's business (`Terminal` for commands typed into the shell, the
//! seat for commands run apart).

use std::borrow::Cow;

/// Parameter bytes of a control sequence kept at most; a longer one is
/// read to its end and dropped.
const MAX_PARAMS: usize = 64;

/// Private modes (`CSI ? N h` / `l`) a command may set, and what undoes
/// each. The alternate screen's are handled apart.
const PRIVATE_MODES: &[(u16, &str)] = &[
    (1, "\x1b[?1l"),
    (7, "\x1b[?7h"),
    (12, ""),
    (25, "\x1b[?25h"),
    (1000, "\x1b[?1000l"),
    (1002, "\x1b[?1002l"),
    (1003, "\x1b[?1003l"),
    (1005, "\x1b[?1005l"),
    (1006, "\x1b[?1006l"),
    (1015, "\x1b[?1015l"),
    (2004, "\x1b[?2004l"),
];

/// Modes that switch to the alternate screen; each is given to the
/// terminal as 1049.
const ALTERNATE: &[u16] = &[47, 1047, 1049];

/// Final bytes of control sequences that stay in the cursor's line: SGR
/// (rewritten), erase in line, cursor forward and back, column absolute,
/// erase, delete and insert characters.
const LINE_FINALS: &[u8] = b"mKCDG`XP@";
/// Final bytes allowed in the alternate screen besides those: moves,
/// erasures, scrolling, scroll regions, tabs, repeat (not the cursor's
/// save and restore: see the module's doc).
const SCREEN_FINALS: &[u8] = b"ABEFHfdeaJLMSTrIZb";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    Ground,
    /// After ESC.
    Esc,
    /// After ESC and an intermediate byte (`ESC ( B`, `ESC # 8`).
    EscInter(u8),
    /// Inside a control sequence (after `ESC [`).
    Csi,
    /// Inside a string (OSC, DCS, APC, PM, SOS): dropped to its end.
    String,
    /// Inside a string, after an ESC (an ST when `\` follows).
    StringEsc,
    /// After the UTF-8 lead byte 0xC2: a C1 control may follow.
    C2,
}

/// The sanitizer of one command's output.
#[derive(Debug, Default)]
pub(crate) struct Sanitizer {
    state: State,
    /// The control sequence being read, after `ESC [`.
    params: Vec<u8>,
    /// It outgrew [`MAX_PARAMS`]: dropped when it ends.
    overlong: bool,
    /// The private mode of the alternate screen in use, if any.
    alternate: Option<u16>,
    /// Private modes the output turned on (or, for 7 and 25, off).
    left_on: Vec<u16>,
    /// Colours or attributes were set.
    coloured: bool,
    /// The keypad was put in application mode, or G0 given another
    /// charset, or a scroll region set.
    keypad: bool,
    charset: bool,
    region: bool,
}

impl Sanitizer {
    /// The safe part of `data`. Borrowed when nothing had to change.
    pub(crate) fn clean<'a>(&mut self, data: &'a [u8]) -> Cow<'a, [u8]> {
        if self.state == State::Ground && !needs_look(data) {
            return Cow::Borrowed(data);
        }
        let mut out = Vec::with_capacity(data.len());
        for &b in data {
            self.byte(b, &mut out);
        }
        Cow::Owned(out)
    }

    /// What undoes the modes the output left on, when the command ends;
    /// an unfinished sequence is dropped.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.state = State::Ground;
        self.params.clear();
        self.overlong = false;
        self.undo_screen(&mut out);
        if self.alternate.take().is_some() {
            out.extend_from_slice(b"\x1b[?1049l");
        }
        for mode in self.left_on.drain(..) {
            if let Some((_, undo)) = PRIVATE_MODES.iter().find(|(m, _)| *m == mode) {
                out.extend_from_slice(undo.as_bytes());
            }
        }
        if std::mem::take(&mut self.coloured) {
            out.extend_from_slice(b"\x1b[0m");
        }
        out
    }

    /// Undoes the keypad, charset and scroll region: in the alternate
    /// screen, where they were set, before it is left.
    fn undo_screen(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.keypad) {
            out.extend_from_slice(b"\x1b>");
        }
        if std::mem::take(&mut self.charset) {
            out.extend_from_slice(b"\x1b(B");
        }
        if std::mem::take(&mut self.region) {
            out.extend_from_slice(b"\x1b[r");
        }
    }

    fn byte(&mut self, b: u8, out: &mut Vec<u8>) {
        match self.state {
            State::Ground => self.ground(b, out),
            State::C2 => {
                self.state = State::Ground;
                match b {
                    // U+0080..U+009F: C1 controls (CSI, OSC, DCS...) to
                    // terminals that honour them in UTF-8.
                    0x80..0xa0 => {}
                    0xa0..0xc0 => out.extend_from_slice(&[0xc2, b]),
                    // A lone lead byte is not UTF-8: kept, it could pair
                    // with a byte that follows what is dropped next.
                    _ => self.ground(b, out),
                }
            }
            State::Esc => self.escape(b, out),
            State::EscInter(i) => {
                self.state = State::Ground;
                // Charsets for G0 (`ESC ( X`) in the alternate screen;
                // `ESC # 8` (fill the screen) and the rest never.
                if i == b'(' && self.alternate.is_some() && b.is_ascii_alphanumeric() {
                    self.charset = b != b'B';
                    out.extend_from_slice(&[0x1b, i, b]);
                }
            }
            State::Csi => self.csi(b, out),
            State::String => match b {
                0x1b => self.state = State::StringEsc,
                // BEL ends an OSC; CAN and SUB cancel any string.
                0x07 | 0x18 | 0x1a => self.state = State::Ground,
                _ => {}
            },
            State::StringEsc => {
                // ST (`ESC \`) ends it; any other ESC ends it too and
                // starts a sequence of its own.
                self.state = State::Ground;
                if b != b'\\' {
                    self.escape(b, out);
                }
            }
        }
    }

    fn ground(&mut self, b: u8, out: &mut Vec<u8>) {
        match b {
            0x1b => self.state = State::Esc,
            0xc2 => self.state = State::C2,
            b'\t' | b'\n' | b'\r' | 0x08 | 0x07 => out.push(b),
            0x00..0x20 => {}
            _ => out.push(b),
        }
    }

    fn escape(&mut self, b: u8, out: &mut Vec<u8>) {
        self.state = State::Ground;
        match b {
            b'[' => {
                self.state = State::Csi;
                self.params.clear();
                self.overlong = false;
            }
            b']' | b'P' | b'_' | b'^' | b'X' => self.state = State::String,
            0x20..0x30 => self.state = State::EscInter(b),
            0x1b => self.state = State::Esc,
            // Index, reverse index, next line, keypad modes: the
            // alternate screen's only.
            b'D' | b'M' | b'E' | b'=' | b'>' if self.alternate.is_some() => {
                match b {
                    b'=' => self.keypad = true,
                    b'>' => self.keypad = false,
                    _ => {}
                }
                out.extend_from_slice(&[0x1b, b]);
            }
            _ => {}
        }
    }

    fn csi(&mut self, b: u8, out: &mut Vec<u8>) {
        match b {
            0x40..0x7f => {
                self.state = State::Ground;
                if !self.overlong {
                    self.control(b, out);
                }
            }
            0x20..0x40 => {
                if self.params.len() < MAX_PARAMS {
                    self.params.push(b);
                } else {
                    self.overlong = true;
                }
            }
            // CAN and SUB cancel it; ESC cancels it and starts another.
            0x18 | 0x1a => self.state = State::Ground,
            0x1b => self.state = State::Esc,
            // Other controls inside a sequence are executed by
            // terminals; only the harmless ones are.
            b'\t' | b'\n' | b'\r' | 0x08 | 0x07 => out.push(b),
            _ => {}
        }
    }

    /// A whole control sequence: `ESC [ params final`.
    fn control(&mut self, fin: u8, out: &mut Vec<u8>) {
        let params = std::mem::take(&mut self.params);
        let plain = params.iter().all(|c| c.is_ascii_digit() || *c == b';');
        if fin == b'm' {
            if params
                .iter()
                .all(|c| c.is_ascii_digit() || matches!(c, b';' | b':'))
            {
                self.sgr(&params, out);
            }
        } else if matches!(fin, b'h' | b'l') && params.first() == Some(&b'?') {
            self.modes(&params[1..], fin == b'h', out);
        } else if plain
            && (LINE_FINALS.contains(&fin)
                || (self.alternate.is_some() && SCREEN_FINALS.contains(&fin)))
        {
            if fin == b'r' {
                self.region = !params.is_empty();
            }
            out.extend_from_slice(b"\x1b[");
            out.extend_from_slice(&params);
            out.push(fin);
        }
        self.params = params;
        self.params.clear();
    }

    /// SGR without conceal (8): what follows it would be typed unseen.
    fn sgr(&mut self, params: &[u8], out: &mut Vec<u8>) {
        let parts: Vec<&[u8]> = params.split(|c| *c == b';').collect();
        let mut kept: Vec<&[u8]> = Vec::with_capacity(parts.len());
        let mut coloured = self.coloured;
        let mut i = 0;
        while i < parts.len() {
            let p = parts[i];
            i += 1;
            // Extended colours in `;` form take their arguments along.
            if matches!(p, b"38" | b"48" | b"58") {
                let take = match parts.get(i).copied() {
                    Some(b"5") => 2,
                    Some(b"2") => 4,
                    // Malformed: terminals disagree on what follows.
                    _ => return,
                };
                let end = i + take;
                if end > parts.len() || parts[i + 1..end].iter().any(|a| a.is_empty()) {
                    return;
                }
                coloured = true;
                kept.push(p);
                kept.extend_from_slice(&parts[i..end]);
                i = end;
                continue;
            }
            if p == b"8" || p.starts_with(b"8:") {
                continue;
            }
            // A reset (0, or nothing) undoes what came before it.
            coloured = !p.iter().all(|c| *c == b'0');
            kept.push(p);
        }
        if kept.is_empty() {
            return;
        }
        self.coloured = coloured;
        out.extend_from_slice(b"\x1b[");
        out.extend_from_slice(&kept.join(&b';'));
        out.push(b'm');
    }

    /// `CSI ? N;M h` or `l`: the allowed modes pass, one by one.
    fn modes(&mut self, params: &[u8], set: bool, out: &mut Vec<u8>) {
        for p in params.split(|c| *c == b';') {
            let Some(mode) = std::str::from_utf8(p)
                .ok()
                .and_then(|s| s.parse::<u16>().ok())
            else {
                continue;
            };
            if ALTERNATE.contains(&mode) {
                match (set, self.alternate) {
                    (true, None) => {
                        self.alternate = Some(mode);
                        out.extend_from_slice(b"\x1b[?1049h");
                    }
                    (false, Some(m)) if m == mode => {
                        self.undo_screen(out);
                        self.alternate = None;
                        out.extend_from_slice(b"\x1b[?1049l");
                    }
                    _ => {}
                }
                continue;
            } else if PRIVATE_MODES.iter().any(|(m, _)| *m == mode) {
                // 7 and 25 are on by default: turning them off is what
                // must be undone.
                let unusual = set != matches!(mode, 7 | 25);
                self.left_on.retain(|m| *m != mode);
                if unusual {
                    self.left_on.push(mode);
                }
            } else {
                continue;
            }
            let end = if set { 'h' } else { 'l' };
            out.extend_from_slice(format!("\x1b[?{mode}{end}").as_bytes());
        }
    }
}

/// Whether `data` holds anything [`Sanitizer`] must look at: a control
/// other than the harmless ones, or a 0xC2 that does not start a
/// printable character (0xC2 0xA0 to 0xC2 0xBF): a C1 control in UTF-8
/// (0xC2 0x80 to 0xC2 0x9F), a lone lead byte, or one at the end.
fn needs_look(data: &[u8]) -> bool {
    data.iter().enumerate().any(|(i, &b)| match b {
        b'\t' | b'\n' | b'\r' | 0x08 | 0x07 => false,
        0x00..0x20 => true,
        0xc2 => !data.get(i + 1).is_some_and(|n| (0xa0..0xc0).contains(n)),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The review's class: a command's output that leaves the cursor
    /// somewhere above, on the user's screen, so that what is printed
    /// next (a fake gutter line) lands over lines already drawn. Read by
    /// a real emulator (vt100): through the sanitizer the cursor comes
    /// back to where the output began, and the lines above it are as they
    /// were; raw, each moves it (so the check can fail).
    #[test]
    fn no_output_leaves_the_cursor_anywhere_but_where_it_began() {
        let attacks: &[&[u8]] = &[
            b"\x1b[?47h\x1b[2;1H\x1b[?47l",
            b"\x1b[?1047h\x1b[2;1H\x1b[?1047l",
            b"\x1b[?1049h\x1b[2;1H\x1b7\x1b[?1049l\x1b8",
            b"\x1b[?1049h\x1b[2;1H\x1b[s\x1b[?1049l\x1b[u",
            b"\x1b[?1049h\x1b7\x1b[?1049l\x1b[?1049h\x1b[2;1H\x1b[?1049l\x1b8",
            b"\x1b[?47h\x1b[2;1H",
            b"\x1b[?1047h\x1b[2;1H\x1b[?1049l\x1b[?47l",
            b"\x1b[?1049h\x1b[1;3r\x1b[2;1H\x1b[?1049l",
            b"\x1b[?47h\x1b[?1049h\x1b[2;1H\x1b[?1049l\x1b[?47l",
            b"\x1b[2;1H\x1b[3A\x1bM\x1b[1;1f\x1b[2d",
        ];
        let mut raw_moved = 0;
        let before = b"line one\r\nline two\r\nline three\r\nline four\r\n$ cat notes.txt\r\n";
        for attack in attacks {
            let screen = |output: &[u8]| {
                let nz = |n| std::num::NonZeroU16::new(n).unwrap();
                let mut vt = vt100::Parser::new(nz(24), nz(80), 0);
                vt.process(before);
                let start = vt.screen().cursor_position();
                vt.process(output);
                vt.process(b"\x1b[36m\xe2\x94\x82\x1b[0m Run? [y/N/e]");
                (start, vt.screen().cursor_position(), vt.screen().contents())
            };
            let (start, end, contents) = screen(&clean(attack));
            assert_eq!(
                start.0,
                end.0,
                "{:?}: {contents}",
                String::from_utf8_lossy(attack)
            );
            assert!(
                contents
                    .starts_with("line one\nline two\nline three\nline four\n$ cat notes.txt\n"),
                "{contents}"
            );
            let (start, end, _) = screen(attack);
            raw_moved += usize::from(start.0 != end.0);
            // vt100 gives 47 and 1047 1049's save and restore; xterm and
            // most terminals do not. So the terminal is never asked for
            // them at all.
            let cleaned = String::from_utf8_lossy(&clean(attack)).into_owned();
            assert!(
                !cleaned.contains("[?47") && !cleaned.contains("[?1047"),
                "{cleaned:?}"
            );
        }
        // Raw, the attacks vt100 models move the cursor: the check bites.
        assert!(raw_moved >= 5, "{raw_moved}");
    }

    proptest::proptest! {
        /// The fuzz target's properties (`fuzzing::sanitize`, the cursor's
        /// among them) on streams made of the pieces such attacks use.
        #[test]
        fn streams_of_screen_pieces_keep_the_fuzz_targets_properties(
            pieces in proptest::collection::vec(proptest::sample::select(vec![
                "\x1b[", "\x1b[?", "47", "1047", "1049", "h", "l", "2;1", "H", "f", "A", "d",
                "r", "s", "u", "\x1b7", "\x1b8", "\x1bM", "\x1bD", "\x1bE", "\n", "\r", "x",
                ";", "1", "\x1b", "K", "J", "\x1b[2J", "\x1b[?25l",
            ]), 0..40)
        ) {
            crate::fuzzing::sanitize(pieces.concat().as_bytes());
        }
    }

    fn clean(input: &[u8]) -> Vec<u8> {
        let mut s = Sanitizer::default();
        let mut out = s.clean(input).into_owned();
        out.extend(s.finish());
        out
    }

    fn text(input: &str) -> String {
        String::from_utf8_lossy(&clean(input.as_bytes())).into_owned()
    }

    #[test]
    fn plain_text_and_colours_pass_untouched() {
        let mut s = Sanitizer::default();
        let plain = b"total 8\r\ndrwxr-xr-x 2 root root 4096 .\r\n\xc2\xb0 degrees\tok";
        assert!(matches!(s.clean(plain), Cow::Borrowed(_)));
        assert_eq!(
            text("\x1b[1;31merror\x1b[0m: \x1b[38;5;8mgrey\x1b[m"),
            "\x1b[1;31merror\x1b[0m: \x1b[38;5;8mgrey\x1b[m"
        );
        assert_eq!(text("50%\r\x1b[K75%\x1b[3D"), "50%\r\x1b[K75%\x1b[3D");
    }

    #[test]
    fn clipboard_links_titles_and_strings_are_dropped() {
        assert_eq!(text("a\x1b]52;c;cm0gLXJmIH4K\x07b"), "ab");
        assert_eq!(text("a\x1b]52;c;cm0gLXJmIH4K\x1b\\b"), "ab");
        assert_eq!(
            text("\x1b]8;;https://evil.example/\x1b\\https://good.example/\x1b]8;;\x1b\\"),
            "https://good.example/"
        );
        assert_eq!(text("\x1b]0;title\x07x"), "x");
        assert_eq!(text("\x1bP$qm\x1b\\x\x1b_apc\x1b\\y\x1b^pm\x1b\\z"), "xyz");
        // C1 controls written as UTF-8: U+009D is OSC, U+009B is CSI.
        assert_eq!(text("a\u{9d}52;c;eA==\u{7}b\u{9b}6n"), "a52;c;eA==\u{7}b6n");
    }

    #[test]
    fn queries_resets_and_conceal_are_dropped() {
        for q in [
            "\x1b[6n",
            "\x1b[c",
            "\x1b[>c",
            "\x1b[21t",
            "\x1b[?2026$p",
            "\x1bc",
            "\x1b#8",
        ] {
            assert_eq!(text(&format!("a{q}b")), "ab", "{q:?}");
        }
        assert_eq!(
            text("[sudo] password for alice: \x1b[8m"),
            "[sudo] password for alice: "
        );
        assert_eq!(text("\x1b[1;8;31mx"), "\x1b[1;31mx\x1b[0m");
        assert_eq!(text("\x05\x0e\x0fa\x7f"), "a\x7f");
    }

    #[test]
    fn the_cursor_stays_in_its_line_outside_full_screen_programs() {
        // A fake walissh line drawn over the real one, two lines up.
        assert_eq!(
            text("\x1b[2A\x1b[2K\x1b[1;1Hfake\x1b7\x1bM\x1b[2J"),
            "\x1b[2Kfake"
        );
    }

    #[test]
    fn full_screen_programs_keep_their_screen_and_are_undone() {
        let top = "\x1b[?1049h\x1b[?25l\x1b[1;1H\x1b[2Jtop\x1b[5;10r\x1b=";
        assert_eq!(text(top), format!("{top}\x1b>\x1b[r\x1b[?1049l\x1b[?25h"));
        // A program that ends cleanly needs nothing undone.
        let less = "\x1b[?1049h\x1b[Hpage\x1b[?1049l";
        assert_eq!(text(less), less);
        // Outside it, the same moves are dropped again.
        assert_eq!(
            text("\x1b[?1049h\x1b[?1049l\x1b[H"),
            "\x1b[?1049h\x1b[?1049l"
        );
    }

    #[test]
    fn sequences_split_across_chunks_are_read_whole() {
        let input = b"a\x1b]52;c;eA==\x07b\x1b[31mc\xc2\xb0\xc2\x9bd";
        for cut in 0..input.len() {
            let mut s = Sanitizer::default();
            let mut out = s.clean(&input[..cut]).into_owned();
            out.extend_from_slice(&s.clean(&input[cut..]));
            out.extend(s.finish());
            assert_eq!(out, b"ab\x1b[31mc\xc2\xb0d\x1b[0m", "cut at {cut}");
        }
    }

    #[test]
    fn an_endless_sequence_ends_nothing_and_keeps_no_memory() {
        let mut s = Sanitizer::default();
        let long = [b"\x1b[".as_slice(), &[b'1'; 100_000], b"A after"].concat();
        assert_eq!(s.clean(&long).as_ref(), b" after");
        assert!(s.params.capacity() <= 2 * MAX_PARAMS);
        let osc = [b"\x1b]52;c;".as_slice(), &[b'A'; 100_000]].concat();
        assert!(s.clean(&osc).is_empty());
        assert_eq!(s.clean(b"\x07ok").as_ref(), b"ok");
    }
}
