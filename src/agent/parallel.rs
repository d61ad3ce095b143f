//! Parallel members: agents of a parallel workflow, running at once.
//!
//! They cannot share the user's one interactive shell, so each runs with a
//! [`Member`] host of its own: its commands run on channels of their own on
//! the session's target ([`exec`]: exec channels on the same ssh
//! connection, processes as the local account), under the same approval
//! policy and audit as the shell's; those the policy runs unasked run
//! clean, in the prompt's directory, as the seat's do. What they say and
//! what their commands print is drawn a whole line at a time, each line
//! labelled with the member's name, so blocks never interleave mid-line.
//! One approval is asked at a time: the keyboard is shared. What it leaves
//! to others: the loop each member runs (`react`), the session's screen
//! (`seat`).

use crate::audit::Kind;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Mutex, mpsc};

use super::exec;
use super::four_eyes::Second;
use super::policy::Prompt;
use super::react::{Approval, Host, Outcome};
use super::render::Draw;
use super::render::{ending, labelled};
use crate::audit::{Audit, Ids};
use crate::upstream::sandbox::Wall;
use crate::upstream::{self, Runner};

/// Lines of one command's output drawn, at most; the model still gets its
/// bounded head and tail.
const SHOWN_LINES: usize = 200;
/// A line without a break is drawn in pieces of this many bytes.
const LINE_MAX: usize = 4096;

/// What the members share: the screen and the keyboard.
pub(crate) struct Console<'a> {
    pub(crate) draw: mpsc::UnboundedSender<Draw>,
    pub(crate) keys: Mutex<&'a mut super::keys::Keys>,
    /// A `Run?` prompt waiting on its line: another member's line is drawn
    /// above it, and the prompt again below.
    pub(crate) waiting: std::sync::Mutex<Option<Vec<u8>>>,
}

impl<'a> Console<'a> {
    pub(crate) fn new(
        draw: mpsc::UnboundedSender<Draw>,
        keys: &'a mut super::keys::Keys,
    ) -> Console<'a> {
        Console {
            draw,
            keys: Mutex::new(keys),
            waiting: std::sync::Mutex::new(None),
        }
    }

    /// Draws one whole line, above a waiting prompt if there is one.
    fn line(&self, bytes: Vec<u8>) {
        let waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let out = match waiting.as_ref() {
            Some(prompt) => {
                let mut out = b"\r\x1b[K".to_vec();
                out.extend(bytes);
                out.extend_from_slice(prompt);
                out
            }
            None => bytes,
        };
        let _ = self.draw.send(Draw::Show(out));
    }

    /// Shows a prompt that waits on its line (`None`: it was answered).
    fn wait_on(&self, prompt: Option<Vec<u8>>) {
        if let Some(p) = &prompt {
            let _ = self.draw.send(Draw::Show(p.clone()));
        }
        *self.waiting.lock().unwrap_or_else(|e| e.into_inner()) = prompt;
    }
}

/// Where members' commands run, and how they are audited.
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) runner: &'a Runner,
    pub(crate) upstream: &'a upstream::UpstreamSettings,
    pub(crate) audit: &'a Audit,
    pub(crate) ids: &'a Ids,
    pub(crate) timeout: Duration,
    /// How what runs unasked is walled and bounded.
    pub(crate) sandboxing: &'a exec::Sandboxing,
    /// The prompt's directory: where commands run clean start.
    pub(crate) cwd: Option<&'a str>,
    /// How its commands ask for a second approval.
    pub(crate) four_eyes: super::four_eyes::Asking<'a>,
}

impl<'a> Target<'a> {
    fn apart(&self) -> exec::Apart<'a> {
        exec::Apart {
            runner: self.runner,
            upstream: self.upstream,
            user: &self.ids.user,
            timeout: self.timeout,
        }
    }
}

/// One member's host.
pub(crate) struct Member<'a> {
    pub(crate) label: &'a str,
    pub(crate) console: &'a Console<'a>,
    pub(crate) target: Target<'a>,
    /// Streamed text not yet a whole line.
    line: String,
    /// This member said why nothing runs unasked on its target.
    told_no_wall: bool,
}

impl<'a> Member<'a> {
    pub(crate) fn new(label: &'a str, console: &'a Console<'a>, target: Target<'a>) -> Member<'a> {
        Member {
            label,
            console,
            target,
            line: String::new(),
            told_no_wall: false,
        }
    }

    fn say(&self, line: &str) {
        self.console.line(labelled(self.label, line));
    }

    /// Draws what is left of the streamed text.
    pub(crate) fn flush(&mut self) {
        if !self.line.trim().is_empty() {
            let line = std::mem::take(&mut self.line);
            self.say(&line);
        }
        self.line.clear();
    }

    /// Runs a command on its own channel: its output is drawn line by line
    /// as it comes, and kept, bounded, for the model.
    async fn exec(&self, apart: exec::Apart<'_>, command: exec::Command<'_>) -> Outcome {
        let mut lines = Lines {
            member: self,
            pending: Vec::new(),
            shown: 0,
        };
        let outcome = exec::run(apart, command, &mut lines).await;
        lines.finish();
        outcome
    }
}

/// A member's command's output cut into whole lines, drawn labelled, at
/// most SHOWN_LINES of them (so it never waits for the screen).
struct Lines<'m, 'a> {
    member: &'m Member<'a>,
    /// Output not yet a whole line.
    pending: Vec<u8>,
    shown: usize,
}

