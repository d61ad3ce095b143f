//! Whether a line can be typed at an interactive shell's prompt to run as
//! written. The agent's approved commands are typed there, so a second
//! line, a control character, a history expansion, a `#` or an unfinished
//! line must never get there. A small scanner of its own: it reads one
//! character at a time and always ends. What it leaves to others: what
//! the line runs (`parse`, `unwrap`).

/// Why `line` cannot be typed at an interactive shell's prompt to run as
/// written, if it cannot: the agent's commands are typed there, so a
/// second line, a control character (Tab completes, Ctrl-C cancels), a
/// history expansion (`!!` or `^a^b` would run another command than the
/// one checked), a `#` (a comment in bash, an argument in zsh: the two
/// would run different commands) or an unfinished line (the shell would
/// wait for more, out of sight) must never get there.
pub(crate) fn typing_problem(line: &str) -> Option<&'static str> {
    if line.trim().is_empty() {
        return Some("the command is empty");
    }
    if line.chars().any(char::is_control) {
        return Some("the command must be one line, without control characters");
    }
    if line.chars().any(invisible) {
        return Some(
            "the command holds invisible or unusual space characters, which shells and \
             walissh may read differently",
        );
    }
    if line.trim_start().starts_with('^') {
        return Some("a line starting with `^` is a history substitution");
    }
    let mut t = Typing::default();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match (t.quote, c) {
            (Some('\''), '\'') => t.quote = None,
            (Some('\''), _) => {}
            // `$'…'`: a backslash escapes anything, `\'` included.
            (Some('$'), '\\') => i += 1,
            (Some('$'), '\'') => t.quote = None,
            (Some('$'), _) => {}
            (None, '$') if next == Some('\'') => {
                t.quote = Some('$');
                t.quoted = true;
                i += 1;
            }
            (_, '\\') if next.is_none() => return Some("the command ends with a backslash"),
            (_, '\\') => {
                t.word.push(c);
                i += 1;
            }
            (_, '!') if !matches!(next, None | Some(' ' | '=' | '(')) => {
                return Some("`!` would be taken as a history expansion; quote it with ''");
            }
            (Some('"'), '"') => t.quote = None,
            (Some(_), '`') => t.backticks += 1,
            (Some(_), _) => {}
            (None, '\'' | '"') => {
                t.quote = Some(c);
                t.quoted = true;
            }
            (None, '#') if t.word.is_empty() => {
                return Some("`#` starts a comment in bash but not in zsh; quote it");
            }
            (None, '<') if next == Some('<') && chars.get(i + 2) != Some(&'<') => {
                return Some("here-documents span several lines");
            }
            (None, '<') if next == Some('<') => i += 2,
            (None, '`') => t.backticks += 1,
            (None, c) if c.is_whitespace() => t.end_word(false),
            (None, ';' | '&' | '|' | '(' | ')') => {
                t.end_word(true);
                match c {
                    '(' => t.depth += 1,
                    // A `)` without `(` ends a pattern, in a case.
                    ')' if t.depth == 0 && t.cases > 0 => {}
                    ')' => t.depth -= 1,
                    _ => {}
                }
            }
            (None, _) => t.word.push(c),
        }
        i += 1;
    }
    t.end_word(false);
    if t.quote.is_some() || t.backticks % 2 == 1 {
        return Some("the command has an unclosed quote");
    }
    if t.depth != 0 {
        return Some("the command has unbalanced parentheses");
    }
    if t.open != 0 {
        return Some("the command has an unfinished if, case, loop or { } group");
    }
    let end = line.trim_end();
    if ["|", "&&", "||"].iter().any(|op| end.ends_with(op)) {
        return Some("the command is unfinished (it ends with an operator)");
    }
    None
}

/// What `typing_problem` tracks as it reads a line.
#[derive(Default)]
struct Typing {
    quote: Option<char>,
    depth: i32,
    backticks: usize,
    /// The word being read, and whether any of it was quoted (a quoted
    /// `if` is no keyword).
    word: String,
    quoted: bool,
    /// Whether the next word is in command position (where keywords are).
    not_command: bool,
    /// Compound commands opened and not closed (`if`…`fi`, `do`…`done`,
    /// `case`…`esac`, `{`…`}`).
    open: i32,
    cases: i32,
}

impl Typing {
    /// Ends the word; `separator` says an operator follows, after which a
    /// command starts.
    fn end_word(&mut self, separator: bool) {
        let word = std::mem::take(&mut self.word);
        let quoted = std::mem::take(&mut self.quoted);
        if !word.is_empty() {
            let keyword = !self.not_command && !quoted;
            if keyword {
                self.cases += match word.as_str() {
                    "case" => 1,
                    "esac" => -1,
                    _ => 0,
                };
                self.open += match word.as_str() {
                    "if" | "case" | "do" | "{" => 1,
                    "fi" | "esac" | "done" | "}" => -1,
                    _ => 0,
                };
            }
            // After these a command starts again.
            let leads = keyword
                && matches!(
                    word.as_str(),
                    "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "{" | "!"
                );
            self.not_command = !leads;
        }
        if separator {
            self.not_command = false;
        }
    }
}

/// Spaces other than the ASCII ones, and characters that print as
/// nothing (byte-order mark, zero-width and bidi controls, soft hyphen):
/// a shell takes them as part of a word, a reader may not see them.
pub fn invisible(c: char) -> bool {
    (c.is_whitespace() && !c.is_ascii())
        || matches!(
            c,
            '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
                | '\u{180b}'..='\u{180f}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}' | '\u{ffa0}'
                | '\u{fff0}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_cannot_be_typed_at_a_prompt() {
        for (line, why) in [
            ("ls\nrm x", "one line"),
            ("ls\tx", "one line"),
            ("echo \"hi!\"", "history expansion"),
            ("!!", "history expansion"),
            ("echo 'unclosed", "unclosed quote"),
            ("echo $(date", "unbalanced"),
            ("ls |", "unfinished"),
            ("ls \\", "backslash"),
            ("  ", "empty"),
            ("ls # ; rm -rf ~", "comment"),
            ("^ls^rm -rf", "history substitution"),
            ("echo $'\\'' #; reboot \\'", "comment"),
            ("echo $'\\'' !! \\'", "history expansion"),
            ("cat <<EOF", "here-documents"),
            ("echo `date", "unclosed quote"),
            ("for f in *; do echo $f", "unfinished"),
            ("if true; then ls", "unfinished"),
            ("{ ls", "unfinished"),
        ] {
            let p = typing_problem(line).unwrap_or_else(|| panic!("{line:?} passed"));
            assert!(p.contains(why), "{line:?}: {p}");
        }
        for line in [
            "ls -la",
            "echo 'hi!'",
            "[ ! -f x ] && echo none",
            "awk '!/x/' f",
            "echo $(date) \\| x",
            "a != b",
            "echo a#b '#' \"#\"",
            "cat <<< hello",
            "grep -w if file; echo done",
            "for f in *; do echo $f; done",
            "if true; then ls; fi",
            "{ ls; }",
            "case x in a) echo a;; esac",
            "echo `date`",
        ] {
            assert_eq!(typing_problem(line), None, "{line:?}");
        }
    }
}
