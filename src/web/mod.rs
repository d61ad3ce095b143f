//! The web console: a small, read-mostly site the bastion serves itself
//! (`[web] listen`), for its auditors and admins (`[[users]] role`).
//!
//! What it owns: the listener and its bounds (requests at once, bytes in
//! a body), the routes, logging in and out (the same password and the
//! same throttle as SSH, a server-side login named by an HttpOnly,
//! SameSite=Strict cookie, a CSRF token for every form that changes
//! something) and the headers every answer carries. What it leaves to
//! others: the pages' content (`pages`), the logins' store (`logins`),
//! passwords (`password`, `throttle`), the audit (`audit`).

mod approvals;
mod listen;
pub(crate) mod live;
mod logins;
mod pages;
mod replay;
mod tls;

pub(crate) use tls::acceptor;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Form, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::audit::{Event, Kind};
use crate::bastion::Bastion;
use crate::config::{Role, Scrapers};
use crate::shutdown::Watcher;
use logins::{Login, Logins, same_secret};

/// The cookie that names a console login.
const COOKIE: &str = "walissh_console";
/// Requests served at once; more are answered 503 at once.
const MAX_REQUESTS: usize = 64;
/// The most a request's body may hold (the forms are a few fields).
const MAX_BODY: usize = 16 * 1024;
/// How long a request's body may take to arrive.
const BODY_TIME: Duration = Duration::from_secs(10);
/// Longest user name a login form may give.
const MAX_NAME: usize = 256;

/// The address a request came from, whatever it came over.
#[derive(Clone, Copy, Debug)]
struct Peer(SocketAddr);

/// What every request of the console shares.
struct Console {
    bastion: Arc<Bastion>,
    logins: Logins,
    /// Served over TLS: the cookie is `Secure`.
    secure: bool,
    busy: Semaphore,
    /// Waits for the approvals list to change (`approvals::MAX_WAITS`).
    waits: Semaphore,
    /// Live views open now (`live::MAX_VIEWERS`).
    viewers: Arc<Semaphore>,
    /// Live views and waits end at shutdown.
    shutdown: Watcher,
}

type Shared = State<Arc<Console>>;

/// Serves the console on `listener` until shutdown: over TLS with
/// `tls`, else plain HTTP.
pub(crate) async fn serve(
    bastion: Arc<Bastion>,
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: Watcher,
) {
    let idle = Duration::from_secs(*bastion.live().config.web.idle_s.get_ref());
    let console = Arc::new(Console {
        bastion,
        logins: Logins::new(idle),
        secure: tls.is_some(),
        busy: Semaphore::new(MAX_REQUESTS),
        waits: Semaphore::new(approvals::MAX_WAITS),
        viewers: Arc::new(Semaphore::new(live::MAX_VIEWERS)),
        shutdown: shutdown.clone(),
    });
    let app = router(console);
    match tls {
        None => listen::run(listener, app, shutdown).await,
        Some(acceptor) => match tls::Listener::new(listener, acceptor) {
            Ok(l) => listen::run(l, app, shutdown).await,
            Err(e) => tracing::error!(error = %e, "the web console stopped"),
        },
    }
}

fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/sessions") }))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/sessions", get(pages::sessions))
        .route("/sessions/{id}", get(replay::session))
        .route("/sessions/{id}/cast", get(replay::cast))
        .route("/sessions/{id}/watch", get(live::watch))
        .route("/sessions/{id}/stop", post(live::stop))
        .route("/approvals", get(approvals::list))
        .route("/approvals/changes", get(approvals::changes))
        .route("/approvals/{id}", post(approvals::answer))
        .route("/assets/{file}", get(asset))
        .route("/healthz", get(health))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(console.clone(), guard))
        .with_state(console)
}

/// Every request: its body read whole within [`BODY_TIME`] (a slow one
/// holds its connection, not a place among the requests served), one of a
/// bounded number at once, and every answer with the headers that keep it
/// from being framed, sniffed or cached.
async fn guard(State(c): Shared, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, MAX_BODY);
    let body = match tokio::time::timeout(BODY_TIME, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => return (StatusCode::PAYLOAD_TOO_LARGE, "too large").into_response(),
        Err(_) => {
            let slow = "the request's body came too slowly";
            return (StatusCode::REQUEST_TIMEOUT, slow).into_response();
        }
    };
    let request = Request::from_parts(parts, axum::body::Body::from(body));
    let Ok(_permit) = c.busy.try_acquire() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "busy: try again").into_response();
    };
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            // The player runs its terminal as WebAssembly.
            "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; frame-ancestors 'none'; \
             form-action 'self'; base-uri 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The files the pages load, built into the binary: the vendored
