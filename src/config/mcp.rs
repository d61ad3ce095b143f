//! `[[mcp]]`: the MCP servers whose tools agents may be given, and how
//! their calls are approved; and the `mcp:SERVER/TOOL` patterns in
//! `[[agents]] tools` that pick them.
//!
//! What it owns: the keys, their defaults and their checks (file, line and
//! key on each error). What it leaves to others: starting and speaking to
//! the servers (`agent::mcp`), and the approval itself (`agent::react`).

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;
use toml::Spanned;

use super::validate::new_name;
use super::{Config, ConfigError, Locator};

/// One MCP server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpConfig {
    pub(crate) name: Spanned<String>,
    pub(crate) transport: Spanned<McpTransport>,
    /// stdio: the program and its arguments.
    pub(crate) command: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    /// stdio: the server's environment, from the bastion's. A list passes
    /// the named variables as they are; a table sets each variable to a
    /// text in which `${VAR}` is the bastion's variable (nothing else of
    /// the bastion's environment reaches the server but PATH, HOME and
    /// the locale).
    #[serde(default)]
    pub(crate) env: Option<Spanned<EnvSpec>>,
    /// http: the streamable-HTTP endpoint.
    pub(crate) url: Option<Spanned<String>>,
    /// http: headers sent with every request, their values with `${VAR}`
    /// taken from the bastion's environment (a token stays out of the file).
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, Spanned<String>>,
    /// How long starting, listing or one call may take.
    #[serde(default = "default_timeout")]
    pub(crate) timeout_s: Spanned<u64>,
    /// One connection (for stdio, one process) per session, the default,
    /// so nothing of one user's calls is in another's server; or one the
    /// bastion shares.
    pub(crate) scope: Option<McpScope>,
    /// The bastion users whose agents may use it (globs); default: every
    /// user whose `ai` is on.
    pub(crate) users: Option<Vec<Spanned<String>>>,
    /// When a call is asked about: one rule for the server, or a table of
    /// tool globs (`"*"` for the rest).
    #[serde(default)]
    pub(crate) approve: Option<Spanned<ApproveSpec>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum McpTransport {
    Stdio,
    Http,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum McpScope {
    Session,
    Bastion,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum EnvSpec {
    Names(Vec<String>),
    Values(BTreeMap<String, String>),
}

/// When an MCP call needs the user's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Approve {
    /// Every call is asked about (the default).
    Always,
    /// In `auto`, calls of tools that declare `readOnlyHint` run unasked.
    ReadOnly,
    /// In `auto`, calls run unasked (`confirm` still asks).
    Never,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum ApproveSpec {
    One(Approve),
    PerTool(BTreeMap<String, Approve>),
}

fn default_timeout() -> Spanned<u64> {
    Spanned::new(0..0, 30)
}

impl McpConfig {
    pub(crate) fn scope(&self) -> McpScope {
        self.scope.unwrap_or(McpScope::Session)
    }

    /// Whether `user`'s agents may use this server.
    pub(crate) fn serves(&self, user: &str) -> bool {
        self.users.as_ref().is_none_or(|list| {
            list.iter()
                .any(|p| glob::Pattern::new(p.get_ref()).is_ok_and(|g| g.matches(user)))
        })
    }

    /// The rule for `tool`: its own entry, else the longest glob that
    /// matches it, else `"*"`, else `always`.
    pub(crate) fn approve(&self, tool: &str) -> Approve {
        match self.approve.as_ref().map(Spanned::get_ref) {
            None => Approve::Always,
            Some(ApproveSpec::One(a)) => *a,
            Some(ApproveSpec::PerTool(table)) => table
                .get(tool)
                .copied()
                .or_else(|| {
                    table
                        .iter()
                        .filter(|(p, _)| glob::Pattern::new(p).is_ok_and(|g| g.matches(tool)))
                        // The longest glob; of two as long, the stricter.
                        .max_by_key(|(p, a)| (p.len(), strictness(**a)))
                        .map(|(_, a)| *a)
                })
                .unwrap_or(Approve::Always),
        }
    }
}

/// How much a rule asks: ties between globs go to the one that asks more.
fn strictness(a: Approve) -> u8 {
    match a {
        Approve::Never => 0,
        Approve::ReadOnly => 1,
        Approve::Always => 2,
    }
}

/// An agent's `mcp:SERVER/TOOL`, split; None for another tool.
pub(crate) fn mcp_tool(entry: &str) -> Option<(&str, &str)> {
    entry.strip_prefix("mcp:")?.split_once('/')
}

impl Config {
    /// Names unique, each transport with its own keys, patterns that
    /// compile, and agents' `mcp:` tools naming configured servers.
    pub(super) fn validate_mcp(&self, loc: &Locator) -> Result<(), ConfigError> {
        let mut names = HashSet::new();
        for m in &self.mcp {
            new_name(loc, &mut names, &m.name, "mcp.name", "MCP server")?;
            let name = m.name.get_ref();
            let span = m.transport.span();
            match m.transport.get_ref() {
                McpTransport::Stdio => {
                    if m.command.is_none() {
                        let why = format!("MCP server `{name}`: stdio needs a `command`");
                        return Err(loc.error(span, Some("mcp.command"), &why));
                    }
                    if let Some(url) = &m.url {
                        let why = format!("MCP server `{name}`: `url` is for http only");
                        return Err(loc.error(url.span(), Some("mcp.url"), &why));
                    }
                }
                McpTransport::Http => {
                    let Some(url) = &m.url else {
                        let why = format!("MCP server `{name}`: http needs a `url`");
                        return Err(loc.error(span, Some("mcp.url"), &why));
                    };
                    let u = url.get_ref();
                    if !(u.starts_with("http://") || u.starts_with("https://")) {
                        let why = format!("`{u}` is not an http:// or https:// URL");
                        return Err(loc.error(url.span(), Some("mcp.url"), &why));
                    }
                    if let Some(c) = &m.command {
                        let why = format!("MCP server `{name}`: `command` is for stdio only");
                        return Err(loc.error(c.span(), Some("mcp.command"), &why));
                    }
                }
            }
            for u in m.users.iter().flatten() {
                if let Err(e) = glob::Pattern::new(u.get_ref()) {
                    let why = format!("bad glob `{}`: {e}", u.get_ref());
                    return Err(loc.error(u.span(), Some("mcp.users"), &why));
                }
            }
            if *m.timeout_s.get_ref() == 0 {
                return Err(loc.error(
                    m.timeout_s.span(),
                    Some("mcp.timeout_s"),
                    "must be at least 1",
                ));
            }
            for (header, value) in &m.headers {
                if reqwest_header_ok(header).is_err() || value.get_ref().contains(['\r', '\n']) {
                    let why = format!("header `{header}` is not a valid HTTP header");
                    return Err(loc.error(value.span(), Some("mcp.headers"), &why));
                }
            }
            if let Some(ApproveSpec::PerTool(table)) = m.approve.as_ref().map(Spanned::get_ref) {
                for p in table.keys() {
                    if let Err(e) = glob::Pattern::new(p) {
                        let why = format!("bad tool glob `{p}`: {e}");
                        let span = m.approve.as_ref().map_or(0..0, Spanned::span);
                        return Err(loc.error(span, Some("mcp.approve"), &why));
                    }
                }
            }
        }
        for a in &self.agents {
            for t in a.tools.iter().flatten() {
                let Some(entry) = t.get_ref().strip_prefix("mcp:") else {
                    continue;
                };
                let why = match entry.split_once('/') {
                    None => Some(format!(
                        "`{}`: write MCP tools as mcp:SERVER/TOOL (globs allowed)",
                        t.get_ref()
                    )),
                    Some((server, tool)) => {
                        match (glob::Pattern::new(server), glob::Pattern::new(tool)) {
                            (Err(e), _) | (_, Err(e)) => {
                                Some(format!("`{}`: bad glob: {e}", t.get_ref()))
                            }
                            (Ok(s), Ok(_))
                                if !self.mcp.iter().any(|m| s.matches(m.name.get_ref())) =>
                            {
                                Some(format!(
                                    "`{}`: unknown MCP server `{server}` (servers: {})",
                                    t.get_ref(),
                                    self.mcp
                                        .iter()
                                        .map(|m| m.name.get_ref().as_str())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ))
                            }
                            _ => None,
                        }
                    }
                };
                if let Some(why) = why {
                    return Err(loc.error(t.span(), Some("agents.tools"), &why));
                }
            }
        }
        Ok(())
    }
}

/// A header name is a token (RFC 9110).
fn reqwest_header_ok(name: &str) -> Result<(), ()> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    match !name.is_empty() && name.chars().all(token) {
        true => Ok(()),
        false => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "walissh.toml", false)
    }

    const FILES: &str = "[[mcp]]\nname = \"files\"\ntransport = \"stdio\"\ncommand = \"npx\"\nargs = [\"-y\", \"x\"]\n";

    #[test]
    fn a_server_and_an_agent_that_uses_it() {
        let text = format!(
            "{FILES}approve = {{ \"*\" = \"read_only\", \"write_*\" = \"always\", \"list_allowed_directories\" = \"never\" }}\n\n\
             [[agents]]\nname = \"a\"\ninstruction = \"x\"\ntools = [\"run_command\", \"mcp:files/*\"]\n"
        );
        let c = parse(&text).unwrap();
        let m = &c.mcp[0];
        assert_eq!(m.scope(), McpScope::Session);
        assert_eq!(m.approve("read_text_file"), Approve::ReadOnly);
        assert_eq!(m.approve("write_file"), Approve::Always);
        assert_eq!(m.approve("list_allowed_directories"), Approve::Never);
        assert_eq!(mcp_tool("mcp:files/*"), Some(("files", "*")));
        assert!(m.serves("anyone"));
        // Two globs as long: the stricter rule wins, whatever their order.
        let tie = parse(&format!(
            "{FILES}approve = {{ \"a*\" = \"never\", \"*b\" = \"always\" }}\n"
        ))
        .unwrap();
        assert_eq!(tie.mcp[0].approve("ab"), Approve::Always);
        let only = parse(&format!("{FILES}users = [\"ops-*\", \"alice\"]\n")).unwrap();
        assert!(only.mcp[0].serves("ops-bob") && only.mcp[0].serves("alice"));
        assert!(!only.mcp[0].serves("mallory"));
    }

    #[test]
    fn errors_name_the_line_and_key() {
        let e = parse("[[mcp]]\nname = \"x\"\ntransport = \"stdio\"\n").unwrap_err();
        assert!(
            e.to_string().contains("walissh.toml:3:") && e.to_string().contains("mcp.command"),
            "{e}"
        );
        let e =
            parse("[[mcp]]\nname = \"x\"\ntransport = \"http\"\nurl = \"ftp://h\"\n").unwrap_err();
        assert!(e.to_string().contains("mcp.url"), "{e}");
        let agent = |tool: &str| {
            format!(
                "{FILES}\n[[agents]]\nname = \"a\"\ninstruction = \"x\"\ntools = [\"{tool}\"]\n"
            )
        };
        let e = parse(&agent("mcp:grafana/*")).unwrap_err();
        assert!(
            e.to_string().contains("unknown MCP server `grafana`"),
            "{e}"
        );
        assert!(e.to_string().contains("walissh.toml:10:"), "{e}");
        let e = parse(&agent("mcp:files")).unwrap_err();
        assert!(e.to_string().contains("mcp:SERVER/TOOL"), "{e}");
        let e = parse(&agent("mcp:files/[")).unwrap_err();
        assert!(e.to_string().contains("bad glob"), "{e}");
        let e = parse(&format!("{FILES}approve = \"sometimes\"\n")).unwrap_err();
        assert!(e.to_string().contains("approve"), "{e}");
        let e = parse(&format!("{FILES}{}", FILES.replace("stdio", "http"))).unwrap_err();
        assert!(
            e.to_string().contains("defined twice") || e.to_string().contains("mcp"),
            "{e}"
        );
    }
}
