//! The console's pages, as HTML written here: the login form and the
//! sessions list (live and finished, newest first, filtered by user,
//! target, time and a command's text). What it leaves to others: who
//! may see them (`web`), the audit's tables (`audit::db`).

use std::collections::HashMap;
use std::fmt::Write as _;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use rusqlite::{Connection, ToSql};

use super::{Shared, read_audit, require};

/// Rows a page shows at most.
const PAGE: usize = 200;
/// Longest filter value taken.
const MAX_FILTER: usize = 256;

/// `text` with HTML's special characters written as entities.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A page: its title and body, in the console's frame.
pub(super) fn page(title: &str, nav: Option<(&str, &str)>, body: &str) -> String {
    let nav = nav.map_or(String::new(), |(user, csrf)| {
        format!(
            r#"<nav><a href="/sessions">Sessions</a><a href="/approvals">Approvals</a><span class="who">{user}</span><form method="post" action="/logout"><input type="hidden" name="csrf" value="{csrf}"><button>Log out</button></form></nav>"#,
            user = escape(user),
            csrf = escape(csrf),
        )
    });
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{title} · walissh</title><link rel="stylesheet" href="/assets/console.css"></head><body><header><strong>walissh</strong>{nav}</header><main>{body}</main></body></html>"#,
        title = escape(title),
    )
}

/// The login form, with `error` above it if the last try failed.
pub(super) fn login(error: Option<&str>) -> String {
    let error = error.map_or(String::new(), |e| {
        format!(r#"<p class="error">{}</p>"#, escape(e))
    });
    let body = format!(
        r#"<h1>Log in</h1>{error}<form method="post" action="/login" class="login"><label>Name <input name="user" autocomplete="username" required autofocus></label><label>Password <input name="password" type="password" autocomplete="current-password" required></label><button>Log in</button></form>"#
    );
    page("Log in", None, &body)
}

/// What the sessions list is narrowed to.
#[derive(Default, Debug)]
pub(super) struct Filter {
    user: Option<String>,
    target: Option<String>,
    since: Option<String>,
    until: Option<String>,
    text: Option<String>,
}

impl Filter {
    fn of(query: &HashMap<String, String>) -> Result<Filter, String> {
        let take = |k: &str| {
            query
                .get(k)
                .map(|v| crate::text::prefix(v.trim(), MAX_FILTER).to_string())
                .filter(|v| !v.is_empty())
        };
        let time = |k: &str| {
            take(k)
                .map(|v| crate::audit::query::time_bound(&v))
                .transpose()
        };
        Ok(Filter {
            user: take("user"),
            target: take("target"),
            since: time("since")?,
            until: time("until")?,
            text: take("text"),
        })
    }
}

/// One row of the list.
#[derive(Debug)]
pub(super) struct Row {
    id: String,
    user: String,
    target: String,
    client: String,
    started: String,
    ended: Option<String>,
    commands: i64,
    questions: i64,
}

/// Sessions a text filter looks at first: the newest this many. When
/// they hold a page of matches, those are the page; else every session is
/// searched.
const NEWEST: usize = 10 * PAGE;

/// The sessions `filter` picks, newest first, at most `PAGE`.
pub(super) fn rows(conn: &Connection, filter: &Filter) -> rusqlite::Result<Vec<Row>> {
    let Some(text) = &filter.text else {
        return query(conn, filter, None);
    };
    // Words of a command, a question or an agent's call, as `walissh
    // audit search` finds them (the audit's full-text index, kept by its
    // writer): the words in this order, the last one a prefix.
    let phrase = format!("\"{}\"*", text.replace('"', "\"\""));
    // A word most sessions hold has as many rows in the index: reading
    // them all took 65 ms on 100,000 sessions. The newest sessions' rows
    // come first: their events are the index's rows from the lowest of
    // their rows on, so only those are read. Every session among them
    // that matches is found there; when they make a page, no older one
    // can be on it.
    let from: Option<i64> = conn.query_row(
        &format!(
            "SELECT MIN(e.seq) FROM events e WHERE e.session IN \
             (SELECT id FROM sessions ORDER BY started DESC, id DESC LIMIT {NEWEST})"
        ),
        [],
        |r| r.get(0),
    )?;
    if let Some(from) = from {
        let newest = query(conn, filter, Some((&phrase, Some(from))))?;
        if newest.len() >= PAGE {
            return Ok(newest);
        }
    }
    query(conn, filter, Some((&phrase, None)))
}

/// The list's query: with `text`, a phrase of the full-text index, and
/// with it the newest sessions' first row in the index (see [`rows`]).
fn query(
    conn: &Connection,
    filter: &Filter,
    text: Option<(&String, Option<i64>)>,
) -> rusqlite::Result<Vec<Row>> {
    let mut sql = String::from(
        "SELECT s.id, s.user, s.target, s.client_addr, s.started, s.ended, \
         (SELECT COUNT(*) FROM events e WHERE e.session = s.id AND e.kind = 'command'), \
         (SELECT COUNT(*) FROM events e WHERE e.session = s.id AND e.kind = 'ai_prompt') \
         FROM sessions s WHERE 1",
    );
    let mut params: Vec<&dyn ToSql> = Vec::new();
    for (clause, value) in [
        (" AND s.user = ?", &filter.user),
        (" AND s.target = ?", &filter.target),
        (" AND s.started >= ?", &filter.since),
        (" AND s.started <= ?", &filter.until),
    ] {
        if let Some(v) = value {
            sql.push_str(clause);
            params.push(v);
        }
    }
    let first;
    match text {
        None => {}
        Some((phrase, None)) => {
            sql.push_str(
                " AND s.id IN (SELECT e.session FROM events_text t JOIN events e \
                 ON e.seq = t.rowid WHERE events_text MATCH ?)",
            );
            params.push(phrase);
        }
        Some((phrase, Some(from))) => {
            first = from;
            sql.push_str(&format!(
                " AND s.id IN (SELECT id FROM sessions ORDER BY started DESC, id DESC LIMIT {NEWEST}) \
                 AND s.id IN (SELECT e.session FROM events_text t JOIN events e \
                 ON e.seq = t.rowid WHERE events_text MATCH ? AND t.rowid >= ?)"
            ));
            params.push(phrase);
            params.push(&first);
        }
    }
    sql.push_str(&format!(" ORDER BY s.started DESC, s.id DESC LIMIT {PAGE}"));
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params.as_slice(), |r| {
        Ok(Row {
            id: r.get(0)?,
            user: r.get(1)?,
            target: r.get(2)?,
            client: r.get(3)?,
            started: r.get(4)?,
            ended: r.get(5)?,
            commands: r.get(6)?,
            questions: r.get(7)?,
        })
    })?;
    rows.collect()
}

