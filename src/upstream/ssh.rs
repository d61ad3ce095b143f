//! `kind = "ssh"` targets: the bastion's russh client.
//!
//! One upstream connection per session channel, authenticated with the
//! bastion's identity key, a certificate signed for the login (`cert`,
//! with `[upstream] ca_key`) or a password from `password_env`, with the
//! target's host key checked against `[upstream].known_hosts` under the
//! configured policy before anything is sent.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use russh::keys::{PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use russh::{Channel, ChannelMsg, ChannelReadHalf, ChannelWriteHalf, Sig, client};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::known_hosts::{self, Known};
use super::{Command, OpenError, PROBE, Request, TargetEvent, TargetInfo, UpstreamSettings};
use crate::config::{HostKeyPolicy, TargetConfig};
use crate::terminal::Shell;

/// Ciphers for the upstream hop, AES-GCM first.
const UPSTREAM_CIPHERS: &[russh::cipher::Name] = &[
    russh::cipher::AES_256_GCM,
    russh::cipher::CHACHA20_POLY1305,
    russh::cipher::AES_256_CTR,
    russh::cipher::AES_128_CTR,
];

/// The russh client settings walissh dials targets with; `keepalive` is
/// the interval and the count of unanswered ones that end the connection.
pub(crate) fn client_config(keepalive: (Duration, u32)) -> client::Config {
    client::Config {
        preferred: russh::Preferred {
            // AES-GCM runs on the CPU's AES instructions; on the bastion's
            // own hop it is cheaper than ChaCha20 (see bench/throughput).
            cipher: std::borrow::Cow::Borrowed(UPSTREAM_CIPHERS),
            ..Default::default()
        },
        inactivity_timeout: None,
        // A target that stops answering (stopped, cut off) ends its
        // sessions with a message instead of hanging them.
        keepalive_interval: Some(keepalive.0),
        keepalive_max: keepalive.1 as usize,
        // The largest russh allows: the target may then send a transfer in
        // half as many packets, each a wake-up and a copy on the bastion.
        maximum_packet_size: 65535,
        ..Default::default()
    }
}

/// How long the login-shell probe may take before the session goes on
/// without shell integration.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long reaching and logging in to a target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The client handler: checks the target's host key (a refusal's reason
/// is left in `verdict` for the message to the user), notes why the
/// connection was lost, and joins the target's agent channels to the
/// client's when the session forwards the user's agent.
struct HostKeyCheck {
    name: String,
    host: String,
    port: u16,
    known_hosts: PathBuf,
    /// See `upstream::UpstreamSettings::known_hosts_lock`.
    lock: Arc<Mutex<()>>,
    policy: HostKeyPolicy,
    verdict: Arc<Mutex<Option<String>>>,
    /// Why the connection ended, if it did not end cleanly: what the
    /// user is told when their session's channel closes without an exit
    /// status.
    lost: Lost,
    keepalive: (Duration, u32),
    /// The client connection agent channels are bridged to, when the
    /// session forwards the user's agent; otherwise the target's agent
    /// channels are refused.
    agent: Option<russh::server::Handle>,
    /// Where connections to a remote forward's port go, on a remote
    /// forward's connection; otherwise the target's `forwarded-tcpip`
    /// channels are refused (russh's default would accept them).
    forwarded: Option<mpsc::Sender<Forwarded>>,
}

/// What a login may get back from the target: agent channels (bridged
/// to the client's agent) or connections to a remote forward.
#[derive(Default)]
struct Back {
    agent: Option<russh::server::Handle>,
    forwarded: Option<mpsc::Sender<Forwarded>>,
}

/// Refuses a channel the target opened.
async fn prohibit(reply: client::ChannelOpenHandle) {
    reply
        .reject(russh::ChannelOpenFailure::AdministrativelyProhibited)
        .await;
}

/// Why a target's connection was lost; shared by its handler and readers.
type Lost = Arc<Mutex<Option<String>>>;

impl client::Handler for HostKeyCheck {
    type Error = russh::Error;

