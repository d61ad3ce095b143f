//! Finds walissh's own shell-integration marks in the target's output and
//! takes them out before the bytes reach the client.
//!
//! The marks are OSC sequences (`ESC ] 133 ; A ... BEL`, `ESC ] 7 ; ...`)
//! that the bootstrap installs in the target's shell. Each carries the
//! session's random nonce (`w=NONCE`): a mark without it is somebody
//! else's (a program printing a forged "command finished", or the user's
//! own OSC 133 setup) and passes through untouched, without effect. A mark
//! may be split across reads; the unfinished part is held until the rest
//! arrives. Output without an ESC byte is passed on without a copy.
//!
//! Each shell walissh integrated has a nonce of its own: the login shell's,
//! then one per nested shell (`sudo -i`, `bash`), a stack. A mark says
//! which level's nonce it carries, so the terminal knows a nested shell has
//! ended when the shell below it speaks again. A nested shell being
//! installed has a pending nonce, believed only for its answer (P) and its
//! ready mark (W).

use std::borrow::Cow;

/// A sequence longer than this cannot be ours; it is passed on as is.
/// The scripts cut a command line to `bootstrap::COMMAND_MAX` characters,
/// up to 4 bytes each, and a mark's own fields are short.
const MAX_MARK: usize = 4 * super::bootstrap::COMMAND_MAX + 1024;
/// New nonces given and not yet confirmed, kept at most.
const OUTSTANDING: usize = 4;

/// What a mark says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mark {
    /// 133;A — the prompt starts.
    PromptStart,
    /// 133;B — the prompt ends, the user's input starts.
    InputStart,
    /// 133;C — the command line was accepted and runs; `cmd=` carries it.
    OutputStart { command: Option<String> },
    /// 133;D;N — the command finished with exit status N.
    CommandEnd { exit: Option<i32> },
    /// 7 — the working directory.
    Cwd(String),
    /// 133;Q — the user pressed Enter on a question at the prompt; the
    /// shell cleared its line instead of running it. `kept` says whether the
    /// question is still on the screen (zsh) or was wiped (bash).
    Question { text: String, kept: bool },
    /// 133;W — walissh's bootstrap has run; the prompt it replaces has
    /// `lines` line breaks, and the shell ends an accepted line with one
    /// (`newline`).
    Ready {
        lines: usize,
        newline: bool,
        /// The shell cannot be integrated (bash before 4.4): no marks follow.
        plain: bool,
        /// walissh's own keys are bound: its Enter and the new-nonce key
        /// (`keys`), bracketed paste (`paste`).
        keys: bool,
        paste: bool,
        /// Who the shell runs as, and on which host.
        account: ShellUser,
    },
    /// 133;R — the shell took a nonce walissh gave it (its tag, `w=…`);
    /// marks with the old one mean nothing from here on.
    Rotated(String),
    /// 133;P — a nested shell answered walissh's probe: its bash and zsh
    /// versions (empty when it is neither).
    Probed { bash: String, zsh: String },
}

/// Who the shell that sent a W mark runs as, and where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ShellUser {
    pub(crate) user: Option<String>,
    pub(crate) host: Option<String>,
}

/// Which shell a mark came from: the index in the stack (0: the login
/// shell), or the nested shell being installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    At(usize),
    Pending,
}

/// The scanner of one session's output.
pub(crate) struct Scanner {
    /// `w=NONCE` of each integrated shell, the login shell first.
    tags: Vec<String>,
    /// The nonces walissh has given the innermost shell and the shell has
    /// not yet confirmed (with an R mark), oldest first: one that was not
    /// answered in time stays, in case the shell is only slow. They count
    /// for the innermost shell's ordinary marks, never for its W mark nor,
    /// alone, for an R: a program that read one off the terminal in the
    /// shell's place can draw a prompt with it, but not answer the next
    /// new nonce, so it never gets a command.
    next: Vec<String>,
    /// The nonce of a nested shell being installed, and whether it
    /// replaces the innermost shell (`exec bash`) rather than nesting in it.
    pending: Option<(String, bool)>,
    held: Vec<u8>,
}

