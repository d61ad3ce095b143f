//! Secrets a terminal wrapped across rows and pane borders, read whole;
//! ordinary rows wrapped at any width left alone.

use super::super::*;
use super::*;

/// `n` characters of token alphabet, in no period, from `seed`.
fn mixed(n: usize, seed: u64) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

/// `text` as a terminal `columns` wide shows it, each line cut into
/// rows; `«`, `»` and `\u{1}` take no column. Returns the rows, and what stood
/// between `«` and `»` as the rows hold it (line breaks and all).
fn rows(text: &str, columns: usize) -> (String, String) {
    let mut out = String::new();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut width = 0;
        for c in line.chars() {
            if !matches!(c, '«' | '»' | '\u{1}') {
                if width == columns {
                    out.push('\n');
                    width = 0;
                }
                width += 1;
            }
            out.push(c);
        }
    }
    let secret = out
        .split_once('«')
        .and_then(|(_, rest)| rest.split_once('»'))
        .map_or(String::new(), |(s, _)| s.to_string());
    (out.replace(['«', '»'], ""), secret)
}

/// Redacts `text` (with its secret marked `«…»`) wrapped at `columns`,
/// and checks the result is the rows with the secret's span, line
/// breaks and all, replaced by one placeholder of `kind`.
#[track_caller]
fn check_rows(text: &str, columns: usize, kind: &str) -> String {
    let (text, secret) = rows(text, columns);
    assert!(secret.contains('\n'), "the wrap cuts the secret:\n{text}");
    let (out, counts) = scrub(&redactor(), &text);
    let want = text.replacen(&secret, &format!("[REDACTED:{kind}]"), 1);
    assert_eq!(out, want, "for:\n{text}");
    assert_eq!(counts.total(), 1, "{counts:?}");
    out
}

/// `github_pat_` wrapped after 5 to 15 characters: the first row holds
/// less than the rule's minimum, the second no prefix.
#[test]
fn a_token_cut_before_its_rule_s_minimum_is_found_whole() {
    let token = format!("github_pat_{}", mixed(82, 1));
    for columns in [80, 132] {
        for first in 5..=15 {
            let lead = format!("{:<w$}", "ci log:", w = columns - 11 - first);
            let text = format!("$ tail -2 ci.log\n{lead}«{token}»\n$ ");
            let out = check_rows(&text, columns, "github-token");
            assert!(out.starts_with("$ tail -2 ci.log\nci log: "), "{out}");
        }
    }
}

/// A JWT (two dots) wrapped at 80 columns, anywhere, and right after
/// either dot.
#[test]
fn a_jwt_wrapped_at_80_columns_goes_whole() {
    let header = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9";
    let payload = format!("eyJ{}", mixed(120, 2));
    let jwt = format!("{header}.{payload}.{}", mixed(43, 3));
    let first_dot = header.len() + 1;
    let second_dot = first_dot + payload.len() + 1;
    for at in [first_dot, second_dot % 80, 20, 61] {
        let lead = " ".repeat((80 - at % 80) % 80);
        let text = format!("$ cat token\n{lead}«{jwt}»\n$ ");
        check_rows(&text, 80, "jwt");
    }
    // With the wrap right after a dot, the row ends with it.
    let lead = " ".repeat(80 - first_dot);
    let (text, _) = rows(&format!("{lead}{jwt}"), 80);
    assert!(text.lines().next().unwrap().ends_with('.'), "{text}");
}

/// Text after a wrapped token on its last row stays.
#[test]
fn text_after_a_wrapped_token_on_its_last_row_stays() {
    let key = format!("sk-proj-{}", mixed(120, 4));
    let text = format!("{:<70}«{key}»  other words here\nnext line", "found:");
    let out = check_rows(&text, 80, "openai-key");
    assert!(out.ends_with("]  other words here\nnext line"), "{out}");
}

