//! Console logins, held on the server: a random token in an HttpOnly
//! cookie names one, and the token is all the browser has. Each login
//! has its own CSRF token, which every form that changes something sends
//! back. What it leaves to others: checking the password (`server`'s
//! throttle and the verifier, through `web`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::Role;

/// At most this many console logins at once: a login is made only after
/// a password was checked (and throttled), so this bounds memory, not
/// guessing.
const MAX_LOGINS: usize = 1024;
/// However busy, a login ends after this long.
const MAX_AGE: Duration = Duration::from_secs(12 * 3600);

/// One console login.
#[derive(Clone, Debug)]
pub(crate) struct Login {
    pub(crate) user: String,
    pub(crate) role: Role,
    /// Sent back with every form that changes something.
    pub(crate) csrf: String,
    started: Instant,
    last: Instant,
}

/// The logins of the console, by token.
pub(crate) struct Logins {
    by_token: Mutex<HashMap<String, Login>>,
    idle: Duration,
}

impl Logins {
    pub(crate) fn new(idle: Duration) -> Logins {
        Logins {
            by_token: Mutex::new(HashMap::new()),
            idle,
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Login>> {
        self.by_token.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new login for `user`: its token, or None when there are as many
    /// as there may be.
    pub(crate) fn start(&self, user: &str, role: Role) -> Option<String> {
        let now = Instant::now();
        let mut map = self.map();
        if map.len() >= MAX_LOGINS {
            map.retain(|_, l| self.alive(l, now));
        }
        if map.len() >= MAX_LOGINS {
            return None;
        }
        let token = random_hex();
        map.insert(
            token.clone(),
            Login {
                user: user.to_string(),
                role,
                csrf: random_hex(),
                started: now,
                last: now,
            },
        );
        Some(token)
    }

    /// The login `token` names, if it is still alive: its use keeps it so.
    pub(crate) fn get(&self, token: &str) -> Option<Login> {
        self.get_at(token, Instant::now(), true)
    }

    /// The login, if it holds, without counting this as its use (the
    /// checks a page makes in the background).
    pub(crate) fn peek(&self, token: &str) -> Option<Login> {
        self.get_at(token, Instant::now(), false)
    }

    fn get_at(&self, token: &str, now: Instant, used: bool) -> Option<Login> {
        let mut map = self.map();
        let login = map.get_mut(token)?;
        if !self.alive(login, now) {
            map.remove(token);
            return None;
        }
        if used {
            login.last = now;
        }
        Some(login.clone())
    }

    pub(crate) fn end(&self, token: &str) {
        self.map().remove(token);
    }

    fn alive(&self, l: &Login, now: Instant) -> bool {
        now.duration_since(l.last) < self.idle && now.duration_since(l.started) < MAX_AGE
    }

    /// How long the cookie is to live: as long as a login unused.
    pub(crate) fn idle(&self) -> Duration {
        self.idle
    }
}

/// 32 random bytes, in hex.
fn random_hex() -> String {
    let bytes: [u8; 32] = rand::random();
    crate::audit::chain::hex(&bytes)
}

/// Whether two secrets are equal, in a time that does not say where they
/// differ.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_lives_while_used_and_ends_when_idle_or_ended() {
        let logins = Logins::new(Duration::from_secs(60));
        let t = logins.start("ann", Role::Auditor).unwrap();
        let l = logins.get(&t).unwrap();
        assert_eq!((l.user.as_str(), l.role), ("ann", Role::Auditor));
        assert_eq!(l.csrf.len(), 64);
        assert!(logins.get("not-a-token").is_none());
        logins.end(&t);
        assert!(logins.get(&t).is_none());
        // Used within the idle time it lives on; unused longer, or older
        // than a login may be, it is gone.
        let t = logins.start("ann", Role::Admin).unwrap();
        let later = Instant::now() + Duration::from_secs(50);
        assert!(logins.get_at(&t, later, true).is_some());
        // A look in the background is no use.
        let quiet = later + Duration::from_secs(50);
        assert!(logins.get_at(&t, quiet, false).is_some());
        assert!(
            logins
                .get_at(&t, quiet + Duration::from_secs(40), false)
                .is_none()
        );
        let t = logins.start("ann", Role::Admin).unwrap();
        assert!(logins.get_at(&t, later, true).is_some());
        assert!(
            logins
                .get_at(&t, later + Duration::from_secs(50), true)
                .is_some()
        );
        assert!(
            logins
                .get_at(&t, later + Duration::from_secs(111), true)
                .is_none()
        );
        let t = logins.start("ann", Role::Admin).unwrap();
        let mut at = Instant::now();
        while at < Instant::now() + MAX_AGE {
            at += Duration::from_secs(59);
            if logins.get_at(&t, at, true).is_none() {
                break;
            }
        }
        assert!(
            at >= Instant::now() + MAX_AGE - Duration::from_secs(60),
            "ended early"
        );
        assert!(logins.get_at(&t, at, true).is_none());
    }

    #[test]
    fn logins_are_bounded() {
        let logins = Logins::new(Duration::from_secs(60));
        for _ in 0..MAX_LOGINS {
            assert!(logins.start("ann", Role::Auditor).is_some());
        }
        assert!(logins.start("ann", Role::Auditor).is_none());
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }
}
