//! The output of commands that read a secret store, and the forms the
//! held-out sets and a second reader found missing.

use super::*;

/// Issue 33, class 1: the output of a command that reads a secret
/// store goes line by line, known command or prompt line on a screen;
/// the command failing is left for the model to read.
#[test]
fn the_output_of_a_command_that_reads_a_secret_store_goes_line_by_line() {
    let r = redactor();
    let session = Numbering::default();
    let (out, counts) = r.redact_output(
        "docker exec api cat /run/secrets/db_password",
        "lantern harbor 41\n\n  two\n",
        &session,
    );
    assert_eq!(
        out,
        "[REDACTED:secret-output#1]\n\n  [REDACTED:secret-output#2]\n"
    );
    assert_eq!(counts.total(), 2);
    let (out, _) = r.redact_output(
        "cat /run/secrets/x",
        "cat: /run/secrets/x: No such file or directory\n",
        &session,
    );
    assert_eq!(out, "cat: /run/secrets/x: No such file or directory\n");
    // A line of blanks (found by the fuzzer: it was a reversed range).
    let (out, _) = r.redact_output("cat /run/secrets/x", "   \n\t\nab12cd34\n", &session);
    assert_eq!(out, "   \n\t\n[REDACTED:secret-output#3]\n");
    // A sink's output is read by the detectors whole: a key printed
    // on its lines goes whole.
    let key = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n{}\n-----END RSA PRIVATE KEY-----",
        "MIIEow".repeat(10),
        "Abc1".repeat(16)
    );
    let (out, _) = r.redact_output("cat /run/secrets/x | sha256sum", &key, &session);
    assert!(!out.contains("MIIEow") && !out.contains("Abc1"), "{out}");
    // An ordinary command's output is redacted as any text.
    let (out, _) = r.redact_output("ls /run/secrets", "db_password\n", &session);
    assert_eq!(out, "db_password\n");
    let screen = "root@db1:~# vault kv get -field=password secret/db\nlantern harbor 41\nroot@db1:~# uptime\n 10:00 up 3 days\n";
    let (out, _) = r.redact(screen, &session);
    assert_eq!(
        out,
        "root@db1:~# vault kv get -field=password secret/db\n[REDACTED:secret-output#1]\nroot@db1:~# uptime\n 10:00 up 3 days\n"
    );
}

/// What a second reader found the key/value and flag detectors had
/// lost in this change, mended.
#[test]
fn forms_a_second_reader_found_lost() {
    let r = redactor();
    for (text, secrets) in [
        // Every FLAGS entry naming a tool counts, not the first.
        (
            "podman login -u bob -p hunter2x quay.io\n",
            &["hunter2x"][..],
        ),
        ("skopeo login -p hunter2x quay.io\n", &["hunter2x"]),
        // A JSON array is no INI section's header.
        ("[{\"db_pass\":\"Xk9mQ2vLp8Zq\"}]\n", &["Xk9mQ2vLp8Zq"]),
        // A substitution that is part of a quoted word.
        (
            "echo \"$(date) start\"; redis-cli -a Xk9mQ2vLp8Zq ping\n",
            &["Xk9mQ2vLp8Zq"],
        ),
        // Each operand of `openssl passwd`.
        (
            "openssl passwd -6 hunter2x hunter3x\n",
            &["hunter2x", "hunter3x"],
        ),
        // A passphrase that ends in `?` is no question.
        ("db_pass=CorrectHorseBatteryStaple?\n", &["CorrectHorse"]),
    ] {
        let (out, _) = scrub(&r, text);
        for s in secrets {
            assert!(!out.contains(s), "{s} in {out}");
        }
    }
    for kept in [
        "[credential \"https://github.com\"]\n",
        "Passwort: vergessen?\n",
    ] {
        assert_eq!(scrub(&r, kept).0, kept);
    }
}

