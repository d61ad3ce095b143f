//! The bridge of one session: the two pumps that carry every byte between
//! the client and the target, and, in interactive shells with an agent,
//! the agent's seat beside them.
//!
//! Target to client, PTY shell output passes the terminal model (marks
//! taken out, commands audited, questions caught) and the screen model on
//! its way; client to target, keystrokes go to the shell, or to the agent
//! while it answers a question. All three run in one task; they share a
//! little state ([`Shared`]) and talk over channels (`seat::wires`). Each
//! write waits for the receiving side's window, so a slow peer slows its
//! sender instead of filling memory.

use crate::audit::Kind;
use std::time::Duration;

use bytes::Bytes;
use russh::server::Msg;
use russh::{Channel, ChannelMsg, ChannelReadHalf, ChannelWriteHalf};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::seat::{self, Asked, ClientEnds, Desk, Input, Settings, TargetEnds};
use super::{CLOSE_GRACE, Connection, NOTICE_TIMEOUT, SHUTTING_DOWN, Totals, user_line};
use super::{Shared, audit_rows};
use crate::agent::render::Draw;
use crate::agent::render::{SPINNER_CLEAR, spinner_frame};
use crate::agent::{self, Question};
use crate::audit::Ids;
use crate::audit::recording::{Recording, Track};
use crate::config::AiMode;
use crate::context::providers::Snapshot;
use crate::shutdown::Listener;
use crate::terminal::own_keys::OwnKeys;
use crate::terminal::screen::Screen;
use crate::terminal::typed::Typed;
use crate::terminal::{CommandRecord, Terminal};
use crate::upstream::{self, TargetInfo};
use unowned::{Typing, UNOWNED_QUESTION};

mod unowned;

/// How often the spinner turns.
const SPIN_EVERY: Duration = Duration::from_millis(100);

/// How the bridge ended.
enum End {
    /// The target's side closed.
    TargetClosed,
    /// The client closed its channel, or can no longer be written to.
    ClientClosed,
    Shutdown,
    /// An admin ended the session.
    Killed(crate::bastion::Ending),
}

/// What both pumps share.
pub(super) struct Pumps<'a> {
    pub(super) conn: &'a Connection,
    pub(super) ids: &'a Ids,
    pub(super) recording: Option<&'a Recording>,
    pub(super) screen: Option<&'a Screen>,
    /// A shell without integration: commands are read off the screen.
    pub(super) heuristic: bool,
    /// The user's `ai` setting.
    pub(super) mode: AiMode,
    pub(super) shared: &'a Shared,
    /// What the target said about itself.
    pub(super) info: Option<&'a TargetInfo>,
    /// Runs commands on the target beside the shell.
    pub(super) runner: &'a upstream::Runner,
    /// The target asked for four eyes on every command when the session
    /// started (`[[targets]] four_eyes`).
    pub(super) four_eyes: bool,
}

