//! The configuration: the TOML schema, the embedded default, and validation.
//!
//! Everything a config file can say is parsed here into plain structs, and
//! every mistake is reported as one line naming the file, the line and the key.
//! Unknown keys are errors: a typo must never silently weaken policy. This
//! module does not open sockets or read key files' contents beyond checking
//! that they parse; `keys` and `server` do that at start.

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

/// Where `serve` looks when no `--config` is given.
pub(crate) const SYSTEM_CONFIG: &str = "/etc/walissh/walissh.toml";

/// The configuration `walissh serve` runs on when there is no config file.
/// The `demo` user's password hash is filled in from the state directory at
/// start (see `keys::demo_password`), so it is absent here.
pub(crate) const EMBEDDED_DEFAULT: &str = r#"
[server]
listen = ["127.0.0.1:2222"]
state_dir = "./walissh-state"

[[targets]]
name = "local"
kind = "local"

[[users]]
name = "demo"
targets = ["local"]
ai = "confirm"
"#;

/// The name the embedded default is reported under in messages.
pub(crate) const EMBEDDED_NAME: &str = "<embedded default>";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    #[serde(default)]
    pub(crate) server: ServerConfig,
    #[serde(default)]
    pub(crate) upstream: UpstreamConfig,
    #[serde(default)]
    pub(crate) targets: Vec<TargetConfig>,
    #[serde(default)]
    pub(crate) users: Vec<UserConfig>,
    #[serde(default)]
    pub(crate) agents: Vec<AgentConfig>,
    #[serde(default)]
    pub(crate) workflows: Vec<WorkflowConfig>,
    #[serde(default)]
    pub(crate) llm: LlmConfig,
    #[serde(default)]
    pub(crate) ai: AiConfig,
    #[serde(default)]
    pub(crate) audit: AuditConfig,
    #[serde(default)]
    pub(crate) terminal: TerminalConfig,
    #[serde(default)]
    pub(crate) context: ContextConfig,
    /// Where this config came from, for messages. Not a TOML key.
    #[serde(skip)]
    pub(crate) source: String,
    /// Whether this is the embedded default (no file).
    #[serde(skip)]
    pub(crate) embedded: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerConfig {
    #[serde(default = "default_listen")]
    pub(crate) listen: Vec<Spanned<String>>,
    pub(crate) host_key: Option<Spanned<PathBuf>>,
    #[serde(default = "default_state_dir")]
    pub(crate) state_dir: PathBuf,
    /// Failed logins from one address before it is locked out.
    #[serde(default = "default_max_failures")]
    pub(crate) auth_max_failures: Spanned<u32>,
    /// How long a locked-out address stays locked out.
    #[serde(default = "default_lockout_s")]
    pub(crate) auth_lockout_s: Spanned<u64>,
    /// How long a client may take from connecting to logging in.
    #[serde(default = "default_login_grace_s")]
    pub(crate) login_grace_s: u64,
    /// Sessions (shells, commands, sftp) one connection may have open at
    /// once, as OpenSSH's `MaxSessions`.
    #[serde(default = "default_max_sessions")]
    pub(crate) max_sessions_per_connection: Spanned<u32>,
    /// Sessions one user may have open at once, over all connections.
    #[serde(default = "default_max_user_sessions")]
    pub(crate) max_sessions_per_user: Spanned<u32>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: default_listen(),
            host_key: None,
            state_dir: default_state_dir(),
            auth_max_failures: default_max_failures(),
            auth_lockout_s: default_lockout_s(),
            login_grace_s: default_login_grace_s(),
            max_sessions_per_connection: default_max_sessions(),
            max_sessions_per_user: default_max_user_sessions(),
        }
    }
}