    async fn disconnected(
        &mut self,
        reason: client::DisconnectReason<Self::Error>,
    ) -> Result<(), Self::Error> {
        let (why, result) = match reason {
            client::DisconnectReason::ReceivedDisconnect(info) => {
                let said = crate::text::prefix(&info.message, 200).to_string();
                (format!("{} disconnected ({said})", self.name), Ok(()))
            }
            client::DisconnectReason::Error(russh::Error::KeepaliveTimeout) => {
                let (every, max) = self.keepalive;
                let silent = every.as_secs() * u64::from(max + 1);
                let why = format!("{} stopped answering (silent for {silent} s)", self.name);
                (why, Err(russh::Error::KeepaliveTimeout))
            }
            client::DisconnectReason::Error(e) => {
                let why = format!("{} closed the session unexpectedly ({e})", self.name);
                (why, Err(e))
            }
        };
        self.lost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(why);
        result
    }

    /// Without forwarding, the target gets no agent channel: russh's
    /// default would accept one that leads nowhere.
    async fn server_channel_open_agent_forward(
        &mut self,
        channel: Channel<client::Msg>,
        reply: client::ChannelOpenHandle,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        match &self.agent {
            Some(handle) => {
                reply.accept().await;
                tokio::spawn(Self::bridge_agent(
                    handle.clone(),
                    channel,
                    self.name.clone(),
                ));
            }
            None => prohibit(reply).await,
        }
        Ok(())
    }

    /// A target opens no session, x11, direct or streamlocal channel to
    /// the bastion: russh's defaults would accept each and leave it open.
    async fn server_channel_open_session(
        &mut self,
        _channel: Channel<client::Msg>,
        reply: client::ChannelOpenHandle,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        prohibit(reply).await;
        Ok(())
    }

    async fn server_channel_open_x11(
        &mut self,
        _channel: Channel<client::Msg>,
        _originator_address: &str,
        _originator_port: u32,
        reply: client::ChannelOpenHandle,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        prohibit(reply).await;
        Ok(())
    }

    async fn server_channel_open_direct_tcpip(
        &mut self,
        _channel: Channel<client::Msg>,
        _host_to_connect: &str,
        _port_to_connect: u32,
        _originator_address: &str,
        _originator_port: u32,
        reply: client::ChannelOpenHandle,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        prohibit(reply).await;
        Ok(())
    }

    async fn server_channel_open_direct_streamlocal(
        &mut self,
        _channel: Channel<client::Msg>,
        _socket_path: &str,
        reply: client::ChannelOpenHandle,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        prohibit(reply).await;
        Ok(())
    }

    async fn server_channel_open_forwarded_streamlocal(
        &mut self,
        _channel: Channel<client::Msg>,
        _socket_path: &str,
        reply: client::ChannelOpenHandle,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        prohibit(reply).await;
        Ok(())
    }

    /// A connection to the remote forward's port on the target: handed
    /// on while the queue has room, refused otherwise (and always when
    /// this connection holds no forward).
    async fn server_channel_open_forwarded_tcpip(
        &mut self,
        channel: Channel<client::Msg>,
        _connected_address: &str,
        _connected_port: u32,
        originator_address: &str,
        originator_port: u32,
        reply: client::ChannelOpenHandle,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        let room = self.forwarded.as_ref().and_then(|tx| tx.try_reserve().ok());
        let Some(room) = room else {
            prohibit(reply).await;
            return Ok(());
        };
        reply.accept().await;
        let originator = crate::text::prefix(originator_address, 64).to_string();
        room.send(Forwarded {
            channel,
            originator: (originator, originator_port),
        });
        Ok(())
    }

