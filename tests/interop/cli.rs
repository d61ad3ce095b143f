//! The admin commands, config errors, and the embedded default.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use crate::harness::*;

use check_config as check;

#[test]
fn check_config_names_file_line_and_key() {
    let (code, err) = check("[server]\nlisten = [\"127.0.0.1:2\"]\nstate_dri = \"/tmp/x\"\n");
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("walissh: FILE:3: key `server.state_dri`:"),
        "{err}"
    );
    assert!(err.contains("did you mean `state_dir`?"), "{err}");
    // A key of no table near it gets no guess.
    let (_, err) = check("[server]\nlisten = [\"127.0.0.1:2\"]\nfrobnicate = 1\n");
    assert!(!err.contains("did you mean"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let key = keygen(&tempfile::tempdir().unwrap().path().join("k"));
    let cases = [
        (
            "[[users]]\nname = \"u\"\npassword_hash = \"nope\"\ntargets = [\"a\"]\n".to_string(),
            "FILE:3: key `users.password_hash`:",
        ),
        (
            format!(
                "[[users]]\nname = \"u\"\npassword_hash = \"{}\"\n\ntargets = [\"web[\"]\n",
                hash_of(ALICE_PW)
            ),
            "FILE:5: key `users.targets`: bad glob",
        ),
        (
            "[upstream]\nhost_key_policy = \"sometimes\"\n".to_string(),
            "FILE:2: key `upstream.host_key_policy`",
        ),
        (
            "[[targets]]\nname = \"t\"\nkind = \"ssh\"\n".to_string(),
            "needs a host",
        ),
        (
            format!(
                "[[users]]\nname = \"u\"\nauthorized_keys = [\n  'from=\"10.0.0.0/8\" {key}',\n]\n"
            ),
            "FILE:4: key `users.authorized_keys`: authorized_keys options",
        ),
        (
            "[server]\nauth_lockout_s = 0\n".to_string(),
            "FILE:2: key `server.auth_lockout_s`: must be at least 1",
        ),
    ];
    for (config, expected) in cases {
        let (code, err) = check(&config);
        assert_eq!(code, Some(1), "{config}");
        assert!(err.starts_with("walissh: FILE:"), "{err}");
        assert!(err.contains(expected), "{config}\n{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn unreadable_key_file_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("garbage_key");
    std::fs::write(&key, "this is not a key").unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nstate_dir = \"{}\"\nhost_key = \"{}\"\n",
            dir.path().display(),
            key.display()
        ),
    )
    .unwrap();
    for cmd in ["check-config", "serve"] {
        let out = Command::new(walissh_bin())
            .args([cmd, "--config"])
            .arg(&cfg)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        let err = stderr(&out);
        assert!(err.contains(":3: key `server.host_key`:"), "{cmd}: {err}");
        assert!(err.contains("garbage_key"), "{err}");
    }
}

#[test]
fn bad_usage_exits_2() {
    let out = Command::new(walissh_bin())
        .arg("frobnicate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `groff` (man's formatter) reads `page` without a warning.
fn groff_reads(name: &str, page: &str) {
    use std::io::Write;
    let mut groff = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("groff (tools/test-peers installs it)");
    groff
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = groff.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn man_pages_and_completions_that_real_tools_read() {
    let out = Command::new(walissh_bin()).arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH walissh 1"), "{page}");
    for sub in ["serve", "check\\-config", "audit", "completions"] {
        assert!(page.contains(sub), "{sub} missing from the man page");
    }
    groff_reads("walissh man", &page);
    // --dir writes the main page and one per subcommand it names.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(walissh_bin())
        .args(["man", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = std::fs::read_to_string(dir.path().join("walissh.1")).unwrap();
    assert_eq!(written, page);
    for name in [
        "walissh-serve.1",
        "walissh-audit-verify.1",
        "walissh-redact.1",
    ] {
        let page = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(page.contains(".SH EXIT STATUS"), "{name}");
        groff_reads(name, &page);
    }
    // Each completion script parses in its shell; fish's completes too.
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(walissh_bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains("check-config"), "{script}");
        let parsed = match shell {
            "fish" => Command::new("fish")
                .args(["--no-execute", "-c", &script])
                .output(),
            _ => Command::new(shell).args(["-n", "-c", &script]).output(),
        }
        .unwrap_or_else(|e| panic!("{shell} (tools/test-peers installs it): {e}"));
        assert!(
            parsed.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&parsed.stderr)
        );
    }
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/completions/walissh.fish"
    );
    let completed = Command::new("fish")
        .args(["-c", &format!("source {file}; complete -C 'walissh che'")])
        .output()
        .unwrap();
    let completed = String::from_utf8_lossy(&completed.stdout);
    assert!(completed.starts_with("check-config\t"), "{completed}");
}

#[test]
fn hash_password_and_pubkey() {
    let hash = hash_of("s3cret");
    assert!(hash.starts_with("$argon2id$v=19$"), "{hash}");
    assert!(!hash.contains("s3cret"));

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!("[server]\nstate_dir = \"{}/state\"\n", dir.path().display()),
    )
    .unwrap();
    let run_pubkey = || {
        let out = Command::new(walissh_bin())
            .args(["pubkey", "--config"])
            .arg(&cfg)
            .output()
            .unwrap();
        assert!(out.status.success());
        stdout(&out)
    };
    let first = run_pubkey();
    assert!(first.starts_with("ssh-ed25519 AAAA"), "{first}");
    assert_eq!(run_pubkey(), first);
    let key = dir.path().join("state/upstream_ed25519");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

/// `walissh serve` with no config in `dir`, once it listens: the process,
/// its stdout and its log.
fn serve_embedded(dir: &std::path::Path) -> (std::process::Child, Capture, Capture) {
    let mut child = Command::new(walissh_bin())
        .arg("serve")
        .current_dir(dir)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = Capture::default();
    out.spawn_reader(child.stdout.take().unwrap());
    let log = Capture::default();
    log.spawn_reader(child.stderr.take().unwrap());
    log.wait_for("listening addr=127.0.0.1:2222");
    (child, out, log)
}

/// The README's run command on a fresh machine: no config at all.
#[test]
fn embedded_default_serves_demo_on_2222() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, out, log) = serve_embedded(dir.path());
    assert!(log.text().contains("runs shells as walissh's own account"));
    let end = out.wait_for("password: ");
    let text = out.text();
    let password = text[end..].split_whitespace().next().unwrap().to_string();

    let state = dir.path().join("walissh-state");
    let stored = std::fs::read_to_string(state.join("demo.hash")).unwrap();
    assert!(stored.starts_with("$argon2id$"));
    for entry in std::fs::read_dir(&state).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            let bytes = std::fs::read(&p).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(&password),
                "{p:?} holds the password"
            );
        }
    }

    let askpass = dir.path().join("askpass");
    std::fs::write(&askpass, format!("#!/bin/sh\necho '{password}'\n")).unwrap();
    std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o700)).unwrap();
    let ssh = Command::new("ssh")
        .args([
            "-F",
            "/dev/null",
            "-p",
            "2222",
            "-o",
            "StrictHostKeyChecking=no",
        ])
        .args(["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"])
        .args([
            "-o",
            "PreferredAuthentications=password",
            "demo@127.0.0.1",
            "echo demo-$((2+2))",
        ])
        .env("SSH_ASKPASS", &askpass)
        .env("SSH_ASKPASS_REQUIRE", "force")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(stdout(&ssh), "demo-4\n", "{}", stderr(&ssh));

    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());

    // The audit's readers, run where serve ran, read its state with no
    // config named.
    let listed = Command::new(walissh_bin())
        .args(["audit", "--json", "--kind", "exec"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        stdout(&listed).contains("echo demo-$((2+2))"),
        "{}{}",
        stdout(&listed),
        stderr(&listed)
    );

    // A second start keeps the password and does not print it again.
    let (mut again, out, _log) = serve_embedded(dir.path());
    unsafe { libc::kill(again.id() as i32, libc::SIGTERM) };
    assert!(again.wait().unwrap().success());
    assert!(!out.text().contains("password"), "{}", out.text());
    assert_eq!(
        std::fs::read_to_string(state.join("demo.hash")).unwrap(),
        stored
    );
}

