//! The shells nested in a session that the terminal follows: probing a
//! command that shows what looks like a shell's prompt, answering the
//! new shell's bootstrap, and entering and leaving its level, so each
//! command is recorded at the depth, account and host it ran at.
//!
//! What it leaves to others: the marks (`marks`), what may show a shell
//! (`nested`), the rest of the terminal model (`Terminal`).

use super::*;

impl Terminal {
    /// Types the probe once a command that starts a shell shows what looks
    /// like its prompt, if nothing was typed since the output before it
    /// (keys typed ahead would join the probe's line). Gives up, and says
    /// so on the client's screen (`to_client`), once the user answered a
    /// question the command asked that was not its prompt.
    pub(super) fn probe(&mut self, to_client: &mut Vec<u8>) -> Option<Vec<u8>> {
        let watching = matches!(self.nesting, Some(Nesting::Watching { .. }));
        if !watching || self.shown != Shown::All {
            return None;
        }
        // Asked at every chunk: "since" means since the output before.
        let (quiet, lines, last) = {
            let mut typed = self.typed.lock().unwrap_or_else(|e| e.into_inner());
            (typed.quiet(), typed.lines(), typed.last_text())
        };
        let answered = |n: &mut Nesting| n.answered(lines, last.as_deref());
        if self.nesting.as_mut().is_some_and(answered) {
            self.nesting = None;
            self.not_followed();
            say(to_client, GAVE_UP);
            tracing::info!("a nested shell asked a question before its prompt; not followed");
            return None;
        }
        if !quiet || !self.nesting.as_ref().is_some_and(Nesting::at_prompt) {
            return None;
        }
        let nonce = nonce();
        self.scanner.pending(Some(&nonce), self.replacing());
        let probe = bootstrap::probe(&nonce);
        self.nesting = Some(Nesting::asking(nonce, false));
        Some(probe)
    }

    /// Whether the nested shell being followed replaces the innermost one
    /// (its command line starts with `exec`).
    pub(super) fn replacing(&self) -> bool {
        self.shell
            .running
            .as_ref()
            .and_then(|r| r.command.as_deref())
            .is_some_and(|c| c.trim_start().starts_with("exec "))
    }

    /// A nested shell being installed answered: the probe, with its
    /// versions (then the bootstrap is typed, if it is bash 4.4 or later
    /// or zsh), or the bootstrap, ready (then it becomes the innermost
    /// shell).
    pub(super) fn nested_answer(
        &mut self,
        mark: Mark,
        finished: &mut Vec<CommandRecord>,
    ) -> Option<Vec<u8>> {
        let Some(Nesting::Asking {
            nonce, installing, ..
        }) = &self.nesting
        else {
            return None;
        };
        let nonce = nonce.clone();
        match (mark, *installing) {
            (Mark::Probed { bash, zsh }, false) => {
                let prefixes = self.follow.as_deref().unwrap_or_default();
                match nested::shell_of(&bash, &zsh) {
                    Some(shell) => {
                        let input = bootstrap::input(shell, &nonce, false, prefixes);
                        self.nesting = Some(Nesting::asking(nonce, true));
                        Some(input)
                    }
                    None => {
                        self.not_followed();
                        self.nesting = Some(Nesting::dropping());
                        None
                    }
                }
            }
            (
                Mark::Ready {
                    plain: false,
                    keys,
                    paste,
                    account,
                    ..
                },
                true,
            ) => {
                self.enter_nested(Caps { keys, paste }, account, finished);
                None
            }
            (Mark::Ready { .. }, true) => {
                self.not_followed();
                self.nesting = Some(Nesting::dropping());
                None
            }
            _ => None,
        }
    }

    /// The nested shell is integrated: the shell that started it waits
    /// (its command runs until the nested one exits), and marks come from
    /// the new one (the scanner took its nonce as the innermost on its W). Its first prompt is drawn again, over the one the
    /// screen already shows: that is dropped until the prompt ends.
    pub(super) fn enter_nested(
        &mut self,
        caps: Caps,
        account: ShellUser,
        finished: &mut Vec<CommandRecord>,
    ) {
        let via = self.shell.running.as_ref().and_then(|r| r.command.clone());
        let host = account.host.filter(|h| Some(h) != self.login_host.as_ref());
        let replacing = self.replacing();
        let outer = std::mem::take(&mut self.shell);
        let via = if replacing {
            // `exec bash`: the new shell takes the old one's place, and the
            // command that replaced it ends there, without a status.
            if let Some(r) = outer.running {
                finished.push(self.record(r, None, outer.place.clone()));
            }
            outer.place.via
        } else {
            self.outer.push(outer);
            via
        };
        self.shell = ShellState {
            caps,
            place: Place {
                depth: self.outer.len(),
                user: account.user,
                host,
                via,
            },
            ..ShellState::default()
        };
        self.nesting = Some(Nesting::Settling);
        // Its prompt is one walissh owns.
        self.unowned.store(0, Ordering::Relaxed);
        // What was typed before its first prompt (a password) is not a
        // line for it.
        *self.typed.lock().unwrap_or_else(|e| e.into_inner()) = Typed::default();
        tracing::info!(depth = self.outer.len(), user = ?self.shell.place.user, "followed into a nested shell");
    }

    /// The shell at `level` spoke: the shells above it have ended. A
    /// command they left running is recorded without an exit status.
    pub(super) fn leave_to(&mut self, level: usize, finished: &mut Vec<CommandRecord>) {
        while self.outer.len() > level {
            let Some(outer) = self.outer.pop() else { break };
            let inner = std::mem::replace(&mut self.shell, outer);
            if let Some(r) = inner.running {
                finished.push(self.record(r, None, inner.place));
            }
        }
        self.scanner.pop_to(level);
        self.nesting = None;
        self.unowned.store(0, Ordering::Relaxed);
    }
}