/// What a second reader sent past the sinks, as screens: each prints
/// the secret, and each must lose it. A sink is trusted only in plain
/// words, and its output lines only in its own shape.
#[test]
fn a_sink_is_trusted_only_plainly_and_only_with_its_own_shape() {
    let r = redactor();
    for command in [
        // A comment: there is no sink.
        "cat /run/secrets/db # | wc -c",
        // A backslash within single quotes is itself.
        "echo '\\' ; cat /run/secrets/db ; echo '\\' | wc -c",
        // Written to the terminal by a stage, not the sink.
        "cat /run/secrets/db | uniq - $SSH_TTY | wc -c",
        "cat /run/secrets/db | uniq - /d?v/tty | wc -c",
        "dd if=/run/secrets/db of=$SSH_TTY status=none | wc -c",
        "cd /dev; dd if=/run/secrets/db of=tty status=none | wc -c",
        "cat /run/secrets/db | wc -c \"$(xargs -t true </run/secrets/db)\"",
        // Not the sink it names.
        "cat /run/secrets/db | ./wc -c",
        "wc() { cat; }; cat /run/secrets/db | wc -c",
        // A verbose reader.
        "gcloud secrets versions access latest --secret=db --log-http | wc -c",
        "kubectl get secret db -o yaml -v9 | wc -l",
        // jq printing a field not known to be public.
        "cat /run/secrets/app.json | jq -r .pw",
        "cat /run/secrets/app.json | jq -r .db.dsn",
        "cat /run/secrets/app.json | jq '{pw}'",
        // `length` of a number is the number.
        "cat /run/secrets/app.json | jq '.db.password | length'",
        "cat /run/secrets/recovery_codes | jq length",
        "kubectl get secret db -o json | jq .metadata",
        // A decoding of no literal, then a reader.
        "echo \"$BLOB\" | base64 -d | jq -r .password",
        "keepassxc-cli show --attributes=password vault.kdbx db",
        "keepassxc-cli show -qa password vault.kdbx db",
    ] {
        let screen = format!("$ {command}\nS3cr3tPassw0rd!\n12\n$ \n");
        let (out, _) = scrub(&r, &screen);
        assert!(!out.contains("S3cr3tPassw0rd"), "{command}: {out}");
    }
    // `set -x`'s trace under a digest is no digest.
    let screen = "$ echo \"$API_TOKEN\" | sha256sum\n+ echo S3cr3tPassw0rd!\n+ sha256sum\n845933fee181f5fa  -\n$ \n";
    assert!(!scrub(&r, screen).0.contains("S3cr3tPassw0rd"));
    // What a plain sink prints stays.
    for (command, printed) in [
        ("cat /run/secrets/db | wc -c", "17"),
        ("cat /run/secrets/db | sha256sum", "845933fee181f5fa  -"),
        ("cat /run/secrets/db | cut -d: -f2 | wc -l", "1"),
    ] {
        let screen = format!("$ {command}\n{printed}\n$ \n");
        assert_eq!(scrub(&r, &screen).0, screen, "{command}");
    }
}

/// A mask word inside a finding that spans lines (a banner between
/// two keys one match took in) does not let the keys go.
#[test]
fn a_mask_inside_a_block_masks_nothing() {
    let r = redactor();
    let body = |c: &str| format!("MII{}\n", c.repeat(61));
    let key = |c: &str| {
        format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}{}-----END RSA PRIVATE KEY-----\n",
            body(c),
            body(c)
        )
    };
    let first = key("Qk9");
    let text = format!(
        "{}\n***** Authorized use only *****\n{}",
        first.trim_end_matches("-----END RSA PRIVATE KEY-----\n"),
        key("Zx7")
    );
    let (out, _) = scrub(&r, &text);
    assert!(!out.contains("Qk9Qk9"), "{out}");
    assert!(!out.contains("Zx7Zx7"), "{out}");
}

/// An XML secret's value in a child element below it.
#[test]
fn an_xml_value_below_its_key() {
    let r = redactor();
    let text = "<AdministratorPassword>\n  <Value>R3Jhbml0ZS14OQ==</Value>\n  <PlainText>false</PlainText>\n</AdministratorPassword>";
    let (out, _) = scrub(&r, text);
    assert!(!out.contains("R3Jhbml0ZS14OQ=="), "{out}");
    assert!(out.contains("<PlainText>false</PlainText>"), "{out}");
}

/// Text that is not redacted is never rewritten: full-width
/// punctuation and HTML entities stay, though the detectors read them
/// as ASCII.
#[test]
fn only_secrets_are_rewritten() {
    let r = redactor();
    let prose = "部署完成，请检查日志（见附件）：ｏｋ。";
    assert_eq!(scrub(&r, prose).0, prose);
    let (out, _) = scrub(&r, "ｐａｓｓｗｏｒｄ＝Ｇｒ４ｎｉｔｅ！ｘ９ 后重启");
    assert_eq!(out, "ｐａｓｓｗｏｒｄ＝[REDACTED:password] 后重启");
    let key = format!("{}9Z", "Jrk4".repeat(8));
    let html = format!(
        "data-config=\"{{&quot;apiKey&quot;:&quot;{key}&quot;,&quot;env&quot;:&quot;prod&quot;}}\""
    );
    let (out, _) = scrub(&r, &html);
    assert!(!out.contains(&key), "{out}");
    assert!(out.contains("&quot;env&quot;:&quot;prod&quot;"), "{out}");
}