fn default_listen() -> Vec<Spanned<String>> {
    vec![Spanned::new(0..0, "0.0.0.0:2222".to_string())]
}
fn default_state_dir() -> PathBuf {
    PathBuf::from("/var/lib/walissh")
}
fn default_max_sessions() -> Spanned<u32> {
    Spanned::new(0..0, 10)
}
fn default_max_user_sessions() -> Spanned<u32> {
    Spanned::new(0..0, 50)
}
fn default_max_failures() -> Spanned<u32> {
    Spanned::new(0..0, 5)
}
fn default_lockout_s() -> Spanned<u64> {
    Spanned::new(0..0, 300)
}
fn default_login_grace_s() -> u64 {
    60
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpstreamConfig {
    pub(crate) identity: Option<Spanned<PathBuf>>,
    pub(crate) known_hosts: Option<PathBuf>,
    #[serde(default)]
    pub(crate) host_key_policy: HostKeyPolicy,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum HostKeyPolicy {
    Strict,
    #[default]
    AcceptNew,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum TargetKind {
    #[default]
    Ssh,
    Local,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TargetConfig {
    pub(crate) name: Spanned<String>,
    #[serde(default)]
    pub(crate) kind: TargetKind,
    pub(crate) host: Option<Spanned<String>>,
    /// Default 22; for kind = "ssh" only.
    pub(crate) port: Option<Spanned<u16>>,
    pub(crate) user: Option<Spanned<String>>,
    pub(crate) password_env: Option<Spanned<String>>,
    pub(crate) run_as: Option<Spanned<String>>,
}

/// From the strictest to the most permissive (the order `min` uses).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum AiMode {
    Off,
    #[default]
    Confirm,
    Auto,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserConfig {
    pub(crate) name: Spanned<String>,
    pub(crate) password_hash: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) authorized_keys: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) targets: Vec<Spanned<String>>,
    #[serde(default)]
    pub(crate) ai: AiMode,
    /// `targets` and `authorized_keys`, parsed once at load (validation
    /// has checked that they parse).
    #[serde(skip)]
    target_patterns: Vec<glob::Pattern>,
    #[serde(skip)]
    keys: Vec<russh::keys::PublicKey>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LlmConfig {
    #[serde(default = "default_base_url")]
    pub(crate) base_url: String,
    #[serde(default = "default_model")]
    pub(crate) model: String,
    pub(crate) api_key_env: Option<String>,
    #[serde(default = "default_timeout")]
    pub(crate) timeout_s: u64,
    /// Sampling temperature; the endpoint's default when unset.
    pub(crate) temperature: Option<f32>,
    /// Longest answer per turn, in tokens; the endpoint's default when unset.
    pub(crate) max_tokens: Option<u32>,
    /// The model's context window, in tokens: each request stays within it.
    #[serde(default = "default_context_tokens")]
    pub(crate) context_tokens: usize,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            base_url: default_base_url(),
            model: default_model(),
            api_key_env: None,
            timeout_s: default_timeout(),
            temperature: None,
            max_tokens: None,
            context_tokens: default_context_tokens(),
        }
    }
}

fn default_context_tokens() -> usize {
    8192
}

fn default_base_url() -> String {
    "http://127.0.0.1:11434/v1".into()
}
fn default_model() -> String {
    "qwen2.5:7b-instruct".into()
}
fn default_timeout() -> u64 {
    60
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AiConfig {
    #[serde(default = "default_prefixes")]
    pub(crate) prefixes: Vec<Spanned<String>>,
    #[serde(default = "default_max_steps")]
    pub(crate) max_steps: u32,
    /// How long one question may take, model turns, approvals and commands
    /// included.
    #[serde(default = "default_max_time")]
    pub(crate) max_time_s: u64,
    /// How long one command the agent runs may take before it is
    /// interrupted.
    #[serde(default = "default_command_timeout")]
    pub(crate) command_timeout_s: u64,
    #[serde(default)]
    pub(crate) deny: Vec<Spanned<String>>,
    /// In `auto`, programs that resolve names or open connections (`host`,
    /// `dig`, `nslookup`, `ping -c`, `getent hosts`) run unasked too. Off:
    /// a lookup can carry data out.
    #[serde(default)]
    pub(crate) auto_network: bool,
    /// Extra secret patterns (regexes), redacted before anything reaches
    /// the model.
    #[serde(default)]
    pub(crate) redact: Vec<Spanned<String>>,
    /// What a plain `?` line runs: an agent or a workflow. Default: the
    /// built-in agent, `walissh`.
    pub(crate) entry: Option<Spanned<String>>,
    /// A directory of skills (folders holding a SKILL.md).
    pub(crate) skills_dir: Option<Spanned<PathBuf>>,
    /// The skills of `skills_dir`, read once, when the config is loaded.
    #[serde(skip)]
    pub(crate) skills: crate::agent::skills::Skills,
}

impl Default for AiConfig {
    fn default() -> Self {
        AiConfig {
            prefixes: default_prefixes(),
            max_steps: default_max_steps(),
            max_time_s: default_max_time(),
            command_timeout_s: default_command_timeout(),
            deny: Vec::new(),
            auto_network: false,
            redact: Vec::new(),
            entry: None,
            skills_dir: None,
            skills: Default::default(),
        }
    }
}

fn default_prefixes() -> Vec<Spanned<String>> {
    ["?", "ai:"]
        .map(|p| Spanned::new(0..0, p.to_string()))
        .into()
}
fn default_max_steps() -> u32 {
    8
}
fn default_max_time() -> u64 {
    600
}
fn default_command_timeout() -> u64 {
    60
}

/// What to do when the audit database or a recording cannot be written.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum OnFailure {
    /// Refuse new sessions until the storage works again (the default).
    #[default]
    Refuse,
    /// Keep serving, with a warning to every user and in the log.
    Continue,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditConfig {
    /// Record what users type as well as what they see. Off by default:
    /// typed input can hold passwords.
    #[serde(default)]
    pub(crate) record_input: bool,
    /// Record exec sessions' output too: a shell started through exec
    /// (`ssh -T host 'python3 -c "import pty; pty.spawn(...)"'`) must not
    /// escape the recording. Binary output is counted, not kept.
    #[serde(default = "default_true")]
    pub(crate) record_exec: bool,
    #[serde(default)]
    pub(crate) on_failure: OnFailure,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            record_input: false,
            record_exec: true,
            on_failure: OnFailure::default(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TerminalConfig {
    /// Install shell integration (prompt and command marks) in bash and
    /// zsh PTY shells.
    #[serde(default = "default_true")]
    pub(crate) shell_integration: bool,
    /// Keep a vt100 model of each PTY session's screen.
    #[serde(default = "default_true")]
    pub(crate) screen_model: bool,
    /// Memory all screen models together may take, in MiB.
    #[serde(default = "default_screen_memory_mb")]
    pub(crate) screen_memory_mb: u64,
}

impl Default for TerminalConfig {
    fn default() -> Self {
        TerminalConfig {
            shell_integration: true,
            screen_model: true,
            screen_memory_mb: default_screen_memory_mb(),
        }
    }
}

fn default_screen_memory_mb() -> u64 {
    256
}

fn default_true() -> bool {
    true
}

/// One agent: an instruction (with `{key}` placeholders filled from the
/// session's state), the tools it may use, where its answer is stored.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentConfig {
    pub(crate) name: Spanned<String>,
    #[serde(default)]
    pub(crate) description: String,
    pub(crate) instruction: Spanned<String>,
    /// The session state key its final answer is stored under.
    pub(crate) output_key: Option<Spanned<String>>,
    /// The tools it may use; default: all.
    pub(crate) tools: Option<Vec<Spanned<String>>>,
    /// Another model than `[llm] model`, on the same endpoint.
    pub(crate) model: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum WorkflowKind {
    Sequential,
    Parallel,
    Loop,
}

/// Agents and workflows composed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkflowConfig {
    pub(crate) name: Spanned<String>,
    #[serde(default)]
    pub(crate) description: String,
    pub(crate) kind: WorkflowKind,
    pub(crate) members: Vec<Spanned<String>>,
    /// Loops: at most this many rounds (a member may end it sooner).
    pub(crate) max_iterations: Option<Spanned<u32>>,
}

/// The name of the built-in agent, the default entry.
pub(crate) const BUILTIN_AGENT: &str = "walissh";
/// The tools an agent may be given.
pub(crate) const TOOLS: &[&str] = &["run_command", "read_file", "load_skill"];
/// State keys every question has.
pub(crate) const STATE_KEYS: &[&str] = &["question", "target", "user", "cwd", "host", "os"];

/// What the model sees each turn, and what a session remembers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ContextConfig {
    /// How history is cut to the token budget.
    pub(crate) reducer: crate::context::reduce::Strategy,
    /// Restore a user's conversation with a target when they come back.
    pub(crate) restore: bool,
    /// Stored tool results are cut to this many characters.
    pub(crate) tool_chars: usize,
    /// Stored assistant text is cut to this many characters.
    pub(crate) assistant_chars: usize,
    /// Questions (user turns) a session remembers.
    pub(crate) user_turns: usize,
    /// Messages a session remembers.
    pub(crate) messages: usize,
    /// Recent commands shown to the model.
    pub(crate) recent_commands: usize,
    /// Error lines (key events) shown to the model.
    pub(crate) key_events: usize,
    /// Tool results kept in the per-question cache.
    pub(crate) tool_cache: usize,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            reducer: Default::default(),
            restore: false,
            tool_chars: 1000,
            assistant_chars: 2000,
            user_turns: 4,
            messages: 20,
            recent_commands: 10,
            key_events: 20,
            tool_cache: 8,
        }
    }
}