/// The config the Debian package and the Docker image install lets
/// nobody in: it has no user, listens on loopback only, and `check-config`
/// (the unit's ExecStartPre) and `serve` refuse it with a clear message
/// until a user is added. Its commented example user, uncommented as an
/// operator would, is refused for its public example hash, and accepted
/// once the hash is the operator's own.
#[test]
fn the_shipped_config_lets_nobody_in() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |f: &str| std::fs::read_to_string(root.join(f)).unwrap();
    // What the package and the image really install at the config's path.
    let deb = read("Cargo.toml");
    let asset = deb
        .lines()
        .find(|l| l.contains("\"etc/walissh/walissh.toml\", \""))
        .expect("the package installs a config");
    assert!(
        asset.trim_start().starts_with("[\"etc/walissh.toml\""),
        "{asset}"
    );
    let image = read("Dockerfile");
    let copy = image
        .lines()
        .find(|l| l.starts_with("COPY") && l.ends_with(" /etc/walissh/walissh.toml"))
        .expect("the image installs a config");
    assert!(copy.contains(" etc/walissh.toml "), "{copy}");

    let shipped = read("etc/walissh.toml");
    let listen: Vec<&str> = shipped
        .lines()
        .filter(|l| l.starts_with("listen"))
        .collect();
    assert_eq!(listen, ["listen = [\"127.0.0.1:2222\"]"]);
    let (code, err) = check(&shipped);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("key `users`: no user is configured"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let serve = Command::new(walissh_bin())
        .current_dir(root)
        .args(["serve", "--config", "etc/walissh.toml"])
        .output()
        .unwrap();
    assert_eq!(serve.status.code(), Some(1));
    assert!(
        stderr(&serve).contains("no user is configured"),
        "{}",
        stderr(&serve)
    );

    // The operator uncomments the example users.
    let mut in_users = false;
    let uncommented: String = shipped
        .lines()
        .map(|l| {
            if l.starts_with("# One [[users]]") {
                in_users = true;
            } else if l.starts_with("# How people log in") {
                in_users = false;
            }
            let code = l.strip_prefix("# ").filter(|rest| {
                let key = rest.split(" = ").next().unwrap_or("");
                *rest == "[[users]]"
                    || *rest == "]"
                    || rest.starts_with("  \"")
                    || (rest.contains(" = ")
                        && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
            });
            match (in_users, code) {
                (true, Some(code)) => code.to_string() + "\n",
                _ => l.to_string() + "\n",
            }
        })
        .collect();
    assert_eq!(uncommented.matches("\n[[users]]\n").count(), 2);
    let (code, err) = check(&uncommented);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("key `users.password_hash`: this is an example hash"),
        "{err}"
    );
    let example = uncommented
        .lines()
        .find_map(|l| l.strip_prefix("password_hash = "))
        .unwrap()
        .trim_matches('"');
    let own = uncommented.replace(example, &hash_of(ALICE_PW));
    let (code, err) = check(&own);
    assert_eq!(code, Some(0), "{err}");
}

