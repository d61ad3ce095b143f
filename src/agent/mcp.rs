//! MCP servers as agents' tools: `[[mcp]]` servers started (stdio) or
//! reached (streamable HTTP) through the official SDK (`rmcp`), their
//! tools offered to the model under names of their own, their calls made.
//!
//! What it owns: the connections (one per session or one per bastion, as
//! `scope` says), reading a server's tool list again when it says it
//! changed, the names the model sees (`mcp__SERVER__TOOL`, never a
//! built-in's), bounding what a server says (descriptions, schemas,
//! results), and reaping a server's processes when its owner ends. What it
//! leaves to others: which tools an agent may use and when a call is asked
//! about (`react`, from `config::McpConfig::approve`), the audit rows, and
//! scrubbing results before the model sees them (`react`).
//!
//! Every fault is a sentence: a server that does not start, crashes, hangs
//! past `timeout_s` or speaks garbage costs its caller one error; the next
//! call starts it again.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, Tool,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

use crate::config::{Config, EnvSpec, McpConfig, McpScope, McpTransport, mcp_tool};

/// The most MCP tools one agent is offered.
const MAX_TOOLS: usize = 64;
/// A tool whose schema is larger is not offered.
const MAX_SCHEMA: usize = 16 * 1024;
/// A description is cut to this many characters.
const MAX_DESCRIPTION: usize = 1000;
/// What of a result is kept before it is scrubbed and cut.
const MAX_RESULT: usize = 4 << 20;
/// Function names the model accepts: `^[a-zA-Z0-9_-]{1,64}$`.
const MAX_NAME: usize = 64;
/// The longest message a server may send: a result is kept to
/// [`MAX_RESULT`] anyway.
const MAX_LINE: usize = 8 << 20;
/// The pages of a tool list read, and the tools kept from them.
const MAX_PAGES: usize = 16;
const MAX_LISTED: usize = 1024;
/// What the declarations of one agent's MCP tools may take together.
const MAX_DECLARATIONS: usize = 64 * 1024;
/// What of a server's error output is kept, for its last line.
const STDERR_KEPT: usize = 1024;
/// The environment every stdio server gets from the bastion's.
const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"];

/// The configured servers, and the connections of those shared by the
/// bastion: made once per config (at start and each reload).
pub(crate) struct Registry {
    servers: Vec<Server>,
}

struct Server {
    config: McpConfig,
    /// `scope = "bastion"`: the one connection, made at first use.
    shared: Mutex<Option<Arc<Conn>>>,
}

/// One session's view of the servers: its own connections
/// (`scope = "session"`), and the registry's shared ones. Its server
/// processes end with it.
pub(crate) struct Toolbox {
    registry: Arc<Registry>,
    /// The bastion user: `[[mcp]] users` says which servers are theirs.
    user: String,
    own: Mutex<HashMap<String, Arc<Conn>>>,
}

/// A tool offered to the model.
#[derive(Debug, Clone)]
pub(crate) struct Offered {
    /// The function name the model calls.
    pub(crate) name: String,
    pub(crate) server: String,
    pub(crate) tool: String,
    /// The tool declares `readOnlyHint`.
    pub(crate) read_only: bool,
    /// The function declaration the model gets.
    pub(crate) declaration: Value,
}

/// What a call returned, as text.
#[derive(Debug, Clone)]
pub(crate) struct Returned {
    pub(crate) text: String,
    pub(crate) bytes: u64,
    /// The tool said it failed (`isError`).
    pub(crate) is_error: bool,
}

/// One live connection to a server.
struct Conn {
    service: RunningService<RoleClient, Watch>,
    /// The server said its tools changed since they were last listed.
    stale: Arc<AtomicBool>,
    tools: Mutex<Option<Arc<Vec<Tool>>>>,
    /// A stdio server's process, ended with the connection.
    _process: Option<Process>,
}

