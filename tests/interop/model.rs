//! A scripted OpenAI-compatible chat-completions server for the agent's
//! tests: real HTTP on loopback, real SSE streaming, one scripted reply per
//! request, every request kept for assertions.
//!
//! Plain threads (the tests are sync): one accepts, one per connection
//! reads the request and answers it. Connections that are told to stall
//! or hang are held open until the [`Model`] is dropped.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use serde_json::{Value, json};

use crate::harness::DEADLINE;

/// What the server answers one request with.
pub enum Reply {
    /// 200, `text/event-stream`: each chunk as `data: {json}`, flushed one
    /// by one, then `data: [DONE]`, then the connection is closed.
    Sse(Vec<Value>),
    /// Like `Sse`, without `[DONE]`: after the chunks the stream stays open
    /// and silent until the `Model` is dropped.
    Stall(Vec<Value>),
    /// This status, this (JSON) body, these extra headers.
    Status(u16, String, Vec<(String, String)>),
    /// Reads the request and never answers (the socket stays open until
    /// the `Model` is dropped).
    Hang,
    /// 200, `text/event-stream`, with this body as it is.
    Raw(String),
    /// Like `Sse`, once the test says so (or drops the sender).
    After(std::sync::mpsc::Receiver<()>, Vec<Value>),
    /// Like `Sse`, holding back the last chunk (an answer's finish) and
    /// `[DONE]` until the test says so: the text is out, the turn not over.
    Hold(Vec<Value>, std::sync::mpsc::Receiver<()>),
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The JSON body (a JSON string holding the raw text if it was not
    /// JSON).
    pub body: Value,
    /// When its first byte arrived.
    pub at: Instant,
    /// Whether a scripted reply answered it (false: it came after the end
    /// of the script and got a 500).
    pub scripted: bool,
}

struct State {
    script: VecDeque<Reply>,
    requests: Vec<Request>,
    stopped: bool,
    /// Every connection accepted, to shut down when the model is dropped.
    open: Vec<TcpStream>,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

pub struct Model {
    addr: SocketAddr,
    shared: Shared,
}

/// The body of the 500 sent to requests beyond the script.
pub const BEYOND_SCRIPT: &str = "the test script has no reply for this request";

impl Model {
    pub fn start(replies: Vec<Reply>) -> Model {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared: Shared = Arc::new((
            Mutex::new(State {
                script: replies.into(),
                requests: Vec::new(),
                stopped: false,
                open: Vec::new(),
            }),
            Condvar::new(),
        ));
        let s = shared.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                {
                    let mut st = s.0.lock().unwrap();
                    if st.stopped {
                        return;
                    }
                    if let Ok(c) = conn.try_clone() {
                        st.open.push(c);
                    }
                }
                let s = s.clone();
                std::thread::spawn(move || serve(conn, s));
            }
        });
        Model { addr, shared }
    }

    /// The `[llm] base_url` to give walissh.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Waits until `n` requests came; returns all the bodies so far.
    pub fn wait_requests(&self, n: usize) -> Vec<Value> {
        let (m, cv) = &*self.shared;
        let start = Instant::now();
        let mut st = m.lock().unwrap();
        while st.requests.len() < n {
            let left = DEADLINE.checked_sub(start.elapsed()).unwrap_or_else(|| {
                panic!(
                    "the model server got {} requests, not {n}:\n{:#?}",
                    st.requests.len(),
                    st.requests.iter().map(|r| &r.body).collect::<Vec<_>>()
                )
            });
            st = cv.wait_timeout(st, left).unwrap().0;
        }
        st.requests.iter().map(|r| r.body.clone()).collect()
    }

    /// Every request so far, with its path and arrival time.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.0.lock().unwrap().requests.clone()
    }

    /// How many requests came so far.
    pub fn count(&self) -> usize {
        self.shared.0.lock().unwrap().requests.len()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let (m, cv) = &*self.shared;
        let open = {
            let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
            st.stopped = true;
            std::mem::take(&mut st.open)
        };
        cv.notify_all();
        for c in open {
            let _ = c.shutdown(Shutdown::Both);
        }
        // Wakes the accepting thread, which then sees `stopped`.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Reads one request off `conn`, records it, answers it with the next
/// scripted reply.
fn serve(conn: TcpStream, shared: Shared) {
    let _ = conn.set_nodelay(true);
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    // The first byte's arrival is the request's time.
    match reader.fill_buf() {
        Ok([]) | Err(_) => return,
        Ok(_) => {}
    }
    let at = Instant::now();
    let Some((method, path, _headers, body)) = read_request(&mut reader) else {
        return;
    };
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let (m, cv) = &*shared;
    let reply = {
        let mut st = m.lock().unwrap();
        let reply = st.script.pop_front();
        st.requests.push(Request {
            method,
            path,
            body,
            at,
            scripted: reply.is_some(),
        });
        reply
    };
    cv.notify_all();
    let mut w = conn;
    let stall = match reply {
        Some(Reply::Sse(chunks)) => {
            let _ = write_sse(&mut w, &chunks, true);
            false
        }
        Some(Reply::After(gate, chunks)) => {
            let _ = gate.recv();
            let _ = write_sse(&mut w, &chunks, true);
            false
        }
        Some(Reply::Hold(mut chunks, gate)) => {
            let last = chunks.pop();
            let _ = write_sse(&mut w, &chunks, false);
            let _ = gate.recv();
            let _ = last.map_or(Ok(()), |c| w.write_all(format!("data: {c}\n\n").as_bytes()));
            let _ = w.write_all(b"data: [DONE]\n\n").and_then(|_| w.flush());
            false
        }
        Some(Reply::Stall(chunks)) => {
            let _ = write_sse(&mut w, &chunks, false);
            true
        }
        Some(Reply::Status(code, body, extra)) => {
            let _ = write_status(&mut w, code, &body, &extra);
            false
        }
        Some(Reply::Hang) => true,
        Some(Reply::Raw(body)) => {
            let _ = write_sse_head(&mut w).and_then(|_| w.write_all(body.as_bytes()));
            false
        }
        None => {
            let body = json!({"error": {"message": BEYOND_SCRIPT, "type": "server_error"}});
            let _ = write_status(&mut w, 500, &body.to_string(), &[]);
            false
        }
    };
    if stall {
        // Held open, silent, until the model is dropped.
        let mut st = m.lock().unwrap();
        while !st.stopped {
            st = cv.wait(st).unwrap();
        }
        return;
    }
    let _ = w.flush();
    let _ = w.shutdown(Shutdown::Write);
    // Lets the client see the end before the socket goes: drains what it
    // may still send (nothing, normally) until it closes its side.
    let mut sink = [0u8; 1024];
    while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
}

type Head = (String, String, Vec<(String, String)>, Vec<u8>);

/// Method, path, headers (names lowercased) and body (by Content-Length or
/// chunked).
fn read_request(r: &mut impl BufRead) -> Option<Head> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end_matches(['\r', '\n']);
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        loop {
            let mut size = String::new();
            if r.read_line(&mut size).ok()? == 0 {
                return None;
            }
            let size = size.trim().split(';').next()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            if n == 0 {
                // Trailers, up to the empty line.
                loop {
                    let mut t = String::new();
                    if r.read_line(&mut t).ok()? == 0 || t.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let mut chunk = vec![0u8; n];
            r.read_exact(&mut chunk).ok()?;
            body.extend_from_slice(&chunk);
            let mut crlf = String::new();
            r.read_line(&mut crlf).ok()?;
        }
    } else if let Some(len) = header("content-length") {
        let len: usize = len.parse().ok()?;
        body.resize(len, 0);
        r.read_exact(&mut body).ok()?;
    }
    Some((method, path, headers, body))
}

fn write_sse_head(w: &mut TcpStream) -> std::io::Result<()> {
    w.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
          connection: close\r\n\r\n",
    )
}

