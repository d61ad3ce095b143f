//! The agent: what a question caught at the shell prompt gets.
//!
//! The ReAct agent itself comes with issue 4. Until then every question
//! gets the same answer, through the interface the agent will answer
//! through: the terminal model hands over a [`Question`], the session
//! audits it as `ai_prompt` and shows what comes back at the place in the
//! output where the shell cleared the line.

// The approval policy and its parser, ahead of the agent that will use
// them (issue 4, in progress).
#[allow(dead_code)]
pub(crate) mod model;
#[allow(dead_code)]
pub(crate) mod policy;
#[allow(dead_code)]
pub(crate) mod react;
#[cfg(test)]
pub(crate) mod scripted;
#[allow(dead_code)]
pub(crate) mod shell;

use crate::config::AiMode;

/// A line the user typed at the prompt that starts with an `[ai] prefixes`
/// entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Question {
    /// The line as typed, prefix included.
    pub(crate) text: String,
    /// Whether the line is still on the user's screen (zsh keeps it; bash
    /// wipes it before walissh hears of it).
    pub(crate) kept: bool,
}

/// What the user sees in answer, before the shell redraws its prompt.
/// Users whose `ai` is `off` are refused; for the others the agent is not
/// wired in yet.
pub(crate) fn answer(q: &Question, mode: AiMode) -> Vec<u8> {
    let mut out = String::new();
    if !q.kept {
        out.push_str(&q.text);
        out.push_str("\r\n");
    }
    out.push_str(match mode {
        AiMode::Off => "walissh: the agent is off for your account; nothing was run.\r\n",
        _ => "walissh: the agent is not configured yet; nothing was run.\r\n",
    });
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wiped_question_is_shown_again() {
        let q = Question {
            text: "? why".into(),
            kept: false,
        };
        let a = String::from_utf8(answer(&q, AiMode::Confirm)).unwrap();
        assert!(a.starts_with("? why\r\n"));
        let kept = Question { kept: true, ..q };
        assert!(
            !String::from_utf8(answer(&kept, AiMode::Confirm))
                .unwrap()
                .contains("? why")
        );
    }
}
