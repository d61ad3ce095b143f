//! The SSH server: accepting connections and the russh handler.
//!
//! The handler is deliberately thin. It authenticates (`login`: the
//! methods' callbacks and a login's progress through its factors, with the
//! throttle, argon2 and the TOTP store off the runtime), refuses what
//! walissh does not allow (port forwarding, X11 forwarding, and agent
//! forwarding for users without `agent_forwarding`), and hands each
//! session channel to a `session` task. Everything a channel carries
//! after that reaches the session through the channel itself.
//!
//! Connections are accepted on the main runtime and each is then run on one
//! of the `workers`, with everything it starts.

use crate::audit::Kind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use russh::server::{
    Auth, ChannelOpenHandle, Msg, PublicKeyOffer, Response, Session, VerifiedPublicKey,
};
use russh::{Channel, ChannelId, MethodSet};
use tokio::net::TcpListener;

use crate::audit::Event;
use crate::bastion::Bastion;
use crate::route::Login;
use crate::session::Credential as _;
use crate::shutdown::{Listener, Watcher};
use crate::throttle::Pending;

pub(crate) mod jump;
mod login;
mod remote;
mod tunnel;

use crate::audit::tally;
use crate::workers::Spread;
use login::Proof;

/// How long a client may stay connected at shutdown once its sessions end.
const LINGER: Duration = Duration::from_secs(2);

/// The answer to an attempt from a locked-out address waits this long.
const LOCKED_OUT_DELAY: Duration = Duration::from_secs(1);

/// Login names longer than this are cut in audit rows.
const MAX_NAME: usize = 128;

/// What walissh says it is: see `russh_config`.
const SERVER_ID: &str = concat!("SSH-2.0-OpenSSH_9.9 walissh_", env!("CARGO_PKG_VERSION"));

/// The russh server settings walissh uses.
pub(crate) fn russh_config(
    host_key: russh::keys::PrivateKey,
    methods: MethodSet,
) -> russh::server::Config {
    russh::server::Config {
        // OpenSSH's client speaks its extensions only to a server whose
        // version says OpenSSH: `eow@openssh.com` among them, without which
        // `ssh bastion cmd | head -1` would not end (the command would run
        // on, unread). walissh speaks the protocol as OpenSSH does; the
        // comment says what it is.
        server_id: russh::SshId::Standard(SERVER_ID.into()),
        methods,
        keys: vec![host_key],
        // Timing is handled by the throttle and by verifying a dummy hash
        // for unknown users, so russh's fixed rejection delay is not needed.
        auth_rejection_time: Duration::ZERO,
        auth_rejection_time_initial: Some(Duration::ZERO),
        // Idle shells are normal on a jump host; dead peers are found by
        // keepalives instead.
        inactivity_timeout: None,
        keepalive_interval: Some(Duration::from_secs(60)),
        keepalive_max: 3,
        nodelay: true,
        // A channel's window is given back as walissh takes its data
        // (vendor/russh), so its queue holds at most a window's bytes; this
        // many messages let that be small packets too (2 KiB for the
        // default 2 MiB window) before a full queue could block the
        // connection.
        channel_buffer_size: 1024,
        preferred: preferred(),
        ..Default::default()
    }
}

/// The algorithms offered: russh's safe defaults less what ssh-audit
/// warns of (`hardening::ssh_audit_finds_nothing_to_warn_of` runs it):
/// MACs only in encrypt-then-MAC mode (AEAD ciphers use none),
/// Diffie-Hellman groups of 3072 bits and up (group 14 is 2048), and
/// compression only delayed until after login (`zlib@openssh.com`; plain
/// `zlib` compresses what an attacker sends before authentication). No
/// group exchange: russh answers a client that asks for a small group
/// with group 14's 2048 bits, and every client has curve25519.
fn preferred() -> russh::Preferred {
    use russh::{compression, kex, mac};
    const KEX: &[kex::Name] = &[
        kex::MLKEM768X25519_SHA256,
        kex::CURVE25519,
        kex::CURVE25519_PRE_RFC_8731,
        kex::DH_G18_SHA512,
        kex::DH_G17_SHA512,
        kex::DH_G16_SHA512,
        kex::DH_G15_SHA512,
        kex::EXTENSION_SUPPORT_AS_SERVER,
        kex::EXTENSION_OPENSSH_STRICT_KEX_AS_SERVER,
    ];
    const MAC: &[mac::Name] = &[mac::HMAC_SHA512_ETM, mac::HMAC_SHA256_ETM];
    const COMPRESSION: &[compression::Name] = &[compression::NONE, compression::ZLIB_LEGACY];
    russh::Preferred {
        kex: KEX.into(),
        mac: MAC.into(),
        compression: COMPRESSION.into(),
        ..Default::default()
    }
}

