//! The running bastion: what every connection and session shares, and the
//! start-up and shutdown of `walissh serve`.
//!
//! Start-up prepares the state directory and keys, starts the audit writer
//! and the recorder, binds every listener, then tells systemd it is ready.
//! Shutdown (SIGTERM or SIGINT) stops accepting, lets each session tell its
//! user and close its audit rows, disconnects everyone, and flushes the
//! audit database before exiting.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::audit::Audit;
use crate::audit::recording::Recorder;
use crate::config::{Config, TargetKind};
use crate::shutdown::Shutdown;
use crate::throttle::Throttle;
use crate::workers::Workers;

/// How long sessions get to wind down at shutdown.
const SESSION_GRACE: Duration = Duration::from_secs(10);
/// How long connections get to close after their sessions ended.
const CONNECTION_GRACE: Duration = Duration::from_secs(5);

/// Everything connections and sessions share. No global state: one of these
/// is made by `serve` and handed around in an `Arc`.
pub(crate) struct Bastion {
    /// The config and what is assembled from it, replaced whole at each
    /// reload: logins and questions take the current one.
    live: std::sync::RwLock<Arc<Live>>,
    pub(crate) audit: Audit,
    pub(crate) recorder: Recorder,
    pub(crate) throttle: Throttle,
    pub(crate) passwords: crate::password::Verifier,
    pub(crate) upstream: crate::upstream::UpstreamSettings,
    /// Where sessions start their screen models (see `workers`).
    pub(crate) screens: tokio::runtime::Handle,
    /// What the screen models take together (`[terminal] screen_memory_mb`).
    pub(crate) screen_memory: Arc<crate::terminal::screen::Memory>,
    /// Sessions open per user (`[server] max_sessions_per_user`).
    pub(crate) user_sessions: crate::server::UserSessions,
}

/// One config, and the agents, workflows and skills assembled from it.
pub(crate) struct Live {
    pub(crate) config: Config,
    pub(crate) agent: crate::agent::Agent,
}

impl Bastion {
    /// The current config: a session holds on to the one it started with,
    /// for its target and settings; each question takes the newest.
    pub(crate) fn live(&self) -> Arc<Live> {
        self.live.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Re-reads the config file (SIGHUP). Users, targets, agents,
    /// workflows and skills change for new logins and new questions; live
    /// sessions go on. An invalid file is refused and the old config kept.
    /// What only a restart changes (listen addresses, state, keys) is said.
    async fn reload(&self) {
        let current = self.live();
        if current.config.embedded {
            tracing::info!("nothing to reload: walissh runs on its embedded default");
            return;
        }
        let path = std::path::PathBuf::from(&current.config.source);
        let state_dir = current.config.state_dir().to_path_buf();
        let me = self.upstream.own_account.clone();
        // Reading files (the config, the keys, the skills) is blocking work.
        // The same checks as at start: a reload is no way around them.
        let loaded = tokio::task::spawn_blocking(move || {
            let mut config = Config::load(Some(&path)).map_err(|e| e.0)?;
            config.check_files().map_err(|e| e.0)?;
            absolute_state_dir(&mut config)?;
            check_local_targets(&config, &me)?;
            let agent = crate::agent::Agent::new(&config);
            Ok::<_, String>(Live { config, agent })
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        match loaded {
            Ok(live) => {
                let old = &current.config;
                if live.config.listen_addrs() != old.listen_addrs()
                    || live.config.state_dir() != state_dir
                {
                    tracing::warn!("listen addresses and state_dir change only at a restart");
                }
                *self.live.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(live);
                tracing::info!("config reloaded");
            }
            Err(e) => tracing::error!(error = %e, "reload failed; the old config stays"),
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
    // SAFETY: umask only sets the process's file mode mask.
    unsafe { libc::umask(0o077) };
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

/// Runs the bastion until SIGTERM or SIGINT.
pub(crate) async fn serve(mut config: Config, workers: &Workers) -> Result<(), String> {
    // Before anything can be announced: a SIGTERM right after "listening"
    // must shut down cleanly, not kill the process.
    let mut signals = Signals::new()?;
    keep_files_private(
        config.state_dir(),
        &config.audit_db_path(),
        &config.recordings_dir(),
    );
    crate::keys::create_private_dir(config.state_dir())?;
    absolute_state_dir(&mut config)?;
    if config.embedded {
        embedded_demo_password(&mut config)?;
    }
    let own_account = crate::config::current_account()?;
    check_local_targets(&config, &own_account)?;

    let host_key = crate::keys::load_or_generate(&config.host_key_path())?;
    let identity = crate::keys::load_or_generate(&config.identity_path())?;
    let (audit, audit_thread) = Audit::start(&config.audit_db_path(), config.audit.on_failure)?;
    let (recorder, recorder_thread) =
        Recorder::start(config.recordings_dir(), config.audit.record_input)?;
    let russh_config = Arc::new(crate::server::russh_config(host_key));

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
        throttle: Throttle::new(
            *config.server.auth_max_failures.get_ref(),
            Duration::from_secs(*config.server.auth_lockout_s.get_ref()),
        ),
        upstream: crate::upstream::UpstreamSettings {
            identity: Arc::new(identity),
            known_hosts: config.known_hosts_path(),
            policy: config.upstream.host_key_policy,
            own_account,
            spawn_lock: std::sync::Mutex::new(()),
            known_hosts_lock: Default::default(),
        },
        user_sessions: Default::default(),
        live: std::sync::RwLock::new(Arc::new(Live {
            agent: crate::agent::Agent::new(&config),
            config,
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
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);

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
    tracing::info!("stopped");
    Ok(())
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

/// Paths stored in the audit (recordings) must not depend on the directory
/// walissh was started from.
fn absolute_state_dir(config: &mut Config) -> Result<(), String> {
    config.server.state_dir = std::path::absolute(config.state_dir())
        .map_err(|e| format!("{}: {e}", config.state_dir().display()))?;
    Ok(())
}

/// A local target's shell must not be able to read walissh's keys or
/// rewrite its audit. With `run_as` it runs as another account (which needs
/// root); without, it runs as walissh's own account, and we say so loudly.
fn check_local_targets(config: &Config, me: &crate::config::Account) -> Result<(), String> {
    for t in config
        .targets
        .iter()
        .filter(|t| t.kind == TargetKind::Local)
    {
        match &t.run_as {
            Some(name) if me.uid != 0 => {
                return Err(format!(
                    "target {}: run_as = \"{}\" needs walissh to run as root",
                    t.name(),
                    name.get_ref()
                ));
            }
            Some(_) => {}
            None => {
                let warning = format!(
                    "WARNING: local target `{}` runs shells as walissh's own account ({}): \
                     they can read its keys and rewrite its audit trail. Set run_as for production.",
                    t.name(),
                    me.name
                );
                tracing::warn!("{warning}");
                eprintln!("walissh: {warning}");
            }
        }
    }
    Ok(())
}
