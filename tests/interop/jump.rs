//! `ssh -J bastion web1` with the audit still on: walissh answers the
//! jump's channel itself with an SSH server inside it, presenting a host
//! certificate for the target that the client checks against the one
//! `@cert-authority` line in its known_hosts, and logs the inner login in
//! as the outer one's user, with no second credential.

use std::process::Command;

use crate::harness::*;

/// An ssh_config with `bastion` (bob, his key) and every target behind it
/// (`ProxyJump bastion`), whose host keys are checked strictly against
/// `known_hosts` alone: the path of the config.
fn jump_config(b: &Bastion, known_hosts: &str) -> std::path::PathBuf {
    let kh = b.dir.path().join("known_hosts_targets");
    std::fs::write(&kh, known_hosts).unwrap();
    let cfg = b.dir.path().join("ssh_config_jump");
    std::fs::write(
        &cfg,
        format!(
            "Host bastion\n  HostName 127.0.0.1\n  Port {port}\n  User bob\n  IdentityFile {key}\n  IdentitiesOnly yes\n  BatchMode yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n\n\
             Host * !bastion\n  ProxyJump bastion\n  BatchMode yes\n  StrictHostKeyChecking yes\n  UserKnownHostsFile {kh}\n  GlobalKnownHostsFile /dev/null\n  LogLevel ERROR\n",
            port = b.port,
            key = b.bob_key.display(),
            kh = kh.display(),
        ),
    )
    .unwrap();
    cfg
}

/// `ssh -tt` to web1 (as the account walissh logs in as) through the jump
/// `cfg` describes: a terminal's command.
fn terminal_via(cfg: &std::path::Path) -> Command {
    let mut c = Command::new("ssh");
    c.arg("-F")
        .arg(cfg)
        .arg("-tt")
        .arg(format!("{}@web1", me()));
    c
}

fn ssh_via(cfg: &std::path::Path, dest: &str, command: &str) -> std::process::Output {
    Command::new("ssh")
        .arg("-F")
        .arg(cfg)
        .arg(dest)
        .arg(command)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// `ssh -J`: the target's certificate checked against the host CA's line,
/// the command run on the target through walissh, and the session
/// audited as any other, `via = "jump"`.
#[test]
fn a_jump_through_the_bastion_is_a_session_like_any_other() {
    let b = Bastion::start();
    let line = stdout(&b.cli(&["pubkey", "--host-ca"]));
    assert!(line.starts_with("@cert-authority web1,web2,"), "{line}");
    assert!(line.trim_end().ends_with("walissh-host-ca"), "{line}");
    let cfg = jump_config(&b, &line);
    let out = ssh_via(&cfg, &format!("{}@web1", me()), "echo JUMPED-$((6*7))");
    assert_eq!(stdout(&out), "JUMPED-42\n", "{}", stderr(&out));
    let start = b.wait_kind("session_start");
    assert_eq!(
        (
            start["user"].as_str(),
            start["target"].as_str(),
            start["via"].as_str()
        ),
        (Some("bob"), Some("web1"), Some("jump"))
    );
    assert_eq!(start["account"], me().as_str());
    let exec = b.wait_kind("exec");
    assert_eq!(exec["command"], "echo JUMPED-$((6*7))");
    b.wait_kind("session_end");
}

/// What the jump refuses: a host key no CA line vouches for, an account
/// the user may not use (never another bastion user), a target the user
/// may not reach, and anything that is no target (a port forward, as
/// before).
#[test]
fn the_jump_refuses_what_it_should() {
    let b = Bastion::start();
    // Another CA's line: the client refuses the target's certificate.
    let other = b.dir.path().join("other_ca");
    let other_pub = keygen(&other);
    let cfg = jump_config(&b, &format!("@cert-authority web1 {other_pub}\n"));
    let out = ssh_via(&cfg, &format!("{}@web1", me()), "true");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("Host key verification failed"),
        "{}",
        stderr(&out)
    );
    let line = stdout(&b.cli(&["pubkey", "--host-ca"]));
    let cfg = jump_config(&b, &line);
    // An account bob may not use on web1 (alice is a bastion user: the
    // inner login names an account on the target, never a bastion user).
    let out = ssh_via(&cfg, "alice@web1", "echo NOPE");
    assert_ne!(out.status.code(), Some(0));
    assert!(!stdout(&out).contains("NOPE"));
    let denied =
        b.wait_event(|e| e["kind"] == "target_denied" && e["reason"] == "account_not_allowed");
    assert_eq!(denied["user"], "bob");
    // web2 exists, and bob may not reach it: refused at the channel.
    let out = ssh_via(&cfg, &format!("{}@web2", me()), "echo NOPE");
    assert_ne!(out.status.code(), Some(0));
    b.wait_event(|e| {
        e["kind"] == "target_denied" && e["requested"] == "web2" && e["via"] == "jump"
    });
    // Not a target: a port forward, refused as before.
    let out = ssh_via(&cfg, "nowhere.example", "true");
    assert_ne!(out.status.code(), Some(0));
    b.wait_event(|e| e["kind"] == "forward_denied");
    assert!(!b.audit().iter().any(|e| e["kind"] == "session_start"));
}

