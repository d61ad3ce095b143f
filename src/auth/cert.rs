//! User certificates (OpenSSH's PROTOCOL.certkeys): whether one lets its
//! holder in as a walissh user, and what it restricts once in.
//!
//! russh has checked that the client holds the certified key. This module
//! checks everything else sshd checks with `TrustedUserCAKeys`: a user
//! certificate, signed by a trusted CA, valid now, not revoked, naming
//! the user among its principals, and with only critical options that
//! walissh understands and honours (`source-address`, `force-command`).
//! The session applies what the certificate restricts (`CertLimits`).

use std::net::IpAddr;

use russh::keys::ssh_key::certificate::CertType;
use russh::keys::ssh_key::{Algorithm, Certificate, HashAlg};

use super::Trust;
use crate::config::UserConfig;

/// What a session may do under the certificate it logged in with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CertLimits {
    /// `force-command`: whatever the client asks, this runs (exec, on the
    /// target), as sshd does.
    pub(crate) force_command: Option<String>,
    /// The certificate lacks `permit-pty`.
    pub(crate) no_pty: bool,
    /// The certificate lacks `permit-agent-forwarding`.
    pub(crate) no_agent: bool,
    /// The certificate lacks `permit-port-forwarding`: no relay (a tunnel
    /// target's jump, `ssh -L`).
    pub(crate) no_forward: bool,
}

/// A certificate that lets its holder in: what the audit records.
#[derive(Debug, Clone)]
pub(crate) struct Accepted {
    pub(crate) key_id: String,
    pub(crate) serial: u64,
    /// The signing CA's SHA-256 fingerprint.
    pub(crate) ca: String,
    pub(crate) limits: CertLimits,
}

/// Why a certificate does not let its holder in (an audit `reason`).
pub(crate) type Refusal = &'static str;

/// Checks `cert` for a login as `user` from `peer` at `now` (seconds since
/// the epoch).
pub(crate) fn check(
    trust: &Trust,
    cert: &Certificate,
    user: &UserConfig,
    peer: IpAddr,
    now: u64,
) -> Result<Accepted, Refusal> {
    if cert.cert_type() != CertType::User {
        return Err("not_a_user_certificate");
    }
    if !trust.knows_ca(cert) {
        return Err("unknown_ca");
    }
    if now < cert.valid_after() {
        return Err("certificate_not_yet_valid");
    }
    if now >= cert.valid_before() {
        return Err("certificate_expired");
    }
    // RSA with SHA-1 is forgeable at a price: refused, as sshd's default
    // CASignatureAlgorithms has since OpenSSH 8.2.
    if cert.signature().algorithm() == (Algorithm::Rsa { hash: None }) {
        return Err("weak_ca_signature");
    }
    // The signature, the CA and the times again, by the crate's own check.
    if cert.validate_at(now, trust.ca_fingerprints()).is_err() {
        return Err("bad_certificate");
    }
    if trust.revoked(cert) {
        return Err("certificate_revoked");
    }
    // An empty list would mean "any principal": sshd refuses that for
    // TrustedUserCAKeys, and so does walissh.
    if cert.valid_principals().is_empty() {
        return Err("no_principals");
    }
    if !user.matches_principal(cert.valid_principals()) {
        return Err("wrong_principal");
    }
    let limits = critical_options(cert, peer)?;
    Ok(Accepted {
        key_id: cert.key_id().to_string(),
        serial: cert.serial(),
        ca: cert
            .signature_key()
            .fingerprint(HashAlg::Sha256)
            .to_string(),
        limits,
    })
}

/// The critical options, every one understood or the certificate refused
/// (PROTOCOL.certkeys: an unrecognised critical option must refuse it).
fn critical_options(cert: &Certificate, peer: IpAddr) -> Result<CertLimits, Refusal> {
    let mut limits = CertLimits {
        force_command: None,
        no_pty: !cert.extensions().contains_key("permit-pty"),
        no_agent: !cert.extensions().contains_key("permit-agent-forwarding"),
        no_forward: !cert.extensions().contains_key("permit-port-forwarding"),
    };
    for (name, value) in cert.critical_options().iter() {
        match name.as_str() {
            "source-address" => {
                if !source_allowed(value, peer)? {
                    return Err("source_address");
                }
            }
            "force-command" => limits.force_command = Some(value.clone()),
            _ => return Err("unknown_critical_option"),
        }
    }
    Ok(limits)
}

/// Whether `peer` is in a `source-address` list: addresses and CIDR
/// blocks, comma-separated. A malformed list refuses the certificate.
fn source_allowed(list: &str, peer: IpAddr) -> Result<bool, Refusal> {
    let peer = peer.to_canonical();
    let mut allowed = false;
    for entry in list.split(',') {
        let net = match entry.parse::<ipnet::IpNet>() {
            Ok(net) => net,
            Err(_) => entry
                .parse::<IpAddr>()
                .map(ipnet::IpNet::from)
                .map_err(|_| "bad_source_address")?,
        };
        allowed |= net.contains(&peer);
    }
    Ok(allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn source_addresses_are_addresses_and_blocks() {
        assert_eq!(source_allowed("127.0.0.1", ip("127.0.0.1")), Ok(true));
        assert_eq!(
            source_allowed("10.0.0.0/8,127.0.0.0/8", ip("127.0.0.9")),
            Ok(true)
        );
        assert_eq!(source_allowed("10.0.0.0/8", ip("127.0.0.1")), Ok(false));
        // A client on an IPv4-mapped address is its IPv4 address.
        assert_eq!(
            source_allowed("127.0.0.1/32", ip("::ffff:127.0.0.1")),
            Ok(true)
        );
        assert_eq!(source_allowed("::1", ip("::1")), Ok(true));
        for bad in [
            "",
            "10.0.0.0/33",
            "10.0.0.*",
            "host.example",
            "10.0.0.1, 10.0.0.2",
        ] {
            assert_eq!(
                source_allowed(bad, ip("10.0.0.1")),
                Err("bad_source_address"),
                "{bad}"
            );
        }
    }
}
