//! The agents and workflows a question can run, assembled once from the
//! config (`[[agents]]`, `[[workflows]]`, `[ai] entry`), and again at each
//! reload.
//!
//! The built-in agent, `walissh`, is always there and is the entry unless
//! `[ai] entry` names another. An agent is an instruction with `{key}`
//! placeholders (filled from the session's state when it runs), the tools
//! it may use, an optional model of its own, and the state key its answer
//! is stored under. A workflow runs its members in sequence, in parallel
//! or in a loop. The config has checked every reference, placeholder and
//! cycle; running them is the seat's (`seat`), one agent at a time the
//! loop's (`react`).

use std::collections::HashMap;

use crate::config::{BUILTIN_AGENT, Config, TOOLS, WorkflowKind, placeholders};

use super::model::Model;

/// What the built-in agent is told it is.
pub(crate) const BUILTIN_ROLE: &str = "You are walissh's assistant, inside an SSH bastion. You \
help an operations engineer with the host their terminal is connected to.";

/// One agent.
pub(crate) struct AgentSpec {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) instruction: String,
    pub(crate) output_key: Option<String>,
    pub(crate) tools: Vec<&'static str>,
    /// The MCP tools it may use, as `SERVER/TOOL` globs (its `mcp:`
    /// tools); none for the built-in agent.
    pub(crate) mcp: Vec<String>,
    /// Its own model client, when it names another model.
    pub(crate) model: Option<Model>,
}

/// One workflow.
pub(crate) struct WorkflowSpec {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) kind: WorkflowKind,
    pub(crate) members: Vec<String>,
    pub(crate) max_iterations: u32,
}

pub(crate) enum Item {
    Agent(Box<AgentSpec>),
    Workflow(WorkflowSpec),
}

impl Item {
    pub(crate) fn description(&self) -> &str {
        match self {
            Item::Agent(a) => &a.description,
            Item::Workflow(w) => &w.description,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Item::Agent(_) => "agent",
            Item::Workflow(w) => match w.kind {
                WorkflowKind::Sequential => "sequential workflow",
                WorkflowKind::Parallel => "parallel workflow",
                WorkflowKind::Loop => "loop",
            },
        }
    }
}

pub(crate) struct Team {
    items: HashMap<String, Item>,
    /// Names in the order the config gives them, the built-in first.
    order: Vec<String>,
    pub(crate) entry: String,
}

