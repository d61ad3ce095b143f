//! Per-address throttling of failed logins: a growing delay, then a
//! temporary lockout.
//!
//! Only failures that guess a secret count (wrong passwords, and any
//! attempt while locked out): a rejected public-key offer is audited but
//! not counted, since clients routinely offer several keys. The state is
//! in memory, per bastion process.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The first failure costs this much; each further one doubles it.
const BASE_DELAY: Duration = Duration::from_millis(250);
const MAX_DELAY: Duration = Duration::from_secs(4);
/// Addresses tracked before expired entries are pruned.
const PRUNE_AT: usize = 10_000;

#[derive(Debug)]
struct Entry {
    failures: u32,
    last: Instant,
    locked_until: Option<Instant>,
}

#[derive(Debug)]
pub(crate) struct Throttle {
    entries: Mutex<HashMap<IpAddr, Entry>>,
    max_failures: u32,
    lockout: Duration,
}

impl Throttle {
    pub(crate) fn new(max_failures: u32, lockout: Duration) -> Throttle {
        Throttle {
            entries: Mutex::new(HashMap::new()),
            max_failures: max_failures.max(1),
            lockout,
        }
    }

    /// Whether `ip` is locked out now.
    pub(crate) fn locked(&self, ip: IpAddr) -> bool {
        let now = Instant::now();
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(&ip)
            .and_then(|e| e.locked_until)
            .is_some_and(|until| until > now)
    }

    /// Records a failure; returns how long to wait before answering it.
    pub(crate) fn failure(&self, ip: IpAddr) -> Duration {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= PRUNE_AT {
            let lockout = self.lockout;
            entries.retain(|_, e| now.duration_since(e.last) < lockout);
        }
        let e = entries.entry(ip).or_insert(Entry {
            failures: 0,
            last: now,
            locked_until: None,
        });
        // A lockout runs its course from the failure that started it: more
        // tries do not extend it (which would let anyone behind the same
        // address keep everyone else there locked out forever).
        if e.locked_until.is_some_and(|until| until > now) {
            return MAX_DELAY;
        }
        // Failures long ago are forgiven, as is a lockout that has run out.
        if now.duration_since(e.last) >= self.lockout
            || e.locked_until.is_some_and(|until| until <= now)
        {
            e.failures = 0;
            e.locked_until = None;
        }
        e.failures += 1;
        e.last = now;
        if e.failures >= self.max_failures {
            e.locked_until = Some(now + self.lockout);
        }
        let doublings = (e.failures - 1).min(8);
        (BASE_DELAY * 2u32.pow(doublings)).min(MAX_DELAY)
    }

    /// A successful login clears the address's record.
    pub(crate) fn success(&self, ip: IpAddr) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_grows_then_locks_out() {
        let t = Throttle::new(3, Duration::from_secs(60));
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(!t.locked(ip));
        let d1 = t.failure(ip);
        let d2 = t.failure(ip);
        assert!(d2 > d1);
        assert!(!t.locked(ip));
        t.failure(ip);
        assert!(t.locked(ip));
        assert!(!t.locked(other));
    }

    #[test]
    fn tries_during_a_lockout_do_not_extend_it() {
        let t = Throttle::new(1, Duration::from_millis(200));
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        t.failure(ip);
        let until = t.entries.lock().unwrap()[&ip].locked_until;
        assert_eq!(t.failure(ip), MAX_DELAY);
        assert_eq!(t.entries.lock().unwrap()[&ip].locked_until, until);
    }

    #[test]
    fn success_clears() {
        let t = Throttle::new(2, Duration::from_secs(60));
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        t.failure(ip);
        t.success(ip);
        t.failure(ip);
        assert!(!t.locked(ip));
    }
}
