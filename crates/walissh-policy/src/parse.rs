//! A command line read with bash's grammar (tree-sitter-bash), for the
//! policy: every simple command wherever it hides (after `;`, `&&`, `||`,
//! `&` or `|`, in subshells, groups, loops, conditions, functions,
//! command and process substitutions, here-strings), every redirection,
//! and whether the line has the one shape `auto` may run.
//!
//! Why tree-sitter-bash: it is a maintained grammar of the whole bash
//! language (OpenAI's Codex reads proposed commands with it for the same
//! job), its GLR parser never gives up (anything it cannot read becomes an
//! ERROR or MISSING node, which the policy treats as "not understood"),
//! and parsing can be cancelled from a progress callback, so a hostile
//! line costs a bounded time. brush-parser, the other candidate, is a PEG
//! parser whose worst case we could not bound as easily.
//!
//! The grammar is trusted for structure only. Whether a word is a plain
//! literal, and what its value is, is decided by `word` on the word's own
//! text; and the `plain` shape also requires nothing but blanks between
//! the words of a command, so a word boundary the grammar might place
//! differently from bash makes the line not plain. The oracle tests check
//! the result against what bash, dash and zsh actually run.
//!
//! What it leaves to others: wrappers (`wrappers`), what is allowed or
//! denied (`auto`, `deny`).

use std::ops::ControlFlow;
use std::time::Instant;

use tree_sitter::{Node, ParseOptions, Parser, TreeCursor};

use super::word::{Word, quote};

/// One simple command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Command {
    /// The program and its arguments, as written.
    pub(crate) words: Vec<Word>,
    /// `NAME=value` words in front of it: they change its environment.
    pub(crate) assigns: usize,
}

/// One redirection: `2>/dev/null`, `>> log`, `<<< text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    /// The descriptor written before the operator, if any.
    pub(crate) fd: Option<String>,
    pub(crate) op: String,
    /// The file or descriptor it names.
    pub(crate) target: Option<Word>,
}

impl Redirect {
    /// Whether it may write (to a file or a device).
    pub(crate) fn writes(&self) -> bool {
        self.op.contains('>')
    }

    /// `2>&1`, `>&2`, `<&0`, `>&-`: descriptors, no file.
    pub(crate) fn duplicates(&self) -> bool {
        matches!(self.op.as_str(), ">&" | "<&" | ">&-" | "<&-")
            && self.target.as_ref().is_some_and(|t| {
                t.lit
                    .as_deref()
                    .is_some_and(|v| v == "-" || v.bytes().all(|b| b.is_ascii_digit()))
            })
    }
}

/// A command line, read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Script {
    /// Every simple command, nested ones included, in the order they are
    /// written.
    pub(crate) commands: Vec<Command>,
    /// Every redirection, wherever it is.
    pub(crate) redirects: Vec<Redirect>,
    /// Only simple commands joined by `;`, `&&`, `||` and `|`, with
    /// redirections and blanks between words: the shape `auto` may run.
    pub(crate) plain: bool,
    /// Why the line could not be read, if it could not.
    pub(crate) unknown: Option<String>,
    /// The parse was given up (its time budget ran out): nothing in the
    /// line was read, so nothing about it is known.
    pub(crate) gave_up: bool,
    /// Functions the line defines, each with the names of the commands
    /// its body runs (those of literal `eval` and `sh -c` text included):
    /// a fork bomb is a function that reaches itself (`f(){ f|f& };f`).
    pub(crate) functions: Vec<(String, Vec<String>)>,
    /// `NAME=value` assignments anywhere, as written.
    pub(crate) assignments: Vec<(String, Word)>,
    /// For a plain line whose words are all literals: the same line with
    /// every word single-quoted, so that no shell can read it otherwise.
    pub(crate) quoted: Option<String>,
}

/// [`parse_until`] with a budget of its own (tests, the fuzz target).
pub(crate) fn parse(line: &str) -> Script {
    parse_until(line, Instant::now() + std::time::Duration::from_millis(250))
}

/// Reads `line`, given up at `deadline` (a whole check shares one, see
/// `unwrap`). Total: every input gives a `Script`, in time bounded by the
/// line's length and the deadline.
pub(crate) fn parse_until(line: &str, deadline: Instant) -> Script {
    read(line, deadline, true)
}

