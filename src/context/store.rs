//! What a session remembers of its conversation with the model, and the
//! working memory of the question being answered.
//!
//! The [`Store`] keeps past questions sanitised as they are appended: the
//! user message holds the bare question (this turn's context prefix is
//! stripped, so prefixes never pile up), tool results and assistant text
//! are cut, and only the newest user turns and messages are kept, whole
//! groups at a time so no tool result outlives its call. [`Memory`] adds
//! the question being answered and builds each request: the instruction,
//! then the history and the question (with this turn's prefix) cut to the
//! token budget by a reducer. What it leaves to others: what the prefix
//! says (`providers`), which groups survive the budget (`reduce`), and
//! scrubbing secrets, done before text enters the memory (`agent::react`).

use serde_json::Value;

use super::Message;
use super::providers::{QUESTION_MARK, ToolCache};
use super::redact::Counts;
use super::reduce::{self, fit, flatten, groups};
use crate::config::ContextConfig;
use crate::config::Strategy;
use crate::context::ToolCall;

/// How much of a conversation a session keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoreLimits {
    pub(crate) tool_chars: usize,
    pub(crate) assistant_chars: usize,
    pub(crate) user_turns: usize,
    pub(crate) messages: usize,
}

impl StoreLimits {
    pub(crate) fn from_config(c: &ContextConfig) -> StoreLimits {
        StoreLimits {
            tool_chars: c.tool_chars,
            assistant_chars: c.assistant_chars,
            user_turns: c.user_turns,
            messages: c.messages,
        }
    }
}

/// Past questions of a session, sanitised.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    limits: StoreLimits,
    messages: Vec<Message>,
}

impl Store {
    pub(crate) fn new(limits: StoreLimits) -> Store {
        Store {
            limits,
            messages: Vec::new(),
        }
    }

    pub(crate) fn history(&self) -> &[Message] {
        &self.messages
    }

    /// Appends one question's messages, sanitised, then forgets the
    /// oldest groups beyond the limits.
    pub(crate) fn append(&mut self, turn: Vec<Message>) {
        let limits = self.limits;
        self.messages
            .extend(turn.into_iter().map(|m| sanitise(m, &limits)));
        self.keep_within_limits();
    }

    /// Forgets the oldest questions beyond the limits, each with all its
    /// groups. The newest question alone over the message cap loses its
    /// middle groups instead: its question and its last group (the
    /// answer) stay.
    fn keep_within_limits(&mut self) {
        let limits = self.limits;
        let mut questions: Vec<Vec<reduce::Group>> = Vec::new();
        for g in groups(std::mem::take(&mut self.messages)) {
            let asks = matches!(g.messages.first(), Some(Message::User(_)));
            match questions.last_mut() {
                Some(q) if !asks => q.push(g),
                // History starts with a question: an answer before any
                // would be read as the reply to something never seen.
                None if !asks => {}
                _ => questions.push(vec![g]),
            }
        }
        let count = |qs: &[Vec<reduce::Group>]| -> usize {
            qs.iter().flatten().map(|g| g.messages.len()).sum()
        };
        while questions.len() > limits.user_turns
            || (questions.len() > 1 && count(&questions) > limits.messages)
        {
            questions.remove(0);
        }
        if let Some(q) = questions.last_mut() {
            while q.len() > 2 && count(std::slice::from_ref(q)) > limits.messages {
                q.remove(1);
            }
        }
        self.messages = flatten(questions.into_iter().flatten().collect());
    }

    /// The stored conversation as JSON, to restore it in a later session.
    pub(crate) fn to_json(&self) -> Value {
        Value::Array(self.messages.iter().map(Message::to_json).collect())
    }

    /// A conversation saved by [`Store::to_json`]. It is not trusted: it
    /// may be older than today's redaction rules, or edited by hand, so it
    /// is scrubbed and sanitised again; what cannot be read, and calls or
    /// results without an id, are left out; the limits apply again.
    pub(crate) fn restore(&mut self, saved: &Value, scrub: impl Fn(&str) -> String) {
        let limits = self.limits;
        self.messages = saved
            .as_array()
            .map(|a| a.iter().filter_map(Message::from_json).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| {
                let m = match m {
                    Message::User(t) => Message::User(scrub(&t)),
                    Message::Tool { call_id, .. } if call_id.is_empty() => return None,
                    Message::Tool { call_id, content } => Message::Tool {
                        call_id,
                        content: scrub(&content),
                    },
                    Message::Assistant { text, calls } => Message::Assistant {
                        text: scrub(&text),
                        calls: calls.into_iter().filter(|c| !c.id.is_empty()).collect(),
                    },
                    Message::System(_) => return None,
                };
                Some(sanitise(m, &limits))
            })
            .collect();
        self.keep_within_limits();
    }
}