impl Pumps<'_> {
    /// Pumps both ways until one side closes or shutdown begins, then closes
    /// the other side cleanly.
    pub(super) async fn bridge(
        &self,
        channel: Channel<Msg>,
        (mut up_rx, mut up_tx): (upstream::Reader, upstream::Writer),
        mut terminal: Option<Terminal>,
        early_input: Vec<u8>,
        mut totals: Totals,
        (stop, open): (&mut Listener, &mut crate::bastion::Open<'_>),
    ) -> Totals {
        let (mut client_rx, client_tx) = channel.split();
        let mut bytes_in = 0u64;
        // Input waits while walissh's bootstrap runs in the shell: bash
        // drops what was typed ahead of a command that reads the terminal.
        let (ready_tx, ready_rx) = watch::channel(terminal.is_none());
        // An integrated shell of a user who may use the agent gets a seat
        // for it; questions of the others get a notice.
        let (client_ends, target_ends, seat_ends) = match terminal {
            Some(_) if self.mode != AiMode::Off => {
                let (c, t, s) = seat::wires();
                (Some(c), Some(t), Some(s))
            }
            _ => (None, None, None),
        };
        // The keys forwarded to the shell, which its marks must fit.
        let typed = terminal.as_ref().map(|t| t.typed());
        let unowned = terminal.as_ref().map(|t| t.unowned());
        // What the terminal model types into the shell itself (a nested
        // shell's probe and bootstrap).
        let (inject_tx, inject_rx) = mpsc::channel(4);
        let end = {
            let down = self.to_client(
                &mut up_rx,
                &client_tx,
                &mut terminal,
                (&ready_tx, &inject_tx),
                client_ends,
                &mut totals,
            );
            let keys = Keys {
                early: early_input,
                typed: typed.as_deref(),
                inject: inject_rx,
                unowned: unowned.as_deref(),
                notices: &client_tx,
            };
            let up = self.to_target(
                &mut client_rx,
                &mut up_tx,
                ready_rx,
                target_ends,
                keys,
                &mut bytes_in,
            );
            let assist = async {
                if let Some(ends) = seat_ends {
                    let settings = || self.settings();
                    seat::serve(self.desk(&settings), ends).await;
                }
                std::future::pending::<()>().await
            };
            tokio::pin!(down, up, assist);
            tokio::select! {
                end = &mut down => end,
                _ = &mut up => End::ClientClosed,
                _ = &mut assist => End::ClientClosed,
                _ = stop.requested() => End::Shutdown,
                ending = open.ended() => End::Killed(ending),
            }
        };
        totals.bytes_in = bytes_in;
        let mut killed = None;
        if self.shared.active() {
            // A question was being answered: it ends with the session.
            let why = match end {
                End::Shutdown => "the bastion shut down before the answer",
                End::Killed(_) => "an administrator ended the session before the answer",
                _ => "the session ended before the answer",
            };
            let ev = self.ids.event(Kind::AiError).field("message", why);
            self.conn.bastion.audit.event(ev).await;
        }
        match end {
            End::TargetClosed if totals.exit_status.is_none() && totals.exit_signal.is_none() => {
                // The target went away without saying how the session ended.
                let msg = up_rx.why_lost().unwrap_or_else(|| {
                    format!("{} closed the session unexpectedly", self.ids.target)
                });
                notify(&client_tx, &msg).await;
                totals.lost = Some(super::Lost {
                    message: msg,
                    reason: "lost",
                });
            }
            End::TargetClosed => {}
            End::ClientClosed => {
                // The client is gone: hang up on the target, and give it a
                // moment to say how it ended.
                up_tx.hang_up().await;
                let _ = tokio::time::timeout(CLOSE_GRACE, drain(&mut up_rx, &mut totals)).await;
            }
            End::Shutdown => {
                notify(&client_tx, SHUTTING_DOWN).await;
                up_tx.hang_up().await;
            }
            End::Killed(ending) => {
                notify(&client_tx, &ending.line()).await;
                up_tx.hang_up().await;
                killed = Some(ending);
            }
        }
        up_tx.finish().await;
        if !totals.client_eof {
            let _ = client_tx.eof().await;
        }
        let _ = client_tx.close().await;
        if let Some(ending) = killed {
            // The whole connection goes: its other channels, its
            // forwards, and a multiplexing client's way to a new session
            // without logging in again. Once the client has closed this
            // channel (so it has the line), or a moment after.
            let closed = async { while client_rx.wait().await.is_some() {} };
            let _ = tokio::time::timeout(NOTICE_TIMEOUT, closed).await;
            self.conn.disconnect(&ending).await;
        }
        totals
    }

    /// Target to client: output, stderr, EOF and how the target's side
    /// ended. Returns `ClientClosed` if the client can no longer be written.
    /// PTY shell output goes through the terminal model on its way.
    async fn to_client(
        &self,
        up_rx: &mut upstream::Reader,
        client: &ChannelWriteHalf<Msg>,
        terminal: &mut Option<Terminal>,
        (ready, inject): (&watch::Sender<bool>, &mpsc::Sender<Bytes>),
        mut agent: Option<ClientEnds>,
        totals: &mut Totals,
    ) -> End {
        let mut track = self.recording.map(|r| r.output());
        let mut spinner = Spinner::default();
        // The target's EOF, held until its exit status (see below).
        let mut eof_waits = false;
        loop {
            let deadline = terminal.as_ref().and_then(|t| t.deadline());
            let event = tokio::select! {
                // The agent's drawing first: what it drew before typing a
                // command must reach the screen before the command's output.
                biased;
                Some(draw) = next(agent.as_mut().map(|a| &mut a.draw)) => {
                    let (shown, output) = drawn(draw, terminal, &mut spinner);
                    if self.show(shown, client, &mut track).await.is_err() {
                        return End::ClientClosed;
                    }
                    if output > 0 {
                        self.shared.output_written(output);
                    }
                    continue;
                }
                _ = spinner.tick() => {
                    if self.show(spinner.frame(), client, &mut track).await.is_err() {
                        return End::ClientClosed;
                    }
                    continue;
                }
                e = up_rx.next() => e,
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    // The bootstrap never answered: show what was held back.
                    if self.stop_withholding(terminal, ready, client, &mut track, false).await.is_err() {
                        return End::ClientClosed;
                    }
                    continue;
                }
            };
            if matches!(event, None | Some(upstream::TargetEvent::Eof))
                && self
                    .stop_withholding(terminal, ready, client, &mut track, true)
                    .await
                    .is_err()
            {
                return End::ClientClosed;
            }
            let Some(event) = event else {
                break;
            };
            let sent = match event {
                upstream::TargetEvent::Data(data) => {
                    totals.bytes_out += data.len() as u64;
                    if let Some(m) = totals.module.as_mut() {
                        m.output(&data);
                    }
                    // Only a seat reads it (is the agent's command silent?).
                    if agent.is_some() {
                        self.shared.output_seen();
                    }
                    let data = match terminal.as_mut() {
                        Some(t) => {
                            self.through_terminal(data, t, (ready, inject), agent.as_ref())
                                .await
                        }
                        None => data,
                    };
                    self.show(data, client, &mut track).await
                }
                upstream::TargetEvent::Stderr(data) => {
                    totals.bytes_out += data.len() as u64;
                    if let Some(t) = track.as_mut() {
                        t.write(&data).await;
                    }
                    client.extended_data_bytes(1, data).await
                }
                // The target's EOF waits for how the command ended: a
                // client that has had both EOFs may close before the exit
                // status comes (OpenSSH's ControlMaster does), and its
                // `ssh` then exits 255. It goes with the status, or at the
                // end.
                upstream::TargetEvent::Eof => {
                    eof_waits = !totals.client_eof;
                    Ok(())
                }
                upstream::TargetEvent::ExitStatus(code) => {
                    totals.exit_status = Some(code);
                    let sent = client.exit_status(code).await;
                    match std::mem::take(&mut eof_waits) {
                        true => {
                            totals.client_eof = true;
                            sent.and(client.eof().await)
                        }
                        false => sent,
                    }
                }
                upstream::TargetEvent::ExitSignal {
                    signal,
                    core_dumped,
                    message,
                } => {
                    totals.exit_signal = Some(signal_name(&signal));
                    let _ = self
                        .conn
                        .handle
                        .exit_signal_request(
                            client.id(),
                            signal,
                            core_dumped,
                            message,
                            String::new(),
                        )
                        .await;
                    match std::mem::take(&mut eof_waits) {
                        true => {
                            totals.client_eof = true;
                            client.eof().await
                        }
                        false => Ok(()),
                    }
                }
            };
            if sent.is_err() {
                return End::ClientClosed;
            }
        }
        End::TargetClosed
    }

    /// PTY shell output through the terminal model: marks out, commands
    /// audited (or handed to the agent), questions caught, and what the
    /// model types into the shell sent to the input side. Returns what the
    /// client is shown.
    async fn through_terminal(
        &self,
        data: Bytes,
        t: &mut Terminal,
        (ready, inject): (&watch::Sender<bool>, &mpsc::Sender<Bytes>),
        agent: Option<&ClientEnds>,
    ) -> Bytes {
        let p = t.output(data);
        if let Some(i) = &p.integrity {
            audit_rows::integrity(&self.conn.bastion.audit, self.ids, i).await;
        }
        if agent.is_some() {
            self.shared
                .set_shell(t.at_prompt(), t.caps(), t.rotations());
            if p.cwd {
                self.shared.set_cwd(t.cwd());
            }
        }
        // The user's keys wait while the shell has walissh's own lines to
        // read (they must not join them), then flow again.
        let waiting = t.deadline().is_some();
        if waiting == *ready.borrow() {
            let _ = ready.send(!waiting);
        }
        if let Some(keys) = p.type_in {
            let _ = inject.send(Bytes::from(keys)).await;
        }
        // A marker where each command starts: a player jumps there.
        if let Some(r) = self.recording {
            for c in &p.started {
                r.marker(&format!("$ {c}")).await;
            }
        }
        self.lines_done(p.finished, p.line_done, agent).await;
        let shown = self
            .answer_questions(p.to_client, p.questions, t, agent)
            .await;
        if p.prompt
            && let Some(s) = self.screen
        {
            s.prompt();
        }
        shown
    }

    /// Sends output to the client, by way of the screen model and the
    /// recording.
    async fn show(
        &self,
        data: Bytes,
        client: &ChannelWriteHalf<Msg>,
        track: &mut Option<Track<'_>>,
    ) -> Result<(), russh::Error> {
        if data.is_empty() {
            return Ok(());
        }
        if let Some(s) = self.screen {
            s.feed(data.clone());
        }
        if let Some(t) = track.as_mut() {
            t.write(&data).await;
        }
        client.data_bytes(data).await
    }

    /// Ends the bootstrap's wait (it timed out, or the target's output
    /// `ended`): what was held back is shown, and input flows again.
    async fn stop_withholding(
        &self,
        terminal: &mut Option<Terminal>,
        ready: &watch::Sender<bool>,
        client: &ChannelWriteHalf<Msg>,
        track: &mut Option<Track<'_>>,
        ended: bool,
    ) -> Result<(), russh::Error> {
        let Some(t) = terminal.as_mut() else {
            return Ok(());
        };
        let mut held = t.give_up();
        if ended {
            held.extend(t.finish());
        }
        let _ = ready.send(true);
        self.show(Bytes::from(held), client, track).await
    }

    /// What the agent's seat needs from the session.
    /// The seat's view of this session and the bastion.
    fn desk<'s>(&'s self, settings: &'s (dyn Fn() -> Settings + Sync)) -> Desk<'s> {
        Desk {
            audit: &self.conn.bastion.audit,
            recording: self.recording,
            ids: self.ids,
            runner: self.runner,
            upstream: &self.conn.bastion.upstream,
            screen: self.screen,
            shared: self.shared,
            settings,
            approvals: &self.conn.bastion.approvals,
        }
    }

    /// What the user's next question runs under. It takes the newest
    /// config, but for a reload that changed the prefixes: this session's
    /// shell catches the old ones. The mode is the stricter of the one at
    /// login and today's: a reload never widens a live session's rights,
    /// and a user gone from the config has none.
    fn settings(&self) -> Settings {
        let started = &self.conn.live;
        let (newest, mode) = super::settings_now(&self.conn.bastion, &self.ids.user, self.mode);
        let four_eyes = newest.four_eyes.clone();
        let agent = match newest.prefixes == started.agent.prefixes {
            true => newest,
            false => started.agent.clone(),
        };
        // A reload may ask for four eyes here; it never takes them away
        // from a live session.
        let now = self.conn.bastion.live();
        let four_eyes_target = self.four_eyes
            || now
                .config
                .target(&self.ids.target)
                .is_some_and(|t| t.four_eyes);
        Settings {
            agent,
            mode,
            four_eyes_target,
            four_eyes,
        }
    }

    /// Command lines the shell finished: while the agent answers a
    /// question they are its commands and go to it (audited as its tool
    /// results); otherwise the user's own commands are audited.
    async fn lines_done(
        &self,
        records: Vec<CommandRecord>,
        line_done: bool,
        agent: Option<&ClientEnds>,
    ) {
        if let Some(a) = agent.filter(|_| self.shared.active()) {
            if records.is_empty() && line_done {
                let _ = a.lines.send(None);
            }
            for r in records {
                let _ = a.lines.send(Some(r));
            }
            return;
        }
        for r in &records {
            self.audit_command(r).await;
        }
    }

    /// Audits each question caught at the prompt, splices its echo into the
    /// output where the shell cleared the line, and hands it to the agent.
    async fn answer_questions(
        &self,
        out: Bytes,
        questions: Vec<(usize, Question)>,
        terminal: &Terminal,
        agent: Option<&ClientEnds>,
    ) -> Bytes {
        if questions.is_empty() {
            return out;
        }
        let mut spliced = Vec::with_capacity(out.len() + 128);
        let mut from = 0;
        for (at, q) in questions {
            let ev = self
                .ids
                .event(Kind::AiPrompt)
                .field("text", q.text.as_str());
            if let Some(r) = self.recording {
                r.mark_event(&ev).await;
            }
            self.conn.bastion.audit.event(ev).await;
            spliced.extend_from_slice(&out[from..at]);
            spliced.extend(agent::echo(&q, self.mode));
            from = at;
            if agent.is_some() && self.shared.active() {
                // Typed ahead while the agent was at work: one at a time.
                let why = "another question was being answered; this one was not asked";
                spliced.extend(format!("walissh: {why}\r\n").as_bytes());
                let ev = self.ids.event(Kind::AiError).field("message", why);
                self.conn.bastion.audit.event(ev).await;
                continue;
            }
            if let Some(a) = agent {
                self.shared.set_active(true);
                // Raw: the seat scrubs and cuts it off the runtime.
                let snapshot = Snapshot {
                    target: self.ids.target.clone(),
                    info: self.info.cloned(),
                    cwd: terminal.cwd().map(str::to_string),
                    history: terminal.history.iter().cloned().collect(),
                    place: terminal.place().clone(),
                };
                let _ = a.questions.send(Asked {
                    question: q,
                    snapshot,
                });
            }
        }
        spliced.extend_from_slice(&out[from..]);
        Bytes::from(spliced)
    }

    /// A command the user ran at the shell prompt, as the marks told it.
    async fn audit_command(&self, r: &CommandRecord) {
        audit_rows::command(&self.conn.bastion.audit, self.ids, r).await;
    }

    /// Client to target: input, EOF, window changes and signals, until the
    /// client closes the channel. If the target stops taking input (a
    /// command that exited without reading it all), input is dropped but
    /// the channel is still read, so the target's output and exit status
    /// still reach the client.
    async fn to_target(
        &self,
        client: &mut ChannelReadHalf,
        up_tx: &mut upstream::Writer,
        mut ready: watch::Receiver<bool>,
        mut agent: Option<TargetEnds>,
        keys: Keys<'_>,
        bytes_in: &mut u64,
    ) {
        let mut track = self.recording.map(|r| r.input());
        let _ = ready.wait_for(|r| *r).await;
        let Keys {
            early: early_input,
            typed,
            mut inject,
            unowned,
            notices,
        } = keys;
        // Every key that reaches the shell is seen by its marks' check.
        let saw = |keys: &[u8]| {
            if let Some(t) = typed {
                t.lock().unwrap_or_else(|e| e.into_inner()).keys(keys);
            }
        };
        saw(&early_input);
        let mut target_reads =
            early_input.is_empty() || up_tx.data(Bytes::from(early_input)).await.is_ok();
        // Keys typed on the current line, for the screen heuristic.
        let mut line = Typing::default();
        // walissh's own keys are never the user's to press.
        let mut own_keys = typed.map(|_| OwnKeys::default());
        loop {
            // `fresh`: the keys come from the client now, not handed back.
            let (msg, fresh) = tokio::select! {
                // What the agent types goes before keys typed after it.
                biased;
                Some(keys) = inject.recv() => {
                    forward(up_tx, keys, &mut target_reads).await;
                    continue;
                }
                Some(input) = next(agent.as_mut().map(|a| &mut a.typed)) => match input {
                    Input::Seat(keys) => {
                        saw(&keys);
                        forward(up_tx, keys, &mut target_reads).await;
                        continue;
                    }
                    // Counted and recorded when they came.
                    Input::Ahead(data) => (Some(ChannelMsg::Data { data }), false),
                },
                msg = client.wait() => (msg, true),
            };
            let Some(msg) = msg else {
                break;
            };
            match msg {
                ChannelMsg::Data { data } => {
                    if fresh {
                        *bytes_in += data.len() as u64;
                        if let Some(t) = track.as_mut() {
                            t.write(&data).await;
                        }
                    }
                    let data = match own_keys.as_mut() {
                        Some(k) if fresh => k.strip_bytes(data),
                        _ => data,
                    };
                    if let Some(a) = agent.as_ref().filter(|_| self.shared.active()) {
                        // Ctrl-C stops the agent wherever it is; other keys
                        // are its to read (Run? [y/N/e], or the command's).
                        // Once the answer is complete, all are type-ahead.
                        if data.contains(&0x03) && !self.shared.answered() {
                            let _ = a.cancel.try_send(());
                        } else {
                            let _ = a.keys.try_send((std::time::Instant::now(), data));
                        }
                        continue;
                    }
                    // The user's keys wait while walissh types its own
                    // lines into the shell (a nested shell's probe and
                    // bootstrap): they must not join them.
                    while !*ready.borrow() {
                        tokio::select! {
                            biased;
                            Some(keys) = inject.recv() => forward(up_tx, keys, &mut target_reads).await,
                            changed = ready.changed() => if changed.is_err() { break },
                        }
                    }
                    // Commands at prompts walissh does not own are read
                    // off the screen, and questions there refused.
                    let nested =
                        unowned.map_or(0, |u| u.load(std::sync::atomic::Ordering::Relaxed));
                    let mut data = data;
                    if self.heuristic || nested > 0 {
                        let refused;
                        (data, refused) = self.off_screen(data, &mut line, nested).await;
                        if refused {
                            notify(notices, UNOWNED_QUESTION).await;
                        }
                    }
                    saw(&data);
                    forward(up_tx, data, &mut target_reads).await;
                }
                ChannelMsg::Eof => up_tx.eof().await,
                ChannelMsg::WindowChange {
                    col_width,
                    row_height,
                    ..
                } => {
                    if let Some(r) = self.recording {
                        r.resize(col_width, row_height).await;
                    }
                    if let Some(s) = self.screen {
                        s.resize(row_height, col_width);
                    }
                    self.shared.set_cols(col_width);
                    up_tx.resize(col_width, row_height).await;
                }
                ChannelMsg::Signal { signal } => up_tx.signal(signal).await,
                ChannelMsg::Eow => up_tx.stop_output().await,
                ChannelMsg::Close => break,
                _ => {}
            }
        }
    }
}

