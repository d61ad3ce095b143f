//! A shell command line taken apart the way the approval policy needs it:
//! every simple command (its words, its redirections), wherever it hides —
//! after `;`, `&&`, `||`, `&` or `|`, inside `$(…)`, backticks, `<(…)`,
//! subshells and braces, and in the script of `sh -c` and the like.
//!
//! This is not a shell: it does not expand variables or globs. It errs on
//! the side of seeing more: anything it cannot take apart (an unclosed
//! quote or substitution, a here-document) is flagged, so the policy asks
//! or refuses rather than guesses. No crate splits shell command lines into
//! commands and substitutions (shell-words and shlex split words only), so
//! this small tokenizer does, with its own tests.

/// One simple command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Simple {
    /// The words, quotes removed (`$VAR` kept as written).
    pub(crate) words: Vec<String>,
    /// Redirection targets, with their operator (`>`, `>>`, `<`, `2>`, ...).
    pub(crate) redirects: Vec<(String, String)>,
}

/// A command line, taken apart.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Line {
    /// Every simple command, nested ones included, in order of appearance.
    pub(crate) commands: Vec<Simple>,
    /// `$(…)`, backticks or `<(…)`/`>(…)` appear somewhere.
    pub(crate) substitutes: bool,
    /// Anything redirects (other than to /dev/null).
    pub(crate) redirects: bool,
    /// Something could not be taken apart (unclosed quote, here-document,
    /// a function definition...): treat the line as unknown.
    pub(crate) opaque: bool,
}

/// Takes a command line apart.
pub(crate) fn parse(line: &str) -> Line {
    let mut out = Line::default();
    parse_into(line, &mut out, 0);
    out
}

/// How deep `sh -c` and substitutions may nest before the line is opaque.
const MAX_DEPTH: usize = 8;

fn parse_into(line: &str, out: &mut Line, depth: usize) {
    if depth > MAX_DEPTH {
        out.opaque = true;
        return;
    }
    let mut lexer = Lexer {
        chars: line.chars().collect(),
        pos: 0,
    };
    let mut current = Simple::default();
    let mut pending_redirect: Option<String> = None;
    while let Some(token) = lexer.next(out, depth) {
        match token {
            Token::Word(w) => match pending_redirect.take() {
                Some(op) => {
                    if w != "/dev/null" {
                        out.redirects = true;
                    }
                    current.redirects.push((op, w));
                }
                None => current.words.push(w),
            },
            Token::Redirect(op) => {
                if op.contains("<<") {
                    // Here-documents and here-strings carry data we do not read.
                    out.opaque = true;
                }
                if op.ends_with('&') || op.starts_with(">&") || op.ends_with(">&") {
                    // 2>&1 and the like need no target word.
                    pending_redirect = None;
                    current.redirects.push((op, String::new()));
                } else {
                    pending_redirect = Some(op);
                }
            }
            Token::Separator => {
                finish(&mut current, out, depth);
            }
            Token::Group(inner) => {
                // ( … ) and { … }: their commands are commands of the line.
                finish(&mut current, out, depth);
                parse_into(&inner, out, depth + 1);
            }
        }
    }
    if pending_redirect.is_some() {
        out.opaque = true;
    }
    finish(&mut current, out, depth);
}

/// Ends a simple command; the scripts of `sh -c` and friends are parsed too.
fn finish(current: &mut Simple, out: &mut Line, depth: usize) {
    let simple = std::mem::take(current);
    if simple.words.is_empty() && simple.redirects.is_empty() {
        return;
    }
    if let Some(script) = inline_script(&simple.words) {
        parse_into(&script, out, depth + 1);
    }
    if simple.words.iter().any(|w| w.contains("()")) {
        // A function definition: its body runs later, under another name.
        out.opaque = true;
    }
    out.commands.push(simple);
}

/// The script of `sh -c SCRIPT`, `bash -c`, `su -c`, `eval ...`.
fn inline_script(words: &[String]) -> Option<String> {
    let words = program_words(words);
    let program = words.first().map(|w| basename(w))?;
    match program {
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash" | "busybox" | "su" => {
            let at = words.iter().position(|w| w == "-c" || w == "--command")?;
            words.get(at + 1).cloned()
        }
        "eval" => Some(words[1..].join(" ")),
        _ => None,
    }
}

