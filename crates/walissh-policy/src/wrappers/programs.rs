//! How each wrapper that takes a script or a command line of its own
//! reads it: shells (`sh -c`), `su`, `env`, `flock`, `xargs`, `find
//! -exec`, the variables a shell runs later (prompt hooks), and the
//! languages that embed a command (`python -c "os.system(...)"`).
//!
//! What it leaves to others: the table of wrappers and the walk over a
//! line (`wrappers`), what the policy decides of what they run.

use super::*;

/// Variables the shell runs as commands later: prompt hooks, start-up
/// files, zsh's function and alias tables. Their value is read as a
/// script (`PROMPT_COMMAND=reboot`, `PS0='$(reboot)'`).
pub(super) fn hook(name: &str, value: &Word) -> Option<Inner> {
    let base = name.split('[').next().unwrap_or(name);
    let table = matches!(
        base,
        "functions" | "aliases" | "galiases" | "saliases" | "dis_functions"
    );
    if !HOOKS.contains(&base) && !table {
        return None;
    }
    Some(match &value.lit {
        Some(v) => Inner::Script(v.trim_start_matches('(').trim_end_matches(')').to_string()),
        None => Inner::Opaque(format!(
            "{name} is set to `{}`, which the shell runs later and is not a literal",
            value.raw
        )),
    })
}

/// Variables whose value the shell runs (or reads as a start-up file)
/// later: see [`hook`].
pub(crate) const HOOKS: &[&str] = &[
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "BASH_ENV",
    "ENV",
    "precmd_functions",
    "preexec_functions",
    "chpwd_functions",
    "periodic_functions",
    "zshaddhistory_functions",
    "RPROMPT",
    "RPS1",
    "PROMPT",
    "NULLCMD",
    "READNULLCMD",
    "TRAPEXIT",
    "TRAPZERR",
    "TRAPDEBUG",
];

/// Shell commands carried in a program's options (see `inner`).
pub(super) fn embedded(program: &str, args: &[Word]) -> Inner {
    let mut texts = Vec::new();
    let mut next_is = None;
    for w in args {
        let Some(v) = w.lit.as_deref() else {
            if next_is.is_some() || w.raw.contains('=') {
                return Inner::Opaque(format!(
                    "`{}` may hold a command that is not a literal",
                    w.raw
                ));
            }
            continue;
        };
        if let Some(kind) = next_is.take() {
            push_embedded(kind, v, &mut texts);
            continue;
        }
        match (program, v) {
            (
                "tar",
                "-I"
                | "-F"
                | "--use-compress-program"
                | "--info-script"
                | "--new-volume-script"
                | "--rsh-command"
                | "--to-command",
            ) => next_is = Some("cmd"),
            ("tar", _) => {
                for opt in [
                    "--to-command=",
                    "--use-compress-program=",
                    "--info-script=",
                    "--new-volume-script=",
                    "--rsh-command=",
                    "--checkpoint-action=exec=",
                    "--index-file=",
                ] {
                    if let Some(cmd) = v.strip_prefix(opt) {
                        texts.push(cmd.to_string());
                    }
                }
                if let Some(cmd) = v.strip_prefix("-I").filter(|c| !c.is_empty()) {
                    texts.push(cmd.to_string());
                }
            }
            ("git", "-c") => next_is = Some("config"),
            ("git", _) if v.starts_with("--config-env") || v.starts_with("--exec-path") => {
                return Inner::Opaque(format!("git {v} runs programs walissh cannot see"));
            }
            ("git", _) if v.starts_with("-c") && v.len() > 2 => {
                push_embedded("config", &v[2..], &mut texts)
            }
            ("gdb", "-ex" | "--eval-command" | "-iex") => next_is = Some("gdb"),
            // `gdb --args PROGRAM ARGS`: the program runs.
            ("gdb", "--args") => {
                let at = args.iter().position(|w| w.text() == "--args").unwrap_or(0);
                let words: Vec<String> = args[at + 1..]
                    .iter()
                    .map(|w| w.lit.clone().unwrap_or_default())
                    .collect();
                texts.push(
                    words
                        .iter()
                        .map(|w| super::super::word::quote(w))
                        .collect::<Vec<_>>()
                        .join(" "),
                );
                break;
            }
            _ => {}
        }
    }
    Inner::Scripts(texts)
}