    async fn check_server_key(
        &mut self,
        key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = key else {
            self.refuse("presented a certificate, which walissh does not accept from targets");
            return Ok(false);
        };
        let (host, port, path, policy) = (
            self.host.clone(),
            self.port,
            self.known_hosts.clone(),
            self.policy,
        );
        let key = key.clone();
        let lock = self.lock.clone();
        let answer = tokio::task::spawn_blocking(move || {
            // One check at a time: a first key is recorded before the
            // next connection to that host reads the file.
            let _one = lock.lock().unwrap_or_else(|e| e.into_inner());
            check_host_key(&host, port, &key, &path, policy)
        })
        .await
        .unwrap_or_else(|e| Err(format!("host key check failed: {e}")));
        match answer {
            Ok(()) => Ok(true),
            Err(why) => {
                self.refuse(&why);
                Ok(false)
            }
        }
    }
}

impl HostKeyCheck {
    /// One use of the forwarded agent (a signature, a listing): the
    /// target's channel and a new one to the client, joined until either
    /// ends.
    async fn bridge_agent(
        client: russh::server::Handle,
        target: Channel<client::Msg>,
        name: String,
    ) {
        let user_side = match client.channel_open_agent().await {
            Ok(ch) => ch,
            Err(e) => {
                tracing::info!(target = %name, error = %e, "the client refused an agent channel");
                return;
            }
        };
        tracing::info!(target = %name, "agent channel forwarded");
        let (mut a, mut b) = (target.into_stream(), user_side.into_stream());
        let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
    }

    /// Why the key was refused, for `OpenError::HostKey`.
    fn refuse(&self, why: &str) {
        *self.verdict.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.to_string());
    }
}

/// Applies the host key policy. Runs on a blocking thread (file I/O).
fn check_host_key(
    host: &str,
    port: u16,
    key: &PublicKey,
    path: &PathBuf,
    policy: HostKeyPolicy,
) -> Result<(), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot be checked ({}: {e})", path.display())),
    };
    let known = known_hosts::look_up(&text, host, port, key).map_err(|(line, why)| {
        format!(
            "cannot be checked ({}:{line} cannot be read: {why})",
            path.display()
        )
    })?;
    let known = match known {
        Known::Listed => return Ok(()),
        Known::Revoked => return Err("is revoked (@revoked in known_hosts)".into()),
        Known::Other {
            same_algorithm: true,
        } => return Err("changed".into()),
        other => other,
    };
    match policy {
        HostKeyPolicy::Strict => Err("is not known (strict host key policy)".into()),
        HostKeyPolicy::AcceptNew if known != Known::Unknown => {
            // Known with another algorithm only: a new key type for a known
            // host is a change too.
            Err("changed".into())
        }
        HostKeyPolicy::AcceptNew => {
            if let Some(dir) = path.parent() {
                crate::keys::create_private_dir(dir)?;
            }
            russh::keys::known_hosts::learn_known_hosts_path(host, port, key, path)
                .map_err(|e| format!("cannot be recorded ({}: {e})", path.display()))?;
            tracing::info!(host, port, "recorded a new target host key");
            Ok(())
        }
    }
}

pub(crate) struct Reader {
    ch: ChannelReadHalf,
    /// Messages that arrived while waiting for a request's reply.
    pending: VecDeque<ChannelMsg>,
    lost: Lost,
}

pub(crate) struct Writer {
    ch: ChannelWriteHalf<client::Msg>,
    conn: Arc<client::Handle<HostKeyCheck>>,
}

/// Opens more channels on a session's connection: commands the agent runs
/// beside the user's shell.
#[derive(Clone)]
pub(crate) struct Runner {
    conn: Arc<client::Handle<HostKeyCheck>>,
    lost: Lost,
}

/// A command's channel: closed (after a TERM to the command) when this is
/// dropped, so a command given up on (a timeout, Ctrl-C) does not run on.
pub(crate) struct ExecChannel {
    ch: Option<ChannelWriteHalf<client::Msg>>,
}

impl Drop for ExecChannel {
    fn drop(&mut self) {
        if let Some(ch) = self.ch.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                let _ = ch.signal(Sig::TERM).await;
                let _ = ch.close().await;
            });
        }
    }
}

impl Runner {
    /// The target's facts, by the same probe a session's start runs.
    pub(crate) async fn facts(&self) -> Option<TargetInfo> {
        probe(&self.conn).await
    }

