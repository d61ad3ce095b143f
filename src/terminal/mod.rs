//! The terminal side of an interactive session: what the shell on the
//! target is doing, as its integration marks tell it.
//!
//! A [`Terminal`] sits on the target-to-client byte path of a PTY shell
//! session. While walissh's bootstrap runs in the shell it withholds the
//! output, then cuts the bootstrap's traces (the first prompt, replaced by
//! the one drawn after it) so the user sees what a direct login shows. From
//! then on it takes walissh's marks out of the stream and turns them into
//! [`CommandRecord`]s: the command line, its directory, exit status, times
//! and a bounded, ANSI-free head and tail of its output. Shells without
//! integration (or a bootstrap that never answers) are passed through
//! untouched. While the agent works (a question was caught and the
//! session has an agent), the shell's own drawing (its prompts, the echo
//! of the lines the agent types) is hidden: only the output of the
//! commands the agent runs is shown, and the agent draws the rest. What it
//! leaves to others: the screen model (`screen`), and what becomes of
//! records and questions (`session`, `agent`).

pub(crate) mod bootstrap;
pub(crate) mod marks;
mod output;
pub(crate) mod sanitize;
pub(crate) mod screen;
pub(crate) mod typed;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use tokio::time::Instant;

use crate::agent::Question;
pub(crate) use bootstrap::Shell;
use marks::{Mark, Scanner};
pub(crate) use output::Capture;
use sanitize::Sanitizer;
use typed::Typed;

/// How long the bootstrap may take before walissh gives up on it and shows
/// the withheld output as it is.
const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(5);
/// Output withheld during the bootstrap beyond this is shown as it is.
const WITHHOLD_MAX: usize = 256 * 1024;
/// Bytes of a prompt kept to redraw it.
const PROMPT_MAX: usize = 1024;
/// Finished commands kept for the agent's context.
const KEEP_COMMANDS: usize = 50;
/// Bytes of a line's echo kept, to check a question against.
const ECHO_MAX: usize = 8 * 1024;
/// Marks that do not fit are reported at most once in this long.
const INTEGRITY_EVERY: Duration = Duration::from_secs(60);

/// One command the user ran at the prompt.
#[derive(Debug, Clone)]
pub(crate) struct CommandRecord {
    /// `None` when the shell did not record it (e.g. history turned off).
    pub(crate) command: Option<String>,
    pub(crate) cwd: Option<String>,
    pub(crate) exit_code: Option<i32>,
    pub(crate) started: SystemTime,
    pub(crate) ended: SystemTime,
    pub(crate) output: Capture,
}

impl CommandRecord {
    /// The record's `command` audit event.
    pub(crate) fn event(&self, ids: &crate::audit::Ids) -> crate::audit::Event {
        let duration = self.ended.duration_since(self.started).unwrap_or_default();
        ids.event("command")
            .field("command", self.command.clone())
            .field("exit_code", self.exit_code)
            .field("cwd", self.cwd.clone())
            .field("duration_ms", duration.as_millis() as u64)
            .field("output_bytes", self.output.total())
    }
}

enum Phase {
    /// The bootstrap is running; its output is held back.
    Withholding { held: Vec<u8>, until: Instant },
    /// Marks are flowing.
    Integrated,
    /// No integration: bytes pass untouched.
    Plain,
}

/// What of the shell's output the user sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// Everything: the agent is not at work.
    All,
    /// The agent is at work: only the output of the commands it runs.
    Commands,
    /// The agent is done and asked the shell for a fresh prompt: only what
    /// commands print (one the user typed ahead may run first) until that
    /// prompt starts. (A prompt redrawn in place starts with the same mark:
    /// only one after the end of a command line counts.)
    UntilPrompt { line_done: bool },
}

struct Running {
    command: Option<String>,
    cwd: Option<String>,
    started: SystemTime,
    output: Capture,
}