/// A multiplexer's pane: every row between `│ ` and ` │` (or after
/// `| `), the token cut across rows.
#[test]
fn a_token_across_pane_borders_goes_whole() {
    let token = format!("github_pat_{}", mixed(82, 5));
    let content = format!("build 41: checkout with «{token}» as the user, ok");
    for (left, right) in [("│ ", " │"), ("| ", ""), ("│ ", "")] {
        // The rows, the secret marked, then each one bordered.
        let (marked, _) = rows(&content.replace(['«', '»'], "\u{1}"), 56);
        let mut pane = String::from("$ tmux capture-pane -p\n");
        for row in marked.split('\n') {
            let pad = 56 - row.chars().filter(|&c| c != '\u{1}').count();
            let padding = if right.is_empty() { 0 } else { pad };
            pane.push_str(&format!("{left}{row}{}{right}\n", " ".repeat(padding)));
        }
        let pad = if right.is_empty() { 0 } else { 52 };
        pane.push_str(&format!("{left}$ ls{}{right}\n", " ".repeat(pad)));
        let secret = pane.split('\u{1}').nth(1).unwrap().to_string();
        let text = pane.replace('\u{1}', "");
        assert!(secret.contains('\n'));
        let (out, counts) = scrub(&redactor(), &text);
        let want = text.replacen(&secret, "[REDACTED:github-token]", 1);
        assert_eq!(out, want, "for:\n{text}");
        assert_eq!(counted(&counts), BTreeMap::from([("github-token", 1)]));
    }
}

/// A PEM marker the wrap split (`-----BEGIN RSA PRIV` / `ATE
/// KEY-----`), the key's body on the lines after it; and in a narrow
/// pane, every row cut, END marker too.
#[test]
fn a_pem_marker_split_by_the_wrap_goes_with_its_key() {
    let body: Vec<String> = (0..4).map(|i| mixed(64, 10 + i)).collect();
    let block = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n{}\n-----END RSA PRIVATE KEY-----",
        body.join("\n"),
        mixed(24, 9)
    );
    // The wrap inside `PRIVATE`, and at the blank before it (the row
    // keeps the blank, or the screen dropped it).
    for (cut, width) in [
        ("-----BEGIN RSA PRIV", 80),
        ("-----BEGIN RSA ", 80),
        ("-----BEGIN RSA", 79),
    ] {
        let lead = format!("{:<w$}", "deploy key:", w = width - cut.len());
        let rest = &block[cut.len().max(15)..];
        let text = format!("{lead}{cut}\n{rest}\n$ ls\nnotes.txt");
        let (out, counts) = scrub(&redactor(), &text);
        let want = format!("{lead}[REDACTED:private-key]\n$ ls\nnotes.txt");
        assert_eq!(out, want, "for:\n{text}");
        assert_eq!(counted(&counts), BTreeMap::from([("private-key", 1)]));
    }
    // A pane 24 columns wide: markers and body all wrapped.
    let text = format!("$ cat id\n«{block}»\n$ ls");
    let out = check_rows(&text, 24, "private-key");
    assert_eq!(out, "$ cat id\n[REDACTED:private-key]\n$ ls");
}

/// A wrapped `sk-proj-` or `sk-ant-api03-` key whose last row is under
/// 16 characters: that row used to leak.
#[test]
fn a_wrapped_key_s_short_last_row_goes_too() {
    for (key, columns) in [
        (format!("sk-proj-{}", mixed(164, 6)), 80),
        (format!("sk-ant-api03-{}AA", mixed(72, 7)), 80),
        (format!("sk-proj-{}", mixed(130, 8)), 132),
    ] {
        let tail = key.len() % columns;
        assert!((1..16).contains(&tail));
        let text = format!("$ cat ~/.config/key\n«{key}»\n$ ");
        check_rows(&text, columns, "openai-key");
    }
}