/// The input side's start: keys typed before the bridge began, and what
/// every key forwarded to an integrated shell is told to.
struct Keys<'a> {
    early: Vec<u8>,
    typed: Option<&'a std::sync::Mutex<Typed>>,
    /// What the terminal model types itself: not the user's keys.
    inject: mpsc::Receiver<Bytes>,
    /// The depth of a nested shell walissh did not integrate (0: none).
    unowned: Option<&'a std::sync::atomic::AtomicUsize>,
    /// Where the user is told a line of theirs was refused.
    notices: &'a ChannelWriteHalf<Msg>,
}

/// What one of the seat's drawing requests shows the client, and how
/// many of its bytes are a command's output.
fn drawn(draw: Draw, terminal: &mut Option<Terminal>, spinner: &mut Spinner) -> (Bytes, usize) {
    match draw {
        Draw::Show(bytes) => (spinner.stop_before(bytes), 0),
        Draw::Output(bytes) => {
            let output = bytes.len();
            (spinner.stop_before(bytes), output)
        }
        Draw::Spin => {
            spinner.start();
            (Bytes::new(), 0)
        }
        Draw::Done { fresh_prompt } => {
            if let Some(t) = terminal.as_mut() {
                t.agent_done(fresh_prompt);
            }
            (spinner.stop_before(Vec::new()), 0)
        }
        Draw::Nonce(nonce) => {
            if let Some(t) = terminal.as_mut() {
                t.expect_nonce(&nonce);
            }
            (Bytes::new(), 0)
        }
    }
}

