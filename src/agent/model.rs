//! The model client: one streamed chat-completions turn against any
//! OpenAI-compatible endpoint (`[llm]`), tolerant of what real providers
//! send.
//!
//! Requests and stream chunks are plain JSON (async-openai's `byot`), not
//! its strict types: providers omit `type`, `index` or `finish_reason`,
//! send `content: null` beside tool calls, add `reasoning_content`, and
//! stream a tool call's arguments in fragments or whole. The
//! [`Accumulator`] folds whatever arrives into a [`Turn`]. Retries with
//! backoff on 429 and 5xx (honouring Retry-After) are async-openai's.
//! Failures come back as one line for the user's terminal.

use std::collections::BTreeMap;
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::config::LlmConfig;

pub(crate) use crate::context::ToolCall;

/// What the model said in one turn.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Turn {
    pub(crate) text: String,
    pub(crate) tool_calls: Vec<ToolCall>,
    pub(crate) finish_reason: Option<String>,
}

#[derive(Clone)]
pub(crate) struct Model {
    client: Client<OpenAIConfig>,
    model: String,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    base_url: String,
    timeout: Duration,
}

impl Model {
    pub(crate) fn new(cfg: &LlmConfig) -> Result<Model, String> {
        let mut config = OpenAIConfig::new().with_api_base(cfg.base_url.trim_end_matches('/'));
        if let Some(var) = &cfg.api_key_env {
            let key = std::env::var(var).map_err(|_| format!("{var} (api_key_env) is not set"))?;
            config = config.with_api_key(key);
        }
        let timeout = Duration::from_secs(cfg.timeout_s.max(1));
        // A stream may run long; what must not is a silence between chunks.
        // `turn` times each chunk itself, for a clear message; reqwest's
        // own limit is a backstop.
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(timeout + Duration::from_secs(5))
            .build()
            .map_err(|e| format!("cannot set up the model client: {e}"))?;
        Ok(Model {
            client: Client::with_config(config).with_http_client(http),
            model: cfg.model.clone(),
            temperature: cfg.temperature,
            max_tokens: cfg.max_tokens,
            base_url: cfg.base_url.clone(),
            timeout,
        })
    }

    /// Streams one turn. `on_text` gets the answer's text as it arrives.
    pub(crate) async fn turn(
        &self,
        messages: &[Value],
        tools: &[Value],
        mut on_text: impl FnMut(&str),
    ) -> Result<Turn, ModelError> {
        let mut request = json!({
            "model": self.model,
            "messages": messages,
            "stream": true,
        });
        if !tools.is_empty() {
            request["tools"] = Value::Array(tools.to_vec());
        }
        if let Some(t) = self.temperature {
            request["temperature"] = json!(t);
        }
        if let Some(n) = self.max_tokens {
            request["max_tokens"] = json!(n);
        }
        let silent = || self.silent();
        let chat = self.client.chat();
        let opened = chat.create_stream_byot::<Value, Value>(request);
        let mut stream = tokio::time::timeout(self.timeout, opened)
            .await
            .map_err(|_| silent())?
            .map_err(|e| self.explain(e))?;
        let mut acc = Accumulator::default();
        loop {
            let next = tokio::time::timeout(self.timeout, stream.next());
            let Some(chunk) = next.await.map_err(|_| silent())? else {
                break;
            };
            let chunk = chunk.map_err(|e| self.explain(e))?;
            if let Some(text) = acc.absorb(&chunk) {
                on_text(&text);
            }
            if acc.bytes > MAX_TURN {
                return Err(ModelError::TooLong);
            }
        }
        Ok(acc.finish())
    }

    /// The same endpoint and client (one connection pool), another model.
    pub(crate) fn with_model(&self, model: &str) -> Model {
        Model {
            model: model.to_string(),
            ..self.clone()
        }
    }

    fn silent(&self) -> ModelError {
        ModelError::Silent(self.timeout.as_secs())
    }

    /// What went wrong, in the user's terms.
    fn explain(&self, e: OpenAIError) -> ModelError {
        match e {
            OpenAIError::ApiError(r) => match r.status_code.as_u16() {
                401 | 403 => ModelError::Key(r.api_error.message),
                404 => ModelError::UnknownModel {
                    model: self.model.clone(),
                    message: r.api_error.message,
                },
                429 => ModelError::RateLimited,
                code => ModelError::Status {
                    code,
                    message: r.api_error.message,
                },
            },
            OpenAIError::Reqwest(e) if e.is_timeout() => self.silent(),
            OpenAIError::Reqwest(e) if e.is_connect() => {
                ModelError::Unreachable(self.base_url.clone())
            }
            OpenAIError::StreamError(e) if e.to_string().contains("timed out") => self.silent(),
            OpenAIError::JSONDeserialize(_, content) => {
                ModelError::NotChat(crate::text::head(&content, 80).to_string())
            }
            other => {
                let text = other.to_string();
                let text = crate::text::head(&text, 200);
                ModelError::Other(text.replace('\n', " "))
            }
        }
    }
}

