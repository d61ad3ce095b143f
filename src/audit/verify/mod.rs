//! `walissh audit verify`: checks a whole audit database and its
//! recordings against the hash chain, the signed checkpoints and the
//! copies of checkpoints kept outside it.
//!
//! What it owns: the order of the checks and the report. Each check is a
//! module of its own: linking every row again and checking the checkpoints
//! at their seqs (`rows`), the checkpoints' own chain and that the chain's
//! tail is signed (`checkpoints`), the sessions table and the recordings
//! against their chained rows (`sessions`), and the head file and
//! forwarded copies against the database (`against`). It stops at the
//! first broken place and says where and what. What it leaves to others:
//! how rows are hashed and signed (`chain`), writing them (`db`), the
//! copies' format (`copies`).

mod against;
mod checkpoints;
mod rows;
mod sessions;

use std::path::{Path, PathBuf};
use std::time::Duration;

use russh::keys::PublicKey;

use super::chain;
use serde_json::{Value, json};

pub(crate) use checkpoints::Freshness;

/// What `audit verify` found.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Chained events checked.
    pub(crate) events: u64,
    pub(crate) recordings: u64,
    /// The last checkpoint: its seq and time.
    pub(crate) last_checkpoint: Option<(i64, String)>,
    /// Copies of checkpoints (the head file, `--against`) that match.
    pub(crate) copies: u64,
    /// The first broken place: the seq (when it is a row's) and what.
    pub(crate) broken: Option<(Option<i64>, String)>,
    /// The last row retention deleted, if it ever did: the chain is
    /// checked from the signed marker there.
    pub(crate) pruned_through: Option<i64>,
}

impl Report {
    fn broken(mut self, seq: Option<i64>, what: String) -> Report {
        self.broken = Some((seq, what));
        self
    }

    /// One line for people.
    pub(crate) fn line(&self) -> String {
        match &self.broken {
            Some((Some(seq), what)) => format!("broken at seq {seq}: {what}"),
            Some((None, what)) => format!("broken: {what}"),
            None => {
                let checkpoint = match &self.last_checkpoint {
                    Some((seq, ts)) => format!("last checkpoint at {ts} (seq {seq})"),
                    None => "no checkpoint yet".to_string(),
                };
                let pruned = self
                    .pruned_through
                    .map_or(String::new(), |p| format!(" (after seq {p}, pruned)"));
                format!(
                    "ok: {} events{pruned}, {} recordings, {checkpoint}, {} copies of checkpoints match",
                    self.events, self.recordings, self.copies
                )
            }
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "ok": self.broken.is_none(),
            "events": self.events,
            "recordings": self.recordings,
            "last_checkpoint": self.last_checkpoint.as_ref().map(|(seq, ts)| json!({"seq": seq, "ts": ts})),
            "copies": self.copies,
            "pruned_through": self.pruned_through,
            "broken": self.broken.as_ref().map(|(seq, what)| json!({"seq": seq, "what": what})),
        })
    }
}

/// What to check the database against.
pub(crate) struct Options {
    /// The audit key's public half.
    pub(crate) key: PublicKey,
    /// How much of the chain's tail may be unsigned.
    pub(crate) freshness: Freshness,
    /// A file of forwarded checkpoints (syslog or JSON lines).
    pub(crate) against: Option<PathBuf>,
    /// The recordings directory of the config in use: a recording is
    /// looked for there first, by its file name (a state directory
    /// restored or moved elsewhere), then where its `session_start` says.
    /// Its digest decides either way.
    pub(crate) recordings: Option<PathBuf>,
    /// The bucket recordings are uploaded to: one that is in neither
    /// place is fetched from there, by its file name, into `fetched`.
    pub(crate) bucket: Option<(crate::audit::upload::Bucket, PathBuf)>,
}

impl Options {
    /// Against `key`, with the default checkpoint interval and no copies
    /// but the head file.
    #[cfg(test)]
    pub(crate) fn key(key: PublicKey) -> Options {
        Options {
            key,
            freshness: Freshness::of(1000, Duration::from_secs(60)),
            against: None,
            recordings: None,
            bucket: None,
        }
    }
}

