//! The config's schema: every section as a plain struct, with its
//! defaults, and the embedded default config.

use std::path::PathBuf;

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
    pub(crate) recordings: RecordingsConfig,
    #[serde(default)]
    pub(crate) terminal: TerminalConfig,
    #[serde(default)]
    pub(crate) context: ContextConfig,
    #[serde(default)]
    pub(crate) mcp: Vec<super::McpConfig>,
    #[serde(default)]
    pub(crate) auth: super::AuthConfig,
    #[serde(default)]
    pub(crate) web: super::WebConfig,
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
    /// Logged-in connections one user may have open at once.
    #[serde(default = "default_max_user_connections")]
    pub(crate) max_connections_per_user: Spanned<u32>,
    /// This bastion's name among several sharing one audit: every audit
    /// row carries it as `node`. Default: the host name.
    pub(crate) node_name: Option<Spanned<String>>,
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
            max_connections_per_user: default_max_user_connections(),
            node_name: None,
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
fn default_max_user_connections() -> Spanned<u32> {
    Spanned::new(0..0, 32)
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpstreamConfig {
    pub(crate) identity: Option<Spanned<PathBuf>>,
    pub(crate) known_hosts: Option<PathBuf>,
    #[serde(default)]
    pub(crate) host_key_policy: HostKeyPolicy,
    /// Seconds of silence from a target before walissh asks it whether it
    /// is alive (OpenSSH's ServerAliveInterval).
    #[serde(default = "default_keepalive_s")]
    pub(crate) keepalive_s: u64,
    /// Unanswered keepalives after which the target is given up on and
    /// the session ends (OpenSSH's ServerAliveCountMax).
    #[serde(default = "default_keepalive_max")]
    pub(crate) keepalive_max: u32,
    /// A CA key: walissh then logs in to targets with a short-lived
    /// certificate it signs for each login, not with `identity`.
    pub(crate) ca_key: Option<Spanned<PathBuf>>,
    /// How long such a certificate is valid, in seconds.
    #[serde(default = "default_cert_validity_s")]
    pub(crate) cert_validity_s: Spanned<u64>,
}

impl Default for UpstreamConfig {
    fn default() -> UpstreamConfig {
        UpstreamConfig {
            identity: None,
            known_hosts: None,
            host_key_policy: HostKeyPolicy::default(),
            keepalive_s: default_keepalive_s(),
            keepalive_max: default_keepalive_max(),
            ca_key: None,
            cert_validity_s: default_cert_validity_s(),
        }
    }
}

impl UpstreamConfig {
    /// The keepalive as walissh's client takes it: the interval, and the
    /// count of unanswered ones that end the connection (each at least 1).
    pub(crate) fn keepalive(&self) -> (std::time::Duration, u32) {
        (
            std::time::Duration::from_secs(self.keepalive_s.max(1)),
            self.keepalive_max.max(1),
        )
    }
}

fn default_keepalive_s() -> u64 {
    15
}

fn default_keepalive_max() -> u32 {
    3
}

fn default_cert_validity_s() -> Spanned<u64> {
    Spanned::new(0..0, 300)
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
    /// Every command the agent runs here needs a second person's approval
    /// too (`[ai] second_approver`), after the user's: none runs unasked.
    #[serde(default)]
    pub(crate) four_eyes: bool,
    /// Other names the target answers to through the jump (`ssh -J
    /// bastion web1.corp`), and in its host certificate.
    #[serde(default)]
    pub(crate) aliases: Vec<Spanned<String>>,
    /// What `ssh -J` gets here: walissh's own server, inspecting
    /// (default), or a blind TCP relay to the target's SSH port.
    #[serde(default)]
    pub(crate) jump: JumpMode,
    /// Remote forwards (`ssh -R`) on a login to this target ask the
    /// target to listen, and what connects there is relayed back to the
    /// client, audited. Off by default: every `-R` is refused.
    #[serde(default)]
    pub(crate) remote_forward: bool,
}

/// `[[targets]] jump`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum JumpMode {
    /// walissh answers the jump with its own server: the session is
    /// recorded and audited as any other.
    #[default]
    Inspect,
    /// The jump's bytes go to the target's SSH port unread, as OpenSSH
    /// relays them: only the tunnel's opening, closing and size are
    /// audited.
    Tunnel,
}

