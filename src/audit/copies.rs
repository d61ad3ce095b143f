//! Copies of signed checkpoints kept outside the database, which show a
//! database rolled back or cut: the head file beside it
//! (`<state_dir>/audit.head`, the latest checkpoint, rewritten with each)
//! and what `[audit] forward` sent (syslog lines or JSON lines, read back
//! by `audit verify --against FILE`).
//!
//! What it owns: the checkpoint's JSON line (one format for forwarding
//! and the head file), finding it in a syslog or JSON line, writing the
//! head file, and the check at start that the database still holds the
//! checkpoint the head file names. What it leaves to others: signing
//! (`chain`), comparing copies with the chain (`verify`).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::{Value, json};

use super::chain::Signed;

/// The head file of the database at `db`: beside it, `audit.head`.
pub(crate) fn head_path(db: &Path) -> PathBuf {
    db.with_extension("head")
}

/// A checkpoint as one JSON object (forwarded, and the head file's line).
pub(crate) fn to_json(c: &Signed) -> Value {
    let (prev_seq, prev) = match &c.prev {
        Some((s, h)) => (json!(s), json!(h)),
        None => (Value::Null, Value::Null),
    };
    json!({"kind": "audit_checkpoint", "seq": c.seq, "head": c.head, "ts": c.ts,
           "prev_seq": prev_seq, "prev": prev, "signature": c.signature})
}

/// The checkpoint in one line of a copy: a JSON line, or a syslog line
/// whose message is one. Other lines (events, noise) give None.
pub(crate) fn parse_line(line: &str) -> Option<Signed> {
    if !line.contains("audit_checkpoint") {
        return None;
    }
    // The JSON object is the line's end: in a syslog line it follows the
    // header and structured data, whose values escape `"` (so `{"` starts
    // no object there); inside the JSON, strings escape it too.
    line.match_indices("{\"")
        .find_map(|(at, _)| serde_json::from_str::<Value>(line[at..].trim_end()).ok())
        .and_then(|v| from_json(&v))
}

fn from_json(v: &Value) -> Option<Signed> {
    if v["kind"] != "audit_checkpoint" {
        return None;
    }
    let text = |k: &str| v[k].as_str().map(str::to_string);
    let prev = match (v["prev_seq"].as_i64(), text("prev")) {
        (Some(s), Some(h)) => Some((s, h)),
        _ => None,
    };
    Some(Signed {
        seq: v["seq"].as_i64()?,
        head: text("head")?,
        ts: text("ts")?,
        prev,
        signature: text("signature")?,
    })
}

/// A line of a copy longer than this holds no checkpoint walissh wrote
/// (a forwarded message is at most 60,000 bytes): it is skipped unread,
/// so a file shaped to hold one endless line costs no memory.
const MAX_LINE: usize = 64 * 1024;

/// Every checkpoint in the file at `path`, with its line number.
pub(crate) fn read(path: &Path) -> Result<Vec<(usize, Signed)>, String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(err)?;
    let mut found = Vec::new();
    let mut reader = std::io::BufReader::new(file);
    let mut buf = Vec::new();
    let mut number = 0;
    while let Some(whole) = next_line(&mut reader, &mut buf).map_err(err)? {
        number += 1;
        if let Some(c) = whole
            .then(|| parse_line(&String::from_utf8_lossy(&buf)))
            .flatten()
        {
            found.push((number, c));
        }
    }
    Ok(found)
}

/// Reads the next line into `buf`, keeping at most [`MAX_LINE`] bytes of
/// it: `Some(true)` for a line kept whole, `Some(false)` for one cut (the
/// rest read past), None at the end.
fn next_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut read_any = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(read_any.then_some(buf.len() <= MAX_LINE));
        }
        read_any = true;
        let (line, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (&chunk[..=i], true),
            None => (chunk, false),
        };
        let room = (MAX_LINE + 1).saturating_sub(buf.len());
        buf.extend_from_slice(&line[..line.len().min(room)]);
        let used = line.len();
        reader.consume(used);
        if done {
            return Ok(Some(buf.len() <= MAX_LINE));
        }
    }
}

