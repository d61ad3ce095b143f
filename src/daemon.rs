//! The life of `walissh serve`: start-up, the listeners, signals and
//! shutdown. What runs between is `bastion`'s state and `server`'s
//! connections.
//!
//! Start-up prepares the state directory and keys, starts the audit writer
//! and the recorder, binds every listener, then tells systemd it is ready.
//! SIGHUP reloads the config (`Bastion::reload`). Shutdown (SIGTERM or
//! SIGINT) stops accepting, lets each session tell its user and close its
//! audit rows, disconnects everyone, and flushes the audit database before
//! exiting.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::agent::Agent;
use crate::agent::skills::Skills;
use crate::audit::Audit;
use crate::audit::recording::Recorder;
use crate::bastion::{Bastion, Live, absolute_state_dir, check_local_targets};
use crate::config::Config;
use crate::shutdown::Shutdown;
use crate::throttle::Throttle;
use crate::workers::Workers;

/// How long sessions get to wind down at shutdown.
const SESSION_GRACE: Duration = Duration::from_secs(10);
/// How long connections get to close after their sessions ended.
const CONNECTION_GRACE: Duration = Duration::from_secs(5);

/// Runs the bastion until SIGTERM or SIGINT.
pub(crate) async fn serve(
    mut config: Config,
    // What the agent is made of, built by the config's checks.
    (skills, redactor): (Skills, crate::context::redact::Redactor),
    trust: crate::auth::Trust,
    workers: &Workers,
) -> Result<(), String> {
    // Before anything can be announced: a SIGTERM right after "listening"
    // must shut down cleanly, not kill the process.
    let mut signals = Signals::new()?;
    keep_files_private(
        config.state_dir(),
        &config.audit_db_path(),
        &config.recordings_dir(),
    );
    raise_open_files();
    keep_memory_private();
    crate::keys::create_private_dir(config.state_dir())?;
    absolute_state_dir(&mut config)?;
    if config.embedded {
        embedded_demo_password(&mut config)?;
    }
    let own_account = crate::config::current_account()?;
    check_local_targets(&config, &own_account)?;

    let host_key = crate::keys::load_or_generate(&config.host_key_path())?;
    let host_ca = crate::keys::load_or_generate(&config.host_ca_path())?;
    let identity = crate::keys::load_or_generate(&config.identity_path())?;
    // Opening the database and repairing what a crash left (`audit::recover`)
    // is file I/O: off the runtime, as all of it is.
    let policy = config.audit.on_failure;
    let node = config.node_name();
    let (state, a) = (config.state_dir().to_path_buf(), &config.audit);
    let (every_events, every) = (
        a.checkpoint_events.max(1),
        Duration::from_secs(a.checkpoint_s.max(1)),
    );
    // One walissh per state directory: a second one's crash recovery
    // would end the first one's live sessions and fork its chain.
    let _lock = lock_state_dir(config.state_dir())?;
    // Bound before the listeners: a client let in may be followed at once
    // by `walissh approve` or `sessions kill` on the host.
    let control = crate::control::bind(config.state_dir())?;
    let (forward, senders) = match forwarding(&config) {
        Some((f, s)) => (Some(f), s),
        None => (None, Vec::new()),
    };
    let store = crate::audit::Store::of(&config)?;
    let (audit, audit_thread) = tokio::task::spawn_blocking(move || {
        let key = crate::audit::chain::key(&state)?;
        let checkpoints = crate::audit::chain::Checkpoints {
            key: Some(key),
            every_events,
            every,
        };
        Audit::open((store, &node), policy, checkpoints, forward)
    })
    .await
    .map_err(|e| format!("cannot open the audit: {e}"))??;
    // Recordings to a bucket: the uploader's thread ends with the last
    // recording's handle; what it had not uploaded, the next start finds.
    let uploads = match config.recordings_bucket() {
        None => None,
        Some(url) => {
            let keep = config.recordings.keep_local_days.as_ref();
            let keep = keep.map(|d| Duration::from_secs(u64::from(*d.get_ref()) * 86_400));
            let every = config.recordings.upload_every_s.as_ref();
            let every = Duration::from_secs(every.map_or(120, |s| u64::from(*s.get_ref())));
            let bucket = crate::audit::upload::Bucket::new(url)?;
            let (uploads, _thread) =
                crate::audit::upload::start(bucket, config.recordings_dir(), (keep, every))?;
            Some(uploads)
        }
    };
    let (recorder, recorder_thread) = Recorder::start(
        config.recordings_dir(),
        config.audit.record_input,
        (Some(audit.metrics.clone()), uploads),
    )?;
    let methods = config.auth.methods.iter().map(|m| *m.get_ref());
    let russh_config = Arc::new(crate::server::russh_config(
        host_key.clone(),
        crate::auth::method_set(methods),
    ));
    let upstream_ca = config
        .upstream
        .ca_key
        .as_ref()
        .map(|k| crate::keys::load_or_generate(k.get_ref()).map(Arc::new))
        .transpose()?;

    let mut listeners = Vec::new();
    for addr in config.listen_addrs() {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let bound = l
            .local_addr()
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        tracing::info!(addr = %bound, "listening");
        listeners.push(l);
    }

    let hashes = config
        .users
        .iter()
        .filter_map(|u| u.password_hash.as_ref().map(|h| h.get_ref().as_str()));
    let passwords = crate::password::Verifier::new(hashes)?;
    let bastion = Arc::new(Bastion {
        passwords,
        totp: Arc::new(crate::auth::totp::SecretStore::new(
            config.state_dir(),
            *config.server.auth_max_failures.get_ref(),
            Duration::from_secs(*config.server.auth_lockout_s.get_ref()),
        )),
        throttle: Throttle::new(
            *config.server.auth_max_failures.get_ref(),
            Duration::from_secs(*config.server.auth_lockout_s.get_ref()),
        ),
        upstream: crate::upstream::UpstreamSettings {
            identity: Arc::new(identity),
            ca: upstream_ca,
            cert_validity: Duration::from_secs(*config.upstream.cert_validity_s.get_ref()),
            known_hosts: config.known_hosts_path(),
            policy: config.upstream.host_key_policy,
            keepalive: config.upstream.keepalive(),
            own_account,
            spawn_lock: std::sync::Mutex::new(()),
            known_hosts_lock: Default::default(),
        },
        user_sessions: Default::default(),
        user_connections: Default::default(),
        approvals: Default::default(),
        sessions: Default::default(),
        accept_failing: Default::default(),
        host_key,
        host_ca,
        live: std::sync::RwLock::new(Arc::new(Live {
            agent: Arc::new(Agent::new(&config, skills, redactor)),
            config,
            trust,
        })),
        audit,
        recorder,
        screens: workers.screens(),
        screen_memory: Default::default(),
    });

    let mut sessions = Shutdown::new();
    let mut connections = Shutdown::new();
    for l in listeners {
        tokio::spawn(crate::server::accept_loop(
            l,
            bastion.clone(),
            russh_config.clone(),
            sessions.watcher(),
            connections.watcher(),
            workers.spread(),
        ));
    }
    if let Some((console, tls)) = web_listener(&bastion.live().config).await? {
        let watcher = sessions.watcher();
        tokio::spawn(crate::web::serve(bastion.clone(), console, tls, watcher));
    }
    tokio::spawn(crate::control::serve(
        bastion.clone(),
        control,
        sessions.watcher(),
    ));
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    tokio::spawn(watchdog(bastion.clone()));
    tokio::spawn(retention(bastion.clone(), sessions.watcher()));
    if let Some(stops) = bastion.audit.stops() {
        tokio::spawn(stops_from_other_nodes(
            bastion.clone(),
            stops,
            sessions.watcher(),
        ));
    }
    if let Some(views) = bastion.audit.views().cloned() {
        tokio::spawn(views_for_other_nodes(
            bastion.clone(),
            views,
            sessions.watcher(),
        ));
    }

    while signals.wait().await == Signal::Reload {
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Reloading]);
        bastion.reload().await;
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    }
    tracing::info!("shutting down: telling connected users");
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    sessions.begin();
    if tokio::time::timeout(SESSION_GRACE, sessions.wait_drained())
        .await
        .is_err()
    {
        tracing::warn!("some sessions did not end in time");
    }
    connections.begin();
    let _ = tokio::time::timeout(CONNECTION_GRACE, connections.wait_drained()).await;
    bastion.audit.flush().await;
    drop(bastion);
    // The writer ends when the last handle is gone; connections that did
    // not end in time may still hold one, so do not wait for it forever.
    let joined = tokio::task::spawn_blocking(move || {
        let _ = recorder_thread.join();
        let _ = audit_thread.join();
    });
    if tokio::time::timeout(CONNECTION_GRACE, joined)
        .await
        .is_err()
    {
        tracing::warn!("audit writers still busy at exit");
    }
    // The writer is gone, and with it the forward's queues: what is in
    // them (the last checkpoint among it) goes out before the process
    // ends, if the collectors take it in time.
    let sent = async {
        for s in senders {
            let _ = s.await;
        }
    };
    if tokio::time::timeout(CONNECTION_GRACE, sent).await.is_err() {
        tracing::warn!("the audit forward could not send all it held before exit");
    }
    tracing::info!("stopped");
    Ok(())
}