impl Team {
    /// The team of a checked config; agents with a `model` of their own
    /// share `base`'s client.
    pub(crate) fn new(config: &Config, base: Option<&Model>) -> Team {
        let mut items = HashMap::new();
        let mut order = vec![BUILTIN_AGENT.to_string()];
        items.insert(
            BUILTIN_AGENT.to_string(),
            Item::Agent(Box::new(AgentSpec {
                name: BUILTIN_AGENT.into(),
                description: "the built-in agent: investigates with shell commands".into(),
                instruction: BUILTIN_ROLE.into(),
                output_key: None,
                tools: TOOLS.to_vec(),
                mcp: Vec::new(),
                model: None,
            })),
        );
        for a in &config.agents {
            let tools = match &a.tools {
                Some(list) => TOOLS
                    .iter()
                    .copied()
                    .filter(|t| list.iter().any(|l| l.get_ref() == t))
                    .collect(),
                None => TOOLS.to_vec(),
            };
            let listed: Vec<String> = a
                .tools
                .iter()
                .flatten()
                .map(|t| t.get_ref().clone())
                .collect();
            let mcp = super::mcp::patterns(&listed);
            // Without a base client (already warned of), the agent has none
            // either: it would be built from the same [llm] settings.
            let model = a.model.as_ref().zip(base).map(|(m, b)| b.with_model(m));
            let name = a.name.get_ref().clone();
            order.push(name.clone());
            items.insert(
                name.clone(),
                Item::Agent(Box::new(AgentSpec {
                    name,
                    description: a.description.clone(),
                    instruction: a.instruction.get_ref().clone(),
                    output_key: a.output_key.as_ref().map(|k| k.get_ref().clone()),
                    tools,
                    mcp,
                    model,
                })),
            );
        }
        for w in &config.workflows {
            let name = w.name.get_ref().clone();
            order.push(name.clone());
            items.insert(
                name.clone(),
                Item::Workflow(WorkflowSpec {
                    name,
                    description: w.description.clone(),
                    kind: w.kind,
                    members: w.members.iter().map(|m| m.get_ref().clone()).collect(),
                    max_iterations: w.max_iterations.as_ref().map_or(1, |n| *n.get_ref()),
                }),
            );
        }
        let entry = config
            .ai
            .entry
            .as_ref()
            .map_or(BUILTIN_AGENT.to_string(), |e| e.get_ref().clone());
        Team {
            items,
            order,
            entry,
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Item> {
        self.items.get(name)
    }

    /// What `?@` shows: each name, what it is, its description; the entry
    /// marked.
    pub(crate) fn listing(&self) -> Vec<String> {
        self.order
            .iter()
            .filter_map(|name| {
                let item = self.items.get(name)?;
                let entry = if *name == self.entry { " (entry)" } else { "" };
                let description = match item.description() {
                    "" => String::new(),
                    d => format!(": {d}"),
                };
                Some(format!("@{name}{entry}, {}{description}", item.kind()))
            })
            .collect()
    }
}

/// An instruction with its placeholders filled from `state`, each value in
/// «» quotes: it comes from the target or from another model's answer, and
/// the rules say quoted text is data, never instructions (an answer a
/// host's output talked into must not become the next agent's orders). A
/// key with no value yet (an agent that has not run) is said to be empty.
pub(crate) fn fill(instruction: &str, state: &HashMap<String, String>) -> String {
    let mut out = instruction.to_string();
    let keys: Vec<&str> = placeholders(instruction).collect();
    for key in keys {
        let value = match state.get(key).filter(|v| !v.is_empty()) {
            Some(v) => crate::context::providers::quote_inline(v),
            None => "(empty)".to_string(),
        };
        out = out.replace(&format!("{{{key}}}"), &value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team(extra: &str) -> Team {
        let text = format!(
            "[[agents]]\nname = \"collect\"\ndescription = \"gathers facts\"\ninstruction = \"Facts on {{question}}.\"\noutput_key = \"facts\"\ntools = [\"run_command\"]\n\n\
             [[workflows]]\nname = \"triage\"\ndescription = \"collect, then answer\"\nkind = \"sequential\"\nmembers = [\"collect\", \"walissh\"]\n{extra}"
        );
        Team::new(&Config::parse(&text, "t.toml", false).unwrap(), None)
    }

    #[test]
    fn the_built_in_agent_is_the_default_entry() {
        let t = Team::new(&Config::parse("", "t.toml", false).unwrap(), None);
        assert_eq!(t.entry, "walissh");
        assert!(matches!(t.get("walissh"), Some(Item::Agent(a)) if a.tools == TOOLS));
        assert_eq!(t.listing().len(), 1);
    }

    #[test]
    fn a_configured_team_and_its_listing() {
        let t = team("\n[ai]\nentry = \"triage\"\n");
        assert_eq!(t.entry, "triage");
        let Some(Item::Agent(a)) = t.get("collect") else {
            panic!("no agent")
        };
        assert_eq!(a.tools, ["run_command"]);
        assert_eq!(a.output_key.as_deref(), Some("facts"));
        assert_eq!(
            t.listing(),
            [
                "@walissh, agent: the built-in agent: investigates with shell commands",
                "@collect, agent: gathers facts",
                "@triage (entry), sequential workflow: collect, then answer",
            ]
        );
    }

    #[test]
    fn placeholders_are_filled_from_state() {
        let state = HashMap::from([("facts".to_string(), "disk 97%".to_string())]);
        assert_eq!(
            fill("Given {facts} and {other}, answer {\"x\": 1}", &state),
            "Given «disk 97%» and (empty), answer {\"x\": 1}"
        );
    }
}
