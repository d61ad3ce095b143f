//! One session channel: one user's bridge from their SSH client to a target.
//!
//! A session reads the client's requests (pty-req, env, then shell, exec or
//! subsystem), chooses the target, checks that it can be audited, opens the
//! upstream side, and then pumps bytes both ways until either side closes
//! or the bastion shuts down. The two pumps are the one place every byte
//! passes; the terminal model and the agent's line interception will sit
//! there. Each write waits for the receiving side's window, so a slow peer
//! slows its sender instead of filling memory.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;

use bytes::Bytes;
use russh::server::{Handle, Msg};
use russh::{Channel, ChannelMsg, ChannelReadHalf, ChannelWriteHalf};

use crate::agent::Question;
use crate::audit::recording::{Header, Recording, Track};
use crate::audit::{Event, SessionRow};
use crate::bastion::Bastion;
use crate::config::{OnFailure, TargetConfig};
use crate::route::{self, Login, NoTarget};
use crate::shutdown::Listener;
use crate::terminal::screen::Screen;
use crate::terminal::{CommandRecord, Terminal, bootstrap};
use crate::upstream::{self, Command, Opened, PtySpec, Request};

/// Input that may arrive before the shell starts, kept for the target.
const EARLY_INPUT_MAX: usize = 64 * 1024;
/// How long a closing target may take to report its exit status.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How long a parting message may wait for the client's window.
const NOTICE_TIMEOUT: Duration = Duration::from_secs(1);
/// What users are told when the bastion stops under them.
const SHUTTING_DOWN: &str = "the bastion is shutting down; this session ends now";

/// What a session knows about where it runs.
pub(crate) struct Context {
    pub(crate) bastion: Arc<Bastion>,
    pub(crate) login: Login,
    pub(crate) peer: SocketAddr,
    pub(crate) handle: Handle,
}

/// The client's requests before the shell, exec or subsystem started.
struct Setup {
    command: Command,
    pty: Option<PtySpec>,
    env: Vec<(String, String)>,
    early_input: Vec<u8>,
}

/// What the bridge saw, for the `session_end` row.
#[derive(Default)]
struct Totals {
    bytes_in: u64,
    bytes_out: u64,
    exit_status: Option<u32>,
    exit_signal: Option<String>,
    /// Why the target failed the session (unreachable, refused, vanished
    /// without an exit status), for an `upstream_error` row.
    lost: Option<String>,
}

/// The identity of a running session, for its audit events.
struct Ids {
    session: String,
    user: String,
    target: String,
}

impl Ids {
    fn event(&self, kind: &'static str) -> Event {
        let mut ev = Event::new(kind).user(self.user.clone());
        ev.session = Some(self.session.clone());
        ev.target = Some(self.target.clone());
        ev
    }
}

pub(crate) async fn run(ctx: Context, mut channel: Channel<Msg>, mut stop: Listener) {
    let setup = tokio::select! {
        s = read_setup(&mut channel) => s,
        _ = stop.requested() => None,
    };
    let Some(mut setup) = setup else {
        let _ = channel.close().await;
        return;
    };
    let chosen = tokio::select! {
        c = choose_target(&ctx, &mut channel, &mut setup) => c,
        _ = stop.requested() => Err(NoTarget {
            message: SHUTTING_DOWN.into(),
            denied: None,
        }),
    };
    let target = match chosen {
        Ok(t) => t,
        Err(no) => {
            if let Some(requested) = &no.denied {
                let mut ev = Event::new("target_denied")
                    .user(ctx.login.user.clone())
                    .field("requested", requested.as_str());
                ev.target = Some(requested.clone());
                ctx.bastion.audit.event(ev).await;
            }
            refuse(&channel, setup.pty.is_some(), &no.message).await;
            return;
        }
    };
    // `stop` lives until the session's last audit row is queued, so
    // shutdown waits for it.
    run_session(&ctx, channel, setup, target, &mut stop).await;
}