/// A terminal through the jump: the shell is recorded, its commands
/// audited, as any terminal session's.
#[test]
fn a_terminal_through_the_jump_is_recorded() {
    let b = Bastion::start();
    let line = stdout(&b.cli(&["pubkey", "--host-ca"]));
    let cfg = jump_config(&b, &line);
    let c = terminal_via(&cfg);
    let mut t = Terminal::spawn(&c, 24, 80);
    t.send("echo THROUGH-$((2*21))\r");
    t.expect("THROUGH-42");
    let row = b.wait_event(|e| e["kind"] == "command" && e["command"] == "echo THROUGH-$((2*21))");
    assert_eq!(row["user"], "bob");
    t.send("exit\r");
    t.wait();
    b.wait_kind("session_end");
    let session = &b.sessions()[0];
    let cast = std::fs::read_to_string(session["recording"].as_str().unwrap()).unwrap();
    assert!(cast.contains("THROUGH-42"));
}

/// The tools that ride on ssh, unchanged, through the jump: scp (SFTP
/// underneath), rsync, and git over ssh to a bare repository on the
/// target; each transfer in the audit.
#[test]
fn scp_rsync_and_git_go_through_the_jump() {
    let b = Bastion::start();
    let line = stdout(&b.cli(&["pubkey", "--host-ca"]));
    let cfg = jump_config(&b, &line);
    let dir = visible_dir();
    let src = dir.path().join("payload.txt");
    std::fs::write(&src, "carried through the jump\n").unwrap();
    let account = me();
    // scp
    let dest = dir.path().join("by-scp.txt");
    let out = Command::new("scp")
        .arg("-F")
        .arg(&cfg)
        .arg(&src)
        .arg(format!("{account}@web1:{}", dest.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&dest).unwrap(),
        "carried through the jump\n"
    );
    // rsync
    let dest = dir.path().join("by-rsync.txt");
    let out = Command::new("rsync")
        .arg("-e")
        .arg(format!("ssh -F {}", cfg.display()))
        .arg(&src)
        .arg(format!("{account}@web1:{}", dest.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&dest).unwrap(),
        "carried through the jump\n"
    );
    // git clone over ssh, from a bare repository on the target.
    let bare = dir.path().join("repo.git");
    let work = dir.path().join("work");
    let git = |args: &[&str], at: &std::path::Path| {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(at)
            .env("GIT_SSH_COMMAND", format!("ssh -F {}", cfg.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    };
    git(&["init", "--bare", bare.to_str().unwrap()], dir.path());
    git(&["init", work.to_str().unwrap()], dir.path());
    std::fs::write(work.join("README"), "jumped\n").unwrap();
    git(&["add", "README"], &work);
    git(&["commit", "-m", "first"], &work);
    git(
        &[
            "push",
            &format!("{account}@web1:{}", bare.display()),
            "main",
        ],
        &work,
    );
    let clone = dir.path().join("clone");
    git(
        &[
            "clone",
            &format!("{account}@web1:{}", bare.display()),
            clone.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(
        std::fs::read_to_string(clone.join("README")).unwrap(),
        "jumped\n"
    );
    let rows = b.audit();
    let via_jump = rows
        .iter()
        .filter(|e| e["kind"] == "session_start" && e["via"] == "jump")
        .count();
    assert!(via_jump >= 4, "{via_jump} sessions through the jump");
    assert!(
        rows.iter()
            .any(|e| e["kind"] == "subsystem" && e["name"] == "sftp")
    );
    assert!(rows.iter().any(|e| {
        e["kind"] == "exec"
            && e["command"]
                .as_str()
                .unwrap_or("")
                .starts_with("rsync --server")
    }));
    assert!(rows.iter().any(|e| {
        e["kind"] == "exec"
            && e["command"]
                .as_str()
                .unwrap_or("")
                .starts_with("git-upload-pack")
    }));
}

/// tess: bob's key, the `blind` target (`jump = "tunnel"`, the target's
/// real sshd behind it) and a forward to web1's SSH port.
const TESS: &str = "[[targets]]\nname = \"blind\"\nhost = \"127.0.0.1\"\nport = {sshd_port}\nuser = \"{me}\"\njump = \"tunnel\"\n\n[[users]]\nname = \"tess\"\nauthorized_keys = [\"{bob_pub}\"]\ntargets = [\"blind\", \"web1\"]\nforward = [\"web1:{sshd_port}\", \"127.0.0.*:{sshd_port}\"]\n";

fn tess() -> Bastion {
    Bastion::start_with(Opts {
        extra_toml: TESS.into(),
        ..Opts::default()
    })
}

/// `jump = "tunnel"`: the jump's bytes go to the target's own sshd
/// unread (the client sees its real host key and logs in there), and the
/// tunnel is audited with its bytes and duration, no session.
#[test]
fn a_tunnel_target_is_relayed_blind_and_audited() {
    let b = tess();
    let kh = b.dir.path().join("known_hosts_blind");
    let out = Command::new("ssh")
        .args(["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR"])
        .args(["-o", "StrictHostKeyChecking=accept-new", "-o"])
        .arg(format!("UserKnownHostsFile={}", kh.display()))
        .arg("-i")
        .arg(&b.bob_key)
        .arg("-o")
        .arg(format!(
            "ProxyCommand=ssh -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -i {} -p {} -W %h:%p tess@127.0.0.1",
            b.bob_key.display(),
            b.port
        ))
        .arg(format!("{}@blind", me()))
        .arg("echo BLIND-$((3*3))")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "BLIND-9\n", "{}", stderr(&out));
    let open = b.wait_kind("tunnel_open");
    assert_eq!(
        (
            open["via"].as_str(),
            open["target"].as_str(),
            open["to"].as_str()
        ),
        (Some("jump"), Some("blind"), Some("blind:22"))
    );
    let close = b.wait_kind("tunnel_close");
    assert!(close["bytes_in"].as_u64().unwrap() > 1000, "{close}");
    assert!(close["bytes_out"].as_u64().unwrap() > 1000, "{close}");
    assert!(close["duration_s"].as_f64().is_some());
    // Blind: no session of walissh's was opened for it.
    assert!(!b.audit().iter().any(|e| e["kind"] == "session_start"));
}

/// `[[users]] forward`: a forward the list allows goes through (here to
/// web1's sshd, whose banner comes back), named by a target or by an
/// address a glob names, and is audited as a tunnel with the address it
/// reached; a host name a glob would match is refused (the hostile
/// review of issue 36: it could resolve anywhere).
#[test]
fn local_forwards_go_by_the_users_list() {
    let b = tess();
    let sshd = b.sshd.port;
    let tess_w = |to: &str| {
        Command::new("ssh")
            .args([
                "-o",
                "BatchMode=yes",
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                "LogLevel=ERROR",
            ])
            .args([
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
            ])
            .arg("-i")
            .arg(&b.bob_key)
            .arg("-p")
            .arg(b.port.to_string())
            .arg("-W")
            .arg(to)
            .arg("tess@127.0.0.1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut allowed = tess_w(&format!("web1:{sshd}"));
    let mut banner = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(allowed.stdout.as_mut().unwrap()),
        &mut banner,
    )
    .unwrap();
    assert!(banner.starts_with("SSH-2.0-OpenSSH"), "{banner:?}");
    drop(allowed.stdin.take());
    let _ = allowed.kill();
    let _ = allowed.wait();
    let open = b.wait_kind("tunnel_open");
    assert_eq!(
        (open["via"].as_str(), open["to"].as_str()),
        (Some("forward"), Some(format!("web1:{sshd}").as_str()))
    );
    assert_eq!(open["address"], format!("127.0.0.1:{sshd}").as_str());
    b.wait_kind("tunnel_close");
    // An address the glob names goes through...
    let mut by_address = tess_w(&format!("127.0.0.1:{sshd}"));
    let mut banner = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(by_address.stdout.as_mut().unwrap()),
        &mut banner,
    )
    .unwrap();
    assert!(banner.starts_with("SSH-2.0-OpenSSH"), "{banner:?}");
    let _ = by_address.kill();
    let _ = by_address.wait();
    // ... a name never does, whatever it resolves to: the glob is over
    // addresses, and a name is looked up after the check.
    let refused = tess_w(&format!("localhost:{sshd}"))
        .wait_with_output()
        .unwrap();
    assert_ne!(refused.status.code(), Some(0));
    let row = b.wait_kind("forward_denied");
    assert_eq!(row["detail"], format!("localhost:{sshd}").as_str());
}

/// One connection, several channels in turn, from the automation
/// libraries: asyncssh (PyPI) and paramiko each run three commands, an
/// SFTP transfer and one more command over one connection to walissh.
#[test]
fn several_channels_on_one_connection_from_asyncssh_and_paramiko() {
    let b = Bastion::start();
    let dir = visible_dir();
    let script = format!(
        "{}/tests/interop/several_channels.py",
        env!("CARGO_MANIFEST_DIR")
    );
    for lib in ["paramiko", "asyncssh"] {
        let file = dir.path().join(format!("{lib}.txt"));
        let out = Command::new("python3")
            .arg(&script)
            .args(["--lib", lib])
            .arg(b.port.to_string())
            .arg("bob:web1")
            .arg(&b.bob_key)
            .arg(&file)
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{lib}: {e}: {}{}", stdout(&out), stderr(&out)));
        assert_eq!(
            report["runs"],
            serde_json::json!(["RUN-0", "RUN-1", "RUN-2", "AFTER"]),
            "{lib}: {report}\n{}",
            stderr(&out)
        );
        assert_eq!(report["sftp"], "over sftp\n", "{lib}: {report}");
    }
}

/// `ssh -L` to a real PostgreSQL through walissh: psql runs a query
/// over the forward the user's list allows, and the forward is audited
/// with its bytes.
#[test]
fn psql_through_an_ssh_l_forward() {
    if !is_root() {
        eprintln!("skipped: running PostgreSQL as its own account needs root (CI runs as root)");
        return;
    }
    let pg_port = free_port();
    let Some(_pg) = Postgres::start(pg_port) else {
        eprintln!("skipped: no PostgreSQL server (tools/test-peers installs it)");
        return;
    };
    let b = Bastion::start_with(Opts {
        extra_toml: format!(
            "[[targets]]\nname = \"db1\"\nhost = \"127.0.0.1\"\nuser = \"postgres\"\n\n[[users]]\nname = \"pia\"\nauthorized_keys = [\"{{bob_pub}}\"]\ntargets = [\"db1\"]\nforward = [\"db1:{pg_port}\"]\n"
        ),
        ..Opts::default()
    });
    let local = free_port();
    let mut tunnel = Command::new("ssh")
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "LogLevel=ERROR",
        ])
        .args([
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
        ])
        .args(["-o", "ExitOnForwardFailure=yes", "-N", "-L"])
        .arg(format!("127.0.0.1:{local}:db1:{pg_port}"))
        .arg("-i")
        .arg(&b.bob_key)
        .arg("-p")
        .arg(b.port.to_string())
        .arg("pia@127.0.0.1")
        .spawn()
        .unwrap();
    wait_until(
        || std::net::TcpStream::connect(("127.0.0.1", local)).is_ok(),
        "the local end of the forward",
    );
    let out = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-tA",
            "-c",
        ])
        .arg("select 6 * 7")
        .arg("-p")
        .arg(local.to_string())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "42\n", "{}", stderr(&out));
    let _ = tunnel.kill();
    let _ = tunnel.wait();
    let open = b.wait_kind("tunnel_open");
    assert_eq!(open["to"], format!("db1:{pg_port}").as_str());
    assert_eq!(open["user"], "pia");
    // The first forwarded connection was the test's own probe of the local
    // port (nothing sent); psql's is the second.
    let closes = b.wait_count("tunnel_close", 2);
    let psql = closes
        .iter()
        .find(|c| c["bytes_out"].as_u64().unwrap_or(0) > 0)
        .unwrap_or_else(|| panic!("no tunnel carried psql's bytes: {closes:?}"));
    assert!(psql["bytes_in"].as_u64().unwrap() > 0, "{psql}");
}

