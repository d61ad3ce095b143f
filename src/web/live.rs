//! A live session, from the console: watching it (its recording streamed
//! to the browser over a WebSocket, read-only, in the player's
//! `v2.asciicast` protocol) and, for an admin, stopping it.
//!
//! What it owns: the WebSocket (who may open one, from which page, how
//! many at once, what it sends first and how it ends), `session_watched`,
//! and the stop form's request. What it leaves to others: the recording's
//! stream (`audit::recording::Recorder::watch`), ending the session and
//! its row (`session::kill`), the page around the player (`replay`).

use std::io::{BufRead, Read, Seek};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Form, Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;

use super::{Console, Peer, Shared, forbidden, require, require_form, same_origin, signed_in};
use crate::audit::Kind;
use crate::config::Role;

/// Live views open at once, over the whole console.
pub(super) const MAX_VIEWERS: usize = 32;
/// What a view is sent of the recording so far, at most: the header,
/// then the last whole events that fit. A longer session's view starts
/// part way (the screen fills in as it redraws).
const HISTORY_MAX: u64 = 4 << 20;
/// How often an open view checks that its login still holds.
const RECHECK: Duration = Duration::from_secs(15);
/// The close code the player takes as the stream's end.
const NORMAL: u16 = 1000;
/// The close code for a view that fell behind, or whose login ended.
const POLICY: u16 = 1008;
/// Events sent in one write at most.
const BATCH: usize = 64;
/// How long one message may take to go out: a viewer that stops reading
/// is dropped, not waited for.
const SEND: Duration = Duration::from_secs(10);

/// Sends `message`, within [`SEND`]: false when the viewer is gone or
/// stuck.
async fn send(socket: &mut WebSocket, message: Message) -> bool {
    matches!(
        tokio::time::timeout(SEND, socket.send(message)).await,
        Ok(Ok(()))
    )
}

/// `GET /sessions/{id}/watch`: the live view's WebSocket.
pub(super) async fn watch(
    State(c): Shared,
    ConnectInfo(Peer(peer)): ConnectInfo<Peer>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    upgrade: WebSocketUpgrade,
) -> Response {
    // A WebSocket is no fetch the browser keeps to its site: another
    // site's page may open one with the user's cookie (SameSite=Strict
    // stops that in browsers that honour it; this stops the rest).
    if !same_origin(&headers) {
        return forbidden();
    }
    let login = match require(&c, &headers) {
        Ok(l) => l,
        Err(to_login) => return to_login.into_response(),
    };
    let Some((token, _)) = signed_in(&c, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let Some(ids) = c.bastion.sessions.get(&id) else {
        return (
            StatusCode::NOT_FOUND,
            "no such session is live on this bastion",
        )
            .into_response();
    };
    let Ok(seat) = c.viewers.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live views: try again later",
        )
            .into_response();
    };
    let Some(stream) = c.bastion.recorder.watch(&id).await else {
        return (StatusCode::NOT_FOUND, "this session is not recorded").into_response();
    };
    let row = ids
        .event(Kind::SessionWatched)
        .field("by", login.user.as_str())
        .field("client_addr", peer.to_string());
    c.bastion.audit.event(row).await;
    let c = c.clone();
    upgrade
        .protocols(["v2.asciicast"])
        .on_upgrade(move |socket| async move {
            let _seat = seat;
            stream_to(socket, stream, &c, &token).await;
        })
}

