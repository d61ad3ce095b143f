//! What a line does to the interactive shell it is typed into: the state
//! a command the user approves can change for every later line of the
//! session, beyond what it runs.
//!
//! Two answers. [`denied`]: changes that would turn walissh's own shell
//! integration off or against the user (prompt hooks, `TMOUT`, history
//! files, start-up files, preloads, key bindings, the integration's own
//! `__ws_*` state, hook functions), and lines that list or look up
//! variables by computed names (the integration's nonce is a variable).
//! [`changes`]: one line for the `Run?` prompt saying what else the line
//! changes (variables, history, traps, options, aliases).
//!
//! Assignments hide in many places: `NAME=v`, `${NAME:=v}`, arithmetic
//! anywhere (`$((NAME=1))`, `${a[NAME=1]}`, `let`, `((…))`), builtins
//! that take a name (`read NAME`, `printf -v NAME`, `declare -n r=NAME`,
//! `unset NAME`), `for NAME in`. So the protected names are looked for in
//! the line's text, not in its parse: any occurrence that is not a plain
//! `$NAME` read and stands next to an assignment operator, or is a name
//! given to such a builtin, is refused. Text in single quotes is literal
//! to the shell and skipped, unless the line has a here-document or a
//! quote left open (then nothing is skipped). It errs towards refusing:
//! `grep TMOUT= /etc/profile` is refused, `grep 'TMOUT=' /etc/profile` is
//! not. What it leaves to others: reading the commands (`wrappers`), and
//! everything that is not shell state (`deny`, `auto`).

use super::wrappers::{HOOKS, Seen, basename};

/// Variables no line the agent runs may set, besides the hooks the
/// shell runs later (`wrappers::HOOKS`: prompt commands, prompts, start-up
/// files, zsh's hook arrays): the idle logout, the history file and
/// characters, zsh's rc directory, preloads, the other prompts.
const PROTECTED: &[&str] = &[
    "TMOUT",
    "HISTFILE",
    "histchars",
    "HISTCHARS",
    "ZDOTDIR",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PROMPT2",
    "PROMPT3",
    "PROMPT4",
    "RPS2",
    "zshexit_functions",
];

/// `name` if no line the agent runs may set it.
fn protected(name: &str) -> Option<&'static str> {
    PROTECTED.iter().chain(HOOKS).find(|p| **p == name).copied()
}

/// The integration's own names start so (`terminal::bootstrap`).
const INTEGRATION: &str = "__ws_";

/// Functions the shell runs by itself once defined.
const HOOK_FUNCTIONS: &[&str] = &[
    "precmd",
    "preexec",
    "chpwd",
    "periodic",
    "zshaddhistory",
    "zshexit",
    "command_not_found_handle",
    "command_not_found_handler",
];

/// Builtins whose arguments name variables they set, export or unset.
const NAME_TAKING: &[&str] = &[
    "read",
    "mapfile",
    "readarray",
    "getopts",
    "unset",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "let",
    "wait",
    "vared",
    "print",
    "printf",
    "zparseopts",
    "integer",
    "float",
    "coproc",
];

/// Builtins that print every variable (and so the integration's nonce)
/// when given no name.
const LISTING: &[&str] = &["set", "declare", "typeset", "local", "readonly", "export"];

/// Operators that assign to the name before them.
const ASSIGNING: &[&str] = &[
    "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", ":=", "++", "--",
];

/// Why the line may not run in the user's shell, if it may not.
pub(super) fn denied(line: &str, seen: &Seen) -> Option<String> {
    // The line, and every script it hands a shell (`eval 'TMOUT=1'`,
    // `command eval …`): text the grammar saw as one quoted word.
    if let Some(why) = std::iter::once(line)
        .chain(seen.inner_scripts())
        .find_map(text_denied)
    {
        return Some(why);
    }
    for run in &seen.runs {
        if let Some(why) = run_denied(run) {
            return Some(why);
        }
    }
    for (name, _) in &seen.functions {
        if HOOK_FUNCTIONS.contains(&name.as_str()) || name.starts_with("TRAP") {
            return Some(format!(
                "it defines {name}, which the shell runs by itself at every prompt or command"
            ));
        }
    }
    None
}

/// Words brace ranges may make at most before a line is refused.
const MAX_BRACE_WORDS: u128 = 100_000;