/// Ansible (ansible-core from PyPI), unchanged: an ad-hoc command and a
/// two-task playbook, once through the jump (`-F` with ProxyJump) and once
/// straight at the bastion as `ansible_user=bob:web1`. Every task runs on
/// the target through a walissh session: its exec rows are in the audit,
/// and its module's report (which names the command) in the recordings.
#[test]
fn ansible_through_the_jump_and_straight_at_the_bastion() {
    if Command::new("ansible").arg("--version").output().is_err() {
        eprintln!("skipped: no ansible (tools/test-peers installs ansible-core)");
        return;
    }
    let b = Bastion::start();
    let line = stdout(&b.cli(&["pubkey", "--host-ca"]));
    let cfg = jump_config(&b, &line);
    let dir = b.dir.path();
    let inventory = dir.join("inventory");
    std::fs::write(
        &inventory,
        format!(
            "[jumped]\nweb1 ansible_user={me} ansible_ssh_common_args='-F {cfg}'\n\n\
             [straight]\nbastion ansible_host=127.0.0.1 ansible_port={port} ansible_user=bob:web1 ansible_ssh_private_key_file={key} ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o BatchMode=yes'\n\n\
             [all:vars]\nansible_python_interpreter=/usr/bin/python3\n",
            me = me(),
            cfg = cfg.display(),
            port = b.port,
            key = b.bob_key.display(),
        ),
    )
    .unwrap();
    let playbook = dir.join("play.yml");
    std::fs::write(
        &playbook,
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - command: uname -s\n      register: kernel\n    - command: echo PLAYED-{{ kernel.stdout }}\n      register: played\n    - debug: var=played.stdout\n",
    )
    .unwrap();
    let ansible = |program: &str, args: &[&str]| {
        let out = Command::new(program)
            .args(args)
            .env(
                "ANSIBLE_PIPELINING",
                if args.iter().any(|a| a.contains("PIPED")) {
                    "True"
                } else {
                    "False"
                },
            )
            .arg("-i")
            .arg(&inventory)
            .env("ANSIBLE_HOST_KEY_CHECKING", "False")
            .env("ANSIBLE_LOCAL_TEMP", dir.join("ansible-local"))
            .env("ANSIBLE_SSH_CONTROL_PATH_DIR", dir.join("cp"))
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_FORCE_COLOR", "0")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}:\n{}{}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    };
    let adhoc = ansible("ansible", &["all", "-m", "command", "-a", "uname -s"]);
    assert_eq!(
        adhoc.matches("CHANGED | rc=0 >>\nLinux").count(),
        2,
        "{adhoc}"
    );
    let played = ansible("ansible-playbook", &[playbook.to_str().unwrap()]);
    assert_eq!(
        played
            .matches("\"played.stdout\": \"PLAYED-Linux\"")
            .count(),
        2,
        "{played}"
    );
    let rows = b.audit();
    let starts: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|e| e["kind"] == "session_start" && e["user"] == "bob")
        .collect();
    assert!(
        starts.iter().any(|e| e["via"] == "jump"),
        "no session through the jump"
    );
    assert!(
        starts.iter().any(|e| e["via"].is_null()),
        "no session straight at the bastion"
    );
    assert!(rows.iter().any(|e| e["kind"] == "exec"
        && e["command"].as_str().unwrap_or("").contains("python3")));
    // Every task's command is a row of its own, from the module's report.
    let tasks = |command: &str| {
        rows.iter()
            .filter(|e| e["kind"] == "ansible_task" && e["command"] == command)
            .inspect(|e| {
                assert_eq!(e["module"], "command", "{e}");
                assert_eq!(e["user"], "bob", "{e}");
                assert_eq!(e["target"], "web1", "{e}");
                assert_eq!(e["rc"], 0, "{e}");
            })
            .count()
    };
    assert_eq!(tasks("uname -s"), 4, "ad-hoc and playbook, both ways");
    assert_eq!(tasks("echo PLAYED-Linux"), 2);
    // Pipelined (the payload on stdin), the module is not named, the
    // command still is.
    let piped = ansible("ansible", &["all", "-m", "shell", "-a", "echo PIPED"]);
    assert_eq!(piped.matches("PIPED").count(), 2, "{piped}");
    let rows = b.audit();
    let piped: Vec<_> = rows
        .iter()
        .filter(|e| e["kind"] == "ansible_task" && e["command"] == "echo PIPED")
        .collect();
    assert_eq!(piped.len(), 2, "{piped:?}");
    assert!(
        piped
            .iter()
            .all(|e| e["module"].is_null() && e["args"]["_uses_shell"] == true)
    );
    // The module's report, recorded with its exec's output, names each
    // task's command.
    let recorded: String = b
        .sessions()
        .iter()
        .filter_map(|s| s["recording"].as_str())
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    for command in ["uname", "PLAYED-Linux"] {
        assert!(recorded.contains(command), "{command} not recorded");
    }
}

