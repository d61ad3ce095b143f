//! `walissh redact [--explain] [FILE]`: text through the agent's redactor,
//! and the config keys that shape it, `[context] redact_rules` and
//! `redact_allow`, checked at load.
//!
//! Every token here is built at run time: no token-shaped literal sits in
//! the source for scanners to flag.

use std::path::Path;
use std::process::{Command, Output};

use crate::harness::*;

/// `walissh ARGS`, with `input` on stdin.
fn walissh(args: &[&str], dir: &Path, input: &[u8]) -> Output {
    let mut c = Command::new(walissh_bin());
    c.args(args).current_dir(dir);
    run(c, input)
}

/// A text with a few secrets and ordinary lines around them, and the
/// secrets.
fn secrets_text() -> (String, [String; 3]) {
    let github = format!("ghp_{}", "a1B2".repeat(9));
    let aws = format!("AKIA{}", "Q7ZX".repeat(4));
    let password = format!("Hx{}9", "k2Lm".repeat(3));
    let text = format!(
        "$ env | sort\nHOME=/root\nGH_TOKEN={github}\nuptime: 3 days, load 0.10 0.20 0.30\n\
         aws_access_key_id = {aws}\ndb_password = {password}\n弥生 plain line\tand a tab\n"
    );
    (text, [github, aws, password])
}