/// Sends what the recording holds so far, then each event as it comes,
/// until the session ends, the viewer leaves, falls behind, loses their
/// login, or the bastion stops.
async fn stream_to(
    mut socket: WebSocket,
    mut stream: crate::audit::recording::Watch,
    c: &Arc<Console>,
    token: &str,
) {
    let (path, upto) = (stream.path.clone(), stream.upto);
    let history = tokio::task::spawn_blocking(move || history(&path, upto)).await;
    let Ok(Ok(history)) = history else {
        close(&mut socket, POLICY, "the recording cannot be read").await;
        return;
    };
    for line in history {
        if !send(&mut socket, Message::Text(line.into())).await {
            return;
        }
    }
    let mut recheck = tokio::time::interval(RECHECK);
    recheck.tick().await;
    let mut shutdown = c.shutdown.clone();
    loop {
        tokio::select! {
            line = stream.lines.recv() => match line {
                Ok(line) => {
                    if !send_batch(&mut socket, line, &mut stream.lines).await {
                        return;
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    // A session printing faster than the viewer reads: the
                    // view skips to what is newest, and says so on its
                    // screen (the next redraw mends it).
                    let note = format!(
                        "\r\n[walissh: {n} events skipped: the view fell behind]\r\n"
                    );
                    let line = serde_json::json!([0.0, "o", note]).to_string();
                    if !send(&mut socket, Message::Text(line.into())).await {
                        return;
                    }
                }
                Err(RecvError::Closed) => {
                    close(&mut socket, NORMAL, "the session ended").await;
                    return;
                }
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
            _ = recheck.tick() => {
                if !still_allowed(c, token) {
                    close(&mut socket, POLICY, "your console login ended").await;
                    return;
                }
            }
            _ = shutdown.requested() => {
                close(&mut socket, NORMAL, "the bastion is shutting down").await;
                return;
            }
        }
    }
}

/// Sends `first` and the lines already waiting after it (at most
/// [`BATCH`]) in one write, within [`SEND`]: a busy session's events go
/// out as fast as they come, not one write each.
async fn send_batch(
    socket: &mut WebSocket,
    first: Arc<str>,
    lines: &mut tokio::sync::broadcast::Receiver<Arc<str>>,
) -> bool {
    use futures_util::SinkExt;
    let batch = async {
        socket.feed(Message::Text(first.as_ref().into())).await?;
        for _ in 0..BATCH {
            let Ok(line) = lines.try_recv() else { break };
            socket.feed(Message::Text(line.as_ref().into())).await?;
        }
        socket.flush().await
    };
    matches!(tokio::time::timeout(SEND, batch).await, Ok(Ok(())))
}

/// The login behind `token` still holds, with a role that may watch.
fn still_allowed(c: &Console, token: &str) -> bool {
    // A look that does not count as use: an open view alone does not keep
    // a login from its idle end.
    let Some(login) = c.logins.peek(token) else {
        return false;
    };
    c.bastion
        .live()
        .config
        .user(&login.user)
        .is_some_and(|u| u.role >= Role::Auditor)
}

async fn close(socket: &mut WebSocket, code: u16, reason: &str) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    send(socket, Message::Close(Some(frame))).await;
}

/// The recording's first `upto` bytes as lines: its header, then its last
/// whole events within [`HISTORY_MAX`]. Blocking file I/O.
fn history(path: &std::path::Path, upto: u64) -> std::io::Result<Vec<String>> {
    let file = std::fs::File::open(path)?;
    let mut reader = std::io::BufReader::new(file);
    let mut header = String::new();
    (&mut reader).take(64 * 1024).read_line(&mut header)?;
    let header_len = header.len() as u64;
    let mut lines = vec![header.trim_end().to_string()];
    let from = header_len.max(upto.saturating_sub(HISTORY_MAX));
    reader.seek(std::io::SeekFrom::Start(from))?;
    let mut rest = reader.take(upto.saturating_sub(from));
    let mut first = from > header_len;
    let mut line = String::new();
    loop {
        line.clear();
        if rest.read_line(&mut line)? == 0 {
            break;
        }
        // Cut in the middle of an event: start at the next whole one.
        if std::mem::take(&mut first) {
            continue;
        }
        if line.ends_with('\n') {
            lines.push(line.trim_end().to_string());
        }
    }
    Ok(lines)
}

#[derive(Deserialize)]
pub(super) struct Stop {
    csrf: String,
    reason: String,
}

/// `POST /sessions/{id}/stop`: an admin ends a live session.
pub(super) async fn stop(
    State(c): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    Form(f): Form<Stop>,
) -> Response {
    let login = match require_form(&c, &headers, &f.csrf) {
        Ok(l) => l,
        Err(refused) => return refused.into_response(),
    };
    if login.role < Role::Admin {
        return (StatusCode::FORBIDDEN, "only an admin may stop a session").into_response();
    }
    match crate::session::kill(&c.bastion, &id, &login.user, &f.reason, "console").await {
        Ok(_) => Redirect::to(&format!("/sessions/{id}")).into_response(),
        Err(why) => (StatusCode::CONFLICT, why).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_is_the_header_and_the_last_whole_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.cast");
        let mut text = String::from("{\"version\":2}\n");
        for i in 0..10 {
            text.push_str(&format!("[{i}.0,\"o\",\"line {i}\"]\n"));
        }
        text.push_str("[10.0,\"o\",\"cut");
        std::fs::write(&path, &text).unwrap();
        let whole = text.rfind('\n').unwrap() as u64 + 1;
        let all = history(&path, whole).unwrap();
        assert_eq!(all.len(), 11);
        assert_eq!(all[0], "{\"version\":2}");
        assert_eq!(all[10], "[9.0,\"o\",\"line 9\"]");
        // Only what was whole when the view joined.
        let third = text.match_indices('\n').nth(2).unwrap().0 as u64 + 1;
        let early = history(&path, third).unwrap();
        assert_eq!(early.len(), 3, "{early:?}");
    }
}