/// Stopping a session that came through the jump ends the outer
/// connection too: a multiplexing client (ControlMaster on the bastion)
/// cannot open another jump on it without logging in again.
#[test]
fn stopping_a_jumped_session_ends_the_outer_connection() {
    let b = Bastion::start();
    let line = stdout(&b.cli(&["pubkey", "--host-ca"]));
    let cfg = jump_config(&b, &line);
    let sock = b.dir.path().join("outer.sock");
    let text = std::fs::read_to_string(&cfg).unwrap().replacen(
        "Host bastion\n",
        &format!(
            "Host bastion\n  ControlMaster auto\n  ControlPath {}\n  ControlPersist 60\n",
            sock.display()
        ),
        1,
    );
    std::fs::write(&cfg, text).unwrap();
    let c = terminal_via(&cfg);
    let mut t = Terminal::spawn(&c, 24, 80);
    t.send("echo INNER-$((5*5))\r");
    t.expect("INNER-25");
    let id = b.wait_kind("session_start")["session"]
        .as_str()
        .unwrap()
        .to_string();
    let check = || {
        Command::new("ssh")
            .arg("-F")
            .arg(&cfg)
            .args(["-O", "check", "bastion"])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(check(), "the outer connection is not shared");
    b.cli(&["sessions", "kill", &id, "--reason", "jump review"]);
    t.expect("this session was ended by an administrator: jump review");
    t.wait();
    wait_until(|| !check(), "the outer connection to end");
}

/// Nothing listens for the inner server: while a jump is open, walissh
/// listens on its SSH port and nowhere else, so no direct connection can
/// reach the server that takes logins without a credential.
#[test]
fn the_inner_server_has_no_port() {
    let b = Bastion::start();
    let line = stdout(&b.cli(&["pubkey", "--host-ca"]));
    let cfg = jump_config(&b, &line);
    let c = terminal_via(&cfg);
    let mut t = Terminal::spawn(&c, 24, 80);
    t.send("echo OPEN-$((4*4))\r");
    t.expect("OPEN-16");
    let out = Command::new("ss").args(["-Hltnp"]).output().unwrap();
    let pid = format!("pid={},", b.pid());
    let ports: Vec<String> = stdout(&out)
        .lines()
        .filter(|l| l.contains(&pid))
        .filter_map(|l| l.split_whitespace().nth(3))
        .map(|a| a.rsplit(':').next().unwrap_or("").to_string())
        .collect();
    assert_eq!(ports, [b.port.to_string()], "{}", stdout(&out));
    t.send("exit\r");
    t.wait();
}

/// rita: bob's key, and `rf`, the target's real sshd with
/// `remote_forward = true`, besides web1 (which keeps `-R` refused).
const RITA: &str = "[[targets]]\nname = \"rf\"\nhost = \"127.0.0.1\"\nport = {sshd_port}\nuser = \"{me}\"\nremote_forward = true\n\n[[users]]\nname = \"rita\"\nauthorized_keys = [\"{bob_pub}\"]\ntargets = [\"rf\", \"web1\"]\n";

/// A server on loopback that answers each connection's first line with
/// `ECHO:` and the line: its port.
fn echo_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut line = String::new();
            let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
            if std::io::BufRead::read_line(&mut reader, &mut line).is_ok() {
                let _ = std::io::Write::write_all(&mut conn, format!("ECHO:{line}").as_bytes());
            }
        }
    });
    port
}