/// Why a turn failed: a sentence for the user (its `Display`), and which
/// case it is ([`ModelError::reason`]) for the `ai_error` row, so an
/// operator can tell a revoked key from a slow endpoint without reading
/// sentences.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ModelError {
    #[error("the model did not answer within {0} s")]
    Silent(u64),
    #[error("the model endpoint refused the API key ({0})")]
    Key(String),
    #[error("the model endpoint does not know model {model} ({message})")]
    UnknownModel { model: String, message: String },
    #[error("the model endpoint is rate-limiting us; try again shortly")]
    RateLimited,
    #[error("the model endpoint answered {code}: {message}")]
    Status { code: u16, message: String },
    #[error("cannot reach the model endpoint at {0}")]
    Unreachable(String),
    #[error("the model endpoint sent something that is not a chat completion: {0:?}")]
    NotChat(String),
    #[error("the model's answer ran past {} MiB; stopped", MAX_TURN >> 20)]
    TooLong,
    #[error("the model request failed: {0}")]
    Other(String),
}

impl ModelError {
    /// The case, as the `ai_error` row's `reason` names it.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            ModelError::Silent(_) => "model_timeout",
            ModelError::Key(_) => "model_key",
            ModelError::UnknownModel { .. } => "model_unknown",
            ModelError::RateLimited => "model_rate_limited",
            ModelError::Status { .. } => "model_status",
            ModelError::Unreachable(_) => "model_unreachable",
            ModelError::NotChat(_) => "model_not_chat",
            ModelError::TooLong => "model_too_long",
            ModelError::Other(_) => "model_other",
        }
    }
}

/// Bytes one turn may take (text, calls and their arguments): a stream
/// that runs on past it (a broken or hostile endpoint) is stopped.
const MAX_TURN: usize = 4 << 20;

/// Folds stream chunks into a turn.
#[derive(Default)]
pub(crate) struct Accumulator {
    /// About how many bytes the turn holds (each call counts 64 more).
    bytes: usize,
    text: String,
    /// By the provider's `index`, or by order of appearance without one.
    calls: BTreeMap<u64, ToolCall>,
    finish_reason: Option<String>,
}

