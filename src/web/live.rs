//! A live session, from the console: watching it (its recording streamed
//! to the browser over a WebSocket, read-only, in the player's
//! `v2.asciicast` protocol) and, for an admin, stopping it.
//!
//! What it owns: the WebSocket (who may open one, from which page, how
//! many at once, what it sends first and how it ends), `session_watched`,
//! and the stop form's request. What it leaves to others: the recording's
//! stream (`audit::recording::Recorder::watch`), ending the session and
//! its row (`session::kill`), the page around the player (`replay`).

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
use crate::audit::views::Next;
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
    let Ok(seat) = c.viewers.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live views: try again later",
        )
            .into_response();
    };
    let Some(ids) = c.bastion.sessions.get(&id) else {
        // Another node's, where several share the audit: relayed.
        let asker = (login.user.as_str(), peer.to_string());
        let mut remote = match c
            .bastion
            .audit
            .watch_elsewhere(&id, (asker.0, &asker.1))
            .await
        {
            Ok(Some(remote)) => remote,
            Ok(None) => {
                let why = "no such session is live on this bastion";
                return (StatusCode::NOT_FOUND, why).into_response();
            }
            Err(why) => return (StatusCode::NOT_FOUND, why).into_response(),
        };
        let history = match remote.history().await {
            Ok(h) => h,
            Err(why) => return (StatusCode::BAD_GATEWAY, why).into_response(),
        };
        let c = c.clone();
        return upgrade
            .protocols(["v2.asciicast"])
            .on_upgrade(move |socket| async move {
                let _seat = seat;
                stream_to(socket, history, Feed::Remote(Box::new(remote)), &c, &token).await;
            });
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
        .on_upgrade(move |mut socket| async move {
            let _seat = seat;
            let (path, upto) = (stream.path.clone(), stream.upto);
            let read = move || crate::audit::recording::history(&path, upto, HISTORY_MAX);
            let Ok(Ok(history)) = tokio::task::spawn_blocking(read).await else {
                close(&mut socket, POLICY, "the recording cannot be read").await;
                return;
            };
            stream_to(socket, history, Feed::Local(stream.lines), &c, &token).await;
        })
}

/// Serves a view that another node's console asked of a session this
/// node carries (`audit::views`): its `session_watched` row (`via_node`:
/// the node that asked), the recording so far, then each event, until
/// the session ends or the watcher leaves.
pub(crate) async fn serve_other_node(
    bastion: &crate::bastion::Bastion,
    views: &crate::audit::views::Views,
    ask: &crate::audit::views::Ask,
) {
    let Some(ids) = bastion.sessions.get(&ask.session) else {
        let why = "the session is not live on its node any more";
        return views.end(&ask.view, Some(why)).await;
    };
    let Some(stream) = bastion.recorder.watch(&ask.session).await else {
        return views
            .end(&ask.view, Some("this session is not recorded"))
            .await;
    };
    let row = ids
        .event(Kind::SessionWatched)
        .field("by", ask.by.as_str())
        .field("client_addr", ask.addr.as_str())
        .field("via_node", ask.from.as_str());
    bastion.audit.event(row).await;
    let (path, upto) = (stream.path.clone(), stream.upto);
    let max = crate::audit::views::HISTORY_MAX;
    let read = move || crate::audit::recording::history(&path, upto, max);
    let Ok(Ok(history)) = tokio::task::spawn_blocking(read).await else {
        return views
            .end(&ask.view, Some("the recording cannot be read"))
            .await;
    };
    views.serve(ask, history, stream.lines).await;
}

/// Where a view's lines come from: this node's recorder, or another
/// node's through the relay (`audit::views`).
enum Feed {
    Local(tokio::sync::broadcast::Receiver<Arc<str>>),
    Remote(Box<crate::audit::views::Remote>),
}

impl Feed {
    /// The next line, a skip, or the end. Cancel-safe.
    async fn next(&mut self) -> Next {
        match self {
            Feed::Local(lines) => match lines.recv().await {
                Ok(line) => Next::Line(line),
                Err(RecvError::Lagged(n)) => Next::Skipped(n),
                Err(RecvError::Closed) => Next::Ended("the session ended".into()),
            },
            Feed::Remote(r) => r.next().await,
        }
    }

    /// A line already waiting, if one is.
    fn try_line(&mut self) -> Option<Arc<str>> {
        match self {
            Feed::Local(lines) => lines.try_recv().ok(),
            Feed::Remote(r) => r.try_line(),
        }
    }
}

/// Sends the recording so far (`history`), then each line as it comes,
/// until the session ends, the viewer leaves, falls behind, loses their
/// login, or the bastion stops.
async fn stream_to(
    mut socket: WebSocket,
    history: Vec<String>,
    mut feed: Feed,
    c: &Arc<Console>,
    token: &str,
) {
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
            next = feed.next() => match next {
                Next::Line(line) => {
                    if !send_batch(&mut socket, line, &mut feed).await {
                        return;
                    }
                }
                Next::Skipped(n) => {
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
                Next::Ended(why) => {
                    close(&mut socket, NORMAL, &why).await;
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
async fn send_batch(socket: &mut WebSocket, first: Arc<str>, feed: &mut Feed) -> bool {
    use futures_util::SinkExt;
    let batch = async {
        socket.feed(Message::Text(first.as_ref().into())).await?;
        for _ in 0..BATCH {
            let Some(line) = feed.try_line() else { break };
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