/// Secrets wrapped at 80, 132 and a width no list holds, the wrap
/// falling anywhere in them: redacted as they are unwrapped.
#[test]
fn secrets_wrapped_at_80_and_132_columns_as_unwrapped() {
    let r = redactor();
    let secrets = [
        format!("github_pat_{}", mixed(82, 20)),
        format!("ghp_{}", mixed(36, 21)),
        format!("glpat-{}", mixed(20, 22)),
        format!("xoxb-{}-{}", mixed(12, 23), mixed(24, 24)),
        format!("sk-proj-{}", mixed(100, 25)),
        format!(
            "eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}",
            mixed(40, 26),
            mixed(43, 27)
        ),
        format!("AKIA{}", mixed(16, 28).to_uppercase()),
    ];
    for secret in &secrets {
        for columns in [80, 132, 100] {
            for first in (1..secret.len().min(columns - 4)).step_by(7) {
                let lead = format!("{:<w$}", "out:", w = columns - first);
                let line = format!("{lead}{secret}");
                let (text, _) = rows(&format!("$ run\n{line}\n$ "), columns);
                let whole = scrub(&r, &format!("$ run\n{line}\n$ ")).0;
                assert!(whole.contains("[REDACTED:"), "{whole}");
                assert_eq!(scrub(&r, &text).0, whole, "for:\n{text}");
            }
        }
    }
}

/// Ordinary output the terminal wrapped, at any width, comes back as
/// it was: rows joined for detection make no secret of their own.
#[test]
fn ordinary_rows_wrapped_at_any_width_stay() {
    let r = redactor();
    let hashes: String = (0..6)
        .map(|i| {
            format!(
                "{}  release-0{i}.tar.gz\n",
                mixed(64, 40 + i).to_lowercase()
            )
        })
        .collect();
    let texts = [
            "The deploy finished after the migration ran; the access tokens the service uses are rotated by the scheduler every night, and the keys live in the vault under secret/app (see the runbook for how to renew them).".to_string(),
            "2024/05/01 10:02:11 [error] 8123#8123: *41 connect() failed (111: Connection refused) while connecting to upstream, client: 10.0.0.7\n".repeat(4),
            "-rw-r--r-- 1 app app  1679 Nov 30 10:00 report-2026.csv\n".repeat(5),
            hashes,
            "curl -sS https://registry.example.com/v2/library/nginx/manifests/1.25.3-alpine-slim-with-extra-modules?platform=linux/amd64&digest=true".to_string(),
            "| name        | value                          |\n| ----------- | ------------------------------ |\n| api_version | v2-2024-05-01-stable-release-x |\n| timeout_ms  | 3600                           |".to_string(),
            "abc1234 Fix the token refresh when the session key rotates mid-request (#4521)\ndef5678 Bump tokenizer to 0.19 and regenerate the lock file for the workspace\n".to_string(),
            format!("│ {:<56} │\n│ {:<56} │", "Nothing is close to full: the root filesystem has room,", "and /var/log is small; look there first."),
        ];
    for text in &texts {
        assert_eq!(scrub(&r, text).0, *text);
        for columns in [24, 80, 100, 132] {
            let (wrapped, _) = rows(text, columns);
            let (out, counts) = scrub(&r, &wrapped);
            assert_eq!(out, wrapped, "{counts:?} at {columns}");
        }
    }
}

#[test]
fn megabytes_of_clean_output_pass_unchanged() {
    // How long it took is printed, not asserted: speed is for bench/.
    let line = "2024/05/01 10:02:11 [error] 8123#8123: *41 connect() failed (111: Connection refused) while connecting to upstream, client: 10.0.0.7\n";
    let text = line.repeat(4 << 20 >> 7);
    let r = redactor();
    let start = std::time::Instant::now();
    let (out, counts) = scrub(&r, &text);
    let took = start.elapsed();
    assert_eq!(out.len(), text.len());
    assert!(counts.is_empty());
    eprintln!("redacted {} bytes in {took:?}", text.len());
}
