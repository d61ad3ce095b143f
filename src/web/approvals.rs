//! The approvals page: the agent's commands waiting for a second
//! approval (four-eyes), live, each with the command exactly as it will
//! run, the question and the session; and the answer an approver gives.
//!
//! What it owns: the page, its wait for changes (a long poll the
//! console's script reloads on), and who may answer (a role of `[ai]
//! second_approver` or above, as the config of the moment says, never the
//! user who asked). What it leaves to others: the waiting requests and
//! their end (`agent::four_eyes`), the frame (`pages`).

use std::fmt::Write as _;
use std::time::Duration;

use axum::extract::{Form, Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::pages::{self, escape};
use super::{Shared, require, require_form, require_quietly};
use crate::agent::four_eyes::Listed;
use crate::config::Role;

/// How long a wait for changes is held before it answers anyway.
const WAIT: Duration = Duration::from_secs(20);
/// Waits held at once; more answer at once (the script waits a little
/// and asks again).
pub(super) const MAX_WAITS: usize = 16;

/// The role an approver needs, as the config says now.
fn approver_role(c: &super::Console) -> Role {
    c.bastion.live().agent.four_eyes.approver
}

/// `GET /approvals`.
pub(super) async fn list(State(c): Shared, headers: HeaderMap) -> Response {
    let login = match require(&c, &headers) {
        Ok(l) => l,
        Err(to_login) => return to_login.into_response(),
    };
    let needed = approver_role(&c);
    let waiting = c.bastion.approvals.list();
    let version = *c.bastion.approvals.changes().borrow();
    let mut body = format!(
        r#"<h1>Waiting for a second approval</h1><div id="approvals" data-version="{version}">"#
    );
    if waiting.is_empty() {
        body.push_str(r#"<p class="none">No command waits.</p>"#);
    }
    for w in &waiting {
        let may = login.role >= needed && login.user != w.request.user;
        body.push_str(&card(w, may.then_some(login.csrf.as_str()), needed));
    }
    body.push_str(r#"</div><script src="/assets/console.js"></script>"#);
    Html(pages::page(
        "Approvals",
        Some((&login.user, &login.csrf)),
        &body,
    ))
    .into_response()
}

/// One waiting command; with `csrf`, the approver's buttons.
fn card(w: &Listed, csrf: Option<&str>, needed: Role) -> String {
    let r = &w.request;
    let asked =
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(w.asked_at));
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<section class="approval" data-id="{id}"><p><b>{user}</b> on <b>{target}</b>, session <a href="/sessions/{session}">{session}</a>, asked {asked}</p><pre class="command">{command}</pre><p class="meta">Question: {question}</p>"#,
        id = escape(&w.id),
        user = escape(&r.user),
        target = escape(&r.target),
        session = escape(&r.session),
        command = escape(&crate::agent::render::exact(&r.command)),
        question = escape(&crate::agent::render::exact(&r.question)),
    );
    // The model's words and the user's, invisible characters spelled
    // out: they cannot reorder or hide what the approver reads.
    if !r.reason.is_empty() {
        let why = crate::agent::render::exact(&r.reason);
        let _ = write!(out, r#"<p class="meta">Why: {}</p>"#, escape(&why));
    }
    match csrf {
        Some(csrf) => {
            let _ = write!(
                out,
                r#"<form method="post" action="/approvals/{id}" class="answer"><input type="hidden" name="csrf" value="{csrf}"><button name="answer" value="approve" class="approve">Approve</button><button name="answer" value="deny" class="deny">Deny</button></form>"#,
                id = escape(&w.id),
                csrf = escape(csrf),
            );
        }
        None => {
            let _ = write!(
                out,
                r#"<p class="none">Only a {} other than {} may answer this.</p>"#,
                needed.as_str(),
                escape(&r.user)
            );
        }
    }
    out.push_str("</section>");
    out
}

#[derive(Deserialize)]
pub(super) struct Seen {
    #[serde(default)]
    seen: u64,
}

/// `GET /approvals/changes?seen=N`: answers (with the list's version)
/// once it differs from `N`, or after a while.
pub(super) async fn changes(
    State(c): Shared,
    headers: HeaderMap,
    Query(q): Query<Seen>,
) -> Response {
    if let Err(to_login) = require_quietly(&c, &headers) {
        return to_login.into_response();
    }
    let mut changes = c.bastion.approvals.changes();
    let Ok(_held) = c.waits.try_acquire() else {
        // The script waits a little before it asks again.
        let busy = [(header::RETRY_AFTER, "2")];
        return (StatusCode::SERVICE_UNAVAILABLE, busy, "busy").into_response();
    };
    let mut shutdown = c.shutdown.clone();
    let changed = changes.wait_for(|v| *v != q.seen);
    tokio::select! {
        _ = tokio::time::timeout(WAIT, changed) => {}
        _ = shutdown.requested() => {}
    }
    let version = *changes.borrow();
    version.to_string().into_response()
}

#[derive(Deserialize)]
pub(super) struct Answer {
    csrf: String,
    answer: String,
}

/// `POST /approvals/{id}`: an approver's answer.
pub(super) async fn answer(
    State(c): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    Form(f): Form<Answer>,
) -> Response {
    let login = match require_form(&c, &headers, &f.csrf) {
        Ok(l) => l,
        Err(refused) => return refused.into_response(),
    };
    let needed = approver_role(&c);
    if login.role < needed {
        let why = format!("only a {} may give a second approval", needed.as_str());
        return (StatusCode::FORBIDDEN, why).into_response();
    }
    let approve = match f.answer.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return (StatusCode::BAD_REQUEST, "answer: approve or deny").into_response(),
    };
    let approvals = &c.bastion.approvals;
    let answer = (id.as_str(), login.user.as_str(), approve);
    match approvals
        .answer_audited(&c.bastion.audit, answer, "console")
        .await
    {
        Ok(_) => Redirect::to("/approvals").into_response(),
        Err(why) => (StatusCode::CONFLICT, why.message()).into_response(),
    }
}