/// One chunk after scanning: the bytes for the client, and the marks with
/// their offsets in those bytes and the level they came from.
pub(crate) struct Scanned<'a> {
    pub(crate) out: Cow<'a, [u8]>,
    pub(crate) marks: Vec<(usize, Level, Mark)>,
}

impl Scanner {
    pub(crate) fn new(nonce: &str) -> Scanner {
        Scanner {
            tags: vec![format!("w={nonce}")],
            next: Vec::new(),
            pending: None,
            held: Vec::new(),
        }
    }

    /// walissh is giving the innermost shell `nonce`: marks with it are
    /// ours, and once the shell confirms it, only those.
    pub(crate) fn expect(&mut self, nonce: &str) {
        if self.next.len() == OUTSTANDING {
            self.next.remove(0);
        }
        self.next.push(format!("w={nonce}"));
    }

    /// A nested shell is being installed with `nonce` (None: no longer);
    /// `replaces` the innermost shell, which `exec`-ed it.
    pub(crate) fn pending(&mut self, nonce: Option<&str>, replaces: bool) {
        self.pending = nonce.map(|n| (format!("w={n}"), replaces));
    }

    /// The shells above `level` have ended: their nonces mean nothing now.
    pub(crate) fn pop_to(&mut self, level: usize) {
        if level + 1 < self.tags.len() {
            self.tags.truncate(level + 1);
            self.next.clear();
        }
    }

    /// The innermost level.
    #[cfg(test)]
    pub(crate) fn depth(&self) -> usize {
        self.tags.len() - 1
    }