/// Reads requests until the client asks for a shell, exec or subsystem.
async fn read_setup(channel: &mut Channel<Msg>) -> Option<Setup> {
    let mut pty = None;
    let mut env = Vec::new();
    let mut early_input = Vec::new();
    let mut overflow = false;
    loop {
        let command = match channel.wait().await? {
            ChannelMsg::RequestPty {
                term,
                col_width,
                row_height,
                terminal_modes,
                ..
            } => {
                pty = Some(PtySpec {
                    term,
                    cols: col_width,
                    rows: row_height,
                    modes: terminal_modes,
                });
                continue;
            }
            ChannelMsg::SetEnv {
                variable_name,
                variable_value,
                ..
            } => {
                if env_allowed(&variable_name) {
                    env.push((variable_name, variable_value));
                }
                continue;
            }
            ChannelMsg::WindowChange {
                col_width,
                row_height,
                ..
            } => {
                if let Some(p) = pty.as_mut() {
                    (p.cols, p.rows) = (col_width, row_height);
                }
                continue;
            }
            ChannelMsg::Data { data } => {
                // Keep a prefix only: dropping a chunk and keeping later
                // ones would reorder what the user typed.
                if !overflow && early_input.len() + data.len() <= EARLY_INPUT_MAX {
                    early_input.extend_from_slice(&data);
                } else {
                    overflow = true;
                }
                continue;
            }
            ChannelMsg::RequestShell { .. } => Command::Shell,
            ChannelMsg::Exec { command, .. } => Command::Exec(command),
            ChannelMsg::RequestSubsystem { name, .. } => Command::Subsystem(name),
            ChannelMsg::Eof | ChannelMsg::Close => return None,
            _ => continue,
        };
        return Some(Setup {
            command,
            pty,
            env,
            early_input,
        });
    }
}

/// Only the locale travels from the client, as with OpenSSH's default
/// `AcceptEnv LANG LC_*`: other variables can change how the target's
/// shell behaves.
fn env_allowed(name: &str) -> bool {
    name == "LANG" || name.starts_with("LC_")
}

async fn choose_target(
    ctx: &Context,
    channel: &mut Channel<Msg>,
    setup: &mut Setup,
) -> Result<TargetConfig, NoTarget> {
    let config = &ctx.bastion.config;
    // The handler only accepts logins of configured users.
    let user = config.user(&ctx.login.user).ok_or_else(|| NoTarget {
        message: "unknown user".into(),
        denied: None,
    })?;
    if let Some(name) = &ctx.login.target {
        return route::requested(config, user, name).cloned();
    }
    let allowed = config.allowed_targets(user);
    match (allowed.len(), &setup.pty) {
        (1, _) => Ok((*allowed[0]).clone()),
        (n, Some(_)) if n > 1 => {
            let names: Vec<&str> = allowed.iter().map(|t| t.name()).collect();
            let pty = &mut setup.pty;
            let picked = route::menu(channel, &names, |cols, rows| {
                if let Some(p) = pty.as_mut() {
                    (p.cols, p.rows) = (cols, rows);
                }
            })
            .await;
            picked.map(|i| (*allowed[i]).clone()).ok_or(NoTarget {
                message: "no target chosen".into(),
                denied: None,
            })
        }
        _ => Err(route::must_name(&allowed, &ctx.login.user)),
    }
}

/// Tells the client why it gets no session (exit status 1), and closes
/// the channel.
async fn refuse(channel: &Channel<Msg>, pty: bool, message: &str) {
    end_with(channel, pty, message, 1).await
}

/// Ends a channel with a message on stderr and an exit status.
async fn end_with(channel: &Channel<Msg>, pty: bool, message: &str, status: u32) {
    let _ = channel
        .extended_data_bytes(1, user_line(pty, message))
        .await;
    let _ = channel.exit_status(status).await;
    let _ = channel.eof().await;
    let _ = channel.close().await;
}

fn user_line(pty: bool, message: &str) -> Bytes {
    let end = if pty { "\r\n" } else { "\n" };
    Bytes::from(format!("walissh: {message}{end}"))
}

