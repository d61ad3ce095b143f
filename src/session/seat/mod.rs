//! The agent's seat in one interactive session: the [`Host`] the ReAct loop
//! runs against, made of the user's own terminal and shell.
//!
//! The seat runs beside the session's two pumps, in the same task, and
//! talks to them over channels ([`wires`]): it draws on the client's screen
//! through the client pump (so its text and the shell's output never
//! interleave), types into the shell through the target pump, gets the
//! user's keys while a question is being answered, and learns from the
//! terminal model when the shell has finished a command line. Commands
//! the user approved are typed into their shell; commands the policy runs
//! unasked run clean on a channel of their own ([`exec`]), in the prompt's
//! directory, their output streamed to the same screen. While a
//! question is answered the terminal model hides the shell's own drawing
//! (`Terminal`), so the agent owns the screen but for its commands' output.
//! When it is done the seat asks the shell for a fresh prompt, and the user
//! is back where they were.
//!
//! The seat is given a [`Desk`]: the audit sink, the runner, the upstream
//! settings and the user's settings for each question. It never sees the
//! bastion.

mod host;
mod wires;
mod workflow;

pub(crate) use wires::{ClientEnds, Input, SeatEnds, TargetEnds, wires};

use crate::audit::Kind;
use workflow::set_facts;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Shared;
use crate::agent::Agent;
use crate::agent::exec;
use crate::agent::four_eyes::{self, Second};
use crate::agent::mcp::Toolbox;
use crate::agent::parallel::{Console, Member, Target};
use crate::agent::policy::Prompt;
use crate::agent::react::{self, Approval, Ask, Host, Outcome};
use crate::agent::render::{Draw, Painter, Unterminated};
use crate::agent::team::{Item, WorkflowSpec};
use crate::audit::recording::Recording;
use crate::audit::{Audit, Event, Ids};
use crate::config::AiMode;
use crate::config::WorkflowKind;
use crate::context::providers::{Brief, Snapshot};
use crate::context::redact::Numbering;
use crate::context::store::Memory;
use crate::terminal::sanitize::Sanitizer;
use crate::terminal::screen::Screen;
use crate::terminal::{ACCEPT, CommandRecord, Question, ROTATE};
use crate::upstream::sandbox::Wall;
use crate::upstream::{Runner, UpstreamSettings};

/// How long a command must have been silent, on a line that looks like a
/// prompt, before walissh takes it to be waiting for input.
const INPUT_WAIT: Duration = Duration::from_secs(2);
/// How often a silent command's screen is looked at again.
const LOOK_AGAIN: Duration = Duration::from_millis(500);
/// How long each step of interrupting a command may take.
const INTERRUPT_WAIT: Duration = Duration::from_secs(3);
/// What interrupting types, in turn: Ctrl-C, `q` (pagers ignore Ctrl-C),
/// Ctrl-\ (SIGQUIT).
const INTERRUPT_KEYS: [&[u8]; 3] = [b"\x03", b"q", b"\x1c"];
/// Typed before each line: Ctrl-E, Ctrl-U empty whatever the prompt holds
/// (a key meant for a command that reached the prompt instead, a `q` of an
/// interruption), so the line that runs is the one that was checked.
const CLEAR_LINE: &str = "\x05\x15";
/// How long the shell may take to show a fresh prompt before walissh
/// refuses to type a command: it types only into the shell.
const PROMPT_WAIT: Duration = Duration::from_secs(3);
/// Bytes of a clean command's output sent to the client pump and not yet
/// written, at most: beyond, the command is not read.
const OUTPUT_AHEAD: usize = 64 * 1024;

/// A question caught at the prompt, with what the terminal knew then.
pub(crate) struct Asked {
    pub(crate) question: Question,
    pub(crate) snapshot: Snapshot,
}