    pub(crate) fn scan<'a>(&mut self, input: &'a [u8]) -> Scanned<'a> {
        if self.held.is_empty() && memchr::memchr(0x1b, input).is_none() {
            return Scanned {
                out: Cow::Borrowed(input),
                marks: Vec::new(),
            };
        }
        let mut buf = std::mem::take(&mut self.held);
        buf.extend_from_slice(input);
        let mut out = Vec::with_capacity(buf.len());
        let mut marks = Vec::new();
        let mut i = 0;
        while let Some(esc) = memchr::memchr(0x1b, &buf[i..]).map(|p| i + p) {
            out.extend_from_slice(&buf[i..esc]);
            match self.sequence(&buf[esc..]) {
                Seq::Incomplete => {
                    self.held = buf[esc..].to_vec();
                    return Scanned {
                        out: Cow::Owned(out),
                        marks,
                    };
                }
                Seq::Ours { len, level, mark } => {
                    if let Some(m) = mark {
                        if let Mark::Rotated(tag) = &m
                            && let Some(at) = self.next.iter().position(|n| n == tag)
                            && let Some(top) = self.tags.last_mut()
                        {
                            // Those given before it are stale now.
                            *top = self.next.drain(..=at).next_back().unwrap_or_default();
                        }
                        // The nested shell being installed is ready: its
                        // marks are the innermost level's from here on,
                        // those later in this output too.
                        if level == Level::Pending
                            && matches!(m, Mark::Ready { plain: false, .. })
                            && let Some((tag, replaces)) = self.pending.take()
                        {
                            match self.tags.last_mut() {
                                Some(top) if replaces => *top = tag,
                                _ => self.tags.push(tag),
                            }
                            self.next.clear();
                        }
                        marks.push((out.len(), level, m));
                    }
                    i = esc + len;
                }
                Seq::Other { len } => {
                    out.extend_from_slice(&buf[esc..esc + len]);
                    i = esc + len;
                }
            }
        }
        out.extend_from_slice(&buf[i..]);
        Scanned {
            out: Cow::Owned(out),
            marks,
        }
    }

    /// Whether no unfinished sequence is held from an earlier read.
    pub(crate) fn is_idle(&self) -> bool {
        self.held.is_empty()
    }

    /// Whatever is held back when the output ends: it was not a mark.
    pub(crate) fn flush(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }

    /// Classifies the escape sequence at the start of `s` (s[0] is ESC).
    fn sequence(&self, s: &[u8]) -> Seq {
        // (R is only believed with the next nonce: see `parse`.)
        match s.get(1) {
            None => return Seq::Incomplete,
            Some(b']') => {}
            Some(_) => return Seq::Other { len: 1 },
        }
        // OSC: ends at BEL or at ST (ESC \). Any other ESC inside means it
        // is not one of ours.
        let body = &s[2..];
        let mut end = None;
        for (j, &b) in body.iter().enumerate().take(MAX_MARK) {
            match (b, body.get(j + 1)) {
                (0x07, _) => end = Some((j, 1)),
                (0x1b, Some(b'\\')) => end = Some((j, 2)),
                (0x1b, Some(_)) => return Seq::Other { len: 2 },
                (0x1b, None) => return Seq::Incomplete,
                _ => continue,
            }
            break;
        }
        let Some((j, term)) = end else {
            return if body.len() < MAX_MARK {
                Seq::Incomplete
            } else {
                Seq::Other { len: 2 }
            };
        };
        let len = 2 + j + term;
        match self.parse(&body[..j]) {
            Some((level, mark)) => Seq::Ours { len, level, mark },
            None => Seq::Other { len },
        }
    }

    /// The level whose tag `has` finds: the innermost shell's (or a nonce
    /// it is being given), then the shells below it, innermost first.
    fn level(&self, has: impl Fn(&str) -> bool) -> Option<usize> {
        let top = self.tags.len() - 1;
        if self.next.iter().any(|n| has(n)) {
            return Some(top);
        }
        (0..=top).rev().find(|&i| has(&self.tags[i]))
    }

    /// `Some((level, mark))` when the OSC body is ours (`mark` None for one
    /// of ours that says nothing we use).
    fn parse(&self, body: &[u8]) -> Option<(Level, Option<Mark>)> {
        // Lossy: a command or directory that is not UTF-8 is still ours.
        let body = String::from_utf8_lossy(body);
        let body = body.as_ref();
        if let Some(rest) = body.strip_prefix("7;") {
            // 7;w=NONCE;PATH — the path last, as it may hold ';'.
            let (tag, path) = rest.split_once(';')?;
            let level = self.level(|t| t == tag)?;
            return Some((Level::At(level), Some(Mark::Cwd(path.to_string()))));
        }
        let rest = body.strip_prefix("133;")?;
        // 133;KIND;...;w=NONCE[;cmd=TEXT|;text=TEXT] — free text last, as it
        // may hold ';'.
        let free = [";cmd=", ";text="]
            .iter()
            .filter_map(|key| rest.find(key).map(|at| (at, at + key.len())))
            .min();
        let (fields, command) = match free {
            Some((at, from)) => (&rest[..at], Some(rest[from..].replace("\r\n", "\n"))),
            None => (rest, None),
        };
        let mut fields = fields.split(';');
        let kind = fields.next()?;
        let params: Vec<&str> = fields.collect();
        let value = |key: &str| {
            params
                .iter()
                .find_map(|p| p.strip_prefix(key)?.strip_prefix('='))
        };
        if kind == "R" {
            // Only the nonce walissh is giving confirms itself, and only
            // with the one it replaces (`was=`): whatever read the new one
            // off the terminal in the shell's place holds that, but not
            // the old one, which only the shell's memory and its own
            // marks hold.
            let top = &self.tags[self.tags.len() - 1];
            let was = top.strip_prefix("w=").map(|n| format!("was={n}"));
            if !was.is_some_and(|w| params.contains(&w.as_str())) {
                return None;
            }
            let next = self.next.iter().find(|n| params.contains(&n.as_str()))?;
            return Some((
                Level::At(self.tags.len() - 1),
                Some(Mark::Rotated(next.clone())),
            ));
        }
        // A nested shell being installed answers the probe and says it is
        // ready; nothing else it says counts until then.
        if self
            .pending
            .as_ref()
            .is_some_and(|(n, _)| params.contains(&n.as_str()))
        {
            let mark = match kind {
                "P" => Mark::Probed {
                    bash: value("bash").unwrap_or_default().to_string(),
                    zsh: value("zsh").unwrap_or_default().to_string(),
                },
                "W" => ready(&value),
                _ => return Some((Level::Pending, None)),
            };
            return Some((Level::Pending, Some(mark)));
        }
        // A nonce being given counts for the shell's ordinary marks (walissh
        // may hear them before it has taken in its own new nonce), never
        // for a W: what the shell bound and who it runs as are said once,
        // with a nonce confirmed.
        if kind == "W" && !self.tags.iter().any(|t| params.contains(&t.as_str())) {
            return None;
        }
        let level = Level::At(self.level(|t| params.contains(&t))?);
        Some((
            level,
            match kind {
                "A" => Some(Mark::PromptStart),
                "B" => Some(Mark::InputStart),
                "C" => Some(Mark::OutputStart { command }),
                "D" => Some(Mark::CommandEnd {
                    exit: params.first().and_then(|p| p.parse().ok()),
                }),
                "Q" => Some(Mark::Question {
                    text: command.unwrap_or_default(),
                    kept: value("kept") == Some("1"),
                }),
                "W" => Some(ready(&value)),
                _ => None,
            },
        ))
    }
}

