//! Validation of a parsed config: addresses, targets, users, and the
//! key files it names. Agents and workflows are `team`'s.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;

use toml::Spanned;

use super::*;

impl Config {
    pub(super) fn validate(&self, loc: &Locator) -> Result<(), ConfigError> {
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
        if *s.max_connections_per_user.get_ref() == 0 {
            return Err(loc.error(
                s.max_connections_per_user.span(),
                Some("server.max_connections_per_user"),
                "must be at least 1",
            ));
        }
        for (days, key) in [
            (&self.audit.keep_days, "audit.keep_days"),
            (&self.recordings.keep_days, "recordings.keep_days"),
        ] {
            if let Some(d) = days
                && *d.get_ref() == 0
            {
                return Err(loc.error(
                    d.span(),
                    Some(key),
                    "must be at least 1 (leave it out to keep everything)",
                ));
            }
        }
        if let Some(d) = &self.audit.database {
            let text = d.get_ref();
            let why = match text.split_once(':').map(|(scheme, _)| scheme) {
                Some("sqlite") if text.len() > "sqlite:".len() => None,
                Some("postgres" | "postgresql") => postgres_url(text),
                _ => Some("use sqlite:PATH or postgres://USER@HOST/DB".into()),
            };
            if let Some(why) = why {
                return Err(loc.error(d.span(), Some("audit.database"), &why));
            }
        }
        for (f, key) in [
            (
                &self.audit.database_password_file,
                "audit.database_password_file",
            ),
            (&self.audit.database_ca_file, "audit.database_ca_file"),
        ] {
            if let Some(f) = f
                && self.audit_postgres().is_none()
            {
                return Err(loc.error(f.span(), Some(key), "only for a postgres:// database"));
            }
        }
        if let Some(st) = &self.recordings.store {
            let text = st.get_ref();
            let why = match text.split_once("://") {
                Some(("s3", _)) if super::bucket_and_prefix(text).is_none() => Some(
                    "write s3://BUCKET/PREFIX (a bucket's name: lowercase letters, digits, '-' and '.')",
                ),
                Some(("s3", _)) => None,
                Some(_) => Some("use a directory or s3://BUCKET/PREFIX"),
                None if text.is_empty() => Some("use a directory"),
                None => None,
            };
            if let Some(why) = why {
                return Err(loc.error(st.span(), Some("recordings.store"), why));
            }
        }
        for (k, name) in [
            (
                &self.recordings.keep_local_days,
                "recordings.keep_local_days",
            ),
            (&self.recordings.upload_every_s, "recordings.upload_every_s"),
        ] {
            if let Some(k) = k
                && self.recordings_bucket().is_none()
            {
                return Err(loc.error(k.span(), Some(name), "only with an s3:// store"));
            }
        }
        if let Some(k) = &self.recordings.upload_every_s
            && !(1..=3600).contains(k.get_ref())
        {
            let why = "must be between 1 and 3600 seconds";
            return Err(loc.error(k.span(), Some("recordings.upload_every_s"), why));
        }
        if let Some(n) = &s.node_name
            && (n.get_ref().len() > 64 || !valid_name(n.get_ref()))
        {
            let why = "use at most 64 letters, digits, '.', '-' and '_'";
            return Err(loc.error(n.span(), Some("server.node_name"), why));
        }
        if *s.auth_lockout_s.get_ref() > 86_400 {
            // Shared failures (several nodes) are kept a day.
            let why = "must be at most 86400 (a day)";
            return Err(loc.error(s.auth_lockout_s.span(), Some("server.auth_lockout_s"), why));
        }
        if *s.auth_lockout_s.get_ref() == 0 {
            let why = "must be at least 1 (0 would disable the lockout)";
            return Err(loc.error(s.auth_lockout_s.span(), Some("server.auth_lockout_s"), why));
        }
        let validity = &self.upstream.cert_validity_s;
        if !(30..=86_400).contains(validity.get_ref()) {
            let why = "must be between 30 and 86400 seconds";
            return Err(loc.error(validity.span(), Some("upstream.cert_validity_s"), why));
        }
        if self.server.listen.is_empty() {
            return Err(loc.error(0..0, Some("server.listen"), "no address to listen on"));
        }
        self.validate_targets(loc)?;
        self.validate_users(loc)?;
        self.validate_auth(loc)?;
        self.validate_team(loc)?;
        self.validate_mcp(loc)?;
        self.validate_web(loc)?;
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
        for rule in &self.ai.four_eyes {
            walissh_policy::Globs::new(std::slice::from_ref(rule.get_ref())).map_err(|e| {
                loc.error(rule.span(), Some("ai.four_eyes"), &format!("bad glob: {e}"))
            })?;
        }
        if *self.ai.second_approver.get_ref() == super::Role::User {
            let msg = "must be \"auditor\" or \"admin\": a user has no console to approve in";
            return Err(loc.error(
                self.ai.second_approver.span(),
                Some("ai.second_approver"),
                msg,
            ));
        }
        if self.ai.four_eyes_timeout_s == 0 {
            let msg = "must be at least 1";
            return Err(loc.error(0..0, Some("ai.four_eyes_timeout_s"), msg));
        }
        if let Some(f) = &self.audit.forward {
            for url in f.get_ref().list() {
                super::destination(url)
                    .map_err(|e| loc.error(f.span(), Some("audit.forward"), &e))?;
            }
        }
        for p in &self.ai.redact {
            compile_pattern(p.get_ref())
                .map_err(|e| loc.error(p.span(), Some("ai.redact"), &format!("bad regex: {e}")))?;
        }
        for p in &self.context.redact_allow {
            let regex = regex::Regex::new(p.get_ref()).map_err(|e| {
                let msg = format!("bad regex: {}", one_line(&e.to_string()));
                loc.error(p.span(), Some("context.redact_allow"), &msg)
            })?;
            if regex.is_match("") {
                let msg = format!(
                    "{:?} matches the empty string, so it would match every value and \
                     turn redaction off: anchor it or make it match something",
                    p.get_ref()
                );
                return Err(loc.error(p.span(), Some("context.redact_allow"), &msg));
            }
        }
        for g in &self.ai.sandbox_hide {
            let glob = g.get_ref();
            // The sandbox expands it in bash on the target: a path, never
            // more shell than a glob.
            let shell = glob
                .chars()
                .any(|c| c.is_control() || "$`\\\"'{}()<>|;&!".contains(c));
            if !(glob.starts_with('/') || glob.starts_with("~/")) || glob.len() < 2 || shell {
                let msg = format!(
                    "{glob:?} must be an absolute path or start with ~/, \
                     with no quotes, backslashes, $, `, braces, parentheses or control characters"
                );
                return Err(loc.error(g.span(), Some("ai.sandbox_hide"), &msg));
            }
        }
        if self.ai.auto_timeout_s == 0 || self.ai.auto_output_max == 0 {
            let key = if self.ai.auto_timeout_s == 0 {
                "ai.auto_timeout_s"
            } else {
                "ai.auto_output_max"
            };
            return Err(loc.error(0..0, Some(key), "must be at least 1"));
        }
        Ok(())
    }

