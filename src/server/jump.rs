//! The inspecting jump: `ssh -J alice@bastion root@web1`. The client opens
//! a `direct-tcpip` channel to `web1:22`; walissh answers it itself, with
//! an SSH server inside the channel (the same handler), that presents a
//! host certificate for the target's names signed by walissh's host CA
//! (`walissh pubkey --host-ca` prints the line for known_hosts). The inner
//! login needs no second credential: it is bound to the outer
//! connection's user, and its name is the account on the target, when
//! the user may use it. What happens inside is an ordinary session
//! (recording, commands, `?`, the policy, the audit), with `via = "jump"`
//! on its start.
//!
//! What it owns: which channel opens are jumps, the host CA and the
//! certificates, and the inner login's rules. What it leaves to others:
//! the server (`server`), the session (`session`).

use std::time::Duration;

use russh::keys::ssh_key::certificate::{Builder, CertType};
use russh::keys::{Certificate, PrivateKey};

use crate::config::{Config, JumpMode, TargetConfig, UserConfig};

/// The port a jump reaches a target's SSH server on.
const SSH_PORT: u32 = 22;
/// How long a host certificate is valid: it is made again for each jump.
const CERT_VALIDITY: Duration = Duration::from_secs(24 * 3600);
/// How far back its validity starts (a client whose clock is a little
/// ahead).
const BACKDATE: Duration = Duration::from_secs(300);

/// A jump the outer connection may make: its target, and the user it is
/// bound to.
pub(crate) struct Jump {
    pub(crate) target: TargetConfig,
}

/// Where a relayed `direct-tcpip` goes, unread: a tunnel target's SSH
/// port, or a local forward the user may open.
pub(crate) struct Relay {
    /// What the client asked for, as the rows name it.
    pub(crate) asked: String,
    /// Where walissh connects.
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The target, for a tunnel.
    pub(crate) target: Option<String>,
    /// `jump` (a tunnel target) or `forward` (`ssh -L`).
    pub(crate) via: &'static str,
}

/// What a `direct-tcpip` open to `host:port` is.
pub(crate) enum Opened {
    /// A jump to a target the user may reach, inspected.
    Jump(Box<Jump>),
    /// A blind relay: a tunnel target, or a forward the user may open.
    Relay(Relay),
    /// A target's name the user may not reach (or that does not exist as
    /// a target at that port): refused as a target is.
    Denied,
    /// Not a target at all: a port forward, refused as before.
    Forward,
}

/// What `host:port`, asked by `user`, opens: a jump to a target's SSH
/// port (inspected, or relayed for `jump = "tunnel"`), else a forward the
/// user's `forward` list allows, else a refusal.
pub(crate) fn classify(config: &Config, user: &UserConfig, host: &str, port: u32) -> Opened {
    let target = config.target_by_host(host);
    if let Some(t) = target
        && port == SSH_PORT
        && user.may_reach(t.name())
    {
        return match t.jump {
            JumpMode::Inspect => Opened::Jump(Box::new(Jump { target: t.clone() })),
            JumpMode::Tunnel => match ssh_address(t) {
                Some((to, to_port)) => Opened::Relay(Relay {
                    asked: format!("{}:{port}", crate::text::prefix(host, MAX_HOST)),
                    host: to,
                    port: to_port,
                    target: Some(t.name().to_string()),
                    via: "jump",
                }),
                None => Opened::Denied,
            },
        };
    }
    // A target's name is decided by the target's rules above and the
    // forwards that name it; never by a glob.
    if let Some(relay) = forward(config, user, host, port) {
        return Opened::Relay(relay);
    }
    match target {
        Some(_) => Opened::Denied,
        None => Opened::Forward,
    }
}

/// Longest host a row names; the rest is cut.
const MAX_HOST: usize = 128;

/// Where a tunnel target's SSH server is.
fn ssh_address(t: &TargetConfig) -> Option<(String, u16)> {
    let host = t.host.as_ref()?.get_ref().clone();
    Some((host, t.port.as_ref().map_or(22, |p| *p.get_ref())))
}

/// The forward of `user`'s `forward` list that allows `host:port`, and
/// where it goes: a target's name is that target's address; any other
/// entry is a glob over the host asked for.
fn forward(config: &Config, user: &UserConfig, host: &str, port: u32) -> Option<Relay> {
    let port16 = u16::try_from(port).ok().filter(|p| *p != 0)?;
    user.forward.iter().find_map(|entry| {
        let (h, p) = entry.get_ref().rsplit_once(':')?;
        if p != "*" && p.parse::<u16>().ok()? != port16 {
            return None;
        }
        let to = match config.target_by_host(h) {
            Some(t)
                if t.name().eq_ignore_ascii_case(host)
                    || t.aliases
                        .iter()
                        .any(|a| a.get_ref().eq_ignore_ascii_case(host)) =>
            {
                t.host.as_ref()?.get_ref().clone()
            }
            Some(_) => return None,
            None if glob::Pattern::new(h).ok()?.matches(host) => host.to_string(),
            None => return None,
        };
        Some(Relay {
            asked: format!("{host}:{port}"),
            host: to,
            port: port16,
            target: None,
            via: "forward",
        })
    })
}

/// The accounts `user` may log in as on `target` through the jump: the
/// target's own `user` (walissh's login there), and `[[users]]
/// target_accounts`.
pub(crate) fn account(target: &TargetConfig, user: &UserConfig, asked: &str) -> Option<String> {
    let own = target.user.as_ref().map(|u| u.get_ref().as_str());
    let allowed = own
        .into_iter()
        .chain(user.target_accounts.iter().map(|a| a.get_ref().as_str()));
    allowed
        .into_iter()
        .find(|a| *a == asked)
        .map(str::to_string)
}

/// The names a target's host certificate holds: its name and aliases.
pub(crate) fn names(target: &TargetConfig) -> Vec<String> {
    std::iter::once(target.name().to_string())
        .chain(target.aliases.iter().map(|a| a.get_ref().clone()))
        .collect()
}

/// A host certificate of `host_key` for `target`'s names, signed by `ca`.
pub(crate) fn host_certificate(
    ca: &PrivateKey,
    host_key: &PrivateKey,
    target: &TargetConfig,
) -> Result<Certificate, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?;
    let after = (now - BACKDATE).as_secs();
    let before = (now + CERT_VALIDITY).as_secs();
    let nonce: [u8; 32] = rand::random();
    let failed = |e: &dyn std::fmt::Display| format!("cannot make a host certificate: {e}");
    let mut builder = Builder::new(
        nonce.to_vec(),
        host_key.public_key().key_data().clone(),
        after,
        before,
    )
    .map_err(|e| failed(&e))?;
    builder
        .serial(rand::random())
        .and_then(|b| b.cert_type(CertType::Host))
        .and_then(|b| b.key_id(format!("walissh-jump:{}", target.name())))
        .map_err(|e| failed(&e))?;
    for name in names(target) {
        builder.valid_principal(name).map_err(|e| failed(&e))?;
    }
    builder.sign(ca).map_err(|e| failed(&e))
}

/// The line users put in known_hosts: walissh's host CA for every
/// target's names.
pub(crate) fn known_hosts_line(config: &Config, ca: &PrivateKey) -> String {
    let names: Vec<String> = config.targets.iter().flat_map(names).collect();
    let key = crate::keys::public_line(ca, "walissh-host-ca");
    format!("@cert-authority {} {key}", names.join(","))
}
