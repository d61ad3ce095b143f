//! TOTP second factors (RFC 6238): enrolment, the secrets at rest, and
//! checking a code.
//!
//! Secrets live in `<state_dir>/totp.json`, each sealed with AES-256-GCM
//! under `<state_dir>/totp.key` (made at first enrolment, mode 0600, read
//! only by walissh's account), with the user's name as associated data so
//! a sealed secret cannot be moved to another user. The file also keeps,
//! per user, the last time step a code was accepted for: a code is good
//! once, and a replay within its window is refused.
//!
//! Codes are 6 digits, 30-second steps, SHA-1 (what every authenticator
//! app speaks), accepted one step either side. The arithmetic is
//! `totp-rs`'s. Wrong codes lock the account's codes here, whatever
//! address they come from: whoever sends one had the first factor, and the
//! address throttle alone (the handler's) would let many addresses guess
//! in parallel. The count is kept in the file, beside the secret, so an
//! enrolment (which replaces the entry) unlocks a running bastion, and a
//! restart does not. Asking for the code is `server`'s.
//!
//! Every change is read, modified and written whole under an exclusive
//! lock on `totp.lock`, so `walissh totp enroll` (another process) and the
//! bastion's checks never lose each other's writes. An enrolment also
//! claims its user (`totp.enroll/`) until its URI has been shown: a second
//! enrolment of the same user meanwhile fails at once, so the one that
//! reports success is the one whose secret is stored. All of it is file
//! I/O: callers run it on blocking threads.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use aes_gcm::{Aes256Gcm, Key};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use totp_rs::{Algorithm, Totp};

/// The issuer authenticator apps show beside the account.
const ISSUER: &str = "walissh";
const DIGITS: u8 = 6;
const STEP_S: u64 = 30;
/// Steps either side of now that are accepted (clock skew).
const SKEW: u16 = 1;
/// 160 bits, as RFC 4226 recommends.
const SECRET_BYTES: usize = 20;
/// A store larger than this is not read (one user's entry is ~120 bytes).
const MAX_STORE: u64 = 16 << 20;

/// The enrolled users' secrets, on disk.
pub(crate) struct SecretStore {
    dir: PathBuf,
    /// Wrong codes an account may have before its codes are locked...
    max_wrong: u32,
    /// ...for this many seconds after the last one.
    lockout_s: u64,
}

/// A new enrolment, stored: its URI, to be shown while `_claim` keeps any
/// other enrolment of the user out.
pub(crate) struct Enrolled {
    /// The `otpauth://` URI (it holds the secret).
    pub(crate) uri: String,
    /// Whether it replaced a secret.
    pub(crate) replaced: bool,
    _claim: Flock<std::fs::File>,
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    users: BTreeMap<String, Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    /// base64 of nonce ‖ AES-256-GCM(secret).
    sealed: String,
    /// The last step a code was accepted for.
    #[serde(default)]
    last_step: u64,
    /// Wrong (or reused) codes since the last good one...
    #[serde(default, skip_serializing_if = "is_zero")]
    wrong: u32,
    /// ...and when the last of them came (seconds since the epoch).
    #[serde(default, skip_serializing_if = "is_zero")]
    last_wrong: u64,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// The result of checking a code.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CodeVerdict {
    Good,
    Wrong,
    /// Right, but already used (its step or a later one was accepted).
    Replayed,
    NotEnrolled,
    /// Too many wrong codes lately: not checked.
    Locked,
}

impl SecretStore {
    /// A store in `state_dir`; an account's codes lock after `max_wrong`
    /// wrong ones, for `lockout` after the last.
    pub(crate) fn new(state_dir: &Path, max_wrong: u32, lockout: Duration) -> SecretStore {
        SecretStore {
            dir: state_dir.to_path_buf(),
            max_wrong: max_wrong.max(1),
            lockout_s: lockout.as_secs(),
        }
    }

    /// Holds the file lock while `f` reads and writes the store. The lock
    /// is taken on a file opened for this call, so it also keeps out the
    /// other threads of this process (`flock` locks belong to the open).
    fn locked<T>(&self, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
        let path = self.dir.join("totp.lock");
        let _lock = Flock::lock(lock_file(&path)?, FlockArg::LockExclusive)
            .map_err(|(_, e)| format!("{}: {e}", path.display()))?;
        f()
    }