fn write_sse(w: &mut TcpStream, chunks: &[Value], done: bool) -> std::io::Result<()> {
    write_sse_head(w)?;
    for c in chunks {
        w.write_all(format!("data: {c}\n\n").as_bytes())?;
        w.flush()?;
    }
    if done {
        w.write_all(b"data: [DONE]\n\n")?;
    }
    w.flush()
}

fn write_status(
    w: &mut TcpStream,
    code: u16,
    body: &str,
    extra: &[(String, String)],
) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())?;
    w.write_all(body.as_bytes())?;
    w.flush()
}

// ---- stream chunks ----

/// A chat-completion chunk with this `delta` (and `finish_reason`).
pub fn chunk(delta: Value, finish: Option<&str>) -> Value {
    let mut choice = json!({"index": 0, "delta": delta});
    if let Some(f) = finish {
        choice["finish_reason"] = json!(f);
    }
    json!({"id": "x", "object": "chat.completion.chunk", "choices": [choice]})
}

/// A chunk of answer text.
pub fn text(t: &str) -> Value {
    chunk(json!({"content": t}), None)
}

/// The last chunk of a turn: an empty delta and a finish reason.
pub fn finish(reason: &str) -> Value {
    chunk(json!({}), Some(reason))
}

/// A final answer, streamed in two pieces, then `finish_reason: stop`.
pub fn answer(t: &str) -> Vec<Value> {
    let cut = t.floor_char_boundary(t.len() / 2);
    vec![text(&t[..cut]), text(&t[cut..]), finish("stop")]
}

