//! What looks like a shell's prompt on the screen, where no mark of
//! walissh's says so: the heuristic behind following a nested shell (is
//! its prompt up, so the probe may be typed?), reading commands off the
//! screen in shells walissh did not integrate, and refusing questions
//! typed at their prompts.
//!
//! A shell's prompt ends with `$ `, `# ` or `% `, or with `> ` after a
//! path or a bracket (fish's `~> `). Programs' own prompts that end the
//! same way are told apart by the byte before: `> ` after a word or a
//! space is a program's question (`read -p "Ticket number > "`, `mysql> `,
//! Python's `>>> `), and `$ `/`# `/`% ` after `=`, `-`, `(`, a quote, `*`
//! or `$` is psql's (`db=# `, `db-# `, `db(# `). A password prompt (`: `)
//! never is one. Every function here is total and linear in its input.
//! What it leaves to others: where the line comes from (the terminal
//! model, the screen model), and what is done with the answer.

/// Bytes of a line before the prompt's end, at most: a prompt is short,
/// and a longer prefix is more likely a program's output.
const PROMPT_MAX: usize = 80;
/// A line longer than this is not read as a prompt at all.
const LINE_MAX: usize = 256;

/// Whether a shell's prompt ends at `line[..at + 2]` (`line[at..]` starts
/// with one of the endings).
fn ends_at(line: &[u8], at: usize) -> bool {
    let before = at.checked_sub(1).map(|i| line[i]);
    match line.get(at..at + 2) {
        Some(b"> ") => matches!(before, Some(b'~' | b'/' | b']' | b')')),
        Some(b"$ " | b"# " | b"% ") => !matches!(
            before,
            Some(b'=' | b'-' | b'(' | b'\'' | b'"' | b'*' | b'$')
        ),
        _ => false,
    }
}

/// Whether output ending with `tail` leaves the cursor right after what
/// looks like a shell's prompt: its last line, escape sequences and
/// carriage returns aside, ends with a prompt's ending.
pub(crate) fn at_prompt(tail: &[u8]) -> bool {
    let text = last_line(tail);
    (2..=LINE_MAX).contains(&text.len()) && ends_at(&text, text.len() - 2)
}

/// Whether output ending with `tail` leaves the cursor after text that
/// waits for an answer that is not a command nor a secret: a last line
/// with something on it that is neither a prompt nor a password's (or a
/// passphrase's, a code's) question. An rc file's `read -p`, a menu.
pub(crate) fn asks(tail: &[u8]) -> bool {
    let text = last_line(tail);
    let text = String::from_utf8_lossy(&text);
    let trimmed = text.trim();
    !trimmed.is_empty() && !at_prompt(text.as_bytes()) && !secret(trimmed)
}

/// Whether `question` asks for a secret: a password, a passphrase, a
/// one-time code.
fn secret(question: &str) -> bool {
    let lower = question.to_lowercase();
    [
        "password",
        "passphrase",
        "passcode",
        "verification code",
        "one-time",
        "pin:",
        "token:",
        "otp:",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// The command on a shell's prompt line (the screen's cursor line, or
/// that with the keys not echoed yet): what follows the first prompt
/// ending. `None` when the line does not look like a prompt, or holds
/// nothing after it.
pub(crate) fn command(line: &str) -> Option<String> {
    let bytes = line.as_bytes();
    let end = (0..bytes.len().min(PROMPT_MAX - 1)).find(|&i| ends_at(bytes, i))? + 2;
    let command = line[end..].trim();
    (!command.is_empty()).then(|| command.to_string())
}

/// The last line of `tail` as the terminal shows it: after the last line
/// feed, without escape sequences, and from its last carriage return on
/// (what follows one overwrites what came before, at least as far as it
/// goes).
fn last_line(tail: &[u8]) -> Vec<u8> {
    let line = tail.rsplit(|&b| b == b'\n').next().unwrap_or(tail);
    super::output::strip(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_told_from_other_screens() {
        for tail in [
            &b"root@web1:~# "[..],
            b"\r\n\x1b[01;32malice@web1\x1b[00m:\x1b[01;34m~\x1b[00m$ ",
            b"\x1b]0;root@h: ~\x07root@h:~# ",
            b"[app@db ~]$ ",
            b"h% ",
            b"~> ",
            b"$ ",
            b"bash-5.2$ ",
            b"sh-5.2# ",
        ] {
            assert!(at_prompt(tail), "{:?}", String::from_utf8_lossy(tail));
            assert!(!asks(tail), "{:?}", String::from_utf8_lossy(tail));
        }
        for tail in [
            &b"Password: "[..],
            b"[sudo] password for alice: ",
            b"Last login: today\r\n",
            b"$",
            b"\x1b[?1049h\x1b[H",
            b"",
            b"Ticket number > ",
            b"mysql> ",
            b"> ",
            b">>> ",
            b"Continue? > ",
            b"postgres=# ",
            b"postgres-# ",
            b"postgres(# ",
            b"postgres$# ",
        ] {
            assert!(!at_prompt(tail), "{:?}", String::from_utf8_lossy(tail));
        }
        // Total on anything, including unfinished sequences.
        assert!(!at_prompt(b"\x1b[12"));
        assert!(!at_prompt(b"\x1b]0;title"));
        assert!(!at_prompt(b"\x1b"));
    }

    #[test]
    fn questions_that_are_neither_prompts_nor_secrets_are_told() {
        for tail in [
            &b"Ticket number > "[..],
            b"Choose [1-3]: ",
            b"mysql> ",
            b"Continue? ",
        ] {
            assert!(asks(tail), "{:?}", String::from_utf8_lossy(tail));
        }
        for tail in [
            &b"Password: "[..],
            b"[sudo] password for alice: ",
            b"Enter passphrase for key '/root/.ssh/id': ",
            b"Verification code: ",
            b"Last login: today\r\n",
            b"\r\n",
            b"",
            b"app@db:~$ ",
        ] {
            assert!(!asks(tail), "{:?}", String::from_utf8_lossy(tail));
        }
    }

    #[test]
    fn commands_are_read_off_prompt_lines() {
        assert_eq!(command("$ ls -la").as_deref(), Some("ls -la"));
        assert_eq!(
            command("root@h:~# echo a # b").as_deref(),
            Some("echo a # b")
        );
        assert_eq!(command("~> git status").as_deref(), Some("git status"));
        assert_eq!(command("~ > git status"), None);
        assert_eq!(command("$ ? why").as_deref(), Some("? why"));
        assert_eq!(command("$ "), None);
        assert_eq!(command("Password: "), None);
        // Programs' prompts are not a shell's.
        assert_eq!(command(">>> print(1)"), None);
        assert_eq!(command("mysql> select 1;"), None);
        assert_eq!(command("postgres=# ? x"), None);
        // A prompt is short.
        let long = format!("{}$ ls", "x".repeat(100));
        assert_eq!(command(&long), None);
        assert_eq!(command("é$ ls").as_deref(), Some("ls"));
    }
}