fn session_id() -> String {
    use rand::RngExt;
    let n: u64 = rand::rng().random();
    format!("{n:016x}")
}

async fn run_session(
    ctx: &Context,
    channel: Channel<Msg>,
    setup: Setup,
    target: TargetConfig,
    stop: &mut Listener,
) {
    let bastion = &ctx.bastion;
    let ids = Ids {
        session: session_id(),
        user: ctx.login.user.clone(),
        target: target.name().to_string(),
    };
    let pty = setup.pty.is_some();
    let Ok(recording) = admit(ctx, &ids, &channel, &setup).await else {
        return;
    };

    bastion
        .audit
        .session_start(SessionRow {
            id: ids.session.clone(),
            user: ids.user.clone(),
            target: ids.target.clone(),
            client_addr: ctx.peer.to_string(),
            started: SystemTime::now(),
            recording: recording.as_ref().map(|r| r.path.display().to_string()),
        })
        .await;
    bastion
        .audit
        .event(
            ids.event("session_start")
                .field("client_addr", ctx.peer.to_string())
                .field("pty", pty),
        )
        .await;
    audit_command(ctx, &ids, &setup.command).await;

    let Setup {
        command,
        pty: pty_spec,
        env,
        early_input,
    } = setup;
    let request = Request {
        command,
        pty: pty_spec,
        env,
        user: ids.user.clone(),
        integrate: bastion.config.terminal.shell_integration,
    };
    let opened = tokio::select! {
        o = upstream::open(&target, &bastion.upstream, &request) => o,
        _ = stop.requested() => Err(SHUTTING_DOWN.to_string()),
    };
    let totals = match opened {
        Ok(Opened {
            reader,
            mut writer,
            integrated,
        }) => {
            // A shell that takes walissh's bootstrap gets it first, typed
            // into its terminal; the terminal model then hides its traces.
            let terminal = match (integrated, &request.pty) {
                (Some(shell), Some(pty)) => {
                    let nonce = session_id();
                    let prefixes: Vec<String> = bastion
                        .config
                        .ai
                        .prefixes
                        .iter()
                        .map(|p| p.get_ref().clone())
                        .collect();
                    let input = bootstrap::input(shell, &nonce, pty.echo(), &prefixes);
                    let _ = writer.data(Bytes::from(input)).await;
                    Some(Terminal::integrated(&nonce))
                }
                _ => None,
            };
            let screen = match (&request.pty, bastion.config.terminal.screen_model) {
                (Some(p), true) => Some(Screen::start(p.rows, p.cols)),
                _ => None,
            };
            let heuristic = terminal.is_none() && matches!(request.command, Command::Shell);
            let pumps = Pumps {
                ctx,
                ids: &ids,
                recording: recording.as_ref(),
                screen: screen.as_ref(),
                heuristic,
            };
            pumps
                .bridge(channel, reader, writer, terminal, early_input, stop)
                .await
        }
        Err(message) => {
            tracing::warn!(session = %ids.session, target = %ids.target, %message, "upstream failed");
            end_with(&channel, pty, &message, 255).await;
            Totals {
                exit_status: Some(255),
                lost: Some(message),
                ..Totals::default()
            }
        }
    };
    if let Some(message) = &totals.lost {
        bastion
            .audit
            .event(
                ids.event("upstream_error")
                    .field("message", message.as_str()),
            )
            .await;
    }
    if let Some(r) = recording {
        r.close().await;
    }
    bastion
        .audit
        .event(
            ids.event("session_end")
                .field("exit_status", totals.exit_status)
                .field("exit_signal", totals.exit_signal)
                .field("bytes_in", totals.bytes_in)
                .field("bytes_out", totals.bytes_out),
        )
        .await;
    bastion.audit.session_end(&ids.session).await;
}