/// The arguments `run_command` gets.
pub fn arguments(command: &str, reason: &str) -> String {
    json!({"command": command, "reason": reason}).to_string()
}

/// One `run_command` call at `index`, its arguments streamed in four
/// fragments (cut anywhere, as providers do), without a finish chunk.
pub fn call_at(index: u64, id: &str, command: &str, reason: &str) -> Vec<Value> {
    let args = arguments(command, reason);
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "index": index, "id": id, "type": "function",
            "function": {"name": "run_command", "arguments": ""}}]}),
        None,
    )];
    let mut from = 0;
    for i in 1..=4 {
        let to = args.floor_char_boundary(args.len() * i / 4);
        if to > from {
            out.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": &args[from..to]}}]}),
                None,
            ));
        }
        from = to;
    }
    out
}

/// A turn with one call of the tool `name` with `args`, whole, then
/// `finish_reason: tool_calls`.
pub fn tool_call(id: &str, name: &str, args: Value) -> Vec<Value> {
    vec![
        chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "index": 0, "id": id, "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]}),
            None,
        ),
        finish("tool_calls"),
    ]
}

/// A turn with one `run_command` call, its arguments in fragments, ending
/// with `finish_reason: tool_calls`.
pub fn call(id: &str, command: &str, reason: &str) -> Vec<Value> {
    calls(&[(id, command, reason)])
}

/// A turn with several `run_command` calls (indexes 0, 1, ...), each in
/// fragments, one after the other.
pub fn calls(list: &[(&str, &str, &str)]) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, (id, command, reason)) in list.iter().enumerate() {
        out.extend(call_at(i as u64, id, command, reason));
    }
    out.push(finish("tool_calls"));
    out
}

/// A turn with one `run_command` call in a single chunk, as some providers
/// send it: `content: null` beside the call, a `reasoning_content` field,
/// no `reason` argument and no finish_reason.
pub fn call_whole(id: &str, command: &str) -> Vec<Value> {
    vec![
        json!({"id": "x", "object": "chat.completion.chunk", "choices": [{
            "index": 0,
            "delta": {
                "role": "assistant",
                "content": null,
                "reasoning_content": "The user wants to know; I will look.",
                "tool_calls": [{"index": 0, "id": id, "type": "function",
                    "function": {"name": "run_command",
                                 "arguments": json!({"command": command}).to_string()}}]
            }
        }]}),
    ]
}

