//! Per-address throttling of failed logins: a growing delay, then a
//! temporary lockout.
//!
//! Only failures that guess a secret count (wrong passwords, and wrong
//! keys that were actually signed for): a rejected public-key offer is
//! audited but not counted, since clients routinely offer several keys.
//! A verification in flight counts as a failure until it is decided, so
//! parallel connections cannot buy more guesses than the limit. Failures
//! are forgiven `lockout` after the last one; a successful login does not
//! clear them, or anyone with an account could reset the count between
//! guesses at someone else's password. IPv6 addresses are grouped by /64,
//! the block one host usually holds. The state is in memory, per process.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first failure costs this much; each further one doubles it.
const BASE_DELAY: Duration = Duration::from_millis(250);
const MAX_DELAY: Duration = Duration::from_secs(4);
/// Addresses tracked before expired entries are pruned.
const PRUNE_AT: usize = 10_000;

#[derive(Debug)]
struct Entry {
    failures: u32,
    in_flight: u32,
    last: Instant,
    locked_until: Option<Instant>,
}

#[derive(Debug)]
pub(crate) struct Throttle {
    entries: Mutex<HashMap<IpAddr, Entry>>,
    max_failures: u32,
    lockout: Duration,
    /// Connections that have not logged in yet, per address and in all.
    pending: Arc<Mutex<PendingCounts>>,
    /// Connections that have not logged in, in all: see [`Caps`].
    caps: Caps,
    /// Addresses someone logged in from lately, and when.
    logged_in: Mutex<HashMap<IpAddr, Instant>>,
    /// Failures per address in the current report window.
    windows: Mutex<HashMap<IpAddr, Window>>,
    /// Failed passwords per account, whatever the address.
    accounts: Mutex<HashMap<String, Failures>>,
}

/// Connections one address may hold open before logging in: enough for a
/// burst of parallel logins, too few to exhaust file descriptors.
const MAX_PENDING: u32 = 64;

#[derive(Debug, Default)]
struct PendingCounts {
    by_address: HashMap<IpAddr, u32>,
    total: u32,
}

/// A connection that has not logged in yet; dropping it (on login, or when
/// the connection ends) frees its place.
#[derive(Debug)]
pub(crate) struct Pending {
    counts: Arc<Mutex<PendingCounts>>,
    key: IpAddr,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.by_address.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                counts.by_address.remove(&self.key);
            }
        }
    }
}

/// How many connections that have not logged in yet all addresses
/// together may hold, by who asks: addresses that failed a login lately
/// get places up to `failed`, others up to `anyone`, and addresses someone
/// logged in from lately (`KNOWN_FOR`) up to `known`. A flood from new
/// addresses so leaves room for the people who use the bastion.
#[derive(Debug, Clone, Copy)]
struct Caps {
    failed: u32,
    anyone: u32,
    known: u32,
}

/// How long an address someone logged in from keeps the `known` share.
const KNOWN_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

impl Caps {
    /// From the descriptor limit. Each such connection holds two
    /// descriptors (its socket, and a second handle that cuts it at the
    /// login deadline), so at most half of them go to these connections
    /// (`known`: a quarter of the limit in connections); the other half is
    /// for logged-in sessions, which need several each.
    fn from_limit() -> Caps {
        use nix::sys::resource::{Resource, getrlimit};
        let files = match getrlimit(Resource::RLIMIT_NOFILE) {
            Ok((soft, _)) => soft.min(1 << 20) as u32,
            Err(_) => 1024,
        };
        Caps {
            failed: (files / 8).max(MAX_PENDING),
            anyone: (files / 16 * 3).max(2 * MAX_PENDING),
            known: (files / 4).max(3 * MAX_PENDING),
        }
    }
}

/// A login attempt being verified; dropping it without a verdict just
/// releases its place.
pub(crate) struct Attempt<'a> {
    throttle: &'a Throttle,
    key: IpAddr,
    /// Told how the attempt ended (true: it failed) when it does: where
    /// other nodes count it too (a shared store), its row is kept or
    /// taken back.
    settle: Option<Box<dyn FnOnce(bool) + Send + 'a>>,
}