/// A config problem, already rendered as `file:line: key `k`: message`.
#[derive(Debug)]
pub(crate) struct ConfigError(pub(crate) String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Renders a problem at a byte span of `text`, naming the line and the
/// dotted key found there.
struct Locator<'a> {
    source: &'a str,
    text: &'a str,
}

impl Locator<'_> {
    fn error(&self, span: std::ops::Range<usize>, key: Option<&str>, msg: &str) -> ConfigError {
        let start = span.start.min(self.text.len());
        let line = self.text[..start].matches('\n').count() + 1;
        let key = key
            .map(str::to_string)
            .or_else(|| self.key_at(start))
            .map(|k| format!(" key `{k}`:"))
            .unwrap_or_default();
        ConfigError(format!("{}:{line}:{key} {msg}", self.source))
    }

    /// The dotted key a byte offset belongs to: the `[table]` header above it
    /// and the `key =` on its line.
    fn key_at(&self, offset: usize) -> Option<String> {
        let before = &self.text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[offset..]
            .find('\n')
            .map_or(self.text.len(), |i| offset + i);
        let line = &self.text[line_start..line_end];
        let table = before[..line_start]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['))
            .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_string());
        let key = line
            .split_once('=')
            .map(|(k, _)| k.trim().to_string())
            .filter(|k| !k.is_empty() && !k.starts_with('#'));
        match (table, key) {
            (Some(t), Some(k)) => Some(format!("{t}.{k}")),
            (None, Some(k)) => Some(k),
            (Some(t), None) => Some(t),
            (None, None) => None,
        }
    }
}