    /// Starts `command` on a channel of its own. It gets no input; with
    /// `hold_input` its input is left open (never written) until the
    /// channel is dropped, else it ends at once.
    pub(crate) async fn exec(
        &self,
        command: &str,
        user: &str,
        hold_input: bool,
    ) -> Result<(Reader, ExecChannel), String> {
        let ch = self
            .conn
            .channel_open_session()
            .await
            .map_err(|e| format!("no channel for the command: {e}"))?;
        let (read, write) = ch.split();
        let mut reader = Reader {
            ch: read,
            pending: VecDeque::new(),
            lost: self.lost.clone(),
        };
        start_command(&write, &mut reader, &Request::exec(command, user), false).await?;
        if !hold_input {
            let _ = write.eof().await;
        }
        Ok((reader, ExecChannel { ch: Some(write) }))
    }
}

pub(crate) async fn open(
    target: &TargetConfig,
    settings: &UpstreamSettings,
    req: &Request,
) -> Result<(Reader, Writer, Option<TargetInfo>, Runner), OpenError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, open_inner(target, settings, req)).await {
        Ok(r) => r,
        Err(_) => Err(OpenError::Timeout(target.name().to_string())),
    }
}

/// A connection to the target, logged in, with no channel open yet: what
/// the MCP gateway runs its commands on.
pub(crate) async fn connect(
    target: &TargetConfig,
    settings: &UpstreamSettings,
    user: &str,
    session: &str,
) -> Result<Runner, OpenError> {
    let connected = tokio::time::timeout(
        CONNECT_TIMEOUT,
        login(target, settings, user, session, Back::default()),
    )
    .await;
    let (conn, lost) = connected.map_err(|_| OpenError::Timeout(target.name().to_string()))??;
    Ok(Runner {
        conn: Arc::new(conn),
        lost,
    })
}

async fn open_inner(
    target: &TargetConfig,
    settings: &UpstreamSettings,
    req: &Request,
) -> Result<(Reader, Writer, Option<TargetInfo>, Runner), OpenError> {
    let name = target.name();
    let back = Back {
        agent: req.agent.clone(),
        forwarded: None,
    };
    let (conn, lost) = login(target, settings, &req.user, &req.session, back).await?;
    let info = match req.wants_integration() {
        true => probe(&conn).await,
        false => None,
    };

    let integrated = info
        .as_ref()
        .and_then(|i| i.shell.as_deref())
        .is_some_and(|s| Shell::from_path(s).is_some());
    let ch = conn
        .channel_open_session()
        .await
        .map_err(|e| OpenError::Channel(format!("{name} refused a session channel: {e}")))?;
    let (read, write) = ch.split();
    let mut reader = Reader {
        ch: read,
        pending: VecDeque::new(),
        lost: lost.clone(),
    };
    start_command(&write, &mut reader, req, integrated)
        .await
        .map_err(|e| OpenError::Channel(format!("{name}: {e}")))?;
    let conn = Arc::new(conn);
    let runner = Runner {
        conn: conn.clone(),
        lost,
    };
    Ok((reader, Writer { ch: write, conn }, info, runner))
}