/// The parse; with `round_trip`, the quoted line is read again and kept
/// only if it reads the same (see [`reads_alike`]).
fn read(line: &str, deadline: Instant, round_trip: bool) -> Script {
    let mut parser = Parser::new();
    if parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .is_err()
    {
        return unknown("the shell grammar could not be loaded");
    }
    let mut progress = |_: &tree_sitter::ParseState| {
        if Instant::now() > deadline {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let options = ParseOptions::new().progress_callback(&mut progress);
    let bytes = line.as_bytes();
    let mut input = |at: usize, _| -> &[u8] { bytes.get(at..).unwrap_or_default() };
    let Some(tree) = parser.parse_with_options(&mut input, None, Some(options)) else {
        return Script {
            gave_up: true,
            ..unknown("it took too long to read")
        };
    };
    let root = tree.root_node();
    let mut script = Script {
        plain: plain_shape(root, line),
        ..Script::default()
    };
    if root.has_error() {
        script.unknown = Some("the shell grammar cannot read it".into());
    }
    collect(root.walk(), line, &mut script);
    if script.plain && script.unknown.is_none() {
        script.quoted =
            quoted(root.walk(), line).filter(|q| !round_trip || reads_alike(&script, q, deadline));
    }
    script
}

/// Whether the quoted line reads back as the same commands and
/// redirections: what the renderer cannot write back unchanged (an
/// operator and its target that would join into another token, say) is
/// not run unasked.
fn reads_alike(script: &Script, quoted: &str, deadline: Instant) -> bool {
    let again = read(quoted, deadline, false);
    let lits = |s: &Script| {
        let words: Vec<Vec<Option<String>>> = s
            .commands
            .iter()
            .map(|c| c.words.iter().map(|w| w.lit.clone()).collect())
            .collect();
        let redirects: Vec<(Option<String>, String, Option<Option<String>>)> = s
            .redirects
            .iter()
            .map(|r| {
                (
                    r.fd.clone(),
                    r.op.clone(),
                    r.target.as_ref().map(|t| t.lit.clone()),
                )
            })
            .collect();
        (words, redirects)
    };
    again.plain && again.unknown.is_none() && lits(&again) == lits(script)
}

/// The line again, each word single-quoted, operators between; `None`
/// when a word is not a literal. Iterative, in document order.
fn quoted(mut cursor: TreeCursor, line: &str) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    loop {
        let node = cursor.node();
        let mut descend = true;
        match node.kind() {
            "command" => {
                descend = false;
                for (field, child) in children(node) {
                    if child.kind() == "file_redirect" {
                        out.push(quoted_redirect(&redirect(child, line))?);
                    } else if matches!(field, Some("name" | "argument")) {
                        out.push(quote(Word::new(text(child, line)).lit.as_deref()?));
                    }
                }
            }
            "file_redirect" => {
                descend = false;
                out.push(quoted_redirect(&redirect(node, line))?);
            }
            _ if !node.is_named() => out.push(text(node, line).to_string()),
            _ => {}
        }
        if descend && cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return Some(out.join(" "));
            }
        }
    }
}

fn quoted_redirect(r: &Redirect) -> Option<String> {
    let target = r.target.as_ref()?;
    let target = if r.duplicates() {
        target.lit.clone()?
    } else {
        quote(target.lit.as_deref()?)
    };
    Some(format!("{}{}{target}", r.fd.as_deref().unwrap_or(""), r.op))
}

fn unknown(why: &str) -> Script {
    Script {
        unknown: Some(why.into()),
        ..Script::default()
    }
}

fn text<'a>(node: Node, line: &'a str) -> &'a str {
    line.get(node.byte_range()).unwrap_or_default()
}

/// How deep command and process substitutions may nest. Each command
/// keeps its words' text, which holds every substitution nested in it, so
/// the cost of reading a line grows with its length times this depth:
/// bounded, it stays linear. No command a person writes nests this deep.
const MAX_SUBSTITUTIONS: usize = 16;

/// Whether `node` is a command written inside a word of another.
fn substitution(node: Node) -> bool {
    matches!(node.kind(), "command_substitution" | "process_substitution")
}