/// `ssh -R 127.0.0.1:LISTEN:127.0.0.1:LOCAL` with bob's key, logging in
/// as `login` (`extra` options first, such as `-N`), failing when the
/// forward is refused.
fn ssh_r(b: &Bastion, login: &str, (listen, local): (u16, u16), extra: &[&str]) -> Command {
    let mut c = b.ssh_base();
    c.args(extra)
        .args(["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes"])
        .args(["-o", "ExitOnForwardFailure=yes", "-R"])
        .arg(format!("127.0.0.1:{listen}:127.0.0.1:{local}"))
        .arg("-i")
        .arg(&b.bob_key)
        .arg(format!("{login}@127.0.0.1"))
        .stdin(std::process::Stdio::null());
    c
}

/// What a command on the target prints after sending `hello` to
/// `127.0.0.1:port` there.
fn call_on_target(port: u16) -> String {
    format!(
        "python3 -c \"import socket;s=socket.create_connection(('127.0.0.1',{port}));s.sendall(b'hello\\n');print(s.makefile().readline().strip())\""
    )
}

/// `ssh -R` where a target opts in (`remote_forward = true`): the target
/// itself listens, and a connection made there reaches the client's side
/// through walissh, audited as a tunnel (`via = "remote"`), straight at
/// the bastion and through the jump; a target that does not opt in
/// refuses it, audited as before.
#[test]
fn remote_forwards_go_where_a_target_opts_in() {
    let b = Bastion::start_with(Opts {
        extra_toml: RITA.into(),
        ..Opts::default()
    });
    let local = echo_server();
    let straight = |dest: &str, listen: u16| {
        ssh_r(&b, dest, (listen, local), &[])
            .arg(call_on_target(listen))
            .output()
            .unwrap()
    };
    let port = free_port();
    let out = straight("rita:rf", port);
    assert_eq!(stdout(&out), "ECHO:hello\n", "{}", stderr(&out));
    let open = b.wait_kind("tunnel_open");
    assert_eq!(
        (
            open["via"].as_str(),
            open["target"].as_str(),
            open["user"].as_str()
        ),
        (Some("remote"), Some("rf"), Some("rita"))
    );
    assert_eq!(open["to"], format!("127.0.0.1:{port}").as_str());
    assert!(
        open["address"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{open}"
    );
    let close = b.wait_kind("tunnel_close");
    assert_eq!(close["bytes_in"], 11, "{close}");
    assert_eq!(close["bytes_out"], 6, "{close}");
    // Through the jump, as the inner login's account.
    let line = stdout(&b.cli(&["pubkey", "--host-ca"]));
    let cfg = jump_config(&b, &line);
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replacen("User bob", "User rita", 1);
    std::fs::write(&cfg, text).unwrap();
    let port = free_port();
    let out = Command::new("ssh")
        .arg("-F")
        .arg(&cfg)
        .args(["-o", "ExitOnForwardFailure=yes", "-R"])
        .arg(format!("127.0.0.1:{port}:127.0.0.1:{local}"))
        .arg(format!("{}@rf", me()))
        .arg(call_on_target(port))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "ECHO:hello\n", "{}", stderr(&out));
    b.wait_event(|e| {
        e["kind"] == "tunnel_open"
            && e["via"] == "remote"
            && e["to"] == format!("127.0.0.1:{port}").as_str()
    });
    // web1 does not opt in: the forward is refused, and the command
    // never runs (ExitOnForwardFailure).
    let port = free_port();
    let out = straight("rita:web1", port);
    assert_ne!(out.status.code(), Some(0));
    assert!(!stdout(&out).contains("ECHO"));
    let refused =
        b.wait_event(|e| e["kind"] == "forward_denied" && e["forward"] == "tcpip-forward");
    assert_eq!(refused["detail"], format!("127.0.0.1:{port}").as_str());
    // Each forward is framed in the audit, with how it ended.
    let closed = b.wait_event(|e| e["kind"] == "remote_forward_close" && e["connections"] == 1);
    assert_eq!(closed["reason"], "connection_closed", "{closed}");
    assert!(
        b.audit()
            .iter()
            .any(|e| e["kind"] == "remote_forward_open" && e["target"] == "rf")
    );
}