/// Accepts connections on one listener until shutdown begins.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    bastion: Arc<Bastion>,
    config: Arc<russh::server::Config>,
    mut sessions: Watcher,
    connections: Watcher,
    workers: Spread,
) {
    loop {
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => {
                    bastion.accept_failing.store(false, std::sync::atomic::Ordering::Relaxed);
                    a
                }
                Err(e) => {
                    // Out of file descriptors and the like: keep serving,
                    // and say so in /healthz until an accept works.
                    bastion.accept_failing.store(true, std::sync::atomic::Ordering::Relaxed);
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = sessions.requested() => return,
        };
        let Some(stop) = connections.listener() else {
            return;
        };
        let Some(pending) = bastion.throttle.admit(peer.ip()) else {
            tracing::warn!(%peer, "refused: too many connections from this address that have not logged in");
            continue;
        };
        let authenticated = Arc::new(AtomicBool::new(false));
        let handler = Connection {
            bastion: bastion.clone(),
            peer,
            login: None,
            authenticated: authenticated.clone(),
            pending: Some(pending),
            sessions: sessions.clone(),
            open: Arc::default(),
            credential: None,
            progress: Default::default(),
            limits: Default::default(),
            refusals: Default::default(),
            user_slot: None,
            bound: None,
            account: None,
            jumps: Arc::default(),
            remotes: Default::default(),
        };
        let login_by = tokio::time::Instant::now()
            + Duration::from_secs(bastion.live().config.server.login_grace_s);
        let socket = match socket.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "cannot hand the connection over");
                continue;
            }
        };
        workers.spawn(serve_connection(
            socket,
            handler,
            config.clone(),
            login_by,
            authenticated,
            stop,
        ));
    }
}

/// One client connection, on the worker it was placed on: the SSH
/// handshake within the login grace, then russh's session until it ends or
/// shutdown asks it to.
async fn serve_connection(
    socket: std::net::TcpStream,
    handler: Connection,
    config: Arc<russh::server::Config>,
    login_by: tokio::time::Instant,
    authenticated: Arc<AtomicBool>,
    mut stop: Listener,
) {
    let peer = handler.peer;
    let (bastion, refusals) = (handler.bastion.clone(), handler.refusals.clone());
    // A second handle on the socket, to cut the connection at the login
    // deadline: before key exchange ends, russh sends no disconnect, and
    // its task owns the stream.
    // Without it a silent client could outstay the grace: refuse instead.
    let mut cutter = match socket.try_clone() {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(%peer, error = %e, "refused: cannot hold the connection to its login deadline");
            return;
        }
    };
    // Accepted on the main runtime; registered again on this worker's.
    let socket = match tokio::net::TcpStream::from_std(socket) {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "cannot take the connection over");
            return;
        }
    };
    let setup = tokio::time::timeout_at(
        login_by,
        russh::server::run_stream(config, crate::socket::prepare(socket), handler),
    );
    let running = match setup.await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "connection setup failed");
            return;
        }
        Err(_) => return,
    };
    let handle = running.handle();
    tokio::pin!(running);
    let mut login_checked = false;
    let ended = loop {
        tokio::select! {
            result = &mut running => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                break true;
            }
            _ = tokio::time::sleep_until(login_by), if !login_checked => {
                login_checked = true;
                if !authenticated.load(Ordering::Relaxed) {
                    tracing::info!(%peer, "disconnecting a client that did not log in in time");
                    let _ = handle
                        .disconnect(russh::Disconnect::ByApplication, "login took too long".into(), "".into())
                        .await;
                    if let Some(c) = cutter.take() {
                        let _ = c.shutdown(std::net::Shutdown::Both);
                    }
                }
                // Logged in: the second handle is not needed any more.
                cutter = None;
            }
            _ = stop.requested() => break false,
        }
    };
    // Shutdown. Sessions have told their users and closed their
    // channels, and clients leave once their channels are closed.
    // Only lingering ones are disconnected: OpenSSH drops output it
    // has not printed yet when a disconnect arrives.
    if !ended && tokio::time::timeout(LINGER, &mut running).await.is_err() {
        let _ = handle
            .disconnect(
                russh::Disconnect::ByApplication,
                "walissh is shutting down".into(),
                "".into(),
            )
            .await;
        let _ = tokio::time::timeout(LINGER, running).await;
    }
    refusals.finish(&bastion.audit).await;
}

