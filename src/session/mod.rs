//! One session channel: one user's bridge from their SSH client to a target.
//!
//! A session reads the client's requests (pty-req, env, then shell, exec or
//! subsystem), chooses the target, checks that it can be audited, opens the
//! upstream side, and then pumps bytes both ways until either side closes
//! or the bastion shuts down ([`bridge`]: the pumps, the terminal model on
//! their way, and the agent's [`seat`] beside them, sharing a little state
//! in [`Shared`]).

mod bridge;
mod env;
pub(crate) use env::acceptable as env_acceptable;
pub(crate) mod ansible;
mod audit_rows;
mod gateway;
mod kill;
mod seat;
mod shared;

pub(crate) use kill::{kill, kill_here};
pub(crate) use shared::Shared;

use crate::audit::Kind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use russh::server::{Handle, Msg};
use russh::{Channel, ChannelMsg};

use crate::audit::recording::{Header, Recording};
use crate::audit::{Event, Ids};
use crate::bastion::{Bastion, Live};
use crate::config::{AiMode, OnFailure, TargetConfig};
use crate::route::{self, Login, NoTarget};
use crate::shutdown::Listener;
use crate::terminal::screen::Screen;
use crate::terminal::{Terminal, bootstrap};
use crate::upstream::{self, Command, Opened, PtySpec, Request};
use bridge::Pumps;

/// Input that may arrive before the shell starts, kept for the target.
const EARLY_INPUT_MAX: usize = 64 * 1024;
/// How long a closing target may take to report its exit status.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How long a parting message may wait for the client's window.
const NOTICE_TIMEOUT: Duration = Duration::from_secs(1);
/// The subsystem on which the bastion serves MCP (`session::gateway`).
const MCP_SUBSYSTEM: &str = "mcp";
/// What users are told when the bastion stops under them.
const SHUTTING_DOWN: &str = "the bastion is shutting down; this session ends now";

/// What a session knows of the connection it runs on (who logged in,
/// from where, what their login proved) and of the bastion.
pub(crate) struct Connection {
    pub(crate) bastion: Arc<Bastion>,
    /// The config as it was when the session started: its target and
    /// settings hold for the session, whatever a reload changes.
    pub(crate) live: Arc<Live>,
    pub(crate) login: Login,
    pub(crate) peer: SocketAddr,
    pub(crate) handle: Handle,
    /// What the login's certificate restricts.
    pub(crate) limits: crate::auth::cert::CertLimits,
    /// What the login proved, for checks after the session's start.
    pub(crate) credential: Arc<dyn Credential>,
    /// The connection's refused requests, counted (shared with the
    /// server's handler, which writes the totals when it ends).
    pub(crate) refusals: crate::audit::tally::Shared,
    /// The account on the target, when the login chose one (a jump's
    /// inner login name); else the target's own `user`.
    pub(crate) account: Option<String>,
    /// How the session came: `jump` for an inspecting jump.
    pub(crate) via: Option<&'static str>,
    /// The connection a jump's inner connection runs inside: ending the
    /// session ends it too.
    pub(crate) outer: Option<Handle>,
}

impl Connection {
    /// Ends the whole SSH connection the session runs on: an admin ended
    /// the session (`ending`).
    async fn disconnect(&self, ending: &crate::bastion::Ending) {
        for handle in std::iter::once(&self.handle).chain(&self.outer) {
            let _ = handle
                .disconnect(
                    russh::Disconnect::ByApplication,
                    ending.line(),
                    String::new(),
                )
                .await;
        }
    }

    /// Audits `n` refusals of `kind` through the connection's tally: a
    /// client repeating one costs a few rows with counts.
    async fn refused(&self, kind: &str, row: Event, n: u64) {
        let audit = &self.bastion.audit;
        self.refusals.refused(audit, kind.into(), row, n).await;
    }
}

/// A login's proof (a key, a certificate, a password, a code), as the
/// server keeps it: a session asks it again, against the config of the
/// moment, before each MCP gateway call.
pub(crate) trait Credential: Send + Sync {
    /// Whether `user` may still log in so under `live`.
    fn still_valid(&self, live: &Live, user: &str) -> bool;
}