#[cfg(test)]
mod tests {
    //! The scripted server on its own, driven by a hand-written HTTP client.

    use super::*;

    /// A response: status, headers (lowercased names), body.
    struct Response {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Response {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        }
    }

    fn connect(model: &Model) -> TcpStream {
        let s = TcpStream::connect(model.addr).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        s
    }

    fn send(s: &mut TcpStream, body: &str, chunked: bool) {
        let mut req = "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n\
                       content-type: application/json\r\n"
            .to_string();
        if chunked {
            req.push_str("transfer-encoding: chunked\r\n\r\n");
            let cut = body.len() / 2;
            for part in [&body[..cut], &body[cut..]] {
                req.push_str(&format!("{:x}\r\n{part}\r\n", part.len()));
            }
            req.push_str("0\r\n\r\n");
        } else {
            req.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        }
        s.write_all(req.as_bytes()).unwrap();
    }

    /// Reads a whole response, up to the server closing the connection.
    fn read_response(s: &mut TcpStream) -> Response {
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        parse(&String::from_utf8(raw).unwrap())
    }

    fn parse(raw: &str) -> Response {
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap();
        Response {
            status: status.parse().unwrap(),
            headers: lines
                .map(|l| {
                    let (k, v) = l.split_once(':').unwrap();
                    (k.trim().to_ascii_lowercase(), v.trim().to_string())
                })
                .collect(),
            body: body.to_string(),
        }
    }

    fn post(model: &Model, body: &str) -> Response {
        let mut s = connect(model);
        send(&mut s, body, false);
        read_response(&mut s)
    }

    /// Reads until `needle` came; returns everything read.
    fn read_until(s: &mut TcpStream, needle: &str) -> String {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains(needle) {
            let n = s.read(&mut buf).unwrap();
            assert!(
                n > 0,
                "closed before {needle:?}: {}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8(got).unwrap()
    }

    /// Nothing more to read right now, and the connection is not closed.
    fn still_open_and_silent(s: &mut TcpStream) {
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("expected an open, silent stream: {other:?}"),
        }
        s.set_nonblocking(false).unwrap();
    }

    /// The `data:` payloads of an SSE body.
    fn events(body: &str) -> Vec<String> {
        body.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| e.strip_prefix("data: ").unwrap().to_string())
            .collect()
    }

    #[test]
    fn sse_replies_in_order_and_requests_are_kept() {
        let model = Model::start(vec![
            Reply::Sse(call("c1", "df -h", "disk")),
            Reply::Sse(answer("All fine.")),
        ]);
        assert!(model.url().starts_with("http://127.0.0.1:"));
        assert!(model.url().ends_with("/v1"));
        let r = post(&model, r#"{"n": 1}"#);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        assert_eq!(r.header("content-length"), None);
        let ev = events(&r.body);
        assert_eq!(ev.last().unwrap(), "[DONE]");
        // The call's arguments, put back together, are the whole JSON.
        let chunks: Vec<Value> = ev[..ev.len() - 1]
            .iter()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect();
        assert!(chunks.len() >= 5, "{chunks:#?}");
        let first = &chunks[0]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(first["id"], "c1");
        assert_eq!(first["function"]["name"], "run_command");
        let args: String = chunks
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
            })
            .collect();
        let args: Value = serde_json::from_str(&args).unwrap();
        assert_eq!(args, json!({"command": "df -h", "reason": "disk"}));
        assert_eq!(
            chunks.last().unwrap()["choices"][0]["finish_reason"],
            "tool_calls"
        );

