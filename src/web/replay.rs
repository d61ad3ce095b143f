//! A session's page: its recording in the vendored asciinema player (its
//! `"m"` events are the player's markers: commands and the agent's
//! actions), the session's audit rows beside it as a timeline whose rows
//! seek the player, and whether the recording still matches the digest
//! its `session_end` row chained into the audit. Also the recording
//! itself, for the player. What it leaves to others: who may see it
//! (`web`), the frame and escaping (`pages`), the audit's tables.

use std::path::{Path, PathBuf};

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use super::pages::{escape, page};
use super::{Shared, read_audit, require};

/// Longest session id taken (walissh's are 36 characters).
const MAX_ID: usize = 64;
/// Timeline rows shown at most.
const MAX_ROWS: usize = 2000;

/// What the page shows of a session.
struct Replay {
    user: String,
    target: String,
    started: String,
    ended: Option<String>,
    recording: Option<PathBuf>,
    /// `recording_sha256` of its `session_end` row.
    sealed: Option<String>,
    /// `recording_bytes` of its `session_end` row.
    sealed_bytes: Option<u64>,
    rows: Vec<Row>,
}

/// One audit row, as the timeline shows it.
struct Row {
    /// Seconds from the session's start.
    at: f64,
    ts: String,
    kind: String,
    what: String,
}

/// A session id as walissh writes them, or nothing.
fn session_id(id: &str) -> Option<&str> {
    let fits = !id.is_empty()
        && id.len() <= MAX_ID
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    fits.then_some(id)
}

fn seconds(t: &str) -> Option<f64> {
    humantime::parse_rfc3339_weak(t)
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs_f64())
}

/// What a row says, in a line: the command, the question, the decision.
fn summary(kind: &str, fields: &Value) -> String {
    let text = |k: &str| fields.get(k).and_then(Value::as_str).unwrap_or("");
    let line = match kind {
        "command" | "exec" | "ai_tool_result" => {
            let code = fields
                .get("exit_code")
                .map_or(String::new(), |c| format!(" → {c}"));
            format!("{}{code}", text("command"))
        }
        "ai_tool_call" => format!("{} ({})", text("command"), text("decision")),
        "ai_prompt" | "ai_answer" => text("text").to_string(),
        "ai_error" | "upstream_error" => text("message").to_string(),
        "session_end" => format!("exit {}", fields.get("exit_status").unwrap_or(&Value::Null)),
        _ => String::new(),
    };
    crate::text::prefix(&line, 300).to_string()
}

