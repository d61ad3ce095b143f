//! What looks like a shell's prompt on the screen, where no mark of
//! walissh's says so: the heuristic behind following a nested shell (is
//! its prompt up, so the probe may be typed?), reading commands off the
//! screen in shells walissh did not integrate, and refusing questions
//! typed at their prompts.
//!
//! A shell's prompt ends with `$ `, `# ` or `% `, or with `> ` after `~`
//! or `/` (fish's `~> `, `/> `). Programs' own prompts that end the same
//! way are told apart by the byte before: `> ` after anything else is a
//! program's (`read -p "Ticket number > "`, `mysql> `, MariaDB's
//! `[(none)]> `, Python's `>>> `, `iex(1)> `, `[dev/prod]> `; and fish's
//! in a subdirectory, `~/src> `, which is missed), and `$ `/`# `/`% `
//! after `=`, `-`, `(`, a quote, `*`, `$`, `!` or `?` is psql's (`db=# `,
//! `db-# `, `db(# `, `db=!# `). A password prompt (`: `) never is one. Every function here
//! is total and linear in its input.
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
        Some(b"> ") => matches!(before, Some(b'~' | b'/')),
        Some(b"$ " | b"# " | b"% ") => !matches!(
            before,
            Some(b'=' | b'-' | b'(' | b'\'' | b'"' | b'*' | b'$' | b'!' | b'?')
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

/// Whether output ending with `tail` shows `answer` (a line the user
/// entered) echoed after a question that was not a shell's prompt: an rc
/// file's `read -p`, a menu. The answer must be on the screen: one typed
/// with echo off (a password in any language, a passphrase, a PIN) was
/// not, and ssh's own question about a host's key is no question here.
/// The last line that ends with the answer is the one read.
pub(crate) fn answered(tail: &[u8], answer: &str) -> bool {
    let answer = answer.trim_end();
    if answer.is_empty() {
        return false;
    }
    let Some(line) = tail
        .split(|&b| b == b'\n')
        .map(visible)
        .rfind(|l| l.trim_ascii_end().ends_with(answer.as_bytes()))
    else {
        return false;
    };
    let line = line.trim_ascii_end();
    let question = &line[..line.len() - answer.len()];
    let ssh = memchr::memmem::find(question, b"(yes/no").is_some();
    !question.trim_ascii().is_empty() && !at_prompt(question) && !ssh
}

/// The command on a shell's prompt line (the screen's cursor line, or
/// that with the keys not echoed yet): what follows the first prompt
/// ending. `None` when the line does not look like a prompt, or holds
/// nothing after it.
pub(crate) fn command(line: &str) -> Option<String> {
    let command = line[end(line)?..].trim();
    (!command.is_empty()).then(|| command.to_string())
}

/// Where the first prompt ending on `line` ends, if the line starts with
/// what looks like a shell's prompt.
pub(crate) fn end(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    Some((0..bytes.len().min(PROMPT_MAX - 1)).find(|&i| ends_at(bytes, i))? + 2)
}

/// The last line of `tail` as the terminal shows it.
fn last_line(tail: &[u8]) -> Vec<u8> {
    visible(tail.rsplit(|&b| b == b'\n').next().unwrap_or(tail))
}

/// One line as the terminal shows it: without escape sequences, and from
/// its last carriage return that has text after it (what follows one is
/// drawn over what came before: zsh pads a line with spaces and returns
/// before its prompt).
fn visible(line: &[u8]) -> Vec<u8> {
    line.split(|&b| b == b'\r')
        .map(strip)
        .rfind(|part| !part.is_empty())
        .unwrap_or_default()
}

/// A remover of terminal escape sequences (CSI, OSC, DCS and the other
/// strings, charset selections such as `ESC ( B`) and of control
/// characters but line feed and tab: `vte`'s parser (the one vt100 uses)
/// does the reading, so every sequence ends where the terminal ends it,
/// as a prompt must be read: as it is drawn. (Text bound for the model is
/// read by `crate::escapes`, which errs toward keeping text.)
#[derive(Default)]
struct Strip(vte::Parser);

impl Strip {
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        self.0.advance(&mut Keep(out), bytes);
    }
}

/// `bytes` as text: without escape sequences and control characters but
/// line feed and tab (see `Strip`).
fn strip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    Strip::default().feed(bytes, &mut out);
    out
}

/// What `Strip` keeps: text, line feeds and tabs.
struct Keep<'a>(&'a mut Vec<u8>);

impl vte::Perform for Keep<'_> {
    fn print(&mut self, c: char) {
        let mut buf = [0; 4];
        self.0.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }

    fn execute(&mut self, byte: u8) {
        if matches!(byte, b'\n' | b'\t') {
            self.0.push(byte);
        }
    }
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
            b"~/src/> ",
            b"$ ",
            b"bash-5.2$ ",
            b"sh-5.2# ",
        ] {
            assert!(at_prompt(tail), "{:?}", String::from_utf8_lossy(tail));
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
            b"postgres=!# ",
            b"MariaDB [(none)]> ",
            b"[1] pry(main)> ",
            b"iex(1)> ",
            b"[dev/prod]> ",
        ] {
            assert!(!at_prompt(tail), "{:?}", String::from_utf8_lossy(tail));
        }
        // Total on anything, including unfinished sequences.
        assert!(!at_prompt(b"\x1b[12"));
        assert!(!at_prompt(b"\x1b]0;title"));
        assert!(!at_prompt(b"\x1b"));
    }

    #[test]
    fn answers_echoed_after_a_question_are_told_from_the_rest() {
        for (tail, answer) in [
            (&b"Ticket number > T-9\r\n"[..], "T-9"),
            (b"Choose [1-3]: 2\r\nok\r\napp$ ", "2"),
            (b"\x1b[1mContinue?\x1b[0m yes\r\n", "yes"),
            (b"Ticket number > T-9", "T-9"),
        ] {
            assert!(
                answered(tail, answer),
                "{:?}",
                String::from_utf8_lossy(tail)
            );
        }
        for (tail, answer) in [
            // Typed with echo off: a password in any language, a PIN.
            (&b"[sudo] password for alice: \r\n"[..], "secret"),
            (b"[sudo] Passwort f\xc3\xbcr bob: \r\n", "geheim"),
            (b"Enter PIN for ECDSA-SK key: \r\n", "1234"),
            // A command typed at a prompt not probed yet.
            (b"app@db:~$ ls\r\n", "ls"),
            // ssh's question about a host's key.
            (
                b"continue connecting (yes/no/[fingerprint])? yes\r\n",
                "yes",
            ),
            // Enter alone, and an answer nowhere on the screen.
            (b"Press Enter\r\n", ""),
            (b"Ticket number > \r\n", "T-9"),
        ] {
            assert!(
                !answered(tail, answer),
                "{:?}",
                String::from_utf8_lossy(tail)
            );
        }
    }

    /// zsh pads a line and returns before its prompt: the line is what
    /// follows the last return, however wide the terminal.
    #[test]
    fn a_line_drawn_over_after_a_return_is_what_follows_it() {
        let padded = format!("%{}\r \rhost% ", " ".repeat(299));
        assert!(at_prompt(padded.as_bytes()));
        assert!(at_prompt(b"Ticket > T\rhost$ "));
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
