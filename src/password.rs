//! Password hashing and verification: argon2id PHC strings.
//!
//! Verification is deliberately slow (tens of milliseconds of CPU and
//! ~19 MiB of memory each), so [`Verifier`] runs it on tokio's blocking pool
//! with a bounded number at a time: a flood of login attempts queues up
//! instead of stalling live sessions or exhausting memory.

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use argon2::{Algorithm, Argon2, Params, Version};
use tokio::sync::Semaphore;

/// Bounds on accepted hash parameters: below them a hash is too cheap to
/// protect anything, above them one login could tie up the host.
const MIN_M_KIB: u32 = 8 * 1024;
const MAX_M_KIB: u32 = 1024 * 1024;
const MAX_T: u32 = 16;
const MAX_P: u32 = 16;

/// Hashes a password with argon2id (default parameters) and a random salt.
pub(crate) fn hash(password: &str) -> Result<String, String> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| format!("cannot hash password: {e}"))
}

/// The salt and hash of every password hash written in walissh's own
/// examples (etc/, the docs, the README, older releases' sample config).
/// Their passwords are public, so a config that copied one lets anyone in.
/// `every_hash_in_the_repositorys_examples_is_refused` keeps this complete.
const EXAMPLE_HASHES: &[&str] = &[
    // etc/walissh.toml (alice, "secret"), shipped live by earlier packages.
    "gogEsck8BfJBp6kcDqo+oQ$4Q9yMwdMw2I+4DdJ2yOoEinAFuFJn3iK+dr99hjzfpg",
    // etc/triage.toml before it took a key instead.
    "c29tZXNhbHQxMjM0NTY$3o2nY0f6WQ6cV9cV3Zyq1gD8sH0x3m4b8iJk3mQq7hE",
];

/// Checks that `phc` is an argon2id PHC string with sane parameters, and
/// not one of walissh's own examples.
pub(crate) fn check_hash(phc: &str) -> Result<(), String> {
    let parsed = PasswordHash::new(phc).map_err(|e| format!("not a PHC hash string: {e}"))?;
    // Compared on salt and hash alone: the parameters can be spelt another
    // way without changing what the hash accepts.
    let salt_and_hash = phc.rsplitn(3, '$').collect::<Vec<_>>();
    if let [hash, salt, _] = salt_and_hash[..]
        && EXAMPLE_HASHES.contains(&format!("{salt}${hash}").as_str())
    {
        return Err(
            "this is an example hash from walissh's own files, whose password \
             is public: make your own with `walissh hash-password`"
                .to_string(),
        );
    }
    if parsed.algorithm.as_str() != "argon2id" {
        return Err(format!(
            "`{}` is not argon2id (make one with walissh hash-password)",
            parsed.algorithm
        ));
    }
    let p = Params::try_from(&parsed).map_err(|e| format!("bad argon2 parameters: {e}"))?;
    if !(MIN_M_KIB..=MAX_M_KIB).contains(&p.m_cost()) || p.t_cost() > MAX_T || p.p_cost() > MAX_P {
        return Err(format!(
            "argon2 parameters m={},t={},p={} are outside m={MIN_M_KIB}..{MAX_M_KIB}, t<={MAX_T}, p<={MAX_P}",
            p.m_cost(),
            p.t_cost(),
            p.p_cost()
        ));
    }
    Ok(())
}

/// Verifies passwords off the async runtime, a few at a time, and so
/// that a wrong answer takes as long whoever was asked for.
pub(crate) struct Verifier {
    slots: Semaphore,
    /// A hash nobody's password matches, with the costliest parameters
    /// among the configured hashes, so an unknown user costs what the
    /// slowest known one does.
    dummy: String,
    /// The dummy's parameters: hashes with them cost what it does.
    params: (u32, u32, u32),
    /// How long verifying a hash at the dummy's parameters takes, in
    /// nanoseconds: measured at start, then at each unknown user and each
    /// user with the costliest parameters, quick to rise and slow to fall.
    /// No failure is answered sooner than [`Verifier::floor`], half again
    /// as long, so a user whose hash is cheaper does not stand out from
    /// the others, nor from unknown users, whose own verifications finish
    /// under it.
    costliest_ns: AtomicU64,
}