impl Config {
    /// Reads and validates the config at `path`, or the embedded default when
    /// `path` is `None`.
    pub(crate) fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        match path {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ConfigError(format!("{}: cannot read: {e}", path.display())))?;
                Config::parse(&text, &path.display().to_string(), false)
            }
            None => Config::parse(EMBEDDED_DEFAULT, EMBEDDED_NAME, true),
        }
    }

    /// The config file `serve` should use: the one given, else the system
    /// one if it exists, else none (the embedded default).
    pub(crate) fn resolve(given: Option<PathBuf>) -> Option<PathBuf> {
        given.or_else(|| {
            let system = PathBuf::from(SYSTEM_CONFIG);
            system.exists().then_some(system)
        })
    }

    pub(crate) fn parse(text: &str, source: &str, embedded: bool) -> Result<Config, ConfigError> {
        let loc = Locator { source, text };
        let mut config: Config = toml::from_str(text).map_err(|e| {
            let msg = e.message().trim().to_string();
            loc.error(e.span().unwrap_or(0..0), None, &msg)
        })?;
        config.source = source.to_string();
        config.embedded = embedded;
        config.validate(&loc)?;
        for u in &mut config.users {
            u.compile();
        }
        if let Some(dir) = &config.ai.skills_dir {
            config.ai.skills = crate::agent::skills::Skills::load(dir.get_ref())
                .map_err(|e| loc.error(dir.span(), Some("ai.skills_dir"), &e))?;
        }
        Ok(config)
    }

    fn validate(&self, loc: &Locator) -> Result<(), ConfigError> {
        for addr in &self.server.listen {
            addr.get_ref().parse::<SocketAddr>().map_err(|_| {
                loc.error(
                    addr.span(),
                    Some("server.listen"),
                    &format!("`{}` is not an address:port", addr.get_ref()),
                )
            })?;
        }
        let s = &self.server;
        if *s.auth_max_failures.get_ref() == 0 {
            let why = "must be at least 1";
            return Err(loc.error(
                s.auth_max_failures.span(),
                Some("server.auth_max_failures"),
                why,
            ));
        }
        if *s.max_sessions_per_connection.get_ref() == 0 {
            return Err(loc.error(
                s.max_sessions_per_connection.span(),
                Some("server.max_sessions_per_connection"),
                "must be at least 1",
            ));
        }
        if *s.max_sessions_per_user.get_ref() == 0 {
            return Err(loc.error(
                s.max_sessions_per_user.span(),
                Some("server.max_sessions_per_user"),
                "must be at least 1",
            ));
        }
        if *s.auth_lockout_s.get_ref() == 0 {
            let why = "must be at least 1 (0 would disable the lockout)";
            return Err(loc.error(s.auth_lockout_s.span(), Some("server.auth_lockout_s"), why));
        }
        if self.server.listen.is_empty() {
            return Err(loc.error(0..0, Some("server.listen"), "no address to listen on"));
        }
        self.validate_targets(loc)?;
        self.validate_users(loc)?;
        self.validate_team(loc)?;
        for p in &self.ai.prefixes {
            if p.get_ref().is_empty() || p.get_ref().chars().any(char::is_control) {
                let msg = format!(
                    "prefix {:?} must be non-empty, without control characters",
                    p.get_ref()
                );
                return Err(loc.error(p.span(), Some("ai.prefixes"), &msg));
            }
        }
        for rule in &self.ai.deny {
            glob::Pattern::new(rule.get_ref())
                .map_err(|e| loc.error(rule.span(), Some("ai.deny"), &format!("bad glob: {e}")))?;
        }
        for p in &self.ai.redact {
            crate::context::redact::check_pattern(p.get_ref())
                .map_err(|e| loc.error(p.span(), Some("ai.redact"), &format!("bad regex: {e}")))?;
        }
        Ok(())
    }

    fn validate_targets(&self, loc: &Locator) -> Result<(), ConfigError> {
        let mut names = HashSet::new();
        for t in &self.targets {
            let name = t.name.get_ref();
            new_name(loc, &mut names, &t.name, "targets.name", "target")?;
            match t.kind {
                TargetKind::Ssh => {
                    if t.host.is_none() {
                        return Err(loc.error(
                            t.name.span(),
                            Some("targets.host"),
                            &format!("target `{name}` (kind \"ssh\") needs a host"),
                        ));
                    }
                    if let Some(r) = &t.run_as {
                        return Err(loc.error(
                            r.span(),
                            Some("targets.run_as"),
                            "run_as applies to kind = \"local\" only",
                        ));
                    }
                }
                TargetKind::Local => {
                    let extra = [&t.host, &t.user, &t.password_env]
                        .into_iter()
                        .flatten()
                        .map(|v| v.span())
                        .chain(t.port.as_ref().map(|p| p.span()))
                        .next();
                    if let Some(v) = extra {
                        return Err(loc.error(v, None, "applies to kind = \"ssh\" targets only"));
                    }
                    if let Some(r) = &t.run_as {
                        lookup_account(r.get_ref())
                            .map_err(|e| loc.error(r.span(), Some("targets.run_as"), &e))?;
                    }
                }
            }
        }
        Ok(())
    }

    fn validate_users(&self, loc: &Locator) -> Result<(), ConfigError> {
        let mut names = HashSet::new();
        for u in &self.users {
            let name = u.name.get_ref();
            new_name(loc, &mut names, &u.name, "users.name", "user")?;
            if let Some(h) = &u.password_hash {
                crate::password::check_hash(h.get_ref())
                    .map_err(|e| loc.error(h.span(), Some("users.password_hash"), &e))?;
            }
            for k in &u.authorized_keys {
                crate::keys::parse_authorized_key(k.get_ref())
                    .map_err(|e| loc.error(k.span(), Some("users.authorized_keys"), &e))?;
            }
            for t in &u.targets {
                glob::Pattern::new(t.get_ref()).map_err(|e| {
                    loc.error(t.span(), Some("users.targets"), &format!("bad glob: {e}"))
                })?;
            }
            let embedded_demo = self.embedded && name == "demo";
            if u.password_hash.is_none() && u.authorized_keys.is_empty() && !embedded_demo {
                return Err(loc.error(
                    u.name.span(),
                    Some("users"),
                    &format!("user `{name}` has neither password_hash nor authorized_keys"),
                ));
            }
        }
        Ok(())
    }

    /// The state directory, where audit.db and recordings/ live.
    pub(crate) fn state_dir(&self) -> &Path {
        &self.server.state_dir
    }

    pub(crate) fn host_key_path(&self) -> PathBuf {
        self.server
            .host_key
            .as_ref()
            .map(|p| p.get_ref().clone())
            .unwrap_or_else(|| self.state_dir().join("host_ed25519"))
    }

    pub(crate) fn identity_path(&self) -> PathBuf {
        self.upstream
            .identity
            .as_ref()
            .map(|p| p.get_ref().clone())
            .unwrap_or_else(|| self.state_dir().join("upstream_ed25519"))
    }

    pub(crate) fn known_hosts_path(&self) -> PathBuf {
        self.upstream
            .known_hosts
            .clone()
            .unwrap_or_else(|| self.state_dir().join("known_hosts"))
    }

    pub(crate) fn audit_db_path(&self) -> PathBuf {
        self.state_dir().join("audit.db")
    }

    pub(crate) fn recordings_dir(&self) -> PathBuf {
        self.state_dir().join("recordings")
    }

    pub(crate) fn listen_addrs(&self) -> Vec<SocketAddr> {
        // Validated in `validate`.
        self.server
            .listen
            .iter()
            .filter_map(|a| a.get_ref().parse().ok())
            .collect()
    }

    pub(crate) fn user(&self, name: &str) -> Option<&UserConfig> {
        self.users.iter().find(|u| u.name.get_ref() == name)
    }

    pub(crate) fn target(&self, name: &str) -> Option<&TargetConfig> {
        self.targets.iter().find(|t| t.name.get_ref() == name)
    }

    /// The targets `user` may reach, in config order.
    pub(crate) fn allowed_targets(&self, user: &UserConfig) -> Vec<&TargetConfig> {
        self.targets
            .iter()
            .filter(|t| user.may_reach(t.name.get_ref()))
            .collect()
    }

    /// Checks what can only be checked against the files the config names:
    /// existing key files must parse. Missing ones are generated at start.
    pub(crate) fn check_files(&self) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(&self.source).unwrap_or_default();
        let loc = Locator {
            source: &self.source,
            text: &text,
        };
        let keys = [
            (
                self.server.host_key.as_ref(),
                "server.host_key",
                self.host_key_path(),
            ),
            (
                self.upstream.identity.as_ref(),
                "upstream.identity",
                self.identity_path(),
            ),
        ];
        for (spanned, key, path) in keys {
            if path.exists() {
                crate::keys::load_private(&path)
                    .map_err(|e| loc.error(spanned.map_or(0..0, |s| s.span()), Some(key), &e))?;
            }
        }
        Ok(())
    }
}

