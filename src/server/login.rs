//! Authentication, as the russh handler sees it: each method's callback,
//! and the connection's progress from a first factor (a password, a key,
//! a certificate) to a second (a TOTP code at a keyboard-interactive
//! prompt).
//!
//! The rule that matters: a user who needs a second factor is accepted
//! only by [`Connection::second_factor`], after a code checked against a
//! first factor this connection gave for the very same login name. Every
//! other path ends in a rejection (with partial success when the first
//! factor was good), whatever the client sends in whatever order.
//!
//! What each factor is worth is `auth`'s; the throttle is `throttle`'s.

use crate::audit::Kind;
use std::borrow::Cow;

use russh::keys::PublicKey;
use russh::keys::ssh_key::Certificate;
use russh::server::{Auth, PublicKeyOffer, Response};

use super::{Connection, bounded_name};
use crate::auth::{self, Need, cert, totp};
use crate::bastion::{Bastion, Live};
use crate::config::Method;
use crate::route::Login;
use crate::throttle::Attempt;

const PASSWORD_PROMPT: &str = "Password: ";
const CODE_PROMPT: &str = "Verification code: ";

/// What a connection logged in with.
pub(super) enum Credential {
    /// The password hash it matched.
    Password(String),
    Key(PublicKey),
    Certificate(Box<Certificate>),
}

/// A connection's login, checked again against the config of the moment
/// before each new session.
pub(super) struct Proof {
    credential: Credential,
    /// The method of its first factor.
    method: Method,
    /// Whether it gave a TOTP code too.
    totp: bool,
}

impl crate::session::Credential for Proof {
    /// Whether `user` may still log in so under `live`: a key removed or
    /// revoked, a password changed, a certificate expired, revoked or its
    /// CA no longer trusted, a method taken away, a second factor now
    /// required, or a user gone after a reload stops a live connection (a
    /// ControlMaster) from opening new sessions, and an MCP gateway
    /// session from running its next call.
    fn still_valid(&self, live: &Live, user: &str) -> bool {
        let Some(u) = live.config.user(user) else {
            return false;
        };
        if !u.may_use(&live.config.auth, self.method) {
            return false;
        }
        if auth::after_first(u) == Need::Totp && !self.totp {
            return false;
        }
        match &self.credential {
            Credential::Password(hash) => u
                .password_hash
                .as_ref()
                .is_some_and(|h| h.get_ref() == hash),
            Credential::Key(key) => u.knows(key) && !live.trust.key_revoked(key),
            Credential::Certificate(c) => {
                live.trust.knows_ca(c)
                    && !live.trust.revoked(c)
                    && u.matches_principal(c.valid_principals())
                    && now() < c.valid_before()
            }
        }
    }
}

/// Seconds since the epoch.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A connection's progress through authentication.
#[derive(Default)]
pub(super) struct Progress {
    /// A good first factor of a user who needs a second.
    first: Option<First>,
    /// Where the keyboard-interactive exchange is.
    prompt: Prompt,
}

/// A good first factor, waiting for its second.
struct First {
    /// The login name exactly as the client sent it: the second factor
    /// must come for the same one.
    raw: String,
    login: Login,
    method: Method,
    credential: Credential,
    cert: Option<cert::Accepted>,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Prompt {
    #[default]
    None,
    /// Asked for the password (keyboard-interactive as a first factor).
    Password,
    /// Asked for the code.
    Code,
}

/// What a publickey request signs with.
#[derive(Clone, Copy)]
pub(super) enum Signer<'a> {
    Key(&'a PublicKey),
    Certificate(&'a Certificate),
}

/// Why a login is refused, and how the refusal counts.
struct Refused<'a> {
    method: &'static str,
    reason: &'static str,
    /// A guess (it holds an attempt): counted against the address.
    attempt: Option<Attempt<'a>>,
}

impl Connection {
    /// `none`: refused, with the methods offered now (a reload may have
    /// changed them).
    pub(super) async fn none(&mut self) -> Auth {
        Auth::Reject {
            proceed_with_methods: Some(self.offered()),
            partial_success: false,
        }
    }

