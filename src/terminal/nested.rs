//! Nested shells: which command lines start one, and when the screen
//! shows its prompt.
//!
//! walissh follows the user into a shell started from an integrated
//! prompt (`sudo -i`, `su - app`, `bash`, `docker exec -it c bash`, `ssh
//! host`): once such a command shows a prompt, it types a probe, then the
//! bootstrap (see `Terminal`). Only command lines read here as starting a
//! shell are ever probed, so nothing is typed into `python3`, `mysql`, a
//! `read` prompt or a password prompt. The reading is an allow-list of
//! plain words: a line with quotes, expansions, redirections or several
//! commands is not followed. Both functions here are total and linear.
//! What it leaves to others: typing, the marks, the stack of shells
//! (`Terminal`).

use std::time::Duration;

use tokio::time::Instant;

use super::{Shell, prompt};

/// How long a nested shell has to answer the probe, and then the
/// bootstrap; and to draw its prompt again after a probe it did not take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes of a starting shell's output kept to spot its prompt.
const TAIL_MAX: usize = 512;
/// Output a command that starts a shell may print before its prompt.
const WATCH_MAX: usize = 1 << 20;

/// Following the user into a shell started from the prompt.
pub(crate) enum Nesting {
    /// The running command starts a shell: its output's tail, to spot the
    /// prompt, and the lines the user had entered when it was last looked
    /// at.
    Watching {
        tail: Vec<u8>,
        seen: usize,
        lines: Option<u64>,
    },
    /// walissh typed the probe (or, once it was answered, the bootstrap)
    /// with `nonce`. What the shell prints meanwhile (the line's echo, its
    /// prompt again) is dropped: the screen keeps the prompt it showed.
    Asking {
        nonce: String,
        installing: bool,
        until: Instant,
    },
    /// The nested shell is integrated: its first prompt, drawn again over
    /// the one on the screen, is dropped until it ends (B).
    Settling,
    /// The shell answered that it is not one walissh integrates: its
    /// prompt, drawn again, is dropped until something looks like one.
    Dropping { tail: Vec<u8>, until: Instant },
}

impl Nesting {
    pub(crate) fn watching() -> Nesting {
        Nesting::Watching {
            tail: Vec::new(),
            seen: 0,
            lines: None,
        }
    }

    /// Looks at a watched command again, the user having entered `lines`
    /// lines in all, the last of them `last` (None: edited past
    /// following): whether a new one answered, on the screen, a question
    /// the output asked that was not a prompt (see `prompt::answered`).
    /// walissh then gives up following it: what comes next may be another
    /// question, and the probe typed there would be its answer (with the
    /// nonce), and the user's own answer a command.
    pub(crate) fn answered(&mut self, lines: u64, last: Option<&str>) -> bool {
        let Nesting::Watching {
            tail, lines: seen, ..
        } = self
        else {
            return false;
        };
        let new = seen.is_some_and(|s| lines > s);
        *seen = Some(lines);
        new && last.is_some_and(|answer| prompt::answered(tail, answer))
    }

    pub(crate) fn asking(nonce: String, installing: bool) -> Nesting {
        Nesting::Asking {
            nonce,
            installing,
            until: Instant::now() + ANSWER_TIMEOUT,
        }
    }

    pub(crate) fn dropping() -> Nesting {
        Nesting::Dropping {
            tail: Vec::new(),
            until: Instant::now() + ANSWER_TIMEOUT,
        }
    }

    /// Until when the user's keys wait.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self {
            Nesting::Asking { until, .. } | Nesting::Dropping { until, .. } => Some(*until),
            Nesting::Watching { .. } | Nesting::Settling => None,
        }
    }

    /// Whether walissh has typed anything yet: from then on the output is
    /// kept from the client.
    pub(crate) fn started(&self) -> bool {
        !matches!(self, Nesting::Watching { .. })
    }

    /// Whether a watched command's output ends at what looks like a prompt.
    pub(crate) fn at_prompt(&self) -> bool {
        matches!(self, Nesting::Watching { tail, .. } if prompt::at_prompt(tail))
    }

    /// Takes output; false when there is nothing more to follow (a full
    /// screen program took over, or the dropped redraw is done).
    pub(crate) fn output(&mut self, bytes: &[u8]) -> bool {
        match self {
            Nesting::Watching { tail, seen, .. } => {
                *seen = seen.saturating_add(bytes.len());
                keep_tail(tail, bytes);
                // A program that takes the whole screen (tmux, screen, an
                // editor) is not a prompt walissh types at; the tail holds
                // a sequence split between two reads.
                let full_screen = |hay: &[u8]| {
                    [&b"\x1b[?1049h"[..], b"\x1b[?47h", b"\x1b[?1047h"]
                        .iter()
                        .any(|s| memchr::memmem::find(hay, s).is_some())
                };
                // A shell shows its prompt soon; a command that prints this
                // much without one is left alone, and its output goes the
                // fast way again.
                *seen <= WATCH_MAX && !full_screen(bytes) && !full_screen(tail)
            }
            Nesting::Dropping { tail, .. } => {
                keep_tail(tail, bytes);
                !prompt::at_prompt(tail)
            }
            Nesting::Asking { .. } | Nesting::Settling => true,
        }
    }
}