/// The name an account is counted under: cut to a bound.
fn account(user: &str) -> &str {
    crate::text::prefix(user, MAX_ACCOUNT)
}

/// The address the throttle counts under: IPv4 as is, IPv6 by /64.
fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut seg = v6.segments();
                seg[4..].fill(0);
                IpAddr::V6(seg.into())
            }
        },
        v4 => v4,
    }
}

/// How long failures from one address are counted together for the audit.
const REPORT_WINDOW: Duration = Duration::from_secs(60);
/// Failures of one address in a window that each get an audit row; beyond,
/// only the 32nd, 64th, 128th…
const ROWS_IN_FULL: u64 = 16;
/// Rejected public-key offers one address may make in a window before each
/// further one waits: clients offer every key they hold, a few at most.
const FREE_OFFERS: u64 = 16;

/// Failed passwords for one account, from anywhere, before its slow path
/// starts; then each attempt waits, 250 ms doubling up to 8 s.
const ACCOUNT_FREE: u32 = 10;
const ACCOUNT_MAX_DELAY: Duration = Duration::from_secs(8);
/// Addresses remembered per account as ones it logged in from.
const KNOWN_ADDRESSES: usize = 16;
/// Bytes of an account name the throttle keys on.
const MAX_ACCOUNT: usize = 128;

/// Failed passwords for one account.
#[derive(Debug, Default)]
struct Failures {
    failures: u32,
    last: Option<Instant>,
    /// Where it logged in from: exempt from its slow path.
    known: Vec<IpAddr>,
}

/// Failures of one address in the current window.
#[derive(Debug)]
struct Window {
    started: Instant,
    failures: u64,
    offers: u64,
}

/// What to do about one failure: whether to write an audit row for it
/// (with how many failures the address has made in the window so far),
/// and how long to wait before answering a rejected offer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) report: Option<u64>,
    pub(crate) wait: Duration,
}

impl Throttle {
    pub(crate) fn new(max_failures: u32, lockout: Duration) -> Throttle {
        Throttle {
            entries: Mutex::new(HashMap::new()),
            max_failures: max_failures.max(1),
            lockout,
            pending: Arc::default(),
            caps: Caps::from_limit(),
            logged_in: Mutex::default(),
            windows: Mutex::default(),
            accounts: Mutex::default(),
        }
    }

