//! How a command line is read for the rules: its pipelines, their
//! stages, the simple commands in each (wrappers and quoted scripts
//! opened, loosely: it errs towards finding a rule's program), and
//! whether a pipeline ends in a sink that prints nothing of what it read
//! (a filter keeping public fields, a file, a count).
//!
//! What it leaves to others: the rules and what they decide
//! (`commands`).

use super::*;

/// Whether a pipeline starts by printing a literal (`echo 'c2Vj…'`, not
/// `echo "$TOKEN"`, nor `kubectl … | base64 -d`).
pub(super) fn echoes_literal(commands: &[Vec<String>]) -> bool {
    commands.first().is_some_and(|first| {
        matches!(first.first().map(String::as_str), Some("echo" | "printf"))
            && first[1..]
                .iter()
                .any(|w| !w.starts_with('-') && !w.contains('$') && w.len() >= 8)
    })
}

/// The pipelines of a command line: split at `;`, `&`, `&&`, `||` and
/// line breaks outside quotes and parentheses.
pub(super) fn pipelines(line: &str) -> Vec<&str> {
    split_outside(line, false)
}

/// The stages of a pipeline: split at `|` outside quotes and parentheses.
pub(super) fn stages(pipeline: &str) -> Vec<&str> {
    split_outside(pipeline, true)
}

/// `line` split outside quotes and parentheses: at `|` (`pipes`), or at
/// what separates pipelines.
pub(super) fn split_outside(line: &str, pipes: bool) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut quote, mut depth, mut start) = (None, 0usize, 0);
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            // Within single quotes a backslash is itself (`'\'`).
            (Some('"'), '\\') | (None, '\\') => {
                chars.next();
            }
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, ';' | '&' | '\n') if depth == 0 && !pipes => {
                out.push(&line[start..i]);
                start = i + 1;
            }
            (None, '|') if depth == 0 && chars.peek().is_some_and(|&(_, n)| n == '|') => {
                if !pipes {
                    out.push(&line[start..i]);
                    start = i + 2;
                }
                chars.next();
            }
            (None, '|') if depth == 0 && pipes => {
                out.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&line[start..]);
    out.retain(|p| !p.trim().is_empty());
    out
}