impl UserConfig {
    pub(crate) fn name(&self) -> &str {
        self.name.get_ref()
    }

    fn compile(&mut self) {
        self.target_patterns = self
            .targets
            .iter()
            .filter_map(|p| glob::Pattern::new(p.get_ref()).ok())
            .collect();
        self.keys = self
            .authorized_keys
            .iter()
            .filter_map(|k| crate::keys::parse_authorized_key(k.get_ref()).ok())
            .collect();
    }

    /// Whether this user's `targets` globs allow `target`. Deny by default.
    pub(crate) fn may_reach(&self, target: &str) -> bool {
        self.target_patterns.iter().any(|p| p.matches(target))
    }

    /// Whether `key` is one of this user's authorized keys (key material
    /// only: comments do not matter).
    pub(crate) fn knows(&self, key: &russh::keys::PublicKey) -> bool {
        self.keys.iter().any(|k| k.key_data() == key.key_data())
    }
}

impl TargetConfig {
    pub(crate) fn name(&self) -> &str {
        self.name.get_ref()
    }

    pub(crate) fn port(&self) -> u16 {
        self.port.as_ref().map_or(22, |p| *p.get_ref())
    }
}

/// Checks that a target's or user's name is well-formed and not taken.
impl Config {
    /// Agents and workflows: names unique and well formed, tools known,
    /// placeholders known, members defined, loops bounded, no cycles, the
    /// entry defined, the skills readable.
    fn validate_team(&self, loc: &Locator) -> Result<(), ConfigError> {
        let mut names: HashSet<&str> = HashSet::from([BUILTIN_AGENT]);
        let mut keys: HashSet<&str> = STATE_KEYS.iter().copied().collect();
        for a in &self.agents {
            new_name(loc, &mut names, &a.name, "agents.name", "agent or workflow")?;
            if let Some(k) = &a.output_key {
                keys.insert(k.get_ref());
            }
            for t in a.tools.iter().flatten() {
                if !TOOLS.contains(&t.get_ref().as_str()) {
                    let msg = format!(
                        "unknown tool `{}` (tools: {})",
                        t.get_ref(),
                        TOOLS.join(", ")
                    );
                    return Err(loc.error(t.span(), Some("agents.tools"), &msg));
                }
            }
        }
        for w in &self.workflows {
            new_name(
                loc,
                &mut names,
                &w.name,
                "workflows.name",
                "agent or workflow",
            )?;
        }
        for a in &self.agents {
            let text = a.instruction.get_ref();
            if let Some(key) = placeholders(text).find(|k| !keys.contains(k)) {
                let msg = format!(
                    "agent `{}`: unknown placeholder {{{key}}} (known: {})",
                    a.name.get_ref(),
                    sorted(&keys)
                );
                return Err(loc.error(a.instruction.span(), Some("agents.instruction"), &msg));
            }
        }
        for w in &self.workflows {
            let name = w.name.get_ref();
            if w.members.is_empty() {
                let msg = format!("workflow `{name}` has no members");
                return Err(loc.error(w.name.span(), Some("workflows.members"), &msg));
            }
            for m in &w.members {
                if !names.contains(m.get_ref().as_str()) {
                    let msg = format!(
                        "workflow `{name}`: no agent or workflow named `{}`",
                        m.get_ref()
                    );
                    return Err(loc.error(m.span(), Some("workflows.members"), &msg));
                }
                // Parallel members run with hosts of their own: agents.
                let is_workflow = self
                    .workflows
                    .iter()
                    .any(|o| o.name.get_ref() == m.get_ref());
                if w.kind == WorkflowKind::Parallel && is_workflow {
                    let msg = format!(
                        "parallel workflow `{name}`: `{}` is a workflow; members run in parallel must be agents",
                        m.get_ref()
                    );
                    return Err(loc.error(m.span(), Some("workflows.members"), &msg));
                }
            }
            match (w.kind, &w.max_iterations) {
                (WorkflowKind::Loop, Some(n)) if *n.get_ref() == 0 => {
                    let msg = format!("workflow `{name}`: max_iterations must be at least 1");
                    return Err(loc.error(n.span(), Some("workflows.max_iterations"), &msg));
                }
                (WorkflowKind::Loop, None) => {
                    let msg = format!("loop `{name}` needs max_iterations");
                    return Err(loc.error(w.name.span(), Some("workflows.max_iterations"), &msg));
                }
                (WorkflowKind::Sequential | WorkflowKind::Parallel, Some(n)) => {
                    let msg = format!("workflow `{name}`: max_iterations is for loops only");
                    return Err(loc.error(n.span(), Some("workflows.max_iterations"), &msg));
                }
                _ => {}
            }
        }
        if let Some(w) = self.workflow_cycle() {
            let msg = format!("workflow `{}` contains itself", w.name.get_ref());
            return Err(loc.error(w.name.span(), Some("workflows.members"), &msg));
        }
        if let Some(e) = &self.ai.entry
            && !names.contains(e.get_ref().as_str())
        {
            let msg = format!("no agent or workflow named `{}`", e.get_ref());
            return Err(loc.error(e.span(), Some("ai.entry"), &msg));
        }
        Ok(())
    }