impl exec::Show for Lines<'_, '_> {
    async fn output(&mut self, data: &[u8]) {
        if self.shown > SHOWN_LINES {
            return;
        }
        self.pending.extend_from_slice(data);
        // Whole lines, and long ones in pieces: output without line
        // breaks must not pile up.
        while let Some(i) = memchr::memchr(b'\n', &self.pending)
            .or((self.pending.len() >= LINE_MAX).then_some(LINE_MAX - 1))
        {
            let line: Vec<u8> = self.pending.drain(..=i).collect();
            self.shown += 1;
            if self.shown > SHOWN_LINES {
                self.member.say("[... more output, not shown ...]");
                self.pending.clear();
                return;
            }
            self.member.say(String::from_utf8_lossy(&line).trim_end());
        }
    }
}

impl Lines<'_, '_> {
    /// Draws what is left: a last line without a break.
    fn finish(&mut self) {
        if !self.pending.is_empty() {
            self.member
                .say(String::from_utf8_lossy(&self.pending).trim_end());
            self.pending.clear();
        }
    }
}

impl Host for Member<'_> {
    fn thinking(&mut self) {}

    fn stream(&mut self, text: &str) {
        self.line.push_str(text);
        while let Some(i) = self.line.find('\n') {
            let line: String = self.line.drain(..=i).collect();
            self.say(line.trim_end());
        }
    }

    fn refused(&mut self, command: &str, why: &str) {
        self.flush();
        self.say(&format!("refused {command}: {why}"));
    }

    fn called(&mut self, call: &str, error: Option<&str>) {
        self.flush();
        if !call.is_empty() {
            self.say(&format!("called {call}"));
        }
        if let Some(e) = error {
            self.say(e);
        }
    }

    async fn approve(&mut self, command: &str, reason: &str, asked: &Prompt) -> Approval {
        self.flush();
        // One question at a time on the one keyboard; keys typed before it
        // was shown do not answer it.
        let mut keys = self.console.keys.lock().await;
        while keys.try_recv().is_ok() {}
        let why = if reason.is_empty() {
            String::new()
        } else {
            format!("  # {reason}")
        };
        self.say(&format!("$ {command}{why}"));
        for c in &asked.commands {
            self.say(&format!("  \u{2192} {c}"));
        }
        if let Some(changes) = &asked.changes {
            self.say(&format!("  ! {changes}"));
        }
        // The command is named in the prompt: other members' lines may
        // come between it and its `$` line.
        let short = crate::text::head(command, 60);
        let mut prompt = labelled(self.label, &format!("Run `{short}`? [y/N] "));
        // The prompt waits on its line: no line break after it.
        prompt.truncate(prompt.len() - 2);
        self.console.wait_on(Some(prompt));
        let answer = keys.recv().await;
        self.console.wait_on(None);
        let yes = matches!(answer.as_deref().and_then(|k| k.first()), Some(b'y' | b'Y'));
        let _ = self.console.draw.send(Draw::Show(if yes {
            b"y\r\n".to_vec()
        } else {
            b"n\r\n".to_vec()
        }));
        if yes { Approval::Yes } else { Approval::No }
    }

    fn model_asked(&mut self, took: Duration, outcome: &'static str) {
        self.target.audit.metrics.model_request(took, outcome);
    }

    async fn four_eyes(&mut self, command: &str) -> bool {
        self.target.four_eyes.applies(command).await
    }

    async fn second(&mut self, command: &str, reason: &str) -> Second {
        let mut wait = self.target.four_eyes.ask(command, reason);
        self.say(&super::four_eyes::waiting_line(&wait));
        let second = wait.ended().await;
        drop(wait);
        self.say(&super::four_eyes::ended_line(&second));
        second
    }

    async fn wall(&mut self) -> Result<Wall, String> {
        let wall = exec::wall(self.target.apart(), self.target.sandboxing).await;
        if let Err(why) = &wall
            && !std::mem::replace(&mut self.told_no_wall, true)
        {
            self.say(why);
        }
        wall
    }

    async fn run(&mut self, command: &str, clean: Option<(&str, Wall)>) -> Outcome {
        self.flush();
        self.say(&format!("$ {command}"));
        let target = self.target;
        let (apart, command) = match clean {
            Some((script, wall)) => (
                target.apart().unasked(target.sandboxing),
                exec::Command::unasked(script, target.cwd, wall, target.sandboxing),
            ),
            None => (target.apart(), exec::Command::AsIs(command)),
        };
        let outcome = self.exec(apart, command).await;
        if let Some(e) = ending(outcome.exit_code, outcome.interrupted.as_deref()) {
            self.say(&e);
        }
        outcome
    }

    async fn audit(&mut self, kind: Kind, fields: Vec<(&'static str, Value)>) {
        let ev = self.target.ids.event(kind).field("agent", self.label);
        self.target.audit.event(ev.fields(fields)).await;
    }

    async fn audit_ahead(
        &mut self,
        kind: Kind,
        fields: Vec<(&'static str, Value)>,
    ) -> Result<(), &'static str> {
        let ev = self.target.ids.event(kind).field("agent", self.label);
        self.target.audit.ahead(ev.fields(fields)).await
    }
}