/// The sink a pipeline ends in, if it ends in a program that prints no
/// secret of what it reads: a count or a digest (`| wc -c`,
/// `| sha256sum`), the public key (`wg genkey | tee privatekey | wg
/// pubkey`), a JSON object's keys or fields that name no secret (`| jq -r
/// '.data | keys[]'`, `| jq '{name, ttl}'`). Only the plainest pipelines
/// are trusted: what a shell would expand, glob, quote or comment
/// (`of=$SSH_TTY`, `/d?v/tty`, `/de''v/tty`, `# | wc -c`, `wc() {…}`)
/// might send the secret elsewhere, so such a pipeline is no sink. The
/// second wall is `sink_output`: a line of another shape is secret.
pub(super) fn ends_in_sink(pipeline: &str, commands: &[Vec<String>]) -> Option<Sink> {
    // Nothing may reach the terminal on the way: no redirection, no
    // device (`tee /dev/stderr`), and between reader and sink only
    // programs that write to the pipe alone (not `xargs -t`, `perl`,
    // `jq`'s `debug`).
    // (`/proc/self/fd/2` is a device too; a group `(cat; wc -c)` or
    // `{ …; }` runs more than its last command.)
    let grouped = outside_quotes(pipeline).any(|c| c == '(' || c == '{');
    if grouped
        || pipeline.contains(['`', '>'])
        || pipeline.contains("/dev/")
        || pipeline.contains("/proc/")
    {
        return None;
    }
    let stages = stages(pipeline);
    let last = commands.last().filter(|_| stages.len() > 1)?;
    // Every stage but the sink in plain words; the sink's program by its
    // bare name (not `./wc`); jq's filter alone may be quoted.
    let plain = |t: &str| {
        t.chars()
            .all(|c| c.is_ascii_alphanumeric() || " \t_./:=,@%+-".contains(c))
    };
    let sink_stage = stages[stages.len() - 1].trim();
    let unquoted = match sink_stage.split_once('\'') {
        Some((before, rest)) => rest
            .split_once('\'')
            .filter(|(_, after)| !after.contains('\''))
            .map(|(_, after)| format!("{before}{after}"))?,
        None => sink_stage.to_string(),
    };
    if !stages[..stages.len() - 1].iter().all(|s| plain(s))
        || !plain(&unquoted)
        || last.first().is_none_or(|p| p.contains('/'))
    {
        return None;
    }
    let program_of = |stage: &str| {
        let first = stage.split_whitespace().next().unwrap_or("");
        first.rsplit('/').next().unwrap_or(first).to_string()
    };
    // The reader is no script and says nothing more (`-v`, `--debug`);
    // between it and the sink, filters that write to the pipe alone and
    // name no file (`tee f`, `sort -o f`, `xxd - f` write elsewhere).
    let reader = &stages[0];
    let scripted = matches!(
        program_of(reader).as_str(),
        "sed"
            | "awk"
            | "gawk"
            | "mawk"
            | "perl"
            | "python"
            | "python3"
            | "ruby"
            | "node"
            | "php"
            | "sh"
            | "bash"
            | "zsh"
            | "dash"
            | "xargs"
            | "find"
            | "tee"
    );
    let chatty = reader
        .split_whitespace()
        .any(|w| w.starts_with("-v") || w.starts_with("--v") || w.starts_with("--debug"));
    let quiet = stages[1..stages.len() - 1].iter().all(|stage| {
        matches!(
            program_of(stage).as_str(),
            "base64" | "base32" | "basenc" | "tr" | "cut" | "head" | "tail" | "grep"
        )
    });
    if scripted || chatty || !quiet {
        return None;
    }
    let program = last.first().map_or("", String::as_str);
    let filter = last.get(1..).unwrap_or_default();
    match program {
        "wc" => Some(Sink::Count),
        "sha256sum" | "sha1sum" | "sha512sum" | "md5sum" | "b2sum" | "cksum" => Some(Sink::Digest),
        "wg" | "awg" => (filter.first().is_some_and(|w| w == "pubkey")).then_some(Sink::PublicKey),
        // Flags that take no argument only: `--arg keys x`, `--rawfile
        // keys /run/secrets/db` must not pass for the filter.
        "jq" | "yq" | "gojq" => {
            let plain_flags = filter.iter().filter(|w| w.starts_with('-')).all(|w| {
                matches!(
                    w.as_str(),
                    "-r" | "-c"
                        | "-j"
                        | "-a"
                        | "-S"
                        | "-e"
                        | "-M"
                        | "-C"
                        | "-rc"
                        | "-cr"
                        | "--raw-output"
                        | "--compact-output"
                        | "--sort-keys"
                        | "--monochrome-output"
                        | "--color-output"
                        | "--exit-status"
                )
            });
            let mut operands = filter.iter().filter(|w| !w.starts_with('-'));
            (plain_flags
                && operands.next().is_some_and(|w| public_filter(w))
                && operands.next().is_none())
            .then_some(Sink::Fields)
        }
        _ => None,
    }
}

/// A jq filter that prints names or public fields only, and nothing else
/// (no `debug`, `stderr` or `error` to show the rest): a path, then one
/// stage of `keys[]`, `.metadata.name` or `{display_name, policies,
/// ttl}`. Not `length`: of a number it is the number (a PIN, a recovery
/// code).
pub(super) fn public_filter(filter: &str) -> bool {
    let mut stages = filter.split('|').map(str::trim);
    let (first, last) = match (stages.next(), stages.next(), stages.next()) {
        (Some(only), None, _) => (".", only),
        (Some(first), Some(last), None) => (first, last),
        _ => return false,
    };
    let path = first == "."
        || first.starts_with('.')
            && first[1..].split('.').all(|f| {
                !f.is_empty() && f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            });
    path && public_projection(last)
}