    /// Claims `user`'s enrolment, or says another is under way. Not
    /// waited for: two enrolments at once are a mistake, and the later one
    /// would replace the secret the earlier one has just shown.
    fn claim(&self, user: &str) -> Result<Flock<std::fs::File>, String> {
        let dir = self.dir.join("totp.enroll");
        crate::keys::create_private_dir(&dir)?;
        // Hex: any user name makes one plain file name.
        let name: String = user.bytes().map(|b| format!("{b:02x}")).collect();
        let path = dir.join(format!("{name}.lock"));
        Flock::lock(lock_file(&path)?, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
            match e {
                nix::errno::Errno::EWOULDBLOCK => format!(
                    "another `walissh totp enroll {user}` is under way: its secret is the one kept, this one stored nothing"
                ),
                e => format!("{}: {e}", path.display()),
            }
        })
    }

    /// Enrolment writes files the bastion must read: refused unless it
    /// runs as the state directory's owner (root would leave files the
    /// bastion's account cannot read, and every code would fail).
    fn check_owner(&self) -> Result<(), String> {
        let meta =
            std::fs::metadata(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let me = nix::unistd::geteuid().as_raw();
        match meta.uid() == me {
            true => Ok(()),
            false => Err(format!(
                "{} belongs to uid {}: run this as that account (the one walissh runs as)",
                self.dir.display(),
                meta.uid()
            )),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join("totp.json")
    }

    fn key_path(&self) -> PathBuf {
        self.dir.join("totp.key")
    }

    /// Makes a new secret for `user`, replacing any (and so unlocking its
    /// codes). What comes back holds the user's claim: no other enrolment
    /// of them can replace the secret until it is dropped, after its URI
    /// has been shown.
    pub(crate) fn enroll(&self, user: &str) -> Result<Enrolled, String> {
        self.check_owner()?;
        let claim = self.claim(user)?;
        let secret: [u8; SECRET_BYTES] = rand::random();
        let uri = totp(&secret, user)?
            .to_url()
            .map_err(|e| format!("cannot make the otpauth URI: {e}"))?;
        let replaced = self.locked(|| {
            let key = self.key(true)?;
            let mut file = self.read()?;
            let sealed = seal(&key, user, &secret)?;
            let entry = Entry {
                sealed: sealed.clone(),
                last_step: 0,
                wrong: 0,
                last_wrong: 0,
            };
            let replaced = file.users.insert(user.to_string(), entry).is_some();
            self.write(&file)?;
            // Read back, still under the lock: what the URI shows is what
            // logins will check.
            match self.read()?.users.get(user) {
                Some(e) if e.sealed == sealed => Ok(replaced),
                _ => Err(format!("{user}'s secret was not stored; enrol again")),
            }
        })?;
        Ok(Enrolled {
            uri,
            replaced,
            _claim: claim,
        })
    }

    /// Checks `code` for `user` at `now` (seconds since the epoch), and
    /// uses it up when it is good.
    ///
    /// Checks run one at a time (under the file lock), so wrong codes sent
    /// in parallel are counted before the next is looked at, by whichever
    /// process checks them.
    pub(crate) fn check(&self, user: &str, code: &str, now: u64) -> Result<CodeVerdict, String> {
        self.locked(|| self.check_unlocked(user, code, now))
    }

    fn check_unlocked(&self, user: &str, code: &str, now: u64) -> Result<CodeVerdict, String> {
        let mut file = self.read()?;
        let Some(entry) = file.users.get_mut(user) else {
            return Ok(CodeVerdict::NotEnrolled);
        };
        // A clock set back counts as no time passed: the lock holds.
        let quiet = now.saturating_sub(entry.last_wrong) >= self.lockout_s;
        if entry.wrong >= self.max_wrong && !quiet {
            return Ok(CodeVerdict::Locked);
        }
        if quiet {
            entry.wrong = 0;
        }
        let key = self.key(false)?;
        let verdict = judge(&open(&key, user, &entry.sealed)?, user, code, now, entry)?;
        match verdict {
            CodeVerdict::Good => entry.wrong = 0,
            _ => {
                entry.wrong = entry.wrong.saturating_add(1);
                entry.last_wrong = now;
            }
        }
        self.write(&file)?;
        Ok(verdict)
    }

    fn read(&self) -> Result<File, String> {
        let path = self.path();
        let text = match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(File::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
            Ok(m) if m.len() > MAX_STORE => {
                return Err(format!("{}: larger than 16 MiB", path.display()));
            }
            Ok(_) => {
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?
            }
        };
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Written whole to a new file, then renamed over the old one: a crash
    /// leaves one or the other, never half.
    fn write(&self, file: &File) -> Result<(), String> {
        let path = self.path();
        let tmp = self.dir.join("totp.json.new");
        let text = serde_json::to_vec_pretty(file).map_err(|e| e.to_string())?;
        // What a crash may have left of an earlier write.
        let _ = std::fs::remove_file(&tmp);
        crate::keys::write_secret(&tmp, &text)?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
        // The rename itself is durable once the directory is.
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| format!("{}: {e}", self.dir.display()))
    }

    /// The sealing key; made (0600) when `create` and there is none.
    fn key(&self, create: bool) -> Result<Key<Aes256Gcm>, String> {
        let path = self.key_path();
        match std::fs::read(&path) {
            Ok(bytes) => <[u8; 32]>::try_from(bytes.as_slice())
                .map(Key::<Aes256Gcm>::from)
                .map_err(|_| format!("{}: not a 32-byte key", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                let bytes: [u8; 32] = rand::random();
                crate::keys::write_secret(&path, &bytes)?;
                Ok(Key::<Aes256Gcm>::from(bytes))
            }
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }
}

/// Opens a lock file (made 0600 when missing).
fn lock_file(path: &Path) -> Result<std::fs::File, String> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The verdict on `code` for `secret`; a good one is used up in `entry`.
fn judge(
    secret: &[u8],
    user: &str,
    code: &str,
    now: u64,
    entry: &mut Entry,
) -> Result<CodeVerdict, String> {
    let totp = totp(secret, user)?;
    // Spaces as apps show them ("123 456") are not part of the code.
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if code.len() != DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(CodeVerdict::Wrong);
    }
    let Some(step) = totp.check(&code, now) else {
        return Ok(CodeVerdict::Wrong);
    };
    if step <= entry.last_step {
        return Ok(CodeVerdict::Replayed);
    }
    entry.last_step = step;
    Ok(CodeVerdict::Good)
}

fn totp(secret: &[u8], user: &str) -> Result<Totp, String> {
    totp_rs::Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(DIGITS)
        .with_skew(SKEW)
        .with_step_duration(STEP_S)
        .with_secret(secret.to_vec())
        .with_issuer(Some(ISSUER))
        .with_account_name(user)
        .build()
        .map_err(|e| format!("cannot make a TOTP for {user}: {e}"))
}

fn seal(key: &Key<Aes256Gcm>, user: &str, secret: &[u8]) -> Result<String, String> {
    crate::sealed::seal(key, user.as_bytes(), secret)
        .ok_or_else(|| "cannot seal the secret".to_string())
}

fn open(key: &Key<Aes256Gcm>, user: &str, sealed: &str) -> Result<Vec<u8>, String> {
    crate::sealed::open(key, user.as_bytes(), sealed)
        .ok_or_else(|| format!("the TOTP secret of {user} cannot be opened (wrong totp.key?)"))
}

/// The code for `uri`'s secret at `now`: for tests, which answer prompts
/// as an authenticator app would.
#[cfg(test)]
pub(crate) fn code_for(uri: &str, now: u64) -> String {
    Totp::from_url(uri).unwrap().generate(now).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> SecretStore {
        SecretStore::new(dir, 100, Duration::from_secs(300))
    }

    #[test]
    fn a_code_is_good_once_and_secrets_are_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        assert_eq!(
            store.check("alice", "123456", 0).unwrap(),
            CodeVerdict::NotEnrolled
        );
        let uri = store.enroll("alice").unwrap().uri;
        assert!(uri.starts_with("otpauth://totp/walissh:alice?"), "{uri}");
        let now = 1_800_000_000;
        let code = code_for(&uri, now);
        // The secret is not in the file as it is in the URI.
        let secret = uri
            .split("secret=")
            .nth(1)
            .unwrap()
            .split('&')
            .next()
            .unwrap();
        let stored = std::fs::read_to_string(dir.path().join("totp.json")).unwrap();
        assert!(!stored.contains(secret));
        assert_eq!(store.check("alice", &code, now).unwrap(), CodeVerdict::Good);
        assert_eq!(
            store.check("alice", &code, now).unwrap(),
            CodeVerdict::Replayed
        );
        // One step either side is accepted; two are not.
        let next = code_for(&uri, now + 30);
        assert_eq!(store.check("alice", &next, now).unwrap(), CodeVerdict::Good);
        let far = code_for(&uri, now + 120);
        assert_eq!(
            store.check("alice", &far, now + 30).unwrap(),
            CodeVerdict::Wrong
        );
        // An older code after a newer one is a replay, not a second chance.
        let old = code_for(&uri, now - 30);
        assert_eq!(
            store.check("alice", &old, now).unwrap(),
            CodeVerdict::Replayed
        );
        for bad in ["", "12345", "1234567", "abcdef", "12345\u{0660}"] {
            assert_eq!(
                store.check("alice", bad, now).unwrap(),
                CodeVerdict::Wrong,
                "{bad}"
            );
        }
        // A sealed secret moved to another user does not open.
        let moved = stored.replace("\"alice\"", "\"bob\"");
        std::fs::write(dir.path().join("totp.json"), moved).unwrap();
        assert!(store.check("bob", &code, now).is_err());
        let mode = std::fs::metadata(dir.path().join("totp.key")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn wrong_codes_lock_the_account_not_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::new(dir.path(), 3, Duration::from_secs(300));
        let alice = store.enroll("alice").unwrap().uri;
        let bob = store.enroll("bob").unwrap().uri;
        let now = 1_800_000_000;
        for _ in 0..3 {
            assert_eq!(
                store.check("alice", "000000", now).unwrap(),
                CodeVerdict::Wrong
            );
        }
        // Locked: even the right code is not looked at.
        let good = code_for(&alice, now);
        assert_eq!(
            store.check("alice", &good, now).unwrap(),
            CodeVerdict::Locked
        );
        assert_eq!(
            store.check("bob", &code_for(&bob, now), now).unwrap(),
            CodeVerdict::Good
        );
        // A new enrolment (the administrator's answer) unlocks.
        let alice = store.enroll("alice").unwrap().uri;
        assert_eq!(
            store.check("alice", &code_for(&alice, now), now).unwrap(),
            CodeVerdict::Good
        );
        // The count is in the file: a restarted bastion (a new store on
        // the same directory) finds bob locked as he was.
        for _ in 0..3 {
            assert_eq!(
                store.check("bob", "000000", now).unwrap(),
                CodeVerdict::Wrong
            );
        }
        let restarted = SecretStore::new(dir.path(), 3, Duration::from_secs(300));
        let bob_now = code_for(&bob, now + 30);
        assert_eq!(
            restarted.check("bob", &bob_now, now + 30).unwrap(),
            CodeVerdict::Locked
        );
        // Wrong codes are forgotten once the lockout has passed.
        let short = SecretStore::new(dir.path(), 1, Duration::ZERO);
        assert_eq!(
            short.check("bob", "000000", now).unwrap(),
            CodeVerdict::Wrong
        );
        assert_eq!(
            short.check("bob", &code_for(&bob, now + 30), now).unwrap(),
            CodeVerdict::Good
        );
    }

    /// While one enrolment of a user is under way (its URI not shown yet),
    /// another fails and stores nothing; other users are not held up.
    #[test]
    fn a_second_enrolment_of_a_user_meanwhile_fails() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (store(dir.path()), store(dir.path()));
        let first = a.enroll("alice").unwrap();
        assert!(!first.replaced);
        let err = b.enroll("alice").err().unwrap();
        assert!(err.contains("under way"), "{err}");
        b.enroll("bob").unwrap();
        let now = 1_800_000_000;
        let code = code_for(&first.uri, now);
        assert_eq!(a.check("alice", &code, now).unwrap(), CodeVerdict::Good);
        drop(first);
        assert!(b.enroll("alice").unwrap().replaced);
    }

    /// Two stores on one directory stand for two processes (the bastion
    /// and `walissh totp enroll`): neither loses the other's writes.
    #[test]
    fn processes_do_not_lose_each_others_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (store(dir.path()), store(dir.path()));
        let uri = a.enroll("checker").unwrap().uri;
        let now = 1_800_000_000u64;
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..40u64 {
                    let t = now + i * 30;
                    assert_eq!(
                        a.check("checker", &code_for(&uri, t), t).unwrap(),
                        CodeVerdict::Good
                    );
                }
            });
            s.spawn(|| {
                for i in 0..40 {
                    b.enroll(&format!("user{i}")).unwrap();
                }
            });
        });
        let file = a.read().unwrap();
        assert_eq!(file.users.len(), 41);
        assert_eq!(file.users["checker"].last_step, (now + 39 * 30) / 30);
    }
}
