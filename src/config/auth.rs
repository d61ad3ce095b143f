//! The `[auth]` section and the per-user keys that go with it (`mfa`,
//! `principals`, `auth`): which methods are offered, which certificate
//! authorities walissh trusts for users, and which keys are revoked.
//!
//! This module only parses and checks the config. Reading the CA keys and
//! the revocation list, and deciding a login, is `auth`'s.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

/// An SSH authentication method walissh can offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Method {
    Publickey,
    Password,
    /// A password (and a second factor's code) asked at prompts.
    KeyboardInteractive,
}

impl Method {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Method::Publickey => "publickey",
            Method::Password => "password",
            Method::KeyboardInteractive => "keyboard-interactive",
        }
    }
}

/// A second factor a user must give after the first.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Mfa {
    #[default]
    None,
    /// A time-based one-time code (RFC 6238), at a keyboard-interactive
    /// prompt.
    Totp,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuthConfig {
    /// The methods offered to clients. A user's `auth` narrows them.
    #[serde(default = "default_methods")]
    pub(crate) methods: Vec<Spanned<Method>>,
    /// CA public keys whose user certificates are accepted: key lines, or
    /// files of key lines (as sshd's `TrustedUserCAKeys`).
    #[serde(default)]
    pub(crate) user_ca_keys: Option<Spanned<super::OneOrMany>>,
    /// Revoked keys and certificates: an OpenSSH KRL or a file of public
    /// keys (as sshd's `RevokedKeys`).
    #[serde(default)]
    pub(crate) revoked_keys: Option<Spanned<PathBuf>>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            methods: default_methods(),
            user_ca_keys: None,
            revoked_keys: None,
        }
    }
}

fn default_methods() -> Vec<Spanned<Method>> {
    [
        Method::Publickey,
        Method::Password,
        Method::KeyboardInteractive,
    ]
    .into_iter()
    .map(|m| Spanned::new(0..0, m))
    .collect()
}

impl AuthConfig {
    /// Whether `method` is offered at all.
    pub(crate) fn offers(&self, method: Method) -> bool {
        self.methods.iter().any(|m| *m.get_ref() == method)
    }

    /// Whether user certificates are accepted.
    pub(crate) fn takes_certificates(&self) -> bool {
        self.user_ca_keys
            .as_ref()
            .is_some_and(|k| !k.get_ref().list().is_empty())
    }
}

impl super::UserConfig {
    /// Whether this user may log in with `method`: offered by `[auth]
    /// methods` and, when the user has `auth`, listed there.
    pub(crate) fn may_use(&self, auth: &AuthConfig, method: Method) -> bool {
        auth.offers(method)
            && self
                .auth
                .as_ref()
                .is_none_or(|list| list.iter().any(|m| *m.get_ref() == method))
    }

    /// Whether a certificate for `principals` names this user: one of the
    /// user's `principals`, or, when there are none, the user's name.
    pub(crate) fn matches_principal(&self, principals: &[String]) -> bool {
        match self.principals.is_empty() {
            true => principals.iter().any(|p| p == self.name()),
            false => self
                .principals
                .iter()
                .any(|mine| principals.iter().any(|p| p == mine.get_ref())),
        }
    }
}

impl super::Config {
    /// Checks `[auth]` and the users' `mfa`, `principals` and `auth`.
    pub(super) fn validate_auth(&self, loc: &super::Locator) -> Result<(), super::ConfigError> {
        let auth = &self.auth;
        if auth.methods.is_empty() {
            return Err(loc.error(0..0, Some("auth.methods"), "no method is offered"));
        }
        if let Some(keys) = &auth.user_ca_keys {
            for k in keys.get_ref().list() {
                if k.trim().is_empty() {
                    return Err(loc.error(keys.span(), Some("auth.user_ca_keys"), "empty entry"));
                }
            }
        }
        for u in &self.users {
            if let Some(list) = &u.auth {
                if let Some(m) = list.iter().find(|m| !auth.offers(*m.get_ref())) {
                    let msg = format!("`{}` is not among [auth] methods", m.get_ref().name());
                    return Err(loc.error(m.span(), Some("users.auth"), &msg));
                }
                if list.is_empty() {
                    return Err(loc.error(u.name.span(), Some("users.auth"), "empty list"));
                }
            }
            for p in &u.principals {
                if p.get_ref().is_empty() || p.get_ref().contains(',') {
                    let msg = "a principal is a non-empty name without commas";
                    return Err(loc.error(p.span(), Some("users.principals"), msg));
                }
            }
            if u.mfa == Mfa::Totp && !auth.offers(Method::KeyboardInteractive) {
                let msg = "mfa = \"totp\" needs keyboard-interactive among [auth] methods";
                return Err(loc.error(u.name.span(), Some("users.mfa"), msg));
            }
        }
        Ok(())
    }
}