/// The client's requests before the shell, exec or subsystem started.
struct Setup {
    command: Command,
    pty: Option<PtySpec>,
    /// The client asked for its agent to be forwarded (`ssh -A`).
    agent: bool,
    /// What passed `env`'s allow-list.
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
    lost: Option<Lost>,
    /// The client was sent the channel's EOF already: a second one is a
    /// protocol error to some clients (asyncssh ends the connection).
    client_eof: bool,
    /// An exec that runs an Ansible module: its output, watched for the
    /// module's report (`ansible`).
    module: Option<ansible::ModuleRun>,
}

/// What an `upstream_error` row says: the user's sentence, and its case
/// (`upstream::OpenError::reason`, or `lost` for a target gone mid-session).
struct Lost {
    message: String,
    reason: &'static str,
}

impl From<upstream::OpenError> for Lost {
    fn from(e: upstream::OpenError) -> Lost {
        Lost {
            reason: e.reason(),
            message: e.to_string(),
        }
    }
}

pub(crate) async fn run(conn: Connection, mut channel: Channel<Msg>, mut stop: Listener) {
    let mut env = env::Env::default();
    let setup = tokio::select! {
        s = read_setup(&mut channel, &mut env) => s,
        _ = stop.requested() => None,
    };
    if let Some((row, n)) = env.refusals(&conn.login.user) {
        conn.refused("env_refused", row, n).await;
    }
    let Some(mut setup) = setup else {
        let _ = channel.close().await;
        return;
    };
    restrict(&conn.limits, &mut setup);
    setup.agent &= may_forward_agent(conn.live.config.user(&conn.login.user), &conn.limits);
    let chosen = tokio::select! {
        c = choose_target(&conn, &mut channel, &mut setup) => c,
        _ = stop.requested() => Err(NoTarget {
            message: SHUTTING_DOWN.into(),
            denied: None,
        }),
    };
    let target = match chosen {
        Ok(mut t) => {
            // A local target's shell runs as its run_as, whatever name the
            // login gave.
            if let Some(account) = &conn.account
                && t.kind == crate::config::TargetKind::Ssh
            {
                t.user = Some(toml::Spanned::new(0..0, account.clone()));
            }
            t
        }
        Err(no) => {
            if let Some(requested) = &no.denied {
                let mut ev = Event::new(Kind::TargetDenied)
                    .user(conn.login.user.clone())
                    .field("requested", requested.as_str());
                ev.target = Some(requested.clone());
                conn.refused("target_denied", ev, 1).await;
            }
            refuse(&channel, setup.pty.is_some(), &no.message).await;
            return;
        }
    };
    // `stop` lives until the session's last audit row is queued, so
    // shutdown waits for it.
    run_session(&conn, channel, setup, target, &mut stop).await;
}

/// Reads requests until the client asks for a shell, exec or subsystem.
async fn read_setup(channel: &mut Channel<Msg>, env: &mut env::Env) -> Option<Setup> {
    let mut pty = None;
    let mut agent = false;
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
                env.request(variable_name, variable_value);
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
            ChannelMsg::AgentForward { .. } => {
                agent = true;
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
            agent,
            env: env.take_accepted(),
            early_input,
        });
    }
}

/// Whether `user`'s agent may be forwarded to targets: `[[users]]
/// agent_forwarding`, and, for a certificate login, its
/// `permit-agent-forwarding`. Off by default.
pub(crate) fn may_forward_agent(
    user: Option<&crate::config::UserConfig>,
    limits: &crate::auth::cert::CertLimits,
) -> bool {
    user.is_some_and(|u| u.agent_forwarding) && !limits.no_agent
}

/// What the login's certificate restricts, as sshd applies it: a
/// `force-command` runs whatever the client asked for (a shell, a
/// command, a subsystem), and without `permit-pty` there is no terminal.
fn restrict(limits: &crate::auth::cert::CertLimits, setup: &mut Setup) {
    if let Some(forced) = &limits.force_command {
        setup.command = Command::Exec(forced.as_bytes().to_vec());
    }
    if limits.no_pty {
        setup.pty = None;
    }
    if limits.no_agent {
        setup.agent = false;
    }
}