pub(crate) struct Terminal {
    scanner: Scanner,
    phase: Phase,
    cwd: Option<String>,
    running: Option<Running>,
    /// The prompt being drawn (between the A and B marks), and the last
    /// line of the last one drawn: a question's echo redraws it.
    prompt: Option<Vec<u8>>,
    last_prompt: Vec<u8>,
    /// Whether a question hands the screen to the agent.
    agent: bool,
    shown: Shown,
    /// What the agent's commands print is made safe on its way.
    sanitizer: Sanitizer,
    /// What was typed: marks must fit it.
    typed: Arc<Mutex<Typed>>,
    /// The echo of the line being typed at the prompt (since B).
    echo: Option<Vec<u8>>,
    /// Marks dropped since the last report, and when that was.
    dropped: u64,
    reported: Option<Instant>,
    /// Output bytes since the shell's last prompt ended (B), while no
    /// command has started and nothing looked like another program: the
    /// shell is at a fresh prompt.
    since_prompt: Option<usize>,
    /// What the shell's bootstrap bound.
    caps: Caps,
    /// The most recent commands, oldest first.
    pub(crate) history: std::collections::VecDeque<CommandRecord>,
}

/// What became of one chunk of the target's output.
pub(crate) struct Processed {
    pub(crate) to_client: Bytes,
    pub(crate) finished: Vec<CommandRecord>,
    /// Questions caught at the prompt, with where in `to_client` the
    /// answer belongs.
    pub(crate) questions: Vec<(usize, Question)>,
    /// A prompt started in this chunk.
    pub(crate) prompt: bool,
    /// The shell finished a command line in this chunk (run or not: an
    /// empty line, one it could not parse, one cancelled with Ctrl-C).
    pub(crate) line_done: bool,
    /// The shell reported its directory (OSC 7) in this chunk.
    pub(crate) cwd: bool,
    /// Marks were dropped that did not fit what was typed: reported at
    /// most once a minute.
    pub(crate) integrity: Option<Integrity>,
}

/// The keys of walissh's own the bootstrap bound in the shell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Caps {
    /// Its Enter (`ACCEPT`) and the new-nonce key (`ROTATE`).
    pub(crate) keys: bool,
    /// Bracketed paste inserts typed text as it is.
    pub(crate) paste: bool,
}

/// walissh's Enter for the lines the agent types, and the key that gives
/// the shell a new nonce (32 hex digits follow it).
pub(crate) const ACCEPT: &[u8] = b"\x1b[210~";
pub(crate) const ROTATE: &[u8] = b"\x1b[212~";

/// A new nonce: 128 random bits in hex.
pub(crate) fn nonce() -> String {
    use rand::RngExt;
    let n: u128 = rand::rng().random();
    format!("{n:032x}")
}

/// Output after a prompt that still leaves the shell at it: its right
/// prompt, a redraw of the line.
const PROMPT_TAIL: usize = 512;

/// Marks dropped because they did not fit what walissh saw typed: the
/// latest, and how many since the last report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Integrity {
    pub(crate) mark: &'static str,
    pub(crate) reason: &'static str,
    pub(crate) dropped: u64,
}

impl Integrity {
    /// Its `integrity` audit event.
    pub(crate) fn event(&self, ids: &crate::audit::Ids) -> crate::audit::Event {
        ids.event("integrity")
            .field("mark", self.mark)
            .field("reason", self.reason)
            .field("dropped", self.dropped)
    }
}

impl Terminal {
    /// A terminal whose shell runs walissh's bootstrap for `nonce`. With
    /// `agent`, a question hides the shell's drawing until
    /// [`Terminal::agent_done`].
    pub(crate) fn integrated(nonce: &str, agent: bool) -> Terminal {
        Terminal {
            scanner: Scanner::new(nonce),
            phase: Phase::Withholding {
                held: Vec::new(),
                until: Instant::now() + BOOTSTRAP_TIMEOUT,
            },
            cwd: None,
            running: None,
            prompt: None,
            last_prompt: Vec::new(),
            agent,
            shown: Shown::All,
            sanitizer: Sanitizer::default(),
            typed: Arc::default(),
            echo: None,
            dropped: 0,
            reported: None,
            since_prompt: None,
            caps: Caps::default(),
            history: Default::default(),
        }
    }

    /// The agent is done. With `fresh_prompt` it has asked the shell for a
    /// new prompt, and nothing is shown until it starts; without, the shell
    /// is not at a prompt (a command the agent could not stop is the
    /// user's now) and everything is shown again.
    pub(crate) fn agent_done(&mut self, fresh_prompt: bool) {
        self.shown = if fresh_prompt {
            Shown::UntilPrompt { line_done: false }
        } else {
            Shown::All
        };
    }

    /// What the shell's bootstrap bound.
    pub(crate) fn caps(&self) -> Caps {
        self.caps
    }