/// The web console's listener (`[web] listen`), if it has one, and its
/// TLS (`tls_cert`, `tls_key`), read now: a bad file stops the start.
async fn web_listener(
    config: &Config,
) -> Result<Option<(TcpListener, Option<tokio_rustls::TlsAcceptor>)>, String> {
    let Some(addr) = config.web_addr() else {
        return Ok(None);
    };
    let tls = match (&config.web.tls_cert, &config.web.tls_key) {
        (Some(cert), Some(key)) => {
            let acceptor = crate::web::acceptor(cert.get_ref(), key.get_ref())
                .map_err(|e| format!("[web] tls_cert/tls_key: {e}"))?;
            Some(acceptor)
        }
        _ => None,
    };
    let l = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} (web console): {e}"))?;
    let bound = l.local_addr().map_err(|e| format!("{addr}: {e}"))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(addr = %bound, scheme, "web console listening");
    Ok(Some((l, tls)))
}

/// Stops asked on other nodes for sessions this one carries (`audit::stops`),
/// done as if asked here, until shutdown.
async fn stops_from_other_nodes(
    bastion: Arc<Bastion>,
    mut stops: crate::audit::stops::Stops,
    mut stop: crate::shutdown::Watcher,
) {
    loop {
        let asked = tokio::select! {
            _ = stop.requested() => return,
            asked = stops.rx.recv() => asked,
        };
        let Some(s) = asked else { return };
        let via = if s.via == "console" { "console" } else { "cli" };
        let asked = (s.by.as_str(), s.reason.as_str(), via);
        if let Err(why) = crate::session::kill_here(&bastion, &s.session, asked).await {
            tracing::info!(session = %s.session, %why, "a stop from another node was not done");
        }
    }
}

