//! Second factors: TOTP codes at keyboard-interactive prompts, answered by
//! the real `ssh` (at a terminal and through SSH_ASKPASS) and by `plink`,
//! with codes computed by `oathtool` (an implementation that is not
//! walissh's); the partial-success rules driven step by step with a russh
//! client; and `[auth] methods` / `auth`.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::sync::Arc;

use russh::client::KeyboardInteractiveAuthResponse as Kbd;
use russh::keys::PrivateKeyWithHashAlg;

use crate::harness::*;

pub const ERIN_PW: &str = "erin-second-factor";

/// erin: password and TOTP; frank: bob's key and TOTP; gail: password,
/// TOTP, never enrolled.
fn mfa_bastion(more: &str) -> Bastion {
    let erin = hash_of(ERIN_PW);
    Bastion::start_with(Opts {
        extra_toml: format!(
            "[[users]]\nname = \"erin\"\npassword_hash = \"{erin}\"\ntargets = [\"web1\"]\nmfa = \"totp\"\n\n\
             [[users]]\nname = \"frank\"\nauthorized_keys = [\"{{bob_pub}}\"]\ntargets = [\"web1\"]\nmfa = \"totp\"\n\n\
             [[users]]\nname = \"gail\"\npassword_hash = \"{erin}\"\ntargets = [\"web1\"]\nmfa = \"totp\"\n\n{more}"
        ),
        ..Opts::default()
    })
}

/// Enrols `user` and returns the base32 secret of the URI printed.
fn enroll(b: &Bastion, user: &str) -> String {
    let out = b.cli(&["totp", "enroll", user]);
    let text = stdout(&out);
    let uri = text.lines().next().unwrap();
    assert!(
        uri.starts_with(&format!("otpauth://totp/walissh:{user}?")),
        "{text}"
    );
    // The QR code is drawn with block characters.
    assert!(text.contains('█') || text.contains('▀'), "{text}");
    secret_of(uri)
}

/// The secret an enrolment's `otpauth://` URI carries.
fn secret_of(uri: &str) -> String {
    uri.split("secret=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap()
        .to_string()
}

/// The code for `secret` now, as oathtool computes it.
fn oathtool(secret: &str) -> String {
    let out = Command::new("oathtool")
        .args(["--totp", "-b", secret])
        .output()
        .expect("oathtool must be installed");
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).trim().to_string()
}

/// An SSH_ASKPASS program that answers password prompts with `password`
/// and code prompts with oathtool's code for `secret`, computed when
/// asked.
fn askpass(b: &Bastion, password: &str, secret: &str) -> std::path::PathBuf {
    let path = b.dir.path().join(format!("askpass-mfa-{}", free_port()));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  *code*) oathtool --totp -b '{secret}' ;;\n  *) printf '%s\\n' '{password}' ;;\nesac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    path
}

/// `ssh` that gives `password` with the password method, then the code
/// for `secret` at the keyboard-interactive prompt (through SSH_ASKPASS).
fn password_then_code(b: &Bastion, login: &str, password: &str, secret: &str) -> Command {
    let mut c = b.ssh_base();
    c.args([
        "-o",
        "PreferredAuthentications=password,keyboard-interactive",
        "-o",
        "PubkeyAuthentication=no",
        "-o",
        "NumberOfPasswordPrompts=1",
        &format!("{login}@127.0.0.1"),
    ]);
    with_askpass(c, &askpass(b, password, secret))
}

/// `ssh` that logs in at keyboard-interactive prompts only (a person at
/// the terminal answers them), running `cmd`.
fn prompted(b: &Bastion, login: &str, cmd: &str) -> Command {
    let mut c = b.ssh_base();
    c.args([
        "-o",
        "PreferredAuthentications=keyboard-interactive",
        "-o",
        "PubkeyAuthentication=no",
        &format!("{login}@127.0.0.1"),
        cmd,
    ]);
    c
}

/// bob's private key, for the russh client.
fn bob_key(b: &Bastion) -> Arc<russh::keys::PrivateKey> {
    Arc::new(russh::keys::load_secret_key(&b.bob_key, None).unwrap())
}

/// Runs a russh-client exchange to its end.
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn with_askpass(mut c: Command, askpass: &std::path::Path) -> Command {
    c.env("SSH_ASKPASS", askpass)
        .env("SSH_ASKPASS_REQUIRE", "force")
        .env("DISPLAY", ":0");
    c
}