/// A remote forward held open (`ssh -N -R`) ends when its user's key is
/// revoked: the next connection to it is refused on the target and the
/// target's login ends, audited with why.
#[test]
fn a_remote_forward_ends_when_its_key_is_revoked() {
    let b = Bastion::start_with(Opts {
        extra_toml: RITA.into(),
        ..Opts::default()
    });
    let local = echo_server();
    let port = free_port();
    let mut held = ssh_r(&b, "rita:rf", (port, local), &["-N"])
        .spawn()
        .unwrap();
    b.wait_kind("remote_forward_open");
    let call = || -> String {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            return "refused".into();
        };
        let _ = std::io::Write::write_all(&mut s, b"hello\n");
        let mut reply = String::new();
        let _ = std::io::Read::read_to_string(&mut s, &mut reply);
        reply
    };
    assert_eq!(call(), "ECHO:hello\n");
    // rita's key is replaced by another one.
    let bob_pub = std::fs::read_to_string(b.bob_key.with_extension("pub")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let other = keygen(&dir.path().join("other"));
    let text = std::fs::read_to_string(&b.config).unwrap();
    let was = format!(
        "name = \"rita\"\nauthorized_keys = [\"{}\"]",
        bob_pub.trim()
    );
    assert!(text.contains(&was), "{text}");
    let now = format!("name = \"rita\"\nauthorized_keys = [\"{other}\"]");
    std::fs::write(&b.config, text.replacen(&was, &now, 1)).unwrap();
    assert!(b.reload().contains("config reloaded"));
    assert_ne!(call(), "ECHO:hello\n");
    let closed = b.wait_kind("remote_forward_close");
    assert_eq!(closed["reason"], "credentials_revoked", "{closed}");
    assert_eq!(closed["connections"], 1, "{closed}");
    // The target no longer listens there.
    wait_until(|| call() == "refused", "the target to stop listening");
    let _ = held.kill();
    let _ = held.wait();
}

