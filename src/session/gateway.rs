//! The bastion as an MCP server: the `mcp` subsystem of a session channel
//! (`ssh -s alice:web1@bastion mcp`), through which an AI client runs
//! commands on the login's target under the user's rules.
//!
//! What it owns: serving MCP (through `rmcp`) on the channel, its two
//! tools (`run_command`, `read_file`), and how each call is decided and
//! run: the login's credentials and the user's rights as the config has
//! them now, the user's `ai` mode, the agent's policy (deny rules; `auto`
//! runs only what it proves read-only), approval (`[ai] mcp_confirm`:
//! refused, or asked of the client by MCP elicitation, so the client is
//! the approver), rows marked `via = "mcp"` with the client's name.
//! What it leaves to others: the login and the target's choice
//! (`server`, `session`), the call's way (`agent::call`: row ahead, run,
//! scrub, result row, as for the agent's own calls), the policy itself
//! (`agent::policy`), running a command apart (`agent::exec`), the rows'
//! storage (`audit`).

use crate::audit::Kind;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, Implementation, InitializeResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use russh::server::Msg;
use russh::{Channel, ChannelMsg};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Connection, Totals, end_with};
use crate::agent::Agent;
use crate::agent::call::{self, Decided, Ended, Fields, Site};
use crate::agent::exec;
use crate::agent::exec::Judged;
use crate::agent::four_eyes::Second;
use crate::agent::policy::Prompt;
use crate::agent::react::{self, Outcome};
use crate::agent::render;
use crate::audit::Ids;
use crate::bastion::Bastion;
use crate::config::{AiMode, McpConfirm, TargetConfig};
use crate::context::redact::Numbering;
use crate::shutdown::Listener;
use crate::upstream::sandbox::Wall;
use crate::upstream::{self, Runner};

/// What the pipe between the channel and the MCP service holds.
const PIPE: usize = 256 * 1024;

/// Calls one client may have running at once (each is a channel on the
/// target's connection); one more is answered "busy" at once, so nothing
/// queues up in the bastion.
const CALLS_AT_ONCE: u32 = 4;
/// The longest message a client may send: far above any command the
/// policy reads (`walissh_policy::MAX_LINE`), far below what would cost memory.
const MAX_MESSAGE: usize = 64 * 1024;
/// How long the user has to answer an approval in their client.
const APPROVAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
/// How long calls under way get to write their rows once the client left.
const WIND_DOWN: std::time::Duration = std::time::Duration::from_secs(10);
/// A client's name is kept to this many characters on its rows.
const MAX_CLIENT_NAME: usize = 128;

/// The tools the gateway serves: the agent's own two.
const SERVED: &[&str] = &["run_command", "read_file"];