/// How far above the costliest verification's time failures are answered.
const FLOOR_MARGIN: f64 = 1.5;

fn triple(p: &Params) -> (u32, u32, u32) {
    (p.m_cost(), p.t_cost(), p.p_cost())
}

impl Verifier {
    /// `hashes` are the configured hashes; the costliest parameters among
    /// them are used for the dummy that unknown users are verified against.
    pub(crate) fn new<'a>(hashes: impl IntoIterator<Item = &'a str>) -> Result<Verifier, String> {
        let cost = |p: &Params| (u64::from(p.m_cost()) * u64::from(p.t_cost()), p.p_cost());
        let params = hashes
            .into_iter()
            .filter_map(|s| PasswordHash::new(s).ok())
            .filter_map(|h| Params::try_from(&h).ok())
            .max_by_key(cost)
            .unwrap_or_default();
        let random: [u8; 32] = rand::random();
        let costliest = triple(&params);
        let dummy = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password(&random)
            .map_err(|e| format!("cannot prepare password verification: {e}"))?
            .to_string();
        let started = std::time::Instant::now();
        verify("", &dummy);
        let took = started.elapsed();
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Ok(Verifier {
            slots: Semaphore::new(cores * 2),
            dummy,
            params: costliest,
            costliest_ns: AtomicU64::new(took.as_nanos() as u64),
        })
    }

    /// No failure is answered sooner than this after it was asked.
    fn floor(&self) -> Duration {
        Duration::from_nanos(self.costliest_ns.load(Ordering::Relaxed)).mul_f64(FLOOR_MARGIN)
    }

    /// Whether `phc` costs what the dummy does.
    fn costliest(&self, phc: &str) -> bool {
        PasswordHash::new(phc)
            .ok()
            .and_then(|h| Params::try_from(&h).ok())
            .is_some_and(|p| triple(&p) == self.params)
    }

    /// Counts one verification at the costliest parameters: half the way
    /// up to a slower one at once, an eighth of the way down to a faster.
    fn costliest_took(&self, took: Duration) {
        let sample = took.as_nanos() as u64;
        let _ = self
            .costliest_ns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |avg| {
                Some(match sample > avg {
                    true => avg / 2 + sample / 2,
                    false => avg - avg / 8 + sample / 8,
                })
            });
    }

    /// Whether `password` matches `phc`. `None` (an unknown user, or one
    /// without a password) spends the time of a real verification too,
    /// and no failure is answered before the dummy's time.
    pub(crate) async fn verify(&self, password: String, phc: Option<String>) -> bool {
        let started = tokio::time::Instant::now();
        let ok = {
            let Ok(_slot) = self.slots.acquire().await else {
                return false;
            };
            let known = phc.is_some();
            let phc = phc.unwrap_or_else(|| self.dummy.clone());
            let costliest = !known || self.costliest(&phc);
            let began = std::time::Instant::now();
            let ok = tokio::task::spawn_blocking(move || verify(&password, &phc))
                .await
                .unwrap_or(false);
            if costliest {
                self.costliest_took(began.elapsed());
            }
            ok && known
        };
        if !ok {
            tokio::time::sleep_until(started + self.floor()).await;
        }
        ok
    }
}