/// Checks that the session can be audited, and opens its recording when it
/// is interactive: it has a PTY, or it is a shell without one (`ssh -T`),
/// which must not be a way around recording. When storage fails,
/// `[audit] on_failure` decides: refuse the session (`Err`, the client told
/// why) or warn the user and go on.
async fn admit(
    ctx: &Context,
    ids: &Ids,
    channel: &Channel<Msg>,
    setup: &Setup,
) -> Result<Option<Recording>, ()> {
    let bastion = &ctx.bastion;
    let pty = setup.pty.is_some();
    if let Some(problem) = bastion.audit.health.problem() {
        storage_failure(ctx, ids, channel, pty, problem).await?;
    }
    let (cols, rows, term) = match (&setup.pty, &setup.command) {
        (Some(p), _) => (p.cols, p.rows, p.term.as_str()),
        (None, Command::Shell) => (80, 24, "dumb"),
        (None, _) => return Ok(None),
    };
    let title = format!("{}@{}", ids.user, ids.target);
    let header = Header {
        cols,
        rows,
        term,
        title: &title,
    };
    match bastion.recorder.open(&ids.session, header).await {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            tracing::error!(session = %ids.session, error = %e, "cannot create the recording");
            let problem = "session recordings cannot be written";
            storage_failure(ctx, ids, channel, pty, problem).await?;
            Ok(None)
        }
    }
}

async fn storage_failure(
    ctx: &Context,
    ids: &Ids,
    channel: &Channel<Msg>,
    pty: bool,
    problem: &str,
) -> Result<(), ()> {
    let audit = &ctx.bastion.audit;
    if audit.health.policy() == OnFailure::Refuse {
        audit
            .event(ids.event("storage_error").field("message", problem))
            .await;
        let msg = format!("{problem}; new sessions are refused until an administrator fixes it");
        refuse(channel, pty, &msg).await;
        return Err(());
    }
    tracing::warn!(session = %ids.session, problem, "session admitted without full audit (on_failure = continue)");
    let warning = format!("WARNING: {problem}; this session is not fully audited");
    let _ = channel
        .extended_data_bytes(1, user_line(pty, &warning))
        .await;
    Ok(())
}

/// Exec and subsystem requests are audited with what they run; file
/// transfers are marked as such.
async fn audit_command(ctx: &Context, ids: &Ids, command: &Command) {
    let ev = match command {
        Command::Shell => return,
        Command::Exec(cmd) => {
            let text = String::from_utf8_lossy(cmd).into_owned();
            let ev = ids.event("exec").field("command", text.as_str());
            if text == "scp" || text.starts_with("scp ") {
                ev.field("transfer", "scp")
            } else {
                ev
            }
        }
        Command::Subsystem(name) => {
            let ev = ids.event("subsystem").field("name", name.as_str());
            if name == "sftp" {
                ev.field("transfer", "sftp")
            } else {
                ev
            }
        }
    };
    ctx.bastion.audit.event(ev).await;
}

/// How the bridge ended.
enum End {
    /// The target's side closed.
    TargetClosed,
    /// The client closed its channel, or can no longer be written to.
    ClientClosed,
    Shutdown,
}

/// What both pumps share.
struct Pumps<'a> {
    ctx: &'a Context,
    ids: &'a Ids,
    recording: Option<&'a Recording>,
    screen: Option<&'a Screen>,
    /// A shell without integration: commands are read off the screen.
    heuristic: bool,
}