#[test]
fn a_password_and_a_code_at_a_real_terminal() {
    let b = mfa_bastion("");
    let secret = enroll(&b, "erin");
    let c = prompted(&b, "erin:web1", "echo in-with-$((2*21))");
    let mut t = Terminal::spawn(&c, 24, 80);
    t.expect("Password:");
    t.send(&format!("{ERIN_PW}\r"));
    t.expect("Verification code:");
    let code = oathtool(&secret);
    t.send(&format!("{code}\r"));
    t.expect("in-with-42");
    assert_eq!(t.wait(), Some(0));
    let ok = b.wait_event(|e| e["kind"] == "auth_ok" && e["user"] == "erin");
    assert_eq!(ok["method"], "password");
    assert_eq!(ok["factors"], serde_json::json!(["password", "totp"]));

    // The same code again is refused: a code is good once.
    let asked = std::time::Instant::now();
    let mut t = Terminal::spawn(&c, 24, 80);
    t.expect("Password:");
    t.send(&format!("{ERIN_PW}\r"));
    let asked_at = t.expect("Verification code:");
    t.send(&format!("{code}\r"));
    // OpenSSH asks again after a refused code; give up there.
    let again = t.screen.wait_for_from("Verification code:", asked_at);
    t.send("\u{3}");
    assert_ne!(t.wait(), Some(0));
    assert!(!t.screen.since(again).contains("in-with-42"));
    let fail = b.wait_event(|e| e["kind"] == "auth_fail" && e["user"] == "erin");
    assert_eq!(fail["method"], "keyboard-interactive");
    // Within its 30 s step the code is still right, and so refused as
    // reused; later it is simply out of its window.
    if asked.elapsed().as_secs() < 25 {
        assert_eq!(fail["reason"], "code_reused");
    }
    assert_eq!(
        b.audit()
            .iter()
            .filter(|e| e["kind"] == "auth_ok" && e["user"] == "erin")
            .count(),
        1
    );
}

#[test]
fn password_method_then_a_code_through_askpass() {
    let b = mfa_bastion("");
    let secret = enroll(&b, "erin");
    let c = password_then_code(&b, "erin:web1", ERIN_PW, &secret);
    let out = exec(c, "echo two-factors");
    assert_eq!(stdout(&out), "two-factors\n", "stderr: {}", stderr(&out));
    let ok = b.wait_event(|e| e["kind"] == "auth_ok" && e["user"] == "erin");
    assert_eq!(ok["factors"], serde_json::json!(["password", "totp"]));
}

#[test]
fn a_key_alone_is_not_enough_for_a_user_with_mfa() {
    let b = mfa_bastion("");
    let secret = enroll(&b, "frank");
    // BatchMode: the client answers no prompt, so only the key is given.
    let out = exec(b.ssh_bob("frank:web1"), "echo should-not-run");
    assert_eq!(out.status.code(), Some(255), "{}", stdout(&out));
    assert!(!stdout(&out).contains("should-not-run"));
    assert!(b.audit().iter().all(|e| e["kind"] != "auth_ok"));

    // With the code as well, frank is in.
    let pass = askpass(&b, "not-asked", &secret);
    let mut c = b.ssh_base();
    c.args(["-o", "IdentitiesOnly=yes", "-i"])
        .arg(&b.bob_key)
        .arg("frank:web1@127.0.0.1");
    let out = exec(with_askpass(c, &pass), "echo key-and-code");
    assert_eq!(stdout(&out), "key-and-code\n", "stderr: {}", stderr(&out));
    let ok = b.wait_event(|e| e["kind"] == "auth_ok" && e["user"] == "frank");
    assert_eq!(ok["method"], "publickey");
    assert_eq!(ok["factors"], serde_json::json!(["publickey", "totp"]));
}

#[test]
fn a_user_who_never_enrolled_cannot_log_in() {
    let b = mfa_bastion("");
    let c = password_then_code(&b, "gail:web1", ERIN_PW, "JBSWY3DPEHPK3PXP");
    let out = exec(c, "echo should-not-run");
    assert_eq!(out.status.code(), Some(255));
    let fail = b.wait_event(|e| e["kind"] == "auth_fail" && e["user"] == "gail");
    assert_eq!(fail["reason"], "totp_not_enrolled");
}

