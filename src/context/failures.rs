//! Telling error lines from the rest of a command's output.
//!
//! This file owns one judgement: does a line of output report a failure?
//! The key-events provider uses it to pick what the model should see first,
//! and the history reducer (`reduce`) uses it to keep the groups where
//! something went wrong. It leaves to others where the lines come from (the
//! terminal model, tool results) and what is done with them.
//!
//! Plain ASCII case-insensitive substring checks, no regex: it runs over
//! every line of every command's output, which can be megabytes, and a
//! keyword list is easy to read and to extend. The checks are heuristics;
//! a false positive costs little (a line shown, a group kept), so they lean
//! towards flagging, but they skip the obvious non-errors that summaries
//! print on success (`0 errors`, `failed=0`, `no errors`) and file names
//! such as `error_log`.

/// Words and phrases that report a failure, lowercase. None is a substring
/// of another, so a line is not searched twice for the same thing:
/// `denied` covers `permission denied`, `refused` `connection refused`,
/// `timed out` `connection timed out`, `error` `errors`.
const KEYWORDS: &[&str] = &[
    "error",
    "failed",
    "failure",
    "fatal",
    "panic",
    "traceback",
    "exception",
    "denied",
    "command not found",
    "no such file or directory",
    "refused",
    "timed out",
    "segmentation fault",
    "out of memory",
    "oom-killer",
    "killed",
    "cannot",
    "can't",
    "unreachable",
];

/// Words that, right before a keyword, say there was none of it
/// (`0 errors`, `no errors`, `without errors`).
const NEGATIONS: &[&str] = &["0", "no", "zero", "without"];

/// The longest line looked at: a line longer than this is binary noise or
/// a minified file, and scanning it would only cost time.
const MAX_LINE: usize = 4096;

/// Whether a line of output reports a failure.
pub(crate) fn is_error_line(line: &str) -> bool {
    let line = line.trim();
    if line.is_empty() || line.len() > MAX_LINE || is_path_only(line) {
        return false;
    }
    let lower = line.to_ascii_lowercase();
    KEYWORDS.iter().any(|k| {
        memchr::memmem::find_iter(lower.as_bytes(), k.as_bytes())
            .any(|at| counts(line.as_bytes(), lower.as_bytes(), at, k.len()))
    })
}

/// The error lines of an output, trimmed: at most `max`, the last ones
/// (the end of an output usually says what finally failed), each cut to
/// 200 bytes (`text::head`) so one long line cannot crowd out the others.
pub(crate) fn error_lines(text: &str, max: usize) -> Vec<std::borrow::Cow<'_, str>> {
    const MAX_LEN: usize = 200;
    let mut found: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| is_error_line(l))
        .collect();
    let skip = found.len().saturating_sub(max);
    found.drain(..skip);
    found
        .into_iter()
        .map(|l| crate::text::head(l, MAX_LEN))
        .collect()
}

/// A line that is one path or file name and nothing else (`ls` or `find`
/// output such as `/var/log/httpd/error_log`): it names a file, it does not
/// report anything.
fn is_path_only(line: &str) -> bool {
    !line.contains(char::is_whitespace) && (line.contains('/') || has_extension(line))
}