impl Pumps<'_> {
    /// Pumps both ways until one side closes or shutdown begins, then closes
    /// the other side cleanly.
    async fn bridge(
        &self,
        channel: Channel<Msg>,
        mut up_rx: upstream::Reader,
        mut up_tx: upstream::Writer,
        mut terminal: Option<Terminal>,
        early_input: Vec<u8>,
        stop: &mut Listener,
    ) -> Totals {
        let (mut client_rx, client_tx) = channel.split();
        let mut totals = Totals::default();
        let mut bytes_in = 0u64;
        // Input waits while walissh's bootstrap runs in the shell: bash
        // drops what was typed ahead of a command that reads the terminal.
        let (ready_tx, ready_rx) = watch::channel(terminal.is_none());
        let end = {
            let down = self.to_client(
                &mut up_rx,
                &client_tx,
                &mut terminal,
                &ready_tx,
                &mut totals,
            );
            let up = self.to_target(
                &mut client_rx,
                &mut up_tx,
                ready_rx,
                early_input,
                &mut bytes_in,
            );
            tokio::pin!(down, up);
            tokio::select! {
                end = &mut down => end,
                _ = &mut up => End::ClientClosed,
                _ = stop.requested() => End::Shutdown,
            }
        };
        totals.bytes_in = bytes_in;
        match end {
            End::TargetClosed if totals.exit_status.is_none() && totals.exit_signal.is_none() => {
                // The target went away without saying how the session ended.
                let msg = format!("{} closed the session unexpectedly", self.ids.target);
                notify(&client_tx, &msg).await;
                totals.lost = Some(msg);
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
        }
        up_tx.finish().await;
        let _ = client_tx.eof().await;
        let _ = client_tx.close().await;
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
        ready: &watch::Sender<bool>,
        totals: &mut Totals,
    ) -> End {
        let mut track = self.recording.map(|r| r.output());
        loop {
            let deadline = terminal.as_ref().and_then(|t| t.deadline());
            let event = tokio::select! {
                e = up_rx.next() => e,
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    // The bootstrap never answered: show what was held back.
                    if self.release(terminal, ready, client, &mut track, false).await.is_err() {
                        return End::ClientClosed;
                    }
                    continue;
                }
            };
            if matches!(event, None | Some(upstream::Event::Eof))
                && self
                    .release(terminal, ready, client, &mut track, true)
                    .await
                    .is_err()
            {
                return End::ClientClosed;
            }
            let Some(event) = event else {
                break;
            };
            let sent = match event {
                upstream::Event::Data(data) => {
                    totals.bytes_out += data.len() as u64;
                    let data = match terminal.as_mut() {
                        Some(t) => {
                            let p = t.output(data);
                            if t.deadline().is_none() && !*ready.borrow() {
                                let _ = ready.send(true);
                            }
                            for record in &p.finished {
                                self.audit_command(record).await;
                            }
                            let shown = self.answer_questions(p.to_client, &p.questions).await;
                            if p.prompt
                                && let Some(s) = self.screen
                            {
                                s.prompt();
                            }
                            shown
                        }
                        None => data,
                    };
                    self.show(data, client, &mut track).await
                }
                upstream::Event::Stderr(data) => {
                    totals.bytes_out += data.len() as u64;
                    if let Some(t) = track.as_mut() {
                        t.write(&data).await;
                    }
                    client.extended_data_bytes(1, data).await
                }
                upstream::Event::Eof => client.eof().await,
                upstream::Event::ExitStatus(code) => {
                    totals.exit_status = Some(code);
                    client.exit_status(code).await
                }
                upstream::Event::ExitSignal {
                    signal,
                    core_dumped,
                    message,
                } => {
                    totals.exit_signal = Some(signal_name(&signal));
                    let _ = self
                        .ctx
                        .handle
                        .exit_signal_request(
                            client.id(),
                            signal,
                            core_dumped,
                            message,
                            String::new(),
                        )
                        .await;
                    Ok(())
                }
            };
            if sent.is_err() {
                return End::ClientClosed;
            }
        }
        End::TargetClosed
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
    async fn release(
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

    /// Audits each question caught at the prompt and splices the agent's
    /// answer into the output where the shell cleared the line.
    async fn answer_questions(&self, out: Bytes, questions: &[(usize, Question)]) -> Bytes {
        if questions.is_empty() {
            return out;
        }
        let mut spliced = Vec::with_capacity(out.len() + 128);
        let mut from = 0;
        for (at, q) in questions {
            let ev = self.ids.event("ai_prompt").field("text", q.text.as_str());
            self.ctx.bastion.audit.event(ev).await;
            spliced.extend_from_slice(&out[from..*at]);
            spliced.extend(crate::agent::answer(q, self.ai_mode()));
            from = *at;
        }
        spliced.extend_from_slice(&out[from..]);
        Bytes::from(spliced)
    }

    /// For shells without integration: when Enter is typed on what looks
    /// like a prompt line, audits the line as a command (no exit status,
    /// no directory: the screen does not say). A heuristic, documented as
    /// such: it reads what the screen shows, so input typed with echo off
    /// is never seen, and it can mistake a program's prompt for the shell's.
    async fn read_command_off_screen(&self, typed: &[u8]) {
        let (Some(cr), Some(screen)) = (memchr::memchr(b'\r', typed), self.screen) else {
            return;
        };
        let Some(snap) = screen.snapshot().await else {
            return;
        };
        if snap.stale {
            // Bulk output outran the model: start it afresh for next time.
            screen.prompt();
            return;
        }
        let before = &typed[..cr];
        if snap.alternate || !before.iter().all(|b| (0x20..0x7f).contains(b)) {
            return;
        }
        let line = format!("{}{}", snap.cursor_line, String::from_utf8_lossy(before));
        if let Some(command) = crate::terminal::screen::prompt_command(&line) {
            let ev = self
                .ids
                .event("command")
                .field("command", command)
                .field("exit_code", serde_json::Value::Null)
                .field("cwd", serde_json::Value::Null)
                .field("detected", "screen");
            self.ctx.bastion.audit.event(ev).await;
        }
    }

    /// The user's `ai` setting.
    fn ai_mode(&self) -> crate::config::AiMode {
        let config = &self.ctx.bastion.config;
        config
            .user(&self.ids.user)
            .map(|u| u.ai)
            .unwrap_or(crate::config::AiMode::Off)
    }

    /// A command the user ran at the shell prompt, as the marks told it.
    async fn audit_command(&self, r: &CommandRecord) {
        let duration = r.ended.duration_since(r.started).unwrap_or_default();
        let ev = self
            .ids
            .event("command")
            .field("command", r.command.clone())
            .field("exit_code", r.exit_code)
            .field("cwd", r.cwd.clone())
            .field("duration_ms", duration.as_millis() as u64)
            .field("output_bytes", r.output.total());
        self.ctx.bastion.audit.event(ev).await;
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
        early_input: Vec<u8>,
        bytes_in: &mut u64,
    ) {
        let mut track = self.recording.map(|r| r.input());
        let _ = ready.wait_for(|r| *r).await;
        let mut target_reads =
            early_input.is_empty() || up_tx.data(Bytes::from(early_input)).await.is_ok();
        while let Some(msg) = client.wait().await {
            match msg {
                ChannelMsg::Data { data } => {
                    *bytes_in += data.len() as u64;
                    if self.heuristic {
                        self.read_command_off_screen(&data).await;
                    }
                    if let Some(t) = track.as_mut() {
                        t.write(&data).await;
                    }
                    if target_reads && up_tx.data(data).await.is_err() {
                        target_reads = false;
                    }
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
                        s.resize(row_height, col_width).await;
                    }
                    up_tx.resize(col_width, row_height).await;
                }
                ChannelMsg::Signal { signal } => up_tx.signal(signal).await,
                ChannelMsg::Close => break,
                _ => {}
            }
        }
    }
}

/// A line to the client that must not hold the session up: a client that
/// stopped reading would otherwise keep it waiting for window space.
async fn notify(client: &ChannelWriteHalf<Msg>, msg: &str) {
    let line = user_line(true, &format!("\r\n{msg}"));
    let _ = tokio::time::timeout(NOTICE_TIMEOUT, client.extended_data_bytes(1, line)).await;
}

/// Reads what is left of the target's side after a hang-up.
async fn drain(up_rx: &mut upstream::Reader, totals: &mut Totals) {
    while let Some(event) = up_rx.next().await {
        match event {
            upstream::Event::ExitStatus(code) => totals.exit_status = Some(code),
            upstream::Event::ExitSignal { signal, .. } => {
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
