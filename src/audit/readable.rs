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
    dir: PathBuf,
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
        let dir = private_dir()?;
        // This node's head file beside the copy, where verify looks for
        // it: the database must still hold the checkpoint it names.
        if head_file.exists() {
            let to = super::copies::head_path(&dir.join("audit.db"));
            std::fs::copy(&head_file, &to).map_err(|e| format!("{}: {e}", head_file.display()))?;
        }
        let mut r = Readable {
            path: dir.join("audit.db"),
            copy: Some(Copy { pg, dir, last: 0 }),
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

impl Drop for Readable {
    fn drop(&mut self) {
        if let Some(c) = &self.copy {
            let _ = std::fs::remove_dir_all(&c.dir);
        }
    }
}

/// A directory only this account reads, for one command's copy.
fn private_dir() -> Result<PathBuf, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!("walissh-audit-{}-{nanos}", std::process::id());
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
