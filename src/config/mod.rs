//! The configuration: the TOML schema (`schema`), the embedded default,
//! validation (`validate`, and `team` for agents and workflows), and the
//! system's accounts (`account`).
//!
//! Everything a config file can say is parsed into plain structs, and
//! every mistake is reported as one line naming the file, the line and the key.
//! Unknown keys are errors: a typo must never silently weaken policy. This
//! module does not open sockets or read key files' contents beyond checking
//! that they parse; `keys` and `server` do that at start. This file owns
//! loading, the error type and its locator, and the paths the config
//! implies.

mod account;
mod auth;
mod forward;
mod mcp;
mod schema;
mod team;
mod validate;
mod web;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub(crate) use account::*;
pub(crate) use auth::*;
pub(crate) use forward::{Destination, destination};
pub(crate) use mcp::*;
pub(crate) use schema::*;
pub(crate) use team::placeholders;
pub(crate) use web::{Role, Scrapers, WebConfig};

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
            let msg = with_nearest_key(e.message().trim());
            loc.error(e.span().unwrap_or(0..0), None, &msg)
        })?;
        config.source = source.to_string();
        config.embedded = embedded;
        config.validate(&loc)?;
        config.read_redact_rules(&loc)?;
        for u in &mut config.users {
            u.compile();
        }
        Ok(config)
    }
}

/// serde's `unknown field `x`, expected one of `a`, `b``, with the key
/// nearest to `x` named first when one is near enough to be a typo
/// (`state_dri` for `state_dir`), not a key of another table.
fn with_nearest_key(msg: &str) -> String {
    let Some((field, expected)) = msg
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
    else {
        return msg.to_string();
    };
    let nearest = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|key| (strsim::damerau_levenshtein(field, key), key))
        .filter(|&(distance, key)| distance <= (key.len() / 3).max(1))
        .min();
    match nearest {
        Some((_, key)) => format!(
            "unknown field `{field}`: did you mean `{key}`? ({})",
            expected.trim_start_matches(", ")
        ),
        None => msg.to_string(),
    }
}

impl Config {
    /// This bastion's name in the audit (`[server] node_name`, else the
    /// host name, else `walissh`).
    pub(crate) fn node_name(&self) -> String {
        if let Some(n) = &self.server.node_name {
            return n.get_ref().clone();
        }
        nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .map(|h| crate::text::prefix(&h, 64).to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "walissh".to_string())
    }

    /// The state directory, where audit.db and recordings/ live.
    pub(crate) fn state_dir(&self) -> &Path {
        &self.server.state_dir
    }

    pub(crate) fn host_key_path(&self) -> PathBuf {
        self.given_or_state(self.server.host_key.as_ref(), "host_ed25519")
    }

    /// The key that signs the host certificates the jump presents for
    /// targets (`walissh pubkey --host-ca`).
    pub(crate) fn host_ca_path(&self) -> PathBuf {
        self.state_dir().join("host_ca_ed25519")
    }

    /// The target `name` names through the jump: by its name or one of its
    /// aliases, in any case (host names are not case-sensitive).
    pub(crate) fn target_by_host(&self, name: &str) -> Option<&TargetConfig> {
        self.targets.iter().find(|t| {
            t.name().eq_ignore_ascii_case(name)
                || t.aliases
                    .iter()
                    .any(|a| a.get_ref().eq_ignore_ascii_case(name))
        })
    }

    pub(crate) fn identity_path(&self) -> PathBuf {
        self.given_or_state(self.upstream.identity.as_ref(), "upstream_ed25519")
    }

    /// A file the config names, or `name` in the state directory.
    fn given_or_state(&self, given: Option<&toml::Spanned<PathBuf>>, name: &str) -> PathBuf {
        given.map_or_else(|| self.state_dir().join(name), |p| p.get_ref().clone())
    }

