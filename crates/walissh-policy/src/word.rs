//! One shell word, as written and as the shell would pass it on.
//!
//! A word is a *plain literal* when every shell walissh types into or runs
//! (bash, zsh, dash) turns it into the same single argument without
//! expanding anything: no parameter, arithmetic, command or process
//! substitution, no glob, brace or tilde expansion, no `$'…'` or `$"…"`,
//! no history expansion. Only then does the policy know the argument's
//! value. The check is deliberately narrower than the shells: a character
//! it is not sure about makes the word non-literal, and the policy then
//! asks or refuses. What it leaves to others: where words start and end
//! (`parse`, from the grammar).

/// A word of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The text as written.
    pub(crate) raw: String,
    /// The argument after quote removal, when the word is a plain literal.
    pub(crate) lit: Option<String>,
}

impl Word {
    pub(crate) fn new(raw: &str) -> Word {
        Word {
            raw: raw.to_string(),
            lit: literal(raw),
        }
    }

    /// A word made by a wrapper (an `sh -c` script's word, an `env -S`
    /// split): its value is known.
    pub(crate) fn known(value: &str) -> Word {
        Word {
            raw: quote(value),
            lit: Some(value.to_string()),
        }
    }

    /// Stands for arguments nobody can know here (what `xargs` reads).
    pub(crate) fn unknown(what: &str) -> Word {
        Word {
            raw: what.to_string(),
            lit: None,
        }
    }

    /// The value, or the text as written when the word is not literal
    /// (for rules that look at shapes, never for what is allowed).
    pub(crate) fn text(&self) -> &str {
        self.lit.as_deref().unwrap_or(&self.raw)
    }
}

/// Characters that stand for themselves outside quotes in bash, zsh and
/// dash alike, wherever they are in a word. `=` at the start of a word is
/// zsh's path expansion, so it is checked separately.
fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, '-' | '_' | '.' | '/' | ':' | ',' | '+' | '@' | '%' | '=')
}

/// The argument `raw` stands for, when it is a plain literal. Linear in
/// `raw`; never fails, only says "not literal".
pub(crate) fn literal(raw: &str) -> Option<String> {
    if raw.starts_with('=') {
        return None;
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    c if c.is_control() => return None,
                    c => out.push(c),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    // Expansions, escapes and (typed) history expansion
                    // still happen inside double quotes.
                    '$' | '`' | '\\' | '!' => return None,
                    c if c.is_control() => return None,
                    c => out.push(c),
                }
            },
            '\\' => match chars.next()? {
                c if c.is_ascii_graphic() || c == ' ' => out.push(c),
                _ => return None,
            },
            c if plain(c) => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// `value` as one single-quoted word for a POSIX shell. A backslash
/// before a backtick is closed off from it (`'a\''`b'`): quoted, the pair
/// is two literal characters, but the policy refuses the raw `\``
/// anywhere (`hidden`), and a quoted form must read as its line did.
pub(crate) fn quote(value: &str) -> String {
    let quoted = value.replace('\'', r"'\''").replace("\\`", "\\''`");
    format!("'{quoted}'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_literals_and_their_values() {
        for (raw, value) in [
            ("ls", "ls"),
            ("-la", "-la"),
            ("/var/log/syslog", "/var/log/syslog"),
            ("--sort=-%mem", "--sort=-%mem"),
            ("'a b'", "a b"),
            ("\"a b\"", "a b"),
            (r"a\ b", "a b"),
            ("''", ""),
            ("x'$HOME'", "x$HOME"),
            ("pid,comm", "pid,comm"),
        ] {
            assert_eq!(literal(raw).as_deref(), Some(value), "{raw}");
        }
    }

    #[test]
    fn anything_the_shell_expands_is_not_literal() {
        for raw in [
            "$HOME",
            "${X:-rm}",
            "$'\\''",
            "$\"x\"",
            "\"$X\"",
            "\"`id`\"",
            "$(id)",
            "`id`",
            "/???/?m",
            "*.log",
            "[ab]",
            "{-exec,}",
            "{a,b}",
            "~",
            "~root/x",
            "=ls",
            "a!b",
            "\"a!b\"",
            "a#b",
            "x^y",
            "'unclosed",
            "\"unclosed",
            "trailing\\",
            "caf\u{e9}",
            "a\u{a0}b",
            "'tab\there'",
            "<(ls)",
            "a;b",
            "a|b",
        ] {
            assert_eq!(literal(raw), None, "{raw}");
        }
    }

    #[test]
    fn quoting_round_trips() {
        for v in ["", "a b", "it's", "'", "$(id)", "\\"] {
            assert_eq!(literal(&quote(v)).as_deref(), Some(v), "{v}");
        }
    }
}
