//! `[web]`: the web console's listener (none unless `listen` is set), its
//! TLS, and how long a console login lasts; who may use it is `[[users]]
//! role`. Serving it is `web`'s.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::*;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WebConfig {
    /// address:port of the console; none, no console.
    pub(crate) listen: Option<Spanned<String>>,
    /// The certificate chain (PEM) served, with `tls_key`.
    pub(crate) tls_cert: Option<Spanned<PathBuf>>,
    /// Its private key (PEM).
    pub(crate) tls_key: Option<Spanned<PathBuf>>,
    /// Plain HTTP on an address other than loopback. WARNING: console
    /// passwords and login cookies then cross the network readable by
    /// anyone on the path. Only for a TLS-terminating proxy on this host.
    #[serde(default)]
    pub(crate) insecure_listen: bool,
    /// A console login unused for this long ends (seconds).
    #[serde(default = "default_idle")]
    pub(crate) idle_s: Spanned<u64>,
    /// The environment variable holding the bearer token `/metrics` asks
    /// for; unset, it answers any client.
    pub(crate) metrics_token_env: Option<String>,
}

impl Default for WebConfig {
    fn default() -> WebConfig {
        WebConfig {
            listen: None,
            tls_cert: None,
            tls_key: None,
            insecure_listen: false,
            idle_s: default_idle(),
            metrics_token_env: None,
        }
    }
}

fn default_idle() -> Spanned<u64> {
    Spanned::new(0..0, 30 * 60)
}

/// What a user may do in the web console (`[[users]] role`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    /// No console at all.
    #[default]
    User,
    /// Sees everything, changes nothing.
    Auditor,
    /// May also stop sessions.
    Admin,
}

/// Who may read `/metrics`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Scrapers {
    /// No `metrics_token_env`: any client that reaches the console.
    Any,
    /// A request with `Authorization: Bearer` and this token.
    Token(String),
    /// `metrics_token_env` names a variable that is missing or empty: none.
    None,
}

impl WebConfig {
    /// Who may read `/metrics`, the token read from its variable now.
    pub(crate) fn scrapers(&self) -> Scrapers {
        let Some(var) = &self.metrics_token_env else {
            return Scrapers::Any;
        };
        match std::env::var(var) {
            Ok(token) if !token.is_empty() => Scrapers::Token(token),
            _ => Scrapers::None,
        }
    }
}

impl Role {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Auditor => "auditor",
            Role::Admin => "admin",
        }
    }
}

impl Config {
    /// The console's address, if it has one (validation has parsed it).
    pub(crate) fn web_addr(&self) -> Option<SocketAddr> {
        self.web.listen.as_ref()?.get_ref().parse().ok()
    }

    pub(super) fn validate_web(&self, loc: &Locator) -> Result<(), ConfigError> {
        let web = &self.web;
        let Some(listen) = &web.listen else {
            return Ok(());
        };
        let addr: SocketAddr = listen.get_ref().parse().map_err(|_| {
            let why = format!("`{}` is not an address:port", listen.get_ref());
            loc.error(listen.span(), Some("web.listen"), &why)
        })?;
        match (&web.tls_cert, &web.tls_key) {
            (Some(_), None) => {
                let cert = web.tls_cert.as_ref().map_or(0..0, Spanned::span);
                return Err(loc.error(cert, Some("web.tls_cert"), "needs tls_key too"));
            }
            (None, Some(key)) => {
                return Err(loc.error(key.span(), Some("web.tls_key"), "needs tls_cert too"));
            }
            _ => {}
        }
        if web.tls_cert.is_none() && !addr.ip().is_loopback() && !web.insecure_listen {
            let why = "plain HTTP only on loopback: set tls_cert and tls_key (or, behind a \
                       TLS proxy on this host, insecure_listen = true)";
            return Err(loc.error(listen.span(), Some("web.listen"), why));
        }
        if *web.idle_s.get_ref() == 0 {
            return Err(loc.error(web.idle_s.span(), Some("web.idle_s"), "must be at least 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const USERS: &str = "[[users]]\nname = \"erin\"\nrole = \"auditor\"\nauthorized_keys = [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHFJf2T8yT8ZmvN4HrDSH2L1Cn2ku0yjWZkBSQ5h6d1N\"]\n\n[[users]]\nname = \"ann\"\nauthorized_keys = [\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHFJf2T8yT8ZmvN4HrDSH2L1Cn2ku0yjWZkBSQ5h6d1N\"]\n";

    fn parse(web: &str) -> Result<Config, String> {
        Config::parse(&format!("{USERS}\n[web]\n{web}"), "w.toml", false).map_err(|e| e.0)
    }

    #[test]
    fn the_console_is_off_unless_it_listens_and_loopback_unless_secured() {
        let c = Config::parse(USERS, "w.toml", false).unwrap();
        assert_eq!(c.web_addr(), None);
        assert_eq!(c.user("erin").unwrap().role, Role::Auditor);
        assert_eq!(c.user("ann").unwrap().role, Role::User);
        let c = parse("listen = \"127.0.0.1:8443\"\n").unwrap();
        assert_eq!(c.web_addr(), Some("127.0.0.1:8443".parse().unwrap()));
        assert_eq!(*c.web.idle_s.get_ref(), 1800);
        assert!(parse("listen = \"[::1]:8443\"\n").is_ok());
        // Anywhere else, plain HTTP is refused, naming the file, line and key.
        let e = parse("listen = \"0.0.0.0:8443\"\n").unwrap_err();
        assert!(
            e.contains("w.toml") && e.contains("web.listen") && e.contains("loopback"),
            "{e}"
        );
        assert!(parse("listen = \"0.0.0.0:8443\"\ninsecure_listen = true\n").is_ok());
        assert!(
            parse("listen = \"0.0.0.0:8443\"\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n").is_ok()
        );
        let e = parse("listen = \"127.0.0.1:8443\"\ntls_cert = \"c.pem\"\n").unwrap_err();
        assert!(e.contains("web.tls_cert") && e.contains("tls_key"), "{e}");
        let e = parse("listen = \"127.0.0.1:8443\"\ntls_key = \"k.pem\"\n").unwrap_err();
        assert!(e.contains("web.tls_key"), "{e}");
        let e = parse("listen = \"localhost\"\n").unwrap_err();
        assert!(
            e.contains("web.listen") && e.contains("address:port"),
            "{e}"
        );
        // /metrics: any scraper without a token variable, none when the
        // variable it names is not set.
        assert_eq!(c.web.scrapers(), Scrapers::Any);
        let c = parse(
            "listen = \"127.0.0.1:8443\"\nmetrics_token_env = \"WALISSH_NO_SUCH_VARIABLE\"\n",
        )
        .unwrap();
        assert_eq!(c.web.scrapers(), Scrapers::None);
        let e = parse("listen = \"127.0.0.1:8443\"\nidle_s = 0\n").unwrap_err();
        assert!(e.contains("web.idle_s"), "{e}");
        let e = Config::parse(
            "[[users]]\nname = \"x\"\nrole = \"root\"\nauthorized_keys = []\n",
            "w.toml",
            false,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("role"), "{e}");
    }
}