    pub(crate) fn known_hosts_path(&self) -> PathBuf {
        self.upstream
            .known_hosts
            .clone()
            .unwrap_or_else(|| self.state_dir().join("known_hosts"))
    }

    /// The audit database (`[audit] database`, `sqlite:PATH`; checked
    /// when the config is read).
    pub(crate) fn audit_db_path(&self) -> PathBuf {
        let given = self.audit.database.as_ref().map(|d| d.get_ref().as_str());
        let path = given
            .and_then(|d| d.strip_prefix("sqlite:"))
            .unwrap_or("audit.db");
        self.state_dir().join(path)
    }

    /// The PostgreSQL URL, when `[audit] database` names one.
    pub(crate) fn audit_postgres(&self) -> Option<&str> {
        let given = self.audit.database.as_ref()?.get_ref().as_str();
        (given.starts_with("postgres://") || given.starts_with("postgresql://")).then_some(given)
    }

    /// Where recordings are written (`[recordings] store`, a directory;
    /// with a bucket, `recordings` in the state directory, the spool).
    pub(crate) fn recordings_dir(&self) -> PathBuf {
        let given = self.recordings.store.as_ref().map(|d| d.get_ref().as_str());
        let dir = given.filter(|_| self.recordings_bucket().is_none());
        self.state_dir().join(dir.unwrap_or("recordings"))
    }

    /// The bucket recordings are uploaded to (`s3://…`), if any.
    pub(crate) fn recordings_bucket(&self) -> Option<&str> {
        let given = self.recordings.store.as_ref()?.get_ref().as_str();
        given.starts_with("s3://").then_some(given)
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
}

/// `s3://bucket/prefix` as its bucket and prefix.
pub(crate) fn bucket_and_prefix(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("s3://")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let ok = !bucket.is_empty()
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    ok.then_some((bucket, prefix))
}

#[cfg(test)]
mod tests {
    /// The keepalive walissh's client is given: the config's, each part
    /// at least 1.
    #[test]
    fn upstream_keepalive_is_the_configs_and_never_zero() {
        use std::time::Duration;
        let mut up = super::UpstreamConfig::default();
        assert_eq!(up.keepalive(), (Duration::from_secs(15), 3));
        (up.keepalive_s, up.keepalive_max) = (0, 0);
        assert_eq!(up.keepalive(), (Duration::from_secs(1), 1));
    }

    #[test]
    fn bucket_urls_name_a_bucket_and_a_prefix() {
        use super::bucket_and_prefix as split;
        assert_eq!(
            split("s3://casts/walissh/prod"),
            Some(("casts", "walissh/prod"))
        );
        assert_eq!(split("s3://casts"), Some(("casts", "")));
        for bad in [
            "s3://",
            "s3:///p",
            "s3://Bad_Bucket/p",
            "file:///x",
            "casts",
        ] {
            assert_eq!(split(bad), None, "{bad}");
        }
    }

    use super::*;