fn keep_tail(tail: &mut Vec<u8>, bytes: &[u8]) {
    tail.extend_from_slice(&bytes[bytes.len().saturating_sub(TAIL_MAX)..]);
    if tail.len() > TAIL_MAX {
        tail.drain(..tail.len() - TAIL_MAX);
    }
}

/// The shell that answered the probe with these versions, if walissh
/// integrates it: bash 4.4 or later, or zsh.
pub(crate) fn shell_of(bash: &str, zsh: &str) -> Option<Shell> {
    if !zsh.is_empty() && bash.is_empty() {
        return Some(Shell::Zsh);
    }
    let mut parts = bash.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    ((major, minor) >= (4, 4)).then_some(Shell::Bash)
}

/// Shells by their program's name.
const SHELLS: &[&str] = &[
    "bash", "zsh", "sh", "dash", "ksh", "mksh", "fish", "tcsh", "csh", "ash", "busybox",
];

/// Whether `command` (the line the shell ran) may show a shell's prompt
/// that walissh does not own: it starts a shell, or runs one behind a
/// terminal of its own (`script`, `expect`, `unbuffer`, Python's
/// `pty.spawn`), where no command line says which. Only there are
/// commands read off the screen and questions refused: at any other
/// program's prompt (`mysql> ?`) a `?` is the program's.
///
/// Generous on purpose: a word anywhere in the line that names a shell
/// (`env dash`, `sudo -u app -- sh`, `docker run -it img bash`, `exec
/// $SHELL`) counts, as does any line of a terminal wrapper; a program
/// whose own prompt then looks like a shell's is told apart by the
/// prompt (see `prompt`).
pub(crate) fn may_show_a_shell(command: &str) -> bool {
    // Not tmux or screen: they take the whole screen, where nothing is
    // read off it.
    const WRAPPERS: &[&str] = &["script", "expect", "unbuffer", "socat"];
    if starts_shell(command) {
        return true;
    }
    let words = command
        .split(|c: char| c.is_ascii_whitespace() || "'\";&|()".contains(c))
        .filter(|w| !w.is_empty());
    words.enumerate().any(|(i, word)| {
        let name = word.rsplit('/').next().unwrap_or(word);
        let python = i == 0 && name.starts_with("python") && command.contains("pty");
        SHELLS.contains(&name)
            || matches!(name, "$SHELL" | "${SHELL}")
            || (i == 0 && WRAPPERS.contains(&name))
            || python
    })
}

/// Whether `command` (the line the shell ran) starts an interactive shell.
pub(crate) fn starts_shell(command: &str) -> bool {
    // Plain words only: anything the shell would expand or split is not
    // followed.
    let plain = command
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" \t-_./=@:+,%".contains(&b));
    if !plain || command.len() > 512 {
        return false;
    }
    let words: Vec<&str> = command.split_ascii_whitespace().collect();
    starts(&words)
}

fn starts(words: &[&str]) -> bool {
    let Some((&first, rest)) = words.split_first() else {
        return false;
    };
    match first.rsplit('/').next().unwrap_or(first) {
        "exec" | "command" => starts(rest),
        "sudo" => sudo(rest),
        "su" => su(rest),
        "ssh" => ssh(rest),
        "docker" | "podman" => container(rest),
        "kubectl" => kubectl(rest),
        name if SHELLS.contains(&name) => shell_options(rest),
        _ => false,
    }
}

/// A shell's own arguments: options only (`-l`, `--login`), never a
/// script or `-c`.
fn shell_options(args: &[&str]) -> bool {
    args.iter()
        .all(|a| a.starts_with('-') && !a.contains('c') && *a != "--")
}

