//! What a line really runs: every simple command with the wrappers taken
//! off by each wrapper's own option grammar (`sudo -u root rm` runs `rm`,
//! `env -S 'rm -rf /'` runs `rm`, `find / -exec rm -rf {} +` runs `rm` on
//! `/`), the scripts of `sh -c`, `su -c`, `eval` and the like read in
//! turn, and `busybox`/`toybox` applets named. A line whose program is
//! not a literal, or that runs text that is not one (`eval "$X"`, `curl
//! … | sh`), cannot be seen through: [`see`] says why, and the policy
//! refuses it in every mode. What it leaves to others: what is denied
//! (`deny`) or allowed (`auto`).

use super::getopt::Spec;
use super::parse::{self, Redirect, Script};
use super::word::Word;

mod programs;
mod table;

pub(super) use programs::HOOKS;
pub(crate) use programs::find_roots;
use programs::*;

/// Everything a line runs, as far as walissh can tell.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// The line's own reading.
    pub(crate) script: Script,
    /// Every command it runs: the line's commands as written, then each
    /// inner command a wrapper or script runs, wrappers taken off.
    pub(crate) runs: Vec<Vec<Word>>,
    /// Redirections of inner scripts too.
    pub(crate) redirects: Vec<Redirect>,
    /// Functions defined anywhere, and whether they call themselves.
    pub(crate) functions: Vec<(String, Vec<String>)>,
    /// Why walissh cannot say what the line would run, if it cannot.
    pub(crate) opaque: Option<String>,
    /// Something inside could not be read (an inner script with a syntax
    /// error): never auto-run.
    pub(crate) unknown: Option<String>,
    /// Words left to read: a bound on the work a hostile line can cause
    /// (wrappers whose options fail are read at every later word).
    budget: usize,
    /// When reading must be done: one deadline for every parse of the
    /// line (wrappers whose options fail make their inner script read once
    /// per guess), so a hostile line costs a bounded time.
    deadline: Option<std::time::Instant>,
    /// Inner scripts already read, by text.
    read: std::collections::HashMap<String, Script>,
}

impl Seen {
    /// The text of every inner script the line hands a shell (`eval`,
    /// `sh -c`, hooks), as read.
    pub(crate) fn inner_scripts(&self) -> impl Iterator<Item = &str> {
        self.read.keys().map(String::as_str)
    }
}

/// The time one check may spend reading a line and its inner scripts.
const READ_BUDGET: std::time::Duration = std::time::Duration::from_millis(400);

/// Words read at most, over every command a line runs.
const WORD_BUDGET: usize = 1 << 16;

/// How deep `sh -c "sh -c '…'"` may nest before walissh stops reading.
const MAX_DEPTH: usize = 4;

/// Reads `line` and everything it runs.
pub(crate) fn see(line: &str) -> Seen {
    let deadline = std::time::Instant::now() + READ_BUDGET;
    let script = parse::parse_until(line, deadline);
    let mut seen = Seen {
        budget: WORD_BUDGET,
        deadline: Some(deadline),
        ..Seen::default()
    };
    absorb(&script, &mut seen, 0);
    seen.script = script;
    seen
}

fn absorb(script: &Script, seen: &mut Seen, depth: usize) {
    if script.gave_up {
        seen.opaque
            .get_or_insert_with(|| "it took too long to read".into());
    }
    if let Some(why) = &script.unknown {
        seen.unknown.get_or_insert_with(|| why.clone());
    }
    seen.redirects.extend(script.redirects.iter().cloned());
    seen.functions.extend(script.functions.iter().cloned());
    for (name, value) in &script.assignments {
        match hook(name, value) {
            Some(Inner::Script(text)) => read_inner(&text, seen, depth),
            Some(Inner::Opaque(why)) => {
                seen.opaque.get_or_insert(why);
            }
            _ => {}
        }
    }
    for command in &script.commands {
        let defined = |name: &str| script.functions.iter().any(|(f, _)| f == name);
        run(&command.words, seen, depth, &defined);
    }
}