    /// Whether the shell is at a fresh prompt: its last prompt ended (B),
    /// no command started since, and what it printed after was a short
    /// tail on the same line, not another program's screen.
    pub(crate) fn at_prompt(&self) -> bool {
        self.since_prompt.is_some()
    }

    /// walissh is giving the shell `nonce` (typed after [`ROTATE`]).
    pub(crate) fn expect_nonce(&mut self, nonce: &str) {
        self.scanner.expect(nonce);
    }

    /// What the input side feeds: the keys forwarded to the shell.
    pub(crate) fn typed(&self) -> Arc<Mutex<Typed>> {
        self.typed.clone()
    }

    /// The shell's directory, as it last reported it.
    pub(crate) fn cwd(&self) -> Option<&str> {
        self.cwd.as_deref()
    }

    /// Whether the shell's output is shown now: while the agent works or
    /// winds down, only what commands print.
    fn visible(&self) -> bool {
        match self.shown {
            Shown::All => true,
            Shown::Commands | Shown::UntilPrompt { .. } => self.running.is_some(),
        }
    }

    /// When the bootstrap must have answered by, while it has not.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Withholding { until, .. } => Some(*until),
            _ => None,
        }
    }

    /// The bootstrap did not answer in time, or the output ended: show
    /// what was held back, as it was. Marks that come later are still read
    /// (a slow rc file must not turn the audit off).
    pub(crate) fn give_up(&mut self) -> Vec<u8> {
        match std::mem::replace(&mut self.phase, Phase::Integrated) {
            Phase::Withholding { held, .. } => {
                tracing::info!(
                    "shell integration did not answer in time; showing its output as it is"
                );
                held
            }
            other => {
                self.phase = other;
                Vec::new()
            }
        }
    }

    /// The output ended: an escape sequence left unfinished was not a mark.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        self.scanner.flush()
    }

    /// Takes one chunk of the target's output.
    /// Output without an escape byte, in the middle of a session, is
    /// passed on as it is (bulk output must not pay for the model).
    pub(crate) fn output(&mut self, data: Bytes) -> Processed {
        let untouched = match self.phase {
            Phase::Plain => true,
            Phase::Integrated => {
                self.visible() && self.scanner.is_idle() && memchr::memchr(0x1b, &data).is_none()
            }
            Phase::Withholding { .. } => false,
        };
        if untouched {
            if let (Phase::Integrated, Some(r)) = (&self.phase, self.running.as_mut()) {
                r.output.push(&data);
            }
            self.keep_prompt(&data);
            self.keep_echo(&data);
            // Only the agent's commands' output is made safe: while it
            // winds down, what runs is the user's own.
            let to_client = match self.shown {
                Shown::Commands => match self.sanitizer.clean(&data) {
                    std::borrow::Cow::Borrowed(_) => data,
                    std::borrow::Cow::Owned(safe) => Bytes::from(safe),
                },
                _ => data,
            };
            return Processed {
                to_client,
                finished: Vec::new(),
                questions: Vec::new(),
                prompt: false,
                line_done: false,
                cwd: false,
                integrity: None,
            };
        }
        let scanned = self.scanner.scan(&data);
        let out: &[u8] = &scanned.out;
        let mut to_client = Vec::with_capacity(out.len());
        let mut finished = Vec::new();
        let mut questions = Vec::new();
        let mut prompt = false;
        let mut line_done = false;
        let mut cwd = false;
        let mut integrity = None;
        let mut from = 0;
        for (at, mark) in scanned.marks {
            self.pass(&out[from..at], &mut to_client);
            from = at;
            if let Some(why) = self.misfit(&mark) {
                integrity = self.dropped(why).or(integrity);
                if let Mark::Question { kept: false, .. } = mark {
                    // bash wiped the line: say why nothing happens.
                    to_client.extend_from_slice(QUESTION_DROPPED);
                }
                continue;
            }
            match mark {
                Mark::Question { text, kept } if matches!(self.phase, Phase::Integrated) => {
                    let prompt = self.last_prompt.clone();
                    questions.push((to_client.len(), Question { text, kept, prompt }));
                    if self.agent {
                        self.shown = Shown::Commands;
                    }
                    continue;
                }
                Mark::PromptStart => {
                    prompt = true;
                    self.prompt = Some(Vec::new());
                    self.since_prompt = None;
                    if self.shown == (Shown::UntilPrompt { line_done: true }) {
                        self.shown = Shown::All;
                    }
                }
                Mark::Cwd(_) => cwd = true,
                Mark::CommandEnd { .. } => {
                    line_done = true;
                    if let Shown::UntilPrompt { line_done } = &mut self.shown {
                        *line_done = true;
                    }
                }
                _ => {}
            }
            self.mark(mark, &mut to_client, &mut finished);
        }
        self.pass(&out[from..], &mut to_client);
        Processed {
            to_client: Bytes::from(to_client),
            finished,
            questions,
            prompt,
            line_done,
            cwd,
            integrity,
        }
    }

    /// Why `mark` does not fit what was typed, if it does not: a question
    /// needs the line typed with its text, a command start an Enter no
    /// earlier mark took. (A finish needs a running command: one without
    /// ends nothing, see [`Terminal::mark`].) Marks of the bootstrap, before
    /// anything was typed, are not asked.
    fn misfit(&mut self, mark: &Mark) -> Option<(&'static str, &'static str)> {
        if !matches!(self.phase, Phase::Integrated) {
            return None;
        }
        let mut typed = self.typed.lock().unwrap_or_else(|e| e.into_inner());
        match mark {
            Mark::Question { text, .. } => {
                let echo = self.echo.as_deref().unwrap_or_default();
                let fits = typed.take_question(text, || echoed(echo, text));
                (!fits).then_some(("Q", "a question that was not typed at the prompt"))
            }
            Mark::OutputStart { .. } => {
                (!typed.take_enter()).then_some(("C", "a command start with no Enter typed"))
            }
            Mark::CommandEnd { .. } if self.running.is_none() => {
                typed.take_empty();
                None
            }
            _ => None,
        }
    }

    /// Counts a dropped mark; the report, when one is due.
    fn dropped(&mut self, (mark, reason): (&'static str, &'static str)) -> Option<Integrity> {
        self.dropped += 1;
        tracing::warn!("dropped a shell-integration mark ({mark}): {reason}");
        let now = Instant::now();
        if self.reported.is_some_and(|at| now < at + INTEGRITY_EVERY) {
            return None;
        }
        self.reported = Some(now);
        Some(Integrity {
            mark,
            reason,
            dropped: std::mem::take(&mut self.dropped),
        })
    }

    /// The echo of the line at the prompt is kept, up to a bound; and
    /// output after a prompt may show another program took the screen.
    fn keep_echo(&mut self, bytes: &[u8]) {
        if let Some(e) = self.echo.as_mut() {
            let room = ECHO_MAX.saturating_sub(e.len());
            e.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        if let Some(n) = self.since_prompt.as_mut() {
            *n += bytes.len();
            let elsewhere = *n > PROMPT_TAIL
                || memchr::memchr(b'\n', bytes).is_some()
                || memchr::memmem::find(bytes, b"\x1b[?10").is_some()
                || memchr::memmem::find(bytes, b"\x1b[?47").is_some();
            if elsewhere {
                self.since_prompt = None;
            }
        }
    }

    /// Bytes of a prompt being drawn are kept, up to a bound.
    fn keep_prompt(&mut self, bytes: &[u8]) {
        if let Some(p) = self.prompt.as_mut() {
            let room = PROMPT_MAX.saturating_sub(p.len());
            p.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }

    /// Output between marks: held back, or shown and captured.
    fn pass(&mut self, bytes: &[u8], to_client: &mut Vec<u8>) {
        self.keep_prompt(bytes);
        self.keep_echo(bytes);
        let visible = self.visible();
        match &mut self.phase {
            Phase::Withholding { held, .. } => {
                held.extend_from_slice(bytes);
                if held.len() > WITHHOLD_MAX {
                    to_client.append(held);
                    self.phase = Phase::Integrated;
                }
            }
            _ if visible => {
                if let Some(r) = self.running.as_mut() {
                    r.output.push(bytes);
                }
                if self.shown == Shown::Commands {
                    to_client.extend_from_slice(&self.sanitizer.clean(bytes));
                } else {
                    to_client.extend_from_slice(bytes);
                }
            }
            _ => {}
        }
    }

    fn mark(&mut self, mark: Mark, to_client: &mut Vec<u8>, finished: &mut Vec<CommandRecord>) {
        match mark {
            Mark::Ready {
                lines,
                newline,
                plain,
                keys,
                paste,
            } => {
                self.caps = Caps { keys, paste };
                if let Phase::Withholding { held, .. } = &mut self.phase {
                    let keep = cut_first_prompt(held, lines + usize::from(newline));
                    to_client.extend_from_slice(&held[..keep]);
                    self.phase = if plain {
                        Phase::Plain
                    } else {
                        Phase::Integrated
                    };
                }
            }
            Mark::Cwd(dir) => self.cwd = Some(dir),
            Mark::OutputStart { command } => {
                self.echo = None;
                self.since_prompt = None;
                self.running = Some(Running {
                    command,
                    cwd: self.cwd.clone(),
                    started: SystemTime::now(),
                    output: Capture::default(),
                });
            }
            Mark::CommandEnd { exit } => {
                // A D with no C before it ends nothing (an empty line, the
                // first prompt after the bootstrap).
                if let Some(r) = self.running.take() {
                    if self.shown == Shown::Commands {
                        to_client.extend(self.sanitizer.finish());
                    }
                    let record = CommandRecord {
                        command: r.command,
                        cwd: r.cwd,
                        exit_code: exit,
                        started: r.started,
                        ended: SystemTime::now(),
                        output: r.output,
                    };
                    if self.history.len() == KEEP_COMMANDS {
                        self.history.pop_front();
                    }
                    self.history.push_back(record.clone());
                    finished.push(record);
                }
            }
            Mark::InputStart => {
                self.echo = Some(Vec::new());
                self.since_prompt = Some(0);
                if let Some(p) = self.prompt.take() {
                    let start = memchr::memrchr(b'\n', &p).map_or(0, |i| i + 1);
                    self.last_prompt = p[start..].to_vec();
                }
            }
            Mark::PromptStart | Mark::Question { .. } | Mark::Rotated => {}
        }
    }
}

/// Shown where bash wiped a question line whose mark was dropped.
const QUESTION_DROPPED: &[u8] =
    b"\r\nwalissh: ignored a question the shell reported that was not typed here\r\n";

/// Whether the screen's echo of the line at the prompt shows `text` (for
/// a line typed with edits walissh does not follow).
fn echoed(echo: &[u8], text: &str) -> bool {
    let nz = |n: u16| std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN);
    let mut p = vt100::Parser::new(nz(16), nz(512), 0);
    p.process(echo);
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = squash(text);
    !text.is_empty() && squash(&p.screen().contents()).contains(&text)
}