/// One client connection's handler.
pub(crate) struct Connection {
    bastion: Arc<Bastion>,
    peer: SocketAddr,
    login: Option<Login>,
    /// Set once the client has logged in; the accept loop's login timer
    /// reads it.
    authenticated: Arc<AtomicBool>,
    /// This connection's place among its address's not-yet-logged-in ones.
    pending: Option<Pending>,
    sessions: Watcher,
    /// Its sessions open now (`[server] max_sessions_per_connection`).
    open: Arc<std::sync::atomic::AtomicU32>,
    /// What it logged in with, checked again against the config of the
    /// moment before each new session.
    credential: Option<Arc<Proof>>,
    /// How far it is through authentication.
    progress: login::Progress,
    /// What its certificate restricts (nothing without one).
    limits: crate::auth::cert::CertLimits,
    /// Its refused requests, counted; the accept loop writes the totals
    /// when it ends.
    refusals: tally::Shared,
    /// Its place among its user's connections, once logged in
    /// (`[server] max_connections_per_user`).
    user_slot: Option<crate::bastion::UserSlot>,
    /// An inner connection of a jump: the outer login it is bound to, and
    /// its target. It logs in with no credential of its own.
    bound: Option<Bound>,
    /// The account on the target its sessions log in as, when not the
    /// target's own (a jump's inner login name).
    account: Option<String>,
    /// Its jumps open now (each an SSH server of its own): at most
    /// `[server] max_sessions_per_connection`, as sessions.
    jumps: Arc<std::sync::atomic::AtomicU32>,
    /// Its remote forwards (`ssh -R`), each a login to the target.
    remotes: remote::Remotes,
}

/// What an inner connection of a jump is bound to.
#[derive(Clone)]
struct Bound {
    /// The outer connection: stopping a session through the jump ends it
    /// too.
    outer: russh::server::Handle,
    user: String,
    target: crate::config::TargetConfig,
    credential: Arc<Proof>,
    limits: crate::auth::cert::CertLimits,
}

/// A name from the client (the user or target part of a login name), cut
/// to [`MAX_NAME`] bytes before it is stored.
fn bounded_name(name: &str) -> String {
    crate::text::prefix(name, MAX_NAME).to_string()
}

/// A relay's or remote forward's places: among its connection's jumps
/// and relays, and among its user's sessions.
type RelaySlot = (SessionSlot, crate::bastion::UserSlot);

/// One of a connection's open sessions: given back when dropped.
struct SessionSlot(Arc<std::sync::atomic::AtomicU32>);

impl SessionSlot {
    /// A slot, unless `max` sessions are open already.
    fn take(open: &Arc<std::sync::atomic::AtomicU32>, max: u32) -> Option<SessionSlot> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| SessionSlot(open.clone()))
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Connection {
    fn auth_event(&self, kind: Kind, user: &str, method: &str) -> Event {
        Event::new(kind)
            .user(bounded_name(user))
            .field("method", method)
            .field("client_addr", self.peer.to_string())
    }

    async fn refuse_forward(&self, what: &str, detail: String) {
        let ev = self.forward_row(what, detail);
        self.refused(format!("forward_denied:{what}"), ev).await;
    }

    /// The `forward_denied` row for a refused `what`.
    fn forward_row(&self, what: &str, detail: String) -> Event {
        let login = self.login.clone().unwrap_or(Login {
            user: String::new(),
            target: None,
        });
        let detail = crate::text::head(&detail, tally::DETAIL_MAX).into_owned();
        let mut ev = Event::new(Kind::ForwardDenied)
            .user(login.user)
            .field("forward", what)
            .field("detail", detail)
            .field("client_addr", self.peer.to_string());
        ev.target = login.target;
        ev
    }

    /// Audits a refused request through the connection's tally: a flood
    /// of one kind is a few rows with counts.
    async fn refused(&self, kind: String, ev: Event) {
        self.refusals
            .refused(&self.bastion.audit, kind, ev, 1)
            .await;
    }
}