/// Live views other nodes' consoles ask of sessions this one carries
/// (`audit::views`), each served until it ends or shutdown (which tells
/// its watcher).
async fn views_for_other_nodes(
    bastion: Arc<Bastion>,
    views: Arc<crate::audit::views::Views>,
    mut stop: crate::shutdown::Watcher,
) {
    let Some(mut asks) = views.take_asks() else {
        return;
    };
    loop {
        let asked = tokio::select! {
            _ = stop.requested() => return,
            asked = asks.recv() => asked,
        };
        let Some(ask) = asked else { return };
        let (bastion, views, mut stop) = (bastion.clone(), views.clone(), stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = crate::web::live::serve_other_node(&bastion, &views, &ask) => {}
                _ = stop.requested() => {
                    views.end(&ask.view, Some("the bastion is shutting down")).await;
                }
            }
        });
    }
}

/// How often the retention pass runs (and once at start).
const RETENTION_EVERY: Duration = Duration::from_secs(24 * 3600);

/// The daily retention pass (`audit::prune`), as `[audit] keep_days` and
/// `[recordings] keep_days` say at the time (a reload counts), until
/// shutdown.
async fn retention(bastion: Arc<Bastion>, mut stop: crate::shutdown::Watcher) {
    let mut every = tokio::time::interval(RETENTION_EVERY);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.requested() => return,
        }
        let live = bastion.live();
        let ago = |days: &Option<toml::Spanned<u32>>| {
            let d = Duration::from_secs(u64::from(*days.as_ref()?.get_ref()) * 86_400);
            std::time::SystemTime::now().checked_sub(d)
        };
        let audit_before = ago(&live.config.audit.keep_days);
        let recordings =
            ago(&live.config.recordings.keep_days).map(|t| (live.config.recordings_dir(), t));
        // The rows a chunk at a time (each pass deletes at most
        // `prune::MAX_ROWS`), other writes between them.
        let bucket = live.config.recordings_bucket().map(str::to_string);
        let mut asks: Vec<crate::audit::prune::Ask> = Vec::new();
        // Recordings first: while their sessions' rows are there, each
        // goes with a chained row (and from the bucket); after, only by
        // its file's age.
        if recordings.is_some() {
            asks.push(crate::audit::prune::Ask {
                audit_before: None,
                recordings,
                bucket: bucket.is_some(),
            });
        }
        if audit_before.is_some() {
            asks.push(crate::audit::prune::Ask {
                audit_before,
                recordings: None,
                bucket: bucket.is_some(),
            });
        }
        // A pass that finds the chain broken stops the rest: nothing is
        // deleted on the word of rows that do not hold.
        let mut failed = false;
        for ask in asks {
            if failed {
                break;
            }
            let mut total = crate::audit::prune::Pruned::default();
            for _ in 0..RETENTION_CHUNKS {
                match bastion.audit.prune(ask.clone()).await {
                    Ok(p) => {
                        let more = p.through.is_some();
                        total.add(p);
                        if !more {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "retention: the pass failed");
                        failed = true;
                        break;
                    }
                }
            }
            let objects = match &bucket {
                Some(url) => delete_objects(url, &total.names).await,
                None => 0,
            };
            tracing::info!(
                through = total.through,
                events = total.events,
                sessions = total.sessions,
                recordings = total.recordings,
                objects,
                "retention: what was older is deleted"
            );
        }
    }
}

