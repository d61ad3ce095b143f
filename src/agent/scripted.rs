//! A scripted OpenAI-compatible server for the agent's tests: real HTTP,
//! real SSE, replies scripted per test, every request kept.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::LlmConfig;

/// A chat-completion chunk carrying `delta`.
pub(crate) fn chunk(delta: Value) -> Value {
    json!({"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]})
}

/// A scripted OpenAI-compatible server: each connection gets the next
/// scripted reply (status, body, SSE or not); requests are kept.
pub(crate) async fn server(replies: Vec<(u16, String, bool)>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        for (status, body, sse) in replies {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = sock.read(&mut buf).await.unwrap();
                req.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&req).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len: usize = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length: ")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if req.len() >= end + 4 + len {
                        kept.lock().unwrap().push(text[end + 4..].to_string());
                        break;
                    }
                }
            }
            let kind = if sse {
                "text/event-stream"
            } else {
                "application/json"
            };
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            sock.write_all(head.as_bytes()).await.unwrap();
            sock.write_all(body.as_bytes()).await.unwrap();
        }
    });
    (url, seen)
}

pub(crate) fn sse(chunks: &[Value]) -> String {
    let mut s: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    s.push_str("data: [DONE]\n\n");
    s
}

pub(crate) fn llm(url: &str) -> LlmConfig {
    LlmConfig {
        base_url: url.to_string(),
        model: "test-model".into(),
        api_key_env: None,
        timeout_s: 5,
        temperature: None,
        max_tokens: None,
        context_tokens: 8192,
    }
}