pub(super) fn push_embedded(kind: &str, v: &str, texts: &mut Vec<String>) {
    match kind {
        // Any git setting whose value is run: pagers, editors, ssh and
        // askpass commands, hooks, aliases that start with `!`.
        "config" => {
            let (key, value) = v.split_once('=').unwrap_or((v, ""));
            let key = key.to_ascii_lowercase();
            let runs = [
                "pager",
                "editor",
                "command",
                "askpass",
                "fsmonitor",
                "external",
                "hook",
                "textconv",
                "program",
                "helper",
                "proxy",
                "filter",
            ]
            .iter()
            .any(|k| key.contains(k));
            if runs || key.starts_with("alias.") {
                texts.push(value.trim_start_matches('!').to_string());
            }
        }
        "gdb" => {
            let cmd = v
                .strip_prefix("shell ")
                .or_else(|| v.strip_prefix('!'))
                .or_else(|| v.strip_prefix("pipe "));
            texts.extend(cmd.map(str::to_string));
        }
        _ => texts.push(v.to_string()),
    }
}

/// Words joined with spaces into a script, as `ssh` and `watch` do.
pub(super) fn join_script(words: &[Word], who: &str) -> Inner {
    match joined(words) {
        Ok(text) => Inner::Script(text),
        Err(w) => Inner::Opaque(format!(
            "it runs `{}` through {who}, and that text is not a literal",
            w.raw
        )),
    }
}

/// The words' literal texts joined with spaces (what `eval`, `ssh` and
/// `watch` run), or the first word that is no literal.
pub(super) fn joined(words: &[Word]) -> Result<String, &Word> {
    let mut text = Vec::with_capacity(words.len());
    for w in words {
        text.push(w.lit.as_deref().ok_or(w)?);
    }
    Ok(text.join(" "))
}

/// `env [-i] [-u NAME] [-C DIR] [-S STRING] [NAME=VALUE]... [COMMAND [ARG]...]`.
pub(super) fn env(args: &[Word]) -> Inner {
    const SPEC: Spec = Spec {
        long_flags: &[
            "ignore-environment",
            "null",
            "debug",
            "list-signal-handling",
        ],
        long_values: &["unset", "chdir", "split-string"],
        long_optional: &["block-signal", "default-signal", "ignore-signal"],
        ..Spec::wrapper("i0v", "uCS")
    };
    let vals = values(args);
    // A lone `-` is `-i`.
    let vals: Vec<&str> = vals
        .iter()
        .map(|v| if *v == "-" { "-i" } else { v })
        .collect();
    let p = match SPEC.parse(&vals) {
        Ok(p) => p,
        Err(_) => return suffixes(args),
    };
    let mut at = p.rest;
    while at < args.len() && args[at].text().contains('=') && !args[at].text().starts_with('=') {
        at += 1;
    }
    let split = p
        .opts
        .iter()
        .find(|o| o.name == "-S" || o.name == "--split-string");
    let Some(split) = split else {
        return from(args, at);
    };
    // `-S STRING` is split into words by env's own rules: quotes,
    // escapes and `${VAR}`. Only plain words are read here.
    let raw = split.value.clone().unwrap_or_default();
    if args.iter().any(|w| w.lit.is_none())
        || raw
            .chars()
            .any(|c| matches!(c, '\\' | '$' | '\'' | '"' | '#' | '\t' | '\n'))
    {
        return Inner::Opaque(format!(
            "env -S splits `{raw}` by rules walissh does not read"
        ));
    }
    let mut argv: Vec<Word> = raw
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(Word::known)
        .collect();
    argv.extend(args[at..].iter().cloned());
    if argv.is_empty() {
        Inner::None
    } else {
        Inner::Argv(vec![argv])
    }
}