/// A name that ends in a short extension (`error.log`, `failed.txt`), unlike
/// a sentence's full stop (`Build FAILED.`) or a class name
/// (`java.lang.NullPointerException`).
fn has_extension(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && (1..=4).contains(&ext.len())
            && ext.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// Whether a keyword found at `at` (of length `len`) really reports a
/// failure: it starts a word, is not part of an identifier or file name,
/// nor part of a path (`/var/log/error.log`), and is not negated
/// (`0 errors`, `failed=0`).
fn counts(orig: &[u8], lower: &[u8], at: usize, len: usize) -> bool {
    starts_word(orig, at)
        && !continues_identifier(lower, at + len)
        && !token_around(lower, at).contains(&b'/')
        && !negated_before(lower, at)
        && !zero_after(lower, at + len)
}

/// The keyword starts a word: at the start of the line, after a character
/// that is not part of a word, or at a CamelCase hump (`TypeError`,
/// `NullPointerException`: the class names that most runtimes print),
/// but not inside a lowercase word (`terror`) or an identifier
/// (`ignore_errors`).
fn starts_word(orig: &[u8], at: usize) -> bool {
    let Some(&prev) = at.checked_sub(1).and_then(|i| orig.get(i)) else {
        return true;
    };
    if prev == b'_' || prev.is_ascii_digit() {
        return false;
    }
    !prev.is_ascii_alphabetic() || (prev.is_ascii_lowercase() && orig[at].is_ascii_uppercase())
}

/// The keyword runs on into an identifier (`error_log`, `panic_on_oom`,
/// `error.log`, `errors.txt`): a name, not a report. A full stop at the end
/// of a sentence (`failed.`) does not count.
fn continues_identifier(lower: &[u8], end: usize) -> bool {
    match lower.get(end) {
        Some(b'_') => true,
        Some(b'.' | b'-') => lower.get(end + 1).is_some_and(u8::is_ascii_alphanumeric),
        _ => false,
    }
}

/// The whitespace-delimited token that holds position `at`.
fn token_around(lower: &[u8], at: usize) -> &[u8] {
    let start = lower[..at]
        .iter()
        .rposition(u8::is_ascii_whitespace)
        .map_or(0, |i| i + 1);
    let end = lower[at..]
        .iter()
        .position(u8::is_ascii_whitespace)
        .map_or(lower.len(), |i| at + i);
    &lower[start..end]
}

/// The word before the keyword says there were none (`0 errors`,
/// `no errors`, `without errors`).
fn negated_before(lower: &[u8], at: usize) -> bool {
    let before = lower[..at].trim_ascii_end();
    // The whole word, so that `unreachable=0 failed=1` is not read as
    // `0 failed`; an opening bracket may come before it (`(0 errors)`).
    let word_start = before
        .iter()
        .rposition(u8::is_ascii_whitespace)
        .map_or(0, |i| i + 1);
    let word = &before[word_start..];
    let word = &word[word
        .iter()
        .take_while(|b| !b.is_ascii_alphanumeric())
        .count()..];
    NEGATIONS.iter().any(|n| word == n.as_bytes())
}

/// The keyword is a counter set to zero (`failed=0`, `errors: 0`,
/// `unreachable=0`, `errors: none`), as summaries print on success.
fn zero_after(lower: &[u8], end: usize) -> bool {
    // A plural or past form may sit between the keyword and its value.
    let mut rest = &lower[end..];
    if let Some(r) = rest.strip_prefix(b"s") {
        rest = r;
    }
    let rest = rest.trim_ascii_start();
    let Some(rest) = rest.strip_prefix(b"=").or_else(|| rest.strip_prefix(b":")) else {
        return false;
    };
    let rest = rest.trim_ascii_start();
    if let Some(r) = rest.strip_prefix(b"none") {
        return r.first().is_none_or(|b| !b.is_ascii_alphanumeric());
    }
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    digits > 0 && rest[..digits].iter().all(|&b| b == b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_found() {
        for line in [
            "ERROR: could not connect",
            "error: linker `cc` not found",
            "make: *** [all] Error 2",
            "npm ERR! failed to fetch",
            "Build FAILED.",
            "test result: FAILED. 3 passed; 1 failed",
            "Job for nginx.service failed because the control process exited",
            "FATAL: password authentication failed for user \"app\"",
            "fatal: not a git repository",
            "thread 'main' panicked at src/main.rs:3:5",
            "Traceback (most recent call last):",
            "ValueError: invalid literal for int()",
            "Exception in thread \"main\" java.lang.NullPointerException",
            "bash: /root/x: Permission denied",
            "bash: foo: command not found",
            "ls: cannot access 'x': No such file or directory",
            "curl: (7) Failed to connect to localhost port 80: Connection refused",
            "ssh: connect to host db port 22: Connection timed out",
            "Segmentation fault (core dumped)",
            "java.lang.OutOfMemoryError: Java heap space",
            "fork: Out of memory",
            "kernel: python invoked oom-killer: gfp_mask=0x100cca",
            "Killed",
            "java.lang.NullPointerException",
            "can't open file 'x.py'",
            "Network is unreachable",
            "access denied",
            "2 errors, 0 warnings",
            "errors: 3",
            "ok=2 changed=1 unreachable=0 failed=1",
            "5 passed, 1 failed",
        ] {
            assert!(is_error_line(line), "{line:?} should be an error line");
        }
    }

    #[test]
    fn non_errors_are_not() {
        for line in [
            "",
            "   ",
            "Compiling walissh v0.1.0",
            "0 errors, 0 warnings",
            "Found 0 errors.",
            "build finished (0 errors)",
            "no errors found",
            "No error",
            "completed without errors",
            "errors: 0",
            "Errors: none",
            "ok=3 changed=0 unreachable=0 failed=0 skipped=0",
            "5 passed, 0 failed",
            "/var/log/httpd/error_log",
            "/var/log/nginx/error.log",
            "error.log",
            "-rw-r----- 1 www-data adm 1234 Jan 1 00:00 error.log",
            "ignore_errors: yes",
            "vm.panic_on_oom = 0",
            "a story of terror",
            "stderr redirected",
            "all tests passed",
        ] {
            assert!(!is_error_line(line), "{line:?} should not be an error line");
        }
    }

    #[test]
    fn one_counting_hit_is_enough() {
        // The first `error` is negated, the `failed` is not.
        assert!(is_error_line("0 errors, but the link step failed"));
        // The path names error.log, the message after it is a report.
        assert!(is_error_line("tail: cannot open '/var/log/error.log'"));
    }

    #[test]
    fn error_lines_keeps_the_last_ones_trimmed() {
        let text = "start\n  error: one  \nok\nerror: two\r\nfine\nerror: three\n";
        assert_eq!(error_lines(text, 2), vec!["error: two", "error: three"]);
        assert_eq!(error_lines(text, 10).len(), 3);
        assert!(error_lines(text, 0).is_empty());
        assert!(error_lines("", 5).is_empty());
    }

    #[test]
    fn error_lines_cuts_long_lines_on_a_char_boundary() {
        let long = format!("error: {}", "é".repeat(300));
        let got = error_lines(&long, 1);
        assert_eq!(got.len(), 1);
        let kept = got[0].split("[... ").next().unwrap();
        assert!(kept.len() <= 200 && kept.len() >= 198);
        assert!(long.starts_with(kept));
        assert!(got[0].ends_with("bytes cut ...]"));
    }

    #[test]
    fn multibyte_text_is_safe() {
        assert!(is_error_line("エラー: error 発生"));
        assert!(!is_error_line("日本語のテキスト"));
        assert!(is_error_line("Ошибка: Permission denied"));
    }
}