/// A check that found the database broken, or could not read it.
type Checked<T> = Result<T, Stop>;

enum Stop {
    Broken(Option<i64>, String),
    Unreadable(String),
}

impl From<rusqlite::Error> for Stop {
    fn from(e: rusqlite::Error) -> Stop {
        Stop::Unreadable(e.to_string())
    }
}

/// Checks the database at `path`. Err only when it (or a copy to check it
/// against) cannot be read at all.
pub(crate) fn verify(path: &Path, options: &Options) -> Result<Report, String> {
    // The copies first, then the database: the writer commits a checkpoint
    // before it writes the head file, so a head file read before the
    // database names nothing the database has yet to show.
    let head_file = super::copies::head_path(path);
    let head = super::copies::read_head(&head_file)?;
    let forwarded = match &options.against {
        Some(file) => Some((file, forwarded(file)?)),
        None => None,
    };
    let conn = super::db::open_reader(path)?;
    // One snapshot for every read, while the bastion writes on.
    conn.execute_batch("BEGIN")
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut report = Report::default();
    let checked = (|| {
        let cps = super::db::checkpoints(&conn)?;
        report.last_checkpoint = cps.last().map(|c| (c.seq, c.ts.clone()));
        let marker = super::prune::marker(&conn)?;
        if let Some(m) = &marker
            && !m.signed_by(&options.key)
        {
            let what = format!(
                "the pruned marker (through seq {}) is not signed by the audit key",
                m.seq
            );
            return Err(Stop::Broken(Some(m.seq), what));
        }
        report.pruned_through = marker.as_ref().map(|m| m.seq);
        let floor = marker.as_ref().map_or(0, |m| m.seq);
        let start = marker
            .as_ref()
            .map_or_else(|| (0, chain::genesis()), |m| (m.seq, m.head.clone()));
        let base = marker
            .as_ref()
            .map_or_else(|| (0, chain::genesis()), |m| m.checkpoint.clone());
        let last_seq = rows::link(&conn, &cps, &options.key, start)?;
        report.events = u64::try_from(last_seq - floor).unwrap_or(0);
        checkpoints::truncated(&cps, last_seq, floor)?;
        checkpoints::chained(&cps, &base)?;
        checkpoints::fresh(&conn, &cps, (last_seq, floor), &options.freshness)?;
        // A rollback is said before what it drags along (sessions rows
        // whose events went with it).
        let copies = against::Copies {
            conn: &conn,
            key: &options.key,
            last_seq,
            pruned: marker.map(|m| (m.seq, m.checkpoint)),
        };
        report.copies += copies.head_file(&head_file, head.as_ref(), &cps)?;
        if let Some((file, found)) = &forwarded {
            report.copies += copies.forwarded(file, found)?;
        }
        sessions::rows_follow_events(&conn)?;
        let signed = cps.last().map_or(0, |c| c.seq);
        report.recordings = sessions::recordings(
            &conn,
            (options.recordings.as_deref(), options.bucket.as_ref()),
            signed,
        )?;
        Ok(())
    })();
    match checked {
        Ok(()) => Ok(report),
        Err(Stop::Broken(seq, what)) => Ok(report.broken(seq, what)),
        Err(Stop::Unreadable(e)) => Err(format!("{}: {e}", path.display())),
    }
}

/// The checkpoints in `file`; a file with none is a mistake, not a pass.
fn forwarded(file: &Path) -> Result<Vec<(usize, super::chain::Signed)>, String> {
    let found = super::copies::read(file)?;
    if found.is_empty() {
        return Err(format!(
            "{}: no forwarded checkpoint in it (audit_checkpoint lines)",
            file.display()
        ));
    }
    Ok(found)
}

/// Seconds from `from` to `to` (RFC 3339), if both are times.
fn seconds_between(from: &str, to: &str) -> Option<f64> {
    let (a, b) = (
        humantime::parse_rfc3339_weak(from).ok()?,
        humantime::parse_rfc3339_weak(to).ok()?,
    );
    Some(match b.duration_since(a) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    })
}

/// `d` for people: whole seconds.
fn span(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

#[cfg(test)]
mod tests;