/// Refuses a channel's open: walissh does not allow it.
async fn prohibit(reply: ChannelOpenHandle) {
    reply
        .reject(russh::ChannelOpenFailure::AdministrativelyProhibited)
        .await;
}

/// The answer to any method but `none` on a jump's inner connection: it
/// is bound to the outer login, and no credential can make it another's.
fn bound_only() -> Auth {
    Auth::Reject {
        proceed_with_methods: Some(MethodSet::empty()),
        partial_success: false,
    }
}

impl Connection {
    /// A place among the connection's jumps and relays, and the cap it was
    /// taken under (`[server] max_sessions_per_connection`), or none.
    fn jump_slot(&self) -> (Option<SessionSlot>, u32) {
        let live = self.bastion.live();
        let max = *live.config.server.max_sessions_per_connection.get_ref();
        (SessionSlot::take(&self.jumps, max), max)
    }

    /// Places for one more relay or remote forward of this login: among
    /// the connection's jumps and relays, and among the user's sessions
    /// (`[server] max_sessions_per_user`); or why not. As for a session,
    /// the credential must still hold, and a certificate must permit port
    /// forwarding.
    fn relay_slot(&self) -> Result<RelaySlot, &'static str> {
        let live = self.bastion.live();
        let login = self.login.as_ref().ok_or("not logged in")?;
        let valid = self
            .credential
            .as_ref()
            .is_some_and(|c| c.still_valid(&live, &login.user));
        if !valid {
            return Err("credentials_revoked");
        }
        if self.limits.no_forward {
            return Err("no_port_forwarding");
        }
        // As for a session under `on_failure = "refuse"`: nothing goes
        // through unaudited.
        let audit = &self.bastion.audit.health;
        if audit.problem().is_some() && audit.policy() == crate::config::OnFailure::Refuse {
            return Err("audit_unavailable");
        }
        let connection = self.jump_slot().0.ok_or("too many at once")?;
        let max_user = *live.config.server.max_sessions_per_user.get_ref();
        let user = self.bastion.user_sessions.take(&login.user, max_user);
        Ok((connection, user.ok_or("max_sessions_per_user")?))
    }

    /// A jump the user may make: accepted, and served, within the cap.
    async fn open_jump(
        &mut self,
        j: jump::Jump,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        outer: russh::server::Handle,
    ) {
        let (slot, max) = self.jump_slot();
        let Some(slot) = slot else {
            let user = self.login.as_ref().map_or("", |l| l.user.as_str());
            let ev = Event::new(Kind::SessionRefused)
                .user(user.to_string())
                .field("client_addr", self.peer.to_string())
                .field("reason", "max_sessions_per_connection")
                .field("limit", max)
                .field("via", "jump");
            self.refused("session_refused:jumps".into(), ev).await;
            prohibit(reply).await;
            return;
        };
        reply.accept().await;
        self.start_jump(j, channel, slot, outer);
    }

    /// A blind relay the user's rules allow: refused when the login's
    /// credential no longer holds, its certificate forbids forwarding, the
    /// cap is reached or the destination cannot be reached; else
    /// connected, accepted and relayed (`tunnel`).
    async fn open_relay(
        &mut self,
        relay: jump::Relay,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
    ) {
        let slot = self
            .relay_slot()
            .and_then(|s| Ok((s, self.login.clone().ok_or("not logged in")?)));
        let (slot, login) = match slot {
            Ok(s) => s,
            Err(why) => {
                self.refuse_forward("direct-tcpip", format!("{} ({why})", relay.asked))
                    .await;
                prohibit(reply).await;
                return;
            }
        };
        // Connected in a task of its own: the connection's other
        // channels go on meanwhile (the open is answered when it is done).
        let cannot = self.forward_row("direct-tcpip", String::new());
        let (audit, refusals) = (self.bastion.audit.clone(), self.refusals.clone());
        let who = (login.user, self.peer.to_string());
        let stop = self.sessions.clone();
        tokio::spawn(async move {
            let socket = match tunnel::connect(&relay).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::info!(to = %relay.asked, error = %e, "relay: cannot connect");
                    let why = format!("{} (cannot connect: {e})", relay.asked);
                    let row = cannot.field("detail", crate::text::head(&why, tally::DETAIL_MAX));
                    refusals
                        .refused(&audit, "forward_denied:direct-tcpip".into(), row, 1)
                        .await;
                    reply.reject(russh::ChannelOpenFailure::ConnectFailed).await;
                    return;
                }
            };
            reply.accept().await;
            tunnel::relay(audit, who, relay, (channel, socket), stop).await;
            drop(slot);
        });
    }

    /// The target a remote forward of this connection's would listen on,
    /// with the account its sessions log in as, and a place among its
    /// jumps and relays; or why not (nothing to add when no target
    /// allows one: refused as every forward was).
    fn remote_target(
        &self,
    ) -> Result<(crate::config::TargetConfig, RelaySlot), Option<&'static str>> {
        let live = self.bastion.live();
        let login = self.login.as_ref().ok_or(None)?;
        let name = login.target.as_deref().ok_or(None)?;
        let user = live.config.user(&login.user).ok_or(None)?;
        let mut target = live
            .config
            .targets
            .iter()
            .find(|t| t.name() == name && t.remote_forward && user.may_reach(t.name()))
            .cloned()
            .ok_or(None)?;
        if let Some(account) = &self.account {
            target.user = Some(toml::Spanned::new(0..0, account.clone()));
        }
        let slot = self.relay_slot().map_err(Some)?;
        Ok((target, slot))
    }

    /// `ssh -R address:port`: asked of the target when it allows it, its
    /// connections relayed back to `client` (`remote`); else refused and
    /// audited. `port` becomes the port the target chose, for 0.
    async fn remote_forward(
        &mut self,
        address: &str,
        port: &mut u32,
        client: russh::server::Handle,
    ) -> bool {
        let asked = format!("{}:{port}", crate::text::prefix(address, 128));
        let allowed = match (
            *port != 0 && self.remotes.holds(address, *port),
            self.remote_target(),
        ) {
            (true, _) => Err(Some("already forwarded")),
            (false, t) => t,
        };
        let ((target, slot), login, credential) =
            match (allowed, self.login.clone(), self.credential.clone()) {
                (Ok(t), Some(l), Some(c)) => (t, l, c),
                (Err(why), ..) => {
                    let detail = why.map_or(asked.clone(), |w| format!("{asked} ({w})"));
                    self.refuse_forward("tcpip-forward", detail).await;
                    return false;
                }
                _ => return false,
            };
        let b = &self.bastion;
        let listening =
            crate::upstream::remote_forward(&target, &b.upstream, &login.user, (address, *port))
                .await;
        let (forward, incoming) = match listening {
            Ok(f) => f,
            Err(e) => {
                tracing::info!(target = %target.name(), error = %e, "remote forward not set up");
                let why = format!("{asked} ({})", crate::text::prefix(&e.to_string(), 200));
                self.refuse_forward("tcpip-forward", why).await;
                return false;
            }
        };
        if *port == 0 {
            *port = forward.port;
        }
        // Two forwards of port 0 may be given one port each; never one
        // port twice.
        if self.remotes.holds(address, *port) {
            self.refuse_forward("tcpip-forward", format!("{asked} (already forwarded)"))
                .await;
            return false;
        }
        let ended = self.remotes.hold(address, *port);
        let serving = remote::Serving {
            bastion: b.clone(),
            credential,
            who: (login.user, self.peer.to_string()),
            target: target.name().to_string(),
            listen: (address.to_string(), *port),
            client,
        };
        let held = remote::Held { forward, slot };
        let stop = self.sessions.clone();
        tokio::spawn(remote::serve(serving, held, incoming, ended, stop));
        true
    }

    /// Serves an SSH server inside `channel`, bound to this connection's
    /// login, for `jump`'s target (see `jump`).
    fn start_jump(
        &self,
        j: jump::Jump,
        channel: Channel<Msg>,
        slot: SessionSlot,
        outer: russh::server::Handle,
    ) {
        let (Some(login), Some(credential)) = (self.login.clone(), self.credential.clone()) else {
            return;
        };
        let b = &self.bastion;
        let certificate = match jump::host_certificate(&b.host_ca, &b.host_key, &j.target) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "no jump: cannot sign the target's host certificate");
                return;
            }
        };
        let methods =
            crate::auth::method_set(b.live().config.auth.methods.iter().map(|m| *m.get_ref()));
        let mut config = russh_config(b.host_key.clone(), methods);
        config.certificates = vec![certificate];
        let inner = Connection {
            bastion: b.clone(),
            peer: self.peer,
            login: None,
            authenticated: Arc::new(AtomicBool::new(false)),
            pending: None,
            sessions: self.sessions.clone(),
            open: self.open.clone(),
            credential: None,
            progress: Default::default(),
            limits: Default::default(),
            refusals: self.refusals.clone(),
            user_slot: None,
            bound: Some(Bound {
                outer,
                user: login.user,
                target: j.target,
                credential,
                limits: self.limits.clone(),
            }),
            account: None,
            // Its relays and forwards count among the outer connection's.
            jumps: self.jumps.clone(),
            remotes: Default::default(),
        };
        let mut stop = self.sessions.clone();
        let authenticated = inner.authenticated.clone();
        let grace = Duration::from_secs(b.live().config.server.login_grace_s);
        tokio::spawn(async move {
            let _slot = slot;
            let stream = channel.into_stream();
            let running = russh::server::run_stream(Arc::new(config), stream, inner);
            let ran = async {
                if let Ok(r) = running.await {
                    let _ = r.await;
                }
            };
            // An inner connection that does not log in in time is ended,
            // as an outer one is: it holds a place among the jumps.
            let late = async {
                tokio::time::sleep(grace).await;
                if authenticated.load(Ordering::Relaxed) {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = ran => {}
                _ = late => {}
                _ = stop.requested() => {}
            }
        });
    }

    /// The inner login of a jump, as `asked` (the account on the target):
    /// the outer login's user, with no credential of its own, as that
    /// account when the user may use it.
    async fn inner_login(&mut self, bound: Bound, asked: &str) -> Auth {
        let live = self.bastion.live();
        let account = live
            .config
            .user(&bound.user)
            .and_then(|u| jump::account(&bound.target, u, asked));
        let Some(account) = account else {
            let ev = Event::new(Kind::TargetDenied)
                .user(bound.user.clone())
                .field(
                    "requested",
                    format!("{}@{}", bounded_name(asked), bound.target.name()),
                )
                .field("via", "jump")
                .field("reason", "account_not_allowed");
            self.refused("target_denied".into(), ev).await;
            return Auth::Reject {
                proceed_with_methods: Some(MethodSet::empty()),
                partial_success: false,
            };
        };
        self.login = Some(Login {
            user: bound.user.clone(),
            target: Some(bound.target.name().to_string()),
        });
        self.account = Some(account);
        self.credential = Some(bound.credential.clone());
        self.limits = bound.limits.clone();
        self.authenticated.store(true, Ordering::Relaxed);
        Auth::Accept
    }
}