#[test]
fn plink_answers_the_code_prompt() {
    let b = mfa_bastion("");
    let secret = enroll(&b, "erin");
    let fp = Command::new("ssh-keygen")
        .args(["-l", "-E", "sha256", "-f"])
        .arg(b.state.join("host_ed25519"))
        .output()
        .unwrap();
    let fp = stdout(&fp).split_whitespace().nth(1).unwrap().to_string();
    let mut c = Command::new("plink");
    c.args(["-ssh", "-P", &b.port.to_string(), "-hostkey", &fp])
        .args(["-l", "erin#web1", "127.0.0.1", "echo plink-mfa-$((3*3))"]);
    let mut t = Terminal::spawn(&c, 24, 80);
    t.expect("Password:");
    t.send(&format!("{ERIN_PW}\r"));
    t.expect("Verification code:");
    t.send(&format!("{}\r", oathtool(&secret)));
    // PuTTY waits for a key once keyboard-interactive has let it in.
    t.expect("Access granted");
    t.send("\r");
    t.expect("plink-mfa-9");
    assert_eq!(t.wait(), Some(0));
    let ok = b.wait_event(|e| e["kind"] == "auth_ok" && e["user"] == "erin");
    assert_eq!(ok["factors"], serde_json::json!(["password", "totp"]));
}

#[test]
fn methods_not_offered_are_refused() {
    // alice may only use keys (she has none: she cannot log in); the
    // bastion offers no password method to anyone else either.
    let b = Bastion::start_with(Opts {
        extra_toml: "[auth]\nmethods = [\"publickey\", \"keyboard-interactive\"]\n".into(),
        ..Opts::default()
    });
    // ssh sees that password is not offered, and does not try it.
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo should-not-run");
    assert_eq!(out.status.code(), Some(255));
    assert!(
        stderr(&out).contains("(publickey,keyboard-interactive)"),
        "{}",
        stderr(&out)
    );
    // A client that sends the password anyway is refused unheard.
    block_on(async {
        let mut h = flows::connect(b.port).await;
        let r = h
            .authenticate_password("alice:web1", ALICE_PW)
            .await
            .unwrap();
        assert!(!r.success(), "{r:?}");
    });
    let fail = b.wait_event(|e| e["kind"] == "auth_fail" && e["user"] == "alice");
    assert_eq!(fail["reason"], "method_not_allowed");
    // Keyboard-interactive still takes her password.
    let c = prompted(&b, "alice:web1", "echo by-prompt");
    let mut t = Terminal::spawn(&c, 24, 80);
    t.expect("Password:");
    t.send(&format!("{ALICE_PW}\r"));
    t.expect("by-prompt");
    assert_eq!(t.wait(), Some(0));
    // Keys still work.
    let out = exec(b.ssh_bob("bob:web1"), "echo key-still-ok");
    assert_eq!(stdout(&out), "key-still-ok\n", "{}", stderr(&out));
}

#[test]
fn a_users_auth_list_narrows_the_methods() {
    let b = Bastion::start_with(Opts {
        extra_toml: format!(
            "[[users]]\nname = \"ivy\"\npassword_hash = \"{}\"\nauthorized_keys = [\"{{bob_pub}}\"]\n\
             targets = [\"web1\"]\nauth = [\"publickey\"]\n",
            hash_of(ERIN_PW)
        ),
        ..Opts::default()
    });
    let out = exec(b.ssh_pw("ivy:web1", ERIN_PW), "echo should-not-run");
    assert_eq!(out.status.code(), Some(255));
    let fail = b.wait_event(|e| e["kind"] == "auth_fail" && e["user"] == "ivy");
    assert_eq!(fail["reason"], "method_not_allowed");
    let out = exec(b.ssh_bob("ivy:web1"), "echo ivy-key");
    assert_eq!(stdout(&out), "ivy-key\n", "{}", stderr(&out));
}