/// Writes keys to the target, while it still reads them.
async fn forward(up_tx: &mut upstream::Writer, keys: Bytes, target_reads: &mut bool) {
    if *target_reads && up_tx.data(keys).await.is_err() {
        *target_reads = false;
    }
}

/// A line to the client that must not hold the session up: a client that
/// stopped reading would otherwise keep it waiting for window space.
async fn notify(client: &ChannelWriteHalf<Msg>, msg: &str) {
    // On a line of its own, wherever the shell left the cursor.
    let line: Bytes = [b"\r\n".as_slice(), &user_line(true, msg)].concat().into();
    let _ = tokio::time::timeout(NOTICE_TIMEOUT, client.extended_data_bytes(1, line)).await;
}

/// Reads what is left of the target's side after a hang-up.
async fn drain(up_rx: &mut upstream::Reader, totals: &mut Totals) {
    while let Some(event) = up_rx.next().await {
        match event {
            upstream::TargetEvent::ExitStatus(code) => totals.exit_status = Some(code),
            upstream::TargetEvent::ExitSignal { signal, .. } => {
                totals.exit_signal = Some(signal_name(&signal))
            }
            _ => {}
        }
    }
}

/// A signal's name as SSH spells it ("TERM"), for the audit.
fn signal_name(sig: &russh::Sig) -> String {
    match sig {
        russh::Sig::Custom(name) => name.clone(),
        other => format!("{other:?}"),
    }
}

/// The next message of a channel that may not exist: one that does not
/// never yields.
async fn next<T>(rx: Option<&mut mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The spinner drawn while the model thinks.
#[derive(Default)]
struct Spinner {
    /// When the next frame is due, while it turns.
    due: Option<Instant>,
    frame: usize,
}

impl Spinner {
    fn start(&mut self) {
        self.due = Some(Instant::now());
        self.frame = 0;
    }

    /// Waits for the next frame; never, when the spinner is not turning.
    async fn tick(&self) {
        match self.due {
            Some(due) => tokio::time::sleep_until(due).await,
            None => std::future::pending().await,
        }
    }

    fn frame(&mut self) -> Bytes {
        self.due = Some(Instant::now() + SPIN_EVERY);
        self.frame += 1;
        Bytes::from(spinner_frame(self.frame - 1))
    }

    /// Stops the spinner, erasing it before `next` is drawn.
    fn stop_before(&mut self, next: Vec<u8>) -> Bytes {
        if self.due.take().is_none() {
            return Bytes::from(next);
        }
        let mut out = SPINNER_CLEAR.to_vec();
        out.extend(next);
        Bytes::from(out)
    }
}
