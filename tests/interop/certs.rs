//! OpenSSH certificates both ways: user certificates made by
//! `ssh-keygen -s` (good, expired, for another principal, revoked in a KRL
//! made by `ssh-keygen -k`, from an unknown CA, with critical options)
//! presented by the real `ssh`; and walissh's own short-lived
//! certificates accepted by a real sshd that trusts its CA.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::*;

/// A CA, keys and certificates made by ssh-keygen in a directory.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        let pki = Pki {
            dir: tempfile::tempdir().unwrap(),
        };
        keygen(&pki.path("ca"));
        keygen(&pki.path("other_ca"));
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn ca_line(&self) -> String {
        std::fs::read_to_string(self.path("ca.pub"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// A new key `name` and its certificate from `ca`, made with
    /// `ssh-keygen -s ca -I id ...` and `extra` options.
    fn issue(
        &self,
        name: &str,
        ca: &str,
        id: &str,
        principals: &str,
        serial: u64,
        extra: &[&str],
    ) -> PathBuf {
        let key = self.path(name);
        keygen(&key);
        let out = Command::new("ssh-keygen")
            .arg("-q")
            .arg("-s")
            .arg(self.path(ca))
            .args(["-I", id, "-n", principals, "-z", &serial.to_string()])
            .args(extra)
            .arg(self.path(&format!("{name}.pub")))
            .output()
            .unwrap();
        assert!(out.status.success(), "ssh-keygen -s: {}", stderr(&out));
        key
    }

    /// A KRL revoking `spec` (ssh-keygen -k's spec lines) under the CA.
    fn revoke(&self, spec: &str, update: bool) -> PathBuf {
        let (krl, specfile) = (self.path("revoked.krl"), self.path("revoked.spec"));
        std::fs::write(&specfile, spec).unwrap();
        let mut c = Command::new("ssh-keygen");
        c.arg("-k")
            .arg("-f")
            .arg(&krl)
            .arg("-s")
            .arg(self.path("ca.pub"));
        if update {
            c.arg("-u");
        }
        let out = c.arg(&specfile).output().unwrap();
        assert!(out.status.success(), "ssh-keygen -k: {}", stderr(&out));
        krl
    }
}

/// gina logs in by her name as principal; hank by the principal "ops".
/// The CAs trusted: the PKI's `ca`.
fn cert_bastion(pki: &Pki, krl: &Path) -> Bastion {
    cert_bastion_trusting(&[pki.ca_line()], krl)
}

/// `cert_bastion` trusting the CA key lines `cas`.
fn cert_bastion_trusting(cas: &[String], krl: &Path) -> Bastion {
    let cas: Vec<String> = cas.iter().map(|k| format!("\"{}\"", k.trim())).collect();
    Bastion::start_with(Opts {
        extra_toml: format!(
            "[auth]\nuser_ca_keys = [{}]\nrevoked_keys = \"{}\"\n\n\
             [[users]]\nname = \"gina\"\ntargets = [\"web1\"]\n\n\
             [[users]]\nname = \"hank\"\ntargets = [\"web1\"]\nprincipals = [\"ops\"]\n",
            cas.join(", "),
            krl.display()
        ),
        ..Opts::default()
    })
}

/// `ssh` with a certificate only (no plain key to fall back on).
fn ssh_cert(b: &Bastion, key: &Path, login: &str) -> Command {
    let mut c = b.ssh_base();
    c.args([
        "-o",
        "BatchMode=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "PubkeyAcceptedAlgorithms=ssh-ed25519-cert-v01@openssh.com",
        "-i",
    ])
    // ssh takes KEY-cert.pub beside the key.
    .arg(key)
    .arg(format!("{login}@127.0.0.1"));
    c
}

/// Logs in with the certificate of `key` and runs `echo WORD`.
fn let_in(b: &Bastion, key: &Path, login: &str, word: &str) {
    let out = exec(ssh_cert(b, key, login), format!("echo {word}"));
    assert_eq!(
        stdout(&out),
        format!("{word}\n"),
        "stderr: {}",
        stderr(&out)
    );
}

fn refused_for(b: &Bastion, key: &Path, login: &str, reason: &str) {
    let out = exec(ssh_cert(b, key, login), "echo should-not-run");
    assert_eq!(out.status.code(), Some(255), "{}", stdout(&out));
    let user = login.split(':').next().unwrap().to_string();
    let fail = b.wait_event(|e| {
        e["kind"] == "auth_fail" && e["user"] == user.as_str() && e["reason"] == reason
    });
    assert_eq!(fail["method"], "publickey");
}

#[test]
fn a_certificate_lets_its_principal_in_and_is_audited() {
    let pki = Pki::new();
    let krl = pki.revoke("serial: 13\n", false);
    let b = cert_bastion(&pki, &krl);
    let key = pki.issue("gina", "ca", "gina@laptop", "gina", 7, &["-V", "-5m:+1h"]);
    let out = exec(ssh_cert(&b, &key, "gina:web1"), "echo cert-$((6*7))");
    assert_eq!(stdout(&out), "cert-42\n", "stderr: {}", stderr(&out));
    let ok = b.wait_event(|e| e["kind"] == "auth_ok" && e["user"] == "gina");
    assert_eq!(ok["method"], "publickey");
    assert_eq!(ok["factors"], serde_json::json!(["publickey"]));
    assert_eq!(ok["key_id"], "gina@laptop");
    assert_eq!(ok["serial"], 7);
    assert!(ok["ca"].as_str().unwrap().starts_with("SHA256:"), "{ok}");

    // hank is whoever holds a certificate for "ops".
    let key = pki.issue("ops", "ca", "oncall-rota", "ops,backup", 8, &[]);
    let_in(&b, &key, "hank:web1", "ops-in");
    // ...and a certificate naming "hank" is not one for him.
    let key = pki.issue("hank", "ca", "hank", "hank", 9, &[]);
    refused_for(&b, &key, "hank:web1", "wrong_principal");
}

#[test]
fn expired_and_misaddressed_certificates_are_refused() {
    let pki = Pki::new();
    let krl = pki.revoke("serial: 13\n", false);
    let b = cert_bastion(&pki, &krl);
    let key = pki.issue(
        "old",
        "ca",
        "gina-2020",
        "gina",
        1,
        &["-V", "20200101:20200102"],
    );
    refused_for(&b, &key, "gina:web1", "certificate_expired");
    let key = pki.issue("other", "ca", "someone", "someone-else", 2, &[]);
    refused_for(&b, &key, "gina:web1", "wrong_principal");
    assert!(b.audit().iter().all(|e| e["kind"] != "auth_ok"));
}

#[test]
fn revoked_certificates_and_unknown_cas_are_refused() {
    let pki = Pki::new();
    let krl = pki.revoke("serial: 13\n", false);
    let b = cert_bastion(&pki, &krl);
    let key = pki.issue("revoked", "ca", "gina-lost-laptop", "gina", 13, &[]);
    refused_for(&b, &key, "gina:web1", "certificate_revoked");
    let key = pki.issue("stranger", "other_ca", "gina", "gina", 1, &[]);
    refused_for(&b, &key, "gina:web1", "unknown_ca");

    // A serial revoked later is refused after a reload.
    let key = pki.issue("soon", "ca", "gina-desktop", "gina", 21, &[]);
    let_in(&b, &key, "gina:web1", "before-revocation");
    pki.revoke("serial: 21\n", true);
    assert!(b.reload().contains("config reloaded"));
    let out = exec(ssh_cert(&b, &key, "gina:web1"), "echo after-revocation");
    assert_eq!(out.status.code(), Some(255), "{}", stdout(&out));
}

#[test]
fn source_address_and_force_command_are_honoured() {
    let pki = Pki::new();
    let krl = pki.revoke("serial: 13\n", false);
    let b = cert_bastion(&pki, &krl);
    let key = pki.issue(
        "away",
        "ca",
        "gina-vpn",
        "gina",
        3,
        &["-O", "source-address=10.9.9.0/24"],
    );
    refused_for(&b, &key, "gina:web1", "source_address");
    let key = pki.issue(
        "here",
        "ca",
        "gina-lo",
        "gina",
        4,
        &["-O", "source-address=10.9.9.0/24,127.0.0.0/8"],
    );
    let_in(&b, &key, "gina:web1", "from-loopback");

    // force-command: whatever is asked, the certificate's command runs.
    let key = pki.issue(
        "forced",
        "ca",
        "gina-report",
        "gina",
        5,
        &["-O", "force-command=echo forced-$((1+1))"],
    );
    let out = exec(ssh_cert(&b, &key, "gina:web1"), "echo asked-for");
    assert_eq!(stdout(&out), "forced-2\n", "stderr: {}", stderr(&out));
    let ran = b.wait_event(|e| {
        e["kind"] == "exec" && e["user"] == "gina" && e["command"] == "echo forced-$((1+1))"
    });
    assert_eq!(ran["target"], "web1");

    // Without permit-pty there is no terminal, even when one is asked for.
    let tty = |key: &Path| {
        let mut c = ssh_cert(&b, key, "gina:web1");
        c.arg("-tt");
        let out = exec(c, "tty >/dev/null && echo terminal || echo no-terminal");
        stdout(&out).trim().to_string()
    };
    let key = pki.issue("pty", "ca", "gina-term", "gina", 10, &[]);
    assert_eq!(tty(&key), "terminal");
    let key = pki.issue("nopty", "ca", "gina-batch", "gina", 6, &["-O", "no-pty"]);
    assert_eq!(tty(&key), "no-terminal");
}

#[test]
fn targets_trust_the_bastions_ca_instead_of_its_key() {
    let b = Bastion::start_with(Opts {
        upstream_ca: true,
        ..Opts::default()
    });
    let out = exec(b.ssh_bob("bob:web1"), "echo via-certificate");
    assert_eq!(
        stdout(&out),
        "via-certificate\n",
        "stderr: {}",
        stderr(&out)
    );
    let start = b.wait_event(|e| e["kind"] == "session_start" && e["user"] == "bob");
    let session = start["session"].as_str().unwrap().to_string();
    // The target's sshd names the bastion user and the session.
    let line = b
        .sshd
        .log
        .wait_line_from(&[&format!("ID walissh:bob:{session}")], 0);
    assert!(
        line.contains("Accepted publickey") && line.contains("ED25519-CERT"),
        "{line}"
    );
    // The CA line is what `walissh pubkey --ca` prints, and the identity
    // key (not in the target's authorized_keys) was not what let it in.
    let ca = stdout(&b.cli(&["pubkey", "--ca"]));
    assert!(
        ca.starts_with("ssh-ed25519 ") && ca.trim_end().ends_with(" walissh-ca"),
        "{ca}"
    );
    let identity = stdout(&b.cli(&["pubkey"]));
    assert_ne!(
        ca.split_whitespace().nth(1),
        identity.split_whitespace().nth(1)
    );
}

/// A CA's RSA signature with SHA-1 (`ssh-keygen -t ssh-rsa`) is refused,
/// as sshd's default CASignatureAlgorithms refuses it; with SHA-512 the
/// same CA is fine.
#[test]
fn sha1_signatures_by_an_rsa_ca_are_refused() {
    let pki = Pki::new();
    let st = Command::new("ssh-keygen")
        .args([
            "-q", "-t", "rsa", "-b", "2048", "-N", "", "-C", "rsa-ca", "-f",
        ])
        .arg(pki.path("rsa_ca"))
        .status()
        .unwrap();
    assert!(st.success());
    let rsa_ca = std::fs::read_to_string(pki.path("rsa_ca.pub")).unwrap();
    let krl = pki.revoke("serial: 13\n", false);
    let b = cert_bastion_trusting(&[pki.ca_line(), rsa_ca], &krl);
    let key = pki.issue(
        "sha1",
        "rsa_ca",
        "gina-old-ca",
        "gina",
        1,
        &["-t", "ssh-rsa"],
    );
    refused_for(&b, &key, "gina:web1", "weak_ca_signature");
    let key = pki.issue(
        "sha512",
        "rsa_ca",
        "gina-new-ca",
        "gina",
        2,
        &["-t", "rsa-sha2-512"],
    );
    let_in(&b, &key, "gina:web1", "sha512-ok");
}

/// `ssh -A`: the user's agent reaches the target only for users with
/// `agent_forwarding = true`; for others it is refused and audited.
#[test]
fn the_agent_is_forwarded_only_for_users_who_may() {
    let b = Bastion::start_with(Opts {
        extra_toml: "[[users]]\nname = \"kim\"\nauthorized_keys = [\"{bob_pub}\"]\n\
                     targets = [\"web1\"]\nagent_forwarding = true\n"
            .into(),
        ..Opts::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("agent.sock");
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&sock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let added = loop {
        let out = Command::new("ssh-add")
            .arg(&b.bob_key)
            .env("SSH_AUTH_SOCK", &sock)
            .output()
            .unwrap();
        // ssh-add fails until the agent listens.
        if out.status.success() || agent.try_wait().unwrap().is_some() {
            break out;
        }
    };
    assert!(added.status.success(), "{}", stderr(&added));
    let forwarded = |login: &str| {
        let mut c = b.ssh_bob(login);
        c.env("SSH_AUTH_SOCK", &sock).arg("-A");
        exec(c, "ssh-add -l; echo agent-exit=$?")
    };
    let out = forwarded("kim:web1");
    assert!(
        stdout(&out).contains("(ED25519)"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("agent-exit=0"), "{}", stdout(&out));
    let start = b.wait_event(|e| e["kind"] == "session_start" && e["user"] == "kim");
    assert_eq!(start["agent_forwarding"], true);

    let out = forwarded("bob:web1");
    assert!(!stdout(&out).contains("(ED25519)"), "{}", stdout(&out));
    assert!(stdout(&out).contains("agent-exit=2"), "{}", stdout(&out));
    let denied = b.wait_event(|e| e["kind"] == "forward_denied" && e["user"] == "bob");
    assert_eq!(denied["forward"], "agent");
    let start = b.wait_event(|e| e["kind"] == "session_start" && e["user"] == "bob");
    assert_eq!(start["agent_forwarding"], false);
    let _ = agent.kill();
    let _ = agent.wait();
}

/// Mistakes in `[auth]` are named by file, line and key, before anything
/// runs: a CA that is not a key, a revocation list that cannot be read or
/// parsed, a user's method the bastion does not offer, MFA without the
/// prompt that asks for it.
#[test]
fn auth_mistakes_are_located_by_check_config() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.krl");
    std::fs::write(&garbage, "SSHKRL\n\0 not really").unwrap();
    let user = "[[users]]\nname = \"u\"\npassword_hash = \"x\"\n";
    let cases = [
        (
            "[server]\nstate_dir = \"/tmp/x\"\n\n[auth]\nuser_ca_keys = [\"/no/such/ca.pub\"]\n"
                .to_string(),
            "FILE:5: key `auth.user_ca_keys`:",
        ),
        (
            format!("[auth]\nrevoked_keys = \"{}\"\n", garbage.display()),
            "FILE:2: key `auth.revoked_keys`:",
        ),
        (
            format!("[auth]\nmethods = [\"publickey\"]\n\n{user}auth = [\"password\"]\n"),
            "key `users.auth`: `password` is not among [auth] methods",
        ),
        (
            format!("[auth]\nmethods = [\"publickey\", \"password\"]\n\n{user}mfa = \"totp\"\n"),
            "key `users.mfa`: mfa = \"totp\" needs keyboard-interactive",
        ),
    ];
    for (config, expected) in cases {
        let config = config.replace(
            "password_hash = \"x\"",
            &format!("password_hash = \"{}\"", hash_of("pw")),
        );
        let (code, err) = check_config(&config);
        assert_eq!(code, Some(1), "{config}\n{err}");
        assert!(
            err.contains(expected),
            "{config}\nexpected {expected:?} in:\n{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