/// A live connection (a ControlMaster) that logged in on one factor opens
/// no new session once a reload requires a second.
#[test]
fn a_reload_that_requires_a_code_stops_a_one_factor_connection() {
    let b = Bastion::start();
    let master = crate::hardening::Master::start(&b);
    let before = exec(master.ssh(&b, &[]), "echo BEFORE");
    assert_eq!(stdout(&before), "BEFORE\n", "{}", stderr(&before));
    let text = std::fs::read_to_string(&b.config).unwrap();
    let now = text.replacen("name = \"bob\"\n", "name = \"bob\"\nmfa = \"totp\"\n", 1);
    assert_ne!(now, text);
    std::fs::write(&b.config, now).unwrap();
    assert!(b.reload().contains("config reloaded"));
    let after = exec(master.ssh(&b, &[]), "echo AFTER");
    assert!(!stdout(&after).contains("AFTER"), "{}", stdout(&after));
    let refused = b.wait_kind("session_refused");
    assert_eq!(refused["reason"], "credentials_revoked", "{refused}");
}

/// frank logs in from `from` with bob's key and `code`: whether he is in.
async fn key_and_code(b: &Bastion, from: [u8; 4], code: &str) -> bool {
    let mut h = flows::connect_from(b.port, from).await;
    let with_key = PrivateKeyWithHashAlg::new(bob_key(b), None);
    let r = h
        .authenticate_publickey("frank:web1", with_key)
        .await
        .unwrap();
    assert!(!r.success(), "{r:?}");
    matches!(
        flows::answer(&mut h, "frank:web1", code).await,
        Kbd::Success
    )
}

/// Five wrong codes for frank, one from each of five addresses under
/// `net` (under every address's limit), then the right one for `secret`
/// from a sixth: refused, locked.
fn lock_franks_codes(b: &Bastion, net: u8, secret: &str) {
    block_on(async {
        for i in 0..5u8 {
            assert!(!key_and_code(b, [127, 0, net, i + 1], "000001").await);
        }
        assert!(!key_and_code(b, [127, 0, net, 6], &oathtool(secret)).await);
    });
}

/// How many logins were refused as `totp_locked`.
fn locked_refusals(b: &Bastion) -> usize {
    b.audit()
        .iter()
        .filter(|e| e["kind"] == "auth_fail" && e["reason"] == "totp_locked")
        .count()
}

/// Wrong codes lock the account's codes, from every address: whoever sends
/// them had the first factor, and the address throttle alone would let
/// many addresses guess in parallel.
#[test]
fn wrong_codes_from_many_addresses_lock_the_accounts_codes() {
    let b = mfa_bastion("");
    let secret = enroll(&b, "frank");
    lock_franks_codes(&b, 3, &secret);
    let locked = b.wait_event(|e| e["kind"] == "auth_fail" && e["reason"] == "totp_locked");
    assert_eq!(locked["user"], "frank");
    assert!(b.audit().iter().all(|e| e["kind"] != "auth_ok"));
}

/// The lock is kept with the secret, in the store: `walissh totp enroll`
/// (another process) lifts it for the running bastion, as the docs say,
/// and a restart does not.
#[test]
fn enrolling_again_unlocks_a_running_bastion_and_a_restart_does_not() {
    let mut b = mfa_bastion("");
    let secret = enroll(&b, "frank");
    lock_franks_codes(&b, 3, &secret);
    assert_eq!(locked_refusals(&b), 1);
    let secret = enroll(&b, "frank");
    assert!(block_on(key_and_code(
        &b,
        [127, 0, 4, 1],
        &oathtool(&secret)
    )));
    lock_franks_codes(&b, 5, &secret);
    assert_eq!(locked_refusals(&b), 2);
    b.terminate();
    b.restart();
    // The code is one frank has not used: refused only because locked.
    assert!(!block_on(key_and_code(
        &b,
        [127, 0, 6, 1],
        &oathtool(&secret)
    )));
    assert_eq!(locked_refusals(&b), 3);
}

/// Whether process `pid` waits for a file lock (a `->` line of
/// /proc/locks).
fn waits_for_a_lock(pid: u32) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&"->") && f.get(5) == Some(&pid.to_string().as_str())
    })
}