    /// A workflow that reaches itself through its members, if any: a
    /// depth-first walk that marks what it has finished, so each workflow
    /// is walked once.
    fn workflow_cycle(&self) -> Option<&WorkflowConfig> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Walking,
            Done,
        }
        fn walk<'a>(
            i: usize,
            ws: &'a [WorkflowConfig],
            marks: &mut [Mark],
        ) -> Option<&'a WorkflowConfig> {
            marks[i] = Mark::Walking;
            for m in &ws[i].members {
                let Some(j) = ws.iter().position(|w| w.name.get_ref() == m.get_ref()) else {
                    continue;
                };
                match marks[j] {
                    Mark::Walking => return Some(&ws[j]),
                    Mark::New => {
                        if let Some(w) = walk(j, ws, marks) {
                            return Some(w);
                        }
                    }
                    Mark::Done => {}
                }
            }
            marks[i] = Mark::Done;
            None
        }
        let mut marks = vec![Mark::New; self.workflows.len()];
        (0..self.workflows.len()).find_map(|i| {
            (marks[i] == Mark::New)
                .then(|| walk(i, &self.workflows, &mut marks))
                .flatten()
        })
    }
}

/// The `{key}` placeholders of an instruction: a key is a lowercase
/// identifier; other braces (JSON, shell) are text.
pub(crate) fn placeholders(text: &str) -> impl Iterator<Item = &str> {
    text.split('{').skip(1).filter_map(|rest| {
        let key = rest.split_once('}')?.0;
        let ok = !key.is_empty()
            && key.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && key
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        ok.then_some(key)
    })
}