/// A W mark's fields.
fn ready<'a>(value: &impl Fn(&str) -> Option<&'a str>) -> Mark {
    let text = |key: &str| value(key).filter(|v| !v.is_empty()).map(str::to_string);
    Mark::Ready {
        lines: value("lines").and_then(|v| v.parse().ok()).unwrap_or(0),
        newline: value("nl") == Some("1"),
        plain: value("plain") == Some("1"),
        keys: value("keys") == Some("1"),
        paste: value("paste") == Some("1"),
        account: ShellUser {
            user: text("user"),
            host: text("host"),
        },
    }
}

enum Seq {
    Incomplete,
    Ours {
        len: usize,
        level: Level,
        mark: Option<Mark>,
    },
    Other {
        len: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: &str = "0123abcd";

    fn scan_all(s: &mut Scanner, chunks: &[&[u8]]) -> (Vec<u8>, Vec<(usize, Mark)>) {
        let mut out = Vec::new();
        let mut marks = Vec::new();
        for c in chunks {
            let r = s.scan(c);
            for (at, _, m) in r.marks {
                marks.push((out.len() + at, m));
            }
            out.extend_from_slice(&r.out);
        }
        out.extend(s.flush());
        (out, marks)
    }

    #[test]
    fn plain_output_is_borrowed() {
        let mut s = Scanner::new(N);
        assert!(matches!(s.scan(b"hello\r\n").out, Cow::Borrowed(_)));
    }

    #[test]
    fn own_marks_are_removed_and_reported() {
        let mut s = Scanner::new(N);
        let input = format!(
            "\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x1b\\ls\r\n\x1b]133;C;w={N};cmd=ls; echo a;b\x07out\r\n\x1b]133;D;2;w={N}\x07\x1b]7;w={N};/tmp/a;b\x07"
        );
        let (out, marks) = scan_all(&mut s, &[input.as_bytes()]);
        assert_eq!(out, b"$ ls\r\nout\r\n");
        let kinds: Vec<_> = marks.iter().map(|(_, m)| m.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                Mark::PromptStart,
                Mark::InputStart,
                Mark::OutputStart {
                    command: Some("ls; echo a;b".into())
                },
                Mark::CommandEnd { exit: Some(2) },
                Mark::Cwd("/tmp/a;b".into()),
            ]
        );
        assert_eq!(marks[1].0, 2);
        assert_eq!(marks[2].0, 6);
    }

    #[test]
    fn forged_and_foreign_marks_pass_through_without_effect() {
        let mut s = Scanner::new(N);
        let forged = b"\x1b]133;D;0\x07\x1b]133;D;0;w=wrong\x07\x1b]7;file:///etc\x07\x1b[31mred";
        let (out, marks) = scan_all(&mut s, &[forged]);
        assert_eq!(out, forged);
        assert!(marks.is_empty());
    }