/// Deletes from the bucket at `url` the recordings `names`, whose rows
/// say they were pruned (chained and signed already): how many went. A
/// bucket that refuses (an object lock) keeps them, and the log says so
/// once.
async fn delete_objects(url: &str, names: &[String]) -> u64 {
    let bucket = match crate::audit::upload::Bucket::new(url) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "retention: the bucket cannot be reached");
            return 0;
        }
    };
    let mut gone = 0;
    let mut refused = None;
    for name in names {
        match bucket.delete(name).await {
            Ok(()) => gone += 1,
            Err(e) => refused = Some(e),
        }
    }
    if let Some(e) = refused {
        tracing::warn!(error = %e, kept = names.len() as u64 - gone, "retention: recordings kept in the bucket");
    }
    gone
}

/// At most this many chunks of rows a day.
const RETENTION_CHUNKS: usize = 1000;

/// Feeds systemd's watchdog (`WatchdogSec=`, which sets WATCHDOG_USEC)
/// at a third of its period, while the bastion is healthy (`/healthz`'s
/// checks): a bastion that cannot audit is restarted, not left running.
async fn watchdog(bastion: Arc<Bastion>) {
    let Some(period) = watchdog_period() else {
        return;
    };
    let mut every = tokio::time::interval(period / 3);
    let mut said = None;
    loop {
        every.tick().await;
        let problem = bastion.problem();
        if problem.is_none() {
            let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]);
        } else if problem != said {
            tracing::warn!(
                problem = problem.unwrap_or(""),
                "unhealthy: the systemd watchdog is not fed"
            );
        }
        said = problem;
    }
}

/// The watchdog's period, as libsystemd reads it: WATCHDOG_USEC, for this
/// process when WATCHDOG_PID names one. (The sd-notify crate also wants
/// WATCHDOG_PID set, which systemd does but need not.)
fn watchdog_period() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok()? != std::process::id()
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// SIGTERM and SIGINT (stop), SIGHUP (reload), caught from the moment
/// this exists.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

#[derive(Debug, PartialEq, Eq)]
enum Signal {
    Stop,
    Reload,
}