/// The words from the program actually run: wrappers such as `sudo`,
/// `env A=1`, `nice`, `timeout 5`, `xargs` are looked through.
pub(crate) fn program_words(words: &[String]) -> &[String] {
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        // Options of the wrapper, and the argument of those that take one.
        let takes_arg = |o: &str| {
            matches!(
                o,
                "-u" | "-g"
                    | "-C"
                    | "-D"
                    | "-h"
                    | "-p"
                    | "-r"
                    | "-t"
                    | "-U"
                    | "-n"
                    | "-c"
                    | "-s"
                    | "-k"
                    | "-I"
                    | "-P"
                    | "-L"
                    | "-d"
                    | "-E"
                    | "-a"
                    | "-i"
                    | "-o"
                    | "-e"
            )
        };
        let skip_options = |mut j: usize| {
            while j < words.len() && words[j].starts_with('-') {
                j += if takes_arg(&words[j]) { 2 } else { 1 };
            }
            j
        };
        i = match basename(w) {
            "sudo" | "doas" | "nohup" | "nice" | "ionice" | "stdbuf" | "command" | "builtin"
            | "exec" | "time" | "chroot" | "xargs" | "setsid" => {
                let j = skip_options(i + 1);
                if basename(w) == "chroot" { j + 1 } else { j }
            }
            "timeout" => skip_options(i + 1) + 1,
            "env" => {
                let mut j = skip_options(i + 1);
                while j < words.len() && words[j].contains('=') {
                    j += 1;
                }
                j
            }
            _ if w.contains('=') && !w.starts_with('=') && i + 1 < words.len() => i + 1,
            _ => return &words[i..],
        };
    }
    &words[words.len()..]
}

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

