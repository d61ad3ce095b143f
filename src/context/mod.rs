//! Context governance: what the model sees each turn, and what a session
//! remembers between questions.
//!
//! Two layers. Each turn, providers describe the
//! session (`providers`) and the prompt builder renders them as a dynamic
//! prefix on the current question, for that turn only; the history is cut
//! to a token budget by a reducer over message groups (`reduce`), so a tool
//! result never travels without its call. Between questions, the session's
//! store (`store`) keeps a sanitised, bounded conversation. Everything
//! bound for the model is scrubbed of secrets first (`redact`). What it
//! leaves to others: running the loop (`agent::react`), and where the
//! facts come from (the terminal model, the target probe).

pub(crate) mod failures;
pub(crate) mod providers;
pub(crate) mod redact;
pub(crate) mod reduce;
pub(crate) mod store;

use serde_json::{Value, json};

/// A tool call the model asked for. `arguments` is the raw text: whether it
/// is valid JSON is for the caller to check (and to tell the model).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ToolCall {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: String,
}

impl ToolCall {
    /// Replaces the arguments by their size: what history keeps of a call
    /// whose arguments are too long to keep.
    pub(crate) fn cut_arguments(&mut self) {
        self.arguments = json!({"cut": format!("{} bytes", self.arguments.len())}).to_string();
    }
}

/// One chat message, as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    System(String),
    User(String),
    /// What the model said, and the tool calls it made with it.
    Assistant {
        text: String,
        calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        call_id: String,
        content: String,
    },
}

impl Message {
    /// The message in the chat-completions wire format.
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Message::System(t) => json!({"role": "system", "content": t}),
            Message::User(t) => json!({"role": "user", "content": t}),
            Message::Assistant { text, calls } => {
                let mut m = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    m["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.arguments}})
                        })
                        .collect();
                }
                m
            }
            Message::Tool { call_id, content } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
        }
    }
}