/// A user's `ai` mode, the policy's own (`walissh_policy::AiMode`).
pub(crate) use walissh_policy::AiMode;

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
    /// A second factor after the password or key.
    #[serde(default)]
    pub(crate) mfa: super::Mfa,
    /// The certificate principals that stand for this user (default: the
    /// user's name).
    #[serde(default)]
    pub(crate) principals: Vec<Spanned<String>>,
    /// The methods this user may log in with (default: all of `[auth]
    /// methods`).
    pub(crate) auth: Option<Vec<Spanned<super::Method>>>,
    /// Whether this user's SSH agent is forwarded to targets (`ssh -A`).
    #[serde(default)]
    pub(crate) agent_forwarding: bool,
    /// What the user may do in the web console (none, by default).
    #[serde(default)]
    pub(crate) role: super::Role,
    /// Accounts on targets this user may log in as through the jump
    /// (`ssh -J bastion root@web1`), beside each target's own `user`.
    #[serde(default)]
    pub(crate) target_accounts: Vec<Spanned<String>>,
    /// Local forwards (`ssh -L`) this user may open: `host:port`, the host
    /// a target's name (its address) or a glob over the host asked for,
    /// the port a number or `*`.
    #[serde(default)]
    pub(crate) forward: Vec<Spanned<String>>,
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
    /// Where what `auto` runs unasked may run: only in a sandbox
    /// (`require`), in one where the target has one (`prefer`), or with
    /// the policy alone (`off`).
    #[serde(default)]
    pub(crate) auto_sandbox: AutoSandbox,
    /// How long one command run unasked may take before it is stopped.
    #[serde(default = "default_auto_timeout")]
    pub(crate) auto_timeout_s: u64,
    /// How many bytes one command run unasked may print before it is
    /// stopped.
    #[serde(default = "default_auto_output_max")]
    pub(crate) auto_output_max: u64,
    /// More paths (globs; absolute or `~/…`) the sandbox hides, after its
    /// own list.
    #[serde(default)]
    pub(crate) sandbox_hide: Vec<Spanned<String>>,
    /// Extra secret patterns (regexes), redacted before anything reaches
    /// the model.
    #[serde(default)]
    pub(crate) redact: Vec<Spanned<String>>,
    /// What a plain `?` line runs: an agent or a workflow. Default: the
    /// built-in agent, `walissh`.
    pub(crate) entry: Option<Spanned<String>>,
    /// A directory of skills (folders holding a SKILL.md).
    pub(crate) skills_dir: Option<Spanned<PathBuf>>,
    /// Whether the MCP gateway asks the client to approve what needs
    /// approval, or refuses it.
    #[serde(default)]
    pub(crate) mcp_confirm: McpConfirm,
    /// Who gives the second approval of a four-eyes command: a console
    /// role (`auditor` or `admin`), never the user who asked.
    #[serde(default = "default_second_approver")]
    pub(crate) second_approver: Spanned<super::Role>,
    /// Commands (globs over each command the policy's parser sees, wrappers
    /// taken off) that need a second approval on every target.
    #[serde(default)]
    pub(crate) four_eyes: Vec<Spanned<String>>,
    /// How long a four-eyes command waits for its second approval before
    /// it is denied.
    #[serde(default = "default_four_eyes_timeout")]
    pub(crate) four_eyes_timeout_s: u64,
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
            auto_sandbox: AutoSandbox::default(),
            auto_timeout_s: default_auto_timeout(),
            auto_output_max: default_auto_output_max(),
            sandbox_hide: Vec::new(),
            redact: Vec::new(),
            entry: None,
            skills_dir: None,
            mcp_confirm: McpConfirm::default(),
            second_approver: default_second_approver(),
            four_eyes: Vec::new(),
            four_eyes_timeout_s: default_four_eyes_timeout(),
        }
    }
}

fn default_second_approver() -> Spanned<super::Role> {
    Spanned::new(0..0, super::Role::Admin)
}
fn default_four_eyes_timeout() -> u64 {
    300
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
fn default_auto_timeout() -> u64 {
    10
}
fn default_auto_output_max() -> u64 {
    1024 * 1024
}

/// `[ai] auto_sandbox`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum AutoSandbox {
    /// Nothing runs unasked where no sandbox works: it is asked.
    #[default]
    Require,
    /// The sandbox where one works, the policy alone elsewhere.
    Prefer,
    /// The policy alone.
    Off,
}

