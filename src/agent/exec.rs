//! An agent's command run apart from the user's shell: on an exec channel
//! of its own on the session's ssh connection, or as a process of a local
//! target's account (`upstream::Runner`).
//!
//! What it owns: starting the command, bounded in time (`[ai]
//! command_timeout_s`, or `auto_timeout_s` for what runs unasked: start
//! and run together) and, for what runs unasked, in output (`[ai]
//! auto_output_max`), with no input; reading what it prints; keeping the
//! bounded, ANSI-free head and tail the model gets (`terminal::Capture`,
//! as for typed commands); how it ended; which wall an unasked command
//! gets on its target ([`wall`], from `[ai] auto_sandbox`). What it
//! leaves to others: what the command line is (`upstream::sandbox` builds
//! the clean one), how its output is drawn (the caller's [`Show`]:
//! the seat streams it, paced by the client; a parallel member draws
//! labelled lines), and stopping it early: a caller that drops the future
//! (Ctrl-C, the question's time limit) drops the running command with it,
//! which closes its channel or hangs up its process (a clean command's
//! input, held open until then, is its lifeline: all of it stops).

use std::time::Duration;

use tokio::time::Instant;

use super::policy::{Policy, Prompt, Verdict};
use super::react::Outcome;
use crate::config::{AiMode, AutoSandbox};
use crate::terminal::Capture;
use crate::upstream::sandbox::{Hide, Wall};
use crate::upstream::{self, Clean, Runner};

/// Where commands run apart, and for how long at most.
#[derive(Clone, Copy)]
pub(crate) struct Apart<'a> {
    pub(crate) runner: &'a Runner,
    pub(crate) upstream: &'a upstream::UpstreamSettings,
    /// The bastion user: the default login name on ssh targets.
    pub(crate) user: &'a str,
    pub(crate) timeout: Duration,
}

/// How what `auto` runs unasked is walled and bounded (`[ai]
/// auto_sandbox`, `sandbox_hide`, `auto_timeout_s`, `auto_output_max`).
#[derive(Debug, Clone)]
pub(crate) struct Sandboxing {
    pub(crate) mode: AutoSandbox,
    pub(crate) hide: Hide,
    pub(crate) timeout: Duration,
    pub(crate) output_max: usize,
}

impl<'a> Apart<'a> {
    /// The same place, with the limits of a command run unasked.
    pub(crate) fn unasked(self, sandboxing: &Sandboxing) -> Apart<'a> {
        Apart {
            timeout: sandboxing.timeout.min(self.timeout),
            ..self
        }
    }
}

/// What a tool call's command may do, once judged ([`judged`]).
pub(crate) enum Judged {
    /// Refused, and why.
    Denied(String),
    /// Asked about first, with what `Run?` shows.
    Asked(Prompt),
    /// Run unasked: the policy's script, behind this wall.
    Unasked(String, Wall),
}

/// The policy's judgement of `command` in `mode`: the one first step of
/// every tool call (the agent's, and an MCP client's through the
/// gateway). A line the policy runs unasked runs only behind a wall
/// (`wall`, found on the target once); with none to be had, it is judged
/// again as in `confirm`, so it is asked.
pub(crate) async fn judged(
    policy: &Policy,
    command: &str,
    mode: AiMode,
    wall: impl std::future::Future<Output = Result<Wall, String>>,
) -> Judged {
    let asked_or_denied = |verdict| match verdict {
        Verdict::Deny(why) => Judged::Denied(why),
        Verdict::Ask(prompt) => Judged::Asked(prompt),
        // Only `auto` runs a line unasked, and only with a wall.
        Verdict::Run(_) => Judged::Asked(Prompt::default()),
    };
    match policy.check_off_worker(command, mode).await {
        Verdict::Run(script) => match wall.await {
            Ok(wall) => Judged::Unasked(script, wall),
            Err(_) => asked_or_denied(policy.check_off_worker(command, AiMode::Confirm).await),
        },
        other => asked_or_denied(other),
    }
}