/// `sudo -i`, `sudo -s`, `sudo -iu app`, `sudo -u app -i`, or sudo before
/// a command that starts a shell (`sudo su -`, `sudo bash`).
fn sudo(args: &[&str]) -> bool {
    let mut login = false;
    let mut i = 0;
    while let Some(&a) = args.get(i) {
        match a {
            "--login" | "--shell" => login = true,
            "-u" | "--user" | "-g" | "--group" | "-h" | "--host" => i += 1,
            "--preserve-env" | "-E" | "-H" | "--set-home" | "-n" | "--non-interactive" | "-k"
            | "-K" => {}
            _ if a.starts_with("--user=") || a.starts_with("--group=") => {}
            _ if a.starts_with("--") => return false,
            _ if a.starts_with('-') => {
                // Short flags run together: `-iu app`, `-sE`.
                let flags = &a[1..];
                if !flags.bytes().all(|b| b"isuEHnkKgh".contains(&b)) {
                    return false;
                }
                login |= flags.contains(['i', 's']);
                if flags.ends_with(['u', 'g', 'h']) {
                    i += 1;
                }
            }
            _ => return starts(&args[i..]),
        }
        i += 1;
    }
    login
}

/// `su`, `su -`, `su - app`, `su -l app`: never `su -c …`.
fn su(args: &[&str]) -> bool {
    let mut users = 0;
    let mut i = 0;
    while let Some(&a) = args.get(i) {
        match a {
            "-" | "-l" | "--login" | "-m" | "-p" | "--preserve-environment" | "-P" | "--pty" => {}
            "-s" | "--shell" => i += 1,
            _ if a.starts_with("--shell=") => {}
            _ if a.starts_with('-') => return false,
            _ => users += 1,
        }
        i += 1;
    }
    users <= 1
}

/// `ssh [options] host`, with no remote command but a shell.
fn ssh(args: &[&str]) -> bool {
    const WITH_VALUE: &str = "BbcDEeFIiJLlmOoPpQRSWw";
    let mut i = 0;
    while let Some(&a) = args.get(i) {
        if let Some(flags) = a.strip_prefix('-') {
            if flags.is_empty() || !flags.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return false;
            }
            // The first flag that takes a value takes the rest of the
            // word, or the next word.
            if let Some(at) = flags.find(|c| WITH_VALUE.contains(c))
                && at + 1 == flags.len()
            {
                i += 1;
            }
            i += 1;
            continue;
        }
        let rest = &args[i + 1..];
        return rest.is_empty() || starts(rest);
    }
    false
}

/// `docker exec -it CONTAINER bash` (and podman's): interactive, with a
/// terminal, running a shell.
fn container(args: &[&str]) -> bool {
    let flags = ExecFlags {
        short: "itduwe",
        takes_value: "uwe",
        long_values: &["--user", "--workdir", "--env"],
        dash_dash: false,
    };
    args.split_first()
        .is_some_and(|(&verb, rest)| verb == "exec" && flags.start_shell(rest))
}

/// `kubectl exec -it POD -- bash`.
fn kubectl(args: &[&str]) -> bool {
    let flags = ExecFlags {
        short: "itnc",
        takes_value: "nc",
        long_values: &["--namespace", "--container", "--context"],
        dash_dash: true,
    };
    args.split_first()
        .is_some_and(|(&verb, rest)| verb == "exec" && flags.start_shell(rest))
}

/// The option grammar of a container tool's `exec`.
struct ExecFlags {
    /// Short flags it knows, run together or not (`-it`, `-i -t`).
    short: &'static str,
    /// Those that take the next word as their value.
    takes_value: &'static str,
    /// Long options that take the next word.
    long_values: &'static [&'static str],
    /// The command follows `--` (kubectl), not the container's name.
    dash_dash: bool,
}