/// The last stage of `public_filter`.
pub(super) fn public_projection(stage: &str) -> bool {
    if matches!(
        stage,
        "keys" | "keys[]" | "keys_unsorted" | "keys_unsorted[]"
    ) {
        return true;
    }
    let fields = if let Some(inner) = stage.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        inner.split(',').map(str::trim).collect::<Vec<_>>()
    } else if stage.starts_with('.') {
        stage.split('.').skip(1).collect()
    } else {
        return false;
    };
    // Parts of a name that say secret, and whole names that may hold one
    // (`.data`, vault's token `id`).
    let secretish = [
        "token", "secret", "key", "pass", "auth", "cred", "private", "cookie", "session", "hash",
        "salt", "seed", "cert",
    ];
    let holders = [
        "data",
        "stringdata",
        "value",
        "values",
        "id",
        "env",
        "pin",
        "otp",
    ];
    // What is printed must be a name known to be public (allowed, not
    // guessed: `.pw`, `.dsn`, `.jwt` name no secret word and hold one);
    // `.metadata` whole is not, as it carries kubectl's last applied
    // configuration.
    let public = [
        "name",
        "namespace",
        "display_name",
        "policies",
        "ttl",
        "creation_time",
        "creationtimestamp",
        "expire_time",
        "type",
        "kind",
        "apiversion",
        "uid",
        "resourceversion",
        "version",
        "labels",
    ];
    let printed: &[&str] = if stage.starts_with('{') {
        &fields
    } else {
        &fields[fields.len().saturating_sub(1)..]
    };
    !fields.is_empty()
        && fields.iter().all(|f| {
            let f = f.to_ascii_lowercase();
            !f.is_empty()
                && f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !secretish.iter().any(|w| f.contains(w))
                && !holders.contains(&f.as_str())
        })
        && printed
            .iter()
            .all(|f| public.contains(&f.to_ascii_lowercase().as_str()))
}

/// Whether only wrappers stand before a program: `sudo -u app`, `env
/// X=1`, `time`, `nohup`, `timeout 10`.
pub(super) fn opens(before: &[String]) -> bool {
    before.iter().all(|w| {
        w.starts_with('-')
            || w.contains('=')
            || w.bytes().all(|b| b.is_ascii_digit())
            || matches!(
                w.rsplit('/').next().unwrap_or(w),
                "sudo"
                    | "doas"
                    | "env"
                    | "exec"
                    | "command"
                    | "nohup"
                    | "time"
                    | "nice"
                    | "ionice"
                    | "stdbuf"
                    | "timeout"
                    | "builtin"
            )
    })
}

/// What tells a prompt line from output: its first character and the
/// character that ends the prompt.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape(Option<char>, Option<char>);

impl Shape {
    pub(super) fn of(prompt: &str) -> Shape {
        Shape(prompt.chars().next(), prompt.chars().last())
    }

    /// A root prompt of `#` alone (dash's in a container): a secret's own
    /// comment lines take that shape (`# rotated by ops`), so only the
    /// prompt with nothing typed after it ends the output.
    pub(super) fn bare(self) -> bool {
        self.0 == Some('#') && self.1 == Some('#')
    }
}

/// A line's prompt and the command after it: the prompt ends at the first
/// `$ # % > ❯ ➜ » ✗ λ →` followed by a space, within `MAX_PROMPT` bytes;
/// or at the `>` of a Windows prompt (`C:\Users\me>type x`) or of z/OS
/// UNIX's (`IBMUSER:/u/ibmuser: >cat x`).
pub(crate) fn prompt(line: &str) -> Option<(&str, &str)> {
    let head = &line[..line.floor_char_boundary(MAX_PROMPT)];
    let bytes = head.as_bytes();
    // Most lines hold no prompt character at all: one look at the bytes
    // (every one above is `$ # % >` or not ASCII).
    if !bytes
        .iter()
        .any(|&b| matches!(b, b'$' | b'#' | b'%' | b'>') || !b.is_ascii())
    {
        return None;
    }
    if bytes.len() > 3
        && bytes[0].is_ascii_alphabetic()
        && &bytes[1..3] == b":\\"
        && let Some(i) = head.find('>')
    {
        return Some((&line[..=i], line[i + 1..].trim()));
    }
    let (i, c) = head.char_indices().find(|&(i, c)| {
        matches!(
            c,
            '$' | '#' | '%' | '>' | '❯' | '➜' | '»' | '✗' | '✔' | 'λ' | '→'
        ) && line[i + c.len_utf8()..].starts_with([' ', '\t'])
            // z/OS UNIX's `IBMUSER:/u/ibmuser: >cat x` (a command after
            // it: YAML's `key: >` is no prompt).
            || c == '>'
                && line[..i].ends_with(": ")
                && line[i + 1..].starts_with(|c: char| !c.is_whitespace())
    })?;
    // A prompt is a few words at most (`(venv) user@host:~$`, `[deploy@web2
    // app]$`, `~/tf main ✗`), not a sentence or a log line's fields
    // (`… sshd[1]: Invalid user $ vault kv get x`), nor code or a table's
    // cells (`KEY="v"  # note`, `| app | % |`).
    let before = line[..i].trim_start();
    let before = before.strip_prefix(['|', '│', '┃', '║']).unwrap_or(before);
    if words_outside_brackets(&line[..i]) > 4
        || outside_brackets(before).any(|c| "|\"'=".contains(c))
    {
        return None;
    }
    let end = i + c.len_utf8();
    Some((&line[..end], line[end..].trim()))
}