fn verify(password: &str, phc: &str) -> bool {
    Argon2::default()
        .verify_password(password.as_bytes(), phc)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = hash("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        check_hash(&h).unwrap();
        assert!(verify("correct horse", &h));
        assert!(!verify("wrong", &h));
        assert!(check_hash("plaintext").is_err());
    }

    /// Every argon2 hash written in a file an operator copies from (the
    /// sample configs, the docs, the README, the packaging) is refused.
    #[test]
    fn every_hash_in_the_repositorys_examples_is_refused() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
        for dir in ["etc", "docs", "packaging", "systemd", "tools"] {
            walk(&root.join(dir), &mut files);
        }
        let mut found = 0;
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            for (at, _) in text.match_indices("$argon2") {
                let phc: String = text[at..]
                    .chars()
                    .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\'' | '`'))
                    .collect();
                if PasswordHash::new(&phc).is_ok() {
                    found += 1;
                    assert!(check_hash(&phc).is_err(), "{}: {phc}", file.display());
                }
            }
        }
        // etc/walissh.toml's commented example at least.
        assert!(found >= 1);
        let example = "$argon2id$v=19$m=19456,t=2,p=1$gogEsck8BfJBp6kcDqo+oQ$4Q9yMwdMw2I+4DdJ2yOoEinAFuFJn3iK+dr99hjzfpg";
        assert!(check_hash(example).unwrap_err().contains("example"));
        assert!(verify("secret", example));
        // The same salt and hash with its parameters spelt out otherwise.
        let respelt = example.replace("m=19456,t=2,p=1", "t=2,m=19456,p=1");
        assert!(check_hash(&respelt).is_err());
    }

    fn walk(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match path.is_dir() {
                true => walk(&path, files),
                false => files.push(path),
            }
        }
    }

    #[test]
    fn weak_or_other_hashes_are_refused() {
        let argon2i =
            "$argon2i$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$ixF1BqkRDQwdhmLu6mG7wKcQ5FwjOJbbSSMvNQ9OUnI";
        assert!(check_hash(argon2i).unwrap_err().contains("not argon2id"));
        let cheap =
            "$argon2id$v=19$m=8,t=1,p=1$c29tZXNhbHQ$ixF1BqkRDQwdhmLu6mG7wKcQ5FwjOJbbSSMvNQ9OUnI";
        assert!(check_hash(cheap).unwrap_err().contains("outside"));
    }

    #[test]
    fn the_floor_rises_at_once_and_falls_slowly() {
        let v = Verifier::new(None).unwrap();
        v.costliest_ns.store(1_000_000, Ordering::Relaxed);
        v.costliest_took(Duration::from_millis(3));
        assert_eq!(v.floor(), Duration::from_millis(3));
        v.costliest_took(Duration::ZERO);
        assert_eq!(v.costliest_ns.load(Ordering::Relaxed), 1_750_000);
    }

    #[tokio::test]
    async fn unknown_users_never_match() {
        let v = Verifier::new(None).unwrap();
        let h = hash("pw").unwrap();
        assert!(v.verify("pw".into(), Some(h)).await);
        assert!(!v.verify("pw".into(), None).await);
    }

    /// A cheap hash among costly ones: the dummy takes the costliest
    /// parameters, and a wrong password for the cheap one is answered no
    /// sooner than the dummy's time (a lower bound the verifier keeps).
    #[tokio::test]
    async fn a_cheap_hash_does_not_stand_out() {
        let params = |m, t| Params::new(m, t, 1, None).unwrap();
        let with = |p: Params, pw: &str| {
            Argon2::new(Algorithm::Argon2id, Version::V0x13, p)
                .hash_password(pw.as_bytes())
                .unwrap()
                .to_string()
        };
        let cheap = with(params(MIN_M_KIB, 1), "cheap");
        let costly = with(params(MIN_M_KIB * 4, 4), "costly");
        let v = Verifier::new([cheap.as_str(), costly.as_str()]).unwrap();
        let dummy = PasswordHash::new(&v.dummy).unwrap();
        let p = Params::try_from(&dummy).unwrap();
        assert_eq!((p.m_cost(), p.t_cost()), (MIN_M_KIB * 4, 4));
        let started = tokio::time::Instant::now();
        assert!(!v.verify("wrong".into(), Some(cheap.clone())).await);
        assert!(started.elapsed() >= v.floor());
        assert!(v.verify("cheap".into(), Some(cheap)).await);
    }
}