/// Where the first prompt starts in the output held back during the
/// bootstrap: after the line break that precedes it. The prompt has
/// `breaks` line breaks of its own (counting the one the shell prints when
/// it accepts the bootstrap's line); everything before the one before
/// those (the login banner, the rc files' output) is kept.
fn cut_first_prompt(held: &[u8], breaks: usize) -> usize {
    held.iter()
        .enumerate()
        .rev()
        .filter(|(_, b)| **b == b'\n')
        .nth(breaks)
        .map_or(0, |(i, _)| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: &str = "feedbeef";

    impl Terminal {
        fn feed(&mut self, data: &[u8]) -> Processed {
            self.output(Bytes::copy_from_slice(data))
        }
    }

    fn m(s: &str) -> String {
        s.replace("{N}", N)
    }

    impl Terminal {
        /// Keys walissh forwarded to the shell.
        fn typed_keys(&self, keys: &str) {
            self.typed.lock().unwrap().keys(keys.as_bytes());
        }
    }

    #[test]
    fn bootstrap_traces_are_cut_and_the_banner_kept() {
        let mut t = Terminal::integrated(N, false);
        let first = t
            .feed(b"Linux 6.1 motd\r\nLast login: today\r\n\x1b[?2004hroot@h:~# \x1b[?2004l\r\r\n");
        assert!(first.to_client.is_empty());
        let rest = t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07\x1b]133;D;0;w={N}\x07\x1b]133;A;w={N}\x07root@h:~# \x1b]133;B;w={N}\x07").as_bytes());
        assert_eq!(
            String::from_utf8(rest.to_client.to_vec()).unwrap(),
            "Linux 6.1 motd\r\nLast login: today\r\nroot@h:~# "
        );
        assert!(rest.finished.is_empty());
        assert!(t.deadline().is_none());
    }

    #[test]
    fn a_two_line_prompt_is_cut_whole() {
        let mut t = Terminal::integrated(N, false);
        let out =
            t.feed(m("banner\r\n[user@h ~]\r\n$ \r\n\x1b]133;W;w={N};lines=1;nl=1\x07").as_bytes());
        assert_eq!(&out.to_client[..], b"banner\r\n");
    }

    #[test]
    fn commands_are_recorded_with_cwd_and_status() {
        let mut t = Terminal::integrated(N, false);
        t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
        t.typed_keys("ls -l\r");
        let out = t.feed(
            m("\x1b]7;w={N};/tmp\x07$ ls\r\n\x1b]133;C;w={N};cmd=ls -l\x07\x1b[1mfile\x1b[0m\r\n\x1b]133;D;2;w={N}\x07$ ")
                .as_bytes(),
        );
        assert_eq!(&out.to_client[..], b"$ ls\r\n\x1b[1mfile\x1b[0m\r\n$ ");
        let r = &out.finished[0];
        assert_eq!(r.command.as_deref(), Some("ls -l"));
        assert_eq!(r.cwd.as_deref(), Some("/tmp"));
        assert_eq!(r.exit_code, Some(2));
        assert_eq!(r.output.text(), "file\n");
        assert_eq!(t.history.len(), 1);
    }

    #[test]
    fn a_forged_end_does_not_end_the_command() {
        let mut t = Terminal::integrated(N, false);
        t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
        t.typed_keys("printf x\r");
        t.feed(m("\x1b]133;C;w={N};cmd=printf x\x07").as_bytes());
        let out = t.feed(b"\x1b]133;D;0\x07");
        assert!(out.finished.is_empty());
        assert_eq!(&out.to_client[..], b"\x1b]133;D;0\x07");
        let out = t.feed(m("\x1b]133;D;0;w={N}\x07").as_bytes());
        assert_eq!(out.finished.len(), 1);
    }

    #[test]
    fn questions_are_reported_where_they_were_asked() {
        let mut t = Terminal::integrated(N, false);
        t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
        t.typed_keys("? why\r");
        let out = t.feed(m("$ \r\x1b[K\r\x1b]133;Q;w={N};kept=0;text=? why\x07$ ").as_bytes());
        assert_eq!(&out.to_client[..], b"$ \r\x1b[K\r$ ");
        let q = Question {
            text: "? why".into(),
            kept: false,
            prompt: Vec::new(),
        };
        assert_eq!(out.questions, vec![(7, q)]);
        assert!(out.finished.is_empty());
    }

    #[test]
    fn while_the_agent_works_only_its_commands_output_is_shown() {
        let mut t = Terminal::integrated(N, true);
        t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
        t.typed_keys("? why\r\x05\x15df\r");
        // The question, then the shell's redraw of its prompt: hidden.
        let out = t.feed(
            m("\r\x1b[K\x1b]133;Q;w={N};kept=0;text=? why\x07\r\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07")
                .as_bytes(),
        );
        assert_eq!(&out.to_client[..], b"\r\x1b[K");
        assert_eq!(out.questions.len(), 1);
        // The echo of the typed command is hidden, its output shown, the
        // prompt after it hidden.
        let out = t.feed(
            m("df\r\n\x1b]133;C;w={N};cmd=df\x07/dev/sda1 97%\r\n\x1b]133;D;0;w={N}\x07\x1b]133;A;w={N}\x07$ ")
                .as_bytes(),
        );
        assert_eq!(&out.to_client[..], b"/dev/sda1 97%\r\n");
        assert_eq!(out.finished[0].output.text(), "/dev/sda1 97%\n");
        assert!(out.line_done);
        // Done: hidden until the fresh prompt starts (not a redraw of the
        // old one), then all shown.
        t.agent_done(true);
        t.typed_keys("\x05\x15\r");
        let out = t.feed(m("\r\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
        assert!(out.to_client.is_empty());
        let out = t.feed(m("\r\n\x1b]133;D;0;w={N}\x07\x1b]133;A;w={N}\x07$ ").as_bytes());
        assert_eq!(&out.to_client[..], b"$ ");
        assert!(out.finished.is_empty() && out.line_done);
        assert_eq!(&t.feed(b"typed").to_client[..], b"typed");
    }

    #[test]
    fn a_question_keeps_the_last_line_of_its_prompt() {
        let mut t = Terminal::integrated(N, true);
        t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
        t.typed_keys("? why\r");
        t.feed(m("\x1b]133;A;w={N}\x07[me@h ~]\r\n\x1b[1m$").as_bytes());
        t.feed(b" ");
        let out = t.feed(
            m("\x1b[0m\x1b]133;B;w={N}\x07\r\x1b[K\x1b]133;Q;w={N};kept=0;text=? why\x07")
                .as_bytes(),
        );
        assert_eq!(out.questions[0].1.prompt, b"\x1b[1m$ \x1b[0m");
    }

    #[test]
    fn giving_up_shows_everything_held_and_still_reads_marks() {
        let mut t = Terminal::integrated(N, false);
        t.feed(b"slow rc> ");
        assert_eq!(t.give_up(), b"slow rc> ");
        assert_eq!(&t.feed(b"x").to_client[..], b"x");
        t.typed_keys("ls\r");
        t.feed(m("\x1b]133;C;w={N};cmd=ls\x07").as_bytes());
        let out = t.feed(m("\x1b]133;D;0;w={N}\x07").as_bytes());
        assert_eq!(out.finished.len(), 1);
        assert!(out.to_client.is_empty());
    }

    #[test]
    fn marks_that_do_not_fit_what_was_typed_are_dropped_and_reported() {
        let mut t = Terminal::integrated(N, true);
        t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
        t.typed_keys("printf forged\r");
        // The command's own start takes its Enter; a second start, a
        // question nobody typed and a fake command line are dropped.
        let out = t.feed(
            m("\x1b]133;C;w={N};cmd=printf forged\x07\
               \x1b]133;Q;w={N};kept=0;text=? evil\x07\
               \x1b]133;C;w={N};cmd=rm -rf /home/alice\x07\
               \x1b]133;D;0;w={N}\x07")
            .as_bytes(),
        );
        assert!(out.questions.is_empty());
        assert_eq!(out.finished.len(), 1);
        assert_eq!(out.finished[0].command.as_deref(), Some("printf forged"));
        let i = out.integrity.expect("reported");
        assert_eq!((i.mark, i.dropped), ("Q", 1));
        assert!(String::from_utf8_lossy(&out.to_client).contains("walissh: ignored a question"));
        // Reported once a minute at most: the C was counted, not reported.
        let out = t.feed(m("\x1b]133;Q;w={N};kept=1;text=? again\x07").as_bytes());
        assert!(out.integrity.is_none() && out.questions.is_empty());
        assert_eq!(t.dropped, 2);
    }

    #[test]
    fn a_question_typed_with_edits_is_checked_against_its_echo() {
        let mut t = Terminal::integrated(N, false);
        t.feed(m("\x1b]133;W;w={N};lines=0;nl=1\x07").as_bytes());
        t.feed(m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
        // `? wy`, Left, `h`: readline redraws the end of the line.
        t.typed_keys("? wy\x1b[Dh\r");
        let out = t.feed(m("? wy\x08hy\x08\x1b]133;Q;w={N};kept=0;text=? why\x07").as_bytes());
        assert_eq!(out.questions.len(), 1);
        t.feed(m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
        t.typed_keys("? a\x1b[Db\r");
        let out = t.feed(m("? ba\x1b]133;Q;w={N};kept=0;text=? other\x07").as_bytes());
        assert!(out.questions.is_empty());
    }

    #[test]
    fn a_fresh_prompt_is_one_nothing_has_drawn_over() {
        let mut t = Terminal::integrated(N, true);
        t.feed(m("\x1b]133;W;w={N};lines=0;nl=1;keys=1;paste=1\x07").as_bytes());
        assert_eq!(
            t.caps(),
            Caps {
                keys: true,
                paste: true
            }
        );
        assert!(!t.at_prompt());
        t.feed(m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
        assert!(t.at_prompt());
        // A right prompt, a redraw: still there.
        t.feed(b"\x1b[s   [12:00]\x1b[u");
        assert!(t.at_prompt());
        // A forged prompt, then a pager's screen: not the shell's.
        t.feed(m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
        t.feed(b"\x1b[?1049h\x1b[Hline 1");
        assert!(!t.at_prompt());
        t.feed(m("\x1b]133;A;w={N}\x07$ \x1b]133;B;w={N}\x07").as_bytes());
        t.feed(b"commit 1\r\ncommit 2\r\n:");
        assert!(!t.at_prompt());
    }
}