/// The characters of `s` outside quotes.
pub(super) fn outside_quotes(s: &str) -> impl Iterator<Item = char> + '_ {
    let mut quote: Option<char> = None;
    s.chars().filter(move |&c| match quote {
        Some(q) => {
            if c == q {
                quote = None;
            }
            false
        }
        None if c == '\'' || c == '"' => {
            quote = Some(c);
            false
        }
        None => true,
    })
}

/// The characters of `s` outside brackets (`(main|MERGING)`, `(⎈|prod)`
/// in a git or kube prompt are a group's).
pub(super) fn outside_brackets(s: &str) -> impl Iterator<Item = char> + '_ {
    let mut depth = 0usize;
    s.chars().filter(move |&c| {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth = depth.saturating_sub(1),
            _ => return depth == 0,
        }
        false
    })
}

/// How many blank-separated words `s` holds, a bracketed group (`[user@host
/// dir]`, `(venv)`) counting as one.
pub(super) fn words_outside_brackets(s: &str) -> usize {
    let mut depth = 0usize;
    let mut words = 0;
    let mut in_word = false;
    for c in s.chars() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        let blank = c.is_whitespace() && depth == 0;
        if !blank && !in_word {
            words += 1;
        }
        in_word = !blank;
    }
    words
}

/// The simple commands of a command line, each as its words: quotes and
/// backslashes removed, split at `| ; & ( ) < >` and backquotes; a word
/// that held quoted spaces or operators (`sh -c '…'`) is split again.
pub(super) fn simple_commands(line: &str, depth: usize) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut word = String::new();
    let mut quoted_text = false;
    let mut chars = line.chars();
    let end_word = |word: &mut String, quoted: &mut bool, commands: &mut Vec<Vec<String>>| {
        if word.is_empty() {
            return;
        }
        let w = std::mem::take(word);
        // `X="$(cat /run/secrets/x)"` captures what it reads: nothing of
        // it is printed.
        let again = *quoted
            && depth < MAX_DEPTH
            && w.contains([' ', '\t', '|', ';', '&', '\n'])
            && !captures(&w);
        *quoted = false;
        let inner = if again {
            simple_commands(&w, depth + 1)
        } else {
            Vec::new()
        };
        if let Some(last) = commands.last_mut() {
            last.push(w);
        }
        // The quoted text's own commands go before the current one, which
        // goes on with the words after the quotes.
        let current = commands.pop().unwrap_or_default();
        commands.extend(inner);
        commands.push(current);
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted_text = true;
                word.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                quoted_text = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            '\\' => word.extend(chars.next()),
            ' ' | '\t' | '\n' => end_word(&mut word, &mut quoted_text, &mut commands),
            '(' if word.ends_with("=$") => {
                // An assignment's command substitution: skipped whole.
                let mut depth = 1;
                for c in chars.by_ref() {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                }
                end_word(&mut word, &mut quoted_text, &mut commands);
            }
            // A redirection's file is the command's argument
            // (`cat < /run/secrets/x`).
            '<' | '>' => end_word(&mut word, &mut quoted_text, &mut commands),
            '|' | ';' | '&' | '(' | ')' | '`' => {
                end_word(&mut word, &mut quoted_text, &mut commands);
                if commands.last().is_some_and(|c| !c.is_empty()) {
                    commands.push(Vec::new());
                }
            }
            c => word.push(c),
        }
    }
    end_word(&mut word, &mut quoted_text, &mut commands);
    commands.retain(|c| !c.is_empty());
    commands
}

/// `NAME=$(…)`: a word that assigns what a command prints.
pub(super) fn captures(word: &str) -> bool {
    word.split_once("=$(").is_some_and(|(name, _)| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
}