/// Replaces the head file with `c`: written beside it, synced, renamed
/// over it, so a crash leaves the old head or the new one, never half.
pub(crate) fn write_head(path: &Path, c: &Signed) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("head.new");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(format!("{}\n", to_json(c)).as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// The head file's checkpoint; None when there is no head file.
pub(crate) fn read_head(path: &Path) -> Result<Option<Signed>, String> {
    if !path.exists() {
        return Ok(None);
    }
    match read(path)?.pop() {
        Some((_, c)) => Ok(Some(c)),
        None => Err(format!("{}: holds no checkpoint", path.display())),
    }
}

/// At start: the database must still hold the checkpoint its head file
/// names. Otherwise it was rolled back or cut while walissh was stopped,
/// and writing on would replace the head file, the only trace of it.
pub(crate) fn check_head_at_start(conn: &Connection, db: &Path) -> Result<(), String> {
    let path = head_path(db);
    let Some(head) = read_head(&path)? else {
        return Ok(());
    };
    let stored =
        super::db::checkpoint_at(conn, head.seq).map_err(|e| format!("{}: {e}", db.display()))?;
    if stored.as_ref() == Some(&head) {
        return Ok(());
    }
    // Retention deleted it with the rows it signed: the marker took over.
    let pruned = super::prune::marker(conn).map_err(|e| format!("{}: {e}", db.display()))?;
    if pruned.is_some_and(|m| m.checkpoint == (head.seq, head.id())) {
        return Ok(());
    }
    Err(format!(
        "{}: the audit database lacks the checkpoint at seq {} that {} names: it was rolled back or cut; \
         run `walissh audit verify`, and move {} aside to start on this database anyway",
        db.display(),
        head.seq,
        path.display(),
        path.display()
    ))
}

/// The checkpoint a store holds at a seq, if any.
pub(crate) type CheckpointAt<'a> = &'a dyn Fn(i64) -> Result<Option<Signed>, String>;

/// [`check_head_at_start`] for a store read through `checkpoint_at`
/// (PostgreSQL, `name` in messages) that several nodes write and prune:
/// a checkpoint gone is fine only below the seq a marker signed with the
/// audit key says was pruned (`pruned`: another node's pass may have gone
/// further than this one's checkpoint).
pub(crate) fn check_head_in(
    (checkpoint_at, pruned): (CheckpointAt<'_>, Option<i64>),
    path: &Path,
    name: &str,
) -> Result<(), String> {
    let Some(head) = read_head(path)? else {
        return Ok(());
    };
    match checkpoint_at(head.seq)? {
        Some(c) if c == head => return Ok(()),
        // Pruned past it by a node's pass: gone, not replaced.
        None if pruned.is_some_and(|through| head.seq <= through) => return Ok(()),
        _ => {}
    }
    Err(format!(
        "{name}: the audit database lacks the checkpoint at seq {} that {} names: it was rolled back or cut; \
         run `walissh audit verify`, and move {} aside to start on this database anyway",
        head.seq,
        path.display(),
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An endless line is skipped, never held: at most [`MAX_LINE`] and a
    /// byte of it are kept, and the lines after it are read as ever.
    #[test]
    fn a_line_too_long_is_skipped_unheld() {
        let mut text = vec![b'{'; 3 * MAX_LINE];
        text.extend_from_slice(b"\nabc\nlast");
        let mut reader = std::io::BufReader::with_capacity(4096, &text[..]);
        let mut buf = Vec::new();
        assert_eq!(next_line(&mut reader, &mut buf).unwrap(), Some(false));
        assert!(buf.len() <= MAX_LINE + 1);
        assert_eq!(next_line(&mut reader, &mut buf).unwrap(), Some(true));
        assert_eq!(buf, b"abc\n");
        assert_eq!(next_line(&mut reader, &mut buf).unwrap(), Some(true));
        assert_eq!(buf, b"last");
        assert_eq!(next_line(&mut reader, &mut buf).unwrap(), None);
    }

    fn signed() -> Signed {
        Signed {
            seq: 12,
            head: "ab".repeat(32),
            ts: "2026-01-01T00:00:00.000Z".into(),
            prev: Some((5, "cd".repeat(32))),
            signature: "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----".into(),
        }
    }

    #[test]
    fn checkpoints_are_found_in_json_and_syslog_lines() {
        let c = signed();
        let line = to_json(&c).to_string();
        assert_eq!(parse_line(&line), Some(c.clone()));
        let item = super::super::forward::Item::Checkpoint(c.clone());
        let syslog = super::super::forward::syslog(&item, "bastion");
        assert_eq!(parse_line(&syslog), Some(c.clone()));
        // An event that quotes a checkpoint is not one.
        let quoted = json!({"kind": "exec", "command": line}).to_string();
        assert_eq!(parse_line(&quoted), None);
        // One from before checkpoints were chained.
        let old = Signed { prev: None, ..c };
        assert_eq!(parse_line(&to_json(&old).to_string()), Some(old));
    }

    #[test]
    fn the_head_file_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = head_path(&dir.path().join("audit.db"));
        assert!(path.ends_with("audit.head"));
        assert_eq!(read_head(&path).unwrap(), None);
        write_head(&path, &signed()).unwrap();
        let next = Signed {
            seq: 20,
            ..signed()
        };
        write_head(&path, &next).unwrap();
        assert_eq!(read_head(&path).unwrap(), Some(next));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
