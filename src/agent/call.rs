//! One tool call's way through walissh, whoever asks for it: the agent
//! at the prompt (`react`: a command, or a tool of an MCP server it
//! uses) or an AI client through the gateway (`session::gateway`). The
//! way is one sequence, written here once: the call is decided, its
//! `ai_tool_call` row is written ahead (nothing runs without one:
//! `Audit::ahead`), it runs, what it gave is scrubbed of secrets, and its
//! `ai_tool_result` row is written. Every row of a call names it the same
//! way ([`Subject`]) and carries the same fields of who asked and where it
//! ran.
//!
//! What it leaves to its caller (a [`Site`]): how the call is decided
//! (the policy, the user's approval, the config), how it runs, where the
//! rows go, and what becomes of the result (the model's tool result, the
//! client's).

use std::sync::Arc;

use serde_json::Value;

use super::react::Outcome;
use crate::audit::Kind;
use crate::context::redact::{Counts, Numbering, Redactor};

/// An audit row's fields.
pub(crate) type Fields = Vec<(&'static str, Value)>;

/// What a call is, as its rows name it.
pub(crate) trait Subject {
    /// Its fields in the `ai_tool_call` row: all of what it is.
    fn called(&self) -> Fields;
    /// Its fields in the `ai_tool_result` row: enough to pair it with its
    /// call.
    fn returned(&self) -> Fields {
        self.called()
    }
}

/// A command line, as shown, approved and audited.
impl Subject for String {
    fn called(&self) -> Fields {
        vec![("command", self.as_str().into())]
    }
}

/// A tool of an MCP server, and its arguments as sent (a JSON object).
#[derive(Debug, Clone)]
pub(crate) struct Tool {
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) arguments: String,
}

impl Subject for Tool {
    fn called(&self) -> Fields {
        let mut fields = self.returned();
        fields.push(("arguments", self.arguments.as_str().into()));
        fields
    }

    /// The arguments are in the call's row already.
    fn returned(&self) -> Fields {
        vec![
            ("tool", self.tool.as_str().into()),
            ("server", self.server.as_str().into()),
        ]
    }
}

/// How the caller decided a call.
pub(crate) enum Decided<S, R> {
    /// It runs.
    Go {
        /// Who gave the second approval (four-eyes), if one was needed.
        approver: Option<String>,
        /// Its row's `decision`: `auto`, `approved`, `edited`.
        decision: &'static str,
        /// What runs (the user's edit changes it).
        subject: S,
        /// The wall it runs behind, if the policy ran it unasked.
        sandbox: Option<&'static str>,
        /// Where it runs, in both its rows (`apart`, the nested shell).
        place: Fields,
        run: R,
    },
    /// It does not.
    No {
        /// Who denied it as the second approver (four-eyes), if one did.
        approver: Option<String>,
        /// Its row's `decision`: `denied_by_policy`, `denied_by_user`,
        /// `denied_by_approver` (a second approval refused, or none in
        /// time).
        decision: &'static str,
        /// What was refused (an edit the policy refused is what its row
        /// names).
        subject: S,
        reason: Option<String>,
        /// What the caller is to tell whoever asked.
        tell: String,
    },
}

/// How a call ended.
pub(crate) enum Ended<S, T> {
    /// It was refused; what to tell.
    No(String),
    /// Its row could not be written ahead, so it did not run; why.
    NotRun(S, &'static str),
    /// It ran: what ran, and what it gave, scrubbed.
    Ran(S, T),
}

/// What running a call gives, as its result row tells it.
pub(crate) trait Ran {
    fn fields(&self) -> Fields;
}

impl Ran for Outcome {
    fn fields(&self) -> Fields {
        let mut fields = vec![
            ("exit_code", self.exit_code.into()),
            ("output_bytes", self.output_bytes.into()),
        ];
        if let Some(why) = &self.interrupted {
            fields.push(("interrupted", why.as_str().into()));
        }
        fields
    }
}

/// Where a call comes from: what differs between callers.
pub(crate) trait Site {
    /// What the decision hands the run (a checked script and its wall,
    /// a tool's arguments).
    type Run;
    type Ran: Ran;
    type Subject: Subject;
    /// Fields every row of its calls carries (`via`, `client`).
    fn origin(&self) -> Fields {
        Vec::new()
    }
    /// Judges the call, and asks whoever approves, when it must be asked.
    async fn decide(&mut self, subject: Self::Subject) -> Decided<Self::Subject, Self::Run>;
    async fn run(&mut self, subject: &Self::Subject, run: Self::Run) -> Self::Ran;
    /// Scrubs what the run gave of secrets, before any of it is cut,
    /// shown to a model or a client.
    async fn scrub(&mut self, subject: &Self::Subject, ran: &mut Self::Ran);
    async fn audit(&mut self, kind: Kind, fields: Fields);
    /// A row that must be committed before what it records happens: Err
    /// says why it cannot be, and the call does not run.
    async fn audit_ahead(&mut self, kind: Kind, fields: Fields) -> Result<(), &'static str>;
}

/// Takes `subject` the whole way at `site`.
pub(crate) async fn make<S: Site>(site: &mut S, subject: S::Subject) -> Ended<S::Subject, S::Ran> {
    let origin = site.origin();
    match site.decide(subject).await {
        Decided::No {
            approver,
            decision,
            subject,
            reason,
            tell,
        } => {
            let mut row = subject.called();
            row.push(("decision", decision.into()));
            if let Some(reason) = reason {
                row.push(("reason", reason.into()));
            }
            if let Some(by) = approver {
                row.push(("approver", by.into()));
            }
            row.extend(origin);
            site.audit(Kind::AiToolCall, row).await;
            Ended::No(tell)
        }
        Decided::Go {
            approver,
            decision,
            subject,
            sandbox,
            place,
            run,
        } => {
            let mut row = subject.called();
            row.push(("decision", decision.into()));
            if let Some(by) = approver {
                row.push(("approver", by.into()));
            }
            if let Some(wall) = sandbox {
                row.push(("sandbox", wall.into()));
            }
            row.extend(place.iter().cloned());
            row.extend(origin.iter().cloned());
            if let Err(why) = site.audit_ahead(Kind::AiToolCall, row).await {
                return Ended::NotRun(subject, why);
            }
            let mut ran = site.run(&subject, run).await;
            site.scrub(&subject, &mut ran).await;
            let mut row = subject.returned();
            row.extend(ran.fields());
            row.extend(place);
            row.extend(origin);
            site.audit(Kind::AiToolResult, row).await;
            Ended::Ran(subject, ran)
        }
    }
}

/// `text` scrubbed of secrets on a blocking thread (regexes over up to a
/// whole output), as the output of `command` (all of it goes when the
/// command reads a secret store: `Redactor::redact_output`); with what
/// was found. Nothing unscrubbed comes back, whatever happens.
pub(crate) async fn scrubbed(
    redactor: Arc<Redactor>,
    numbering: Arc<Numbering>,
    command: &str,
    text: &str,
) -> (String, Counts) {
    let (command, text) = (command.to_string(), text.to_string());
    tokio::task::spawn_blocking(move || redactor.redact_output(&command, &text, &numbering))
        .await
        // A panic in the redactor (a bug: the fuzz targets and a second
        // reader found three) withholds the text rather than send it.
        .unwrap_or_else(|_| (WITHHELD.to_string(), Counts::default()))
}

/// What stands for a text that could not be checked for secrets.
pub(crate) const WITHHELD: &str = "[output withheld: it could not be checked for secrets]";

#[cfg(test)]
mod tests {
    use super::*;