/// Serves MCP on `channel` until the client or the bastion ends it.
pub(super) async fn serve(
    conn: &Connection,
    ids: &Ids,
    mut channel: Channel<Msg>,
    target: &TargetConfig,
    (stop, open): (&mut Listener, &mut crate::bastion::Open<'_>),
) -> Totals {
    let mode = conn
        .live
        .config
        .user(&ids.user)
        .map_or(AiMode::Off, |u| u.ai);
    if mode == AiMode::Off {
        let why = format!(
            "{}'s ai is off: the MCP gateway is closed to them",
            ids.user
        );
        end_with(&channel, false, &why, 1).await;
        return Totals {
            exit_status: Some(1),
            ..Totals::default()
        };
    }
    let bastion = &conn.bastion;
    let connected = tokio::select! {
        r = upstream::connect(target, &bastion.upstream, &ids.user, &ids.session) => r,
        _ = stop.requested() => Err(upstream::OpenError::Stopped(super::SHUTTING_DOWN.to_string())),
    };
    let runner = match connected {
        Ok(r) => r,
        Err(failed) => {
            let lost = super::Lost::from(failed);
            end_with(&channel, false, &lost.message, 255).await;
            return Totals {
                exit_status: Some(255),
                lost: Some(lost),
                ..Totals::default()
            };
        }
    };
    let calls = Arc::new(tokio::sync::Semaphore::new(CALLS_AT_ONCE as usize));
    let (ended, ended_rx) = tokio::sync::watch::channel(false);
    let gateway = Gateway {
        bastion: conn.bastion.clone(),
        ids: ids.clone(),
        credential: conn.credential.clone(),
        started: mode,
        confirm_at_start: conn.live.config.ai.mcp_confirm,
        runner,
        numbering: Arc::new(Numbering::default()),
        calls: calls.clone(),
        ended: ended_rx,
        facts: tokio::sync::OnceCell::new(),
        four_eyes: target.four_eyes,
    };
    let (ours, theirs) = tokio::io::duplex(PIPE);
    let (read, write) = tokio::io::split(theirs);
    let transport = AsyncRwTransport::new_server(read, write).with_max_line_length(MAX_MESSAGE);
    let service = tokio::spawn(async move {
        if let Ok(running) = gateway.serve(transport).await {
            let _ = running.waiting().await;
        }
    });
    let (mut totals, killed) = pump(&mut channel, ours, (stop, open)).await;
    if let Some(ending) = &killed {
        let line = super::user_line(false, &ending.line());
        let _ = channel.extended_data_bytes(1, line).await;
    }
    // Calls under way stop (their commands' channels closed) and write
    // their rows before the session's end is written.
    let _ = ended.send(true);
    let all = calls.acquire_many(CALLS_AT_ONCE);
    let _held = tokio::time::timeout(WIND_DOWN, all).await;
    // No call starts from here on: a late one is refused, with no row.
    calls.close();
    service.abort();
    let _ = service.await;
    totals.exit_status = Some(0);
    let _ = channel.exit_status(0).await;
    let _ = channel.eof().await;
    let _ = channel.close().await;
    if let Some(ending) = &killed {
        let closed = async { while channel.wait().await.is_some() {} };
        let _ = tokio::time::timeout(super::NOTICE_TIMEOUT, closed).await;
        conn.disconnect(ending).await;
    }
    totals
}

/// Carries bytes between the channel and the service until either ends,
/// the bastion stops, or an admin ends the session (how, then).
async fn pump(
    channel: &mut Channel<Msg>,
    mut pipe: tokio::io::DuplexStream,
    (stop, open): (&mut Listener, &mut crate::bastion::Open<'_>),
) -> (Totals, Option<crate::bastion::Ending>) {
    let mut totals = Totals::default();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        tokio::select! {
            msg = channel.wait() => match msg {
                Some(ChannelMsg::Data { data }) => {
                    totals.bytes_in += data.len() as u64;
                    if pipe.write_all(&data).await.is_err() {
                        break;
                    }
                }
                Some(ChannelMsg::Eof | ChannelMsg::Close) | None => break,
                Some(_) => {}
            },
            n = pipe.read(&mut buf) => match n {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    totals.bytes_out += n as u64;
                    if channel.data_bytes(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                        break;
                    }
                }
            },
            _ = stop.requested() => break,
            ending = open.ended() => return (totals, Some(ending)),
        }
    }
    (totals, None)
}

/// One client's MCP session with one target.
struct Gateway {
    bastion: Arc<Bastion>,
    ids: Ids,
    /// What the login proved: asked again before each call.
    credential: Arc<dyn super::Credential>,
    /// The user's mode at login: a reload may narrow it, never widen it.
    started: AiMode,
    /// `[ai] mcp_confirm` at login: likewise.
    confirm_at_start: McpConfirm,
    runner: Runner,
    numbering: Arc<Numbering>,
    calls: Arc<tokio::sync::Semaphore>,
    /// Set when the client is gone: calls under way stop.
    ended: tokio::sync::watch::Receiver<bool>,
    /// The target's facts, probed at the first read.
    facts: tokio::sync::OnceCell<crate::upstream::TargetInfo>,
    /// The target asks four eyes on every command (`[[targets]]
    /// four_eyes`).
    four_eyes: bool,
}

/// Why a call may not run at all now.
struct Refused {
    /// For the row: `credentials_revoked`, `ai_off` or `target_not_allowed`.
    reason: &'static str,
    /// For the client.
    message: String,
}