/// `flock [options] FILE COMMAND...`, `flock [options] FILE -c COMMAND`.
pub(super) fn flock(args: &[Word]) -> Inner {
    const SPEC: Spec = Spec {
        long_flags: &[
            "shared",
            "exclusive",
            "unlock",
            "nonblock",
            "close",
            "no-fork",
            "verbose",
        ],
        long_values: &["timeout", "conflict-exit-code", "command"],
        ..Spec::wrapper("sexunoFh", "wEc")
    };
    match SPEC.parse(&values(args)) {
        Ok(p) if p.has("-c") || p.has("--command") => {
            let text = p.value("-c").or(p.value("--command")).unwrap_or_default();
            script_of(value_word(args, text).as_ref(), "flock -c")
        }
        Ok(p) => {
            // After the lock file, `-c` may still come.
            let rest = &args[p.rest..];
            if rest.get(1).is_some_and(|w| w.text() == "-c") {
                script_of(rest.get(2), "flock -c")
            } else {
                from(rest, 1)
            }
        }
        Err(_) => suffixes(args),
    }
}

/// `xargs [options] [COMMAND [ARG]...]`: the command gets arguments from
/// the input, which nobody can know here.
pub(super) fn xargs(args: &[Word]) -> Inner {
    const SPEC: Spec = Spec {
        optional: "eil",
        long_flags: &[
            "null",
            "interactive",
            "no-run-if-empty",
            "verbose",
            "exit",
            "show-limits",
            "open-tty",
        ],
        long_values: &[
            "arg-file",
            "delimiter",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
        ],
        long_optional: &["eof", "replace", "max-lines"],
        ..Spec::wrapper("0prtxo", "adEIiLnPs")
    };
    let p = match SPEC.parse(&values(args)) {
        Ok(p) => p,
        Err(_) => return suffixes(args),
    };
    // With `-I R` (or `-i`), every word holding R gets the input in it.
    let replace = p
        .opts
        .iter()
        .find(|o| matches!(o.name.as_str(), "-I" | "-i" | "--replace"))
        .map(|o| o.value.clone().unwrap_or_else(|| "{}".into()));
    let mut argv: Vec<Word> = args[p.rest..]
        .iter()
        .map(|w| match &replace {
            Some(r) if w.text().contains(r.as_str()) => Word::unknown(&w.raw),
            _ => w.clone(),
        })
        .collect();
    if argv.is_empty() {
        argv.push(Word::known("echo"));
    }
    argv.push(Word::unknown("<input>"));
    Inner::Argv(vec![argv])
}

/// find's roots: after its own leading options (`-L`, `-H`, `-P`, `-O3`,
/// `-D stat`), up to the expression.
pub(crate) fn find_roots(args: &[Word]) -> impl Iterator<Item = &Word> {
    let mut i = 0;
    while let Some(w) = args.get(i) {
        match w.text() {
            "-L" | "-H" | "-P" => i += 1,
            "-D" => i += 2,
            t if t.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    args[i.min(args.len())..]
        .iter()
        .take_while(|w| !w.text().starts_with('-') && !matches!(w.text(), "(" | "!" | ")"))
}

/// `find ROOTS... EXPRESSION`: each `-exec`, `-execdir`, `-ok`, `-okdir`
/// runs its command with `{}` standing for what was found (so under each
/// root: a recursive delete of `{}` under `/` deletes `/`).
pub(super) fn find(args: &[Word]) -> Inner {
    let roots: Vec<&Word> = find_roots(args).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i].text(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while end < args.len() && !matches!(args[end].text(), ";" | "+") {
                end += 1;
            }
            let command = &args[start..end];
            let under: Vec<Word> = if roots.is_empty() {
                vec![Word::known(".")]
            } else {
                roots.iter().map(|w| (*w).clone()).collect()
            };
            for root in under {
                out.push(
                    command
                        .iter()
                        .map(|w| {
                            if w.text() == "{}" {
                                root.clone()
                            } else {
                                w.clone()
                            }
                        })
                        .collect(),
                );
            }
            i = end;
        }
        i += 1;
    }
    if out.is_empty() {
        Inner::None
    } else {
        Inner::Argv(out)
    }
}