async fn choose_target(
    conn: &Connection,
    channel: &mut Channel<Msg>,
    setup: &mut Setup,
) -> Result<TargetConfig, NoTarget> {
    let config = &conn.live.config;
    // The handler only accepts logins of configured users.
    let user = config.user(&conn.login.user).ok_or_else(|| NoTarget {
        message: "unknown user".into(),
        denied: None,
    })?;
    if let Some(name) = &conn.login.target {
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
        _ => Err(route::must_name(&allowed, &conn.login.user)),
    }
}

/// The agents a user's next call runs under, and their mode: the newest
/// config's, and the stricter of the mode at login (`started`) and
/// today's. A reload never widens a live session's rights, and a user gone
/// from the config has none.
fn settings_now(
    bastion: &Bastion,
    user: &str,
    started: AiMode,
) -> (Arc<crate::agent::Agent>, AiMode) {
    let newest = bastion.live();
    let today = newest.config.user(user).map(|u| u.ai);
    (
        newest.agent.clone(),
        today.unwrap_or(AiMode::Off).min(started),
    )
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
    conn: &Connection,
    channel: Channel<Msg>,
    setup: Setup,
    target: TargetConfig,
    stop: &mut Listener,
) {
    let bastion = &conn.bastion;
    let ids = Ids {
        session: session_id(),
        user: conn.login.user.clone(),
        target: target.name().to_string(),
    };
    let pty = setup.pty.is_some();
    let Ok(recording) = admit(conn, &ids, &channel, &setup).await else {
        return;
    };
    if let Err(refused) = audit_start(conn, &ids, &setup, recording.as_ref()).await {
        let problem = refused.problem;
        let msg = format!("{problem}; new sessions are refused until an administrator fixes it");
        refuse(&channel, pty, &msg).await;
        // A start queued as a plain event is written once the database
        // works: its end (and its recording's digest) must follow it.
        match (refused.start_queued, recording) {
            (true, recording) => audit_end(bastion, &ids, &Totals::default(), recording).await,
            (false, Some(r)) => {
                let _ = r.close().await;
            }
            (false, None) => {}
        }
        return;
    }

    // Listed from its audited start: from here an admin can end it.
    let mut open = bastion.sessions.enter(&ids);
    if matches!(&setup.command, Command::Subsystem(name) if name == MCP_SUBSYSTEM) {
        let totals = gateway::serve(conn, &ids, channel, &target, (stop, &mut open)).await;
        drop(open);
        audit_end(bastion, &ids, &totals, recording).await;
        return;
    }
    let Setup {
        command,
        pty: pty_spec,
        agent,
        env,
        early_input,
    } = setup;
    let request = Request {
        agent: agent.then(|| conn.handle.clone()),
        command,
        pty: pty_spec,
        env,
        user: ids.user.clone(),
        session: ids.session.clone(),
        integrate: conn.live.config.terminal.shell_integration,
    };
    let opened = tokio::select! {
        o = upstream::open(&target, &bastion.upstream, &request) => o,
        _ = stop.requested() => Err(upstream::OpenError::Stopped(SHUTTING_DOWN.to_string())),
    };
    let mut totals = match opened {
        Ok(Opened {
            reader,
            mut writer,
            integrated,
            info,
            runner,
        }) => {
            let mode = conn
                .live
                .config
                .user(&ids.user)
                .map_or(AiMode::Off, |u| u.ai);
            let terminal = match (integrated, &request.pty) {
                (Some(shell), Some(pty)) => {
                    Some(integrate(conn, shell, pty, mode, &mut writer).await)
                }
                _ => None,
            };
            let screen = request
                .pty
                .as_ref()
                .and_then(|p| screen_model(conn, &ids, p));
            let heuristic = terminal.is_none() && matches!(request.command, Command::Shell);
            let shared = Shared::new(request.pty.as_ref().map_or(80, |p| p.cols));
            let pumps = Pumps {
                conn,
                ids: &ids,
                recording: recording.as_ref(),
                screen: screen.as_ref(),
                heuristic,
                mode,
                shared: &shared,
                info: info.as_ref(),
                runner: &runner,
                four_eyes: target.four_eyes,
            };
            let stops = (stop, &mut open);
            let totals = Totals {
                module: match &request.command {
                    Command::Exec(cmd) => ansible::ModuleRun::of(cmd),
                    _ => None,
                },
                ..Totals::default()
            };
            pumps
                .bridge(
                    channel,
                    (reader, writer),
                    terminal,
                    early_input,
                    totals,
                    stops,
                )
                .await
        }
        Err(failed) => {
            drop(open);
            let lost = Lost::from(failed);
            let (message, reason) = (&lost.message, lost.reason);
            tracing::warn!(session = %ids.session, target = %ids.target, %message, reason, "upstream failed");
            end_with(&channel, pty, message, 255).await;
            Totals {
                exit_status: Some(255),
                lost: Some(lost),
                ..Totals::default()
            }
        }
    };
    if let Some(row) = totals
        .module
        .take()
        .and_then(|m| m.row(ids.event(Kind::AnsibleTask)))
    {
        bastion.audit.event(row).await;
    }
    audit_end(bastion, &ids, &totals, recording).await;
}

