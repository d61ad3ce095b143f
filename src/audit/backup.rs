//! `walissh backup DIR`: a consistent copy of the audit while the bastion
//! runs, laid out as the state directory is, so that a restore is copying
//! it back (`cp -a DIR/. STATE_DIR/`) and `walissh audit verify` passes
//! there.
//!
//! In order: the head file (`audit.head`) first, then the database by
//! SQLite's online backup API (one snapshot, however much is written
//! meanwhile), so the copy holds at least the checkpoint the head names;
//! then the recordings (after the database, so each that the copy says
//! ended is whole); then the audit key's public half (`audit_key.pub`,
//! for `audit verify --key`). The secrets (the audit, host, host CA and
//! upstream keys, the TOTP store, known_hosts) only with `--with-secrets`:
//! they belong offline, apart from the audit they secure.
//!
//! What it owns: the copy and its layout. What it leaves to others: the
//! schema (`db`), checking the copy (`verify`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::backup::Backup;

/// Pages copied per step of the online backup, and the pause between
/// steps: the bastion's writer gets the database between them.
const PAGES_PER_STEP: std::ffi::c_int = 1024;
const PAUSE: Duration = Duration::from_millis(5);

/// What to copy from where.
pub(crate) struct Sources {
    pub(crate) db: PathBuf,
    pub(crate) recordings: Option<PathBuf>,
    /// The audit key's public half, as an OpenSSH line.
    pub(crate) public_key: String,
    /// Secret files to copy, by the name they get in the copy.
    pub(crate) secrets: Vec<(String, PathBuf)>,
    /// Secret files the config keeps outside the state directory: not
    /// copied, but named in what `backup` prints.
    pub(crate) elsewhere: Vec<PathBuf>,
}

/// What a backup copied.
#[derive(Debug, Default)]
pub(crate) struct Copied {
    pub(crate) db_bytes: u64,
    pub(crate) events: u64,
    pub(crate) recordings: u64,
    pub(crate) recording_bytes: u64,
    pub(crate) secrets: Vec<String>,
    pub(crate) not_copied: Vec<PathBuf>,
}

impl Copied {
    /// The one line `walissh backup` prints.
    pub(crate) fn line(&self, dir: &Path) -> String {
        let mut secrets = match self.secrets.is_empty() {
            true => "no secrets (--with-secrets copies them)".to_string(),
            false => format!("secrets: {}", self.secrets.join(", ")),
        };
        if !self.not_copied.is_empty() {
            let paths: Vec<String> = self
                .not_copied
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            secrets += &format!(
                "; not copied, outside the state directory: {}",
                paths.join(", ")
            );
        }
        format!(
            "backed up to {}: audit.db ({} events, {} bytes), {} recordings ({} bytes), audit.head, audit_key.pub; {secrets}",
            dir.display(),
            self.events,
            self.db_bytes,
            self.recordings,
            self.recording_bytes
        )
    }
}

/// Copies `from` into `dir`, which must not exist yet; it is made private
/// (0700), and so is every file in it.
pub(crate) fn backup(from: &Sources, dir: &Path) -> Result<Copied, String> {
    let fail = |what: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", what.display());
    prepare(dir)?;
    let mut copied = Copied::default();
    let head = super::copies::head_path(&from.db);
    if head.exists() {
        copy_private(&head, &dir.join("audit.head"))?;
    }
    let db_copy = dir.join("audit.db");
    copy_database(&from.db, &db_copy)?;
    copied.db_bytes = std::fs::metadata(&db_copy)
        .map_err(|e| fail(&db_copy, &e))?
        .len();
    copied.events = count_events(&db_copy)?;
    if let Some(recordings) = &from.recordings {
        let (n, bytes) = copy_recordings(recordings, &dir.join("recordings"))?;
        copied.recordings = n;
        copied.recording_bytes = bytes;
    }
    let public = dir.join(format!("{}.pub", super::chain::KEY_FILE));
    write_private(&public, format!("{}\n", from.public_key.trim()).as_bytes())?;
    for (name, path) in &from.secrets {
        if path.exists() {
            copy_private(path, &dir.join(name))?;
            copied.secrets.push(name.clone());
        }
    }
    if !from.secrets.is_empty() {
        copied.not_copied = from
            .elsewhere
            .iter()
            .filter(|p| p.exists())
            .cloned()
            .collect();
    }
    Ok(copied)
}

/// Makes `dir` (0700; its parent must exist), refusing one that exists:
/// a backup never mixes with another, and nobody else can have put a
/// link in it.
fn prepare(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => format!(
                "{}: exists; a backup goes into a new directory",
                dir.display()
            ),
            _ => format!("{}: cannot create: {e}", dir.display()),
        })?;
    // Whatever the umask allowed.
    set_mode(dir, 0o700)
}

/// The database at `from`, copied to `to` by SQLite's online backup: one
/// consistent snapshot while the bastion goes on writing.
fn copy_database(from: &Path, to: &Path) -> Result<(), String> {
    let src = super::db::open_reader(from)?;
    let mut dst = rusqlite::Connection::open(to).map_err(|e| format!("{}: {e}", to.display()))?;
    let backup = Backup::new(&src, &mut dst).map_err(|e| format!("{}: {e}", to.display()))?;
    backup
        .run_to_completion(PAGES_PER_STEP, PAUSE, None)
        .map_err(|e| format!("backing up {}: {e}", from.display()))?;
    drop(backup);
    drop(dst);
    set_private(to)
}

/// How many events the copy holds.
fn count_events(db: &Path) -> Result<u64, String> {
    let conn = super::db::open_reader(db)?;
    conn.query_row("SELECT COUNT(*) FROM events", [], |r| r.get::<_, i64>(0))
        .map(|n| n.max(0) as u64)
        .map_err(|e| format!("{}: {e}", db.display()))
}

/// Every recording in `from` (its `*.cast` files), into `to`: how many,
/// and their bytes.
fn copy_recordings(from: &Path, to: &Path) -> Result<(u64, u64), String> {
    std::fs::create_dir(to).map_err(|e| format!("{}: {e}", to.display()))?;
    set_mode(to, 0o700)?;
    let entries = match std::fs::read_dir(from) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(format!("{}: {e}", from.display())),
    };
    let (mut n, mut bytes) = (0, 0);
    for entry in entries {
        let path = entry
            .map_err(|e| format!("{}: {e}", from.display()))?
            .path();
        if path.extension().is_none_or(|e| e != "cast") || !path.is_file() {
            continue;
        }
        let Some(name) = path.file_name() else {
            continue;
        };
        bytes += copy_private(&path, &to.join(name))?;
        n += 1;
    }
    Ok((n, bytes))
}

/// Copies `from` to `to`, readable by its owner alone: the bytes copied.
fn copy_private(from: &Path, to: &Path) -> Result<u64, String> {
    let n = std::fs::copy(from, to).map_err(|e| format!("copying {}: {e}", from.display()))?;
    set_private(to)?;
    Ok(n)
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    set_private(path)
}

fn set_private(path: &Path) -> Result<(), String> {
    set_mode(path, 0o600)
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_goes_into_a_new_directory_only() {
        let dir = tempfile::tempdir().unwrap();
        let from = Sources {
            db: dir.path().join("audit.db"),
            recordings: None,
            public_key: String::new(),
            secrets: vec![],
            elsewhere: vec![],
        };
        let e = backup(&from, dir.path()).unwrap_err();
        assert!(
            e.ends_with("exists; a backup goes into a new directory"),
            "{e}"
        );
    }
}