impl Accumulator {
    /// Takes one chunk; returns the text it adds to the answer.
    pub(crate) fn absorb(&mut self, chunk: &Value) -> Option<String> {
        let choice = chunk.get("choices")?.get(0)?;
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        let delta = choice.get("delta").or_else(|| choice.get("message"))?;
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (position, call) in calls.iter().enumerate() {
                self.absorb_call(position, call);
            }
        }
        let text = delta.get("content").and_then(Value::as_str)?;
        self.bytes += text.len();
        self.text.push_str(text);
        (!text.is_empty()).then(|| text.to_string())
    }

    fn absorb_call(&mut self, position: usize, call: &Value) {
        let index = match call.get("index").and_then(Value::as_u64) {
            Some(i) => i,
            // No index: a new id starts a new call, else it continues the
            // one at this position.
            None => match call.get("id").and_then(Value::as_str) {
                Some(id) => self
                    .calls
                    .iter()
                    .find(|(_, c)| c.id == id)
                    .map_or(self.calls.len() as u64, |(i, _)| *i),
                None => position as u64,
            },
        };
        if !self.calls.contains_key(&index) {
            self.bytes += 64;
        }
        let entry = self.calls.entry(index).or_default();
        if let Some(id) = call.get("id").and_then(Value::as_str)
            && entry.id.is_empty()
        {
            entry.id = id.to_string();
        }
        let Some(function) = call.get("function") else {
            return;
        };
        // Names come whole or in fragments; a repeated whole name is not
        // appended twice.
        if let Some(name) = function.get("name").and_then(Value::as_str)
            && !entry.name.ends_with(name)
        {
            self.bytes += name.len();
            entry.name.push_str(name);
        }
        match function.get("arguments") {
            Some(Value::String(fragment)) => {
                self.bytes += fragment.len();
                entry.arguments.push_str(fragment);
            }
            // Some providers send the arguments as an object.
            Some(v @ Value::Object(_)) => {
                entry.arguments = v.to_string();
                self.bytes += entry.arguments.len();
            }
            _ => {}
        }
    }

    pub(crate) fn finish(self) -> Turn {
        let tool_calls = self
            .calls
            .into_values()
            .enumerate()
            .map(|(i, mut c)| {
                if c.id.is_empty() {
                    c.id = format!("call_{i}");
                }
                c
            })
            .filter(|c| !c.name.is_empty())
            .collect();
        Turn {
            text: self.text,
            tool_calls,
            finish_reason: self.finish_reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::scripted::{chunk, llm, server, sse};

    #[test]
    fn a_non_chat_body_is_cut_on_a_char_boundary() {
        let model = Model::new(&llm("http://127.0.0.1:9/v1")).unwrap();
        // 3-byte characters: byte 80 falls inside one.
        let body = "語".repeat(100);
        let e = serde_json::from_str::<Value>("{").unwrap_err();
        let said = model
            .explain(OpenAIError::JSONDeserialize(e, body))
            .to_string();
        assert!(said.contains(&"語".repeat(26)), "{said}");
        assert!(!said.contains(&"語".repeat(27)), "{said}");
    }

    #[test]
    fn arguments_in_fragments_and_in_one_piece() {
        let mut a = Accumulator::default();
        a.absorb(&chunk(json!({"content": null, "tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "run_command", "arguments": ""}}]})));
        a.absorb(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"command\": "}}]}),
        ));
        a.absorb(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"df -h\"}"}}]}),
        ));
        a.absorb(&chunk(json!({"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "run_command", "arguments": "{\"command\":\"free\"}"}}]})));
        let t = a.finish();
        assert_eq!(t.tool_calls.len(), 2);
        assert_eq!(t.tool_calls[0].arguments, "{\"command\": \"df -h\"}");
        assert_eq!(t.tool_calls[1].id, "c2");
        assert_eq!(t.tool_calls[1].arguments, "{\"command\":\"free\"}");
        assert!(t.finish_reason.is_none());
    }

    #[test]
    fn lenient_about_what_providers_leave_out_or_add() {
        let mut a = Accumulator::default();
        assert_eq!(
            a.absorb(&chunk(
                json!({"reasoning_content": "hmm", "content": "Disk "})
            ))
            .as_deref(),
            Some("Disk ")
        );
        a.absorb(&chunk(json!({"content": "is full."})));
        // No index, no type, arguments as an object.
        a.absorb(&json!({"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"name": "run_command", "arguments": {"command": "du -sh /var"}}}]}, "finish_reason": "tool_calls"}]}));
        let t = a.finish();
        assert_eq!(t.text, "Disk is full.");
        assert_eq!(t.tool_calls[0].arguments, "{\"command\":\"du -sh /var\"}");
        assert_eq!(t.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[tokio::test]
    async fn a_streamed_turn_over_real_http() {
        let body = sse(&[
            chunk(json!({"content": "Hel"})),
            chunk(json!({"content": "lo"})),
        ]);
        let (url, seen) = server(vec![(200, body, true)]).await;
        let model = Model::new(&llm(&url)).unwrap();
        let mut streamed = String::new();
        let t = model
            .turn(&[json!({"role": "user", "content": "hi"})], &[], |s| {
                streamed.push_str(s)
            })
            .await
            .unwrap();
        assert_eq!(t.text, "Hello");
        assert_eq!(streamed, "Hello");
        let req: Value = serde_json::from_str(&seen.lock().unwrap()[0]).unwrap();
        assert_eq!(req["model"], "test-model");
        assert_eq!(req["stream"], true);
    }

    #[tokio::test]
    async fn a_stream_that_runs_past_the_bound_is_stopped() {
        // Five 1 MiB pieces of arguments, over real HTTP and SSE: the turn
        // is stopped past 4 MiB instead of growing with the stream.
        let piece = "x".repeat(1 << 20);
        let chunks: Vec<Value> = (0..5)
            .map(|i| chunk(json!({"tool_calls": [{"index": 0, "id": if i == 0 { "c" } else { "" }, "function": {"arguments": piece}}]})))
            .collect();
        let (url, _) = server(vec![(200, sse(&chunks), true)]).await;
        let model = Model::new(&llm(&url)).unwrap();
        let err = model.turn(&[], &[], |_| {}).await.err().unwrap();
        assert_eq!(
            err.to_string(),
            "the model's answer ran past 4 MiB; stopped"
        );
        assert_eq!(err.reason(), "model_too_long");
    }

    #[tokio::test]
    async fn a_server_error_is_retried_and_errors_are_one_line() {
        let ok = sse(&[chunk(json!({"content": "ok"}))]);
        let err = json!({"error": {"message": "overloaded", "type": "server_error"}}).to_string();
        let (url, seen) = server(vec![(500, err, false), (200, ok, true)]).await;
        let model = Model::new(&llm(&url)).unwrap();
        let t = model.turn(&[], &[], |_| {}).await.unwrap();
        assert_eq!(t.text, "ok");
        assert_eq!(seen.lock().unwrap().len(), 2);

        let denied =
            json!({"error": {"message": "bad key", "type": "invalid_request_error"}}).to_string();
        let (url, _) = server(vec![(401, denied, false)]).await;
        let e = Model::new(&llm(&url))
            .unwrap()
            .turn(&[], &[], |_| {})
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the model endpoint refused the API key"),
            "{e}"
        );
        assert_eq!(e.reason(), "model_key");

        let closed = format!("http://127.0.0.1:{}/v1", {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        });
        let e = Model::new(&llm(&closed))
            .unwrap()
            .turn(&[], &[], |_| {})
            .await
            .unwrap_err();
        assert!(
            e.to_string().starts_with("cannot reach the model endpoint"),
            "{e}"
        );
        assert!(!e.to_string().contains('\n'));
        assert_eq!(e.reason(), "model_unreachable");
    }
}
