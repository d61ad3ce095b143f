//! The agent's approval policy: the `walissh-policy` crate
//! (crates/walissh-policy), named here where the agent and the session
//! use it. It owns nothing of its own but its tests of what ties the
//! policy to walissh (`tests`): the shell integration approved lines are
//! typed through, and the sandbox unasked lines run behind.

pub(crate) use walissh_policy::{Policy, Prompt, Verdict, invisible};

#[cfg(test)]
mod tests;