/// `[ai] mcp_confirm`: who approves, through the MCP gateway, a command
/// the policy does not run unasked. The only one the gateway can ask is
/// the MCP client, which may answer by itself.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum McpConfirm {
    /// Nobody: it is refused, and only what the policy runs unasked runs.
    #[default]
    Refuse,
    /// The client, by MCP elicitation: its answer is taken as the user's.
    Elicitation,
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
    /// Record exec sessions' output too, so a shell started through exec
    /// (`ssh -T host 'python3 -c "import pty; pty.spawn(...)"'`) is
    /// recorded. Binary output is summarised (count and SHA-256).
    #[serde(default = "default_true")]
    pub(crate) record_exec: bool,
    #[serde(default)]
    pub(crate) on_failure: OnFailure,
    /// A signed checkpoint of the hash chain after this many events...
    #[serde(default = "default_checkpoint_events")]
    pub(crate) checkpoint_events: u64,
    /// ...or this many seconds after an event, whichever comes first.
    #[serde(default = "default_checkpoint_s")]
    pub(crate) checkpoint_s: u64,
    /// Where every event and checkpoint is also sent, as it is committed.
    #[serde(default)]
    pub(crate) forward: Option<Spanned<OneOrMany>>,
    /// Items each destination may hold while it is slow or down.
    #[serde(default = "default_forward_queue")]
    pub(crate) forward_queue: usize,
    /// Rows older than this many days are deleted by a daily pass, and a
    /// signed marker takes their place. None: keep everything.
    pub(crate) keep_days: Option<Spanned<u32>>,
    /// Where the audit lives: `sqlite:PATH` (absolute, or relative to the
    /// state directory), or `postgres://…` shared by several bastions.
    /// None: `sqlite:audit.db`.
    pub(crate) database: Option<Spanned<String>>,
    /// PostgreSQL's password, in a file only the bastion reads (or in
    /// `$WALISSH_DATABASE_PASSWORD`); never in the config itself.
    pub(crate) database_password_file: Option<Spanned<PathBuf>>,
    /// The certificates (PEM) of the CAs that sign the PostgreSQL
    /// server's, with `sslmode=require`. None: the system's roots.
    pub(crate) database_ca_file: Option<Spanned<PathBuf>>,
}

/// `[recordings]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordingsConfig {
    /// Where recordings are written: a directory (absolute, or relative
    /// to the state directory). None: `recordings`.
    pub(crate) store: Option<Spanned<String>>,
    /// Recordings of sessions that ended more than this many days ago are
    /// deleted by the daily pass. None: keep everything.
    pub(crate) keep_days: Option<Spanned<u32>>,
    /// With an `s3://` store: local copies of uploaded recordings are
    /// deleted this many days after their last write (0: once uploaded).
    /// None: kept.
    pub(crate) keep_local_days: Option<Spanned<u32>>,
    /// With an `s3://` store: how often a live session's recording sends
    /// what it gained (the most of it a node that dies loses). None: 120.
    pub(crate) upload_every_s: Option<Spanned<u32>>,
}

/// A key that takes one string or a list of them (`[audit] forward`,
/// `[auth] user_ca_keys`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub(crate) fn list(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

fn default_forward_queue() -> usize {
    10_000
}

fn default_checkpoint_events() -> u64 {
    1000
}

fn default_checkpoint_s() -> u64 {
    60
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            record_input: false,
            record_exec: true,
            on_failure: OnFailure::default(),
            checkpoint_events: default_checkpoint_events(),
            checkpoint_s: default_checkpoint_s(),
            forward: None,
            forward_queue: default_forward_queue(),
            keep_days: None,
            database: None,
            database_password_file: None,
            database_ca_file: None,
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
    pub(crate) reducer: Strategy,
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
    /// A file of extra redaction rules in gitleaks' TOML format; a
    /// relative path is taken from the config file's directory.
    pub(crate) redact_rules: Option<Spanned<PathBuf>>,
    /// Values that must pass: a finding whose secret one of these regexes
    /// matches (a search, as gitleaks' allow-lists) is not replaced.
    pub(crate) redact_allow: Vec<Spanned<String>>,
    /// `redact_rules` as read at load: what the redactor compiles.
    #[serde(skip)]
    pub(crate) redact_rules_file: Option<RulesFile>,
}

/// An operator's rules file (`[context] redact_rules`), read once at load
/// so that what was checked is what runs.
#[derive(Debug, Clone)]
pub(crate) struct RulesFile {
    /// Where it was read, resolved.
    pub(crate) path: PathBuf,
    pub(crate) text: String,
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
            redact_rules: None,
            redact_allow: Vec::new(),
            redact_rules_file: None,
        }
    }
}

impl UserConfig {
    pub(crate) fn name(&self) -> &str {
        self.name.get_ref()
    }

    pub(super) fn compile(&mut self) {
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

/// How the history is cut to the budget (`[context] reducer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Strategy {
    /// The newest groups that fit, stopping at the first that does not.
    Window,
    /// The task, then groups with errors, then the rest, newest first,
    /// skipping what does not fit.
    Priority,
    /// The newest two groups, then by priority: the model sees the step it
    /// just took in full, and what failed along the way.
    #[default]
    Hybrid,
}