/// Why a session's start could not be audited, and whether its
/// `session_start` row is queued all the same (an exec's: only its command
/// row is written ahead).
struct Refused {
    problem: &'static str,
    start_queued: bool,
}

/// The session's `session_start` and command events (the writer makes the
/// session's row from the first). The last is written ahead
/// (`Audit::ahead`): no shell or command starts before its rows are in
/// the database. Err when they cannot be, under `[audit] on_failure =
/// "refuse"`.
async fn audit_start(
    conn: &Connection,
    ids: &Ids,
    setup: &Setup,
    recording: Option<&Recording>,
) -> Result<(), Refused> {
    let audit = &conn.bastion.audit;
    // The recording's file is named in the chained row: `audit verify`
    // and `walissh play` find it there, and the sessions table has it
    // from there.
    let start = ids
        .event(Kind::SessionStart)
        .field("client_addr", conn.peer.to_string())
        .field("pty", setup.pty.is_some())
        .field("agent_forwarding", setup.agent)
        .field("recording", recording.map(|r| r.path.display().to_string()));
    let start = match conn.via {
        Some(via) => start.field("via", via),
        None => start,
    };
    // The account on the target, when the login chose it (`root@web1`
    // through the jump).
    let start = match &conn.account {
        Some(account) => start.field("account", account.as_str()),
        None => start,
    };
    let (written, start_queued) = match command_event(ids, &setup.command) {
        Some(command) => {
            audit.event(start).await;
            (audit.ahead(command).await, true)
        }
        None => (audit.ahead(start).await, false),
    };
    written.map_err(|problem| Refused {
        problem,
        start_queued,
    })
}

/// A shell that takes walissh's bootstrap gets it first, typed into its
/// terminal; the terminal model then hides its traces, and follows the
/// user into shells started from the prompt.
async fn integrate(
    conn: &Connection,
    shell: crate::terminal::Shell,
    pty: &PtySpec,
    mode: AiMode,
    writer: &mut upstream::Writer,
) -> Terminal {
    let nonce = crate::terminal::nonce();
    let prefixes = &conn.live.agent.prefixes;
    let input = bootstrap::input(shell, &nonce, pty.echo(), prefixes);
    let _ = writer.data(Bytes::from(input)).await;
    Terminal::integrated(&nonce, mode != AiMode::Off).follow_nested(prefixes.to_vec())
}