/// A stdio server's process, leader of a process group of its own.
struct Process {
    /// Never waited for while this lives: the leader's pid, which is the
    /// group's id, cannot be taken by another process before this drops,
    /// so the signal below reaches this group or none.
    _child: tokio::process::Child,
    group: nix::unistd::Pid,
}

impl Drop for Process {
    fn drop(&mut self) {
        // Synchronous, so it happens even as the runtime stops (SIGTERM):
        // the whole group, so `npx`'s node goes too. The child's
        // `kill_on_drop` then kills the leader, and tokio reaps it.
        use nix::sys::signal::{Signal, killpg};
        let _ = killpg(self.group, Signal::SIGTERM);
    }
}

impl Conn {
    /// Neither side has closed it (a server that exited closes its side).
    fn live(&self) -> bool {
        !self.service.is_closed() && !self.service.is_transport_closed()
    }
}

/// The client side's handler: notes that a server's tools changed.
#[derive(Clone)]
struct Watch {
    stale: Arc<AtomicBool>,
}

impl ClientHandler for Watch {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.stale.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = Implementation::default();
        info.name = "walissh".into();
        info.version = env!("CARGO_PKG_VERSION").into();
        let mut config = ClientConfig::default();
        config.capabilities = ClientCapabilities::default();
        config.client_info = info;
        config
    }
}

impl Registry {
    pub(crate) fn new(config: &Config) -> Registry {
        let servers = config
            .mcp
            .iter()
            .map(|c| Server {
                config: c.clone(),
                shared: Mutex::new(None),
            })
            .collect();
        Registry { servers }
    }

    /// When a call of `tool` of `server` is asked about.
    pub(crate) fn approve(&self, server: &str, tool: &str) -> crate::config::Approve {
        self.server(server)
            .map_or(crate::config::Approve::Always, |s| s.config.approve(tool))
    }

    fn server(&self, name: &str) -> Option<&Server> {
        self.servers
            .iter()
            .find(|s| s.config.name.get_ref() == name)
    }
}