pub(crate) fn basename(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

enum Token {
    Word(String),
    Redirect(String),
    Separator,
    Group(String),
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn next(&mut self, out: &mut Line, depth: usize) -> Option<Token> {
        while let Some(c) = self.peek(0) {
            if c == ' ' || c == '\t' {
                self.pos += 1;
            } else if c == '\\' && self.peek(1) == Some('\n') {
                self.pos += 2;
            } else {
                break;
            }
        }
        let c = self.peek(0)?;
        match c {
            '#' => {
                // A comment runs to the end of the line.
                while let Some(c) = self.peek(0) {
                    if c == '\n' {
                        break;
                    }
                    self.pos += 1;
                }
                Some(Token::Separator)
            }
            ';' | '\n' => {
                self.pos += 1;
                Some(Token::Separator)
            }
            '&' | '|' => {
                self.pos += 1;
                // && || |& and a lone & or | all end a simple command.
                if matches!(self.peek(0), Some('&') | Some('|')) {
                    self.pos += 1;
                }
                Some(Token::Separator)
            }
            '(' => {
                let inner = self.balanced('(', ')', out);
                Some(Token::Group(inner))
            }
            '{' if matches!(self.peek(1), Some(' ') | Some('\n')) => {
                let inner = self.balanced('{', '}', out);
                Some(Token::Group(inner))
            }
            '>' | '<' => Some(self.redirect(String::new(), out, depth)),
            '0'..='9' if self.is_fd_redirect() => {
                let fd = c.to_string();
                self.pos += 1;
                Some(self.redirect(fd, out, depth))
            }
            _ => Some(Token::Word(self.word(out, depth))),
        }
    }

    fn is_fd_redirect(&self) -> bool {
        matches!(self.peek(1), Some('>') | Some('<'))
    }

    fn redirect(&mut self, mut op: String, out: &mut Line, depth: usize) -> Token {
        // Process substitution <( … ) / >( … ) is a command, not a file.
        if let Some(dir @ ('<' | '>')) = self.peek(0)
            && self.peek(1) == Some('(')
        {
            self.pos += 1;
            let inner = self.balanced('(', ')', out);
            out.substitutes = true;
            parse_into(&inner, out, depth + 1);
            return Token::Word(format!("{dir}(…)"));
        }
        while let Some(c) = self.peek(0) {
            if matches!(c, '>' | '<' | '&' | '|') && op.len() < 4 {
                // `&>`, `>|`, `>>`, `<<`, `<<<`, `>&`.
                // `>&file` is a redirection to a file, `>&2` to a descriptor.
                if c == '&'
                    && (op.ends_with('>') || op.ends_with('<'))
                    && !matches!(self.peek(1), Some('0'..='9') | Some('-'))
                {
                    break;
                }
                op.push(c);
                self.pos += 1;
            } else {
                break;
            }
        }
        if op.ends_with('&') {
            // >&2, 2>&1, >&- : a descriptor, not a file.
            while let Some(c) = self.peek(0) {
                if c.is_ascii_digit() || c == '-' {
                    self.pos += 1;
                } else {
                    break;
                }
            }
        }
        Token::Redirect(op)
    }

    /// The text up to the matching `close`, nesting and quotes respected.
    fn balanced(&mut self, open: char, close: char, out: &mut Line) -> String {
        self.pos += 1;
        let start = self.pos;
        let mut level = 1;
        let mut quote: Option<char> = None;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            if open == close && quote.is_none() && c == close {
                // Backticks do not nest: the next one closes.
                return self.chars[start..self.pos - 1].iter().collect();
            }
            match (quote, c) {
                (Some('\''), '\'') => quote = None,
                (Some('\''), _) => {}
                (_, '\\') => self.pos += 1,
                (Some('"'), '"') => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, c) if c == open => level += 1,
                (None, c) if c == close => {
                    level -= 1;
                    if level == 0 {
                        return self.chars[start..self.pos - 1].iter().collect();
                    }
                }
                _ => {}
            }
        }
        out.opaque = true;
        self.chars[start..].iter().collect()
    }

    /// One word, quotes removed; substitutions inside are parsed as commands.
    fn word(&mut self, out: &mut Line, depth: usize) -> String {
        let mut w = String::new();
        let mut quote: Option<char> = None;
        while let Some(c) = self.peek(0) {
            if quote.is_none() && (c.is_whitespace() || matches!(c, ';' | '&' | '|' | '<' | '>')) {
                break;
            }
            if quote.is_none() && matches!(c, '(' | ')') && !w.ends_with('$') {
                if c == '(' && self.peek(1) == Some(')') {
                    // name() — a function definition.
                    w.push_str("()");
                    self.pos += 2;
                    continue;
                }
                break;
            }
            match (quote, c) {
                (Some('\''), '\'') | (Some('"'), '"') => {
                    quote = None;
                    self.pos += 1;
                }
                (Some('\''), _) => {
                    w.push(c);
                    self.pos += 1;
                }
                (None, '\'' | '"') => {
                    quote = Some(c);
                    self.pos += 1;
                }
                (_, '\\') => {
                    if let Some(next) = self.peek(1) {
                        w.push(next);
                    }
                    self.pos += 2;
                }
                (_, '$') if self.peek(1) == Some('(') => {
                    self.pos += 1;
                    let inner = self.balanced('(', ')', out);
                    out.substitutes = true;
                    if !inner.starts_with('(') {
                        parse_into(&inner, out, depth + 1);
                    }
                    w.push_str("$(…)");
                }
                (_, '`') => {
                    let inner = self.balanced('`', '`', out);
                    out.substitutes = true;
                    parse_into(&inner, out, depth + 1);
                    w.push_str("`…`");
                }
                _ => {
                    w.push(c);
                    self.pos += 1;
                }
            }
        }
        if quote.is_some() {
            out.opaque = true;
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn programs(line: &str) -> Vec<String> {
        parse(line)
            .commands
            .iter()
            .map(|c| program_words(&c.words).first().cloned().unwrap_or_default())
            .collect()
    }

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

    #[test]
    fn separators_and_pipes() {
        assert_eq!(
            programs("ls -l; df -h && free || uptime | grep x & wc"),
            ["ls", "df", "free", "uptime", "grep", "wc"]
        );
    }

    #[test]
    fn quotes_and_escapes() {
        let l = parse(r#"grep -e 'a;b' "c && d" e\;f"#);
        assert_eq!(l.commands.len(), 1);
        assert_eq!(l.commands[0].words, ["grep", "-e", "a;b", "c && d", "e;f"]);
    }

    #[test]
    fn substitutions_are_commands_too() {
        assert_eq!(programs("echo $(rm -rf /)"), ["rm", "echo"]);
        assert_eq!(programs("echo \"$(mkfs /dev/sda)\""), ["mkfs", "echo"]);
        assert_eq!(programs("echo `reboot`"), ["reboot", "echo"]);
        assert_eq!(programs("diff <(ls a) <(ls b)"), ["ls", "ls", "diff"]);
        assert!(parse("echo $(date)").substitutes);
        assert!(!parse("echo $HOME").substitutes);
    }

    #[test]
    fn wrappers_and_inline_scripts() {
        assert_eq!(programs("sudo -u root rm -rf /"), ["rm"]);
        assert_eq!(
            programs("env A=1 B=2 nice -n 5 shutdown -h now"),
            ["shutdown"]
        );
        assert_eq!(programs("sh -c 'rm -rf /; ls'"), ["rm", "ls", "sh"]);
        assert_eq!(programs("find / | xargs rm -rf"), ["find", "rm"]);
        assert_eq!(
            programs("(cd /tmp && ls) ; { uptime; }"),
            ["cd", "ls", "uptime"]
        );
        assert_eq!(programs("eval 'reboot'"), ["reboot", "eval"]);
    }

    #[test]
    fn redirections() {
        let l = parse("cat /etc/hosts > /tmp/x 2>&1");
        assert!(l.redirects);
        assert_eq!(l.commands[0].words, ["cat", "/etc/hosts"]);
        assert_eq!(l.commands[0].redirects[0], (">".into(), "/tmp/x".into()));
        assert!(!parse("ls 2>/dev/null").redirects);
        assert!(parse("echo x >> /etc/shadow").redirects);
        assert!(parse("cat <<EOF").opaque);
    }

    #[test]
    fn what_cannot_be_taken_apart_is_opaque() {
        assert!(parse("echo 'unclosed").opaque);
        assert!(parse("echo $(ls").opaque);
        assert!(parse(":(){ :|:& };:").opaque);
        assert!(!parse("ls -la /var/log").opaque);
    }
}
