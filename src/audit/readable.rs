//! The audit as its readers (`walissh audit`, `sessions`, `play`,
//! `audit verify`) read it: the SQLite file itself, or, for PostgreSQL, a
//! private SQLite copy of every node's rows made for this one command and
//! removed after it.
//!
//! Copying keeps one set of queries, and one verifier, for both stores:
//! verify checks the rows exactly as PostgreSQL holds them, since the copy
//! takes each column as stored and links nothing itself. What it leaves to
//! others: the copying (`pg::Pg::copy_into`), the queries (`query`,
//! `verify`, `db::sessions_json`).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::pg::Pg;
use crate::config::Config;

/// An audit ready to read.
pub(crate) struct Readable {
    path: PathBuf,
    copy: Option<Copy>,
}

/// A PostgreSQL audit's copy: where it is, and how far it goes.
struct Copy {
    pg: Pg,
    _dir: Scratch,
    last: i64,
}

impl Readable {
    /// The audit `config` names; a PostgreSQL one is copied now. Blocking.
    pub(crate) fn open(config: &Config) -> Result<Readable, String> {
        let store = super::Store::of(config)?;
        let (pg, head_file) = match store {
            super::Store::Sqlite(path) => return Ok(Readable { path, copy: None }),
            super::Store::Postgres { pg, head_file } => (pg, head_file),
        };
        let dir = Scratch::new()?;
        // This node's head file beside the copy, where verify looks for
        // it: the database must still hold the checkpoint it names.
        if head_file.exists() {
            let to = super::copies::head_path(&dir.path().join("audit.db"));
            std::fs::copy(&head_file, &to).map_err(|e| format!("{}: {e}", head_file.display()))?;
        }
        let mut r = Readable {
            path: dir.path().join("audit.db"),
            copy: Some(Copy {
                pg,
                _dir: dir,
                last: 0,
            }),
        };
        r.refresh()?;
        Ok(r)
    }

    /// The SQLite file to read.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Brings a copy up to what the database holds now (`--follow`); a
    /// SQLite file is read as it stands. Blocking.
    pub(crate) fn refresh(&mut self) -> Result<(), String> {
        if let Some(c) = &mut self.copy {
            c.last = c.pg.copy_into(&self.path, c.last)?;
        }
        Ok(())
    }
}

/// A directory only this account reads, for one command's files, removed
/// with it.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new() -> Result<Scratch, String> {
        sweep();
        private_dir().map(Scratch)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes what earlier commands of this account left (one that ended by
/// `exit`, as `walissh audit | head` does, or a signal): the directories
/// of processes that are gone.
fn sweep() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("walissh-"))
            .and_then(|n| n.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        use std::os::unix::fs::MetadataExt;
        let mine = std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir() && m.uid() == me);
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
        if mine && !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A directory only this account reads, for one command's copy.
fn private_dir() -> Result<PathBuf, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!("walissh-{}-{nanos}", std::process::id());
    let dir = std::env::temp_dir().join(name);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// The daemon's copy of a PostgreSQL audit, for the console's pages: kept
/// in the state directory and brought up to date before each read (only
/// what is new is copied). Made anew at each start.
pub(crate) struct Mirror {
    pg: Pg,
    path: PathBuf,
    last: std::sync::Mutex<i64>,
}

impl Mirror {
    /// A mirror of `pg` at `path`, which starts empty. Blocking.
    pub(crate) fn new(pg: Pg, path: PathBuf) -> Mirror {
        for stale in [
            path.clone(),
            path.with_extension("db-wal"),
            path.with_extension("db-shm"),
        ] {
            let _ = std::fs::remove_file(stale);
        }
        Mirror {
            pg,
            path,
            last: std::sync::Mutex::new(0),
        }
    }

    /// The copy, up to date with the database now. Blocking.
    pub(crate) fn fresh(&self) -> Result<&Path, String> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        *last = self.pg.copy_into(&self.path, *last)?;
        Ok(&self.path)
    }
}

/// The file to read a recording the chain names as `path` from: the one
/// of its name in the config's recordings directory, or `path`, or the
/// object in the config's bucket, fetched into `scratch` (`sealed`: its
/// length in the chain, when the chain holds its digest; see
/// `upload::Bucket::fetch`). Blocking.
pub(crate) fn recording_file(
    config: &Config,
    (path, sealed): (PathBuf, Option<u64>),
    scratch: &Scratch,
) -> Result<PathBuf, String> {
    let name = path.file_name().map(|n| n.to_os_string());
    if let Some(n) = &name {
        let local = config.recordings_dir().join(n);
        if local.is_file() {
            return Ok(local);
        }
    }
    match (
        config.recordings_bucket(),
        name.as_ref().and_then(|n| n.to_str()),
    ) {
        (Some(url), Some(name)) if !path.is_file() => {
            let to = scratch.path().join(name);
            let bucket = super::upload::Bucket::new(url)?;
            bucket
                .fetch_blocking(name, &to, sealed)
                .map_err(|e| e.to_string())?;
            Ok(to)
        }
        _ => Ok(path),
    }
}
