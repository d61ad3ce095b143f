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
mod levels;
pub(crate) mod marks;
pub(crate) mod nested;
mod output;
pub(crate) mod own_keys;
pub(crate) mod prompt;
pub(crate) mod sanitize;
pub(crate) mod screen;
pub(crate) mod typed;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use tokio::time::Instant;

pub(crate) use bootstrap::Shell;
use marks::{Level, Mark, Scanner, ShellUser};
use nested::Nesting;
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

/// A line the user typed at the prompt that starts with an `[ai] prefixes`
/// entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Question {
    /// The line as typed, prefix included.
    pub(crate) text: String,
    /// Whether the line is still on the user's screen (zsh keeps it; bash
    /// wipes it before walissh hears of it).
    pub(crate) kept: bool,
    /// The last line of the prompt it was typed at, as drawn.
    pub(crate) prompt: Vec<u8>,
}

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
    /// The shell it ran in.
    pub(crate) place: Place,
    /// Its start came while another command was running: a start no
    /// command of the user's should make (a forged one, or type-ahead
    /// that printed a mark). Both are kept; this one is marked.
    pub(crate) overlapped: bool,
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
    /// See [`CommandRecord::overlapped`].
    overlapped: bool,
}

/// One integrated shell: the login shell, or one nested in it.
#[derive(Default)]
struct ShellState {
    cwd: Option<String>,
    running: Option<Running>,
    /// The prompt being drawn (between the A and B marks), and the last
    /// line of the last one drawn: a question's echo redraws it.
    prompt: Option<Vec<u8>>,
    last_prompt: Vec<u8>,
    /// The echo of the line being typed at the prompt (since B).
    echo: Option<Vec<u8>>,
    /// Output bytes since the shell's last prompt ended (B), while no
    /// command has started and nothing looked like another program: the
    /// shell is at a fresh prompt.
    since_prompt: Option<usize>,
    /// What the shell's bootstrap bound.
    caps: Caps,
    /// Who it runs as and where, and the command line that started it
    /// (none for the login shell).
    place: Place,
}

/// Where a shell runs, for the audit and the agent's context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Place {
    /// 0 for the login shell, 1 for a shell started from it, …
    pub(crate) depth: usize,
    pub(crate) user: Option<String>,
    /// Its host, when it is not the login shell's.
    pub(crate) host: Option<String>,
    /// The command line that started it.
    pub(crate) via: Option<String>,
}

