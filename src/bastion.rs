//! The running bastion: what every connection and session shares
//! ([`Bastion`]), the config and agents they run on ([`Live`]), and its
//! reload. Starting and stopping the process is `daemon`'s.

mod registry;

pub(crate) use registry::{Ending, Open, Registry};

use std::sync::Arc;

use crate::agent::Agent;
use crate::audit::Audit;
use crate::audit::recording::Recorder;
use crate::config::{Config, TargetKind};
use crate::throttle::Throttle;

/// Everything connections and sessions share. No global state: one of these
/// is made by `serve` and handed around in an `Arc`.
pub(crate) struct Bastion {
    /// The config and what is assembled from it, replaced whole at each
    /// reload: logins and questions take the current one.
    /// Read through [`Bastion::live`]; written by `reload`.
    pub(crate) live: std::sync::RwLock<Arc<Live>>,
    pub(crate) audit: Audit,
    pub(crate) recorder: Recorder,
    pub(crate) throttle: Throttle,
    pub(crate) passwords: crate::password::Verifier,
    /// Enrolled TOTP secrets (`walissh totp enroll`).
    pub(crate) totp: Arc<crate::auth::totp::SecretStore>,
    pub(crate) upstream: crate::upstream::UpstreamSettings,
    /// Where sessions start their screen models (see `workers`).
    pub(crate) screens: tokio::runtime::Handle,
    /// What the screen models take together (`[terminal] screen_memory_mb`).
    pub(crate) screen_memory: Arc<crate::terminal::screen::Memory>,
    /// Sessions open per user (`[server] max_sessions_per_user`).
    pub(crate) user_sessions: UserSessions,
    /// Logged-in connections per user (`[server] max_connections_per_user`).
    pub(crate) user_connections: UserSessions,
    /// The agent's commands waiting for a second approval (four-eyes).
    pub(crate) approvals: crate::agent::four_eyes::Approvals,
    /// The sessions open on this bastion, and the way to end one.
    pub(crate) sessions: Registry,
    /// The last accept on an SSH listener failed (out of descriptors).
    pub(crate) accept_failing: std::sync::atomic::AtomicBool,
    /// The bastion's host key, and the CA that signs the host
    /// certificates its jump presents for targets.
    pub(crate) host_key: russh::keys::PrivateKey,
    pub(crate) host_ca: russh::keys::PrivateKey,
}

/// One config, and the agents, workflows and skills assembled from it.
pub(crate) struct Live {
    pub(crate) config: Config,
    pub(crate) agent: Arc<Agent>,
    /// The user CAs and revoked keys the config names, as read with it.
    pub(crate) trust: crate::auth::Trust,
}