/// Exit statuses reach a ControlMaster client: OpenSSH's master may close
/// a session once both EOFs have passed, so walissh sends the target's
/// EOF with its exit status, never before it (under load, `ssh` through a
/// master exited 255 now and then, and Ansible said "Data could not be
/// sent"). Sixty commands fed 120 kB each through one master, each
/// exiting 0.
#[test]
fn exit_statuses_reach_a_control_master_client() {
    let b = Bastion::start();
    let input = vec![b'x'; 120_000];
    let cp = b.dir.path().join("cm-%C");
    let mux = || {
        let mut c = b.ssh_bob("bob:web1");
        c.args(["-o", "ControlMaster=auto", "-o", "ControlPersist=30s", "-o"])
            .arg(format!("ControlPath={}", cp.display()));
        c
    };
    let mut failed = Vec::new();
    for i in 0..30 {
        for command in ["dd of=/dev/null bs=65536", "/bin/sh -c 'wc -c && sleep 0'"] {
            let out = run(with(mux(), command), &input);
            if out.status.code() != Some(0) {
                failed.push((i, command, out.status.code(), stderr(&out)));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:?}");
    let _ = Command::new("ssh")
        .args(["-O", "exit", "-o"])
        .arg(format!("ControlPath={}", cp.display()))
        .arg("127.0.0.1")
        .output();
}