/// The triage team's sample config is valid as shipped (its skills
/// directory is relative to the repository's root, as its header says);
/// `etc/walissh.toml`, every key, is checked with a user added in
/// `the_shipped_config_lets_nobody_in`.
#[test]
fn the_triage_sample_passes_check_config() {
    let out = Command::new(walissh_bin())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["check-config", "--config", "etc/triage.toml"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).ends_with(": ok\n"));
}

/// The command line's manners: the config from `-c` or `WALISSH_CONFIG`,
/// a log level that is not one refused, and output whose reader leaves
/// early (`| head`) ending quietly with status 0.
#[test]
fn config_from_the_environment_a_log_level_and_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[server]\nlisten = 5\n").unwrap();
    let named = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&*bad.to_string_lossy()),
            "{}",
            stderr(&out)
        );
    };
    named(
        Command::new(walissh_bin())
            .arg("check-config")
            .env("WALISSH_CONFIG", &bad),
    );
    named(
        Command::new(walissh_bin())
            .args(["check-config", "-c"])
            .arg(&bad),
    );

    let out = Command::new(walissh_bin())
        .args(["--log-level", "[x", "check-config"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--log-level [x:"), "{}", stderr(&out));

    // 2 MB through `redact` into `head -c 10`: the pipe closes long
    // before the output ends.
    let big = dir.path().join("big.log");
    std::fs::write(&big, "a log line of nothing secret\n".repeat(70_000)).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#""$0" redact "$1" | head -c 10 >/dev/null; echo "status ${PIPESTATUS[0]}""#)
        .arg(walissh_bin())
        .arg(&big)
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "status 0\n", "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}