    fn offered(&self) -> russh::MethodSet {
        let live = self.bastion.live();
        auth::method_set(live.config.auth.methods.iter().map(|m| *m.get_ref()))
    }

    /// Whether the bastion offers `method` at all. Whether a given user
    /// may use it is decided only after the same work as for anyone (a
    /// password verified), so the answer does not tell which users exist.
    fn offers(&self, method: Method) -> bool {
        self.bastion.live().config.auth.offers(method)
    }

    pub(super) async fn password(&mut self, raw: &str, password: &str) -> Auth {
        let login = Login::parse(raw);
        if !self.offers(Method::Password) {
            return self.refuse(&login, not_allowed("password")).await;
        }
        let bastion = self.bastion.clone();
        match check_password(&bastion, self.peer, &login, Method::Password, password).await {
            Ok(hash) => {
                self.first_factor(
                    raw,
                    login,
                    Method::Password,
                    Credential::Password(hash),
                    None,
                )
                .await
            }
            Err(refused) => self.refuse(&login, refused).await,
        }
    }

    pub(super) async fn publickey_offered(&mut self, raw: &str, offer: PublicKeyOffer<'_>) -> Auth {
        let login = Login::parse(raw);
        let signer = match offer.certificate {
            Some(c) => Signer::Certificate(c),
            None => Signer::Key(offer.public_key),
        };
        match self.check_signer(&login, signer) {
            Ok(_) => Auth::Accept,
            // Clients offer every key they hold; an unknown one is audited
            // but does not count as a guess.
            Err(reason) => self.refuse(&login, offered("publickey", reason)).await,
        }
    }

    /// A signature made with a key or a certificate's key (russh has
    /// verified it): a first factor when the key or certificate is good.
    pub(super) async fn signed(&mut self, raw: &str, signer: Signer<'_>) -> Auth {
        let login = Login::parse(raw);
        let bastion = self.bastion.clone();
        let Some(attempt) = bastion.begin_attempt(self.peer.ip()).await else {
            return self.refuse(&login, locked_out("publickey")).await;
        };
        match self.check_signer(&login, signer) {
            Ok(accepted) => {
                drop(attempt);
                let credential = match signer {
                    Signer::Key(key) => Credential::Key(key.clone()),
                    Signer::Certificate(c) => Credential::Certificate(Box::new(c.clone())),
                };
                self.first_factor(raw, login, Method::Publickey, credential, accepted)
                    .await
            }
            Err(reason) => {
                let refused = Refused {
                    method: "publickey",
                    reason,
                    attempt: Some(attempt),
                };
                self.refuse(&login, refused).await
            }
        }
    }

    /// Checks a key or a certificate; for a certificate, what it lets in.
    fn check_signer(
        &self,
        login: &Login,
        signer: Signer<'_>,
    ) -> Result<Option<cert::Accepted>, &'static str> {
        match signer {
            Signer::Key(key) => self.check_key(login, key).map(|()| None),
            Signer::Certificate(c) => self.check_certificate(login, c).map(Some),
        }
    }