/// The words the line's `{a..b}` ranges make together, at most: their
/// sizes multiplied (`{1..9999}{1..99}` makes 989,901). `None` without
/// ranges. Each `{` is looked at over 64 bytes at most: linear.
fn brace_words(text: &str) -> Option<u128> {
    let mut product: Option<u128> = None;
    for (open, _) in text.match_indices('{') {
        let rest = &text[open + 1..];
        let Some(close) = rest.bytes().take(64).position(|b| b == b'}') else {
            continue;
        };
        let body = &rest[..close];
        if !body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        {
            continue;
        }
        let mut ends = body.split("..");
        let (Some(a), Some(b)) = (ends.next(), ends.next()) else {
            continue;
        };
        let size = match (a.parse::<i128>(), b.parse::<i128>()) {
            (Ok(a), Ok(b)) => (a - b).unsigned_abs() + 1,
            _ if a.len() == 1 && b.len() == 1 => 128,
            // Numbers too long to read: as big as it gets.
            _ => u128::MAX / 2,
        };
        product = Some(product.unwrap_or(1).saturating_mul(size.max(1)));
    }
    product
}

/// Prompts, which hold walissh's marks (with the nonce itself in zsh):
/// never expanded by a line the agent runs.
const PROMPTS: &[&str] = &["PS0", "PS1", "PROMPT", "RPROMPT", "RPS1"];

/// A prompt the text expands: `$PS1`, `${PS1…}`, `${#PS1}`, zsh's
/// `${(%)PS1}`.
fn prompt_read(text: &str) -> Option<&'static str> {
    idents(text).find_map(|(at, name)| {
        let prompt = *PROMPTS.iter().find(|p| **p == name)?;
        let before = &text[..at];
        let expanded = before.ends_with('$')
            || before.ends_with("${")
            || before.ends_with("${#")
            || (before.ends_with(')') && before.contains("${("));
        expanded.then_some(prompt)
    })
}

/// What [`denied`] refuses in a script's text.
fn text_denied(line: &str) -> Option<String> {
    let bare = super::bare(line);
    if line.contains(INTEGRATION) || bare.contains(INTEGRATION) {
        return Some(
            "it names walissh's shell integration (`__ws_…`), which lines the agent runs leave alone"
                .into(),
        );
    }
    if let Some(how) = [line, bare.as_str()].into_iter().find_map(computed_names) {
        return Some(format!(
            "it looks variables up by names computed as it runs (`{how}`)"
        ));
    }
    if let Some(name) = [line, bare.as_str()].into_iter().find_map(prompt_read) {
        return Some(format!(
            "it expands {name}, which holds walissh's marks and their nonce"
        ));
    }
    let text = scannable(line);
    if let Some(words) = brace_words(&text).filter(|n| *n > MAX_BRACE_WORDS) {
        return Some(format!(
            "its brace expansions make about {words} words, enough to exhaust the shell's memory"
        ));
    }
    assigned_in_text(&text)
        .map(|name| format!("it may set {name}, which walissh and the shell rely on"))
}

/// Expansions that reach variables by computed names: bash's `${!name}`
/// and `${!prefix*}`, zsh's `(P)` flag and `$parameters` table.
fn computed_names(text: &str) -> Option<&'static str> {
    if text.contains("${!") {
        return Some("${!…}");
    }
    for (at, _) in text.match_indices("${(") {
        // zsh's flags are a few letters: 64 bytes bound the look, so a
        // line of `${(` costs linear time.
        let rest = &text[at + 3..];
        let window = &rest[..rest.floor_char_boundary(64)];
        let flags = &window[..window.find(')').unwrap_or(window.len())];
        if flags.contains('P') {
            return Some("${(P)…}");
        }
    }
    ["$parameters", "${parameters", ")parameters"]
        .iter()
        .any(|p| text.contains(p))
        .then_some("$parameters")
}