    /// Reads `[context] redact_rules`, the file of extra redaction rules,
    /// so that the redactor compiles what was read here (its rules are
    /// checked where the redactor is built, `context::redact::for_config`, which
    /// `check-config`, `serve` and a reload run). A relative path is taken
    /// from the config file's directory. It must be a regular file of
    /// UTF-8 text, at most `REDACT_RULES_MAX_BYTES`.
    pub(super) fn read_redact_rules(&mut self, loc: &Locator) -> Result<(), ConfigError> {
        let Some(given) = &self.context.redact_rules else {
            return Ok(());
        };
        let path = match (self.embedded, Path::new(&self.source).parent()) {
            (false, Some(dir)) => dir.join(given.get_ref()),
            _ => given.get_ref().clone(),
        };
        let error = |why: &str| {
            let msg = format!("{}: {why}", path.display());
            loc.error(given.span(), Some("context.redact_rules"), &msg)
        };
        let meta = std::fs::metadata(&path).map_err(|e| error(&e.to_string()))?;
        if !meta.is_file() {
            return Err(error("not a regular file"));
        }
        let too_big = || {
            error(&format!(
                "more than the {REDACT_RULES_MAX_BYTES} bytes a rules file may have"
            ))
        };
        if meta.len() > REDACT_RULES_MAX_BYTES as u64 {
            return Err(too_big());
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(
                std::fs::File::open(&path).map_err(|e| error(&e.to_string()))?,
                REDACT_RULES_MAX_BYTES as u64 + 1,
            ),
            &mut bytes,
        )
        .map_err(|e| error(&e.to_string()))?;
        if bytes.len() > REDACT_RULES_MAX_BYTES {
            return Err(too_big());
        }
        let text = String::from_utf8(bytes).map_err(|_| error("not UTF-8 text"))?;
        self.context.redact_rules_file = Some(RulesFile { path, text });
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
                    if t.jump == super::JumpMode::Tunnel {
                        let msg = "jump = \"tunnel\" applies to kind = \"ssh\" targets only";
                        return Err(loc.error(t.name.span(), Some("targets.jump"), msg));
                    }
                    if t.remote_forward {
                        // The bastion itself would listen: never.
                        let msg = "remote_forward applies to kind = \"ssh\" targets only";
                        return Err(loc.error(t.name.span(), Some("targets.remote_forward"), msg));
                    }
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
        // An alias is a name of the target's too: one name, one target.
        for a in self.targets.iter().flat_map(|t| &t.aliases) {
            new_name(loc, &mut names, a, "targets.aliases", "target name")?;
        }
        // Through the jump a name is a host name, in any case: `Web1` and
        // `web1` would be one name for two targets.
        let mut folded = HashSet::new();
        let every = self.targets.iter().flat_map(|t| {
            std::iter::once((&t.name, "targets.name"))
                .chain(t.aliases.iter().map(|a| (a, "targets.aliases")))
        });
        for (n, key) in every {
            if !folded.insert(n.get_ref().to_ascii_lowercase()) {
                let msg = format!(
                    "target name `{}` is defined twice (names are not case-sensitive)",
                    n.get_ref()
                );
                return Err(loc.error(n.span(), Some(key), &msg));
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
            for f in &u.forward {
                forward_entry(f.get_ref())
                    .map_err(|e| loc.error(f.span(), Some("users.forward"), &e))?;
            }
            for t in &u.targets {
                glob::Pattern::new(t.get_ref()).map_err(|e| {
                    loc.error(t.span(), Some("users.targets"), &format!("bad glob: {e}"))
                })?;
            }
            let embedded_demo = self.embedded && name == "demo";
            let certified = self.auth.takes_certificates();
            if u.password_hash.is_none()
                && u.authorized_keys.is_empty()
                && !embedded_demo
                && !certified
            {
                return Err(loc.error(
                    u.name.span(),
                    Some("users"),
                    &format!("user `{name}` has neither password_hash nor authorized_keys"),
                ));
            }
        }
        Ok(())
    }

    /// Refuses a config nobody could log in with: a bastion with no users
    /// is a package's sample left as installed, not a deployment, and
    /// starting it would only look like success. `serve` and
    /// `check-config` call this; the commands that read the audit or print
    /// keys do not, so they work before the first user is added.
    pub(crate) fn check_has_users(&self) -> Result<(), ConfigError> {
        match self.users.is_empty() {
            false => Ok(()),
            true => Err(ConfigError(format!(
                "{}: key `users`: no user is configured, so nobody could log in and \
                 walissh does not start: add a [[users]] table (the file's comments show one)",
                self.source
            ))),
        }
    }

    /// Checks what can only be checked against the files the config names:
    /// existing key files must parse. Missing ones are generated at start.
    pub(crate) fn check_files(&self) -> Result<(), ConfigError> {
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
        let ca = self
            .upstream
            .ca_key
            .as_ref()
            .map(|k| (Some(k), "upstream.ca_key", k.get_ref().clone()));
        for (spanned, key, path) in keys.into_iter().chain(ca) {
            if path.exists() {
                crate::keys::load_private(&path)
                    .map_err(|e| self.error_at(spanned.map(|s| s.span()), key, &e))?;
            }
        }
        Ok(())
    }
}

impl Config {
    /// An error about a key of this config, naming its file and line: for
    /// what is checked after parsing (key files, skills). The file is read
    /// again only to find the line.
    pub(crate) fn error_at(
        &self,
        span: Option<std::ops::Range<usize>>,
        key: &str,
        msg: &str,
    ) -> ConfigError {
        let text = match self.embedded {
            true => super::EMBEDDED_DEFAULT.to_string(),
            false => std::fs::read_to_string(&self.source).unwrap_or_default(),
        };
        let loc = Locator {
            source: &self.source,
            text: &text,
        };
        loc.error(span.unwrap_or(0..0), Some(key), msg)
    }
}

pub(super) fn sorted(keys: &HashSet<&str>) -> String {
    let mut v: Vec<&str> = keys.iter().copied().collect();
    v.sort();
    v.join(", ")
}

/// Checks that a name (a target's, a user's, an agent's) is well-formed
/// and not taken.
/// A `[[users]] forward` entry: `host:port`, the host a target's name or a
/// glob, the port a number or `*`.
fn forward_entry(entry: &str) -> Result<(), String> {
    let Some((host, port)) = entry.rsplit_once(':') else {
        return Err(format!("{entry:?}: write host:port (a port, or *)"));
    };
    if port != "*" && port.parse::<u16>().ok().filter(|p| *p != 0).is_none() {
        return Err(format!("{entry:?}: the port must be 1 to 65535, or *"));
    }
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{entry:?}: name a host, a target or a glob"));
    }
    glob::Pattern::new(host).map_err(|e| format!("{entry:?}: bad glob: {e}"))?;
    Ok(())
}