    fn accounts(&self) -> std::sync::MutexGuard<'_, HashMap<String, Failures>> {
        self.accounts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Throttle::account_wait_with`] on a bastion alone.
    #[cfg(test)]
    pub(crate) fn account_wait(&self, user: &str, ip: IpAddr) -> Duration {
        self.account_wait_with(user, ip, (0, false))
    }

    /// How long a password attempt for `user` from `ip` waits before it
    /// is checked. Guesses spread over many addresses get past the
    /// per-address count, so each account has a slow path of its own:
    /// after 10 failures (forgotten `lockout` after the last) each attempt
    /// waits, 250 ms doubling up to 8 s. It slows, it never locks out, and
    /// it does not apply from an address the account has logged in from,
    /// so a guesser cannot keep the real user out. Where several nodes
    /// share the audit, `elsewhere` is the account's failures on the
    /// others (within `lockout`), and `known_elsewhere` whether it logged
    /// in from `ip` on one of them.
    pub(crate) fn account_wait_with(
        &self,
        user: &str,
        ip: IpAddr,
        (elsewhere, known_elsewhere): (u32, bool),
    ) -> Duration {
        let key = key(ip);
        let mut accounts = self.accounts();
        let here = match accounts.get_mut(account(user)) {
            None => 0,
            Some(a) => {
                if a.last.is_some_and(|t| t.elapsed() >= self.lockout) {
                    a.failures = 0;
                }
                if a.known.contains(&key) {
                    return Duration::ZERO;
                }
                a.failures
            }
        };
        let over = here.saturating_add(elsewhere).saturating_sub(ACCOUNT_FREE);
        if over == 0 || known_elsewhere {
            return Duration::ZERO;
        }
        // Said at the 1st, 2nd, 4th… slowed try: an account someone is
        // guessing from many addresses, without a line per guess.
        if over.is_power_of_two() {
            tracing::warn!(user = ?account(user), failures = here + elsewhere, "an account's slow path: its password attempts wait");
        }
        BASE_DELAY
            .saturating_mul(1 << (over - 1).min(8))
            .min(ACCOUNT_MAX_DELAY)
    }

    /// The name `user`'s failures are counted under (cut to a bound).
    pub(crate) fn account_key(user: &str) -> &str {
        account(user)
    }

    /// A wrong password for `user`.
    pub(crate) fn account_failed(&self, user: &str) {
        let now = Instant::now();
        let mut accounts = self.accounts();
        if accounts.len() >= PRUNE_AT {
            let lockout = self.lockout;
            accounts.retain(|_, a| {
                !a.known.is_empty() || a.last.is_some_and(|t| now.duration_since(t) < lockout)
            });
        }
        let a = accounts.entry(account(user).to_string()).or_default();
        a.failures += 1;
        a.last = Some(now);
    }

    /// `user` logged in from `ip`: that address is theirs from now on, and
    /// known to the bastion (see [`Caps`]).
    pub(crate) fn account_ok(&self, user: &str, ip: IpAddr) {
        let key = key(ip);
        let now = Instant::now();
        {
            let mut logged_in = self.logged_in.lock().unwrap_or_else(|e| e.into_inner());
            if logged_in.len() >= PRUNE_AT {
                logged_in.retain(|_, t| now.duration_since(*t) < KNOWN_FOR);
            }
            logged_in.insert(key, now);
        }
        let mut accounts = self.accounts();
        let a = accounts.entry(account(user).to_string()).or_default();
        if !a.known.contains(&key) {
            if a.known.len() == KNOWN_ADDRESSES {
                a.known.remove(0);
            }
            a.known.push(key);
        }
    }

    /// A failed login from `ip` (any kind, counted or not): an audit row is
    /// written for each of the first 16 failures of the address in a
    /// minute, then for the 32nd, 64th, 128th…, each carrying the count, so
    /// a flood costs the audit a few rows a minute instead of one per
    /// attempt. A rejected offer (`offer`) beyond
    /// the first few of the window waits, as a guess does, before it is
    /// answered.
    pub(crate) fn failure(&self, ip: IpAddr, offer: bool) -> Failure {
        let now = Instant::now();
        let key = key(ip);
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if windows.len() >= PRUNE_AT {
            windows.retain(|_, w| now.duration_since(w.started) < REPORT_WINDOW);
        }
        let w = windows.entry(key).or_insert(Window {
            started: now,
            failures: 0,
            offers: 0,
        });
        if now.duration_since(w.started) >= REPORT_WINDOW {
            *w = Window {
                started: now,
                failures: 0,
                offers: 0,
            };
        }
        w.failures += 1;
        let report =
            (w.failures <= ROWS_IN_FULL || w.failures.is_power_of_two()).then_some(w.failures);
        let wait = if offer {
            w.offers += 1;
            let over = w.offers.saturating_sub(FREE_OFFERS);
            if over == 0 {
                Duration::ZERO
            } else {
                BASE_DELAY
                    .saturating_mul(1 << (over - 1).min(8))
                    .min(MAX_DELAY)
            }
        } else {
            Duration::ZERO
        };
        Failure { report, wait }
    }

    /// A place for a new connection from `ip`, or `None` when the address
    /// already holds too many that have not logged in, or all addresses
    /// together hold as many as its kind may ([`Caps`]).
    pub(crate) fn admit(&self, ip: IpAddr) -> Option<Pending> {
        let key = key(ip);
        let cap = self.cap_for(key);
        let mut counts = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let n = counts.by_address.get(&key).copied().unwrap_or(0);
        if n >= MAX_PENDING || counts.total >= cap {
            return None;
        }
        counts.by_address.insert(key, n + 1);
        counts.total += 1;
        Some(Pending {
            counts: self.pending.clone(),
            key,
        })
    }

    /// The cap on all pending connections that applies to `key`: an
    /// address someone logged in from lately is known even if it failed
    /// since (people mistype; a locked-out one is refused at its first
    /// attempt anyway).
    fn cap_for(&self, key: IpAddr) -> u32 {
        let known = self
            .logged_in
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .is_some_and(|t| t.elapsed() < KNOWN_FOR);
        if known {
            return self.caps.known;
        }
        let failed = self.entries().get(&key).is_some_and(|e| e.failures > 0)
            || self
                .windows
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                .is_some_and(|w| w.started.elapsed() < REPORT_WINDOW);
        match failed {
            true => self.caps.failed,
            false => self.caps.anyone,
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts an attempt from `ip`, or `None` when the address is locked
    /// out or already has as many attempts in flight as it has guesses left.
    #[cfg(test)]
    pub(crate) fn begin(&self, ip: IpAddr) -> Option<Attempt<'_>> {
        self.begin_with(ip, 0)
    }

    /// [`Throttle::begin`], with `elsewhere` failures (and attempts under
    /// way) that other nodes sharing the audit saw from the address.
    pub(crate) fn begin_with(&self, ip: IpAddr, elsewhere: u32) -> Option<Attempt<'_>> {
        let now = Instant::now();
        let key = key(ip);
        let mut entries = self.entries();
        if entries.len() >= PRUNE_AT {
            let lockout = self.lockout;
            entries.retain(|_, e| e.in_flight > 0 || now.duration_since(e.last) < lockout);
        }
        let e = entries.entry(key).or_insert(Entry {
            failures: 0,
            in_flight: 0,
            last: now,
            locked_until: None,
        });
        if e.locked_until.is_some_and(|until| until > now) {
            return None;
        }
        // Failures long ago are forgiven, as is a lockout that has run out.
        if e.locked_until.is_some() || now.duration_since(e.last) >= self.lockout {
            e.failures = 0;
            e.locked_until = None;
        }
        if e.failures
            .saturating_add(elsewhere)
            .saturating_add(e.in_flight)
            >= self.max_failures
        {
            return None;
        }
        e.in_flight += 1;
        Some(Attempt {
            throttle: self,
            key,
            settle: None,
        })
    }

    /// Whether `ip` is locked out here now (nothing reserved, nothing
    /// asked of other nodes).
    pub(crate) fn locked(&self, ip: IpAddr) -> bool {
        let now = Instant::now();
        let entries = self.entries();
        entries.get(&key(ip)).is_some_and(|e| {
            e.locked_until.is_some_and(|until| until > now)
                || (now.duration_since(e.last) < self.lockout
                    && e.failures.saturating_add(e.in_flight) >= self.max_failures)
        })
    }

    pub(crate) fn max_failures(&self) -> u32 {
        self.max_failures
    }
}

impl Throttle {
    /// How the throttle counts `ip`: IPv4 as is, IPv6 by /64.
    pub(crate) fn key_of(ip: IpAddr) -> IpAddr {
        key(ip)
    }

    pub(crate) fn lockout(&self) -> Duration {
        self.lockout
    }
}

impl<'a> Attempt<'a> {
    /// `settle` is told how the attempt ends (true: it failed).
    pub(crate) fn settled_by(mut self, settle: impl FnOnce(bool) + Send + 'a) -> Attempt<'a> {
        self.settle = Some(Box::new(settle));
        self
    }

    /// Records the failure; returns how long to wait before answering it.
    pub(crate) fn failed(mut self) -> Duration {
        if let Some(settle) = self.settle.take() {
            settle(true);
        }
        let now = Instant::now();
        let mut entries = self.throttle.entries();
        let Some(e) = entries.get_mut(&self.key) else {
            return MAX_DELAY;
        };
        e.failures += 1;
        e.last = now;
        if e.failures >= self.throttle.max_failures {
            e.locked_until = Some(now + self.throttle.lockout);
        }
        let doublings = (e.failures - 1).min(8);
        (BASE_DELAY * 2u32.pow(doublings)).min(MAX_DELAY)
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if let Some(settle) = self.settle.take() {
            settle(false);
        }
        if let Some(e) = self.throttle.entries().get_mut(&self.key) {
            e.in_flight = e.in_flight.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Other nodes' failures count with this one's; an attempt settled as
    /// failed keeps its shared row, one that succeeds gives it back.
    #[test]
    fn other_nodes_failures_count_and_attempts_settle() {
        let t = Throttle::new(3, Duration::from_secs(60));
        let a = ip("192.0.2.9");
        assert!(t.begin_with(a, 3).is_none(), "three elsewhere: locked");
        let settled = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = settled.clone();
        let first = t
            .begin_with(a, 1)
            .unwrap()
            .settled_by(move |failed| s.lock().unwrap().push(failed));
        // One elsewhere and one in flight here: one more may still try.
        assert!(t.begin_with(a, 1).is_some());
        first.failed();
        let s = settled.clone();
        drop(
            t.begin_with(a, 1)
                .unwrap()
                .settled_by(move |failed| s.lock().unwrap().push(failed)),
        );
        assert_eq!(*settled.lock().unwrap(), [true, false]);
        assert!(!t.locked(a));
        t.begin_with(a, 0).unwrap().failed();
        t.begin_with(a, 0).unwrap().failed();
        assert!(t.locked(a));
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn delay_grows_then_locks_out() {
        let t = Throttle::new(3, Duration::from_secs(60));
        let d1 = t.begin(ip("192.0.2.1")).unwrap().failed();
        let d2 = t.begin(ip("192.0.2.1")).unwrap().failed();
        assert!(d2 > d1);
        t.begin(ip("192.0.2.1")).unwrap().failed();
        assert!(t.begin(ip("192.0.2.1")).is_none());
        assert!(t.begin(ip("192.0.2.2")).is_some());
    }

    #[test]
    fn attempts_in_flight_count_against_the_limit() {
        let t = Throttle::new(2, Duration::from_secs(60));
        let a = t.begin(ip("192.0.2.1")).unwrap();
        let b = t.begin(ip("192.0.2.1")).unwrap();
        assert!(t.begin(ip("192.0.2.1")).is_none());
        drop(a);
        b.failed();
        // One failure and nothing in flight: one guess left.
        let c = t.begin(ip("192.0.2.1")).unwrap();
        assert!(t.begin(ip("192.0.2.1")).is_none());
        drop(c);
    }

    #[test]
    fn a_lockout_runs_out() {
        let t = Throttle::new(1, Duration::from_millis(1));
        t.begin(ip("192.0.2.1")).unwrap().failed();
        std::thread::sleep(Duration::from_millis(5));
        assert!(t.begin(ip("192.0.2.1")).is_some());
    }

    #[test]
    fn pending_connections_are_capped_per_address() {
        let t = Throttle::new(5, Duration::from_secs(60));
        let held: Vec<_> = (0..MAX_PENDING)
            .map(|_| t.admit(ip("192.0.2.1")).unwrap())
            .collect();
        assert!(t.admit(ip("192.0.2.1")).is_none());
        assert!(t.admit(ip("192.0.2.2")).is_some());
        drop(held);
        assert!(t.admit(ip("192.0.2.1")).is_some());
    }

    #[test]
    fn ipv6_counts_per_64() {
        let t = Throttle::new(1, Duration::from_secs(60));
        t.begin(ip("2001:db8:1:2::1")).unwrap().failed();
        assert!(t.begin(ip("2001:db8:1:2::ffff")).is_none());
        assert!(t.begin(ip("2001:db8:1:3::1")).is_some());
        assert!(t.begin(ip("::ffff:192.0.2.9")).is_some());
    }

    #[test]
    fn a_flood_of_failures_costs_a_few_rows_and_offers_wait() {
        let t = Throttle::new(5, Duration::from_secs(60));
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let reports: Vec<u64> = (0..1000)
            .filter_map(|_| t.failure(ip, false).report)
            .collect();
        let mut want: Vec<u64> = (1..=16).collect();
        want.extend([32, 64, 128, 256, 512]);
        assert_eq!(reports, want);
        // Another address has its own count.
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        assert_eq!(t.failure(other, true).report, Some(1));
        let waits: Vec<Duration> = (0..20).map(|_| t.failure(other, true).wait).collect();
        assert!(waits[..15].iter().all(|w| w.is_zero()), "{waits:?}");
        assert_eq!(waits[15], BASE_DELAY);
        assert_eq!(waits[16], BASE_DELAY * 2);
        assert!(waits.iter().all(|w| *w <= MAX_DELAY));
    }

    #[test]
    fn all_addresses_together_are_capped_and_known_ones_go_first() {
        let mut t = Throttle::new(5, Duration::from_secs(60));
        t.caps = Caps {
            failed: 3,
            anyone: 5,
            known: 7,
        };
        let addr = |i: u8| -> IpAddr { format!("198.51.100.{i}").parse().unwrap() };
        let (failed, known) = (addr(200), addr(201));
        t.failure(failed, true);
        t.account_ok("alice", known);
        t.failure(known, false);
        let held: Vec<Pending> = (0..3).map(|i| t.admit(addr(i)).unwrap()).collect();
        assert!(
            t.admit(failed).is_none(),
            "past the first cap, an address that failed waits"
        );
        let more: Vec<Pending> = (3..5).map(|i| t.admit(addr(i)).unwrap()).collect();
        assert!(
            t.admit(addr(9)).is_none(),
            "past the second, new addresses wait"
        );
        // A flood of new addresses leaves room for one people log in from,
        // even after a typo.
        let theirs: Vec<Pending> = (0..2).map(|_| t.admit(known).unwrap()).collect();
        assert!(t.admit(known).is_none(), "past the third, nobody");
        drop((more, held, theirs));
        assert!(t.admit(failed).is_some());
    }

    /// Several nodes: the account's failures on the others count with
    /// this one's, and an address it logged in from on another is spared.
    #[test]
    fn other_nodes_failures_count_toward_an_accounts_slow_path() {
        let t = Throttle::new(5, Duration::from_secs(60));
        let there = ip("198.51.100.7");
        for _ in 0..4 {
            t.account_failed("alice");
        }
        assert_eq!(
            t.account_wait_with("alice", there, (6, false)),
            Duration::ZERO
        );
        t.account_failed("alice");
        assert!(t.account_wait_with("alice", there, (6, false)) > Duration::ZERO);
        assert_eq!(
            t.account_wait_with("alice", there, (6, true)),
            Duration::ZERO
        );
        assert!(t.account_wait_with("carol", there, (11, false)) > Duration::ZERO);
        assert_eq!(t.account_wait("carol", there), Duration::ZERO);
    }

    #[test]
    fn guesses_from_many_addresses_slow_down_but_never_lock_out_the_owner() {
        let t = Throttle::new(5, Duration::from_secs(60));
        let home = ip("203.0.113.1");
        t.account_ok("alice", home);
        for i in 0..ACCOUNT_FREE {
            assert_eq!(
                t.account_wait("alice", ip(&format!("198.51.100.{i}"))),
                Duration::ZERO
            );
            t.account_failed("alice");
        }
        let waits: Vec<Duration> = (0..12)
            .map(|_| {
                let w = t.account_wait("alice", ip("198.51.100.99"));
                t.account_failed("alice");
                w
            })
            .collect();
        assert_eq!(waits[0], Duration::ZERO);
        assert_eq!(waits[1], BASE_DELAY);
        assert_eq!(waits[2], BASE_DELAY * 2);
        assert_eq!(*waits.last().unwrap(), ACCOUNT_MAX_DELAY);
        // The owner's own address is never slowed; other accounts neither.
        assert_eq!(t.account_wait("alice", home), Duration::ZERO);
        assert_eq!(t.account_wait("bob", ip("198.51.100.99")), Duration::ZERO);
    }
}