    /// The keys a table of the config accepts, as serde lists them when
    /// it meets one it does not know.
    fn accepted(table: &str) -> std::collections::BTreeSet<String> {
        let header = match table {
            "" => String::new(),
            "targets" | "users" | "agents" | "workflows" | "mcp" => format!("[[{table}]]\n"),
            t => format!("[{t}]\n"),
        };
        let text = format!("{header}zz_not_a_key = 1\n");
        let err = toml::from_str::<Config>(&text).unwrap_err().to_string();
        // A table of one key says "expected `key`".
        let list = err
            .split("expected one of ")
            .nth(1)
            .or_else(|| err.split("expected ").nth(1))
            .unwrap_or_else(|| panic!("{table}: {err}"));
        // Every `name` in the list ("`a`, `b`", "`a` or `b`").
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    /// Every key the config accepts is in `etc/walissh.toml`, the
    /// reference operators read (set, or commented out as `# key = …`),
    /// and every key written there is one the config accepts: the two
    /// cannot drift.
    #[test]
    fn the_reference_config_documents_every_key() {
        use std::collections::{BTreeMap, BTreeSet};
        let reference = include_str!("../../etc/walissh.toml");
        let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut table = String::new();
        for line in reference.lines() {
            let l = line.trim_start_matches('#').trim();
            if l.starts_with('[') && l.ends_with(']') {
                table = l.trim_matches(['[', ']']).to_string();
                continue;
            }
            let Some((key, _)) = l.split_once('=') else {
                continue;
            };
            let key = key.trim();
            if !key.is_empty() && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                documented
                    .entry(table.clone())
                    .or_default()
                    .insert(key.to_string());
            }
        }
        for (table, keys) in documented.iter().filter(|(t, _)| !t.is_empty()) {
            let accepted = accepted(table);
            let undocumented: Vec<_> = accepted.difference(keys).collect();
            let unknown: Vec<_> = keys.difference(&accepted).collect();
            assert!(
                undocumented.is_empty() && unknown.is_empty(),
                "[{table}]: not in etc/walissh.toml: {undocumented:?}; not accepted: {unknown:?}"
            );
        }
        // Every table the config has is in the reference.
        for table in accepted("") {
            assert!(
                documented.contains_key(&table),
                "[{table}] is not in etc/walissh.toml"
            );
        }
    }

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
    fn target_names_are_one_in_any_case_and_remote_forwards_are_for_ssh_targets() {
        let two = "[[targets]]\nname = \"web1\"\nhost = \"10.0.0.1\"\n\n\
                   [[targets]]\nname = \"db1\"\nhost = \"10.0.0.2\"\naliases = [\"WEB1\"]\n";
        let e = team_error(two);
        assert!(e.starts_with("t.toml:8: key `targets.aliases`:"), "{e}");
        assert!(
            e.contains("`WEB1` is defined twice (names are not case-sensitive)"),
            "{e}"
        );
        let e = team_error(
            &two.replace("aliases = [\"WEB1\"]", "")
                .replace("db1", "Web1"),
        );
        assert!(e.starts_with("t.toml:6: key `targets.name`:"), "{e}");
        let e = team_error("[audit]\ndatabase = \"postgres://u:hunter2@db/walissh\"\n");
        assert!(
            e.starts_with("t.toml:2: key `audit.database`: no password here"),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
        let e = team_error("[audit]\ndatabase_password_file = \"/p\"\n");
        assert!(
            e.starts_with("t.toml:2: key `audit.database_password_file`: only for"),
            "{e}"
        );
        let e = team_error("[audit]\ndatabase_ca_file = \"/ca.pem\"\n");
        assert!(
            e.starts_with("t.toml:2: key `audit.database_ca_file`: only for"),
            "{e}"
        );
        let e = team_error("[audit]\ndatabase = \"postgres://db/w?sslmode=verify-full\"\n");
        assert!(
            e.starts_with("t.toml:2: key `audit.database`: use sslmode=require"),
            "{e}"
        );
        // A database elsewhere: TLS said, either way; prefer (the default)
        // is refused, as whoever is in between could turn it off.
        for url in [
            "postgres://db/w",
            "postgres://db/w?sslmode=prefer",
            "postgres://10.0.0.5/w",
            // hostaddr is where it connects; host only names it.
            "postgres://localhost/w?hostaddr=10.0.0.5",
            "postgres:///w?hostaddr=10.0.0.5",
        ] {
            let e = team_error(&format!("[audit]\ndatabase = \"{url}\"\n"));
            assert!(
                e.starts_with("t.toml:2: key `audit.database`: say sslmode=require"),
                "{url}: {e}"
            );
        }
        for url in [
            "postgres://db/w?sslmode=require",
            "postgres://db/w?sslmode=disable",
            "postgres://localhost/w",
            "postgres://127.0.0.1:5433/w",
            "postgres:///w?host=/run/postgresql",
            "postgres://db/w?hostaddr=127.0.0.1",
        ] {
            let text = format!("[server]\nstate_dir = \"/s\"\n[audit]\ndatabase = \"{url}\"\n");
            assert!(Config::parse(&text, "t.toml", false).is_ok(), "{url}");
        }
        let e = team_error("[audit]\ndatabase = \"mysql://db/walissh\"\n");
        assert!(
            e.starts_with("t.toml:2: key `audit.database`: use sqlite:PATH or postgres://"),
            "{e}"
        );
        let e = team_error("[recordings]\nstore = \"s3://Bucket_X/p\"\n");
        assert!(
            e.starts_with("t.toml:2: key `recordings.store`: write s3://BUCKET/PREFIX"),
            "{e}"
        );
        let e = team_error("[recordings]\nkeep_local_days = 3\n");
        assert!(
            e.starts_with("t.toml:2: key `recordings.keep_local_days`: only with"),
            "{e}"
        );
        let e = team_error("[recordings]\nupload_every_s = 30\n");
        assert!(
            e.starts_with("t.toml:2: key `recordings.upload_every_s`: only with"),
            "{e}"
        );
        let e = team_error("[recordings]\nstore = \"s3://b/p\"\nupload_every_s = 0\n");
        assert!(
            e.starts_with("t.toml:3: key `recordings.upload_every_s`: must be between 1 and 3600"),
            "{e}"
        );
        let c = Config::parse(
            "[server]\nstate_dir = \"/s\"\n[audit]\ndatabase = \"sqlite:/db/a.db\"\n[recordings]\nstore = \"casts\"\n",
            "t.toml",
            false,
        )
        .unwrap();
        assert_eq!(c.audit_db_path(), PathBuf::from("/db/a.db"));
        assert_eq!(c.recordings_dir(), PathBuf::from("/s/casts"));
        let e = team_error("[server]\nnode_name = \"a b\"\n");
        assert!(
            e.starts_with("t.toml:2: key `server.node_name`: use at most 64"),
            "{e}"
        );
        let e = team_error("[[targets]]\nname = \"me\"\nkind = \"local\"\nremote_forward = true\n");
        assert!(
            e.contains("key `targets.remote_forward`: remote_forward applies to kind = \"ssh\""),
            "{e}"
        );
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

    /// `[context] redact_allow` is checked as `[ai] redact` is, and a
    /// pattern that would let every value pass is refused; a
    /// `redact_rules` file that cannot be read is named, relative to the
    /// config's directory.
    #[test]
    fn redaction_keys_are_checked_at_load() {
        let e = team_error("[context]\nreducer = \"hybrid\"\nredact_allow = [\"ok\", \"(x\"]\n");
        assert!(
            e.starts_with("t.toml:3: key `context.redact_allow`: bad regex:"),
            "{e}"
        );
        let e = team_error("[context]\nredact_allow = [\"^x*$\"]\n");
        assert!(
            e.starts_with("t.toml:2: key `context.redact_allow`:"),
            "{e}"
        );
        assert!(e.contains("matches the empty string") && e.contains("turn redaction off"));
        let c = Config::parse(
            "[context]\nredact_allow = [\"^changeme$\"]\n",
            "t.toml",
            false,
        );
        assert_eq!(c.unwrap().context.redact_allow.len(), 1);
        let e = Config::parse(
            "\n[context]\nredact_rules = \"no-such-rules.toml\"\n",
            "/nonexistent/dir/walissh.toml",
            false,
        )
        .unwrap_err()
        .0;
        assert!(
            e.starts_with(
                "/nonexistent/dir/walissh.toml:3: key `context.redact_rules`: \
                 /nonexistent/dir/no-such-rules.toml: "
            ),
            "{e}"
        );
        let e = team_error("[context]\nredact_rules = \"/\"\n");
        assert!(e.ends_with("/: not a regular file"), "{e}");
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