/// Visits every node once, in document order, without recursion (a line
/// of thousands of `&&` nests that deep). Substitutions nested deeper than
/// [`MAX_SUBSTITUTIONS`] end the walk: the line is not understood.
fn collect(mut cursor: TreeCursor, line: &str, script: &mut Script) {
    let mut nesting = 0;
    loop {
        let node = cursor.node();
        if substitution(node) {
            nesting += 1;
            if nesting > MAX_SUBSTITUTIONS {
                script.unknown = Some(format!(
                    "its substitutions nest deeper than {MAX_SUBSTITUTIONS}"
                ));
                return;
            }
        }
        match node.kind() {
            "command" => script.commands.push(command(node, line)),
            "declaration_command" | "unset_command" => {
                script.commands.push(declaration(node, line))
            }
            "test_command" => script.commands.push(test(node, line)),
            "variable_assignment" => {
                let name = node.child_by_field_name("name").map(|n| text(n, line));
                let value = node.child_by_field_name("value").map(|n| text(n, line));
                if let Some(name) = name {
                    script
                        .assignments
                        .push((name.to_string(), Word::new(value.unwrap_or(""))));
                }
            }
            "file_redirect" | "herestring_redirect" | "heredoc_redirect" => {
                // The grammar gives words written after a redirection
                // (`cat 2>/dev/null /etc/shadow`) to the redirection, while
                // the shell gives them to the command: refuse to guess.
                let targets = children(node)
                    .iter()
                    .filter(|(f, _)| *f == Some("destination"))
                    .count();
                if targets > 1 {
                    script
                        .unknown
                        .get_or_insert_with(|| "words after a redirection".into());
                }
                script.redirects.push(redirect(node, line))
            }
            "function_definition" => script.functions.push(function(node, line)),
            // zsh runs `cat` for a redirection alone (NULLCMD); bash runs
            // nothing: a line whose meaning depends on the shell.
            "redirected_statement" if node.child_by_field_name("body").is_none() => {
                script
                    .unknown
                    .get_or_insert_with(|| "a redirection without a command".into());
            }
            _ => {}
        }
        if cursor.goto_first_child() {
            continue;
        }
        // Each node met here has had its whole subtree visited.
        loop {
            if substitution(cursor.node()) {
                nesting -= 1;
            }
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
        }
    }
}

/// The direct children of `node`, with their field names.
fn children<'t>(node: Node<'t>) -> Vec<(Option<&'t str>, Node<'t>)> {
    let mut cursor = node.walk();
    let mut out = Vec::new();
    if cursor.goto_first_child() {
        loop {
            out.push((cursor.field_name(), cursor.node()));
            if !cursor.goto_next_sibling() {
                break;
            }
        }
    }
    out
}

fn command(node: Node, line: &str) -> Command {
    let mut out = Command::default();
    for (field, child) in children(node) {
        match (field, child.kind()) {
            (Some("name" | "argument"), _) => out.words.push(Word::new(text(child, line))),
            (_, "variable_assignment") => out.assigns += 1,
            // Redirections are collected on their own; anything else
            // (the grammar's oddities) is a word the policy cannot read.
            (Some("redirect"), _) => {}
            (_, "file_redirect" | "herestring_redirect") => {}
            _ if child.is_named() => out.words.push(Word::unknown(text(child, line))),
            _ => {}
        }
    }
    out
}

/// `declare`, `export`, `local`, `readonly`, `typeset`, `unset`: the
/// keyword is the program.
fn declaration(node: Node, line: &str) -> Command {
    let mut out = Command::default();
    for (_, child) in children(node) {
        out.words.push(Word::new(text(child, line)));
    }
    out
}

/// `[ … ]` and `[[ … ]]`: the bracket is the program, and the operands
/// and operators inside are its words.
fn test(node: Node, line: &str) -> Command {
    let open = text(node, line).trim_start();
    let bracket = if open.starts_with("[[") { "[[" } else { "[" };
    let mut out = Command {
        words: vec![Word {
            raw: bracket.into(),
            lit: Some(bracket.into()),
        }],
        assigns: 0,
    };
    let mut stack: Vec<Node> = children(node).into_iter().rev().map(|(_, c)| c).collect();
    while let Some(n) = stack.pop() {
        match n.kind() {
            "binary_expression"
            | "unary_expression"
            | "parenthesized_expression"
            | "negated_expression" => {
                stack.extend(children(n).into_iter().rev().map(|(_, c)| c));
            }
            _ if n.is_named()
                || matches!(
                    text(n, line),
                    "!" | "=" | "==" | "!=" | "=~" | "<" | ">" | "-a" | "-o"
                ) =>
            {
                out.words.push(Word::new(text(n, line)))
            }
            _ => {}
        }
    }
    out
}