impl Signals {
    fn new() -> Result<Signals, String> {
        use tokio::signal::unix::{SignalKind, signal};
        let err = |e: std::io::Error| format!("cannot handle signals: {e}");
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(err)?,
            int: signal(SignalKind::interrupt()).map_err(err)?,
            hup: signal(SignalKind::hangup()).map_err(err)?,
        })
    }

    async fn wait(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => Signal::Stop,
            _ = self.int.recv() => Signal::Stop,
            _ = self.hup.recv() => Signal::Reload,
        }
    }
}

/// Every file walissh creates from here on is its own alone (0600,
/// directories 0700): the audit, its journal, recordings, keys, known
/// hosts. The mode mask does it, whatever the directories around them
/// allow (local targets' processes get the usual 022 back:
/// `upstream::local`). The audit and the recordings that exist already are
/// closed to others too, and a state directory others can enter is said.
fn keep_files_private(
    state: &std::path::Path,
    audit: &std::path::Path,
    recordings: &std::path::Path,
) {
    use std::os::unix::fs::PermissionsExt;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    if let Ok(meta) = std::fs::metadata(state)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            "state_dir {} can be entered by other accounts (mode {:o}); walissh's files in it \
             are its own, but their names are not: chmod 700 it",
            state.display(),
            meta.permissions().mode() & 0o7777
        );
    }
    let tighten = |path: &std::path::Path, mode: u32| {
        if let Ok(meta) = std::fs::symlink_metadata(path)
            && !meta.file_type().is_symlink()
            && meta.permissions().mode() & 0o077 != 0
        {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
        }
    };
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = audit.as_os_str().to_owned();
        name.push(suffix);
        tighten(std::path::Path::new(&name), 0o600);
    }
    tighten(recordings, 0o700);
}

/// The embedded default's `demo` user gets a generated password, printed
/// once at first start and kept only as a hash.
fn embedded_demo_password(config: &mut Config) -> Result<(), String> {
    let (hash, fresh) = crate::keys::demo_password(config.state_dir())?;
    if let Some(password) = fresh {
        println!(
            "walissh: first start on the embedded default. User `demo`, password: {password}\n\
             walissh: this is shown once; only its hash is kept, in {}",
            config.state_dir().join("demo.hash").display()
        );
    }
    if let Some(demo) = config.users.iter_mut().find(|u| u.name() == "demo") {
        demo.password_hash = Some(toml::Spanned::new(0..0, hash));
    }
    Ok(())
}

/// Holds `state_dir/lock` (flock) for as long as the guard lives.
fn lock_state_dir(dir: &std::path::Path) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
    use nix::fcntl::{Flock, FlockArg};
    let path = dir.join("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
        format!(
            "{}: another walissh serves this state directory ({e})",
            path.display()
        )
    })
}

/// `[audit] forward`'s senders, on this runtime (the config checked the
/// destinations).
fn forwarding(
    config: &Config,
) -> Option<(
    crate::audit::forward::Forward,
    Vec<tokio::task::JoinHandle<()>>,
)> {
    let list = config.audit.forward.as_ref()?.get_ref().list();
    let destinations = list
        .into_iter()
        .filter_map(|url| crate::config::destination(url).ok())
        .collect();
    let runtime = tokio::runtime::Handle::current();
    Some(crate::audit::forward::Forward::start(
        destinations,
        config.audit.forward_queue,
        &runtime,
    ))
}

/// Makes walissh's memory and environment unreadable to processes of its
/// own account (no `/proc/PID/environ`, no ptrace, no core dump): the MCP
/// servers it starts run as that account, and its environment holds the
/// model's API key and the targets' passwords.
fn keep_memory_private() {
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(error = %e, "cannot make the process undumpable");
    }
}

/// Raises the soft limit on open files to the hard one: every session
/// holds several descriptors, and the usual soft limit (1024) is reached
/// before a few hundred sessions. The throttle sizes its caps from the
/// limit this leaves (`throttle::Caps::from_limit`).
fn raise_open_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => tracing::debug!(from = soft, to = hard, "raised the open-files limit"),
            Err(e) => tracing::warn!(error = %e, limit = soft, "cannot raise the open-files limit"),
        },
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read the open-files limit"),
    }
}