/// What the seat is given of its session and of the bastion: where its
/// rows go, how its commands run, and the user's settings. Nothing more,
/// so what the agent can touch is read off this struct.
pub(crate) struct Desk<'a> {
    pub(crate) audit: &'a Audit,
    /// Where the agent's actions get their markers.
    pub(crate) recording: Option<&'a Recording>,
    pub(crate) ids: &'a Ids,
    pub(crate) runner: &'a Runner,
    pub(crate) upstream: &'a UpstreamSettings,
    pub(crate) screen: Option<&'a Screen>,
    pub(crate) shared: &'a Shared,
    /// The user's settings for the next question: the session decides
    /// what a reload may change (see `Pumps::settings` in `bridge`).
    pub(crate) settings: &'a (dyn Fn() -> Settings + Sync),
    /// The bastion's desk of commands waiting for a second approval.
    pub(crate) approvals: &'a crate::agent::four_eyes::Approvals,
}

impl<'a> Desk<'a> {
    /// Where the agent's commands run apart from the user's shell.
    fn apart(&self, timeout: Duration) -> exec::Apart<'a> {
        exec::Apart {
            runner: self.runner,
            upstream: self.upstream,
            user: &self.ids.user,
            timeout,
        }
    }
}

/// What a user's question runs under.
#[derive(Clone)]
pub(crate) struct Settings {
    /// The agents, workflows and skills assembled from the config.
    pub(crate) agent: Arc<Agent>,
    /// The user's `ai` mode.
    pub(crate) mode: AiMode,
    /// Every command of the agent here needs a second approval
    /// (`[[targets]] four_eyes`).
    pub(crate) four_eyes_target: bool,
    /// Which commands need one: the newest config's, whichever agent
    /// answers.
    pub(crate) four_eyes: crate::agent::four_eyes::Rule,
}

/// Answers the session's questions, one at a time, until the session ends.
pub(crate) async fn serve(desk: Desk<'_>, ends: SeatEnds) {
    let SeatEnds {
        mut questions,
        draw,
        lines,
        typed,
        keys,
        mut cancel,
    } = ends;
    let settings = (desk.settings)();
    let mut seat = Seat {
        painter: Painter::new(desk.shared.cols()),
        toolbox: Arc::new(Toolbox::new(settings.agent.mcp.clone(), &desk.ids.user)),
        settings,
        desk,
        draw,
        lines,
        typed,
        keys,
        running: false,
        shown: None,
        abandoned: false,
        speaking: None,
        item_depth: 0,
        streamed_at: None,
        ahead: Vec::new(),
        rotated: false,
        account: None,
        in_flight: None,
        place: Default::default(),
        told_no_wall: false,
        question: String::new(),
    };
    let mut memory = Memory::new(&seat.settings.agent.context);
    let (audit, ids) = (seat.desk.audit, seat.desk.ids);
    // With `[context] restore`, the user's last conversation with this
    // target comes back (stored sanitised and scrubbed).
    let restore = seat.settings.agent.context.restore;
    if restore && let Some(saved) = audit.load_conversation(&ids.user, &ids.target).await {
        // Parsing and scrubbing are CPU work: off this worker, which other
        // connections share.
        let agent = &seat.settings.agent;
        let (context, redactor) = (agent.context.clone(), agent.redactor.clone());
        let numbering = memory.numbering.clone();
        let restored = tokio::task::spawn_blocking(move || {
            let saved = serde_json::from_str(&saved).ok()?;
            let mut store = Memory::new(&context).store;
            store.restore(&saved, |t| {
                numbering.start_above(t);
                redactor.redact(t, &numbering).0
            });
            Some(store)
        });
        if let Ok(Some(store)) = restored.await {
            memory.store = store;
        }
    }
    while let Some(asked) = questions.recv().await {
        seat.settings = (seat.desk.settings)();
        // A reload's servers replace the session's (whose processes end).
        if !Arc::ptr_eq(seat.toolbox.registry(), &seat.settings.agent.mcp) {
            let user = &seat.desk.ids.user;
            seat.toolbox = Arc::new(Toolbox::new(seat.settings.agent.mcp.clone(), user));
        }
        while cancel.try_recv().is_ok() {}
        // Active since the bridge caught the question.
        seat.answer(asked, &mut cancel, &mut memory).await;
        memory.end();
        if restore {
            let saved = memory.store.to_json().to_string();
            audit.save_conversation(&ids.user, &ids.target, saved).await;
        }
    }
}