fn run_denied(run: &[super::word::Word]) -> Option<String> {
    let program = basename(run.first()?.lit.as_deref()?);
    let args = &run[1..];
    if NAME_TAKING.contains(&program) {
        // Also the arguments run together: a word the grammar splits
        // where bash does not (`declare T''MOUT=1`) is one name to bash.
        let joined: String = args
            .iter()
            .map(|w| w.text())
            .filter(|t| !t.starts_with('-'))
            .collect();
        for text in args.iter().map(|w| w.text()).chain([joined.as_str()]) {
            if let Some(name) = named(text) {
                return Some(format!(
                    "{program} would change {name}, which walissh and the shell rely on"
                ));
            }
        }
    }
    if LISTING.contains(&program)
        && args.iter().all(|w| w.text().starts_with(['-', '+']))
        && (!matches!(program, "export" | "set") || args.is_empty())
    {
        return Some(format!(
            "{program} without a name prints every shell variable, walissh's own included"
        ));
    }
    // A DEBUG or RETURN trap runs before each of the user's commands, an
    // ERR trap after each that fails: hooks like PROMPT_COMMAND.
    if program == "trap"
        && args.iter().skip(1).any(|w| {
            matches!(
                w.text().trim_start_matches("SIG"),
                "DEBUG" | "RETURN" | "ERR" | "ZERR"
            )
        })
    {
        return Some("trap would run code around each of your commands".into());
    }
    if program == "compgen" {
        return Some("compgen lists the shell's names, walissh's own included".into());
    }
    let listing_only = |allowed: &[&str]| args.iter().all(|w| allowed.contains(&w.text()));
    let binds = match program {
        "bind" => !listing_only(&["-p", "-P", "-l", "-v", "-V", "-s", "-S", "-X"]),
        "bindkey" => !listing_only(&["-L", "-l"]),
        "zle" => !listing_only(&["-l", "-L"]),
        _ => false,
    };
    binds.then(|| {
        format!("{program} changes key bindings, which walissh's shell integration relies on")
    })
}

/// A protected name in `word` that is not a plain `$NAME` read.
fn named(word: &str) -> Option<&'static str> {
    idents(word).find_map(|(at, name)| {
        let protected = protected(name)?;
        let read = word[..at].ends_with('$');
        (!read).then_some(protected)
    })
}

/// A protected name the text may assign: next to an assignment
/// operator, after `for`/`select`, or in `${NAME=…}`/`${NAME:=…}`.
fn assigned_in_text(text: &str) -> Option<&'static str> {
    idents(text).find_map(|(at, name)| {
        let protected = protected(name)?;
        let before = &text[..at];
        if before.ends_with('$') {
            return None;
        }
        let after = skip_subscript(text[at + name.len()..].trim_start());
        let assigns = ASSIGNING.iter().any(|op| after.starts_with(op))
            || before.trim_end().ends_with("++")
            || before.trim_end().ends_with("--")
            || ["for", "select"]
                .iter()
                .any(|kw| last_word(before) == Some(kw));
        assigns.then_some(protected)
    })
}

/// The text after a `[…]` subscript at the start of `s`; all of `s`
/// without one. An unclosed subscript leaves nothing after it.
fn skip_subscript(s: &str) -> &str {
    if !s.starts_with('[') {
        return s;
    }
    match s.find(']') {
        Some(end) => s[end + 1..].trim_start(),
        None => "=",
    }
}

fn last_word(before: &str) -> Option<&str> {
    before
        .trim_end()
        .rsplit(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | '{'))
        .next()
}

/// Identifiers in `text` (`[A-Za-z_][A-Za-z0-9_]*`, not inside a longer
/// word of such characters), with their byte offsets.
fn idents(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            if ident(bytes[i]) && (i == 0 || !ident(bytes[i - 1])) {
                let start = i;
                while i < bytes.len() && ident(bytes[i]) {
                    i += 1;
                }
                if !bytes[start].is_ascii_digit() {
                    return Some((start, &text[start..i]));
                }
            } else {
                i += 1;
            }
        }
        None
    })
}