impl Toolbox {
    pub(crate) fn new(registry: Arc<Registry>, user: &str) -> Toolbox {
        Toolbox {
            registry,
            user: user.to_string(),
            own: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The tools `patterns` (an agent's `mcp:` entries, without the
    /// prefix) pick, starting servers as needed; and one sentence for each
    /// server that could not be reached (the question goes on without it).
    pub(crate) async fn offer(&self, patterns: &[String]) -> (Vec<Offered>, Vec<String>) {
        let (mut offered, mut problems) = (Vec::new(), Vec::new());
        let mut used = 0;
        if patterns.is_empty() {
            return (offered, problems);
        }
        let picks: Vec<(glob::Pattern, glob::Pattern)> = patterns
            .iter()
            .filter_map(|p| p.split_once('/'))
            .filter_map(|(s, t)| Some((glob::Pattern::new(s).ok()?, glob::Pattern::new(t).ok()?)))
            .collect();
        for server in &self.registry.servers {
            let name = server.config.name.get_ref();
            if !picks.iter().any(|(s, _)| s.matches(name)) || !server.config.serves(&self.user) {
                continue;
            }
            let tools = match self.tools(server).await {
                Ok(t) => t,
                Err(e) => {
                    problems.push(format!("MCP server {name}: {e}"));
                    continue;
                }
            };
            for tool in tools.iter() {
                let picked = picks
                    .iter()
                    .any(|(s, t)| s.matches(name) && t.matches(&tool.name));
                if !picked || offered.len() >= MAX_TOOLS {
                    continue;
                }
                match declare(name, tool, &offered) {
                    Ok(o) => {
                        let size = o.declaration.to_string().len();
                        if size > MAX_DECLARATIONS - used {
                            problems.push(format!(
                                "MCP tool {name}/{}: the tools offered would take over {MAX_DECLARATIONS} bytes; not offered",
                                tool.name
                            ));
                            continue;
                        }
                        used += size;
                        offered.push(o);
                    }
                    Err(e) => problems.push(e),
                }
            }
        }
        (offered, problems)
    }

    /// Some server said its tools changed: they should be offered again.
    pub(crate) async fn changed(&self) -> bool {
        let own = self.own.lock().await;
        let mut conns: Vec<Arc<Conn>> = own.values().cloned().collect();
        drop(own);
        for s in &self.registry.servers {
            conns.extend(s.shared.lock().await.clone());
        }
        conns.iter().any(|c| c.stale.load(Ordering::SeqCst))
    }

    /// Calls `offered` with `arguments`, within the server's `timeout_s`.
    /// Err is one sentence; a connection that failed is dropped, so the
    /// next call starts the server again.
    pub(crate) async fn call(
        &self,
        offered: &Offered,
        arguments: Map<String, Value>,
    ) -> Result<Returned, String> {
        let server = self
            .registry
            .server(&offered.server)
            .filter(|s| s.config.serves(&self.user))
            .ok_or("the server is no longer configured for this user")?;
        let conn = self.conn(server).await?;
        let timeout = timeout_of(&server.config);
        let mut params = CallToolRequestParams::new(offered.tool.clone());
        params.arguments = Some(arguments);
        match tokio::time::timeout(timeout, conn.service.call_tool(params)).await {
            Err(_) => {
                // A server that hangs may hang the next call too: start afresh.
                self.forget(server, &conn).await;
                Err(format!("no answer within {} s", timeout.as_secs()))
            }
            Ok(Err(e)) => {
                self.forget(server, &conn).await;
                Err(failure(&e.to_string()))
            }
            Ok(Ok(result)) => Ok(returned(&result)),
        }
    }

    /// The server's tools, listed again when it said they changed.
    async fn tools(&self, server: &Server) -> Result<Arc<Vec<Tool>>, String> {
        let conn = self.conn(server).await?;
        let mut cached = conn.tools.lock().await;
        let stale = conn.stale.swap(false, Ordering::SeqCst);
        if let (Some(t), false) = (cached.as_ref(), stale) {
            return Ok(t.clone());
        }
        let timeout = timeout_of(&server.config);
        let listed = tokio::time::timeout(timeout, list(&conn)).await;
        match listed {
            Ok(Ok(tools)) => {
                let tools = Arc::new(tools);
                *cached = Some(tools.clone());
                Ok(tools)
            }
            Ok(Err(e)) => {
                drop(cached);
                self.forget(server, &conn).await;
                Err(failure(&e.to_string()))
            }
            Err(_) => {
                drop(cached);
                self.forget(server, &conn).await;
                Err(format!(
                    "listing its tools took more than {} s",
                    timeout.as_secs()
                ))
            }
        }
    }

    /// The live connection to `server`, made if there is none (or the
    /// last one closed).
    async fn conn(&self, server: &Server) -> Result<Arc<Conn>, String> {
        let name = server.config.name.get_ref();
        match server.config.scope() {
            McpScope::Bastion => {
                let mut slot = server.shared.lock().await;
                if let Some(c) = slot.as_ref().filter(|c| c.live()) {
                    return Ok(c.clone());
                }
                let c = Arc::new(connect(&server.config).await?);
                *slot = Some(c.clone());
                Ok(c)
            }
            McpScope::Session => {
                let mut own = self.own.lock().await;
                if let Some(c) = own.get(name).filter(|c| c.live()) {
                    return Ok(c.clone());
                }
                let c = Arc::new(connect(&server.config).await?);
                own.insert(name.clone(), c.clone());
                Ok(c)
            }
        }
    }

    async fn forget(&self, server: &Server, conn: &Arc<Conn>) {
        match server.config.scope() {
            McpScope::Bastion => {
                let mut slot = server.shared.lock().await;
                if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
                    *slot = None;
                }
            }
            McpScope::Session => {
                let mut own = self.own.lock().await;
                if own
                    .get(server.config.name.get_ref())
                    .is_some_and(|c| Arc::ptr_eq(c, conn))
                {
                    own.remove(server.config.name.get_ref());
                }
            }
        }
    }
}

/// A server's tools, page by page, within [`MAX_PAGES`] and
/// [`MAX_LISTED`]: a server that never stops paging costs no more.
async fn list(conn: &Conn) -> Result<Vec<Tool>, rmcp::ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = conn.service.list_tools(params).await?;
        tools.extend(page.tools);
        if tools.len() >= MAX_LISTED {
            tools.truncate(MAX_LISTED);
            break;
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    Ok(tools)
}

fn timeout_of(config: &McpConfig) -> Duration {
    Duration::from_secs((*config.timeout_s.get_ref()).max(1))
}

/// An SDK error as the user reads it.
fn failure(e: &str) -> String {
    let e = crate::text::prefix(e.lines().next().unwrap_or(e), 300);
    if e.contains("closed") || e.contains("Transport") {
        format!("the server stopped answering ({e})")
    } else {
        e.to_string()
    }
}

/// Starts or reaches a server and initializes the session with it,
/// within its `timeout_s`.
async fn connect(config: &McpConfig) -> Result<Conn, String> {
    let stale = Arc::new(AtomicBool::new(false));
    let watch = Watch {
        stale: stale.clone(),
    };
    let timeout = timeout_of(config);
    let late = || format!("it did not start within {} s", timeout.as_secs());
    match config.transport.get_ref() {
        McpTransport::Stdio => {
            let (transport, process, stderr) = spawn(config)?;
            let service = match tokio::time::timeout(timeout, watch.serve(transport)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    let e = format!("it did not start: {}", failure(&e.to_string()));
                    return Err(with_stderr(&e, &stderr));
                }
                // Dropping `process` ends it.
                Err(_) => return Err(with_stderr(&late(), &stderr)),
            };
            Ok(Conn {
                service,
                stale,
                tools: Mutex::new(None),
                _process: Some(process),
            })
        }
        McpTransport::Http => {
            let url = config
                .url
                .as_ref()
                .map(|u| u.get_ref().clone())
                .unwrap_or_default();
            let mut headers = HashMap::new();
            for (k, v) in &config.headers {
                let value = expand(v.get_ref())?;
                let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| format!("header {k}: {e}"))?;
                let value = reqwest::header::HeaderValue::from_str(&value)
                    .map_err(|e| format!("header {k}: {e}"))?;
                headers.insert(name, value);
            }
            // No redirects: headers such as X-Api-Key would follow one to
            // another host (reqwest strips only the standard credentials).
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(timeout)
                .build()
                .map_err(|e| format!("no HTTP client: {e}"))?;
            let transport = StreamableHttpClientTransport::with_client(
                client,
                StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers),
            );
            let service = match tokio::time::timeout(timeout, watch.serve(transport)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(format!("cannot reach it: {}", failure(&e.to_string()))),
                Err(_) => return Err(format!("it did not answer within {} s", timeout.as_secs())),
            };
            Ok(Conn {
                service,
                stale,
                tools: Mutex::new(None),
                _process: None,
            })
        }
    }
}