/// asciinema player (`assets/asciinema-player/`, see its VERSION and
/// `tools/update-asciinema-player`), the console's stylesheet and script.
async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    let (kind, body): (&str, &'static [u8]) = match file.as_str() {
        "asciinema-player.min.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("assets/asciinema-player/asciinema-player.min.js"),
        ),
        "asciinema-player.css" => (
            "text/css; charset=utf-8",
            include_bytes!("assets/asciinema-player/asciinema-player.css"),
        ),
        "console.css" => ("text/css; charset=utf-8", include_bytes!("console.css")),
        "console.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("console.js"),
        ),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

/// 200 while the audit is written; 503 with the reason otherwise.
async fn health(State(c): Shared) -> Response {
    match c.bastion.problem() {
        None => (StatusCode::OK, "ok\n").into_response(),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
    }
}

/// Prometheus text, to a client with the bearer token when `[web]
/// metrics_token_env` names one, else to any.
async fn metrics(State(c): Shared, headers: HeaderMap) -> Response {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let allowed = match c.bastion.live().config.web.scrapers() {
        Scrapers::Any => true,
        Scrapers::Token(want) => given.is_some_and(|g| same_secret(g, &want)),
        Scrapers::None => false,
    };
    if !allowed {
        return (StatusCode::UNAUTHORIZED, "a bearer token is needed\n").into_response();
    }
    let text = c.bastion.audit.metrics_text();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn login_page(State(c): Shared, headers: HeaderMap) -> Response {
    if signed_in(&c, &headers).is_some() {
        return Redirect::to("/sessions").into_response();
    }
    Html(pages::login(None)).into_response()
}

#[derive(Deserialize)]
struct Credentials {
    user: String,
    password: String,
}

async fn login(
    State(c): Shared,
    ConnectInfo(Peer(peer)): ConnectInfo<Peer>,
    headers: HeaderMap,
    Form(f): Form<Credentials>,
) -> Response {
    if !same_origin(&headers) {
        return forbidden();
    }
    let name = crate::text::prefix(&f.user, MAX_NAME).to_string();
    let audit = |kind: Kind| {
        Event::new(kind)
            .user(name.clone())
            .field("client_addr", peer.to_string())
    };
    let role = match check(&c, peer, &name, f.password).await {
        Ok(role) => role,
        Err(reason) => {
            c.bastion
                .audit
                .event(audit(Kind::WebLoginFail).field("reason", reason))
                .await;
            let page = pages::login(Some("Wrong name or password, or no console access."));
            return (StatusCode::UNAUTHORIZED, Html(page)).into_response();
        }
    };
    let Some(token) = c.logins.start(&name, role) else {
        let busy = "too many console logins: try again later";
        return (StatusCode::SERVICE_UNAVAILABLE, busy).into_response();
    };
    c.bastion
        .audit
        .event(audit(Kind::WebLogin).field("role", role.as_str()))
        .await;
    let cookie = format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        c.logins.idle().as_secs(),
        if c.secure { "; Secure" } else { "" }
    );
    let mut response = Redirect::to("/sessions").into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

/// The password, checked as an SSH login's is (the throttle by address
/// and by account, the verifier on a blocking thread): the user's role,
/// or why not.
async fn check(
    c: &Console,
    peer: SocketAddr,
    name: &str,
    password: String,
) -> Result<Role, &'static str> {
    let b = &c.bastion;
    let Some(attempt) = b.begin_attempt(peer.ip()).await else {
        return Err("locked_out");
    };
    let live = b.live();
    let user = live.config.user(name);
    let role = user.map_or(Role::User, |u| u.role);
    let hash = user
        .and_then(|u| u.password_hash.as_ref())
        .map(|h| h.get_ref().clone());
    tokio::time::sleep(b.account_wait(name, peer.ip()).await).await;
    let good = b.passwords.verify(password, hash).await;
    if good && role >= Role::Auditor {
        drop(attempt);
        b.account_ok(name, peer.ip());
        return Ok(role);
    }
    b.account_failed(name).await;
    tokio::time::sleep(attempt.failed()).await;
    // A good password with no console access is a failure too, and looks
    // like any other to the browser.
    Err(if good {
        "no_console_access"
    } else {
        "bad_password"
    })
}

#[derive(Deserialize)]
struct Csrf {
    csrf: String,
}