fn read(conn: &Connection, id: &str) -> rusqlite::Result<Option<Replay>> {
    let session = conn
        .query_row(
            "SELECT user, target, started, ended, recording FROM sessions WHERE id = ?1",
            [id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, Option<String>>(4)?,
                ))
            },
        )
        .optional()?;
    let Some((user, target, started, ended, recording)) = session else {
        return Ok(None);
    };
    let start = seconds(&started).unwrap_or(0.0);
    let mut stmt = conn.prepare(&format!(
        "SELECT ts, kind, fields FROM events WHERE session = ?1 ORDER BY seq LIMIT {MAX_ROWS}"
    ))?;
    let (mut sealed, mut sealed_bytes) = (None, None);
    let rows = stmt
        .query_map([id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?
        .into_iter()
        .map(|(ts, kind, fields)| {
            let fields: Value = serde_json::from_str(&fields).unwrap_or(Value::Null);
            if kind == "session_end" {
                sealed = fields
                    .get("recording_sha256")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                sealed_bytes = fields.get("recording_bytes").and_then(Value::as_u64);
            }
            Row {
                at: (seconds(&ts).unwrap_or(start) - start).max(0.0),
                what: summary(&kind, &fields),
                ts,
                kind,
            }
        })
        .collect();
    Ok(Some(Replay {
        user,
        target,
        started,
        ended,
        recording: recording.map(PathBuf::from),
        sealed,
        sealed_bytes,
        rows,
    }))
}

/// The recording's path, if it is one of the state directory's
/// recordings (the database names it; it is not trusted to name anything
/// else).
fn recording_file(state: &Path, replay: &Replay) -> Option<PathBuf> {
    let path = replay.recording.as_ref()?.canonicalize().ok()?;
    let dir = state.join("recordings").canonicalize().ok()?;
    path.starts_with(&dir).then_some(path)
}

/// Whether the recording matches the digest the audit chained for it.
enum Seal {
    Live,
    Verified(String),
    Differs,
    Unsealed,
    Missing,
}

/// Checked as `walissh audit verify` checks it (`chain::file_digest`:
/// read in pieces, not whole into memory).
fn seal(file: Option<&Path>, replay: &Replay) -> Seal {
    sealed_as(file, (replay.ended.is_some(), replay.sealed.as_deref()))
}

/// [`seal`] of `file`, for a session that has `ended` with digest `sealed`.
fn sealed_as(file: Option<&Path>, (ended, sealed): (bool, Option<&str>)) -> Seal {
    if !ended {
        return Seal::Live;
    }
    let Some(file) = file else {
        return Seal::Missing;
    };
    let Some(sealed) = sealed else {
        return Seal::Unsealed;
    };
    match crate::audit::chain::file_digest(file) {
        Err(_) => Seal::Missing,
        Ok((digest, _)) if digest == sealed => Seal::Verified(digest),
        Ok(_) => Seal::Differs,
    }
}

/// The session `id` names, its recording's file if it has one, and with
/// `sealed` the recording checked: on a blocking thread (the audit, the
/// files), once.
async fn load(
    c: &super::Console,
    id: &str,
    sealed: bool,
) -> Result<(Replay, Option<PathBuf>, Option<Seal>), Response> {
    let Some(id) = session_id(id).map(str::to_string) else {
        return Err(StatusCode::NOT_FOUND.into_response());
    };
    let state = c.bastion.live().config.state_dir().to_path_buf();
    let bucket = c
        .bastion
        .live()
        .config
        .recordings_bucket()
        .map(str::to_string);
    let here = state.clone();
    let found = read_audit(c, move |conn| {
        Ok(read(conn, &id)?.map(|r| {
            let file = recording_file(&here, &r);
            let seal = sealed.then(|| seal(file.as_deref(), &r));
            (r, file, seal)
        }))
    })
    .await?;
    let (r, file, checked) =
        found.ok_or_else(|| (StatusCode::NOT_FOUND, "no such session").into_response())?;
    // Gone from the disk, kept in the bucket: fetched, and sealed as ever.
    let (Some(url), None, Some(_)) = (bucket, &file, &r.ended) else {
        return Ok((r, file, checked));
    };
    let Some(fetched) = fetched(&state, &url, &r).await else {
        return Ok((r, file, checked));
    };
    let checked = match sealed {
        false => None,
        true => {
            let (f, digest) = (fetched.clone(), r.sealed.clone());
            let check = move || sealed_as(Some(&f), (true, digest.as_deref()));
            tokio::task::spawn_blocking(check).await.ok()
        }
    };
    Ok((r, Some(fetched), checked))
}

/// The session's recording fetched from the bucket into
/// `<state>/fetched` (kept an hour, for the player's request that
/// follows the page's), if the bucket has it.
async fn fetched(state: &Path, url: &str, r: &Replay) -> Option<PathBuf> {
    let name = r.recording.as_ref()?.file_name()?.to_str()?.to_string();
    let dir = state.join("fetched");
    let to = dir.join(&name);
    // File work off the runtime: the directory, its sweep, what is there.
    let there = tokio::task::spawn_blocking({
        let (dir, to) = (dir.clone(), to.clone());
        move || {
            crate::keys::create_private_dir(&dir)?;
            sweep_fetched(&dir);
            Ok::<_, String>(to.is_file())
        }
    })
    .await;
    let Ok(Ok(there)) = there else {
        return None;
    };
    if !there {
        let bucket = crate::audit::upload::Bucket::new(url).ok()?;
        if let Err(e) = bucket.fetch(&name, &to, r.sealed_bytes).await {
            tracing::warn!(error = %e, "the console could not fetch a recording");
            let _ = tokio::fs::remove_file(&to).await;
            return None;
        }
    }
    Some(to)
}

/// Deletes fetched recordings older than an hour. Blocking.
fn sweep_fetched(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age > std::time::Duration::from_secs(3600));
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

pub(super) async fn session(
    State(c): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    let login = match require(&c, &headers) {
        Ok(l) => l,
        Err(to_login) => return to_login.into_response(),
    };
    let (replay, file, seal) = match load(&c, &id, true).await {
        Ok((replay, file, Some(seal))) => (replay, file, seal),
        Ok(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        Err(response) => return response,
    };
    // Live here, or on another running node (relayed): watched, and
    // stopped by an admin. Unended in the audit but on no running node:
    // a dead node's, or one a crash left open.
    let stop_csrf = (login.role >= crate::config::Role::Admin).then_some(login.csrf.as_str());
    let live = match (
        replay.ended.is_some(),
        c.bastion.sessions.get(&id).is_some(),
    ) {
        (true, _) => Live::No,
        (false, true) => Live::Here { stop_csrf },
        (false, false) => match c.bastion.audit.carried_elsewhere(&id).await {
            Ok(Some(_)) => Live::Here { stop_csrf },
            Ok(None) => Live::Elsewhere(None),
            Err(why) => Live::Elsewhere(Some(why)),
        },
    };
    let body = body(&id, &replay, file.is_some(), &seal, &live);
    let title = format!("{}@{}", replay.user, replay.target);
    Html(page(&title, Some((&login.user, &login.csrf)), &body)).into_response()
}

/// Whether the session runs now, and where.
enum Live<'a> {
    No,
    /// On this bastion, or another running one; with an admin's CSRF
    /// token, the stop form.
    Here {
        stop_csrf: Option<&'a str>,
    },
    /// Not ended in the audit, but on no running bastion (and why, when
    /// known).
    Elsewhere(Option<String>),
}

fn body(id: &str, r: &Replay, playable: bool, seal: &Seal, live: &Live) -> String {
    let seal = match seal {
        Seal::Live => r#"<p class="seal live-note">Live: the recording is sealed when the session ends.</p>"#.to_string(),
        Seal::Verified(d) => format!(
            r#"<p class="seal ok">Recording verified: its SHA-256 is the one the audit chained at the session's end (<code>{}</code>).</p>"#,
            escape(d)
        ),
        Seal::Differs => r#"<p class="seal bad">The recording does NOT match the SHA-256 the audit chained at the session's end: it was changed after.</p>"#.to_string(),
        Seal::Unsealed => r#"<p class="seal">No digest of this recording in the audit.</p>"#.to_string(),
        Seal::Missing => r#"<p class="seal bad">The recording is missing.</p>"#.to_string(),
    };
    let player = match (playable, live) {
        // Live on another node: its file is there, the relay streams it.
        (_, Live::Here { .. }) => format!(
            r#"<div id="player" data-live="/sessions/{id}/watch"></div>"#,
            id = escape(id)
        ),
        (true, Live::Elsewhere(why)) => format!(
            r#"<p class="none">Not live on a running bastion: {why}. The recording so far:</p><div id="player" data-cast="/sessions/{id}/cast"></div>"#,
            why = escape(why.as_deref().unwrap_or("left open by a crash")),
            id = escape(id)
        ),
        (true, Live::No) => format!(
            r#"<div id="player" data-cast="/sessions/{id}/cast"></div>"#,
            id = escape(id)
        ),
        (false, _) => r#"<p class="none">No recording.</p>"#.to_string(),
    };
    let stop = match live {
        Live::Here {
            stop_csrf: Some(csrf),
        } => format!(
            r#"<form method="post" action="/sessions/{id}/stop" class="stop"><input type="hidden" name="csrf" value="{csrf}"><input name="reason" required maxlength="200" placeholder="Why (the user is shown this)"><button class="deny">Stop this session</button></form>"#,
            id = escape(id),
            csrf = escape(csrf),
        ),
        _ => String::new(),
    };
    let mut rows = String::new();
    for row in &r.rows {
        rows.push_str(&format!(
            r#"<li data-t="{at:.3}"><time title="{ts}">+{at:.1}s</time> <b>{kind}</b> {what}</li>"#,
            at = row.at,
            ts = escape(&row.ts),
            kind = escape(&row.kind),
            what = escape(&row.what),
        ));
    }
    format!(
        r#"<h1>{user} on {target}</h1><p class="meta">Started {started}{ended}</p>{seal}{stop}<div class="replay"><div class="screen">{player}</div><ol class="timeline">{rows}</ol></div><link rel="stylesheet" href="/assets/asciinema-player.css"><script src="/assets/asciinema-player.min.js"></script><script src="/assets/console.js"></script>"#,
        user = escape(&r.user),
        target = escape(&r.target),
        started = escape(&r.started),
        ended = r.ended.as_ref().map_or(
            r#", <span class="live">live</span>"#.to_string(),
            |e| format!(", ended {}", escape(e))
        ),
    )
}

/// The recording, for the player.
pub(super) async fn cast(
    State(c): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    if let Err(to_login) = require(&c, &headers) {
        return to_login.into_response();
    }
    let file = match load(&c, &id, false).await {
        Ok((_, file, _)) => file,
        Err(response) => return response,
    };
    let Some(file) = file else {
        return (StatusCode::NOT_FOUND, "no recording").into_response();
    };
    match tokio::fs::read(&file).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/x-asciicast")], bytes).into_response(),
        Err(_) => (StatusCode::NOT_FOUND, "no recording").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_session_ids_are_taken() {
        assert_eq!(
            session_id("0193a8e2-7c1d-7f00-8000-abcdef123456"),
            Some("0193a8e2-7c1d-7f00-8000-abcdef123456")
        );
        for bad in ["", "../audit.db", "a/b", "x".repeat(65).as_str(), "a%2e"] {
            assert_eq!(session_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn rows_say_what_happened_in_a_line() {
        let v = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        assert_eq!(
            summary("command", &v(r#"{"command":"ls","exit_code":2}"#)),
            "ls → 2"
        );
        assert_eq!(
            summary(
                "ai_tool_call",
                &v(r#"{"command":"df -h","decision":"auto"}"#)
            ),
            "df -h (auto)"
        );
        assert_eq!(summary("ai_prompt", &v(r#"{"text":"why?"}"#)), "why?");
        assert_eq!(summary("auth_ok", &v("{}")), "");
    }
}
