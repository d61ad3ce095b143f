//! An agent's command run apart from the user's shell: on an exec channel
//! of its own on the session's ssh connection, or as a process of a local
//! target's account (`upstream::Runner`).
//!
//! What it owns: starting the command, bounded by `[ai] command_timeout_s`
//! (start and run together), with no input; reading what it prints;
//! keeping the bounded, ANSI-free head and tail the model gets
//! (`terminal::Capture`, as for typed commands); how it ended. What it
//! leaves to others: what the command line is (`upstream::clean_command`
//! builds the clean one), how its output is drawn (the caller's [`Show`]:
//! the seat streams it, paced by the client; a parallel member draws
//! labelled lines), and stopping it early: a caller that drops the future
//! (Ctrl-C, the question's time limit) drops the running command with it,
//! which closes its channel or hangs up its process (a clean command's
//! input, held open until then, is its lifeline: all of it stops).

use std::time::Duration;

use tokio::time::Instant;

use super::react::Outcome;
use crate::terminal::Capture;
use crate::upstream::{self, Runner};

/// Where commands run apart, and for how long at most.
#[derive(Clone, Copy)]
pub(crate) struct Apart<'a> {
    pub(crate) runner: &'a Runner,
    pub(crate) upstream: &'a upstream::UpstreamSettings,
    /// The bastion user: the default login name on ssh targets.
    pub(crate) user: &'a str,
    pub(crate) timeout: Duration,
}

/// What to run.
#[derive(Clone, Copy)]
pub(crate) enum Command<'a> {
    /// A line as the target account's login shell reads it, start-up files
    /// and all: a command the user approved for a parallel member.
    AsIs(&'a str),
    /// A script the policy checked, run clean in `cwd` (see
    /// `upstream::clean_command`).
    Clean {
        script: &'a str,
        cwd: Option<&'a str>,
    },
}

/// Where a command's output goes as it arrives.
pub(crate) trait Show {
    /// One piece of output (stdout or stderr, in the order they came). It
    /// may wait: the command is not read meanwhile, so a screen that is
    /// slow to take it slows the command (the channel's window, the
    /// pipe's buffer) instead of filling memory.
    async fn output(&mut self, data: &[u8]);
}

/// Runs `command` to its end or its timeout; `show` gets its output as it
/// arrives.
pub(crate) async fn run(apart: Apart<'_>, command: Command<'_>, show: &mut impl Show) -> Outcome {
    let deadline = Instant::now() + apart.timeout;
    let start = async {
        match command {
            Command::AsIs(line) => apart.runner.exec(apart.upstream, line, apart.user).await,
            Command::Clean { script, cwd } => {
                let (runner, ctx) = (apart.runner, apart.upstream);
                runner.exec_clean(ctx, script, cwd, apart.user).await
            }
        }
    };
    let started = tokio::time::timeout_at(deadline, start)
        .await
        .unwrap_or_else(|_| Err("the target did not start it in time".into()));
    let mut exec = match started {
        Ok(e) => e,
        Err(e) => {
            return Outcome {
                interrupted: Some(format!("it could not start: {e}")),
                ..Outcome::default()
            };
        }
    };
    let mut capture = Capture::default();
    let mut exit_code = None;
    let read = async {
        while let Some(event) = exec.reader.next().await {
            match event {
                upstream::TargetEvent::Data(d) | upstream::TargetEvent::Stderr(d) => {
                    capture.push(&d);
                    show.output(&d).await;
                }
                upstream::TargetEvent::ExitStatus(code) => exit_code = Some(code as i32),
                upstream::TargetEvent::ExitSignal { .. } => exit_code = Some(128),
                upstream::TargetEvent::Eof => {}
            }
        }
    };
    let timed_out = tokio::time::timeout_at(deadline, read).await.is_err();
    Outcome {
        exit_code,
        output: capture.text(),
        output_bytes: capture.total(),
        interrupted: timed_out.then(|| format!("it ran longer than {} s", apart.timeout.as_secs())),
        abandoned: false,
    }
}