pub(crate) struct Terminal {
    scanner: Scanner,
    phase: Phase,
    /// The innermost integrated shell, and those it was started from,
    /// the login shell first.
    shell: ShellState,
    outer: Vec<ShellState>,
    /// Following the user into a shell started from the prompt, with the
    /// `[ai] prefixes` its bootstrap gets; None: not followed.
    follow: Option<Vec<String>>,
    nesting: Option<Nesting>,
    /// The login shell's host, to tell a nested shell's apart.
    login_host: Option<String>,
    /// Whether a question hands the screen to the agent.
    agent: bool,
    shown: Shown,
    /// What the agent's commands print is made safe on its way.
    sanitizer: Sanitizer,
    /// What was typed: marks must fit it.
    typed: Arc<Mutex<Typed>>,
    /// The depth of a prompt walissh does not own, 0 when there is none:
    /// a shell started from the prompt that walissh did not integrate
    /// (dash, a shell that did not answer), or whatever a command the user
    /// runs in the innermost integrated shell shows (a shell under
    /// `script` or Python's `pty.spawn`, which no command line says
    /// starts one). The input side reads commands off the screen there,
    /// and refuses questions.
    unowned: Arc<AtomicUsize>,
    /// New nonces the shell confirmed (R marks), ever.
    rotations: u64,
    /// The login shell's bootstrap said it is ready (W): said once only.
    ready: bool,
    /// Marks dropped since the last report, and when that was.
    dropped: u64,
    reported: Option<Instant>,
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
    /// Command lines the shell started running in this chunk.
    pub(crate) started: Vec<String>,
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
    /// What walissh must type into the shell now: the probe or the
    /// bootstrap of a nested shell. The user's keys wait while
    /// [`Terminal::deadline`] is set.
    pub(crate) type_in: Option<Vec<u8>>,
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

/// What the user is told when walissh gives up following a shell that
/// asked a question before its prompt.
const GAVE_UP: &str = "walissh: this shell asked a question before its prompt, so walissh \
    types nothing into it and does not integrate it: its commands are read off the screen, \
    and `?` lines are refused here";

/// Puts `line` on a line of its own in `to_client`, before the last line
/// it draws (a prompt, most often), so that line stays whole.
fn say(to_client: &mut Vec<u8>, line: &str) {
    let at = memchr::memrchr(b'\n', to_client).map_or(0, |i| i + 1);
    let lead = if at == 0 { "\r\n" } else { "" };
    let text = format!("{lead}{line}\r\n");
    to_client.splice(at..at, text.into_bytes());
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
            shell: ShellState::default(),
            outer: Vec::new(),
            follow: None,
            nesting: None,
            login_host: None,
            agent,
            shown: Shown::All,
            sanitizer: Sanitizer::default(),
            typed: Arc::default(),
            unowned: Arc::default(),
            rotations: 0,
            ready: false,
            dropped: 0,
            reported: None,
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

    /// Follow the user into shells started from the prompt, giving each
    /// the bootstrap with `prefixes` (the `[ai] prefixes`).
    pub(crate) fn follow_nested(mut self, prefixes: Vec<String>) -> Terminal {
        self.follow = Some(prefixes);
        self
    }

    /// Where the innermost integrated shell runs.
    pub(crate) fn place(&self) -> &Place {
        &self.shell.place
    }

    /// What the shell's bootstrap bound.
    pub(crate) fn caps(&self) -> Caps {
        self.shell.caps
    }

    /// Whether the shell is at a fresh prompt: its last prompt ended (B),
    /// no command started since, and what it printed after was a short
    /// tail on the same line, not another program's screen.
    pub(crate) fn at_prompt(&self) -> bool {
        self.shell.since_prompt.is_some()
    }

    /// How many new nonces the shell has confirmed: one more each time
    /// an R mark answers walissh's [`ROTATE`] with the nonce it replaces.
    pub(crate) fn rotations(&self) -> u64 {
        self.rotations
    }

    /// walissh is giving the shell `nonce` (typed after [`ROTATE`]).
    pub(crate) fn expect_nonce(&mut self, nonce: &str) {
        self.scanner.expect(nonce);
    }

    /// Where the input side learns the depth of a prompt walissh does not
    /// own (0: none).
    pub(crate) fn unowned(&self) -> Arc<AtomicUsize> {
        self.unowned.clone()
    }

    /// A shell started from the innermost one was not integrated: its
    /// commands are read off the screen until it ends.
    fn not_followed(&mut self) {
        self.scanner.pending(None, false);
        self.unowned.store(self.outer.len() + 1, Ordering::Relaxed);
    }

    /// What the input side feeds: the keys forwarded to the shell.
    pub(crate) fn typed(&self) -> Arc<Mutex<Typed>> {
        self.typed.clone()
    }

    /// The shell's directory, as it last reported it.
    pub(crate) fn cwd(&self) -> Option<&str> {
        self.shell.cwd.as_deref()
    }

    /// Whether the shell's output is shown now: while the agent works or
    /// winds down, only what commands print.
    fn visible(&self) -> bool {
        match self.shown {
            Shown::All => true,
            Shown::Commands | Shown::UntilPrompt { .. } => self.shell.running.is_some(),
        }
    }

    /// When the bootstrap (the login shell's, or a nested shell's probe
    /// or bootstrap) must have answered by, while it has not. The user's
    /// keys wait meanwhile.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Withholding { until, .. } => Some(*until),
            _ => self.nesting.as_ref().and_then(Nesting::deadline),
        }
    }

    /// The bootstrap did not answer in time, or the output ended: show
    /// what was held back, as it was. Marks that come later are still read
    /// (a slow rc file must not turn the audit off).
    pub(crate) fn give_up(&mut self) -> Vec<u8> {
        if !matches!(self.phase, Phase::Withholding { .. }) {
            // A nested shell that did not answer: what it printed stays
            // dropped (the screen still shows its prompt), and it is left
            // as it is.
            if self.nesting.take().is_some_and(|n| n.deadline().is_some()) {
                tracing::info!("a nested shell did not answer walissh's probe; left as it is");
                self.not_followed();
            }
            return Vec::new();
        }
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
                self.visible()
                    && self.nesting.is_none()
                    && self.scanner.is_idle()
                    && memchr::memchr(0x1b, &data).is_none()
            }
            Phase::Withholding { .. } => false,
        };
        if untouched {
            if let (Phase::Integrated, Some(r)) = (&self.phase, self.shell.running.as_mut()) {
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
                started: Vec::new(),
                prompt: false,
                line_done: false,
                cwd: false,
                integrity: None,
                type_in: None,
            };
        }
        let scanned = self.scanner.scan(&data);
        let out: &[u8] = &scanned.out;
        let mut to_client = Vec::with_capacity(out.len());
        let mut finished = Vec::new();
        let mut questions = Vec::new();
        let mut started = Vec::new();
        let mut prompt = false;
        let mut line_done = false;
        let mut cwd = false;
        let mut integrity = None;
        let mut type_in = None;
        let mut from = 0;
        for (at, level, mark) in scanned.marks {
            self.pass(&out[from..at], &mut to_client);
            from = at;
            let level = match level {
                Level::Pending => {
                    type_in = self.nested_answer(mark, &mut finished).or(type_in);
                    continue;
                }
                Level::At(level) => level,
            };
            if level < self.outer.len() {
                self.leave_to(level, &mut finished);
            }
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
                    let prompt = self.shell.last_prompt.clone();
                    questions.push((to_client.len(), Question { text, kept, prompt }));
                    if self.agent {
                        self.shown = Shown::Commands;
                    }
                    continue;
                }
                Mark::PromptStart => {
                    prompt = true;
                    self.shell.prompt = Some(Vec::new());
                    self.shell.since_prompt = None;
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
            let starts = matches!(mark, Mark::OutputStart { .. });
            self.mark(mark, &mut to_client, &mut finished);
            // Shown commands only: the agent's own marks its actions.
            if starts
                && self.shown == Shown::All
                && let Some(c) = self.shell.running.as_ref().and_then(|r| r.command.clone())
            {
                started.push(c);
            }
        }
        self.pass(&out[from..], &mut to_client);
        let type_in = type_in.or_else(|| self.probe(&mut to_client));
        Processed {
            to_client: Bytes::from(to_client),
            finished,
            questions,
            started,
            prompt,
            line_done,
            cwd,
            integrity,
            type_in,
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
                // The prompt's last line first: the shell's redraws count
                // columns from the row's start (a search's `\r\e[24P`).
                let echo = self.shell.echo.as_deref().unwrap_or_default();
                let row = [self.shell.last_prompt.as_slice(), echo].concat();
                let fits = typed.take_question(text, || echoed(&row, text));
                (!fits).then_some(("Q", "a question that was not typed at the prompt"))
            }
            Mark::OutputStart { .. } => {
                (!typed.take_enter()).then_some(("C", "a command start with no Enter typed"))
            }
            Mark::CommandEnd { .. } if self.shell.running.is_none() => {
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
        if let Some(e) = self.shell.echo.as_mut() {
            let room = ECHO_MAX.saturating_sub(e.len());
            e.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        if let Some(n) = self.shell.since_prompt.as_mut() {
            *n += bytes.len();
            let elsewhere = *n > PROMPT_TAIL
                || memchr::memchr(b'\n', bytes).is_some()
                || memchr::memmem::find(bytes, b"\x1b[?10").is_some()
                || memchr::memmem::find(bytes, b"\x1b[?47").is_some();
            if elsewhere {
                self.shell.since_prompt = None;
            }
        }
    }

    /// Bytes of a prompt being drawn are kept, up to a bound.
    fn keep_prompt(&mut self, bytes: &[u8]) {
        if let Some(p) = self.shell.prompt.as_mut() {
            let room = PROMPT_MAX.saturating_sub(p.len());
            p.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }

    /// Output between marks: held back, or shown and captured.
    fn pass(&mut self, bytes: &[u8], to_client: &mut Vec<u8>) {
        self.keep_prompt(bytes);
        self.keep_echo(bytes);
        if let Some(n) = self.nesting.as_mut() {
            let hides = n.started();
            if !n.output(bytes) {
                self.nesting = None;
            }
            if hides {
                return;
            }
        }
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
                if let Some(r) = self.shell.running.as_mut() {
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
                account,
            } => {
                // Only the login shell's bootstrap says what it bound and
                // who it runs as, once (a nested one's W comes at the
                // pending level, to `nested_answer`). Said again later, by
                // anything holding the nonce, it would turn walissh's
                // checks off, or make a root shell look like a user's.
                if std::mem::replace(&mut self.ready, true) {
                    return;
                }
                let held = match &mut self.phase {
                    Phase::Withholding { held, .. } => std::mem::take(held),
                    // The bootstrap was slow: what it held is shown already.
                    _ => Vec::new(),
                };
                self.shell.caps = Caps { keys, paste };
                self.login_host = account.host;
                self.shell.place.user = account.user;
                if matches!(self.phase, Phase::Withholding { .. }) {
                    let keep = cut_first_prompt(&held, lines + usize::from(newline));
                    to_client.extend_from_slice(&held[..keep]);
                    self.phase = if plain {
                        Phase::Plain
                    } else {
                        Phase::Integrated
                    };
                }
            }
            Mark::Cwd(dir) => self.shell.cwd = Some(dir),
            Mark::OutputStart { command } => {
                // Another start while one runs: the running one's row is
                // kept (its end unknown), not replaced.
                let overlapped = match self.shell.running.take() {
                    Some(r) => {
                        let place = self.shell.place.clone();
                        let record = self.record(r, None, place);
                        finished.push(record);
                        true
                    }
                    None => false,
                };
                self.shell.echo = None;
                self.shell.since_prompt = None;
                // A command that starts a shell is watched for its prompt,
                // unless the agent runs it.
                let follow = self.follow.is_some()
                    && self.shown == Shown::All
                    && command.as_deref().is_some_and(nested::starts_shell);
                self.nesting = follow.then(Nesting::watching);
                if follow {
                    self.typed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .line_taken();
                }
                // A shell the user's command shows is not one walissh
                // owns, until it is integrated; nor is what a command the
                // shell could not name in full may show (a line the
                // history left out, one cut at the scripts' limit). The
                // limit counts in bytes here: bash cuts characters, which
                // are bytes without a multibyte locale, and a cut line of
                // multibyte characters is half as many or fewer.
                let shell = command.as_deref().is_none_or(|c| {
                    nested::may_show_a_shell(c) || c.len() >= bootstrap::COMMAND_MAX
                });
                if self.shown == Shown::All && shell {
                    self.unowned.store(self.outer.len() + 1, Ordering::Relaxed);
                }
                self.shell.running = Some(Running {
                    command,
                    cwd: self.shell.cwd.clone(),
                    started: SystemTime::now(),
                    output: Capture::default(),
                    overlapped,
                });
            }
            Mark::CommandEnd { exit } => {
                self.shell.echo = None;
                // A D with no C before it ends nothing (an empty line, the
                // first prompt after the bootstrap).
                // The command that was to start a shell ended first.
                if self.nesting.as_ref().is_some_and(|n| !n.started()) {
                    self.nesting = None;
                    self.scanner.pending(None, false);
                }
                self.unowned.store(0, Ordering::Relaxed);
                if let Some(r) = self.shell.running.take() {
                    if self.shown == Shown::Commands {
                        to_client.extend(self.sanitizer.finish());
                    }
                    let place = self.shell.place.clone();
                    finished.push(self.record(r, exit, place));
                }
            }
            Mark::InputStart => {
                if matches!(self.nesting, Some(Nesting::Settling)) {
                    self.nesting = None;
                }
                self.shell.since_prompt = Some(0);
                let prompt = self.shell.prompt.take();
                match (self.shell.echo.as_mut(), prompt) {
                    // The prompt drawn again while the line is edited
                    // (bash after Ctrl-R): the echo goes on (it holds the
                    // prompt as drawn, too), since what follows redraws
                    // only what changed.
                    (Some(_), _) => {}
                    (None, p) => {
                        self.shell.echo = Some(Vec::new());
                        if let Some(p) = p {
                            let start = memchr::memrchr(b'\n', &p).map_or(0, |i| i + 1);
                            self.shell.last_prompt = p[start..].to_vec();
                        }
                    }
                }
            }
            // The line is done: the next prompt's echo starts afresh.
            Mark::Question { .. } => self.shell.echo = None,
            Mark::Rotated(_) => self.rotations += 1,
            Mark::PromptStart | Mark::Probed { .. } => {}
        }
    }

    /// A finished command's record, kept for the agent's context.
    fn record(&mut self, r: Running, exit_code: Option<i32>, place: Place) -> CommandRecord {
        let record = CommandRecord {
            command: r.command,
            cwd: r.cwd,
            exit_code,
            started: r.started,
            ended: SystemTime::now(),
            output: r.output,
            place,
            overlapped: r.overlapped,
        };
        if self.history.len() == KEEP_COMMANDS {
            self.history.pop_front();
        }
        self.history.push_back(record.clone());
        record
    }
}

/// Shown where bash wiped a question line whose mark was dropped.
const QUESTION_DROPPED: &[u8] =
    b"\r\nwalissh: ignored a question the shell reported that was not typed here\r\n";

/// Whether the screen's echo of the line at the prompt showed `text` (for
/// a line typed with edits walissh does not follow). Read before each
/// carriage return as well as at the end: bash wipes the line (`\r\e[K`)
/// before it reports the question, and redraws it from its start after
/// Ctrl-L, Tab and history moves.
fn echoed(echo: &[u8], text: &str) -> bool {
    let nz = |n: u16| std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN);
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = squash(text);
    if text.is_empty() {
        return false;
    }
    let mut p = vt100::Parser::new(nz(16), nz(512), 0);
    let shows = |p: &vt100::Parser| squash(&p.screen().contents()).contains(&text);
    let mut from = 0;
    for cr in memchr::memchr_iter(b'\r', echo) {
        p.process(&echo[from..cr]);
        if shows(&p) {
            return true;
        }
        from = cr;
    }
    p.process(&echo[from..]);
    shows(&p)
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
mod tests;