#[test]
fn redact_prints_what_the_model_gets_and_explains_without_secrets() {
    let dir = visible_dir();
    let config = dir.path().join("walissh.toml");
    std::fs::write(&config, "[context]\nreducer = \"hybrid\"\n").unwrap();
    let config = config.display().to_string();
    let (text, secrets) = secrets_text();
    let file = dir.path().join("session.log");
    std::fs::write(&file, &text).unwrap();
    let file = file.display().to_string();

    let out = walissh(&["redact", "--config", &config, &file], dir.path(), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let redacted = stdout(&out);
    for s in &secrets {
        assert!(!redacted.contains(s.as_str()), "{s} survived:\n{redacted}");
    }
    // The rest is byte for byte the input; the same secret, the same number.
    let [github, aws, password] = &secrets;
    let expected = text
        .replace(github, "[REDACTED:github-token#1]")
        .replace(aws, "[REDACTED:aws-key#2]")
        .replace(password, "[REDACTED:password#3]");
    assert_eq!(redacted, expected);
    // stdin, absent or `-`, reads the same.
    for args in [
        &["redact", "--config", &config][..],
        &["redact", "--config", &config, "-"][..],
    ] {
        let out = walissh(args, dir.path(), text.as_bytes());
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), expected);
    }

    let out = walissh(
        &["redact", "--explain", "--config", &config],
        dir.path(),
        text.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed = stdout(&out);
    for s in &secrets {
        assert!(!listed.contains(s.as_str()), "{s} listed:\n{listed}");
    }
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(
        lines,
        [
            "3:10-3:49\tgithub-token\twalissh:github-token",
            "5:21-5:40\taws-key\twalissh:aws-key",
            "6:15-6:29\tpassword\twalissh:password",
            "3 findings",
        ],
        "{listed}"
    );

    // Escape sequences go, as for the model; bytes that are not UTF-8 are
    // read as U+FFFD; an empty input is no finding.
    let out = walissh(
        &["redact", "--config", &config],
        dir.path(),
        b"\x1b[1mbold\x1b[0m \xff\xfe ok\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "bold \u{fffd}\u{fffd} ok\n");
    let out = walissh(
        &["redact", "--explain", "--config", &config],
        dir.path(),
        b"",
    );
    assert_eq!(stdout(&out), "0 findings\n");

    // Too much input, or a file that is not there: one line, no output.
    let big = vec![b'x'; (64 << 20) + 1];
    let out = walissh(&["redact", "--config", &config], dir.path(), &big);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert!(err.contains("more than 64 MiB"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = walissh(
        &["redact", "--config", &config, "nope.log"],
        dir.path(),
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with("walissh: nope.log: cannot read"));
}

#[test]
fn redact_rules_and_redact_allow_shape_the_redactor() {
    let dir = visible_dir();
    // A relative path is taken from the config file's directory, not from
    // where walissh runs.
    let conf = dir.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(
        conf.join("rules.toml"),
        "[[rules]]\nid = \"acme-token\"\ndescription = \"ACME's API tokens\"\n\
         regex = '''acme_[a-z0-9]{20}'''\nkeywords = [\"acme_\"]\n",
    )
    .unwrap();
    let config = conf.join("walissh.toml");
    std::fs::write(
        &config,
        "[context]\nredact_rules = \"rules.toml\"\nredact_allow = [\"^changeme-[0-9]+$\"]\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let acme = format!("acme_{}", "q4".repeat(10));
    let github = format!("ghp_{}", "a1B2".repeat(9));
    let text = format!(
        "deploy --with {acme}\ndb_password = changeme-42\nadmin_password = Zx{}7\ntoken {github}\n",
        "w9Rt".repeat(3)
    );
    let out = walissh(
        &["redact", "--config", &config],
        dir.path(),
        text.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let redacted = stdout(&out);
    assert_eq!(
        redacted,
        "deploy --with [REDACTED:acme-token#1]\ndb_password = changeme-42\n\
         admin_password = [REDACTED:password#2]\ntoken [REDACTED:github-token#3]\n"
    );
    let out = walissh(
        &["redact", "--explain", "--config", &config],
        dir.path(),
        text.as_bytes(),
    );
    let listed = stdout(&out);
    assert!(
        listed.starts_with("1:15-1:39\tacme-token\toperator:acme-token\n"),
        "{listed}"
    );
    assert!(listed.ends_with("\n3 findings\n"), "{listed}");
    assert!(!listed.contains(&acme) && !listed.contains("changeme"));
}

/// A rules file that does not compile, an allow pattern that is not a
/// regex or that would let everything pass: `check-config` (and
/// `redact`) refuse them in one line naming the file, line and key.
#[test]
fn bad_redaction_config_is_refused_naming_file_line_and_key() {
    let dir = visible_dir();
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[rules]]\nid = \"acme-token\"\nregex = '''acme_[a-z0-9]{20}'''\n\n\
         [[rules]]\nid = \"broken\"\nregex = '''(acme'''\n",
    )
    .unwrap();
    let user = format!(
        "[[users]]\nname = \"u\"\npassword_hash = \"{}\"\ntargets = [\"*\"]\n\n",
        hash_of(ALICE_PW)
    );
    let rules_path = rules.display().to_string();
    let cases = [
        (
            format!("{user}[context]\nredact_rules = \"rules.toml\"\n"),
            format!("FILE:7: key `context.redact_rules`: {rules_path}: rule 2 `broken`: regex:"),
        ),
        (
            format!("{user}[context]\nredact_rules = \"missing.toml\"\n"),
            "FILE:7: key `context.redact_rules`: ".to_string(),
        ),
        (
            format!("{user}[context]\nredact_allow = [\n  \"^ok$\",\n  \"(unclosed\",\n]\n"),
            "FILE:9: key `context.redact_allow`: bad regex:".to_string(),
        ),
        (
            format!("{user}[context]\nredact_allow = [\".*\"]\n"),
            "FILE:7: key `context.redact_allow`: \".*\" matches the empty string".to_string(),
        ),
    ];
    let config = dir.path().join("walissh.toml");
    let path = config.display().to_string();
    for (text, expected) in cases {
        std::fs::write(&config, &text).unwrap();
        for cmd in [
            &["check-config", "--config", &path][..],
            &["redact", "--config", &path],
        ] {
            let out = walissh(cmd, dir.path(), b"x\n");
            let err = stderr(&out).replace(&path, "FILE");
            assert_eq!(out.status.code(), Some(1), "{text}\n{err}");
            assert!(
                err.starts_with(&format!("walissh: {expected}")),
                "{text}\n{err}"
            );
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(stdout(&out).is_empty());
        }
    }
    // Fixed, the same config passes.
    std::fs::write(
        &rules,
        "[[rules]]\nid = \"acme-token\"\nregex = '''acme_[a-z0-9]{20}'''\n",
    )
    .unwrap();
    std::fs::write(
        &config,
        format!("{user}[context]\nredact_rules = \"rules.toml\"\n"),
    )
    .unwrap();
    let out = walissh(&["check-config", "--config", &path], dir.path(), b"");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