/// The session's screen model, within `[terminal] screen_memory_mb`; none
/// when it is off or the memory is used up (the session goes on).
fn screen_model(conn: &Connection, ids: &Ids, pty: &PtySpec) -> Option<Screen> {
    let t = &conn.live.config.terminal;
    if !t.screen_model {
        return None;
    }
    let limit = usize::try_from(t.screen_memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
    let memory = &conn.bastion.screen_memory;
    let screen = Screen::start(pty.rows, pty.cols, &conn.bastion.screens, memory, limit);
    if screen.is_none() {
        let used_mb = memory.used() >> 20;
        tracing::warn!(session = %ids.session, used_mb, "no screen model: [terminal] screen_memory_mb is used up");
    }
    screen
}

/// How the session ended: the lost upstream, the recording closed, the
/// `session_end` event and the row's end.
async fn audit_end(bastion: &Bastion, ids: &Ids, totals: &Totals, recording: Option<Recording>) {
    if let Some(lost) = &totals.lost {
        let ev = ids
            .event(Kind::UpstreamError)
            .field("message", lost.message.as_str())
            .field("reason", lost.reason);
        bastion.audit.event(ev).await;
    }
    // The recording's digest goes into the chained row: `audit verify`
    // finds a recording cut or edited afterwards.
    let digest = match recording {
        Some(r) => r.close().await,
        None => None,
    };
    let mut end = ids
        .event(Kind::SessionEnd)
        .field("exit_status", totals.exit_status)
        .field("exit_signal", totals.exit_signal.clone())
        .field("bytes_in", totals.bytes_in)
        .field("bytes_out", totals.bytes_out);
    if let Some((sha256, bytes)) = digest {
        end = end
            .field("recording_sha256", sha256)
            .field("recording_bytes", bytes);
    }
    // The writer ends the session's row with this event.
    bastion.audit.event(end).await;
}

/// Checks that the session can be audited, and opens its recording when it
/// is interactive (it has a PTY, or it is a shell without one: `ssh -T`)
/// or an exec with `[audit] record_exec`: neither may be a way around
/// recording. sftp is audited, not recorded. When storage fails,
/// `[audit] on_failure` decides: refuse the session (`Err`, the client told
/// why) or warn the user and go on.
async fn admit(
    conn: &Connection,
    ids: &Ids,
    channel: &Channel<Msg>,
    setup: &Setup,
) -> Result<Option<Recording>, ()> {
    let bastion = &conn.bastion;
    let pty = setup.pty.is_some();
    if let Some(problem) = bastion.audit.health.problem() {
        storage_failure(conn, ids, channel, pty, problem).await?;
    }
    let record_exec = conn.live.config.audit.record_exec;
    let (cols, rows, term) = match (&setup.pty, &setup.command) {
        (Some(p), _) => (p.cols, p.rows, p.term.as_str()),
        (None, Command::Shell) => (80, 24, "dumb"),
        (None, Command::Exec(_)) if record_exec => (80, 24, "dumb"),
        (None, _) => return Ok(None),
    };
    let title = format!("{}@{}", ids.user, ids.target);
    let header = Header {
        cols,
        rows,
        term,
        title: &title,
        transfer: !pty && matches!(setup.command, Command::Exec(_)),
    };
    match bastion.recorder.open(&ids.session, header).await {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            tracing::error!(session = %ids.session, error = %e, "cannot create the recording");
            let problem = "session recordings cannot be written";
            storage_failure(conn, ids, channel, pty, problem).await?;
            Ok(None)
        }
    }
}

async fn storage_failure(
    conn: &Connection,
    ids: &Ids,
    channel: &Channel<Msg>,
    pty: bool,
    problem: &str,
) -> Result<(), ()> {
    let audit = &conn.bastion.audit;
    if audit.health.policy() == OnFailure::Refuse {
        audit
            .event(ids.event(Kind::StorageError).field("message", problem))
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

/// The `exec` or `subsystem` event of what the client asked for, with what
/// it runs (file transfers marked as such); none for a shell.
fn command_event(ids: &Ids, command: &Command) -> Option<Event> {
    let ev = match command {
        Command::Shell => return None,
        Command::Exec(cmd) => {
            let text = String::from_utf8_lossy(cmd).into_owned();
            let ev = ids.event(Kind::Exec).field("command", text.as_str());
            if text == "scp" || text.starts_with("scp ") {
                ev.field("transfer", "scp")
            } else {
                ev
            }
        }
        Command::Subsystem(name) => {
            let ev = ids.event(Kind::Subsystem).field("name", name.as_str());
            if name == "sftp" {
                ev.field("transfer", "sftp")
            } else {
                ev
            }
        }
    };
    Some(ev)
}