    #[test]
    fn marks_split_anywhere_are_found() {
        let input = format!("ab\x1b]133;D;0;w={N}\x07cd");
        for cut in 0..input.len() {
            let mut s = Scanner::new(N);
            let (a, b) = input.as_bytes().split_at(cut);
            let (out, marks) = scan_all(&mut s, &[a, b]);
            assert_eq!(out, b"abcd", "cut at {cut}");
            assert_eq!(
                marks,
                vec![(2, Mark::CommandEnd { exit: Some(0) })],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn unterminated_sequences_are_not_held_forever() {
        let mut s = Scanner::new(N);
        let mut long = b"\x1b]133;".to_vec();
        long.extend(std::iter::repeat_n(b'x', MAX_MARK + 10));
        let (out, marks) = scan_all(&mut s, &[&long, b"tail"]);
        assert_eq!(out.len(), long.len() + 4);
        assert!(marks.is_empty());
    }

    #[test]
    fn question_mark() {
        let mut s = Scanner::new(N);
        let input = format!("\x1b]133;Q;w={N};kept=0;text=? why; and how\x07");
        let (out, marks) = scan_all(&mut s, &[input.as_bytes()]);
        assert!(out.is_empty());
        let q = Mark::Question {
            text: "? why; and how".into(),
            kept: false,
        };
        assert_eq!(marks, vec![(0, q)]);
    }

    #[test]
    fn ready_mark() {
        let mut s = Scanner::new(N);
        let input = format!("\x1b]133;W;w={N};lines=1;nl=1;keys=1;paste=0;user=root;host=web1\x07");
        let (_, marks) = scan_all(&mut s, &[input.as_bytes()]);
        assert_eq!(
            marks[0].1,
            Mark::Ready {
                lines: 1,
                newline: true,
                plain: false,
                keys: true,
                paste: false,
                account: ShellUser {
                    user: Some("root".into()),
                    host: Some("web1".into()),
                },
            }
        );
        let mut s = Scanner::new(N);
        let mut both =
            format!("\x1b]133;Q;w={N};kept=0;text=? a;cmd=b\x07\x1b]133;C;w={N};cmd=ls ")
                .into_bytes();
        both.extend_from_slice(b"\xff\x07");
        let (_, marks) = scan_all(&mut s, &[&both]);
        let q = Mark::Question {
            text: "? a;cmd=b".into(),
            kept: false,
        };
        assert_eq!(marks[0].1, q);
        let c = Mark::OutputStart {
            command: Some("ls \u{FFFD}".into()),
        };
        assert_eq!(marks[1].1, c);
    }

    #[test]
    fn a_new_nonce_replaces_the_old_once_the_shell_confirms_it() {
        const NEW: &str = "ffffeeeeddddcccc";
        let mut s = Scanner::new(N);
        s.expect(NEW);
        // An R with the old nonce confirms nothing and is not ours; nor
        // does one with the new nonce alone (what a program that read the
        // key off the terminal in the shell's place knows), or with a
        // wrong old one.
        for forged in [
            format!("\x1b]133;R;w={N}\x07"),
            format!("\x1b]133;R;w={NEW}\x07"),
            format!("\x1b]133;R;w={NEW};was={NEW}\x07"),
            format!("\x1b]133;R;w={NEW};was=0123\x07"),
        ] {
            let (out, marks) = scan_all(&mut s, &[forged.as_bytes()]);
            assert_eq!(out, forged.as_bytes());
            assert!(marks.is_empty(), "{forged:?}");
        }
        // Until the shell confirms, both are believed for its ordinary
        // marks, but a W with the new one is not (it would turn the check
        // off); after, only the new one.
        let input = format!(
            "\x1b]133;W;w={NEW};keys=0\x07\x1b]133;D;2;w={NEW}\x07\x1b]133;D;0;w={N}\x07\x1b]133;R;w={NEW};was={N}\x07\x1b]133;D;7;w={N}\x07\x1b]133;D;1;w={NEW}\x07"
        );
        let (out, marks) = scan_all(&mut s, &[input.as_bytes()]);
        let expected = format!("\x1b]133;W;w={NEW};keys=0\x07\x1b]133;D;7;w={N}\x07");
        assert_eq!(out, expected.as_bytes());
        let kinds: Vec<_> = marks.into_iter().map(|(_, m)| m).collect();
        assert_eq!(
            kinds,
            vec![
                Mark::CommandEnd { exit: Some(2) },
                Mark::CommandEnd { exit: Some(0) },
                Mark::Rotated(format!("w={NEW}")),
                Mark::CommandEnd { exit: Some(1) },
            ]
        );
    }

    /// A new nonce not confirmed in time stays outstanding: if the shell
    /// was only slow, its late answer still counts, and so does its answer
    /// to the nonce given after it (whose `was=` is the late one). Once
    /// one is confirmed, those given before it are stale.
    #[test]
    fn a_late_confirmation_does_not_stall_the_next() {
        const N1: &str = "1111222233334444";
        const N2: &str = "5555666677778888";
        let mut s = Scanner::new(N);
        s.expect(N1);
        s.expect(N2);
        let late = format!("\x1b]133;R;w={N1};was={N}\x07\x1b]133;R;w={N2};was={N1}\x07");
        let (out, marks) = scan_all(&mut s, &[late.as_bytes()]);
        assert!(out.is_empty());
        assert_eq!(marks.len(), 2);
        // A program that kept N1 (the shell took N2 over it) gets nothing.
        let mut s = Scanner::new(N);
        s.expect(N1);
        s.expect(N2);
        let shell = format!("\x1b]133;R;w={N2};was={N}\x07");
        assert_eq!(scan_all(&mut s, &[shell.as_bytes()]).1.len(), 1);
        let stale = format!("\x1b]133;R;w={N1};was={N2}\x07\x1b]133;D;0;w={N1}\x07");
        let (out, marks) = scan_all(&mut s, &[stale.as_bytes()]);
        assert_eq!(out, stale.as_bytes());
        assert!(marks.is_empty());
    }

    #[test]
    fn nested_shells_have_levels_and_a_pending_one_only_answers() {
        const M: &str = "4567cdef";
        let mut s = Scanner::new(N);
        s.pending(Some(M), false);
        // Before it is ready, the pending shell's other marks do nothing.
        let early =
            format!("\x1b]133;C;w={M};cmd=x\x07\x1b]133;P;w={M};bash=5.2.15(1)-release;zsh=\x07");
        let r = s.scan(early.as_bytes());
        assert!(r.out.is_empty());
        assert_eq!(r.marks.len(), 1);
        assert_eq!(r.marks[0].1, Level::Pending);
        assert_eq!(
            r.marks[0].2,
            Mark::Probed {
                bash: "5.2.15(1)-release".into(),
                zsh: String::new()
            }
        );
        let ready = format!("\x1b]133;W;w={M};lines=0\x07\x1b]133;A;w={M}\x07");
        let r = s.scan(ready.as_bytes());
        assert_eq!(r.marks[0].1, Level::Pending);
        assert_eq!(
            r.marks[1].1,
            Level::At(1),
            "ready: the next mark is the nested shell's"
        );
        assert_eq!(s.depth(), 1);
        let both = format!("\x1b]133;D;0;w={M}\x07\x1b]7;w={M};/root\x07\x1b]133;D;0;w={N}\x07");
        let r = s.scan(both.as_bytes());
        let levels: Vec<_> = r.marks.iter().map(|(_, l, _)| *l).collect();
        assert_eq!(levels, vec![Level::At(1), Level::At(1), Level::At(0)]);
        s.pop_to(0);
        assert_eq!(s.depth(), 0);
        // The ended shell's nonce means nothing now.
        let late = format!("\x1b]133;D;0;w={M}\x07");
        assert!(s.scan(late.as_bytes()).marks.is_empty());
    }
}
