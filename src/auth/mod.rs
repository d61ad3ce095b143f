//! Who may log in, and with what: the trust walissh places in certificate
//! authorities and revocation lists (`Trust`), the factors a login needs
//! (`Need`), and each check: certificates (`cert`), one-time codes
//! (`totp`), revocation lists (`krl`).
//!
//! The russh handler (`server::login`) drives the SSH exchange and keeps
//! each connection's progress; this module decides, and owns no connection
//! state. Passwords are `password`'s and the throttle is `throttle`'s.

pub(crate) mod cert;
pub(crate) mod krl;
pub(crate) mod totp;

use std::path::Path;

use russh::keys::ssh_key::{Certificate, Fingerprint, HashAlg};
use russh::keys::{PublicKey, ssh_key::public::KeyData};

use crate::config::{Config, ConfigError, Method, Mfa, UserConfig};

/// The CAs whose user certificates walissh accepts, and what is revoked
/// (`[auth] user_ca_keys`, `revoked_keys`). Read at start and at each
/// reload, with the config it comes from.
#[derive(Default)]
pub(crate) struct Trust {
    cas: Vec<KeyData>,
    fingerprints: Vec<Fingerprint>,
    revoked: Option<krl::Revoked>,
}

impl Trust {
    /// Reads the CA keys and the revocation list `config` names. Blocking.
    pub(crate) fn load(config: &Config) -> Result<Trust, ConfigError> {
        let auth = &config.auth;
        let mut trust = Trust::default();
        if let Some(keys) = &auth.user_ca_keys {
            let at = |msg: String| config.error_at(Some(keys.span()), "auth.user_ca_keys", &msg);
            for entry in keys.get_ref().list() {
                for key in ca_keys(entry).map_err(at)? {
                    trust.fingerprints.push(key.fingerprint(HashAlg::Sha256));
                    trust.cas.push(key);
                }
            }
        }
        if let Some(path) = &auth.revoked_keys {
            let at = |msg: String| config.error_at(Some(path.span()), "auth.revoked_keys", &msg);
            let p = path.get_ref();
            let data = std::fs::read(p).map_err(|e| at(format!("{}: {e}", p.display())))?;
            let list =
                krl::Revoked::parse(&data).map_err(|e| at(format!("{}: {e}", p.display())))?;
            trust.revoked = Some(list);
        }
        Ok(trust)
    }

    pub(crate) fn knows_ca(&self, cert: &Certificate) -> bool {
        self.cas.iter().any(|k| k == cert.signature_key())
    }

    pub(crate) fn ca_fingerprints(&self) -> &[Fingerprint] {
        &self.fingerprints
    }

    /// Whether a certificate, its key or its CA is revoked.
    pub(crate) fn revoked(&self, cert: &Certificate) -> bool {
        self.revoked.as_ref().is_some_and(|r| r.cert_revoked(cert))
    }

    /// Whether a plain key is revoked: `revoked_keys` holds for
    /// `authorized_keys` too, as sshd's `RevokedKeys` does.
    pub(crate) fn key_revoked(&self, key: &PublicKey) -> bool {
        self.revoked
            .as_ref()
            .is_some_and(|r| r.key_revoked(key.key_data()))
    }
}

/// One `user_ca_keys` entry: a key line, or a file of key lines.
fn ca_keys(entry: &str) -> Result<Vec<KeyData>, String> {
    if let Ok(key) = crate::keys::parse_authorized_key(entry) {
        return Ok(vec![key.key_data().clone()]);
    }
    let path = Path::new(entry);
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("`{entry}` is neither a public key nor a readable file: {e}"))?;
    let mut keys = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = crate::keys::parse_authorized_key(line)
            .map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        keys.push(key.key_data().clone());
    }
    if keys.is_empty() {
        return Err(format!("{}: no CA key in it", path.display()));
    }
    Ok(keys)
}

/// What a login still needs once its first factor (a password, a key or
/// a certificate) is good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    Nothing,
    Totp,
}

/// What `user` needs after the first factor.
pub(crate) fn after_first(user: &UserConfig) -> Need {
    match user.mfa {
        Mfa::None => Need::Nothing,
        Mfa::Totp => Need::Totp,
    }
}

/// Whether `user` (or, for an unknown name, anyone) may give a first
/// factor by `method`. Unknown users are answered as if they might, so
/// the answer does not tell which names exist.
pub(crate) fn may_start_with(config: &Config, user: Option<&UserConfig>, method: Method) -> bool {
    match user {
        Some(u) => u.may_use(&config.auth, method),
        None => config.auth.offers(method),
    }
}

/// The SSH method set for a list of methods.
pub(crate) fn method_set(methods: impl IntoIterator<Item = Method>) -> russh::MethodSet {
    let kinds: Vec<russh::MethodKind> = methods
        .into_iter()
        .map(|m| match m {
            Method::Publickey => russh::MethodKind::PublicKey,
            Method::Password => russh::MethodKind::Password,
            Method::KeyboardInteractive => russh::MethodKind::KeyboardInteractive,
        })
        .collect();
    russh::MethodSet::from(&kinds[..])
}