        let r = post(&model, r#"{"n": 2}"#);
        let ev = events(&r.body);
        let said: String = ev[..ev.len() - 1]
            .iter()
            .filter_map(|e| {
                serde_json::from_str::<Value>(e).unwrap()["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(said, "All fine.");

        let bodies = model.wait_requests(2);
        assert_eq!(bodies, [json!({"n": 1}), json!({"n": 2})]);
        let reqs = model.requests();
        assert_eq!(reqs[0].method, "POST");
        assert_eq!(reqs[0].path, "/v1/chat/completions");
        assert!(reqs[0].scripted && reqs[1].scripted);
        assert!(reqs[1].at >= reqs[0].at);
    }

    #[test]
    fn statuses_with_headers_and_requests_beyond_the_script() {
        let model = Model::start(vec![
            Reply::Status(
                429,
                r#"{"error":{"message":"slow down"}}"#.into(),
                vec![("Retry-After".into(), "1".into())],
            ),
            Reply::Raw("data: not json\n\n".into()),
        ]);
        let r = post(&model, "{}");
        assert_eq!(r.status, 429);
        assert_eq!(r.header("retry-after"), Some("1"));
        assert_eq!(r.body, r#"{"error":{"message":"slow down"}}"#);
        let r = post(&model, "{}");
        assert_eq!(r.status, 200);
        assert_eq!(r.body, "data: not json\n\n");
        let r = post(&model, "{}");
        assert_eq!(r.status, 500);
        assert!(r.body.contains(BEYOND_SCRIPT));
        assert_eq!(model.count(), 3);
        assert!(!model.requests()[2].scripted);
    }

    #[test]
    fn chunked_request_bodies_are_read() {
        let model = Model::start(vec![Reply::Sse(vec![text("x")])]);
        let mut s = connect(&model);
        send(&mut s, r#"{"model": "test-model", "stream": true}"#, true);
        assert_eq!(read_response(&mut s).status, 200);
        assert_eq!(
            model.wait_requests(1),
            [json!({"model": "test-model", "stream": true})]
        );
    }

    #[test]
    fn a_stall_streams_then_holds_until_dropped() {
        let model = Model::start(vec![Reply::Stall(vec![text("Let me look")])]);
        let mut s = connect(&model);
        send(&mut s, "{}", false);
        let got = read_until(&mut s, "Let me look");
        assert!(got.starts_with("HTTP/1.1 200"));
        assert!(!got.contains("[DONE]"));
        still_open_and_silent(&mut s);
        drop(model);
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(!String::from_utf8_lossy(&rest).contains("[DONE]"));
    }

    #[test]
    fn a_hang_reads_the_request_and_never_answers() {
        let model = Model::start(vec![Reply::Hang]);
        let mut s = connect(&model);
        send(&mut s, r#"{"q": 1}"#, false);
        assert_eq!(model.wait_requests(1), [json!({"q": 1})]);
        still_open_and_silent(&mut s);
        drop(model);
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }

    #[test]
    fn two_calls_in_one_turn_and_a_whole_call() {
        let turn = calls(&[("a", "echo 1", "one"), ("b", "echo 2", "two")]);
        let mut by_index: Vec<(String, String)> = vec![Default::default(); 2];
        for c in &turn {
            if let Some(tc) = c["choices"][0]["delta"]["tool_calls"].as_array() {
                let i = tc[0]["index"].as_u64().unwrap() as usize;
                if let Some(id) = tc[0]["id"].as_str() {
                    by_index[i].0 = id.to_string();
                }
                by_index[i].1 += tc[0]["function"]["arguments"].as_str().unwrap();
            }
        }
        assert_eq!(by_index[0].0, "a");
        assert_eq!(by_index[1].0, "b");
        assert_eq!(by_index[1].1, arguments("echo 2", "two"));
        let whole = &call_whole("w", "uptime")[0]["choices"][0];
        assert!(whole.get("finish_reason").is_none());
        assert_eq!(whole["delta"]["content"], Value::Null);
        assert!(whole["delta"]["reasoning_content"].is_string());
        assert_eq!(
            whole["delta"]["tool_calls"][0]["function"]["arguments"],
            r#"{"command":"uptime"}"#
        );
    }
}
