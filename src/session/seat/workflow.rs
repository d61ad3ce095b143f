//! Running what answers a question: one agent, or a workflow of them
//! (sequence, loop, parallel), on the seat. The seat (`mod.rs`) owns the
//! terminal and the shell; this file owns the order agents run in, what
//! each is handed, and the facts every question starts with.

use super::*;

impl Seat<'_> {
    /// Runs an agent or a workflow on the question; `depth` > 0 inside a
    /// workflow, where each agent is announced.
    pub(super) fn run_item<'s>(
        &'s mut self,
        run: &'s Run<'s>,
        name: &'s str,
        memory: &'s mut Memory,
        depth: usize,
        in_loop: bool,
    ) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + 's>> {
        Box::pin(async move {
            let settings = self.settings.clone();
            let agent = &settings.agent;
            let Some(item) = agent.team.get(name) else {
                return Err(format!("no agent or workflow named `{name}`"));
            };
            match item {
                Item::Agent(spec) => {
                    if depth > 0 {
                        let line = self.painter.heading(name);
                        self.show(line);
                    }
                    self.speaking =
                        (name != crate::config::BUILTIN_AGENT).then(|| name.to_string());
                    self.item_depth = depth;
                    let toolbox = self.toolbox.clone();
                    let ask = Ask {
                        model: run.model,
                        agent,
                        mode: self.mode_here(),
                        brief: run.brief,
                        spec,
                        in_loop,
                        mcp: Some(&toolbox),
                    };
                    let answer = react::answer(ask, run.question, memory, self).await?;
                    let end = self.painter.end_line();
                    self.show(end);
                    if let Some(key) = &spec.output_key {
                        memory.state.insert(key.clone(), answer.clone());
                    }
                    Ok(answer)
                }
                Item::Workflow(w) => {
                    let mut last = String::new();
                    match w.kind {
                        WorkflowKind::Sequential => {
                            for m in &w.members {
                                last = self.run_item(run, m, memory, depth + 1, in_loop).await?;
                            }
                        }
                        WorkflowKind::Loop => {
                            // An enclosing loop's end request waits for
                            // this one to finish: it is kept, not reset.
                            let outer = std::mem::take(&mut memory.loop_ended);
                            'rounds: for _ in 0..w.max_iterations {
                                for m in &w.members {
                                    last = self.run_item(run, m, memory, depth + 1, true).await?;
                                    if memory.loop_ended {
                                        break 'rounds;
                                    }
                                }
                            }
                            memory.loop_ended = outer;
                        }
                        WorkflowKind::Parallel => {
                            last = self.run_parallel(run, w, memory).await?;
                        }
                    }
                    Ok(last)
                }
            }
        })
    }

    /// Runs a parallel workflow's agents at once, each with a host of its
    /// own (`parallel`): their commands on channels of their own, their
    /// lines labelled. What they store joins the session's state; the
    /// answer is theirs, each under its name.
    async fn run_parallel(
        &mut self,
        run: &Run<'_>,
        w: &WorkflowSpec,
        memory: &mut Memory,
    ) -> Result<String, String> {
        let mut out = self.painter.end_line();
        let members = w.members.join(", ");
        out.extend(
            self.painter
                .heading(&format!("{} (in parallel: {members})", w.name)),
        );
        self.show(out);
        let settings = self.settings.clone();
        let agent = &settings.agent;
        let mode = self.mode_here();
        let cwd = self.desk.shared.cwd();
        let question = self.question.clone();
        let target = Target {
            four_eyes: four_eyes::Asking {
                rule: &settings.four_eyes,
                target: settings.four_eyes_target,
                approvals: self.desk.approvals,
                ids: self.desk.ids,
                question: &question,
            },
            runner: self.desk.runner,
            upstream: self.desk.upstream,
            audit: self.desk.audit,
            ids: self.desk.ids,
            timeout: agent.command_timeout,
            sandboxing: &agent.sandboxing,
            cwd: cwd.as_deref(),
        };
        let toolbox = self.toolbox.clone();
        let console = Console::new(self.draw.clone(), &mut self.keys);
        let results = {
            let specs = w.members.iter().filter_map(|m| match agent.team.get(m) {
                Some(Item::Agent(spec)) => Some(spec),
                _ => None,
            });
            let runs = specs.map(|spec| {
                let mut own = memory.fork();
                let (console, toolbox) = (&console, &toolbox);
                async move {
                    let mut host = Member::new(&spec.name, console, target);
                    let ask = Ask {
                        model: run.model,
                        agent,
                        mode,
                        brief: run.brief,
                        spec,
                        in_loop: false,
                        mcp: Some(toolbox),
                    };
                    let answer = react::answer(ask, run.question, &mut own, &mut host).await;
                    host.flush();
                    (spec, answer, own)
                }
            });
            futures_util::future::join_all(runs).await
        };
        let mut answers = Vec::new();
        for (spec, answer, own) in results {
            memory.redactions.add(&own.redactions);
            match answer {
                Ok(text) => {
                    if let Some(key) = &spec.output_key {
                        memory.state.insert(key.clone(), text.clone());
                    }
                    answers.push(format!("{}: {text}", spec.name));
                }
                Err(e) => answers.push(format!("{}: failed: {e}", spec.name)),
            }
        }
        self.painter.at_line_start();
        Ok(answers.join("\n\n"))
    }
}

/// The facts every question sets in the session's state: each of
/// `config::STATE_KEYS` (which the config check lets instructions name),
/// empty when the session does not know it.
pub(super) fn set_facts(
    state: &mut std::collections::HashMap<String, String>,
    brief: &Brief,
    question: &str,
) {
    let info = brief.info.clone().unwrap_or_default();
    for &key in crate::config::STATE_KEYS {
        let value = match key {
            "question" => Some(question.to_string()),
            "target" => Some(brief.target.clone()),
            "user" => info.user.clone(),
            "cwd" => brief.cwd.clone(),
            "host" => info.host.clone(),
            "os" => info.os.clone(),
            _ => None,
        };
        state.insert(key.to_string(), value.unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_key_is_a_fact_the_session_knows() {
        let brief = Brief {
            target: "web1".into(),
            info: Some(crate::upstream::TargetInfo {
                shell: None,
                os: Some("Debian".into()),
                kernel: None,
                host: Some("web1.example".into()),
                user: Some("app".into()),
            }),
            cwd: Some("/srv".into()),
            ..Brief::default()
        };
        let mut state = std::collections::HashMap::new();
        set_facts(&mut state, &brief, "why");
        for key in crate::config::STATE_KEYS {
            assert!(!state[*key].is_empty(), "{key} has no fact");
        }
    }
}