fn redirect(node: Node, line: &str) -> Redirect {
    let mut out = Redirect {
        fd: None,
        op: String::new(),
        target: None,
    };
    for (field, child) in children(node) {
        match (field, child.is_named()) {
            (Some("descriptor"), _) => out.fd = Some(text(child, line).to_string()),
            (_, false) if out.target.is_none() => out.op.push_str(text(child, line)),
            (_, true) if out.target.is_none() => out.target = Some(Word::new(text(child, line))),
            _ => {}
        }
    }
    if node.kind() == "heredoc_redirect" {
        out.op = "<<".into();
    }
    out
}

/// A function's name, and the names of the commands its body runs
/// (not those of functions defined inside it: they are functions of the
/// line themselves, so each node is visited for one function only, and
/// nested definitions cost linear time).
fn function(node: Node, line: &str) -> (String, Vec<String>) {
    let name = node
        .child_by_field_name("name")
        .map(|n| text(n, line).to_string())
        .unwrap_or_default();
    let mut calls = Vec::new();
    let mut stack: Vec<Node> = node.child_by_field_name("body").into_iter().collect();
    while let Some(n) = stack.pop() {
        match n.kind() {
            "function_definition" => continue,
            "command" => {
                let words = command(n, line).words;
                if let Some(first) = words.first() {
                    calls.push(first.text().to_string());
                    // `eval 'f|f&'`, `sh -c 'f'`: the text's names too.
                    let evals = matches!(
                        first.text(),
                        "eval" | "sh" | "bash" | "zsh" | "dash" | "command" | "exec"
                    );
                    if evals {
                        for w in &words[1..] {
                            calls.extend(
                                w.text()
                                    .split(|c: char| !(c.is_alphanumeric() || "_-.:".contains(c)))
                                    .filter(|t| !t.is_empty())
                                    .map(str::to_string),
                            );
                        }
                    }
                }
            }
            _ => {}
        }
        stack.extend(children(n).into_iter().map(|(_, c)| c));
    }
    (name, calls)
}