    fn check_key(&self, login: &Login, key: &PublicKey) -> Result<(), &'static str> {
        let live = self.bastion.live();
        let user = live.config.user(&login.user);
        if !auth::may_start_with(&live.config, user, Method::Publickey) {
            return Err("method_not_allowed");
        }
        let known = user.is_some_and(|u| u.knows(key));
        match (known, live.trust.key_revoked(key)) {
            (true, false) => Ok(()),
            (true, true) => Err("key_revoked"),
            (false, _) => Err("unknown_key"),
        }
    }

    fn check_certificate(
        &self,
        login: &Login,
        c: &Certificate,
    ) -> Result<cert::Accepted, &'static str> {
        let live = self.bastion.live();
        let Some(user) = live.config.user(&login.user) else {
            return Err("unknown_user");
        };
        if !user.may_use(&live.config.auth, Method::Publickey) {
            return Err("method_not_allowed");
        }
        cert::check(&live.trust, c, user, self.peer.ip(), now())
    }

    pub(super) async fn keyboard_interactive(
        &mut self,
        raw: &str,
        response: Option<Response<'_>>,
    ) -> Auth {
        let login = Login::parse(raw);
        let Some(mut response) = response else {
            return self.start_prompts(raw, &login).await;
        };
        let answer = response
            .next()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        match std::mem::take(&mut self.progress.prompt) {
            Prompt::Password => self.prompted_password(raw, login, &answer).await,
            Prompt::Code => self.second_factor(raw, &login, &answer).await,
            Prompt::None => {
                self.refuse(&login, not_allowed("keyboard-interactive"))
                    .await
            }
        }
    }

    /// The password typed at the prompt: a first factor, after which a user
    /// who needs a code is asked for it in the same exchange.
    async fn prompted_password(&mut self, raw: &str, login: Login, answer: &str) -> Auth {
        let bastion = self.bastion.clone();
        let method = Method::KeyboardInteractive;
        let hash = match check_password(&bastion, self.peer, &login, method, answer).await {
            Ok(hash) => hash,
            Err(refused) => return self.refuse(&login, refused).await,
        };
        let credential = Credential::Password(hash);
        match self
            .first_factor(raw, login, method, credential, None)
            .await
        {
            Auth::Reject {
                partial_success: true,
                ..
            } => self.ask(Prompt::Code),
            other => other,
        }
    }

    /// A new keyboard-interactive exchange: the code when this login gave
    /// its first factor, else the password as a first factor.
    async fn start_prompts(&mut self, raw: &str, login: &Login) -> Auth {
        if self.progress.first.as_ref().is_some_and(|f| f.raw == raw) {
            return self.ask(Prompt::Code);
        }
        if !self.offers(Method::KeyboardInteractive) {
            return self
                .refuse(login, not_allowed("keyboard-interactive"))
                .await;
        }
        self.ask(Prompt::Password)
    }

    fn ask(&mut self, prompt: Prompt) -> Auth {
        self.progress.prompt = prompt;
        let text = match prompt {
            Prompt::Code => CODE_PROMPT,
            _ => PASSWORD_PROMPT,
        };
        Auth::Partial {
            name: Cow::Borrowed(""),
            instructions: Cow::Borrowed(""),
            prompts: Cow::Owned(vec![(Cow::Borrowed(text), false)]),
        }
    }

    /// A good first factor: in, when the user needs nothing more; else
    /// kept, and the client told to go on with keyboard-interactive.
    async fn first_factor(
        &mut self,
        raw: &str,
        login: Login,
        method: Method,
        credential: Credential,
        cert: Option<cert::Accepted>,
    ) -> Auth {
        let need = self
            .bastion
            .live()
            .config
            .user(&login.user)
            .map(auth::after_first);
        match need {
            Some(Need::Nothing) => {
                let proof = Proof {
                    credential,
                    method,
                    totp: false,
                };
                self.accept(login, proof, cert).await
            }
            // Known users only reach here; an unknown one cannot have a
            // good factor. Refuse rather than assume.
            None => self.refuse(&login, not_allowed(factor(method))).await,
            Some(Need::Totp) => {
                self.progress.first = Some(First {
                    raw: raw.to_string(),
                    login,
                    method,
                    credential,
                    cert,
                });
                Auth::Reject {
                    proceed_with_methods: Some(auth::method_set([Method::KeyboardInteractive])),
                    partial_success: true,
                }
            }
        }
    }

    /// The only way in for a user who needs a second factor: a good,
    /// unused code after a first factor for the same login name.
    async fn second_factor(&mut self, raw: &str, login: &Login, code: &str) -> Auth {
        let method = "keyboard-interactive";
        let first = match self.progress.first.take() {
            Some(f) if f.raw == raw => f,
            other => {
                self.progress.first = other;
                return self.refuse(login, not_allowed(method)).await;
            }
        };
        let bastion = self.bastion.clone();
        let Some(attempt) = bastion.begin_attempt(self.peer.ip()).await else {
            self.progress.first = Some(first);
            return self.refuse_code(login, locked_out(method)).await;
        };
        tokio::time::sleep(bastion.account_wait(&login.user, self.peer.ip()).await).await;
        let (user, code) = (login.user.clone(), code.to_string());
        let store = bastion.totp.clone();
        let now = now();
        let verdict = tokio::task::spawn_blocking(move || store.check(&user, &code, now)).await;
        let reason = match verdict {
            Ok(Ok(totp::CodeVerdict::Good)) => {
                drop(attempt);
                let proof = Proof {
                    credential: first.credential,
                    method: first.method,
                    totp: true,
                };
                return self.accept(first.login, proof, first.cert).await;
            }
            Ok(Ok(totp::CodeVerdict::Wrong)) => "bad_code",
            Ok(Ok(totp::CodeVerdict::Replayed)) => "code_reused",
            Ok(Ok(totp::CodeVerdict::NotEnrolled)) => "totp_not_enrolled",
            Ok(Ok(totp::CodeVerdict::Locked)) => "totp_locked",
            Ok(Err(e)) => {
                tracing::error!(error = %e, "cannot check a TOTP code");
                "totp_unavailable"
            }
            Err(_) => "totp_unavailable",
        };
        bastion.account_failed(&login.user).await;
        self.progress.first = Some(first);
        let refused = Refused {
            method,
            reason,
            attempt: Some(attempt),
        };
        self.refuse_code(login, refused).await
    }

    /// A refused code: the first factor stands, and the client may try
    /// another code (the throttle bounds how many).
    async fn refuse_code(&self, login: &Login, refused: Refused<'_>) -> Auth {
        let _ = self.refuse(login, refused).await;
        Auth::Reject {
            proceed_with_methods: Some(auth::method_set([Method::KeyboardInteractive])),
            partial_success: false,
        }
    }

    async fn accept(&mut self, login: Login, proof: Proof, cert: Option<cert::Accepted>) -> Auth {
        let method = factor(proof.method);
        let max = *self
            .bastion
            .live()
            .config
            .server
            .max_connections_per_user
            .get_ref();
        let Some(slot) = self.bastion.user_connections.take(&login.user, max) else {
            return self.too_many_connections(&login, method, max).await;
        };
        self.user_slot = Some(slot);
        let mut factors = vec![method];
        if proof.totp {
            factors.push("totp");
        }
        self.credential = Some(std::sync::Arc::new(proof));
        self.progress = Progress::default();
        self.bastion.account_ok(&login.user, self.peer.ip());
        let mut ev = self
            .auth_event(Kind::AuthOk, &login.user, method)
            .field("factors", factors);
        if let Some(c) = &cert {
            ev = ev
                .field("key_id", c.key_id.as_str())
                .field("serial", c.serial)
                .field("ca", c.ca.as_str());
            self.limits = c.limits.clone();
        }
        ev.target = login.target.as_deref().map(bounded_name);
        self.bastion.audit.event(ev).await;
        self.login = Some(login);
        self.authenticated
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.pending = None;
        Auth::Accept
    }

    /// The user holds `[server] max_connections_per_user` logged-in
    /// connections already: this login is refused with no method left to
    /// try (the client says "Permission denied"), and audited. It is not
    /// a guess: the credentials were right, and the throttle does not
    /// count it.
    async fn too_many_connections(&self, login: &Login, method: &str, max: u32) -> Auth {
        tracing::warn!(peer = %self.peer, user = ?login.user, max, "login refused: too many connections for this user");
        let mut ev = self
            .auth_event(Kind::ConnectionRefused, &login.user, method)
            .field("reason", "max_connections_per_user")
            .field("limit", max);
        ev.target = login.target.as_deref().map(bounded_name);
        self.bastion.audit.event(ev).await;
        Auth::Reject {
            proceed_with_methods: Some(russh::MethodSet::empty()),
            partial_success: false,
        }
    }

    /// Audits a failure. One that guessed (it holds an attempt) counts
    /// against the address and is answered after the throttle's delay.
    async fn refuse(&self, login: &Login, refused: Refused<'_>) -> Auth {
        let Refused {
            method,
            reason,
            attempt,
        } = refused;
        // A flood is counted, not written row by row: the address's 1st,
        // 2nd, 4th… failure of the minute gets a row with the count.
        let offer = attempt.is_none() && reason != "locked_out";
        // A key a client only offered is no failed login.
        if !offer {
            self.bastion.audit.metrics.login_failed();
        }
        let failure = self.bastion.throttle.failure(self.peer.ip(), offer);
        if let Some(count) = failure.report {
            // For fail2ban and CrowdSec: the address, at the audit's
            // cadence (a flood is a few lines, not one a try). The name
            // is the client's: quoted, so it cannot forge a line.
            tracing::warn!(peer = %self.peer, user = ?login.user, method, reason, count, "login failed");
            let mut ev = self
                .auth_event(Kind::AuthFail, &login.user, method)
                .field("reason", reason)
                .field("count", count);
            ev.target = login.target.as_deref().map(bounded_name);
            self.bastion.audit.event(ev).await;
        }
        let delay = match (attempt, reason) {
            (Some(a), _) => a.failed(),
            (None, "locked_out") => super::LOCKED_OUT_DELAY,
            (None, _) => failure.wait,
        };
        tokio::time::sleep(delay).await;
        Auth::reject()
    }
}

