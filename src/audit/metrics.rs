//! What the audit stream says, counted for Prometheus (`/metrics`): every
//! event the bastion audits passes here on its way to the writer, so the
//! figures are the audit's own, with no second place in the code to keep
//! in step. What it leaves to others: serving them (`web`), the events.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde_json::Value;

use super::{Event, Kind};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Result {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Target {
    target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Decision {
    decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Direction {
    direction: &'static str,
}

/// The counters and gauges, and the registry that writes them out.
pub(crate) struct Metrics {
    registry: Registry,
    logins: Family<Result, Counter>,
    web_logins: Family<Result, Counter>,
    live: Family<Target, Gauge>,
    sessions: Family<Target, Counter>,
    questions: Counter,
    tool_calls: Family<Decision, Counter>,
    bytes: Family<Direction, Counter>,
    storage_errors: Counter,
    queue: Gauge,
    /// Seconds from a request to the model to the end of its answer.
    model: Family<Outcome, Histogram>,
    /// Seconds one transaction of the audit writer takes.
    audit_writes: Histogram,
    recording_errors: Counter,
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::default(),
            logins: Family::default(),
            web_logins: Family::default(),
            live: Family::default(),
            sessions: Family::default(),
            questions: Counter::default(),
            tool_calls: Family::default(),
            bytes: Family::default(),
            storage_errors: Counter::default(),
            queue: Gauge::default(),
            // 50 ms to about 100 s.
            model: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.05, 2.0, 12))
            }),
            // Half a millisecond to about 4 s.
            audit_writes: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            recording_errors: Counter::default(),
        };
        let r = &mut m.registry;
        r.register("walissh_logins", "SSH logins, by result", m.logins.clone());
        r.register(
            "walissh_web_logins",
            "Web console logins, by result",
            m.web_logins.clone(),
        );
        r.register(
            "walissh_sessions_live",
            "Sessions open now, by target",
            m.live.clone(),
        );
        r.register(
            "walissh_sessions",
            "Sessions started, by target",
            m.sessions.clone(),
        );
        r.register(
            "walissh_agent_questions",
            "Questions to the agent",
            m.questions.clone(),
        );
        r.register(
            "walissh_agent_tool_calls",
            "The agent's tool calls, by decision",
            m.tool_calls.clone(),
        );
        r.register(
            "walissh_relayed_bytes",
            "Bytes relayed by ended sessions",
            m.bytes.clone(),
        );
        r.register(
            "walissh_storage_errors",
            "Audit and recording storage errors",
            m.storage_errors.clone(),
        );
        r.register(
            "walissh_audit_queue_depth",
            "Audit events waiting for the writer",
            m.queue.clone(),
        );
        r.register(
            "walissh_model_request_seconds",
            "Requests to the model, from sending to the answer's end, by outcome",
            m.model.clone(),
        );
        r.register(
            "walissh_audit_write_seconds",
            "Transactions of the audit writer",
            m.audit_writes.clone(),
        );
        r.register(
            "walissh_recording_errors",
            "Recordings that could not be created, and writes to them that failed",
            m.recording_errors.clone(),
        );
        m
    }

    /// A request to the model ended (`ok`, or its error's reason).
    pub(crate) fn model_request(&self, took: std::time::Duration, outcome: &'static str) {
        self.model
            .get_or_create(&Outcome { outcome })
            .observe(took.as_secs_f64());
    }

    /// One transaction of the audit writer.
    pub(crate) fn audit_written(&self, took: std::time::Duration) {
        self.audit_writes.observe(took.as_secs_f64());
    }

    pub(crate) fn recording_failed(&self) {
        self.recording_errors.inc();
    }

    /// An SSH login refused (counted where it is refused: a flood's
    /// rows are tallied, one per many).
    pub(crate) fn login_failed(&self) {
        self.logins
            .get_or_create(&Result { result: "failed" })
            .inc();
    }

    /// `event`, on its way to the writer.
    pub(crate) fn count(&self, event: &Event) {
        let target = || Target {
            target: event.target.clone().unwrap_or_default(),
        };
        let number = |k: &str| event.fields.get(k).and_then(Value::as_u64).unwrap_or(0);
        match event.kind {
            Kind::AuthOk => {
                self.logins.get_or_create(&Result { result: "ok" }).inc();
            }
            Kind::WebLogin => {
                self.web_logins
                    .get_or_create(&Result { result: "ok" })
                    .inc();
            }
            Kind::WebLoginFail => {
                self.web_logins
                    .get_or_create(&Result { result: "failed" })
                    .inc();
            }
            Kind::SessionStart => {
                self.live.get_or_create(&target()).inc();
                self.sessions.get_or_create(&target()).inc();
            }
            Kind::SessionEnd => {
                self.live.get_or_create(&target()).dec();
                for (direction, field) in [("in", "bytes_in"), ("out", "bytes_out")] {
                    self.bytes
                        .get_or_create(&Direction { direction })
                        .inc_by(number(field));
                }
            }
            Kind::AiPrompt => {
                self.questions.inc();
            }
            Kind::AiToolCall => {
                let decision = event.fields.get("decision").and_then(Value::as_str);
                let decision = decision.unwrap_or("none").chars().take(32).collect();
                self.tool_calls.get_or_create(&Decision { decision }).inc();
            }
            Kind::StorageError => {
                self.storage_errors.inc();
            }
            _ => {}
        }
    }

    /// The Prometheus text of it all, with the audit queue as deep as
    /// `queue` says now.
    pub(crate) fn text(&self, queue: i64) -> String {
        self.queue.set(queue);
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