/// Whether the line is only simple commands joined by `;`, `&&`, `||` and
/// `|`, each with blanks between its words. Iterative, like `collect`.
fn plain_shape(root: Node, line: &str) -> bool {
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        let ok = match node.kind() {
            "program" | "list" | "pipeline" => children(node).into_iter().all(|(_, c)| {
                if c.is_named() {
                    stack.push(c);
                    true
                } else {
                    matches!(text(c, line), ";" | "&&" | "||" | "|")
                }
            }),
            "redirected_statement" => children(node).into_iter().all(|(field, c)| match field {
                Some("body") => {
                    stack.push(c);
                    true
                }
                _ => c.kind() == "file_redirect" && redirect_apart(c, line),
            }),
            "command" => tidy(node, line),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// A command whose parts are words and file redirections with blanks
/// between them, and nothing else.
fn tidy(node: Node, line: &str) -> bool {
    let parts = children(node);
    let mut end = None;
    for (field, c) in &parts {
        let known = matches!(field, Some("name" | "argument")) || c.kind() == "file_redirect";
        if !known {
            return false;
        }
        if c.kind() == "file_redirect" && !redirect_apart(*c, line) {
            return false;
        }
        if let Some(end) = end {
            let gap = line.get(end..c.start_byte()).unwrap_or("x");
            if gap.is_empty() && c.kind() != "file_redirect"
                || !gap.bytes().all(|b| b == b' ' || b == b'\t')
            {
                return false;
            }
        }
        end = Some(c.end_byte());
    }
    true
}

/// A redirection every shell reads as the grammar does: its descriptor,
/// if written, is one digit, and no word the shell would take for its
/// descriptor is written against it.
fn redirect_apart(redirect: Node, line: &str) -> bool {
    single_digit(redirect, line) && !fd_like(line.get(..redirect.start_byte()).unwrap_or(""))
}

/// A redirection's descriptor, if written, is one digit: every shell
/// reads `0`..`9` alike, while wider ones differ (dash takes `10>` for an
/// argument, bash wraps `4294967297>` to descriptor 1).
fn single_digit(redirect: Node, line: &str) -> bool {
    redirect
        .child_by_field_name("descriptor")
        .is_none_or(|d| matches!(text(d, line).as_bytes(), [b'0'..=b'9']))
}

/// Whether the text before a redirection written against it ends in a
/// word the shell would take for its descriptor (`0<x`, `2&>x`, `{fd}>x`)
/// where the grammar took an argument: the two would then disagree on
/// what the command's words are.
fn fd_like(before: &str) -> bool {
    let word = before.rsplit([' ', '\t']).next().unwrap_or(before);
    !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit()) || word.ends_with('}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn programs(line: &str) -> Vec<String> {
        parse(line)
            .commands
            .iter()
            .map(|c| c.words.first().map(|w| w.raw.clone()).unwrap_or_default())
            .collect()
    }

    #[test]
    fn every_command_wherever_it_hides() {
        assert_eq!(
            programs("ls -l; df -h && free || uptime | grep x & wc"),
            ["ls", "df", "free", "uptime", "grep", "wc"]
        );
        assert_eq!(programs("echo $(rm -rf /)"), ["echo", "rm"]);
        assert_eq!(programs("echo \"$(mkfs /dev/sda)\""), ["echo", "mkfs"]);
        assert_eq!(programs("echo `reboot`"), ["echo", "reboot"]);
        assert_eq!(programs("diff <(ls a) <(ls b)"), ["diff", "ls", "ls"]);
        assert_eq!(
            programs("(cd /tmp && ls) ; { uptime; }"),
            ["cd", "ls", "uptime"]
        );
        assert_eq!(programs("if true; then reboot; fi"), ["true", "reboot"]);
        assert_eq!(programs("for f in a; do rm $f; done"), ["rm"]);
        assert_eq!(programs("case x in a) ls;; esac"), ["ls"]);
        assert_eq!(programs("x=$(halt)"), ["halt"]);
        assert_eq!(programs("echo $(( $(reboot) ))"), ["echo", "reboot"]);
    }

    #[test]
    fn ansi_c_quoting_does_not_hide_a_command() {
        let s = parse(r"echo $'\'' ; rm -rf --no-preserve-root / ; echo \'");
        let names: Vec<&str> = s.commands.iter().map(|c| c.words[0].raw.as_str()).collect();
        assert_eq!(names, ["echo", "rm", "echo"]);
        assert_eq!(s.commands[0].words[1].lit, None);
    }

    #[test]
    fn the_plain_shape() {
        for line in [
            "ls -la /var/log",
            "df -h; free -m",
            "ps aux | grep nginx | head -5",
            "tail -n 100 /var/log/syslog 2>/dev/null",
            "a && b || c",
            "ls 2>&1 | head",
            "echo a>/dev/null",
            "echo 1>/dev/null",
            "echo a \\1>/dev/null",
            "echo a1>/dev/null",
        ] {
            assert!(parse(line).plain, "{line}");
        }
        for line in [
            "ls &",
            "(ls)",
            "{ ls; }",
            "X=1 ls",
            "! ls",
            "ls; if true; then ls; fi",
            "f() { ls; }",
            "cat <<< x",
            "[[ -f x ]]",
            "ls |& cat",
            // Where the grammar and the shells disagree on a descriptor:
            // bash runs `ls -l` with stdin from /dev/null, `echo a 2` in
            // the background, and wraps 4294967296 to descriptor 0; dash
            // takes `10` for an argument.
            "ls -l 0</dev/null",
            "echo a 2&>/dev/null",
            "cat 4294967296</etc/hosts",
            "echo a 10>/dev/null",
            "echo a {fd}>/dev/null",
        ] {
            assert!(!parse(line).plain, "{line}");
        }
        assert!(parse("echo a\"b\"c").plain);
    }

    #[test]
    fn plain_lines_quoted_word_by_word() {
        assert_eq!(
            parse("ps aux | grep -i 'a b' && df -h 2>/dev/null; uptime 2>&1")
                .quoted
                .as_deref(),
            Some("'ps' 'aux' | 'grep' '-i' 'a b' && 'df' '-h' 2>'/dev/null' ; 'uptime' 2>&1")
        );
        assert_eq!(parse("echo $HOME").quoted, None);
        assert_eq!(parse("(ls)").quoted, None);
        // A rendering is kept only if it reads back the same.
        let far = Instant::now() + std::time::Duration::from_secs(1);
        let script = parse("echo a 2>/dev/null");
        assert!(reads_alike(&script, "'echo' 'a' 2>'/dev/null'", far));
        assert!(!reads_alike(&script, "'echo' 'a' '2' >'/dev/null'", far));
        assert!(!reads_alike(&script, "'echo' 'a' 2>'/dev/null' &", far));
    }

    #[test]
    fn redirections_are_seen() {
        let s = parse("cat /etc/hosts > /tmp/x 2>&1");
        assert_eq!(s.redirects.len(), 2);
        assert!(s.redirects[0].writes());
        assert_eq!(s.redirects[0].target.as_ref().unwrap().text(), "/tmp/x");
        assert!(s.redirects[1].duplicates());
        let s = parse("{ ls; } > /etc/shadow");
        assert_eq!(
            s.redirects[0].target.as_ref().unwrap().text(),
            "/etc/shadow"
        );
    }

    #[test]
    fn what_cannot_be_read_is_unknown() {
        for line in ["echo 'unclosed", "echo $(ls", "if true; then", "ls )"] {
            assert!(parse(line).unknown.is_some(), "{line}");
        }
        assert!(parse("ls -la /var/log").unknown.is_none());
    }

    #[test]
    fn fork_bombs_by_structure() {
        for line in [
            ":(){ :|:& };:",
            "f(){ f|f& };f",
            "bomb() { bomb | bomb & }; bomb",
        ] {
            let s = parse(line);
            assert!(
                s.functions.iter().any(|(name, calls)| calls.contains(name)),
                "{line}: {s:?}"
            );
        }
    }

    #[test]
    fn lines_that_looped_the_old_lexer_end() {
        for line in ["case x in a) ls;; esac", "ls\u{a0}-la", "ls )", "a)b"] {
            let _ = parse(line);
        }
    }

    /// Found by the fuzzer: reading each function's body again for every
    /// enclosing function took exponential time.
    #[test]
    fn nested_function_definitions_are_read_once() {
        let line = "f(){ ".repeat(400) + "ls;" + &" };".repeat(400);
        assert_eq!(parse(&line).functions.len(), 400);
        let line = "f()(".repeat(400) + "ls" + &")".repeat(400);
        assert_eq!(parse(&line).functions.len(), 400);
    }

    /// Substitutions nested up to the bound are read, every command of
    /// them; one deeper and the line is not understood (each level keeps
    /// the text of all below it: the bound keeps reading linear). Side by
    /// side, any number is read.
    #[test]
    fn substitutions_nest_to_a_bound() {
        let nest = |depth: usize, open: &str, close: &str| {
            format!("echo {}id{}", open.repeat(depth), close.repeat(depth))
        };
        for (open, close) in [("$(echo ", ")"), ("<(echo ", ")"), ("\"$(echo ", ")\"")] {
            let s = parse(&nest(MAX_SUBSTITUTIONS, open, close));
            assert_eq!(s.unknown, None, "{open}");
            assert_eq!(s.commands.len(), MAX_SUBSTITUTIONS + 1, "{open}");
            let s = parse(&nest(MAX_SUBSTITUTIONS + 1, open, close));
            assert!(
                s.unknown.is_some_and(|u| u.contains("nest deeper")),
                "{open}"
            );
        }
        let side = "echo $(id); ".repeat(100);
        let s = parse(&side);
        assert_eq!((s.unknown, s.commands.len()), (None, 200));
    }

    #[test]
    fn deep_nesting_ends() {
        let line = "$(".repeat(3000) + &")".repeat(3000);
        let s = parse(&line);
        assert_eq!(s.quoted, None);
        let line = "true && ".repeat(2000) + "true";
        assert_eq!(parse(&line).commands.len(), 2001);
    }
}