/// Verifies a password (off the runtime), with the throttle.
/// A user who may not use `method` has the password checked against no
/// hash, as an unknown user has: refused after the same work.
async fn check_password<'a>(
    bastion: &'a Bastion,
    peer: std::net::SocketAddr,
    login: &Login,
    method: Method,
    password: &str,
) -> Result<String, Refused<'a>> {
    let name = method.name();
    let Some(attempt) = bastion.begin_attempt(peer.ip()).await else {
        return Err(locked_out(name));
    };
    let live = bastion.live();
    let user = live.config.user(&login.user);
    let allowed = auth::may_start_with(&live.config, user, method);
    let hash = user
        .filter(|_| allowed)
        .and_then(|u| u.password_hash.as_ref())
        .map(|h| h.get_ref().clone());
    // The account's own slow path, for guesses spread over addresses.
    tokio::time::sleep(bastion.account_wait(&login.user, peer.ip()).await).await;
    if bastion
        .passwords
        .verify(password.to_string(), hash.clone())
        .await
    {
        drop(attempt);
        Ok(hash.unwrap_or_default())
    } else {
        bastion.account_failed(&login.user).await;
        Err(Refused {
            method: name,
            reason: if allowed {
                "bad_password"
            } else {
                "method_not_allowed"
            },
            attempt: Some(attempt),
        })
    }
}

/// The factor a method gives, as audit rows name it: a password at a
/// prompt is a password.
fn factor(method: Method) -> &'static str {
    match method {
        Method::Publickey => "publickey",
        Method::Password | Method::KeyboardInteractive => "password",
    }
}

fn locked_out(method: &'static str) -> Refused<'static> {
    Refused {
        method,
        reason: "locked_out",
        attempt: None,
    }
}

fn not_allowed(method: &'static str) -> Refused<'static> {
    offered(method, "method_not_allowed")
}

/// A refusal that is not a guess: an offered key, a method not allowed.
fn offered(method: &'static str, reason: &'static str) -> Refused<'static> {
    Refused {
        method,
        reason,
        attempt: None,
    }
}