struct Seat<'a> {
    desk: Desk<'a>,
    /// The session's MCP servers (its own processes end with it).
    toolbox: Arc<Toolbox>,
    /// The settings of the question being answered.
    settings: Settings,
    painter: Painter,
    draw: mpsc::UnboundedSender<Draw>,
    lines: mpsc::UnboundedReceiver<Option<CommandRecord>>,
    typed: mpsc::UnboundedSender<Input>,
    keys: crate::agent::keys::Keys,
    /// A command the agent typed has not finished yet.
    running: bool,
    /// The command last drawn as proposed, so it is not drawn twice.
    shown: Option<String>,
    /// A command would not stop and was left to the user: the shell is not
    /// at its prompt.
    abandoned: bool,
    /// The configured agent answering, if not the built-in one: its name
    /// goes on its audit rows.
    speaking: Option<String>,
    /// How deep in a workflow the agent answering is (0: the question's
    /// own agent).
    item_depth: usize,
    /// When the answer's text was last drawn, in this question.
    streamed_at: Option<std::time::Instant>,
    /// Keys typed after the answer was seen, before it was complete: the
    /// prompt's, handed back first.
    ahead: Vec<Bytes>,
    /// The shell was given a new nonce in this question: it gets another
    /// before the user has it back, so nothing the agent's commands ran
    /// knows the one in use.
    rotated: bool,
    /// The nested shell the question was asked in (after `sudo -i`):
    /// commands run there, as that account.
    account: Option<NestedUser>,
    /// The command running for the agent now, and whether apart: when
    /// the question is cut short under it, its `ai_tool_result` row is
    /// written here (the loop that would have written it is gone).
    in_flight: Option<(String, bool)>,
    /// The shell the question was asked in, for the rows of the commands
    /// typed into it.
    place: crate::terminal::Place,
    /// The user was told why nothing runs unasked here (once a session).
    told_no_wall: bool,
    /// The question being answered, as its four-eyes requests show it.
    question: String,
}

/// The account and host of a nested shell.
struct NestedUser {
    user: Option<String>,
    host: String,
}

impl std::fmt::Display for NestedUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.user.as_deref().unwrap_or("?"), self.host)
    }
}

/// The nested shell a question was asked in; None at the login shell.
fn account(brief: &Brief) -> Option<NestedUser> {
    let place = &brief.place;
    if place.depth == 0 {
        return None;
    }
    let host = place
        .host
        .clone()
        .or_else(|| brief.info.as_ref().and_then(|i| i.host.clone()))
        .unwrap_or_else(|| brief.target.clone());
    Some(NestedUser {
        user: place.user.clone(),
        host,
    })
}

