//! Short-lived certificates for logging in to targets (`[upstream]
//! ca_key`): no static key of walissh's needs to sit in any target's
//! `authorized_keys`.
//!
//! For each upstream login walissh makes a fresh ed25519 key, and signs a
//! user certificate for it with its CA: valid from a minute ago (clock
//! skew) for `cert_validity_s`, for the one principal it logs in as, with
//! the bastion user and the session in the key ID, which sshd logs. The
//! key never leaves memory. Targets trust the CA with `TrustedUserCAKeys`
//! (the line `walissh pubkey --ca` prints).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use russh::keys::ssh_key::Certificate;
use russh::keys::ssh_key::certificate::{Builder, CertType};
use russh::keys::{Algorithm, PrivateKey};

/// How far back a certificate's validity starts: a target whose clock is
/// a little behind must not see it as not yet valid.
const BACKDATE: Duration = Duration::from_secs(60);

/// Who a login is for: what the key ID says.
pub(crate) struct Holder<'a> {
    /// The account on the target (the certificate's one principal).
    pub(crate) principal: &'a str,
    /// The bastion user.
    pub(crate) user: &'a str,
    /// The session id, or `-` for a connection outside a session.
    pub(crate) session: &'a str,
}

/// The key ID: `walissh:USER:SESSION`. sshd logs it with each login
/// (`... ID walissh:alice:5f3a… (serial …) CA …`).
pub(crate) fn key_id(holder: &Holder) -> String {
    format!("walissh:{}:{}", holder.user, holder.session)
}

/// A fresh key and its certificate, signed by `ca`.
pub(crate) fn issue(
    ca: &PrivateKey,
    holder: &Holder,
    validity: Duration,
) -> Result<(PrivateKey, Certificate), String> {
    let failed = |e: &dyn std::fmt::Display| format!("cannot make an upstream certificate: {e}");
    let key = PrivateKey::random(&mut rand::rng(), Algorithm::Ed25519).map_err(|e| failed(&e))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| failed(&e))?;
    let (after, before) = ((now - BACKDATE).as_secs(), (now + validity).as_secs());
    let nonce: [u8; 32] = rand::random();
    let mut builder = Builder::new(
        nonce.to_vec(),
        key.public_key().key_data().clone(),
        after,
        before,
    )
    .map_err(|e| failed(&e))?;
    builder
        .serial(rand::random())
        .and_then(|b| b.cert_type(CertType::User))
        .and_then(|b| b.key_id(key_id(holder)))
        .and_then(|b| b.valid_principal(holder.principal))
        .and_then(|b| b.extension("permit-pty", ""))
        .map_err(|e| failed(&e))?;
    let cert = builder.sign(ca).map_err(|e| failed(&e))?;
    Ok((key, cert))
}

#[cfg(test)]
mod tests {
    use super::*;
    use russh::keys::ssh_key::HashAlg;

    #[test]
    fn a_certificate_is_for_one_principal_and_a_few_minutes() {
        let ca = PrivateKey::random(&mut rand::rng(), Algorithm::Ed25519).unwrap();
        let holder = Holder {
            principal: "deploy",
            user: "alice",
            session: "00ff",
        };
        let (key, cert) = issue(&ca, &holder, Duration::from_secs(300)).unwrap();
        assert_eq!(cert.public_key(), key.public_key().key_data());
        assert_eq!(cert.valid_principals(), ["deploy".to_string()]);
        assert_eq!(cert.key_id(), "walissh:alice:00ff");
        assert_eq!(cert.cert_type(), CertType::User);
        assert_eq!(cert.valid_before() - cert.valid_after(), 360);
        assert!(cert.critical_options().is_empty());
        let ca_fp = ca.public_key().fingerprint(HashAlg::Sha256);
        cert.validate([&ca_fp]).unwrap();
    }
}