/// Takes in one command and, recursively, what it runs.
fn run(words: &[Word], seen: &mut Seen, depth: usize, defined: &dyn Fn(&str) -> bool) {
    let Some(first) = words.first() else {
        return;
    };
    let Some(program) = first.lit.as_deref() else {
        seen.opaque.get_or_insert_with(|| {
            format!(
                "its command name `{}` is not a literal: walissh cannot say what it would run",
                first.raw
            )
        });
        return;
    };
    if words.len() > seen.budget {
        seen.opaque
            .get_or_insert_with(|| "it holds too many commands to read".into());
        return;
    }
    seen.budget -= words.len();
    seen.runs.push(words.to_vec());
    if depth > MAX_DEPTH {
        seen.opaque
            .get_or_insert_with(|| "it nests commands too deep to read".into());
        return;
    }
    // A function the line defines runs its body, which is read already.
    if defined(program) {
        return;
    }
    match inner(basename(program), &words[1..]) {
        Inner::None => {}
        Inner::Argv(argvs) => {
            for argv in argvs {
                run(&argv, seen, depth + 1, defined);
            }
        }
        Inner::Script(text) => read_inner(&text, seen, depth),
        Inner::Scripts(texts) => {
            for text in texts {
                read_inner(&text, seen, depth);
            }
        }
        Inner::Opaque(why) => {
            seen.opaque.get_or_insert(why);
        }
        Inner::Unsure(candidates) => {
            // The wrapper's options could not be read: every later word
            // that could be the program is taken as one.
            for argv in candidates {
                if argv.first().is_some_and(|w| w.lit.is_some()) {
                    run(&argv, seen, depth + 1, defined);
                }
            }
        }
    }
}

/// Reads an inner script once (a second guess at the same wrapper reads
/// the same text) and takes in what it runs.
fn read_inner(text: &str, seen: &mut Seen, depth: usize) {
    let deadline = seen
        .deadline
        .unwrap_or_else(|| std::time::Instant::now() + READ_BUDGET);
    if seen.read.contains_key(text) {
        return;
    }
    let script = parse::parse_until(text, deadline);
    absorb(&script, seen, depth + 1);
    seen.read.insert(text.to_string(), script);
}

pub(crate) fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// What a command runs besides itself.
enum Inner {
    None,
    Argv(Vec<Vec<Word>>),
    Script(String),
    /// Texts the shell evaluates later or on the side: `alias` values,
    /// array subscripts in variable names.
    Scripts(Vec<String>),
    Opaque(String),
    /// Its options could not be read: these are the possible programs.
    Unsure(Vec<Vec<Word>>),
}

fn values(args: &[Word]) -> Vec<&str> {
    // A non-literal argument keeps its text: the grammar below still
    // finds the program after it, and a non-literal program is refused.
    args.iter().map(|w| w.text()).collect()
}

/// Every suffix of `args`: the programs a wrapper whose grammar failed
/// might run.
fn suffixes(args: &[Word]) -> Inner {
    let starts: Vec<usize> = (0..args.len())
        .filter(|&i| args[i].lit.as_deref().is_some_and(|v| !v.starts_with('-')))
        .collect();
    if starts.len() > MAX_GUESSES || args.iter().any(|w| w.lit.is_none()) {
        return Inner::Opaque("a wrapper's options could not be read".into());
    }
    Inner::Unsure(starts.into_iter().map(|i| args[i..].to_vec()).collect())
}

/// Programs guessed at most behind one wrapper whose options failed.
const MAX_GUESSES: usize = 32;

/// The command a wrapper runs: `args` from `at` on, or nothing.
fn from(args: &[Word], at: usize) -> Inner {
    if at < args.len() {
        Inner::Argv(vec![args[at..].to_vec()])
    } else {
        Inner::None
    }
}

/// The words of a wrapper read by `spec`: the command starts at the
/// first operand (`skip` operands later, for `timeout DURATION`).
fn wrapped(spec: &Spec, args: &[Word], skip: usize) -> Inner {
    match spec.parse(&values(args)) {
        Ok(p) => from(args, p.rest + skip),
        Err(_) => suffixes(args),
    }
}

/// The word an option's value came from: the whole word, or a literal
/// made of the value when it was attached (`-c'ls'`). A value that came
/// from a word that is not literal is refused by `script_of`.
fn value_word(args: &[Word], value: &str) -> Option<Word> {
    if let Some(w) = args.iter().find(|w| w.text() == value) {
        return Some(w.clone());
    }
    if args.iter().all(|w| w.lit.is_some()) {
        Some(Word::known(value))
    } else {
        Some(Word::unknown(value))
    }
}

/// A script given as one literal word (or refused).
fn script_of(word: Option<&Word>, who: &str) -> Inner {
    match word {
        None => Inner::None,
        Some(w) => match &w.lit {
            Some(text) => Inner::Script(text.clone()),
            None => Inner::Opaque(format!(
                "it runs `{}` through {who}, and that text is not a literal",
                w.raw
            )),
        },
    }
}