impl Bastion {
    /// A login attempt from `ip`; None while its address is locked out.
    /// Where several nodes share the audit, the attempt is counted there
    /// as a failure until it succeeds (so attempts under way on other
    /// nodes count too), and the others' count with this node's. An
    /// address locked out here asks nothing of the database; one whose
    /// count cannot be had in time gets one try at a time.
    pub(crate) async fn begin_attempt(
        &self,
        ip: std::net::IpAddr,
    ) -> Option<crate::throttle::Attempt<'_>> {
        if self.throttle.locked(ip) {
            return None;
        }
        let addr = crate::throttle::Throttle::key_of(ip).to_string();
        let within = self.throttle.lockout();
        let (elsewhere, reserved) = match self.audit.reserve_attempt(&addr, within).await {
            Ok(None) => (0, None),
            Ok(Some((id, others))) => (others, Some(id)),
            Err(()) => (self.throttle.max_failures().saturating_sub(1), None),
        };
        let Some(attempt) = self.throttle.begin_with(ip, elsewhere) else {
            if let Some(id) = reserved {
                self.audit.release_attempt(id);
            }
            return None;
        };
        Some(match reserved {
            None => attempt,
            Some(id) => attempt.settled_by(move |failed| {
                if !failed {
                    self.audit.release_attempt(id);
                }
            }),
        })
    }

    /// How long a password attempt for `user` from `ip` waits: the
    /// account's slow path (`Throttle::account_wait`), counting every
    /// node's failures where several share the audit.
    pub(crate) async fn account_wait(
        &self,
        user: &str,
        ip: std::net::IpAddr,
    ) -> std::time::Duration {
        let account = crate::throttle::Throttle::account_key(user);
        let addr = crate::throttle::Throttle::key_of(ip).to_string();
        let within = self.throttle.lockout();
        let elsewhere = self.audit.account_elsewhere((account, &addr), within).await;
        self.throttle
            .account_wait_with(user, ip, elsewhere.unwrap_or((0, false)))
    }

    /// A wrong password for `user`, here and for the other nodes.
    pub(crate) async fn account_failed(&self, user: &str) {
        self.throttle.account_failed(user);
        let account = crate::throttle::Throttle::account_key(user);
        self.audit.account_failed(account).await;
    }

    /// `user` logged in from `ip`: spared its slow path there, on every
    /// node.
    pub(crate) fn account_ok(&self, user: &str, ip: std::net::IpAddr) {
        self.throttle.account_ok(user, ip);
        let account = crate::throttle::Throttle::account_key(user);
        let addr = crate::throttle::Throttle::key_of(ip).to_string();
        self.audit.account_known(account, &addr);
    }

    /// What stops the bastion from working as it should, if anything: the
    /// checks `/healthz` answers and the systemd watchdog is fed by.
    pub(crate) fn problem(&self) -> Option<&'static str> {
        if self
            .accept_failing
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Some("the SSH listener cannot accept connections");
        }
        self.audit
            .health
            .problem()
            .or_else(|| self.recorder.problem())
    }

    /// The current config: a session holds on to the one it started with,
    /// for its target and settings; each question takes the newest.
    pub(crate) fn live(&self) -> Arc<Live> {
        self.live.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Re-reads the config file (SIGHUP). Users, targets, agents,
    /// workflows and skills change for new logins and new questions; live
    /// sessions go on. An invalid file is refused and the old config kept.
    /// What only a restart changes (listen addresses, state, keys) is said.
    pub(crate) async fn reload(&self) {
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
            config.check_has_users().map_err(|e| e.0)?;
            absolute_state_dir(&mut config)?;
            check_local_targets(&config, &me)?;
            let agent = Arc::new(Agent::assemble(&config).map_err(|e| e.0)?);
            let trust = crate::auth::Trust::load(&config).map_err(|e| e.0)?;
            Ok::<_, String>(Live {
                config,
                agent,
                trust,
            })
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

/// Paths stored in the audit (recordings) must not depend on the directory
/// walissh was started from.
pub(crate) fn absolute_state_dir(config: &mut Config) -> Result<(), String> {
    config.server.state_dir = std::path::absolute(config.state_dir())
        .map_err(|e| format!("{}: {e}", config.state_dir().display()))?;
    Ok(())
}

/// A local target's shell must not be able to read walissh's keys or
/// rewrite its audit. With `run_as` it runs as another account (which needs
/// root); without, it runs as walissh's own account, and we say so loudly.
pub(crate) fn check_local_targets(
    config: &Config,
    me: &crate::config::Account,
) -> Result<(), String> {
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
                // The log is stderr: one line, in the log's own form
                // (a plain line would break JSON logs).
                tracing::warn!("{warning}");
            }
        }
    }
    Ok(())
}

/// Sessions open per user, over all their connections.
#[derive(Default)]
pub(crate) struct UserSessions(Arc<std::sync::Mutex<std::collections::HashMap<String, u32>>>);

/// One of a user's open sessions: given back when dropped.
pub(crate) struct UserSlot {
    open: Arc<std::sync::Mutex<std::collections::HashMap<String, u32>>>,
    user: String,
}

impl UserSessions {
    /// A slot for `user`, unless `max` of theirs are open already.
    pub(crate) fn take(&self, user: &str, max: u32) -> Option<UserSlot> {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(user.to_string()).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(UserSlot {
            open: self.0.clone(),
            user: user.to_string(),
        })
    }
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.user);
            }
        }
    }
}
