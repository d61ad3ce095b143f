//! The seat as the ReAct loop's [`Host`]: what the loop asks of a
//! session (show the thinking and the streamed text, ask `Run?`, run a
//! command typed into the shell or clean beside it, audit), answered with
//! the user's own terminal and shell.
//!
//! What it leaves to others: the seat's state and its question's course
//! (`seat`), the loop itself (`agent::react`).

use super::*;

impl Host for Seat<'_> {
    fn thinking(&mut self) {
        let end = self.painter.end_line();
        self.show(end);
        let _ = self.draw.send(Draw::Spin);
    }

    fn stream(&mut self, text: &str) {
        self.painter.resize(self.desk.shared.cols());
        let bytes = self.painter.text(text);
        self.show(bytes);
        self.streamed_at = Some(std::time::Instant::now());
    }

    fn refused(&mut self, command: &str, why: &str) {
        let line = self.painter.refused(command, why);
        self.show(line);
    }

    fn answered(&mut self) {
        // Only the question's own agent ends it: a workflow's step is
        // followed by others, which Ctrl-C must still stop.
        if self.item_depth == 0 {
            self.answer_complete();
        }
    }

    fn called(&mut self, call: &str, error: Option<&str>) {
        let mut out = Vec::new();
        if !call.is_empty() && self.shown.as_deref() != Some(call) {
            out.extend(self.painter.command(call, ""));
        }
        self.shown = None;
        if let Some(e) = error {
            out.extend(self.painter.error(e));
        }
        self.show(out);
    }

    async fn approve(&mut self, command: &str, reason: &str, asked: &Prompt) -> Approval {
        // Only a key typed after the question is shown answers it.
        self.forget_keys();
        let mut out = self.painter.command(command, reason);
        out.extend(self.painter.listing(&asked.commands));
        if let Some(changes) = &asked.changes {
            out.extend(self.painter.changes(changes));
        }
        let account = self.account.as_ref().map(NestedUser::to_string);
        out.extend(self.painter.ask(account.as_deref()));
        self.show(out);
        self.shown = Some(command.to_string());
        let Some(keys) = self.keys.recv().await else {
            return Approval::No;
        };
        match keys.first() {
            Some(b'y' | b'Y') => {
                let out = self.painter.answered("y");
                self.show(out);
                Approval::Yes
            }
            Some(b'e' | b'E') => {
                let out = self.painter.answered("e");
                self.show(out);
                match self.edit(command).await {
                    Some(edit) if edit == command => Approval::Yes,
                    Some(edit) => Approval::Edited(edit),
                    None => Approval::No,
                }
            }
            _ => {
                let out = self.painter.answered("n");
                self.show(out);
                Approval::No
            }
        }
    }

    fn model_asked(&mut self, took: std::time::Duration, outcome: &'static str) {
        self.desk.audit.metrics.model_request(took, outcome);
    }

    async fn four_eyes(&mut self, command: &str) -> bool {
        self.asking().applies(command).await
    }

    async fn second(&mut self, command: &str, reason: &str) -> Second {
        let (request, timeout) = {
            let asking = self.asking();
            (asking.request(command, reason), asking.rule.timeout)
        };
        let approvals = self.desk.approvals;
        let mut wait = approvals.ask(request, timeout);
        let line = self.painter.notice(&four_eyes::waiting_line(&wait));
        self.show(line);
        let second = wait.ended().await;
        drop(wait);
        let line = match &second {
            Second::Approved { .. } => self.painter.notice(&four_eyes::ended_line(&second)),
            _ => self.painter.error(&four_eyes::ended_line(&second)),
        };
        self.show(line);
        // Keys typed while it waited answer nothing.
        self.forget_keys();
        second
    }

    async fn wall(&mut self) -> Result<Wall, String> {
        let agent = &self.settings.agent;
        let apart = self.desk.apart(agent.command_timeout);
        let wall = exec::wall(apart, &agent.sandboxing).await;
        if let Err(why) = &wall
            && !std::mem::replace(&mut self.told_no_wall, true)
        {
            let out = self.painter.notice(why);
            self.show(out);
        }
        wall
    }

    async fn run(&mut self, command: &str, clean: Option<(&str, Wall)>) -> Outcome {
        if self.shown.as_deref() != Some(command) {
            let line = self.painter.command(command, "");
            self.show(line);
        }
        self.shown = None;
        self.settle_lines().await;
        self.in_flight = Some((command.to_string(), clean.is_some()));
        let outcome = match clean {
            Some((script, wall)) => self.run_apart(script, wall).await,
            None => self.run_typed(command).await,
        };
        self.in_flight = None;
        let mut out = self.painter.end_line();
        out.extend(
            self.painter
                .outcome(outcome.exit_code, outcome.interrupted.as_deref()),
        );
        self.show(out);
        outcome
    }

    async fn audit(&mut self, kind: Kind, fields: Vec<(&'static str, Value)>) {
        Seat::audit(self, kind, fields).await
    }

    fn place(&self, apart: bool) -> Vec<(&'static str, Value)> {
        if apart {
            return vec![("depth", 0.into())];
        }
        let p = &self.place;
        let mut fields = vec![
            ("depth", (p.depth as u64).into()),
            ("shell_user", p.user.clone().into()),
        ];
        if let Some(host) = &p.host {
            fields.push(("host", host.as_str().into()));
        }
        fields
    }

    async fn audit_ahead(
        &mut self,
        kind: Kind,
        fields: Vec<(&'static str, Value)>,
    ) -> Result<(), &'static str> {
        let ev = self.event(kind, fields);
        if let Some(r) = self.desk.recording {
            r.mark_event(&ev).await;
        }
        self.desk.audit.ahead(ev).await
    }
}