    /// A site that writes down what happens, in order.
    #[derive(Default)]
    struct Log {
        events: Vec<String>,
        refuse: bool,
        storage_down: bool,
    }

    struct Said(String);

    impl Ran for Said {
        fn fields(&self) -> Fields {
            vec![("said", self.0.as_str().into())]
        }
    }

    impl Site for Log {
        type Run = ();
        type Ran = Said;
        type Subject = String;

        fn origin(&self) -> Fields {
            vec![("via", "test".into())]
        }

        async fn decide(&mut self, command: String) -> Decided<String, ()> {
            self.events.push("decide".into());
            match self.refuse {
                true => Decided::No {
                    approver: None,
                    decision: "denied_by_policy",
                    subject: command,
                    reason: Some("no".into()),
                    tell: "refused".into(),
                },
                false => Decided::Go {
                    approver: None,
                    decision: "auto",
                    subject: command,
                    sandbox: Some("bwrap"),
                    place: vec![("depth", 0.into())],
                    run: (),
                },
            }
        }

        async fn run(&mut self, command: &String, _: ()) -> Said {
            self.events.push(format!("run {command}"));
            Said("password=hunter2".into())
        }

        async fn scrub(&mut self, _: &String, ran: &mut Said) {
            self.events.push("scrub".into());
            ran.0 = ran.0.replace("hunter2", "[REDACTED]");
        }

        async fn audit(&mut self, kind: Kind, fields: Fields) {
            self.events.push(row(kind, &fields));
        }

        async fn audit_ahead(&mut self, kind: Kind, fields: Fields) -> Result<(), &'static str> {
            if self.storage_down {
                return Err("the audit cannot be written");
            }
            self.events.push(format!("ahead {}", row(kind, &fields)));
            Ok(())
        }
    }

    fn row(kind: Kind, fields: &Fields) -> String {
        let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{kind} {}", fields.join(" "))
    }

    fn make_now(site: &mut Log) -> Ended<String, Said> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(make(site, "uptime".to_string()))
    }

    /// The row is committed before the command runs, what it printed is
    /// scrubbed before the result row, and every row carries the same
    /// subject, place and origin.
    #[test]
    fn the_row_goes_ahead_and_the_output_is_scrubbed_before_its_row() {
        let mut site = Log::default();
        let Ended::Ran(command, said) = make_now(&mut site) else {
            panic!("it did not run: {:?}", site.events);
        };
        assert_eq!(
            (command.as_str(), said.0.as_str()),
            ("uptime", "password=[REDACTED]")
        );
        assert_eq!(
            site.events,
            [
                "decide",
                "ahead ai_tool_call command=\"uptime\" decision=\"auto\" sandbox=\"bwrap\" depth=0 via=\"test\"",
                "run uptime",
                "scrub",
                "ai_tool_result command=\"uptime\" said=\"password=[REDACTED]\" depth=0 via=\"test\"",
            ]
        );
    }

    #[test]
    fn a_refusal_is_one_row_and_nothing_runs() {
        let mut site = Log {
            refuse: true,
            ..Log::default()
        };
        assert!(matches!(make_now(&mut site), Ended::No(t) if t == "refused"));
        assert_eq!(
            site.events,
            [
                "decide",
                "ai_tool_call command=\"uptime\" decision=\"denied_by_policy\" reason=\"no\" via=\"test\"",
            ]
        );
    }

    #[test]
    fn without_its_row_nothing_runs() {
        let mut site = Log {
            storage_down: true,
            ..Log::default()
        };
        assert!(matches!(
            make_now(&mut site),
            Ended::NotRun(_, "the audit cannot be written")
        ));
        assert_eq!(site.events, ["decide"]);
    }
}