pub(super) fn new_name<'a>(
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

/// Why a PostgreSQL URL cannot be used, if it cannot: it must parse, and
/// hold no password (that goes in a file or the environment).
fn postgres_url(text: &str) -> Option<String> {
    match text.parse::<tokio_postgres::Config>() {
        Err(_) if text.contains("sslmode=verify") => Some(
            "use sslmode=require: the server's certificate is checked, chain and name, against [audit] database_ca_file or the system's roots"
                .into(),
        ),
        Err(e) => Some(format!("not a PostgreSQL URL: {e}")),
        Ok(c) if c.get_password().is_some() => Some(
            "no password here: put it in [audit] database_password_file or $WALISSH_DATABASE_PASSWORD"
                .into(),
        ),
        // prefer (the default) takes TLS only when the server offers it,
        // and whoever is in between can say it does not.
        Ok(c) if c.get_ssl_mode() == tokio_postgres::config::SslMode::Prefer
            && !reached_on_this_machine(&c) =>
        {
            Some(
                "say sslmode=require (TLS, the server's certificate checked) or sslmode=disable (a network you trust): sslmode=prefer lets whoever is in between turn TLS off"
                    .into(),
            )
        }
        Ok(_) => None,
    }
}

/// Whether every connection `c` makes stays on this machine: to the
/// `hostaddr`s where given (the address connected to; `host` then only
/// names it for TLS), else to the hosts.
fn reached_on_this_machine(c: &tokio_postgres::Config) -> bool {
    match c.get_hostaddrs() {
        [] => c.get_hosts().iter().all(on_this_machine),
        addrs => addrs.iter().all(|a| a.is_loopback()),
    }
}

/// A database host on this machine: a Unix socket, or loopback.
fn on_this_machine(host: &tokio_postgres::config::Host) -> bool {
    match host {
        tokio_postgres::config::Host::Unix(_) => true,
        tokio_postgres::config::Host::Tcp(name) => {
            name == "localhost"
                || name
                    .trim_matches(|c| c == '[' || c == ']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
    }
}

pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// The largest `[context] redact_rules` file, in bytes; an operator's
/// pattern compiled as redaction compiles it, so the two agree; a regex
/// error in one line (all the redactor's: `walissh_redact`).
pub(crate) use walissh_redact::{
    MAX_RULES_FILE_BYTES as REDACT_RULES_MAX_BYTES, compile_pattern, one_line,
};