/// A call's outcome as the client gets it.
fn result(text: String, is_error: bool) -> Result<CallToolResponse, ErrorData> {
    let content = vec![ContentBlock::text(text)];
    Ok(match is_error {
        true => CallToolResult::error(content),
        false => CallToolResult::success(content),
    }
    .into())
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> InitializeResult {
        let mut info = Implementation::default();
        info.name = "walissh".into();
        info.version = env!("CARGO_PKG_VERSION").into();
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        let mut result = InitializeResult::new(capabilities);
        result.server_info = info;
        result.with_instructions(format!(
            "Runs commands on {} as {}, under walissh's policy: refused commands do not run.",
            self.ids.target, self.ids.user
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Value> = react::tools(SERVED, false)
            .iter()
            .map(|t| {
                let f = &t["function"];
                let read_only = f["name"] == "read_file";
                json!({
                    "name": f["name"],
                    "description": f["description"],
                    "inputSchema": f["parameters"],
                    "annotations": {"readOnlyHint": read_only, "openWorldHint": false}
                })
            })
            .collect();
        serde_json::from_value(json!({ "tools": tools }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resource = json!({
            "uri": self.facts_uri(),
            "name": "facts",
            "description": format!("What walissh knows of {}: OS, kernel, host name, user, login shell", self.ids.target),
            "mimeType": "text/plain"
        });
        serde_json::from_value(json!({ "resources": [resource] }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != self.facts_uri() {
            // The uri is not echoed: what a client sends stays out of logs.
            let why = format!("no such resource; there is {}", self.facts_uri());
            return Err(ErrorData::resource_not_found(why, None));
        }
        self.admitted()
            .map_err(|no| ErrorData::invalid_request(no.message, None))?;
        // One probe per session, however often it is read.
        let info = self
            .facts
            .get_or_init(|| async { self.runner.facts().await.unwrap_or_default() })
            .await
            .clone();
        let mut text = format!("target: {}\n", self.ids.target);
        let facts = [
            ("os", info.os),
            ("kernel", info.kernel),
            ("host", info.host),
            ("user", info.user),
            ("shell", info.shell),
        ];
        for (key, value) in facts {
            text.push_str(&format!(
                "{key}: {}\n",
                value.as_deref().unwrap_or("unknown")
            ));
        }
        let text = self.scrub("", &text).await;
        let contents =
            json!({"contents": [{"uri": request.uri, "mimeType": "text/plain", "text": text}]});
        let result: ReadResourceResult = serde_json::from_value(contents)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(result.into())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::trim);
        let command = match request.name.as_ref() {
            "run_command" => match text("command") {
                Some(c) if !c.is_empty() => c.to_string(),
                _ => return result("missing \"command\"".into(), true),
            },
            "read_file" => match text("path") {
                Some(p) if !p.is_empty() => react::read_command(p, &args),
                _ => return result("missing \"path\"".into(), true),
            },
            other => {
                return result(
                    format!("there is no tool named {other:?}; use run_command or read_file"),
                    true,
                );
            }
        };
        let client = context
            .peer
            .peer_info()
            .map(|i| {
                crate::text::prefix(&render::printable(&i.client_info.name), MAX_CLIENT_NAME)
                    .to_string()
            })
            .unwrap_or_default();
        let Ok(_turn) = self.calls.try_acquire() else {
            let busy = format!(
                "busy: at most {CALLS_AT_ONCE} calls run at once; try again when one has ended"
            );
            return result(busy, true);
        };
        self.run(&command, &client, &context).await
    }
}

impl Gateway {
    /// The agents and the mode a call runs under now, or why it may not
    /// run: a reload may have revoked the login's key or certificate
    /// (`[auth] revoked_keys`), removed the user or their key, turned
    /// their `ai` off, or taken the target from them (the connection
    /// stays, the right does not), as a shell's next session would find.
    fn admitted(&self) -> Result<(Arc<crate::agent::Agent>, AiMode), Refused> {
        let user = &self.ids.user;
        let live = self.bastion.live();
        if !self.credential.still_valid(&live, user) {
            return Err(Refused {
                reason: "credentials_revoked",
                message: format!(
                    "{user}'s login is no longer valid (its key or certificate revoked, or the user's entry changed): nothing runs"
                ),
            });
        }
        let (agent, mode) = super::settings_now(&self.bastion, user, self.started);
        if mode == AiMode::Off {
            return Err(Refused {
                reason: "ai_off",
                message: format!("{user}'s ai is off now: nothing runs"),
            });
        }
        let reaches = live.config.user(user).is_some_and(|u| {
            live.config
                .allowed_targets(u)
                .iter()
                .any(|t| t.name() == self.ids.target)
        });
        match reaches {
            true => Ok((agent, mode)),
            false => Err(Refused {
                reason: "target_not_allowed",
                message: format!(
                    "{user} may no longer reach {}: nothing runs",
                    self.ids.target
                ),
            }),
        }
    }

    /// The one resource: the target's facts.
    fn facts_uri(&self) -> String {
        format!("walissh://{}/facts", self.ids.target)
    }

    /// One command, the whole way (`agent::call`): the policy, the
    /// approval, the rows, the run.
    async fn run(
        &self,
        command: &str,
        client: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut site = ClientCall {
            gateway: self,
            client,
            context,
            // Checked at each call: the session outlives reloads.
            admitted: self.admitted(),
        };
        match call::make(&mut site, command.to_string()).await {
            Ended::No(tell) if site.admitted.is_err() => {
                Err(ErrorData::invalid_request(tell, None))
            }
            Ended::No(tell) => result(tell, true),
            Ended::NotRun(_, why) => result(format!("not run: {why}"), true),
            Ended::Ran(command, outcome) => {
                let shown = self.scrub("", &command).await;
                let failed = outcome.interrupted.is_some() || outcome.exit_code != Some(0);
                result(react::describe(&shown, &outcome), failed)
            }
        }
    }

    /// Where its commands run: apart, on the login's target.
    fn apart(&self, timeout: Duration) -> exec::Apart<'_> {
        exec::Apart {
            runner: &self.runner,
            upstream: &self.bastion.upstream,
            user: &self.ids.user,
            timeout,
        }
    }

    /// `[ai] mcp_confirm` for the next call: "refuse" if it was at login
    /// or is now (a reload narrows a live session, never widens it).
    fn confirm(&self) -> McpConfirm {
        match self.bastion.live().config.ai.mcp_confirm {
            McpConfirm::Elicitation => self.confirm_at_start,
            McpConfirm::Refuse => McpConfirm::Refuse,
        }
    }

    /// Why a command needs approval.
    fn why_asked(&self, mode: AiMode) -> String {
        match mode {
            AiMode::Confirm => format!("{} has ai = confirm", self.ids.user),
            _ => "walissh cannot prove it read-only".to_string(),
        }
    }

    /// Asks through the client (MCP elicitation): whatever answers there,
    /// a person or the client itself, is the approver. Err says why the
    /// command does not run.
    async fn ask(
        &self,
        command: &str,
        prompt: &Prompt,
        mode: AiMode,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), String> {
        let why = self.why_asked(mode);
        if !context
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
        {
            return Err(format!(
                "not run: this command needs the user's approval ({why}), and this MCP client cannot ask for it (no elicitation)"
            ));
        }
        // What the policy's parser sees it run, and what else it changes,
        // as the terminal's Run? shows them.
        // Exactly what runs, invisible characters spelled out: the client
        // wrote it, and a scrubbed copy could hide part of it.
        let mut shown = format!("  {}", render::exact(command));
        for c in &prompt.commands {
            shown.push_str(&format!("\n  -> {}", render::exact(c)));
        }
        if let Some(changes) = &prompt.changes {
            shown.push_str(&format!("\n  ! {changes}"));
        }
        let message = format!(
            "walissh: run on {} as {}?\n\n{shown}\n\n({why})",
            self.ids.target, self.ids.user
        );
        let schema = serde_json::from_value(json!({
            "type": "object",
            "properties": {"run": {"type": "boolean", "title": "Run this command", "default": false}},
            "required": ["run"]
        }))
        .map_err(|e| e.to_string())?;
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        };
        let mut ended = self.ended.clone();
        let asked = context
            .peer
            .create_elicitation_with_timeout(params, Some(APPROVAL_TIMEOUT));
        let answer = tokio::select! {
            biased;
            _ = context.ct.cancelled() => return Err("not run: the client cancelled it".into()),
            _ = ended.wait_for(|e| *e) => return Err("not run: the client went away".into()),
            a = asked => a.map_err(|e| format!("not run: the approval failed ({e})"))?,
        };
        let yes = answer.action == ElicitationAction::Accept
            && answer
                .content
                .as_ref()
                .and_then(|c| c.get("run"))
                .and_then(Value::as_bool)
                == Some(true);
        match yes {
            true => Ok(()),
            false => Err("the user declined to run this command".into()),
        }
    }

    /// The newest config asks four eyes on this target.
    fn target_asks_now(&self) -> bool {
        let live = self.bastion.live();
        live.config
            .target(&self.ids.target)
            .is_some_and(|t| t.four_eyes)
    }

    /// Waits for a second person's approval of `command` (four-eyes),
    /// which the client approved; a client that cancels or leaves
    /// withdraws it.
    async fn second(
        &self,
        agent: &Agent,
        command: &str,
        client: &str,
        context: &RequestContext<RoleServer>,
    ) -> Second {
        let question = format!("(through the MCP gateway, client {client})");
        let asking = crate::agent::four_eyes::Asking {
            rule: &agent.four_eyes,
            target: self.four_eyes || self.target_asks_now(),
            approvals: &self.bastion.approvals,
            ids: &self.ids,
            question: &question,
        };
        let mut wait = asking.ask(command, "");
        let mut ended = self.ended.clone();
        tokio::select! {
            biased;
            _ = context.ct.cancelled() => Second::Unavailable("the client cancelled it"),
            _ = ended.wait_for(|e| *e) => Second::Unavailable("the client went away"),
            s = wait.ended() => s,
        }
    }

    /// `text` scrubbed of secrets, as the output of `command` (empty: a
    /// text of its own).
    async fn scrub(&self, command: &str, text: &str) -> String {
        let redactor = self.bastion.live().agent.redactor.clone();
        call::scrubbed(redactor, self.numbering.clone(), command, text)
            .await
            .0
    }
}

/// A command an AI client sent: judged in the user's mode as it is
/// now, asked of the client (elicitation), run clean on a channel of its
/// own, stopped when the client cancels it or leaves.
struct ClientCall<'a> {
    gateway: &'a Gateway,
    client: &'a str,
    context: &'a RequestContext<RoleServer>,
    /// The user's agent and mode now, or why nothing runs.
    admitted: Result<(Arc<Agent>, AiMode), Refused>,
}

/// What a client's call runs: under the agent's limits, the policy's
/// script behind its wall (what it runs unasked), or the line the user
/// approved, as written.
struct ClientRun {
    agent: Arc<Agent>,
    unasked: Option<(String, Wall)>,
}

impl Site for ClientCall<'_> {
    type Run = ClientRun;
    type Ran = Outcome;
    type Subject = String;

    fn origin(&self) -> Fields {
        vec![("via", "mcp".into()), ("client", self.client.into())]
    }

    async fn decide(&mut self, command: String) -> Decided<String, ClientRun> {
        let no = |command, reason: &str, tell| Decided::No {
            approver: None,
            decision: "denied_by_policy",
            subject: command,
            reason: Some(reason.to_string()),
            tell,
        };
        let (agent, mode) = match &self.admitted {
            Ok((agent, mode)) => (agent.clone(), *mode),
            Err(refused) => return no(command, refused.reason, refused.message.clone()),
        };
        let gateway = self.gateway;
        let go = |decision, command, sandbox, agent, unasked| Decided::Go {
            approver: None,
            decision,
            subject: command,
            sandbox,
            place: Vec::new(),
            run: ClientRun { agent, unasked },
        };
        let wall = exec::wall(gateway.apart(agent.command_timeout), &agent.sandboxing);
        let (prompt, unasked) = match exec::judged(&agent.policy, &command, mode, wall).await {
            Judged::Denied(why) => {
                let tell =
                    format!("refused by walissh's policy ({why}); this command will not run");
                return no(command, &why, tell);
            }
            Judged::Unasked(script, wall) => (Prompt::default(), Some((script, wall))),
            Judged::Asked(prompt) => (prompt, None),
        };
        // A four-eyes command never runs unasked, here as at the prompt. A
        // reload may ask for four eyes on the target; it never takes them
        // away from a live session.
        let target = gateway.four_eyes || gateway.target_asks_now();
        let four_eyes = agent.four_eyes.applies(target, &command).await;
        match unasked {
            Some((script, wall)) if !four_eyes => {
                return go(
                    "auto",
                    command,
                    Some(wall.name()),
                    agent,
                    Some((script, wall)),
                );
            }
            _ if gateway.confirm() == McpConfirm::Refuse => {
                let reason = "it needs approval, and [ai] mcp_confirm is \"refuse\"";
                let tell = format!(
                    "not run: this command needs approval ({}), and walissh takes none through the MCP gateway ([ai] mcp_confirm = \"refuse\"): only what its policy runs unasked runs here",
                    gateway.why_asked(mode)
                );
                return no(command, reason, tell);
            }
            _ => {}
        }
        if let Err(why) = gateway.ask(&command, &prompt, mode, self.context).await {
            return Decided::No {
                approver: None,
                decision: "denied_by_user",
                subject: command,
                reason: Some(why.clone()),
                tell: why,
            };
        }
        if !four_eyes {
            return go("approved", command, None, agent, None);
        }
        match gateway
            .second(&agent, &command, self.client, self.context)
            .await
        {
            Second::Approved { by } => Decided::Go {
                approver: Some(by),
                decision: "approved",
                subject: command,
                sandbox: None,
                place: Vec::new(),
                run: ClientRun {
                    agent,
                    unasked: None,
                },
            },
            refused => crate::agent::react::second_refused(command, refused),
        }
    }

    /// Everything runs clean (bash, a fixed environment), with its input
    /// as its lifeline: when the client leaves, the channel closes and
    /// all of it stops, whatever it does with TERM.
    async fn run(&mut self, command: &String, run: ClientRun) -> Outcome {
        let (agent, sandboxing) = (&run.agent, &run.agent.sandboxing);
        let apart = self.gateway.apart(agent.command_timeout);
        let (apart, run) = match &run.unasked {
            Some((script, wall)) => (
                apart.unasked(sandboxing),
                exec::Command::unasked(script, None, *wall, sandboxing),
            ),
            None => (apart, exec::Command::approved_clean(command)),
        };
        let mut ended = self.gateway.ended.clone();
        let stopped = |why: &str| Outcome {
            interrupted: Some(why.to_string()),
            ..Outcome::default()
        };
        let mut unseen = Unseen;
        // Biased: a call whose client already left does not start.
        tokio::select! {
            biased;
            _ = self.context.ct.cancelled() => stopped("the client cancelled it"),
            _ = ended.wait_for(|e| *e) => stopped("the client went away"),
            o = exec::run(apart, run, &mut unseen) => o,
        }
    }

    async fn scrub(&mut self, command: &String, outcome: &mut Outcome) {
        outcome.output = self.gateway.scrub(command, &outcome.output).await;
    }

    async fn audit(&mut self, kind: Kind, fields: Fields) {
        let ev = self.gateway.ids.event(kind).fields(fields);
        self.gateway.bastion.audit.event(ev).await;
    }

    async fn audit_ahead(&mut self, kind: Kind, fields: Fields) -> Result<(), &'static str> {
        let ev = self.gateway.ids.event(kind).fields(fields);
        self.gateway.bastion.audit.ahead(ev).await
    }
}

/// No screen: what a command prints goes only to the client's result.
struct Unseen;

impl exec::Show for Unseen {
    async fn output(&mut self, _data: &[u8]) {}
}