/// The line with the bodies of its single-quoted strings (`'…'`, `$'…'`)
/// taken out: text the shell never expands nor assigns from. A line with
/// a here-document (whose body quotes mean nothing) or a quote left open
/// is returned whole. Comments are kept, their quotes ignored.
fn scannable(line: &str) -> String {
    #[derive(PartialEq)]
    enum Q {
        Normal,
        Single,
        Ansi,
        Double,
        Comment,
    }
    if line.contains("<<") {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len());
    let mut q = Q::Normal;
    let mut chars = line.chars().peekable();
    let mut word_start = true;
    while let Some(c) = chars.next() {
        match q {
            Q::Normal => match c {
                '\\' => {
                    out.push(c);
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                }
                '\'' => {
                    q = Q::Single;
                    out.push(' ');
                }
                '$' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    q = Q::Ansi;
                    out.push(' ');
                }
                '"' => {
                    q = Q::Double;
                    out.push(' ');
                }
                '#' if word_start => {
                    q = Q::Comment;
                    out.push(c);
                }
                _ => out.push(c),
            },
            Q::Single => {
                if c == '\'' {
                    q = Q::Normal;
                    out.push(' ');
                }
            }
            Q::Ansi => match c {
                '\\' => {
                    chars.next();
                }
                '\'' => {
                    q = Q::Normal;
                    out.push(' ');
                }
                _ => {}
            },
            Q::Double => match c {
                '\\' => {
                    out.push(c);
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                }
                '"' => {
                    q = Q::Normal;
                    out.push(' ');
                }
                _ => out.push(c),
            },
            Q::Comment => {
                if c == '\n' {
                    q = Q::Normal;
                }
                out.push(c);
            }
        }
        word_start = c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '{' | '}');
    }
    if matches!(q, Q::Single | Q::Ansi | Q::Double) {
        return line.to_string();
    }
    out
}