impl ExecFlags {
    /// Whether `args` (after `exec`) run a shell interactively, with a
    /// terminal, in a named container.
    fn start_shell(&self, args: &[&str]) -> bool {
        let (mut stdin, mut tty, mut named) = (false, false, false);
        let mut i = 0;
        while let Some(&a) = args.get(i) {
            match a {
                "--" if self.dash_dash => return stdin && tty && named && starts(&args[i + 1..]),
                "--interactive" | "--stdin" => stdin = true,
                "--tty" => tty = true,
                _ if self.long_values.contains(&a) => i += 1,
                _ if a.starts_with("--") && a.contains('=') => {}
                _ if a.starts_with("--") => return false,
                _ if a.starts_with('-') => {
                    let flags = &a[1..];
                    if !flags.bytes().all(|b| self.short.as_bytes().contains(&b)) {
                        return false;
                    }
                    stdin |= flags.contains('i');
                    tty |= flags.contains('t');
                    if flags.ends_with(|c| self.takes_value.contains(c)) {
                        i += 1;
                    }
                }
                _ if self.dash_dash => named = true,
                _ => return stdin && tty && starts(&args[i + 1..]),
            }
            i += 1;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_walissh_integrates_by_their_answer() {
        assert_eq!(shell_of("5.2.15(1)-release", ""), Some(Shell::Bash));
        assert_eq!(shell_of("4.4.20(1)-release", ""), Some(Shell::Bash));
        assert_eq!(shell_of("4.3.48(1)-release", ""), None);
        assert_eq!(shell_of("", "5.9"), Some(Shell::Zsh));
        assert_eq!(shell_of("", ""), None);
        assert_eq!(shell_of("x", ""), None);
        // Found by the fuzz target: a version past u32's room.
        assert_eq!(shell_of("555377775.555553777", ""), Some(Shell::Bash));
        assert_eq!(shell_of("55537777755555537777", ""), None);
    }

    /// Lines whose screen may show a shell's prompt walissh does not own,
    /// and programs whose prompts are their own.
    #[test]
    fn lines_that_may_show_a_shell() {
        for line in [
            "sudo -i",
            "dash",
            "env dash",
            "bash --norc",
            "sudo -u app -- sh",
            "exec $SHELL",
            "busybox sh",
            "docker run -it img bash",
            "script -q -c dash /dev/null",
            r#"python3 -c 'import pty; pty.spawn("/bin/sh")'"#,
            "python3 -c 'from pty import spawn; spawn(\"sh\")'",
        ] {
            assert!(may_show_a_shell(line), "{line}");
        }
        for line in [
            "mysql -u root",
            "psql -U app",
            "python3",
            "python3 -c \"print(input('> '))\"",
            "irb",
            "less /etc/passwd",
            "ls -la",
            "grep -r bashism .",
        ] {
            assert!(!may_show_a_shell(line), "{line}");
        }
    }

    #[test]
    fn shell_starting_lines_are_told_from_the_rest() {
        for line in [
            "sudo -i",
            "sudo -s",
            "sudo su -",
            "sudo su - app",
            "sudo -iu app",
            "sudo -u app -i",
            "sudo -E bash",
            "su",
            "su -",
            "su - app",
            "su -l app",
            "bash",
            "zsh -l",
            "/bin/bash --login",
            "exec bash",
            "exec zsh",
            "docker exec -it web bash",
            "docker exec -u root -it web /bin/zsh",
            "podman exec -i -t db sh",
            "kubectl exec -it pod-1 -- bash",
            "kubectl exec -n prod -it pod-1 -c app -- /bin/bash",
            "ssh otherhost",
            "ssh -p 2222 -l app otherhost",
            "ssh -t host bash",
        ] {
            assert!(starts_shell(line), "{line}");
        }
        for line in [
            "python3",
            "mysql -u root",
            "read -p 'mysql> ' x",
            "sudo systemctl restart nginx",
            "sudo -u app id",
            "su -c id",
            "su - app -c 'id'",
            "bash -c 'echo hi'",
            "bash script.sh",
            "bash; id",
            "sudo -i < /dev/null",
            "docker exec web bash",
            "docker exec -it web ls",
            "kubectl exec -it pod -- ls",
            "ssh host uptime",
            "ssh",
            "vi /etc/hosts",
            "less log",
            "sudo",
            "",
        ] {
            assert!(!starts_shell(line), "{line}");
        }
    }

    #[test]
    fn watching_ends_at_a_full_screen_program_or_after_much_output() {
        // The sequence split between two reads still counts.
        let mut n = Nesting::watching();
        assert!(n.output(b"starting\x1b[?10"));
        assert!(!n.output(b"49h\x1b[H~ $ "));
        let mut n = Nesting::watching();
        let chunk = vec![b'x'; 64 * 1024];
        let reads = (0..64).take_while(|_| n.output(&chunk)).count();
        assert_eq!(reads, WATCH_MAX / chunk.len());
    }
}