/// A stdio server's pipes, as the SDK speaks over them.
type StdioTransport =
    AsyncRwTransport<RoleClient, tokio::process::ChildStdout, tokio::process::ChildStdin>;

/// The last lines a server wrote on its error output.
type Stderr = Arc<std::sync::Mutex<String>>;

fn with_stderr(message: &str, stderr: &Stderr) -> String {
    let said = stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match said.trim() {
        "" => message.to_string(),
        s => format!("{message}; it said: {s}"),
    }
}

/// Starts a stdio server in a process group of its own, with the
/// environment it is given and nothing else of the bastion's.
fn spawn(config: &McpConfig) -> Result<(StdioTransport, Process, Stderr), String> {
    let program = config
        .command
        .as_ref()
        .map(|c| c.get_ref().clone())
        .unwrap_or_default();
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&config.args)
        .env_clear()
        .process_group(0)
        .kill_on_drop(true)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in PASSED_ENV {
        if let Ok(v) = std::env::var(var) {
            cmd.env(var, v);
        }
    }
    match config.env.as_ref().map(toml::Spanned::get_ref) {
        Some(EnvSpec::Names(names)) => {
            for n in names {
                let v = std::env::var(n).map_err(|_| format!("${n} is not set on the bastion"))?;
                cmd.env(n, v);
            }
        }
        Some(EnvSpec::Values(table)) => {
            for (k, v) in table {
                cmd.env(k, expand(v)?);
            }
        }
        None => {}
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let pid = child.id().and_then(|p| i32::try_from(p).ok());
    let (Some(pid), Some(stdout), Some(stdin)) = (pid, child.stdout.take(), child.stdin.take())
    else {
        return Err(format!("cannot start {program}: no pipes"));
    };
    let said: Stderr = Arc::default();
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(keep_last_line(stderr, said.clone()));
    }
    let transport = AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_LINE);
    let process = Process {
        _child: child,
        group: nix::unistd::Pid::from_raw(pid),
    };
    Ok((transport, process, said))
}