/// One line for the `Run?` prompt: what the line changes in the user's
/// shell besides what it runs, if anything.
pub(super) fn changes(line: &str, seen: &Seen) -> Option<String> {
    let mut set: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        if !set.iter().any(|s| s == name) && set.len() < 8 {
            set.push(name.to_string());
        }
    };
    for (name, _) in &seen.script.assignments {
        add(name.split('[').next().unwrap_or(name));
    }
    let text = scannable(line);
    // Where arithmetic may first start: looked for once, not per name.
    let arith_from = text.find("((").unwrap_or(usize::MAX);
    for (at, name) in idents(&text) {
        let after = skip_subscript(text[at + name.len()..].trim_start());
        let expansion =
            text[..at].ends_with("${") && (after.starts_with('=') || after.starts_with(":="));
        let arithmetic = at > arith_from
            && !text[..at].ends_with('$')
            && ASSIGNING
                .iter()
                .any(|op| after.starts_with(op) && !after.starts_with("=="));
        if expansion || arithmetic {
            add(name);
        }
    }
    let mut what: Vec<String> = Vec::new();
    let mut note = |s: &str| {
        if !what.iter().any(|w| w == s) {
            what.push(s.to_string());
        }
    };
    for run in &seen.runs {
        let Some(program) = run.first().and_then(|w| w.lit.as_deref()).map(basename) else {
            continue;
        };
        let args: Vec<&str> = run[1..].iter().map(|w| w.text()).collect();
        let options_only = args.iter().all(|a| a.starts_with(['-', '+']));
        match program {
            _ if NAME_TAKING.contains(&program) && program != "printf" && program != "print" => {
                for a in args.iter().filter(|a| !a.starts_with(['-', '+'])) {
                    let name = a.split(['=', '[']).next().unwrap_or(a);
                    if idents(name)
                        .next()
                        .is_some_and(|(at, n)| at == 0 && n == name)
                    {
                        add(name);
                    }
                }
            }
            "history" if !args.is_empty() => note("changes its history"),
            "trap" if !args.is_empty() && !options_only => note("sets a trap"),
            "set" | "shopt" | "setopt" | "unsetopt" | "emulate" => note("changes its options"),
            "umask" | "ulimit" if !args.is_empty() && args != ["-a"] => {
                note("changes its limits or file mode")
            }
            "alias" | "unalias" if !args.is_empty() => note("changes its aliases"),
            // Where the user's next commands run.
            "cd" | "pushd" | "popd" | "chdir" => note("changes its directory"),
            "enable" | "disable" | "hash" if !args.is_empty() => note("changes its commands"),
            _ => {}
        }
    }
    if !seen.functions.is_empty() {
        note("defines functions");
    }
    if set.iter().any(|s| s.starts_with("HIST") || s == "SAVEHIST") {
        note("changes its history");
    }
    if !set.is_empty() {
        what.insert(0, format!("sets {}", set.join(", ")));
    }
    (!what.is_empty()).then(|| format!("changes your shell: {}", what.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrappers::see;

    fn refused(line: &str) -> bool {
        denied(line, &see(line)).is_some()
    }

    #[test]
    fn protected_names_are_never_set() {
        for line in [
            "TMOUT=1",
            "export HISTFILE=/root/.bash_history",
            "echo ${TMOUT:=1}",
            "echo \"${a[TMOUT=1]}\"",
            "echo $(( TMOUT = 1 ))",
            "(( TMOUT++ ))",
            "let 'TMOUT=1'",
            "read TMOUT",
            "read -r 'a[TMOUT=1]'",
            "printf -v PS1 x",
            "unset PROMPT_COMMAND",
            "declare -n r=TMOUT",
            "for TMOUT in 1; do :; done",
            "echo ${PROMPT_COMMAND[9]:=reboot}",
            "histchars='^#'",
            "LD_PRELOAD=/tmp/x.so ls",
            "precmd_functions+=(x)",
            "ls # it's\necho $((TMOUT=1))",
            "cat <<EOF\nit's $((TMOUT=1))\nEOF",
            "echo \"'$((TMOUT=1))'\"",
            "eval 'TMOUT=1'",
            "eval 'echo $((TMOUT=1))'",
            "command eval 'HISTFILE=/x'",
            "declare T''MOUT=1",
            "trap 'ls' DEBUG",
            "echo {1..99999999}{1..99}",
            "echo {1..999}{1..999}",
        ] {
            assert!(refused(line), "{line:?}");
        }
    }

    #[test]
    fn the_integration_and_computed_names_are_out_of_reach() {
        for line in [
            "echo $__ws_n",
            "printf '%s' \"$__w's'_n\"",
            "echo ${a[__ws_n=0]}",
            "echo ${!__w*}",
            "v=__ws; echo ${!v}",
            "print -l ${(k)parameters}",
            "set",
            "declare -p",
            "typeset",
            "compgen -v",
            "bind -x '\"\\C-m\": ls'",
            "bindkey '^M' accept-line",
            "precmd() { ls; }",
            "TRAPDEBUG() { ls; }",
            "__ws_d() { :; }",
            "echo \"$PS1\"",
            "print -r -- ${(%)PROMPT}",
            "echo ${#PS1}",
        ] {
            assert!(refused(line), "{line:?}");
        }
    }

    #[test]
    fn reading_and_ordinary_lines_pass() {
        for line in [
            "echo $TMOUT $PS2 ${HISTFILE}",
            "grep PS1 /etc/bash.bashrc",
            "grep 'TMOUT=' /etc/profile",
            "grep -r PROMPT_COMMAND /etc/bash.bashrc",
            "ls -la /tmp",
            "export LANG=C",
            "set -o | grep vi",
            "bind -p",
            "declare -p HOME",
            "x=1; echo $((x+1))",
            "echo {1..10} {a..z}",
            "trap 'rm -f /tmp/x' EXIT",
            "{ cd ..; ls; }",
            "ls ../.. {a,b}",
        ] {
            assert!(!refused(line), "{line:?}: {:?}", denied(line, &see(line)));
        }
    }

    #[test]
    fn the_prompt_says_what_changes() {
        let note = |line: &str| changes(line, &see(line));
        assert_eq!(note("ls -la"), None);
        assert_eq!(note("x=1"), Some("changes your shell: sets x".into()));
        assert_eq!(
            note("export FOO=1; echo ${BAR:=2} $((BAZ=3))"),
            Some("changes your shell: sets FOO, BAR, BAZ".into())
        );
        assert_eq!(
            note("history -c; trap 'echo bye' EXIT; shopt -s extglob"),
            Some(
                "changes your shell: changes its history; sets a trap; changes its options".into()
            )
        );
        assert_eq!(
            note("read line < /etc/hostname"),
            Some("changes your shell: sets line".into())
        );
        for line in ["cd /etc", "pushd /var/log && ls", "popd", "cd"] {
            assert_eq!(
                note(line),
                Some("changes your shell: changes its directory".into()),
                "{line}"
            );
        }
        // In a subshell it changes nothing, but is named all the same, as
        // the other changes are: the prompt says too much, never too
        // little.
        assert!(note("(cd /etc && ls)").is_some());
    }
}