impl russh::server::Handler for Connection {
    type Error = russh::Error;

    async fn auth_none(&mut self, user: &str) -> Result<Auth, Self::Error> {
        match self.bound.clone() {
            Some(bound) => Ok(self.inner_login(bound, user).await),
            None => Ok(self.none().await),
        }
    }

    async fn auth_password(&mut self, user: &str, password: &str) -> Result<Auth, Self::Error> {
        if self.bound.is_some() {
            return Ok(bound_only());
        }
        Ok(self.password(user, password).await)
    }

    async fn auth_publickey_offered(
        &mut self,
        user: &str,
        offer: PublicKeyOffer<'_>,
    ) -> Result<Auth, Self::Error> {
        if self.bound.is_some() {
            return Ok(bound_only());
        }
        Ok(self.publickey_offered(user, offer).await)
    }

    async fn auth_publickey(
        &mut self,
        user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        if self.bound.is_some() {
            return Ok(bound_only());
        }
        Ok(self.signed(user, login::Signer::Key(key.public_key)).await)
    }

    async fn auth_openssh_certificate(
        &mut self,
        user: &str,
        certificate: &russh::keys::Certificate,
    ) -> Result<Auth, Self::Error> {
        if self.bound.is_some() {
            return Ok(bound_only());
        }
        Ok(self
            .signed(user, login::Signer::Certificate(certificate))
            .await)
    }