/// The wall a command that `auto` would run unasked gets on `apart`'s
/// target, or why it must be asked instead (one sentence). The target is
/// probed once per session (`Runner::walls`).
pub(crate) async fn wall(apart: Apart<'_>, sandboxing: &Sandboxing) -> Result<Wall, String> {
    let found = apart
        .runner
        .walls(apart.upstream, apart.user, &sandboxing.hide)
        .await;
    if !found.bash {
        return Err(
            "the target has no /bin/bash, the shell walissh's policy reads \
                    lines as, so nothing runs unasked there"
                .into(),
        );
    }
    match (sandboxing.mode, found.wall) {
        (AutoSandbox::Off, _) => Ok(Wall::None),
        (AutoSandbox::Require, Wall::None) => Err("no sandbox works on this target \
             (no working bwrap, and unshare only for a root login), and [ai] \
             auto_sandbox = \"require\": commands are asked, as in confirm"
            .into()),
        (_, wall) => Ok(wall),
    }
}

/// What to run.
#[derive(Clone, Copy)]
pub(crate) enum Command<'a> {
    /// A line as the target account's login shell reads it, start-up files
    /// and all: a command the user approved for a parallel member.
    AsIs(&'a str),
    /// A script the policy checked, run clean (see
    /// `upstream::sandbox::command`); walled, it is bounded in output by
    /// `output_max`.
    Clean {
        clean: Clean<'a>,
        output_max: Option<usize>,
    },
}

impl<'a> Command<'a> {
    /// What `auto` runs unasked: `script` behind `wall`, hiding what
    /// `sandboxing` adds, bounded in output.
    pub(crate) fn unasked(
        script: &'a str,
        cwd: Option<&'a str>,
        wall: Wall,
        sandboxing: &'a Sandboxing,
    ) -> Command<'a> {
        Command::Clean {
            clean: Clean {
                script,
                cwd,
                wall,
                hide: &sandboxing.hide,
            },
            output_max: Some(sandboxing.output_max),
        }
    }

    /// A line the user approved, run clean: no wall, no output cap.
    pub(crate) fn approved_clean(line: &'a str) -> Command<'a> {
        Command::Clean {
            clean: Clean {
                script: line,
                cwd: None,
                wall: Wall::None,
                hide: &NO_HIDE,
            },
            output_max: None,
        }
    }
}

/// What an approved line, run with no wall, hides: nothing.
static NO_HIDE: Hide = Hide {
    paths: Vec::new(),
    network: true,
};

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
    let mut output_max = None;
    let start = async {
        match command {
            Command::AsIs(line) => apart.runner.exec(apart.upstream, line, apart.user).await,
            Command::Clean {
                clean,
                output_max: max,
            } => {
                output_max = max;
                let (runner, settings) = (apart.runner, apart.upstream);
                runner.exec_clean(settings, clean, apart.user).await
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
    let mut overflowed = false;
    let read = async {
        while let Some(event) = exec.reader.next().await {
            match event {
                upstream::TargetEvent::Data(d) | upstream::TargetEvent::Stderr(d) => {
                    // Past the cap the command is stopped (dropping it
                    // ends it): only what fits is kept or shown.
                    let total = capture.total() as usize;
                    let room = output_max.map_or(d.len(), |max| max.saturating_sub(total));
                    let kept = &d[..d.len().min(room)];
                    capture.push(kept);
                    show.output(kept).await;
                    if kept.len() < d.len() {
                        overflowed = true;
                        return;
                    }
                }
                upstream::TargetEvent::ExitStatus(code) => exit_code = Some(code as i32),
                upstream::TargetEvent::ExitSignal { .. } => exit_code = Some(128),
                upstream::TargetEvent::Eof => {}
            }
        }
    };
    let timed_out = tokio::time::timeout_at(deadline, read).await.is_err();
    let interrupted = if timed_out {
        Some(format!("it ran longer than {} s", apart.timeout.as_secs()))
    } else if overflowed {
        let max = output_max.unwrap_or_default();
        Some(format!("it printed more than {max} bytes"))
    } else {
        None
    };
    Outcome {
        exit_code: if overflowed { None } else { exit_code },
        output: capture.text(),
        output_bytes: capture.total(),
        interrupted,
        abandoned: false,
    }
}