impl Seat<'_> {
    /// How this seat asks for second approvals, under the question's
    /// settings.
    fn asking(&self) -> four_eyes::Asking<'_> {
        four_eyes::Asking {
            rule: &self.settings.four_eyes,
            target: self.settings.four_eyes_target,
            approvals: self.desk.approvals,
            ids: self.desk.ids,
            question: &self.question,
        }
    }

    /// The mode for commands in the shell the question was asked in. A
    /// nested root shell's commands run as root, so none runs there
    /// unasked, as `sudo ls` is asked in `auto` elsewhere.
    fn mode_here(&self) -> AiMode {
        let root = self
            .account
            .as_ref()
            .is_some_and(|a| a.user.as_deref() == Some("root"));
        match root {
            true => self.settings.mode.min(AiMode::Confirm),
            false => self.settings.mode,
        }
    }

    async fn answer(&mut self, asked: Asked, cancel: &mut mpsc::Receiver<()>, memory: &mut Memory) {
        self.forget_keys();
        self.settle_lines().await;
        (self.running, self.shown, self.abandoned) = (false, None, false);
        self.rotated = false;
        self.speaking = None;
        self.streamed_at = None;
        self.painter = Painter::new(self.desk.shared.cols());
        let settings = self.settings.clone();
        let agent = &settings.agent;
        if self.settings.mode == AiMode::Off {
            let why = crate::agent::AGENT_OFF;
            let line = self.painter.error(why);
            self.show(line);
            self.audit(Kind::AiError, vec![("message", why.into())])
                .await;
            self.hand_back().await;
            return;
        }
        let question = strip_prefix(&asked.question.text, &agent.prefixes);
        self.question = question.to_string();
        let team = &agent.team;
        // `?@` lists the agents and workflows; `?@name question` runs one.
        let (name, question) = match question.strip_prefix('@') {
            Some(rest) => {
                let (name, q) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                (name.to_string(), q.trim())
            }
            None => (team.entry.clone(), question),
        };
        if name.is_empty() || team.get(&name).is_none() || question.is_empty() {
            let mut out = Vec::new();
            if !name.is_empty() && team.get(&name).is_none() {
                out.extend(
                    self.painter
                        .error(&format!("no agent or workflow named `{name}`")),
                );
            }
            for line in team.listing() {
                out.extend(self.painter.text(&line));
                out.extend(self.painter.end_line());
            }
            self.show(out);
            self.hand_back().await;
            return;
        }
        let brief = self.brief(asked.snapshot, memory.numbering.clone()).await;
        self.account = account(&brief);
        self.place = brief.place.clone();
        self.in_flight = None;
        memory.start();
        set_facts(&mut memory.state, &brief, question);
        let result = match &agent.model {
            Err(e) => {
                self.audit(Kind::AiError, vec![("message", e.as_str().into())])
                    .await;
                Ok(Err(e.clone()))
            }
            Ok(model) => {
                let run = Run {
                    model,
                    brief: &brief,
                    question,
                };
                let work = self.run_item(&run, &name, memory, 0, false);
                // The wall-clock limit covers everything: model turns,
                // approvals, commands.
                let wall = agent.limits.wall;
                tokio::select! {
                    r = work => Ok(r),
                    _ = cancel.recv() => Err(("^C\r\n", "stopped by the user".to_string())),
                    _ = tokio::time::sleep(wall) => Err(("", format!(
                        "the question took longer than its time limit ({} s)", wall.as_secs()
                    ))),
                }
            }
        };
        // An answer that ended otherwise (an error, Ctrl-C, the time
        // limit, a workflow's last step) is complete now.
        if !self.desk.shared.answered() {
            self.answer_complete();
        }
        match result {
            Ok(Ok(_)) => {
                let end = self.painter.end_line();
                self.show(end);
            }
            Ok(Err(message)) => {
                let line = self.painter.error(&message);
                self.show(line);
            }
            Err((mark, why)) => self.stopped(mark, &why).await,
        }
        if !memory.redactions.is_empty() {
            let counts = memory.redactions.clone();
            let fields = vec![
                ("total", counts.total().into()),
                (
                    "counts",
                    serde_json::to_value(&counts.0).unwrap_or_default(),
                ),
            ];
            self.audit(Kind::AiRedacted, fields).await;
        }
        self.hand_back().await;
    }

    /// Command lines that finished outside a command of the agent's were
    /// typed by the user (ahead, while a command ran): audited as theirs.
    async fn settle_lines(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            if let Some(r) = line {
                super::audit_rows::command(self.desk.audit, self.desk.ids, &r).await;
            }
        }
    }

    /// What the providers will say of the session: scrubbed and cut on a
    /// blocking thread (regexes over up to the whole history's output).
    async fn brief(&self, snapshot: Snapshot, numbering: std::sync::Arc<Numbering>) -> Brief {
        let agent = &self.settings.agent;
        let redactor = agent.redactor.clone();
        let (recent, events) = (agent.context.recent_commands, agent.context.key_events);
        let target = snapshot.target.clone();
        let scrub = move |command: &str, t: &str| redactor.redact_output(command, t, &numbering).0;
        tokio::task::spawn_blocking(move || Brief::new(snapshot, &scrub, recent, events))
            .await
            .unwrap_or_else(|_| Brief {
                target,
                ..Brief::default()
            })
    }

    /// The question was cut short (Ctrl-C, the time limit): stop the
    /// command running, if any.
    async fn stopped(&mut self, mark: &str, why: &str) {
        let mut out = self.painter.end_line();
        if !self.running {
            // A running command's terminal echoes the ^C itself.
            out.extend_from_slice(mark.as_bytes());
        }
        let mut ended = None;
        if self.running {
            self.show(out);
            out = Vec::new();
            let back = self.interrupt().await;
            self.running = false;
            match back {
                None => self.abandoned = true,
                Some(record) => ended = record,
            }
            self.painter.at_line_start();
        }
        out.extend(self.painter.error(why));
        self.show(out);
        if let Some((command, apart)) = self.in_flight.take() {
            let mut fields = vec![
                ("command", command.into()),
                ("exit_code", ended.as_ref().and_then(|r| r.exit_code).into()),
                (
                    "output_bytes",
                    ended.as_ref().map_or(0, |r| r.output.total()).into(),
                ),
                ("interrupted", why.into()),
            ];
            fields.extend(Host::place(self, apart));
            self.audit(Kind::AiToolResult, fields).await;
        }
        self.audit(Kind::AiError, vec![("message", why.into())])
            .await;
    }

    /// Gives the terminal back to the user: at a fresh prompt, or, when a
    /// command would not stop, in that command. Keys typed since the
    /// answer was complete follow, as a shell's type-ahead does: the seat
    /// holds them until its own keys are typed, so none is lost or typed
    /// into the line it clears.
    async fn hand_back(&mut self) {
        let fresh_prompt = !self.abandoned;
        let _ = self.draw.send(Draw::Done { fresh_prompt });
        if fresh_prompt {
            let deadline = Instant::now() + PROMPT_WAIT;
            if self.rotated && self.desk.shared.prompt_by(deadline).await {
                let _ = self.rotate();
            }
            self.type_in(format!("{CLEAR_LINE}\r"));
        }
        self.settle_lines().await;
        // No await from here on: the pumps run in this task, so no key
        // reaches the seat between the switch and the drain.
        self.desk.shared.set_active(false);
        for keys in std::mem::take(&mut self.ahead) {
            let _ = self.typed.send(Input::Ahead(keys));
        }
        while let Ok(keys) = self.keys.try_recv() {
            let _ = self.typed.send(Input::Ahead(keys));
        }
    }

    /// The answer is complete, as soon as it is known to be (the model's
    /// last turn ended: `Host::answered`), not once the question's work
    /// has wound down: a key typed after the answer was seen must not
    /// fall in between. Keys typed while the agent worked were meant for
    /// nothing that came: not for the prompt (a password typed for a
    /// command that never asked must not run as a command line). Those
    /// typed from now on follow the answer at the prompt, Ctrl-C among
    /// them in its place.
    fn answer_complete(&mut self) {
        // What was typed after the answer's text was drawn, the user typed
        // having seen it, however soon: kept, not forgotten.
        match self.streamed_at {
            Some(seen) => {
                let later = self.keys.typed_after(seen);
                self.ahead.extend(later);
            }
            None => self.forget_keys(),
        }
        self.desk.shared.set_answered();
    }

    /// Drops the keys typed so far that nothing read.
    fn forget_keys(&mut self) {
        while self.keys.try_recv().is_ok() {}
    }

    fn show(&self, bytes: Vec<u8>) {
        if !bytes.is_empty() {
            let _ = self.draw.send(Draw::Show(bytes));
        }
    }

    /// Types into the shell.
    fn type_in(&self, bytes: impl Into<Bytes>) {
        let _ = self.typed.send(Input::Seat(bytes.into()));
    }

    /// Interrupts the running command, harder each time it does not stop.
    /// Returns how the command line ended (`Some(None)`: the shell is back,
    /// without a record), or `None` if it would not stop.
    async fn interrupt(&mut self) -> Option<Option<CommandRecord>> {
        for key in INTERRUPT_KEYS {
            self.type_in(key);
            match tokio::time::timeout(INTERRUPT_WAIT, self.lines.recv()).await {
                Ok(Some(record)) => return Some(record),
                Ok(None) => return None,
                Err(_) => continue,
            }
        }
        None
    }

    /// Whether the screen says the command waits for input: a full-screen
    /// program, or a line that ends like a question (`Password:`, `[y/N]`,
    /// a pager's `:`). Returns what the user would see.
    async fn waiting_for_input(&self) -> Option<String> {
        let snap = self.desk.screen?.view().await?;
        if snap.stale {
            // Output outran the model: it cannot say.
            return None;
        }
        if snap.alternate {
            return Some("a full-screen program".into());
        }
        let line = snap.cursor_line.trim();
        let asks = line.ends_with([':', '?', ']', ')', '>'])
            || line.contains("--More--")
            || line.contains("(END)");
        (asks && snap.cursor.1 > 0).then(|| crate::text::head(line, 80).into_owned())
    }

    /// Waits for the command line typed to finish, interrupting it when it
    /// waits for input or runs too long. Keys the user types meanwhile go
    /// to the command: they may answer it themselves.
    async fn follow(&mut self, command: &str) -> (Option<CommandRecord>, Option<String>) {
        let limit = self.settings.agent.command_timeout;
        let typed = Instant::now();
        let deadline = typed + limit;
        let mut took_over = false;
        // When to look whether the command waits for input: once the
        // shell has printed something since the command was typed (what
        // was on the screen before, the agent's own lines, asks nothing)
        // and then stayed silent for INPUT_WAIT. The screen does not change
        // without output, so the same output is looked at once.
        let mut look_at = typed + INPUT_WAIT;
        let mut looked: Option<Instant> = None;
        loop {
            tokio::select! {
                line = self.lines.recv() => match line {
                    // The session is ending.
                    None => return (None, None),
                    Some(Some(r)) if ours(&r, command) => return (Some(r), None),
                    // A line the user typed ahead ran: theirs, audited so.
                    Some(Some(r)) => super::audit_rows::command(self.desk.audit, self.desk.ids, &r).await,
                    // An empty line the user typed ahead.
                    Some(None) => {}
                },
                Some(k) = self.keys.recv() => {
                    took_over = true;
                    self.type_in(k);
                }
                _ = tokio::time::sleep_until(deadline) => {
                    let why = format!("it ran longer than {} s", limit.as_secs());
                    return self.stop_command(why).await;
                }
                _ = tokio::time::sleep_until(look_at), if !took_over => {
                    let last = self.desk.shared.last_output();
                    let now = Instant::now();
                    let quiet = now >= last + INPUT_WAIT;
                    if last > typed && quiet && looked != Some(last) {
                        looked = Some(last);
                        if let Some(prompt) = self.waiting_for_input().await {
                            let why = format!("it was waiting for input ({prompt})");
                            return self.stop_command(why).await;
                        }
                    }
                    // Output that comes later wakes nothing: look again
                    // when it may have gone quiet.
                    look_at = (last.max(typed) + INPUT_WAIT).max(now + LOOK_AGAIN);
                }
            }
        }
    }

    /// Types `command` into the user's shell and follows it to its end.
    ///
    /// Only into the shell: a fresh prompt must be up (a prompt the shell
    /// drew after its last command, with nothing after it that looks like
    /// another program). The shell is first given a new nonce, so what
    /// any earlier command may have learnt of the old one is worth
    /// nothing; then the line goes as a bracketed paste (inserted as it
    /// is: no byte is read as a key, whatever the locale) ended by
    /// walissh's own Enter (no history expansion).
    async fn run_typed(&mut self, command: &str) -> Outcome {
        if !self
            .desk
            .shared
            .prompt_by(Instant::now() + PROMPT_WAIT)
            .await
        {
            return Outcome {
                interrupted: Some(
                    "the shell was not at its prompt, and walissh types only into the shell".into(),
                ),
                ..Outcome::default()
            };
        }
        if !self.rotate_and_wait().await {
            return Outcome {
                interrupted: Some(format!(
                    "the shell did not confirm walissh's new key within {} s, and walissh types \
                     nothing more into a terminal it cannot tell is the shell's (something else \
                     may be reading it)",
                    PROMPT_WAIT.as_secs()
                )),
                ..Outcome::default()
            };
        }
        self.running = true;
        self.type_in(self.keystrokes(command));
        let (record, interrupted) = self.follow(command).await;
        self.running = false;
        let mut outcome = Outcome {
            interrupted,
            abandoned: self.abandoned,
            ..Outcome::default()
        };
        if let Some(r) = record {
            let text = r.output.text();
            if !text.is_empty() && !text.ends_with('\n') {
                self.show(b"\r\n".to_vec());
            }
            outcome.exit_code = r.exit_code;
            outcome.output_bytes = r.output.total();
            outcome.output = text;
        }
        self.painter.at_line_start();
        outcome
    }

    /// Gives the shell a new nonce and waits for its answer: the R mark
    /// that carries the old nonce too. A program that reads the terminal
    /// in the shell's place (one that joined its foreground process group)
    /// takes the key and the new nonce, but cannot answer without the old
    /// one, which only the shell's memory and its own marks hold; so the
    /// approved line is typed only after the answer. `true` when the shell
    /// answered in time, or has no key of walissh's (then its marks are
    /// not trusted for anything that waits on them).
    async fn rotate_and_wait(&mut self) -> bool {
        let seen = self.desk.shared.rotations();
        if !self.rotate() {
            return true;
        }
        let deadline = Instant::now() + PROMPT_WAIT;
        self.desk.shared.rotated_by(seen, deadline).await
    }

    /// Gives the shell a new nonce, when its bootstrap bound the key;
    /// whether it did.
    fn rotate(&mut self) -> bool {
        if !self.desk.shared.caps().keys {
            return false;
        }
        let nonce = crate::terminal::nonce();
        let _ = self.draw.send(Draw::Nonce(nonce.clone()));
        self.type_in([ROTATE, nonce.as_bytes()].concat());
        self.rotated = true;
        true
    }

    /// What to type for `command` at the prompt.
    fn keystrokes(&self, command: &str) -> Vec<u8> {
        self.desk.shared.typed_at_prompt();
        let caps = self.desk.shared.caps();
        let mut keys = CLEAR_LINE.as_bytes().to_vec();
        if caps.paste {
            keys.extend_from_slice(b"\x1b[200~");
            keys.extend_from_slice(command.as_bytes());
            keys.extend_from_slice(b"\x1b[201~");
        } else {
            keys.extend_from_slice(command.as_bytes());
        }
        keys.extend_from_slice(if caps.keys { ACCEPT } else { b"\r" });
        keys
    }

    /// Runs `script` clean, on a channel of its own (`exec`), in the
    /// prompt's directory; its output is streamed to the screen as it
    /// comes, as a typed command's would be.
    ///
    /// It has no input. Keys the user types meanwhile are read and dropped:
    /// left queued they would reach the next `Run?` or the shell's prompt,
    /// as answers or a command nobody meant. Ctrl-C never comes here: it
    /// stops the question, and dropping this future drops the command's
    /// channel or process, which stops all of it (its input, held open
    /// until then, is its lifeline: `upstream::clean_command`).
    async fn run_apart(&mut self, script: &str, wall: Wall) -> Outcome {
        let cwd = self.desk.shared.cwd();
        let settings = self.settings.clone();
        let sandboxing = &settings.agent.sandboxing;
        let apart = self.desk.apart(settings.agent.command_timeout);
        let apart = apart.unasked(sandboxing);
        let command = exec::Command::unasked(script, cwd.as_deref(), wall, sandboxing);
        let mut stream = Stream {
            draw: &self.draw,
            painter: &mut self.painter,
            shared: self.desk.shared,
            ends: Unterminated::default(),
            safe: Sanitizer::default(),
        };
        let outcome = {
            let run = exec::run(apart, command, &mut stream);
            tokio::pin!(run);
            loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    Some(_) = self.keys.recv() => {}
                }
            }
        };
        let undo = stream.safe.finish();
        if !undo.is_empty() {
            let _ = self.draw.send(Draw::Output(undo));
        }
        outcome
    }

    async fn stop_command(&mut self, why: String) -> (Option<CommandRecord>, Option<String>) {
        match self.interrupt().await {
            Some(record) => (record, Some(why)),
            None => {
                self.abandoned = true;
                (None, Some(why))
            }
        }
    }

    async fn audit(&mut self, kind: Kind, fields: Vec<(&'static str, Value)>) {
        let ev = self.event(kind, fields);
        if let Some(r) = self.desk.recording {
            r.mark_event(&ev).await;
        }
        self.desk.audit.event(ev).await;
    }

    /// An event of this question, naming the agent that speaks.
    fn event(&self, kind: Kind, fields: Vec<(&'static str, Value)>) -> Event {
        let mut ev = self.desk.ids.event(kind);
        if let Some(agent) = &self.speaking {
            ev = ev.field("agent", agent.as_str());
        }
        ev.fields(fields)
    }

    /// Reads one line the user edits, starting from `text`. `None` if
    /// they emptied it.
    async fn edit(&mut self, text: &str) -> Option<String> {
        let mut line = text.to_string();
        let out = self.painter.edit_line(&line);
        self.show(out);
        while let Some(keys) = self.keys.recv().await {
            // Escape sequences (arrows, function keys) are not edits.
            if keys.first() == Some(&0x1b) {
                continue;
            }
            for c in String::from_utf8_lossy(&keys).chars() {
                match c {
                    '\r' | '\n' => {
                        // The line as submitted, keys of the same chunk included.
                        let mut out = self.painter.edit_line(&line);
                        out.extend_from_slice(b"\r\n");
                        self.show(out);
                        self.painter.at_line_start();
                        let line = line.trim().to_string();
                        return (!line.is_empty()).then_some(line);
                    }
                    '\x7f' | '\x08' => {
                        line.pop();
                    }
                    '\x15' => line.clear(),
                    c if c.is_control() => {}
                    c => line.push(c),
                }
            }
            let out = self.painter.edit_line(&line);
            self.show(out);
        }
        None
    }
}

/// A clean command's output on its way to the screen, through the client
/// pump like everything the seat draws (so the recording has it too),
/// with its line ends made whole. It is paced by the pump: a client that
/// reads slowly slows the command, as it would in the user's shell.
struct Stream<'s> {
    draw: &'s mpsc::UnboundedSender<Draw>,
    painter: &'s mut Painter,
    shared: &'s Shared,
    ends: Unterminated,
    /// Output is untrusted: only what is safe reaches the terminal.
    safe: Sanitizer,
}