async fn logout(State(c): Shared, headers: HeaderMap, Form(f): Form<Csrf>) -> Response {
    let Some((token, login)) = signed_in(&c, &headers) else {
        return Redirect::to("/login").into_response();
    };
    if !same_origin(&headers) || !same_secret(&f.csrf, &login.csrf) {
        return forbidden();
    }
    c.logins.end(&token);
    let gone = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    let mut response = Redirect::to("/login").into_response();
    if let Ok(v) = HeaderValue::from_str(&gone) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

/// The login the request's cookie names, with its token.
fn signed_in(c: &Console, headers: &HeaderMap) -> Option<(String, Login)> {
    signed_in_as(c, headers, true)
}

/// [`signed_in`]; with `used` false, a look that does not count as the
/// login's use (a page's checks in the background).
fn signed_in_as(c: &Console, headers: &HeaderMap, used: bool) -> Option<(String, Login)> {
    let token = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(COOKIE)?.strip_prefix('='))?
        .to_string();
    let login = match used {
        true => c.logins.get(&token)?,
        false => c.logins.peek(&token)?,
    };
    Some((token, login))
}

/// Whether a request that changes something comes from the console's own
/// pages. A browser says where it comes from (`Sec-Fetch-Site`, or at
/// least `Origin`): a form posted from another site is refused whatever
/// it carries. The SameSite=Strict cookie is the first wall, the CSRF
/// token the second; this is the third. A client that is no browser
/// (curl) says neither, and has no victim's cookie to ride on.
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(site) = text("sec-fetch-site") {
        return site == "same-origin" || site == "none";
    }
    match (text("origin"), text("host")) {
        (None, _) => true,
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, rest)| rest == host),
        (Some(_), None) => false,
    }
}

fn forbidden() -> Response {
    (
        StatusCode::FORBIDDEN,
        "refused: not from the console's own page",
    )
        .into_response()
}

/// `read` on a read-only connection to the audit, on a blocking thread
/// (SQLite is blocking work): an audit that cannot be read now is a 503,
/// and said in the log.
async fn read_audit<T: Send + 'static>(
    c: &Console,
    read: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
) -> Result<T, Response> {
    let audit = c.bastion.audit.clone();
    let done = tokio::task::spawn_blocking(move || {
        let conn = crate::audit::db::open_reader(&audit.readable()?)?;
        read(&conn).map_err(|e| e.to_string())
    })
    .await;
    match done {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the console could not read the audit");
            let why = "the audit cannot be read now";
            Err((StatusCode::SERVICE_UNAVAILABLE, why).into_response())
        }
        Err(_) => Err(StatusCode::INTERNAL_SERVER_ERROR.into_response()),
    }
}

/// The console's pages for a signed-in auditor or admin: the login, or a
/// way to the login page.
fn require(c: &Console, headers: &HeaderMap) -> Result<Login, Redirect> {
    require_as(c, headers, true)
}

/// [`require`], for a page's checks in the background: no use of the
/// login (an open tab does not keep it from its idle end).
fn require_quietly(c: &Console, headers: &HeaderMap) -> Result<Login, Redirect> {
    require_as(c, headers, false)
}

/// A form that changes something, from a signed-in auditor or admin: the
/// login, when the request comes from the console's own page and carries
/// the login's CSRF token; else the answer (the way to the login page, or
/// 403).
fn require_form(c: &Console, headers: &HeaderMap, csrf: &str) -> Result<Login, Refused> {
    let login = require(c, headers).map_err(Refused::ToLogin)?;
    if !same_origin(headers) || !same_secret(csrf, &login.csrf) {
        return Err(Refused::Forbidden);
    }
    Ok(login)
}

/// Why [`require_form`] refused a form.
enum Refused {
    ToLogin(Redirect),
    Forbidden,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::ToLogin(to) => to.into_response(),
            Refused::Forbidden => forbidden(),
        }
    }
}

fn require_as(c: &Console, headers: &HeaderMap, used: bool) -> Result<Login, Redirect> {
    let Some((token, mut login)) = signed_in_as(c, headers, used) else {
        return Err(Redirect::to("/login"));
    };
    // The role as the config of the moment says: a user removed, or no
    // longer an auditor, after a reload, is out at once.
    let role = c.bastion.live().config.user(&login.user).map(|u| u.role);
    match role {
        Some(role) if role >= Role::Auditor => {
            login.role = role;
            Ok(login)
        }
        _ => {
            c.logins.end(&token);
            Err(Redirect::to("/login"))
        }
    }
}
