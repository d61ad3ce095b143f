//! Validation of agents and workflows: names, tools, placeholders,
//! members, loops and cycles.

use std::collections::HashSet;

use super::validate::{new_name, sorted};
use super::*;

impl Config {
    /// Agents and workflows: names unique and well formed, tools known,
    /// placeholders known, members defined, loops bounded, no cycles, the
    /// entry defined, the skills readable.
    pub(super) fn validate_team(&self, loc: &Locator) -> Result<(), ConfigError> {
        let mut names: HashSet<&str> = HashSet::from([BUILTIN_AGENT]);
        let mut keys: HashSet<&str> = STATE_KEYS.iter().copied().collect();
        for a in &self.agents {
            new_name(loc, &mut names, &a.name, "agents.name", "agent or workflow")?;
            if let Some(k) = &a.output_key {
                keys.insert(k.get_ref());
            }
            for t in a.tools.iter().flatten() {
                // `mcp:` tools are checked with the servers (`validate_mcp`).
                if !TOOLS.contains(&t.get_ref().as_str()) && !t.get_ref().starts_with("mcp:") {
                    let msg = format!(
                        "unknown tool `{}` (tools: {}, mcp:SERVER/TOOL)",
                        t.get_ref(),
                        TOOLS.join(", ")
                    );
                    return Err(loc.error(t.span(), Some("agents.tools"), &msg));
                }
            }
        }
        for w in &self.workflows {
            new_name(
                loc,
                &mut names,
                &w.name,
                "workflows.name",
                "agent or workflow",
            )?;
        }
        for a in &self.agents {
            let text = a.instruction.get_ref();
            if let Some(key) = placeholders(text).find(|k| !keys.contains(k)) {
                let msg = format!(
                    "agent `{}`: unknown placeholder {{{key}}} (known: {})",
                    a.name.get_ref(),
                    sorted(&keys)
                );
                return Err(loc.error(a.instruction.span(), Some("agents.instruction"), &msg));
            }
        }
        for w in &self.workflows {
            let name = w.name.get_ref();
            if w.members.is_empty() {
                let msg = format!("workflow `{name}` has no members");
                return Err(loc.error(w.name.span(), Some("workflows.members"), &msg));
            }
            for m in &w.members {
                if !names.contains(m.get_ref().as_str()) {
                    let msg = format!(
                        "workflow `{name}`: no agent or workflow named `{}`",
                        m.get_ref()
                    );
                    return Err(loc.error(m.span(), Some("workflows.members"), &msg));
                }
                // Parallel members run with hosts of their own: agents.
                let is_workflow = self
                    .workflows
                    .iter()
                    .any(|o| o.name.get_ref() == m.get_ref());
                if w.kind == WorkflowKind::Parallel && is_workflow {
                    let msg = format!(
                        "parallel workflow `{name}`: `{}` is a workflow; members run in parallel must be agents",
                        m.get_ref()
                    );
                    return Err(loc.error(m.span(), Some("workflows.members"), &msg));
                }
            }
            match (w.kind, &w.max_iterations) {
                (WorkflowKind::Loop, Some(n)) if *n.get_ref() == 0 => {
                    let msg = format!("workflow `{name}`: max_iterations must be at least 1");
                    return Err(loc.error(n.span(), Some("workflows.max_iterations"), &msg));
                }
                (WorkflowKind::Loop, None) => {
                    let msg = format!("loop `{name}` needs max_iterations");
                    return Err(loc.error(w.name.span(), Some("workflows.max_iterations"), &msg));
                }
                (WorkflowKind::Sequential | WorkflowKind::Parallel, Some(n)) => {
                    let msg = format!("workflow `{name}`: max_iterations is for loops only");
                    return Err(loc.error(n.span(), Some("workflows.max_iterations"), &msg));
                }
                _ => {}
            }
        }
        if let Some(w) = self.workflow_cycle() {
            let msg = format!("workflow `{}` contains itself", w.name.get_ref());
            return Err(loc.error(w.name.span(), Some("workflows.members"), &msg));
        }
        if let Some(e) = &self.ai.entry
            && !names.contains(e.get_ref().as_str())
        {
            let msg = format!("no agent or workflow named `{}`", e.get_ref());
            return Err(loc.error(e.span(), Some("ai.entry"), &msg));
        }
        Ok(())
    }

    /// A workflow that reaches itself through its members, if any: a
    /// depth-first walk that marks what it has finished, so each workflow
    /// is walked once.
    fn workflow_cycle(&self) -> Option<&WorkflowConfig> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Walking,
            Done,
        }
        fn walk<'a>(
            i: usize,
            ws: &'a [WorkflowConfig],
            marks: &mut [Mark],
        ) -> Option<&'a WorkflowConfig> {
            marks[i] = Mark::Walking;
            for m in &ws[i].members {
                let Some(j) = ws.iter().position(|w| w.name.get_ref() == m.get_ref()) else {
                    continue;
                };
                match marks[j] {
                    Mark::Walking => return Some(&ws[j]),
                    Mark::New => {
                        if let Some(w) = walk(j, ws, marks) {
                            return Some(w);
                        }
                    }
                    Mark::Done => {}
                }
            }
            marks[i] = Mark::Done;
            None
        }
        let mut marks = vec![Mark::New; self.workflows.len()];
        (0..self.workflows.len()).find_map(|i| {
            (marks[i] == Mark::New)
                .then(|| walk(i, &self.workflows, &mut marks))
                .flatten()
        })
    }
}

/// The `{key}` placeholders of an instruction: a key is a lowercase
/// identifier; other braces (JSON, shell) are text.
pub(crate) fn placeholders(text: &str) -> impl Iterator<Item = &str> {
    text.split('{').skip(1).filter_map(|rest| {
        let key = rest.split_once('}')?.0;
        let ok = !key.is_empty()
            && key.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && key
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        ok.then_some(key)
    })
}