impl exec::Show for Stream<'_> {
    async fn output(&mut self, data: &[u8]) {
        let data = self.safe.clean(data);
        let out = self.ends.feed(&data);
        self.painter.after_output(self.ends.mid_line());
        self.shared.output_sending(out.len());
        let _ = self.draw.send(Draw::Output(out));
        self.shared.output_ahead(OUTPUT_AHEAD).await;
    }
}

/// What every agent of one question shares.
struct Run<'a> {
    model: &'a crate::agent::model::Model,
    brief: &'a Brief,
    question: &'a str,
}

/// Whether a finished command line is the one the agent typed. The shell
/// reports it as typed, unless its history left it out (then it cannot be
/// told apart, and is taken to be the agent's).
fn ours(r: &CommandRecord, command: &str) -> bool {
    r.command.as_deref().is_none_or(|c| c.trim() == command)
}

/// The question without the prefix that made it one.
fn strip_prefix<'q>(text: &'q str, prefixes: &[String]) -> &'q str {
    prefixes
        .iter()
        .filter(|p| text.starts_with(p.as_str()))
        .max_by_key(|p| p.len())
        .map_or(text, |p| &text[p.len()..])
        .trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_clean_commands_output_waits_for_the_screen() {
        use super::exec::Show;
        use std::future::Future;
        use std::task::{Context, Waker};
        let shared = Shared::new(80);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut painter = Painter::new(80);
        let mut stream = Stream {
            draw: &tx,
            painter: &mut painter,
            shared: &shared,
            ends: Unterminated::default(),
            safe: Sanitizer::default(),
        };
        let mut cx = Context::from_waker(Waker::noop());
        // Within the bound: taken at once, its line end made whole.
        assert!(
            std::pin::pin!(stream.output(b"one\n"))
                .poll(&mut cx)
                .is_ready()
        );
        let Some(Draw::Output(first)) = rx.recv().await else {
            panic!("no output drawn")
        };
        assert_eq!(first, b"one\r\n");
        // Past it: the command is not read until the pump has written
        // enough of what it was sent.
        let big = vec![b'y'; OUTPUT_AHEAD];
        let mut second = std::pin::pin!(stream.output(&big));
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        shared.output_written(first.len());
        assert!(second.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn the_longest_prefix_is_taken_off() {
        let prefixes = vec!["?".to_string(), "??".to_string(), "ai:".to_string()];
        assert_eq!(strip_prefix("?? why", &prefixes), "why");
        assert_eq!(strip_prefix("ai: restart", &prefixes), "restart");
        assert_eq!(strip_prefix("plain", &prefixes), "plain");
    }
}
