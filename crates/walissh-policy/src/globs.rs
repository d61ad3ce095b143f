//! Globs over the commands a line runs (`[ai] four_eyes`): whether a
//! line may run a command one names, read with the policy's own parser.
//!
//! A line matches when the line as written does; or a command the parser
//! sees in it, wrappers taken off (`sudo -u root systemctl restart nginx`
//! runs `systemctl restart nginx`): its program by its last path
//! component, and the glob's later words found in its words in order,
//! whatever comes between (`systemctl -q restart nginx`, `kubectl -n prod
//! delete pod x`). Where it cannot be sure the line does not, it matches:
//!
//! - a line the parser cannot read or see through;
//! - a command of a glob's program with a word only the shell knows
//!   (`systemctl $ACTION nginx`), or whose program only the shell knows;
//! - a glob's program named anywhere else in the line than as a command
//!   the parser sees (`python3 -c 'os.system("systemctl restart x")'`,
//!   `ssh -o ProxyCommand='systemctl …'`, `cp /usr/bin/systemctl /tmp/x`);
//! - a program that runs code the parser does not read (an interpreter, a
//!   shell given a script file, the dynamic loader, a program that takes
//!   a command in an option or a file), or one given by a path outside
//!   the system's program directories.
//!
//! What it leaves to others: which commands the globs name (the config),
//! what happens to a line that matches (the agent's four-eyes).

use super::word::Word;
use super::wrappers;

/// Globs over the commands a line runs; see the module's documentation.
#[derive(Clone, Debug, Default)]
pub struct Globs(Vec<Glob>);

#[derive(Clone, Debug)]
struct Glob {
    /// The whole glob, over the line or a command as written.
    whole: glob::Pattern,
    /// Its first word, over a command's program.
    program: glob::Pattern,
    /// The first word when it has no glob characters: the name looked for
    /// elsewhere in the line.
    name: Option<String>,
    /// Its later words but `*`, found in order among a command's words.
    words: Vec<glob::Pattern>,
}

/// Programs that run code walissh's parser does not read: interpreters,
/// programs that take a command in an option, a file or a hook, and the
/// dynamic loader. A shell is one when given a script file.
const RUNS_CODE: &[&str] = &[
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "expect",
    "Rscript",
    "julia",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "sed",
    "gdb",
    "make",
    "ssh",
    "scp",
    "sftp",
    "git",
    "rsync",
    "zip",
    "tar",
    "crontab",
    "at",
    "batch",
    "systemd-run",
    "script",
    "parallel",
    "vim",
    "vi",
    "nvim",
    "ex",
    "emacs",
    "source",
    ".",
    "ld.so",
];

/// Shells: code runners when given a script file.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "yash", "fish", "csh", "tcsh",
];

/// Where a program given by its path is one of the system's own.
const PROGRAM_DIRS: &[&str] = &[
    "/usr/bin/",
    "/bin/",
    "/usr/sbin/",
    "/sbin/",
    "/usr/local/bin/",
    "/usr/local/sbin/",
];

impl Globs {
    /// Compiles `globs`; Err names the first that is not a glob.
    pub fn new(globs: &[String]) -> Result<Globs, String> {
        globs
            .iter()
            .map(|g| Glob::new(g.trim()))
            .collect::<Result<_, _>>()
            .map(Globs)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `line` may run a command a glob names (see the module).
    pub fn matches(&self, line: &str) -> bool {
        if self.0.is_empty() {
            return false;
        }
        if self.0.iter().any(|g| g.whole.matches(line.trim())) {
            return true;
        }
        let seen = wrappers::see(line);
        if seen.opaque.is_some() || seen.unknown.is_some() || seen.script.gave_up {
            return true;
        }
        if seen
            .runs
            .iter()
            .any(|run| self.run_matches(run) || runs_code(run))
        {
            return true;
        }
        self.named_elsewhere(line, &seen.runs)
    }

    fn run_matches(&self, run: &[Word]) -> bool {
        let Some(first) = run.first() else {
            return false;
        };
        // A program only the shell knows may be any.
        if first.lit.is_none() {
            return true;
        }
        let program = program_name(first.text());
        let literal = run.iter().all(|w| w.lit.is_some());
        let words: Vec<&str> = run[1..].iter().map(Word::text).collect();
        let text = std::iter::once(program)
            .chain(words.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        self.0.iter().any(|g| {
            g.whole.matches(&text)
                || (g.program.matches(program) && (!literal || g.in_order(&words)))
        })
    }

    /// A glob's program appears in the line more often than as a command
    /// the parser sees: something else names it (code, an option, a
    /// copy), and may run it.
    fn named_elsewhere(&self, line: &str, runs: &[Vec<Word>]) -> bool {
        self.0.iter().filter_map(|g| g.name.as_deref()).any(|name| {
            let named = tokens(line).filter(|t| *t == name).count();
            let run = runs
                .iter()
                .filter(|r| r.first().is_some_and(|w| program_name(w.text()) == name))
                .count();
            named > run
        })
    }
}

impl Glob {
    fn new(text: &str) -> Result<Glob, String> {
        let bad = |e: glob::PatternError| format!("{text:?}: {e}");
        let whole = glob::Pattern::new(text).map_err(bad)?;
        let mut parts = text.split_whitespace();
        let head = parts.next().unwrap_or("*");
        let program = glob::Pattern::new(head).map_err(bad)?;
        let name = (!head.contains(['*', '?', '[', ']'])).then(|| head.to_string());
        let words = parts
            .filter(|w| *w != "*")
            .map(glob::Pattern::new)
            .collect::<Result<_, _>>()
            .map_err(bad)?;
        Ok(Glob {
            whole,
            program,
            name,
            words,
        })
    }

    /// Whether the glob's later words are among `words`, in order.
    fn in_order(&self, words: &[&str]) -> bool {
        let mut rest = words.iter();
        self.words.iter().all(|p| rest.any(|w| p.matches(w)))
    }
}

/// A program's name: its last path component.
fn program_name(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text)
}

/// The words of `line` a program's name could be: runs of letters,
/// digits, `_`, `-`, `.` and `+`.
fn tokens(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+')))
        .filter(|t| !t.is_empty())
}

/// Whether `run` runs code the parser does not read, or a program it
/// cannot place (see [`RUNS_CODE`], [`SHELLS`], [`PROGRAM_DIRS`]).
fn runs_code(run: &[Word]) -> bool {
    let Some(first) = run.first() else {
        return false;
    };
    let text = first.text();
    let name = program_name(text);
    let interpreter = {
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        RUNS_CODE.contains(&name) || RUNS_CODE.contains(&base)
    };
    let loader = name.starts_with("ld-") || name.starts_with("ld.so");
    let script = SHELLS.contains(&name) && run[1..].iter().any(|w| !w.text().starts_with('-'));
    let placed = !text.contains('/') || PROGRAM_DIRS.iter().any(|d| text.starts_with(d));
    interpreter || loader || script || !placed
}