/// `su [-] [-l] [-c COMMAND] [USER [ARG]...]`, `runuser -u USER -- CMD`,
/// `sg GROUP [-c] COMMAND`.
pub(super) fn su(program: &str, args: &[Word]) -> Inner {
    if program == "sg" {
        return match args.get(1).map(|w| w.text()) {
            Some("-c") => script_of(args.get(2), "sg -c"),
            Some(_) => script_of(args.get(1), "sg"),
            None => Inner::None,
        };
    }
    const SPEC: Spec = Spec {
        long_flags: &["login", "preserve-environment", "pty"],
        long_values: &[
            "command",
            "session-command",
            "shell",
            "group",
            "supp-group",
            "whitelist-environment",
            "user",
        ],
        stop_at_operand: false,
        ..Spec::wrapper("lmpfP", "cgGswu")
    };
    let vals: Vec<&str> = values(args)
        .into_iter()
        .map(|v| if v == "-" { "-l" } else { v })
        .collect();
    match SPEC.parse(&vals) {
        Ok(p) => {
            let command = ["-c", "--command", "--session-command"]
                .iter()
                .find_map(|n| p.value(n));
            match command {
                Some(text) => script_of(value_word(args, text).as_ref(), program),
                // runuser -u USER COMMAND...: the operands are the command.
                None if p.has("-u") || p.has("--user") => {
                    let first = p.operands.first().map(String::as_str);
                    let at = args.iter().position(|w| Some(w.text()) == first);
                    at.map_or(Inner::None, |at| from(args, at))
                }
                None => Inner::None,
            }
        }
        Err(_) => suffixes(args),
    }
}

/// A shell: `-c SCRIPT` runs the script; a file operand runs a file (not
/// read here); neither reads commands from the input, which walissh
/// cannot see.
pub(super) fn shell(program: &str, args: &[Word]) -> Inner {
    const SPEC: Spec = Spec {
        long_flags: &[
            "norc",
            "noprofile",
            "login",
            "posix",
            "restricted",
            "noediting",
            "verbose",
            "debugger",
            "protected",
            "no-config",
            "private",
        ],
        long_values: &["rcfile", "init-file", "init-command", "command"],
        ..Spec::wrapper("abefhkmnptuvxBCEHPTilrscfdXVq", "oO")
    };
    // `+O extglob`, `+e`: the `+` form of an option reads as the `-` form.
    let vals: Vec<String> = values(args)
        .iter()
        .map(|v| match v.strip_prefix('+') {
            Some(rest) if !rest.is_empty() && !v.starts_with("++") => format!("-{rest}"),
            _ => v.to_string(),
        })
        .collect();
    let vals: Vec<&str> = vals.iter().map(String::as_str).collect();
    match SPEC.parse(&vals) {
        Ok(p) if p.has("-c") || p.has("--command") => {
            let word = match p.value("--command") {
                Some(text) => value_word(args, text),
                None => args.get(p.rest).cloned(),
            };
            match word {
                Some(w) => script_of(Some(&w), program),
                None => Inner::Opaque(format!("{program} -c without a script")),
            }
        }
        // A file that is the input, a descriptor or a process
        // substitution is text from elsewhere (`bash <(echo …)`, `sh -`).
        Ok(p) if p.rest < args.len() && !p.has("-s") => {
            let file = &args[p.rest];
            let t = file.text();
            let piped = t == "-"
                || t.starts_with("<(")
                || t.starts_with("/dev/stdin")
                || t.starts_with("/dev/fd/")
                || t.starts_with("/proc/self/fd/")
                || t.starts_with("/proc/") && t.contains("/fd/")
                || file.lit.is_none();
            if piped {
                Inner::Opaque(format!(
                    "{program} would run text walissh cannot see ({})",
                    file.raw
                ))
            } else {
                Inner::None
            }
        }
        Ok(_) => Inner::Opaque(format!(
            "{program} would run commands from its input, which walissh cannot see"
        )),
        Err(_) => suffixes(args),
    }
}