/// Connects to the target and logs in as its configured user, or as
/// `user`: the host key checked against known_hosts (`HostKeyCheck`).
async fn login(
    target: &TargetConfig,
    settings: &UpstreamSettings,
    user: &str,
    session: &str,
    back: Back,
) -> Result<(client::Handle<HostKeyCheck>, Lost), OpenError> {
    let name = target.name();
    let host = target
        .host
        .as_ref()
        .map(|h| h.get_ref().clone())
        .unwrap_or_default();
    let port = target.port();
    let verdict = Arc::new(Mutex::new(None));
    let lost = Lost::default();
    let check = HostKeyCheck {
        name: name.to_string(),
        host: host.clone(),
        port,
        known_hosts: settings.known_hosts.clone(),
        lock: settings.known_hosts_lock.clone(),
        policy: settings.policy,
        verdict: verdict.clone(),
        lost: lost.clone(),
        keepalive: settings.keepalive,
        agent: back.agent,
        forwarded: back.forwarded,
    };
    let config = Arc::new(client_config(settings.keepalive));
    let unreachable = |e: &dyn std::fmt::Display| OpenError::Unreachable {
        name: name.to_string(),
        host: host.clone(),
        port,
        why: e.to_string(),
    };
    let socket = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| unreachable(&e))?;
    let mut conn = match client::connect_stream(config, crate::socket::prepare(socket), check).await
    {
        Ok(c) => c,
        Err(e) => {
            let refused = verdict.lock().unwrap_or_else(|e| e.into_inner()).take();
            return Err(match refused {
                Some(why) => OpenError::HostKey {
                    name: name.to_string(),
                    why,
                },
                None => unreachable(&e),
            });
        }
    };
    let login = target.user.as_ref().map_or(user, |u| u.get_ref().as_str());
    let holder = super::cert::Holder {
        principal: login,
        user,
        session: if session.is_empty() { "-" } else { session },
    };
    authenticate(&mut conn, target, settings, &holder).await?;
    Ok((conn, lost))
}

/// A connection made to a remote forward's port on the target: its
/// channel, and who connected (address and port, as the target says).
pub(crate) struct Forwarded {
    pub(crate) channel: Channel<client::Msg>,
    pub(crate) originator: (String, u32),
}

/// A remote forward (`ssh -R`) the target holds: a login of its own, the
/// forward ending with it, and the port the target listens on.
pub(crate) struct RemoteForward {
    /// Taken when it is dropped, and logged out (a dropped handle alone
    /// would leave the login open).
    conn: Option<client::Handle<HostKeyCheck>>,
    pub(crate) port: u32,
}

/// How long setting a remote forward up may take: the client's
/// connection waits for it (the reply must come from its handler).
const REMOTE_SETUP: Duration = Duration::from_secs(5);

/// How many connections to a remote forward may wait for the client to
/// take them; more are refused.
const FORWARDED_QUEUE: usize = 8;

/// Logs in to `target` as `user` and asks it to listen on
/// `address:port` (0: a port it chooses): the forward, and the
/// connections made to it.
pub(crate) async fn remote_forward(
    target: &TargetConfig,
    settings: &UpstreamSettings,
    user: &str,
    (address, port): (&str, u32),
) -> Result<(RemoteForward, mpsc::Receiver<Forwarded>), OpenError> {
    let (tx, rx) = mpsc::channel(FORWARDED_QUEUE);
    let back = Back {
        agent: None,
        forwarded: Some(tx),
    };
    let asked = async {
        let (conn, _lost) = login(target, settings, user, "-", back).await?;
        let bound = conn.tcpip_forward(address, port).await.map_err(|e| {
            OpenError::Channel(format!("{} refused the remote forward: {e}", target.name()))
        })?;
        Ok::<_, OpenError>((conn, bound))
    };
    let (conn, bound) = tokio::time::timeout(REMOTE_SETUP, asked)
        .await
        .map_err(|_| OpenError::Timeout(target.name().to_string()))??;
    // The target names the port only when it chose it.
    let port = if port == 0 { bound } else { port };
    Ok((
        RemoteForward {
            conn: Some(conn),
            port,
        },
        rx,
    ))
}

impl Drop for RemoteForward {
    fn drop(&mut self) {
        let conn = self.conn.take();
        if let (Some(conn), Ok(rt)) = (conn, tokio::runtime::Handle::try_current()) {
            rt.spawn(end_forward(conn));
        }
    }
}

/// Logs a remote forward's connection out.
async fn end_forward(conn: client::Handle<HostKeyCheck>) {
    let _ = conn
        .disconnect(russh::Disconnect::ByApplication, "", "")
        .await;
}