fn sorted(keys: &HashSet<&str>) -> String {
    let mut v: Vec<&str> = keys.iter().copied().collect();
    v.sort();
    v.join(", ")
}

fn new_name<'a>(
    loc: &Locator,
    taken: &mut HashSet<&'a str>,
    name: &'a Spanned<String>,
    key: &str,
    what: &str,
) -> Result<(), ConfigError> {
    let n = name.get_ref();
    if !valid_name(n) {
        let msg = format!("`{n}`: use letters, digits, '.', '-' and '_'");
        return Err(loc.error(name.span(), Some(key), &msg));
    }
    if !taken.insert(n.as_str()) {
        return Err(loc.error(
            name.span(),
            Some(key),
            &format!("{what} `{n}` is defined twice"),
        ));
    }
    Ok(())
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// A local account: uid, gid, home and login shell.
#[derive(Debug, Clone)]
pub(crate) struct Account {
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) home: PathBuf,
    pub(crate) shell: PathBuf,
}

/// Looks an account up in the system's user database.
pub(crate) fn lookup_account(name: &str) -> Result<Account, String> {
    let cname = std::ffi::CString::new(name).map_err(|_| format!("bad account name `{name}`"))?;
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf` outlives `pwd`'s use.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        return Err(format!("no account `{name}` on this host"));
    }
    Ok(account_from(&pwd))
}

/// The account this process runs as.
pub(crate) fn current_account() -> Result<Account, String> {
    let uid = unsafe { libc::getuid() };
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: as in `lookup_account`.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() {
        return Err(format!("uid {uid} has no account entry"));
    }
    Ok(account_from(&pwd))
}

fn account_from(pwd: &libc::passwd) -> Account {
    let s = |p: *const libc::c_char| {
        // SAFETY: getpw*_r filled these with NUL-terminated strings in `buf`.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned()
    };
    let shell = s(pwd.pw_shell);
    Account {
        name: s(pwd.pw_name),
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
        home: PathBuf::from(s(pwd.pw_dir)),
        shell: PathBuf::from(if shell.is_empty() {
            "/bin/sh".into()
        } else {
            shell
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_parses() {
        let c = Config::load(None).unwrap();
        assert_eq!(c.listen_addrs(), vec!["127.0.0.1:2222".parse().unwrap()]);
        assert_eq!(c.targets[0].kind, TargetKind::Local);
        assert_eq!(c.user("demo").unwrap().ai, AiMode::Confirm);
    }

    /// The error `text` gets from check-config.
    fn team_error(text: &str) -> String {
        Config::parse(text, "t.toml", false).unwrap_err().0
    }

    const TEAM: &str = "[[agents]]\nname = \"collect\"\ninstruction = \"Collect facts about {question}.\"\noutput_key = \"facts\"\n\n\
        [[agents]]\nname = \"diagnose\"\ninstruction = \"Diagnose from {facts}.\"\n\n\
        [[workflows]]\nname = \"triage\"\nkind = \"sequential\"\nmembers = [\"collect\", \"diagnose\"]\n";

    #[test]
    fn a_team_assembles() {
        let c = Config::parse(
            &format!("{TEAM}\n[ai]\nentry = \"triage\"\n"),
            "t.toml",
            false,
        )
        .unwrap();
        assert_eq!(c.agents.len(), 2);
        assert_eq!(c.workflows[0].kind, WorkflowKind::Sequential);
    }

    #[test]
    fn team_errors_name_file_line_and_name() {
        let e = team_error(&TEAM.replace("\"diagnose\"]", "\"diagnosis\"]"));
        assert!(e.starts_with("t.toml:13: key `workflows.members`:"), "{e}");
        assert!(e.contains("no agent or workflow named `diagnosis`"), "{e}");
        let e = team_error(&TEAM.replace("{facts}", "{fatcs}"));
        assert!(e.starts_with("t.toml:8: key `agents.instruction`:"), "{e}");
        assert!(
            e.contains("agent `diagnose`: unknown placeholder {fatcs}"),
            "{e}"
        );
        let cycle = format!(
            "{TEAM}\n[[workflows]]\nname = \"a\"\nkind = \"loop\"\nmax_iterations = 2\nmembers = [\"b\"]\n\n\
             [[workflows]]\nname = \"b\"\nkind = \"sequential\"\nmembers = [\"collect\", \"a\"]\n"
        );
        let e = team_error(&cycle);
        assert!(e.contains("workflow `a` contains itself"), "{e}");
        assert!(e.starts_with("t.toml:16:"), "{e}");
        let e = team_error(&format!("{TEAM}\n[ai]\nentry = \"nope\"\n"));
        assert!(
            e.contains("key `ai.entry`: no agent or workflow named `nope`"),
            "{e}"
        );
        let e = team_error(&TEAM.replace("name = \"diagnose\"", "name = \"collect\""));
        assert!(e.contains("`collect` is defined twice"), "{e}");
        let e = team_error(&TEAM.replace("kind = \"sequential\"", "kind = \"loop\""));
        assert!(e.contains("loop `triage` needs max_iterations"), "{e}");
        let e = team_error(&TEAM.replace("output_key", "tools = [\"rm\"]\noutput_key"));
        assert!(e.contains("unknown tool `rm`"), "{e}");
        let e = team_error(&TEAM.replace("name = \"collect\"", "name = \"walissh\""));
        assert!(e.contains("`walissh` is defined twice"), "{e}");
    }

    #[test]
    fn a_wide_acyclic_team_is_checked_once_per_workflow() {
        // Each of 40 workflows lists every later one: a walk without marks
        // would take 2^40 steps.
        let mut text = String::from("[[agents]]\nname = \"x\"\ninstruction = \"x\"\n");
        for i in 0..40 {
            let later: Vec<String> = (i + 1..40)
                .map(|j| format!("\"w{j}\""))
                .chain(["\"x\"".into()])
                .collect();
            text.push_str(&format!(
                "[[workflows]]\nname = \"w{i}\"\nkind = \"sequential\"\nmembers = [{}]\n",
                later.join(", ")
            ));
        }
        assert!(Config::parse(&text, "t.toml", false).is_ok());
        let cyclic = text.replace("members = [\"x\"]", "members = [\"w0\"]");
        assert!(team_error(&cyclic).contains("contains itself"));
    }

    #[test]
    fn placeholders_are_lowercase_identifiers_in_braces() {
        let found: Vec<&str> =
            placeholders("a {x} {y_2} {\"json\": 1} ${HOME} {Z} {} {q").collect();
        assert_eq!(found, ["x", "y_2"]);
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let text = "[server]\nlisten = [\"127.0.0.1:1\"]\nstate_dri = \"/tmp\"\n";
        let e = Config::parse(text, "x.toml", false).unwrap_err().0;
        assert!(e.starts_with("x.toml:3: key `server.state_dri`:"), "{e}");
        assert!(e.contains("unknown field"), "{e}");
    }

    #[test]
    fn bad_glob_is_located() {
        let text = "[[targets]]\nname = \"a\"\nhost = \"h\"\n\n[[users]]\nname = \"u\"\n\
                    authorized_keys = []\npassword_hash = \"$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$ixF1BqkRDQwdhmLu6mG7wKcQ5FwjOJbbSSMvNQ9OUnI\"\n\
                    targets = [\"web[\"]\n";
        let e = Config::parse(text, "x.toml", false).unwrap_err().0;
        assert!(
            e.starts_with("x.toml:9: key `users.targets`: bad glob"),
            "{e}"
        );
    }

    #[test]
    fn globs_deny_by_default() {
        let text = "[[users]]\nname = \"u\"\nauthorized_keys = [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHMTPR0d+PrPU0WH3b7gJLajZMMutiK2XEYTom1UgY8S u@h\"]\ntargets = [\"db-*\"]\n";
        let c = Config::parse(text, "x.toml", false).unwrap();
        let u = c.user("u").unwrap();
        assert!(u.may_reach("db-1"));
        assert!(!u.may_reach("web1"));
    }
}