/// A message as the store keeps it.
fn sanitise(m: Message, limits: &StoreLimits) -> Message {
    match m {
        Message::User(text) => Message::User(bare_question(&text).to_string()),
        Message::Tool { call_id, content } => Message::Tool {
            call_id,
            content: crate::text::head_chars(&content, limits.tool_chars).into_owned(),
        },
        Message::Assistant { text, calls } => Message::Assistant {
            text: crate::text::head_chars(&text, limits.assistant_chars).into_owned(),
            calls: calls
                .into_iter()
                .map(|mut c| {
                    if c.arguments.chars().count() > limits.tool_chars {
                        c.cut_arguments();
                    }
                    c
                })
                .collect(),
        },
        other => other,
    }
}

/// The question without the turn's context prefix.
pub(crate) fn bare_question(text: &str) -> &str {
    text.rsplit_once(QUESTION_MARK).map_or(text, |(_, q)| q)
}

impl Message {
    /// A message from the chat-completions wire format.
    fn from_json(v: &Value) -> Option<Message> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Some(match v.get("role")?.as_str()? {
            "user" => Message::User(text("content")),
            "tool" => Message::Tool {
                call_id: text("tool_call_id"),
                content: text("content"),
            },
            "assistant" => {
                let calls = v
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(|calls| {
                        calls
                            .iter()
                            .map(|c| ToolCall {
                                id: c["id"].as_str().unwrap_or("").to_string(),
                                name: c["function"]["name"].as_str().unwrap_or("").to_string(),
                                arguments: c["function"]["arguments"]
                                    .as_str()
                                    .unwrap_or("")
                                    .to_string(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Message::Assistant {
                    text: text("content"),
                    calls,
                }
            }
            _ => return None,
        })
    }
}

/// A session's memory: the store, and the question being answered.
#[derive(Debug)]
pub(crate) struct Memory {
    pub(crate) store: Store,
    /// Summaries of this question's tool results.
    pub(crate) tools: ToolCache,
    /// This question's messages, its bare question first.
    current: Vec<Message>,
    /// Secrets scrubbed from what this question sent.
    pub(crate) redactions: Counts,
    /// The session's secrets' numbers, for placeholders that stay the same
    /// from question to question.
    pub(crate) numbering: std::sync::Arc<crate::context::redact::Numbering>,
    /// The session's state: facts every question sets, and what agents
    /// stored under their `output_key`, for instructions' placeholders.
    pub(crate) state: std::collections::HashMap<String, String>,
    /// An agent in a loop asked to end it.
    pub(crate) loop_ended: bool,
}

impl Memory {
    pub(crate) fn new(c: &ContextConfig) -> Memory {
        Memory {
            store: Store::new(StoreLimits::from_config(c)),
            tools: ToolCache::new(c.tool_cache),
            current: Vec::new(),
            redactions: Counts::default(),
            numbering: Default::default(),
            state: Default::default(),
            loop_ended: false,
        }
    }

    /// A memory for a parallel member: the same state and limits, a
    /// conversation of its own.
    pub(crate) fn fork(&self) -> Memory {
        Memory {
            store: Store::new(self.store.limits),
            tools: ToolCache::new(self.tools.cap()),
            current: Vec::new(),
            redactions: Counts::default(),
            numbering: self.numbering.clone(),
            state: self.state.clone(),
            loop_ended: false,
        }
    }

    /// A question starts: its tool cache and counts start afresh.
    pub(crate) fn start(&mut self) {
        self.loop_ended = false;
        self.tools.clear();
        self.redactions = Counts::default();
        self.current.clear();
    }

    /// The question being answered (scrubbed), its first message.
    pub(crate) fn question(&mut self, question: &str) {
        self.current = vec![Message::User(question.to_string())];
    }

    /// A message of the question being answered.
    pub(crate) fn push(&mut self, m: Message) {
        self.current.push(m);
    }

    /// The question ended (answered, failed or stopped): it joins the
    /// history, and its tool cache is cleared.
    pub(crate) fn end(&mut self) {
        let turn = std::mem::take(&mut self.current);
        if !turn.is_empty() {
            self.store.append(turn);
        }
        self.tools.clear();
    }

    /// One request: the instruction, then the history and this question
    /// (its user message carrying `prompt`, this turn's prefix and the
    /// question) cut to `budget` tokens by `strategy`.
    pub(crate) fn request(
        &self,
        system: &str,
        prompt: String,
        strategy: Strategy,
        budget: usize,
    ) -> Vec<Message> {
        let system = Message::System(system.to_string());
        let budget = budget.saturating_sub(reduce::message_tokens(&system));
        let mut all = self.store.history().to_vec();
        let mut current = self.current.clone();
        if let Some(first) = current.first_mut() {
            *first = Message::User(prompt);
        }
        all.extend(current);
        let mut kept = reduce::reduce(strategy, groups(all), budget);
        // Some chat templates insist a conversation opens with the user: a
        // kept answer whose question was cut goes too.
        while kept.len() > 1 && !matches!(kept[0].messages.first(), Some(Message::User(_))) {
            kept.remove(0);
        }
        fit(&mut kept, budget);
        let mut out = vec![system];
        out.extend(flatten(kept));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> StoreLimits {
        StoreLimits {
            tool_chars: 10,
            assistant_chars: 20,
            user_turns: 2,
            messages: 20,
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "run_command".into(),
            arguments: "{}".into(),
        }
    }

    fn question(n: usize) -> Vec<Message> {
        vec![
            Message::User(format!("<session-context>\nctx{QUESTION_MARK}question {n}")),
            Message::Assistant {
                text: String::new(),
                calls: vec![call(&format!("c{n}"))],
            },
            Message::Tool {
                call_id: format!("c{n}"),
                content: "x".repeat(50),
            },
            Message::Assistant {
                text: format!("answer {n} ").repeat(5),
                calls: vec![],
            },
        ]
    }

    #[test]
    fn appended_questions_are_sanitised_and_bounded() {
        let mut s = Store::new(limits());
        for n in 0..3 {
            s.append(question(n));
        }
        let h = s.history();
        // The last two user turns, whole.
        assert_eq!(h.len(), 8);
        assert_eq!(h[0], Message::User("question 1".into()));
        assert_eq!(h[4], Message::User("question 2".into()));
        let Message::Tool { content, .. } = &h[2] else {
            panic!("{h:?}")
        };
        assert_eq!(content, "xxxxxxxxxx[... 40 bytes cut ...]");
        let Message::Assistant { text, .. } = &h[3] else {
            panic!("{h:?}")
        };
        assert!(text.starts_with("answer 1 answer 1 an[... "), "{text}");
    }

    #[test]
    fn the_message_cap_keeps_groups_whole() {
        let mut s = Store::new(StoreLimits {
            messages: 5,
            ..limits()
        });
        s.append(question(0));
        s.append(question(1));
        // 8 messages > 5: the oldest question goes whole; a question never
        // starts with a tool result.
        assert_eq!(s.history().len(), 4);
        assert_eq!(s.history()[0], Message::User("question 1".into()));
    }

    #[test]
    fn a_long_last_question_keeps_its_question_and_answer() {
        let mut s = Store::new(StoreLimits {
            messages: 5,
            ..limits()
        });
        let mut turn = vec![Message::User("big question".into())];
        for n in 0..5 {
            turn.push(Message::Assistant {
                text: String::new(),
                calls: vec![call(&format!("c{n}"))],
            });
            turn.push(Message::Tool {
                call_id: format!("c{n}"),
                content: "out".into(),
            });
        }
        turn.push(Message::Assistant {
            text: "the answer".into(),
            calls: vec![],
        });
        s.append(turn);
        let h = s.history();
        assert_eq!(h.first(), Some(&Message::User("big question".into())));
        assert!(matches!(h.last(), Some(Message::Assistant { text, .. }) if text == "the answer"));
        assert!(h.len() <= 5, "{h:?}");
    }

    #[test]
    fn a_stored_conversation_comes_back() {
        let mut s = Store::new(limits());
        s.append(question(0));
        let mut t = Store::new(limits());
        t.restore(&s.to_json(), |t| t.to_string());
        assert_eq!(t.history(), s.history());
        // Scrubbed again, and results without ids left out.
        let mut saved = s.to_json();
        saved[0]["content"] = "my hunter2".into();
        saved[2]["tool_call_id"] = "".into();
        t.restore(&saved, |t| t.replace("hunter2", "[REDACTED:password]"));
        assert_eq!(
            t.history()[0],
            Message::User("my [REDACTED:password]".into())
        );
        assert!(
            t.history()
                .iter()
                .all(|m| !matches!(m, Message::Tool { .. }))
        );
    }

    #[test]
    fn each_request_has_the_prefix_once_and_the_history_bare() {
        let mut m = Memory::new(&ContextConfig::default());
        m.start();
        m.question("first");
        m.push(Message::Assistant {
            text: "one".into(),
            calls: vec![],
        });
        m.end();
        m.start();
        m.question("second");
        let prompt = format!("<session-context>\nctx{QUESTION_MARK}second");
        let r = m.request("sys", prompt.clone(), Strategy::Hybrid, 10_000);
        assert_eq!(r[0], Message::System("sys".into()));
        assert_eq!(r[1], Message::User("first".into()));
        assert_eq!(r.last().unwrap(), &Message::User(prompt));
        let json =
            serde_json::to_string(&r.iter().map(Message::to_json).collect::<Vec<_>>()).unwrap();
        assert_eq!(json.matches("<session-context>").count(), 1);
    }
}
