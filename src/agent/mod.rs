//! The agent: what a question caught at the shell prompt gets.
//!
//! The terminal model hands over a [`Question`]; the session audits it as
//! `ai_prompt`. Users whose `ai` is `off` get a notice. For the others the
//! session's seat (`session::seat`, the [`react::Host`] made of the user's
//! terminal) runs the ReAct loop ([`react`]) against the model ([`model`]),
//! under the approval policy ([`policy`], on parsed command lines), drawing
//! in the user's terminal ([`render`]); commands that run apart from the
//! user's shell go through [`exec`], several targets at once through
//! [`parallel`]. Agents, workflows ([`team`]) and [`skills`] are assembled
//! from the config by [`Agent::assemble`], at start and at each reload.
//!
//! Nothing here knows the bastion or the session: what the agent may touch
//! is what its host and its callers hand it.

pub(crate) mod call;
pub(crate) mod exec;
pub(crate) mod four_eyes;
pub(crate) mod keys;
pub(crate) mod mcp;
pub(crate) mod model;
pub(crate) mod parallel;
pub(crate) mod policy;
pub(crate) mod react;
pub(crate) mod render;
#[cfg(test)]
pub(crate) mod scripted;
pub(crate) mod skills;
pub(crate) mod team;

use std::time::Duration;

use serde_json::Value;

use crate::config::{AiMode, Config, ConfigError, ContextConfig};
use crate::context::redact::Redactor;
use crate::context::reduce::tokens;
use model::Model;
use policy::Policy;
use react::QuestionLimits;

/// What every session's agent shares, made once at start.
pub(crate) struct Agent {
    /// The model client, or why there is none (an API key variable that
    /// is not set): each question is then told why.
    pub(crate) model: Result<Model, String>,
    pub(crate) policy: Policy,
    pub(crate) limits: QuestionLimits,
    pub(crate) command_timeout: Duration,
    /// How what runs unasked is walled and bounded.
    pub(crate) sandboxing: exec::Sandboxing,
    pub(crate) prefixes: Vec<String>,
    /// Scrubs secrets from everything bound for the model (shared with
    /// the blocking threads that scrub command output).
    pub(crate) redactor: std::sync::Arc<Redactor>,
    pub(crate) context: ContextConfig,
    /// The model's context window, and what of it an answer may take.
    pub(crate) context_tokens: usize,
    pub(crate) answer_tokens: usize,
    /// The agents and workflows, and the skills they may load.
    pub(crate) team: team::Team,
    pub(crate) skills: skills::Skills,
    /// The `[[mcp]]` servers, and the connections the bastion shares.
    pub(crate) mcp: std::sync::Arc<mcp::Registry>,
    /// Which commands need a second approval (`[ai] four_eyes`).
    pub(crate) four_eyes: four_eyes::Rule,
}

impl Agent {
    /// Assembles the agents from a checked config, reading the skills
    /// (blocking: at start or reload, off the runtime). A broken skill is
    /// an error naming `ai.skills_dir`'s file and line, as `check-config`
    /// reports it. So is a fault of its redactor's
    /// (`context::redact::for_config`): a rules file that no longer compiles
    /// refuses the reload, as `check-config` refuses it.
    pub(crate) fn assemble(config: &Config) -> Result<Agent, ConfigError> {
        let redactor = crate::context::redact::for_config(config)?;
        let skills = skills::Skills::configured(config)?;
        Ok(Agent::with(config, skills, redactor))
    }

    /// For a config `check-config` has passed, with the skills and the
    /// redactor its checks built (they are not built twice).
    pub(crate) fn new(config: &Config, skills: skills::Skills, redactor: Redactor) -> Agent {
        Agent::with(config, skills, redactor)
    }

    fn with(config: &Config, skills: skills::Skills, redactor: Redactor) -> Agent {
        let prefixes = values(&config.ai.prefixes);
        let deny = values(&config.ai.deny);
        let model = Model::new(&config.llm);
        if let Err(e) = &model {
            tracing::warn!(error = %e, "the agent's model client is not available");
        }
        let team = team::Team::new(config, model.as_ref().ok());
        let hidden = values(&config.ai.sandbox_hide);
        Agent {
            model,
            policy: Policy::hiding(&deny, &prefixes, config.ai.auto_network, &hidden),
            limits: QuestionLimits {
                max_steps: config.ai.max_steps.max(1),
                wall: Duration::from_secs(config.ai.max_time_s.max(1)),
            },
            command_timeout: Duration::from_secs(config.ai.command_timeout_s.max(1)),
            sandboxing: exec::Sandboxing {
                mode: config.ai.auto_sandbox,
                hide: crate::upstream::sandbox::Hide {
                    paths: hidden.clone(),
                    network: config.ai.auto_network,
                },
                timeout: Duration::from_secs(config.ai.auto_timeout_s.max(1)),
                output_max: config.ai.auto_output_max.max(1) as usize,
            },
            prefixes,
            redactor: std::sync::Arc::new(redactor),
            context: config.context.clone(),
            context_tokens: config.llm.context_tokens,
            answer_tokens: config.llm.max_tokens.map_or(1024, |n| n as usize),
            team,
            skills,
            mcp: std::sync::Arc::new(mcp::Registry::new(config)),
            four_eyes: four_eyes::Rule::new(config),
        }
    }

    /// Tokens a request's messages may take: the context window less room
    /// for the answer and for the tool declarations.
    pub(crate) fn request_budget(&self, tools: &[Value]) -> usize {
        let declared: usize = tools.iter().map(|t| tokens(&t.to_string())).sum();
        let answer = self.answer_tokens.min(self.context_tokens / 4);
        self.context_tokens
            .saturating_sub(answer + declared)
            .max(1024)
    }
}

pub(crate) use crate::terminal::Question;

/// What a user whose `ai` is off is told, and the audit says.
pub(crate) const AGENT_OFF: &str = "the agent is off for your account; nothing was run.";

/// The values of a config list, without where they were written.
fn values(list: &[toml::Spanned<String>]) -> Vec<String> {
    list.iter().map(|v| v.get_ref().clone()).collect()
}

/// What is drawn where the shell cleared the question's line: the prompt
/// and the question again if the shell wiped them, and the cursor put on
/// the next line. Users whose `ai` is `off` also get the notice that
/// nothing was run.
pub(crate) fn echo(q: &Question, mode: AiMode) -> Vec<u8> {
    let mut out = Vec::new();
    if !q.kept {
        out.extend_from_slice(&q.prompt);
        out.extend(render::printable(&q.text).into_bytes());
    }
    out.extend_from_slice(b"\r\n");
    if mode == AiMode::Off {
        out.extend(format!("walissh: {AGENT_OFF}\r\n").into_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wiped_question_is_shown_again() {
        let q = Question {
            text: "? why".into(),
            kept: false,
            prompt: b"\x1b[1m$\x1b[0m ".to_vec(),
        };
        let a = String::from_utf8(echo(&q, AiMode::Off)).unwrap();
        assert!(a.starts_with("\x1b[1m$\x1b[0m ? why\r\n"));
        assert!(a.contains("off for your account"));
        let kept = Question { kept: true, ..q };
        assert_eq!(echo(&kept, AiMode::Confirm), b"\r\n");
    }
}