/// How long a session lasted, or has lasted so far.
fn duration(started: &str, ended: Option<&str>) -> String {
    let parse = |t: &str| humantime::parse_rfc3339_weak(t).ok();
    let end = ended.map_or(Some(std::time::SystemTime::now()), parse);
    match (parse(started), end) {
        (Some(s), Some(e)) => {
            let secs = e.duration_since(s).map_or(0, |d| d.as_secs());
            humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
        }
        _ => "?".to_string(),
    }
}

pub(super) async fn sessions(
    State(c): Shared,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let login = match require(&c, &headers) {
        Ok(l) => l,
        Err(to_login) => return to_login.into_response(),
    };
    let filter = match Filter::of(&query) {
        Ok(f) => f,
        Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
    };
    let read = read_audit(&c, move |conn| Ok((rows(conn, &filter)?, filter))).await;
    let (rows, filter) = match read {
        Ok(read) => read,
        Err(response) => return response,
    };
    let body = sessions_body(&rows, &filter);
    Html(page("Sessions", Some((&login.user, &login.csrf)), &body)).into_response()
}

fn sessions_body(rows: &[Row], filter: &Filter) -> String {
    let value = |v: &Option<String>| escape(v.as_deref().unwrap_or(""));
    let mut out = format!(
        r#"<h1>Sessions</h1><form method="get" action="/sessions" class="filter"><input name="user" placeholder="user" value="{}"><input name="target" placeholder="target" value="{}"><input name="since" placeholder="since (1h, 2026-12-01)" value="{}"><input name="until" placeholder="until" value="{}"><input name="text" placeholder="text in commands" value="{}"><button>Filter</button></form>"#,
        value(&filter.user),
        value(&filter.target),
        value(&filter.since),
        value(&filter.until),
        value(&filter.text),
    );
    if rows.is_empty() {
        out.push_str(r#"<p class="none">No sessions.</p>"#);
        return out;
    }
    out.push_str("<table class=\"sessions\"><thead><tr><th>User</th><th>Target</th><th>Client</th><th>Started</th><th>Duration</th><th>Commands</th><th>Questions</th><th></th></tr></thead><tbody>");
    for r in rows {
        let live = if r.ended.is_none() {
            r#"<span class="live">live</span>"#
        } else {
            ""
        };
        let _ = write!(
            out,
            r#"<tr data-session="{id}"><td>{user}</td><td>{target}</td><td>{client}</td><td><a href="/sessions/{id}">{started}</a></td><td>{duration}</td><td>{commands}</td><td>{questions}</td><td>{live}</td></tr>"#,
            id = escape(&r.id),
            user = escape(&r.user),
            target = escape(&r.target),
            client = escape(&r.client),
            started = escape(&r.started),
            duration = escape(&duration(&r.started, r.ended.as_deref())),
            commands = r.commands,
            questions = r.questions,
        );
    }
    out.push_str("</tbody></table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_whole() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\"\x1b[31m"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;\u{fffd}[31m"
        );
    }

    /// The list, from a real audit database (the writer's schema and
    /// full-text index): newest first, each filter narrowing it, text
    /// found by its words.
    #[test]
    fn the_list_filters_as_asked() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::audit::db::open_writer(&dir.path().join("audit.db")).unwrap();
        conn.execute_batch(
            "INSERT INTO sessions VALUES ('s1','ann','web1','10.0.0.1:5000','2026-12-01T10:00:00Z','2026-12-01T10:05:00Z',NULL,NULL);
             INSERT INTO sessions VALUES ('s2','bob','db1','10.0.0.2:5000','2026-12-02T10:00:00Z',NULL,NULL,NULL);
             INSERT INTO events (ts, session, kind, fields) VALUES ('t','s1','command','{\"command\":\"df -h 100%\"}');
             INSERT INTO events (ts, session, kind, fields) VALUES ('t','s1','ai_prompt','{\"text\":\"why\"}');
             INSERT INTO events (ts, session, kind, fields) VALUES ('t','s2','command','{\"command\":\"uptime\"}');
             INSERT INTO events_text (rowid, text) VALUES (1, 'df -h 100%'), (2, 'why'), (3, 'uptime');",
        )
        .unwrap();
        let ids = |f: &Filter| {
            rows(&conn, f)
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&Filter::default()), ["s2", "s1"]);
        let all = rows(&conn, &Filter::default()).unwrap();
        assert_eq!((all[1].commands, all[1].questions), (1, 1));
        assert_eq!(all[0].ended, None);
        let f = |k: &str, v: &str| {
            Filter::of(&HashMap::from([(k.to_string(), v.to_string())])).unwrap()
        };
        assert_eq!(ids(&f("user", "ann")), ["s1"]);
        assert_eq!(ids(&f("target", "db1")), ["s2"]);
        assert_eq!(ids(&f("since", "2026-12-02T00:00:00Z")), ["s2"]);
        assert_eq!(ids(&f("until", "2026-12-01T23:00:00Z")), ["s1"]);
        assert_eq!(ids(&f("text", "df -h")), ["s1"]);
        assert_eq!(ids(&f("text", "100%")), ["s1"]);
        assert_eq!(ids(&f("text", "why")), ["s1"]);
        assert_eq!(ids(&f("text", "upt")), ["s2"]);
        assert!(ids(&f("text", "h df")).is_empty());
        assert!(ids(&f("text", "time")).is_empty());
        // Quotes and FTS syntax are the user's words, not a query.
        assert!(ids(&f("text", "\" OR \"")).is_empty());
        assert!(ids(&f("text", "NEAR(df")).is_empty());
        assert!(
            Filter::of(&HashMap::from([(
                "since".to_string(),
                "yesterday-ish".to_string()
            )]))
            .is_err()
        );
        let body = sessions_body(&all, &f("text", "<b>"));
        assert!(body.contains("&lt;b&gt;") && !body.contains("<b>"));
        assert_eq!(body.matches(r#"class="live""#).count(), 1);
    }

    /// The sessions list's time on an audit of 100,000 sessions (400,000
    /// rows), for `bench/console` (a benchmark, not a test: it asserts
    /// nothing about time). Prints the median of 5 runs per query.
    /// A text filter looks at the newest sessions first: what it gives is
    /// what searching every session gives, whatever order the sessions'
    /// rows were written in, for words most sessions hold, some do, or
    /// only old ones.
    #[test]
    fn the_newest_first_text_search_gives_what_the_whole_search_does() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::audit::db::open_writer(&dir.path().join("audit.db")).unwrap();
        let n = NEWEST + 3 * PAGE;
        conn.execute_batch("BEGIN").unwrap();
        for i in 0..n {
            // Written in an order unlike their starts: a start later in
            // the list may be earlier in time.
            let started = format!("2026-01-01T00:00:00Z{:06}", (i * 7919) % n);
            let id = format!("s{i:06}");
            conn.execute(
                "INSERT INTO sessions (id, user, target, client_addr, started) VALUES (?1, ?2, 'web1', 'a', ?3)",
                rusqlite::params![id, format!("u{}", i % 3), started],
            )
            .unwrap();
            let word = match (i % 10, i < PAGE) {
                (_, true) => "oldonly common",
                (0, _) => "tenth common",
                _ => "common",
            };
            conn.execute(
                "INSERT INTO events (ts, session, kind, fields) VALUES ('t', ?1, 'command', '{}')",
                [&id],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO events_text (rowid, text) VALUES (last_insert_rowid(), ?1)",
                [word],
            )
            .unwrap();
        }
        conn.execute_batch("COMMIT").unwrap();
        let ids = |rows: Vec<Row>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
        for (text, user) in [
            ("common", None),
            ("tenth", None),
            ("oldonly", None),
            ("common", Some("u1")),
            ("nothing", None),
        ] {
            let filter = Filter {
                text: Some(text.to_string()),
                user: user.map(str::to_string),
                ..Filter::default()
            };
            let phrase = format!("\"{text}\"*");
            let whole = ids(query(&conn, &filter, Some((&phrase, None))).unwrap());
            assert_eq!(ids(rows(&conn, &filter).unwrap()), whole, "{text} {user:?}");
        }
    }

    #[test]
    #[ignore = "a benchmark: bench/console runs it in release"]
    fn sessions_list_speed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        let conn = crate::audit::db::open_writer(&path).unwrap();
        const SESSIONS: usize = 100_000;
        let started = std::time::Instant::now();
        conn.execute_batch("BEGIN").unwrap();
        {
            let mut s = conn
                .prepare("INSERT INTO sessions (id, user, target, client_addr, started, ended) VALUES (?1, ?2, ?3, '10.0.0.1:5000', ?4, ?5)")
                .unwrap();
            let mut e = conn
                .prepare("INSERT INTO events (ts, session, user, target, kind, fields) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                .unwrap();
            // What the writer's full-text index holds of a row.
            let mut x = conn
                .prepare("INSERT INTO events_text (rowid, text) VALUES (last_insert_rowid(), ?1)")
                .unwrap();
            for i in 0..SESSIONS {
                let id = format!("s{i:08}");
                let (user, target) = (format!("user{}", i % 50), format!("web{}", i % 200));
                // One every 5 minutes over a year, written as they start
                // (the writer stores a session's row when it starts).
                let at = std::time::UNIX_EPOCH
                    + std::time::Duration::from_secs(1_767_225_600 + i as u64 * 300);
                let t = humantime::format_rfc3339_seconds(at).to_string();
                s.execute(rusqlite::params![id, user, target, t, t])
                    .unwrap();
                for (kind, fields) in [
                    ("session_start", "{}".to_string()),
                    (
                        "command",
                        format!("{{\"command\":\"systemctl status app{i}\"}}"),
                    ),
                    ("ai_prompt", "{\"text\":\"why\"}".to_string()),
                    ("session_end", "{}".to_string()),
                ] {
                    e.execute(rusqlite::params![t, id, user, target, kind, fields])
                        .unwrap();
                    let value: serde_json::Value = serde_json::from_str(&fields).unwrap();
                    let text = value.get("command").or(value.get("text"));
                    if let Some(text) = text.and_then(|t| t.as_str()) {
                        x.execute([text]).unwrap();
                    }
                }
            }
        }
        conn.execute_batch("COMMIT").unwrap();
        println!(
            "built {SESSIONS} sessions in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let reader = crate::audit::db::open_reader(&path).unwrap();
        let filter = |k: &str, v: &str| {
            Filter::of(&HashMap::from([(k.to_string(), v.to_string())])).unwrap()
        };
        for (name, f) in [
            ("newest 200, no filter", Filter::default()),
            ("one user", filter("user", "user7")),
            ("one target", filter("target", "web42")),
            ("a time range", filter("since", "2026-05-01T00:00:00Z")),
            ("text in commands, common", filter("text", "systemctl")),
            (
                "text in commands, one session's",
                filter("text", "app99999"),
            ),
            ("text in commands, none", filter("text", "no-such-command")),
        ] {
            let mut times: Vec<f64> = (0..5)
                .map(|_| {
                    let t = std::time::Instant::now();
                    std::hint::black_box(rows(&reader, &f).unwrap());
                    t.elapsed().as_secs_f64() * 1000.0
                })
                .collect();
            times.sort_by(f64::total_cmp);
            println!("{name:36} {:9.2} ms", times[2]);
        }
    }
}