/// Asks the target about itself (its login shell, OS, kernel, host name,
/// user), on a channel of its own (an exec of `printf`s, so nothing shows
/// in the user's session).
async fn probe(conn: &client::Handle<HostKeyCheck>) -> Option<TargetInfo> {
    let probe = async {
        let mut ch = conn.channel_open_session().await.ok()?;
        ch.exec(true, PROBE).await.ok()?;
        let mut out = Vec::new();
        while let Some(msg) = ch.wait().await {
            match msg {
                ChannelMsg::Data { data } if out.len() < 4096 => out.extend_from_slice(&data),
                ChannelMsg::Close => break,
                _ => {}
            }
        }
        Some(TargetInfo::parse(&String::from_utf8_lossy(&out)))
    };
    tokio::time::timeout(PROBE_TIMEOUT, probe)
        .await
        .ok()
        .flatten()
}

/// Logs in as `holder.principal`: with the target's password when it has
/// `password_env`, else with a certificate when walissh has a CA, else
/// with the bastion's identity key.
async fn authenticate(
    conn: &mut client::Handle<HostKeyCheck>,
    target: &TargetConfig,
    settings: &UpstreamSettings,
    holder: &super::cert::Holder<'_>,
) -> Result<(), OpenError> {
    let name = target.name();
    let login = holder.principal;
    let (method, result) = match (&target.password_env, &settings.ca) {
        (Some(var), _) => {
            let var = var.get_ref();
            let password = std::env::var(var).map_err(|_| {
                OpenError::Login(format!(
                    "{name}: the bastion has no password for it ({var} is not set)"
                ))
            })?;
            (
                "password",
                conn.authenticate_password(login, password).await,
            )
        }
        (None, Some(ca)) => {
            let (key, cert) =
                super::cert::issue(ca, holder, settings.cert_validity).map_err(OpenError::Login)?;
            let result = conn
                .authenticate_openssh_cert(login, Arc::new(key), cert)
                .await;
            ("certificate", result)
        }
        (None, None) => {
            let hash = conn
                .best_supported_rsa_hash()
                .await
                .ok()
                .flatten()
                .flatten();
            let key = PrivateKeyWithHashAlg::new(settings.identity.clone(), hash);
            ("publickey", conn.authenticate_publickey(login, key).await)
        }
    };
    let fix = match method {
        "certificate" => {
            "its sshd needs TrustedUserCAKeys with the line from `walissh pubkey --ca`"
        }
        _ => "its authorized_keys needs the line from `walissh pubkey`",
    };
    match result {
        Ok(r) if r.success() => Ok(()),
        Ok(_) => Err(OpenError::Login(format!(
            "{name} refused the bastion's login as {login} ({method}); {fix}"
        ))),
        Err(e) => Err(OpenError::Login(format!("{name}: login failed: {e}"))),
    }
}

/// Sends pty-req, env and the command, and waits for the command's reply.
async fn start_command(
    ch: &ChannelWriteHalf<client::Msg>,
    reader: &mut Reader,
    req: &Request,
    echo_off: bool,
) -> Result<(), String> {
    let err = |e: russh::Error| e.to_string();
    if req.agent.is_some() {
        ch.agent_forward(false).await.map_err(err)?;
    }
    if let Some(pty) = &req.pty {
        let modes = match echo_off {
            true => pty.modes_without_echo(),
            false => pty.modes.clone(),
        };
        ch.request_pty(false, &pty.term, pty.cols, pty.rows, 0, 0, &modes)
            .await
            .map_err(err)?;
    }
    for (k, v) in &req.env {
        ch.set_env(false, k.as_str(), v.as_str())
            .await
            .map_err(err)?;
    }
    let what = match &req.command {
        Command::Shell => {
            ch.request_shell(true).await.map_err(err)?;
            "a shell".to_string()
        }
        Command::Exec(cmd) => {
            ch.exec(true, cmd.clone()).await.map_err(err)?;
            "the command".to_string()
        }
        Command::Subsystem(name) => {
            ch.request_subsystem(true, name.as_str())
                .await
                .map_err(err)?;
            format!("the {name} subsystem")
        }
    };
    loop {
        match reader.ch.wait().await {
            Some(ChannelMsg::Success) => return Ok(()),
            Some(ChannelMsg::Failure) => return Err(format!("refused to start {what}")),
            Some(ChannelMsg::WindowAdjusted { .. }) => {}
            Some(other) => reader.pending.push_back(other),
            None => return Err(format!("closed the channel before starting {what}")),
        }
    }
}