/// Twelve `walissh totp enroll frank` at once: exactly one reports
/// success, and its secret is the one logins check; the others say why in
/// one line and print no URI. The test holds the store's lock
/// (`totp.lock`) until each enrolment has ended or waits for it, so all
/// twelve are under way together, however they are scheduled.
#[test]
fn of_twelve_enrolments_at_once_the_one_that_succeeds_is_stored() {
    let b = mfa_bastion("");
    let lock = std::fs::File::create(b.state.join("totp.lock")).unwrap();
    use std::os::fd::AsRawFd;
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let mut children: Vec<std::process::Child> = (0..12)
        .map(|_| {
            Command::new(walissh_bin())
                .arg("totp")
                .arg("--config")
                .arg(&b.config)
                .args(["enroll", "frank"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let start = std::time::Instant::now();
    loop {
        let mut settled = 0;
        for c in children.iter_mut() {
            if c.try_wait().unwrap().is_some() || waits_for_a_lock(c.id()) {
                settled += 1;
            }
        }
        if settled == children.len() {
            break;
        }
        assert!(
            start.elapsed().as_secs() < 60,
            "the enrolments never settled"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(lock);
    let outs: Vec<std::process::Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let (won, lost): (Vec<_>, Vec<_>) = outs.iter().partition(|o| o.status.success());
    assert_eq!(won.len(), 1, "{} reported success", won.len());
    for o in &lost {
        assert_eq!(o.status.code(), Some(1));
        assert!(stdout(o).is_empty(), "{}", stdout(o));
        let err = stderr(o);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("under way"), "{err}");
    }
    let uri = stdout(won[0]);
    let secret = secret_of(&uri);
    assert!(block_on(key_and_code(
        &b,
        [127, 0, 7, 1],
        &oathtool(&secret)
    )));
}

/// The partial-success rules, one SSH message at a time, with russh's
/// client: what no stock client would try.
mod flows {
    use russh::client::{self, AuthResult};
    use russh::{MethodKind, MethodSet};

    use super::*;

    pub(super) struct Trusting;

    impl client::Handler for Trusting {
        type Error = russh::Error;
        async fn check_server_key(
            &mut self,
            _key: &russh::keys::PublicKeyOrCertificate,
        ) -> Result<bool, Self::Error> {
            Ok(true)
        }
    }

    pub(super) async fn connect(port: u16) -> client::Handle<Trusting> {
        let config = Arc::new(client::Config::default());
        client::connect(config, ("127.0.0.1", port), Trusting)
            .await
            .unwrap()
    }

    fn kbd_only() -> MethodSet {
        MethodSet::from(&[MethodKind::KeyboardInteractive][..])
    }

    fn is_partial(r: &AuthResult) -> bool {
        matches!(r, AuthResult::Failure { remaining_methods, partial_success: true } if *remaining_methods == kbd_only())
    }

    /// A connection from a loopback address of the test's choosing.
    pub(super) async fn connect_from(port: u16, from: [u8; 4]) -> client::Handle<Trusting> {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind((std::net::Ipv4Addr::from(from), 0).into())
            .unwrap();
        let stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
        let config = Arc::new(client::Config::default());
        client::connect_stream(config, stream, Trusting)
            .await
            .unwrap()
    }

    pub(super) async fn answer(h: &mut client::Handle<Trusting>, login: &str, answer: &str) -> Kbd {
        match h
            .authenticate_keyboard_interactive_start(login, None)
            .await
            .unwrap()
        {
            Kbd::InfoRequest { prompts, .. } if prompts.len() == 1 => h
                .authenticate_keyboard_interactive_respond(vec![answer.to_string()])
                .await
                .unwrap(),
            other => other,
        }
    }

    /// Starts keyboard-interactive for `login`, checks that it asks for
    /// a password (not a code), and answers `answer`.
    async fn password_prompt_answered(
        h: &mut client::Handle<Trusting>,
        login: &str,
        answer: &str,
    ) -> Kbd {
        let r = h
            .authenticate_keyboard_interactive_start(login, None)
            .await
            .unwrap();
        assert!(prompt_of(&r).contains("Password"), "{r:?}");
        h.authenticate_keyboard_interactive_respond(vec![answer.to_string()])
            .await
            .unwrap()
    }

    fn prompt_of(r: &Kbd) -> String {
        match r {
            Kbd::InfoRequest { prompts, .. } => prompts[0].prompt.clone(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn one_factor_never_lets_in_whatever_the_order() {
        let b = mfa_bastion("");
        let secret = enroll(&b, "frank");
        block_on(async {
            let key = bob_key(&b);
            let mut h = connect(b.port).await;
            // A good key is a partial success: keyboard-interactive next.
            let with_key = PrivateKeyWithHashAlg::new(key.clone(), None);
            let r = h
                .authenticate_publickey("frank:web1", with_key)
                .await
                .unwrap();
            assert!(is_partial(&r), "{r:?}");
            // The same key again does not add a factor.
            let with_key = PrivateKeyWithHashAlg::new(key.clone(), None);
            let r = h
                .authenticate_publickey("frank:web1", with_key)
                .await
                .unwrap();
            assert!(is_partial(&r), "{r:?}");
            // A code for another login name is not this login's second
            // factor: that exchange asks for a password instead.
            let r = password_prompt_answered(&mut h, "frank:web2", &oathtool(&secret)).await;
            assert!(!matches!(r, Kbd::Success), "{r:?}");
            // A wrong code: refused, keyboard-interactive still offered.
            let r = answer(&mut h, "frank:web1", "000000").await;
            assert!(!matches!(r, Kbd::Success), "{r:?}");
            // The right code after the key: in.
            let r = answer(&mut h, "frank:web1", &oathtool(&secret)).await;
            assert!(matches!(r, Kbd::Success), "{r:?}");

            // A code alone, with no first factor, asks for a password and
            // never succeeds.
            let mut h = connect(b.port).await;
            let r = password_prompt_answered(&mut h, "frank:web1", &oathtool(&secret)).await;
            assert!(!matches!(r, Kbd::Success), "{r:?}");
            // A "none" request is no factor either.
            let r = h.authenticate_none("frank:web1").await.unwrap();
            assert!(!r.success(), "{r:?}");
        });
        let oks: Vec<_> = b
            .audit()
            .into_iter()
            .filter(|e| e["kind"] == "auth_ok")
            .collect();
        assert_eq!(oks.len(), 1, "{oks:#?}");
        assert_eq!(oks[0]["factors"], serde_json::json!(["publickey", "totp"]));
    }
}

/// fail2ban, with walissh's filter (`etc/fail2ban/filter.d/walissh.conf`),
/// finds the address of each failed login in walissh's log, and only
/// that: a login name that spells out another address is not banned.
#[test]
fn fail2ban_finds_the_address_and_never_one_a_name_spells() {
    let b = Bastion::start();
    let out = exec(b.ssh_pw("alice:web1", "wrong"), "true");
    assert_eq!(out.status.code(), Some(255));
    let forged = "x\" login failed peer=10.6.6.6:22 user=\"y";
    block_on(async {
        let mut h = flows::connect(b.port).await;
        let r = h.authenticate_password(forged, "wrong").await.unwrap();
        assert!(!r.success(), "{r:?}");
    });
    b.log.wait_for("10.6.6.6");
    let log = b.dir.path().join("walissh.log");
    std::fs::write(&log, b.log.plain()).unwrap();
    let filter = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/etc/fail2ban/filter.d/walissh.conf"
    );
    let out = Command::new("fail2ban-regex")
        .args(["-o", "ip"])
        .arg(&log)
        .arg(filter)
        .output()
        .expect("fail2ban-regex (fail2ban) must be installed");
    assert!(out.status.success(), "{}", stderr(&out));
    let found: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(found, ["127.0.0.1", "127.0.0.1"], "{}", b.log.plain());
}

/// paramiko (Fabric's and Ansible's client) gives the password, is told
/// partial success, and answers the code prompt; then the key the same way.
#[test]
fn paramiko_gives_a_password_or_a_key_then_the_code() {
    let b = mfa_bastion("");
    let erin = enroll(&b, "erin");
    let frank = enroll(&b, "frank");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/paramiko_mfa.py");
    let port = b.port.to_string();
    let out = Command::new("python3")
        .args([
            script,
            &port,
            "erin:web1",
            &erin,
            "--password",
            ERIN_PW,
            "echo paramiko-pw",
        ])
        .output()
        .expect("python3 with paramiko must be installed");
    assert_eq!(stdout(&out), "paramiko-pw\n", "stderr: {}", stderr(&out));
    assert!(
        stderr(&out).contains("partial: keyboard-interactive"),
        "{}",
        stderr(&out)
    );
    let key = b.bob_key.to_str().unwrap();
    let out = Command::new("python3")
        .args([
            script,
            &port,
            "frank:web1",
            &frank,
            "--key",
            key,
            "echo paramiko-key",
        ])
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "paramiko-key\n", "stderr: {}", stderr(&out));
    let oks: Vec<_> = b
        .audit()
        .into_iter()
        .filter(|e| e["kind"] == "auth_ok")
        .collect();
    assert_eq!(oks.len(), 2, "{oks:#?}");
}