/// Forms the fourth and fifth held-out sets showed: each secret goes,
/// and what stands beside it stays.
#[test]
fn forms_the_later_held_out_sets_showed() {
    let r = redactor();
    for (text, secret) in [
        (
            "AKIAABCDEFGHIJKLMNOP HOc4+sDn3IQsQ5OAmZCDGnR9HNaPEKb6INBzMlGE",
            "HOc4+sDn3IQsQ5OAmZCDGnR9HNaPEKb6INBzMlGE",
        ),
        (
            "DEBUG auth=('svc-etl', \"isvCbb'UAVHi3\") realm=nexus",
            "isvCbb'UAVHi3",
        ),
        (
            "The admin password for the switches is `granite+68mAyS` (rotate).",
            "granite+68mAyS",
        ),
        (
            " ip ospf message-digest-key 1 md5 FHDmsQhgvKF2",
            "FHDmsQhgvKF2",
        ),
        (
            "  security wpa akm psk set-key ascii 0 lantern+86HbDM",
            "lantern+86HbDM",
        ),
        (
            "S: 334 UGFzc3dvcmQ6\nC: b3JjaGlkITA4TEpEcWdxQw==\nS: 235 ok",
            "b3JjaGlkITA4TEpEcWdxQw==",
        ),
        (
            "10 SHA256 HEX:903a33da45b801f403ed56a2347f5b62",
            "903a33da45b801f403ed56a2347f5b62",
        ),
        (
            "[Server] A temporary password is generated for root@localhost: velvet?69yFB",
            "velvet?69yFB",
        ),
        (
            "  [\"password\"]=>\n  string(16) \"orchid#88DXzRcFA\"",
            "orchid#88DXzRcFA",
        ),
        (
            "ops@bastion ~> set -x AWS_SECRET_ACCESS_KEY aQO++VuSR0zlkkFA1rVjMcpu2LaLg8WR8WHGLOQ4",
            "aQO++VuSR0zlkkFA1rVjMcpu2LaLg8WR8WHGLOQ4",
        ),
        (
            "$ echo summit#88YJKKM | sudo openconnect --user=a --passwd-on-stdin vpn.example",
            "summit#88YJKKM",
        ),
        (
            "spring.datasource.password=velvet&18jpzfvdNKv",
            "18jpzfvdNKv",
        ),
        (
            "    DefaultPassword    REG_SZ    velvet?28EsEXFfh",
            "velvet?28EsEXFfh",
        ),
        ("dial mqtts://line3:VtLDrRGuj2ySDvhQy>", "VtLDrRGuj2ySDvhQy"),
        (
            "set snmp community VQcZXYgLkp authorization read-only",
            "VQcZXYgLkp",
        ),
        (
            "/etc/redis/sentinel.conf:sentinel auth-pass mymaster iVnRr8GqG6t5CsCNy",
            "iVnRr8GqG6t5CsCNy",
        ),
        (
            "| user | authentication_string |\n| app  | *3QGZKAYZKE3FWHVAWPPIT4RZNP4KDMZRXGQWBJ74 |",
            "3QGZKAYZKE3FWHVAWPPIT4RZNP4KDMZRXGQWBJ74",
        ),
        (
            "# useradd -p \"$(openssl passwd -6 'lantern@67xnjT')\" ci",
            "lantern@67xnjT",
        ),
        (
            "  api_token: [-TYqWoBEcxVVLcKSboXXywig-]{+dDAwdSffNrKkz3EdPbrC+}",
            "dDAwdSffNrKkz3EdPbrC",
        ),
        (
            "本番DBのrootパスワード:\n  lantern!68weFyEzvi",
            "lantern!68weFyEzvi",
        ),
        ("【临时口令】546782WSgWUU", "546782WSgWUU"),
        ("签名校验：2tvNkX2CuN27oiyuauzoRG", "2tvNkX2CuN27oiyuauzoRG"),
        ("| 비밀번호 | wcMcJkqnKWdQfETU |", "wcMcJkqnKWdQfETU"),
    ] {
        let (out, _) = scrub(&r, text);
        assert!(!out.contains(secret), "{secret:?} survived in:\n{out}");
    }
    for public in [
        "    \"MachineKey\": \"mkey:20ef801add05928416fb0819495a50523b962af2b01d43d39ba8af3198069865\",",
        "\"clientSecret\": \"[hidden]\",",
        "  L.mapbox.accessToken = 'pk.eyJ1IjoiYWNtZSIsImEiOiJjbHgxMjM0NTY3ODkwIn0.Abcdefghij1234567890';",
        "<p>Run it and enter &lt;password&gt; when asked.</p>",
        "username admin privilege 15 secret 9 <removed>",
        "[credential \"https://github.com\"]",
        "パスワード有効期限：2025年3月31日",
        "主机密钥指纹（SHA256）：ZkR1cmNobG9uZ2Jhc2U2NHN0cmluZ29mZmluZ2VycHJpbnQ",
        "NAME              DIGEST            CREATED AT\nSTRIPE_API_KEY    40af762f51f2ac92  2024-04-11T08:22:10Z",
        "| user | host | plugin | password_expired |\n+---+\n| app | % | caching_sha2_password | N |\n| sys | localhost | caching_sha2_password | N |",
        "kubectl create secret generic x --from-file=password=./pw.txt",
    ] {
        assert_eq!(scrub(&r, public).0, public);
    }
}