/// Output already queued behind a small chunk joins it, up to this many
/// bytes: a terminal's output comes in many small packets, and each chunk
/// costs the bridge a pass through the terminal model, a recording event
/// and a packet to the client, whatever its size (a PTY flood's bastion
/// CPU is mostly per chunk). Nothing waits to be joined.
const JOIN_UP_TO: usize = 32 * 1024;

impl Reader {
    /// `first`, and the data right behind it that has come already.
    fn joined(&mut self, first: Bytes) -> Bytes {
        use futures_util::FutureExt;
        let mut joined: Option<bytes::BytesMut> = None;
        while joined.as_ref().map_or(first.len(), |j| j.len()) < JOIN_UP_TO {
            let next = match self.pending.pop_front() {
                Some(m) => m,
                // Only what is queued now; waiting is the caller's.
                None => match self.ch.wait().now_or_never() {
                    Some(Some(m)) => m,
                    _ => break,
                },
            };
            match next {
                ChannelMsg::Data { data } => joined
                    .get_or_insert_with(|| {
                        let mut j = bytes::BytesMut::with_capacity(JOIN_UP_TO + data.len());
                        j.extend_from_slice(&first);
                        j
                    })
                    .extend_from_slice(&data),
                other => {
                    self.pending.push_front(other);
                    break;
                }
            }
        }
        joined.map_or(first, bytes::BytesMut::freeze)
    }

    /// Why the target's connection was lost, once it was.
    pub(crate) fn why_lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) async fn next(&mut self) -> Option<TargetEvent> {
        loop {
            let msg = match self.pending.pop_front() {
                Some(m) => m,
                None => self.ch.wait().await?,
            };
            match msg {
                ChannelMsg::Data { data } => return Some(TargetEvent::Data(self.joined(data))),
                ChannelMsg::ExtendedData { data, .. } => return Some(TargetEvent::Stderr(data)),
                ChannelMsg::Eof => return Some(TargetEvent::Eof),
                ChannelMsg::ExitStatus { exit_status } => {
                    return Some(TargetEvent::ExitStatus(exit_status));
                }
                ChannelMsg::ExitSignal {
                    signal_name,
                    core_dumped,
                    error_message,
                    ..
                } => {
                    return Some(TargetEvent::ExitSignal {
                        signal: signal_name,
                        core_dumped,
                        message: error_message,
                    });
                }
                ChannelMsg::Close => return None,
                _ => {}
            }
        }
    }
}

impl Writer {
    pub(crate) async fn data(&mut self, data: Bytes) -> Result<(), String> {
        self.ch.data_bytes(data).await.map_err(|e| e.to_string())
    }

    pub(crate) async fn eof(&mut self) {
        let _ = self.ch.eof().await;
    }

    pub(crate) async fn resize(&mut self, cols: u32, rows: u32) {
        let _ = self.ch.window_change(cols, rows, 0, 0).await;
    }

    pub(crate) async fn signal(&mut self, sig: Sig) {
        let _ = self.ch.signal(sig).await;
    }

    /// Passes `eow@openssh.com` on: the target's sshd closes the command's
    /// output, as it would for a client of its own.
    pub(crate) async fn stop_output(&mut self) {
        let _ = self.ch.eow().await;
    }

    pub(crate) async fn hang_up(&mut self) {
        let _ = self.ch.eof().await;
        let _ = self.ch.close().await;
    }

    pub(crate) async fn finish(self) {
        let _ = self
            .conn
            .disconnect(russh::Disconnect::ByApplication, "session ended", "")
            .await;
    }
}