    async fn auth_keyboard_interactive<'a>(
        &'a mut self,
        user: &str,
        _submethods: &str,
        response: Option<Response<'a>>,
    ) -> Result<Auth, Self::Error> {
        if self.bound.is_some() {
            return Ok(bound_only());
        }
        Ok(self.keyboard_interactive(user, response).await)
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        let (Some(login), Some(stop)) = (self.login.clone(), self.sessions.listener()) else {
            prohibit(reply).await;
            return Ok(());
        };
        let live = self.bastion.live();
        let proof = self
            .credential
            .clone()
            .filter(|c| c.still_valid(&live, &login.user));
        let Some(proof) = proof else {
            let ev = Event::new(Kind::SessionRefused)
                .user(login.user.clone())
                .field("client_addr", self.peer.to_string())
                .field("reason", "credentials_revoked");
            self.refused("session_refused:credentials_revoked".into(), ev)
                .await;
            prohibit(reply).await;
            return Ok(());
        };
        let server = &live.config.server;
        let (max, max_user) = (
            *server.max_sessions_per_connection.get_ref(),
            *server.max_sessions_per_user.get_ref(),
        );
        let slots = SessionSlot::take(&self.open, max).ok_or(("max_sessions_per_connection", max));
        let slots = slots.and_then(|slot| {
            let user = self.bastion.user_sessions.take(&login.user, max_user);
            user.map(|u| (slot, u))
                .ok_or(("max_sessions_per_user", max_user))
        });
        let slot = match slots {
            Ok(slot) => slot,
            Err((reason, limit)) => {
                let ev = Event::new(Kind::SessionRefused)
                    .user(login.user.clone())
                    .field("client_addr", self.peer.to_string())
                    .field("reason", reason)
                    .field("limit", limit);
                self.refused(format!("session_refused:{reason}"), ev).await;
                prohibit(reply).await;
                return Ok(());
            }
        };
        reply.accept().await;
        let conn = crate::session::Connection {
            live,
            bastion: self.bastion.clone(),
            login,
            peer: self.peer,
            handle: session.handle(),
            limits: self.limits.clone(),
            refusals: self.refusals.clone(),
            credential: proof,
            account: self.account.clone(),
            via: self.bound.as_ref().map(|_| "jump"),
            outer: self.bound.as_ref().map(|b| b.outer.clone()),
        };
        tokio::spawn(async move {
            crate::session::run(conn, channel, stop).await;
            drop(slot);
        });
        Ok(())
    }

    // The session task reads these requests from its channel; the handler
    // only answers them, so the client is not left waiting.
    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        _cols: u32,
        _rows: u32,
        _pw: u32,
        _ph: u32,
        _modes: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn env_request(
        &mut self,
        channel: ChannelId,
        name: &str,
        value: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        match crate::session::env_acceptable(name, value) {
            true => session.channel_success(channel),
            false => session.channel_failure(channel),
        }
    }

    async fn shell_request(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        _data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        _name: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn x11_request(
        &mut self,
        channel: ChannelId,
        _single: bool,
        _proto: &str,
        _cookie: &str,
        _screen: u32,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.refuse_forward("x11", String::new()).await;
        session.channel_failure(channel)
    }

    async fn agent_request(
        &mut self,
        _channel: ChannelId,
        _session: &mut Session,
    ) -> Result<bool, Self::Error> {
        // The session reads the request from its channel too, and asks
        // the same question before it forwards anything.
        let live = self.bastion.live();
        let user = self.login.as_ref().and_then(|l| live.config.user(&l.user));
        if crate::session::may_forward_agent(user, &self.limits) {
            return Ok(true);
        }
        self.refuse_forward("agent", String::new()).await;
        Ok(false)
    }

    async fn channel_open_direct_tcpip(
        &mut self,
        channel: Channel<Msg>,
        host: &str,
        port: u32,
        _orig: &str,
        _orig_port: u32,
        reply: ChannelOpenHandle,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        let opened = match (&self.login, &self.bound) {
            // No jump from inside a jump.
            (Some(login), None) => {
                let live = self.bastion.live();
                live.config
                    .user(&login.user)
                    .map(|u| jump::classify(&live.config, u, host, port))
            }
            _ => None,
        };
        match opened {
            Some(jump::Opened::Jump(j)) => {
                self.open_jump(*j, channel, reply, session.handle()).await
            }
            Some(jump::Opened::Relay(relay)) => self.open_relay(relay, channel, reply).await,
            Some(jump::Opened::Denied) => {
                let user = self.login.as_ref().map_or("", |l| l.user.as_str());
                let mut ev = Event::new(Kind::TargetDenied)
                    .user(user.to_string())
                    .field("requested", bounded_name(host))
                    .field("via", "jump");
                ev.target = Some(bounded_name(host));
                self.refused("target_denied".into(), ev).await;
                prohibit(reply).await;
            }
            _ => {
                self.refuse_forward("direct-tcpip", format!("{host}:{port}"))
                    .await;
                prohibit(reply).await;
            }
        }
        Ok(())
    }

    async fn channel_open_direct_streamlocal(
        &mut self,
        _channel: Channel<Msg>,
        path: &str,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.refuse_forward("direct-streamlocal", path.to_string())
            .await;
        prohibit(reply).await;
        Ok(())
    }

    async fn tcpip_forward(
        &mut self,
        address: &str,
        port: &mut u32,
        session: &mut Session,
    ) -> Result<bool, Self::Error> {
        Ok(self.remote_forward(address, port, session.handle()).await)
    }

    async fn cancel_tcpip_forward(
        &mut self,
        address: &str,
        port: u32,
        _session: &mut Session,
    ) -> Result<bool, Self::Error> {
        Ok(self.remotes.release(address, port))
    }

    async fn streamlocal_forward(
        &mut self,
        path: &str,
        _session: &mut Session,
    ) -> Result<bool, Self::Error> {
        self.refuse_forward("streamlocal-forward", path.to_string())
            .await;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    /// chacha20-poly1305@openssh.com through OpenSSL (what a client
    /// asking for it gets) seals exactly as the reference implementation
    /// (aws-lc's) does, each opens the other's packets, and a changed
    /// byte is refused: sizes across ChaCha20's 64-byte blocks and
    /// OpenSSL's vector widths, sequence numbers up to the last.
    #[test]
    fn chacha20_poly1305_through_openssl_is_openssh_construction() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // A connection's worth under one key: odd sizes one after another.
        let sizes = [
            0, 1, 5, 12, 15, 16, 63, 64, 65, 255, 256, 1000, 4096, 32_768, 35_000,
        ];
        let key: Vec<u8> = (0..64).map(|_| next() as u8).collect();
        let packets: Vec<Vec<u8>> = (0..200)
            .map(|i| {
                (0..4 + sizes[i % sizes.len()] + i % 7)
                    .map(|_| next() as u8)
                    .collect()
            })
            .collect();
        let stream: Vec<(u32, &[u8])> = (0u32..).zip(packets.iter().map(Vec::as_slice)).collect();
        let key: &[u8; 64] = key.as_slice().try_into().unwrap();
        if let Err(e) = russh::cipher::matches_the_reference_for(key, &stream) {
            panic!("a stream of packets: {e}");
        }
        for payload in sizes {
            for seq in [0, 1, 2, 255, 256, 0x1_0000, u32::MAX - 1, u32::MAX] {
                let key: Vec<u8> = (0..64).map(|_| next() as u8).collect();
                let packet: Vec<u8> = (0..4 + payload).map(|_| next() as u8).collect();
                let key: &[u8; 64] = key.as_slice().try_into().unwrap();
                if let Err(e) = russh::cipher::matches_the_reference(key, seq, &packet) {
                    panic!("{payload} bytes, packet {seq}: {e}");
                }
            }
        }
    }
}