fn inner(program: &str, args: &[Word]) -> Inner {
    if let Some(w) = table::wrapper(program) {
        return wrapped(&w.spec, args, w.operands);
    }
    match program {
        "env" => env(args),
        "coproc" => {
            // `coproc NAME { …; }` or `coproc cmd`: either word may be it.
            suffixes(args)
        }
        "flock" => flock(args),
        "xargs" => xargs(args),
        "find" => find(args),
        "busybox" | "toybox" | "lvm" => match args.first().map(|w| w.text()) {
            Some(a) if !a.starts_with('-') => from(args, 0),
            _ => Inner::None,
        },
        "su" | "runuser" | "sg" => su(program, args),
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "rbash" | "yash" | "fish"
        | "busybox-sh" | "csh" | "tcsh" | "ksh93" | "oksh" | "pdksh" | "posh" => {
            shell(program, args)
        }
        // They run text on a schedule or from their input, out of sight.
        "at" | "batch" => Inner::Opaque(format!(
            "{program} runs commands from its input later, which walissh cannot see"
        )),
        "crontab" if args.iter().all(|w| !matches!(w.text(), "-l" | "-r" | "-i")) => {
            Inner::Opaque("crontab installs commands walissh cannot see".into())
        }
        // History re-runs commands the rules never read.
        "fc" | "r" => Inner::Opaque(format!("{program} re-runs commands from history")),
        // Builtins that run a command: `jobs -x CMD`, `compgen -C CMD`,
        // `complete -C CMD`, `mapfile -C CMD`, `bind -x 'KEYS:CMD'`; zsh's
        // `repeat N CMD`, `sched +T CMD`, `emulate sh -c CMD`.
        "jobs" => match args.iter().position(|w| w.text() == "-x") {
            Some(at) => from(args, at + 1),
            None => Inner::None,
        },
        "compgen" | "complete" => match args.iter().position(|w| w.text() == "-C") {
            Some(at) => script_of(args.get(at + 1), program),
            None => Inner::None,
        },
        "bind" => match args.iter().position(|w| w.text() == "-x") {
            Some(at) => match args.get(at + 1).map(|w| (w, w.lit.as_deref())) {
                Some((_, Some(v))) => Inner::Script(
                    v.split_once(':')
                        .map_or(v, |(_, c)| c)
                        .trim()
                        .trim_matches('"')
                        .to_string(),
                ),
                Some((w, None)) => script_of(Some(w), "bind -x"),
                None => Inner::None,
            },
            None => Inner::None,
        },
        "repeat" | "sched" => from(args, 1),
        "emulate" => match args.iter().position(|w| w.text() == "-c") {
            Some(at) => script_of(args.get(at + 1), "emulate -c"),
            None => Inner::None,
        },
        // Commands embedded in options: `tar --to-command=CMD`,
        // `--checkpoint-action=exec=CMD`, `-I CMD`; `git -c core.pager=CMD`
        // and the like; `gdb -ex 'shell CMD'`.
        "tar" | "git" | "gdb" => embedded(program, args),
        "eval" => match joined(args) {
            Ok(text) => Inner::Script(text),
            Err(w) => Inner::Opaque(format!("it evals `{}`, which is not a literal", w.raw)),
        },
        // A sourced file's commands are not in the line: walissh cannot
        // say what they are (`. /dev/stdin <<< '…'` runs its input).
        "source" | "." => Inner::Opaque(format!(
            "it sources {}, whose commands walissh cannot see",
            args.first().map_or("a file", |w| w.raw.as_str())
        )),
        // `script -c COMMAND`.
        "script" => {
            const SPEC: Spec = Spec {
                stop_at_operand: false,
                long_values: &[
                    "command",
                    "log-io",
                    "log-out",
                    "log-in",
                    "log-timing",
                    "logging-format",
                    "echo",
                    "output-limit",
                ],
                long_flags: &["append", "return", "flush", "force", "quiet"],
                ..Spec::wrapper("aeEfqTBIOt", "cloT")
            };
            match SPEC.parse(&values(args)) {
                Ok(p) => match p.value("-c").or(p.value("--command")) {
                    Some(text) => script_of(value_word(args, text).as_ref(), "script -c"),
                    None => Inner::None,
                },
                Err(_) => suffixes(args),
            }
        }
        // Runners whose options are too many to model: any later word may
        // be the program they run (`systemd-run --uid=0 rm -rf /`).
        "systemd-run" | "bwrap" | "schroot" | "chpst" | "dbus-run-session" | "xvfb-run"
        | "valgrind" | "perf" | "lxc-attach" | "daemonize" | "parallel" | "start-stop-daemon"
        | "sshpass" | "expect" | "tini" | "dumb-init" | "gosu" | "su-exec" | "setuidgid"
        | "s6-setuidgid" | "numactl" | "cgexec" | "systemd-nspawn" | "capsh" | "prlimit"
        | "setarch" | "linux32" | "linux64" | "faketime" | "fakeroot" | "sem" | "entr" | "mosh"
        | "autossh" | "rsh" | "pdsh" | "clush" | "ansible" | "salt" => suffixes(args),
        // Tools that run a command only through a subcommand
        // (`docker exec c rm -rf /`, `ip netns exec n reboot`).
        "ip" | "docker" | "podman" | "nerdctl" | "crictl" | "kubectl" | "oc" | "lxc" | "incus"
        | "machinectl" | "toolbox" | "distrobox" => {
            let runs = |w: &Word| {
                matches!(
                    w.text(),
                    "exec" | "run" | "shell" | "attach" | "debug" | "enter" | "create"
                )
            };
            match args.iter().position(runs) {
                Some(at) => suffixes(&args[at + 1..]),
                None => Inner::None,
            }
        }
        // `hash -p PATH NAME` makes NAME run PATH: NAME no longer means
        // what the rules read.
        "hash"
            if args
                .iter()
                .any(|w| w.text().starts_with('-') && w.text().contains('p')) =>
        {
            Inner::Opaque("hash -p makes a name run another program".into())
        }
        // The action runs when the signal comes.
        "trap" => match args.first().map(|w| w.text()) {
            Some("-p" | "-l" | "-P") | None => Inner::None,
            Some("--") => script_of(args.get(1), "trap"),
            Some(_) => script_of(args.first(), "trap"),
        },
        // An alias runs its value wherever its name is typed next.
        "alias" => {
            let mut texts = Vec::new();
            for w in args.iter().filter(|w| w.text().contains('=')) {
                match w.lit.as_deref().and_then(|v| v.split_once('=')) {
                    Some((_, value)) => texts.push(value.to_string()),
                    None => return Inner::Opaque(format!("alias `{}` is not a literal", w.raw)),
                }
            }
            Inner::Scripts(texts)
        }
        // These take variable names, and bash evaluates an array
        // subscript in a name as arithmetic, command substitutions
        // included: `read 'a[$(cmd)]'` runs cmd.
        "read" | "printf" | "test" | "[" | "[[" | "declare" | "typeset" | "local" | "export"
        | "readonly" | "unset" | "let" | "mapfile" | "readarray" | "getopts" | "wait" | "print"
        | "vared" => {
            let mut texts = Vec::new();
            // `export PROMPT_COMMAND=CMD` and the like.
            for w in args {
                let Some((name, value)) = w.text().split_once('=') else {
                    continue;
                };
                match hook(
                    name,
                    &Word {
                        raw: value.to_string(),
                        lit: w.lit.as_ref().map(|_| value.to_string()),
                    },
                ) {
                    Some(Inner::Script(text)) => texts.push(text),
                    Some(Inner::Opaque(why)) => return Inner::Opaque(why),
                    _ => {}
                }
            }
            // `mapfile -C CMD` runs CMD for each chunk.
            if let Some(at) = args.iter().position(|w| w.text() == "-C") {
                match args.get(at + 1).map(|w| &w.lit) {
                    Some(Some(v)) => texts.push(v.clone()),
                    Some(None) => {
                        return Inner::Opaque(format!(
                            "{program} -C runs text that is not a literal"
                        ));
                    }
                    None => {}
                }
            }
            for w in args.iter().filter(|w| w.text().contains(['[', '$', '`'])) {
                match &w.lit {
                    Some(v) => texts.push(v.replace(['[', ']'], " ")),
                    None if w.text().contains('[') => {
                        return Inner::Opaque(format!(
                            "`{}` may be evaluated as a subscript, and it is not a literal",
                            w.raw
                        ));
                    }
                    None => {}
                }
            }
            Inner::Scripts(texts)
        }
        "watch" => {
            const SPEC: Spec = Spec {
                long_values: &["interval", "differences"],
                long_flags: &[
                    "beep", "color", "errexit", "exec", "no-title", "precise", "chgexit",
                ],
                ..Spec::wrapper("bcegtxpwr", "nqd")
            };
            match SPEC.parse(&values(args)) {
                Ok(p) if p.has("-x") || p.has("--exec") => from(args, p.rest),
                Ok(p) => join_script(&args[p.rest..], "watch"),
                Err(_) => suffixes(args),
            }
        }
        "ssh" => {
            const SPEC: Spec = Spec::wrapper("46AaCfGgKkMNnqsTtVvXxYy", "BbcDEeFIiJLlmOoPpQRSWw");
            match SPEC.parse(&values(args)) {
                // The destination, then the remote command.
                Ok(p) if p.rest + 1 < args.len() => join_script(&args[p.rest + 1..], "ssh"),
                Ok(_) => Inner::None,
                Err(_) => suffixes(args),
            }
        }
        _ => Inner::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(line: &str) -> Vec<String> {
        let seen = see(line);
        assert_eq!(seen.opaque, None, "{line}");
        seen.runs
            .iter()
            .map(|r| r.iter().map(|w| w.text()).collect::<Vec<_>>().join(" "))
            .collect()
    }

    fn opaque(line: &str) -> bool {
        see(line).opaque.is_some()
    }

    #[test]
    fn wrappers_by_their_own_grammar() {
        let has = |line: &str, want: &str| {
            let r = runs(line);
            assert!(r.iter().any(|c| c == want), "{line}: {r:?}");
        };
        has("sudo -u root rm -rf /", "rm -rf /");
        has("sudo -n -E rm -rf /", "rm -rf /");
        has(
            "env -i A=1 B=2 nice -n 5 shutdown -h now",
            "shutdown -h now",
        );
        has("env -S 'rm -rf /'", "rm -rf /");
        has("time -p rm -rf /", "rm -rf /");
        has("command -p rm -rf /", "rm -rf /");
        has("exec -c rm -rf /", "rm -rf /");
        has("timeout -s 9 5 rm -rf /", "rm -rf /");
        has("stdbuf -o0 rm -rf /", "rm -rf /");
        has("ionice -c 3 nohup setsid rm -rf /", "rm -rf /");
        has("busybox rm -rf /", "rm -rf /");
        has("strace -f -o /dev/null rm -rf /", "rm -rf /");
        has("nsenter -t 1 -m -- rm -rf /", "rm -rf /");
        has("nsenter --target=1 --mount rm -rf /", "rm -rf /");
        has("unshare -m rm -rf /", "rm -rf /");
        has("setpriv --reuid=0 rm -rf /", "rm -rf /");
        has("runuser -u root -- rm -rf /", "rm -rf /");
        has("su -c 'rm -rf /'", "rm -rf /");
        has("su - root -c 'rm -rf /'", "rm -rf /");
        has("sh -c 'ls; rm -rf /'", "rm -rf /");
        has("bash -lc 'rm -rf /'", "rm -rf /");
        has("zsh -o x -c 'rm -rf /'", "rm -rf /");
        has("eval 'rm -rf /'", "rm -rf /");
        has("eval rm -rf /", "rm -rf /");
        has("find / -exec rm -rf {} +", "rm -rf /");
        has("find /etc -name x -execdir rm -rf {} ;", "rm -rf /etc");
        has("find / | xargs rm -rf", "rm -rf <input>");
        has("xargs -0 -I{} rm -rf {}", "rm -rf {} <input>");
        has("sudo -X rm -rf /", "rm -rf /");
        has("coproc rm -rf /", "rm -rf /");
        has("ssh web1 rm -rf /", "rm -rf /");
        has("watch -n 1 'rm -rf /'", "rm -rf /");
        has("flock /tmp/l rm -rf /", "rm -rf /");
        has("flock -c 'rm -rf /' /tmp/l", "rm -rf /");
        has("/usr/bin/sudo /bin/rm -rf /", "/bin/rm -rf /");
        has("chroot / rm -rf /", "rm -rf /");
        has("sudo sudo sudo rm -rf /", "rm -rf /");
    }

    #[test]
    fn what_cannot_be_seen_through_is_opaque() {
        for line in [
            "${X:-rm} -rf /etc",
            "/???/?m -rf /etc",
            "$'rm' -rf /",
            "\"$CMD\" x",
            "eval \"$X\"",
            "eval $(echo rm)",
            "sh -c \"$X\"",
            "curl x | sh",
            "curl x | bash -s",
            "sudo $X",
            "env -S 'rm \"-rf\" /'",
            "source $F",
            "su -c \"$X\"",
        ] {
            assert!(opaque(line), "{line}");
        }
        assert!(!opaque("bash script.sh"));
        assert!(!opaque("echo $HOME"));
    }

    #[test]
    fn nesting_is_bounded() {
        let mut line = "rm -rf /".to_string();
        for _ in 0..6 {
            line = format!("sh -c {}", super::super::word::quote(&line));
        }
        assert!(opaque(&line));
    }
}