/// Reads a server's error output to its end, keeping its last line
/// (bounded, in a bounded buffer, whatever it writes): what a server that
/// fails to start says is in the message.
async fn keep_last_line(mut stderr: tokio::process::ChildStderr, said: Stderr) {
    use tokio::io::AsyncReadExt;
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * STDERR_KEPT {
            tail.drain(..tail.len() - STDERR_KEPT);
        }
        let text = String::from_utf8_lossy(&tail);
        let last = text
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("");
        let line = crate::agent::render::printable(crate::text::prefix(last, 300));
        if !line.is_empty() {
            *said.lock().unwrap_or_else(|e| e.into_inner()) = line;
        }
    }
}

/// `text` with each `${VAR}` replaced by the bastion's variable.
fn expand(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("`{text}`: an unclosed ${{"))?;
        let var = &after[..end];
        let v = std::env::var(var).map_err(|_| format!("${var} is not set on the bastion"))?;
        out.push_str(&v);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The declaration of `tool` of `server`, under a name no other offered
/// tool (nor a built-in) has.
pub(crate) fn declare(server: &str, tool: &Tool, taken: &[Offered]) -> Result<Offered, String> {
    let schema = Value::Object((*tool.input_schema).clone());
    if schema.to_string().len() > MAX_SCHEMA {
        return Err(format!(
            "MCP tool {server}/{}: its schema is over {MAX_SCHEMA} bytes; not offered",
            tool.name
        ));
    }
    let name = function_name(server, &tool.name, taken);
    let said = tool.description.as_deref().unwrap_or("");
    let description = format!(
        "MCP tool `{}` of server `{server}`. {}",
        crate::agent::render::printable(&tool.name),
        crate::text::prefix(&crate::agent::render::printable(said), MAX_DESCRIPTION)
    );
    let read_only = tool
        .annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false);
    let declaration = json!({
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema}
    });
    Ok(Offered {
        name,
        server: server.to_string(),
        tool: tool.name.to_string(),
        read_only,
        declaration,
    })
}

/// `mcp__SERVER__TOOL`, in the characters the model accepts; over 64
/// characters or taken, it ends with a hash of the real names instead.
fn function_name(server: &str, tool: &str, taken: &[Offered]) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let plain = format!("mcp__{}__{}", clean(server), clean(tool));
    let free = |name: &str| !taken.iter().any(|o| o.name == name);
    if plain.len() <= MAX_NAME && free(&plain) {
        return plain;
    }
    // A hash of the real names, and a count past those taken: a server
    // cannot name a tool after another's fallback name.
    let hash = fnv(&format!("{server}/{tool}"));
    let mut n = 0u32;
    loop {
        let suffix = format!("_{:08x}", hash.wrapping_add(n));
        let head: String = plain.chars().take(MAX_NAME - suffix.len()).collect();
        let name = format!("{head}{suffix}");
        if free(&name) {
            return name;
        }
        n += 1;
    }
}

fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// A result's content as text: text blocks as they are, structured
/// content as JSON, anything else named by its kind.
pub(crate) fn returned(result: &rmcp::model::CallToolResult) -> Returned {
    let mut text = String::new();
    for block in &result.content {
        let v = serde_json::to_value(block).unwrap_or(Value::Null);
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("content");
        match v.get("text").and_then(Value::as_str) {
            Some(t) if kind == "text" => text.push_str(t),
            _ => {
                let mime = v.get("mimeType").and_then(Value::as_str).unwrap_or("");
                text.push_str(&format!("[{kind} {mime}]").replace(" ]", "]"));
            }
        }
        text.push('\n');
        if text.len() > MAX_RESULT {
            break;
        }
    }
    if text.trim().is_empty()
        && let Some(s) = &result.structured_content
    {
        text = s.to_string();
    }
    let bytes = text.len() as u64;
    let mut end = text.len().min(MAX_RESULT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    Returned {
        text,
        bytes,
        is_error: result.is_error.unwrap_or(false),
    }
}

/// Whether an agent's tools name any MCP tool.
pub(crate) fn patterns(tools: &[String]) -> Vec<String> {
    tools
        .iter()
        .filter_map(|t| mcp_tool(t).map(|(s, t)| format!("{s}/{t}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(name: &str) -> Offered {
        Offered {
            name: name.into(),
            server: String::new(),
            tool: String::new(),
            read_only: false,
            declaration: Value::Null,
        }
    }

    #[test]
    fn names_are_the_models_and_never_collide() {
        assert_eq!(
            function_name("files", "read_file", &[]),
            "mcp__files__read_file"
        );
        assert_eq!(function_name("fs", "a.b/c d", &[]), "mcp__fs__a_b_c_d");
        // Two tools that clean to one name get two names.
        let first = function_name("fs", "a.b", &[]);
        let second = function_name("fs", "a_b", &[offered(&first)]);
        assert_ne!(first, second);
        // A tool named after another's fallback name does not take it.
        let mut taken = Vec::new();
        for t in ["p", "p_cd96ba65", "p"] {
            let name = function_name("s", t, &taken);
            assert!(
                !taken.iter().any(|o: &Offered| o.name == name),
                "{name} twice"
            );
            taken.push(offered(&name));
        }
        let long = function_name("server", &"x".repeat(200), &[]);
        assert!(long.len() <= MAX_NAME, "{long}");
        assert!(
            long.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
        // No MCP name is a built-in's.
        for t in crate::config::TOOLS {
            assert!(!function_name("x", t, &[]).eq(t));
        }
    }

    #[test]
    fn variables_expand_and_a_missing_one_is_named() {
        // SAFETY of the test: a variable only this test reads.
        assert_eq!(expand("plain").unwrap(), "plain");
        let e = expand("Bearer ${WALISSH_TEST_SURELY_UNSET}").unwrap_err();
        assert!(e.contains("WALISSH_TEST_SURELY_UNSET"), "{e}");
        let e = expand("${UNCLOSED").unwrap_err();
        assert!(e.contains("unclosed"), "{e}");
        let path = std::env::var("PATH").unwrap();
        assert_eq!(expand("[${PATH}]").unwrap(), format!("[{path}]"));
    }

    #[test]
    fn results_become_bounded_text() {
        let result: rmcp::model::CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "hello"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
            "isError": true
        }))
        .unwrap();
        let r = returned(&result);
        assert_eq!(r.text, "hello\n[image image/png]\n");
        assert!(r.is_error);
        let big: rmcp::model::CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "é".repeat(MAX_RESULT)}]
        }))
        .unwrap();
        let r = returned(&big);
        assert!(r.text.len() <= MAX_RESULT && r.bytes > MAX_RESULT as u64);
    }
}
