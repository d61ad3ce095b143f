use super::*;

fn found(text: &str) -> Vec<&str> {
    let mut spans = Pairs::new().find(text);
    spans.sort_by_key(|r| (r.start, r.end));
    spans.dedup();
    spans.into_iter().map(|r| &text[r]).collect()
}

#[test]
fn keys_in_many_languages_and_syntaxes() {
    for (text, secret) in [
        ("数据库密码: s3cr3t-pw", "s3cr3t-pw"),
        ("管理口令：Adm1nPass", "Adm1nPass"),
        ("パスワード: hunter2x", "hunter2x"),
        ("Passwort: Geheim123", "Geheim123"),
        ("contraseña = Clave_99", "Clave_99"),
        ("mot de passe : Secr3t!", "Secr3t!"),
        ("пароль: Parol_2024", "Parol_2024"),
        ("<password>p4ss-w0rd</password>", "p4ss-w0rd"),
        ("<c user=\"app\" password=\"p4ss-w0rd\"/>", "p4ss-w0rd"),
        ("requirepass S3cretRedis!", "S3cretRedis!"),
        (
            "enable secret 5 $1$abcd$efghijklmnopqrstuv",
            "$1$abcd$efghijklmnopqrstuv",
        ),
        ("AuthLDAPBindPassword B1nd-pw", "B1nd-pw"),
        ("rocommunity c0mmun1ty 10.0.0.0/8", "c0mmun1ty"),
        ("  password = \"H3llo-w0rld\"", "H3llo-w0rld"),
        ("https://h/login?user=a&pass=Qu3ry-pw9", "Qu3ry-pw9"),
        ("db_pw: Sh0rt-key7", "Sh0rt-key7"),
        ("smtpPass = Cam3l-case", "Cam3l-case"),
    ] {
        assert_eq!(found(text), [secret], "{text}");
    }
}

#[test]
fn flags_in_every_form() {
    for (text, secret) in [
        ("mysql -u root -p'My-pw_12' -h db", "My-pw_12"),
        ("mysqldump -uroot -pAbc12345 app", "Abc12345"),
        ("sshpass -p 'Pw-1234x' ssh h", "Pw-1234x"),
        ("redis-cli -h c -a R3disPass ping", "R3disPass"),
        ("sqlcmd -S db -U sa -P Sa-Pass12 -Q x", "Sa-Pass12"),
        ("ldapsearch -x -D cn=a -w Ld4p-pw -b dc=x", "Ld4p-pw"),
        (
            "openssl pkcs12 -export -passout pass:Exp0rt-pw",
            "Exp0rt-pw",
        ),
        ("keytool -list -storepass St0re-pw", "St0re-pw"),
        ("htpasswd -b /etc/x alice Al1ce-pw", "Al1ce-pw"),
        ("smbclient //fs/s -U alice%Smb-pass1", "Smb-pass1"),
        ("mongosh --host db -u admin --password=M0ngo-pw", "M0ngo-pw"),
        (
            "aws configure set aws_secret_access_key AbCd1234EfGh5678",
            "AbCd1234EfGh5678",
        ),
    ] {
        assert_eq!(found(text), [secret], "{text}");
    }
    let mc = found("mc alias set m https://minio AKIAEXAMPLE12345 S3cretKey/abc123");
    assert_eq!(mc, ["AKIAEXAMPLE12345", "S3cretKey/abc123"]);
}

/// Issue 33, class 3: key/value forms each need their own reading.
#[test]
fn key_value_forms_of_every_syntax() {
    for (text, secret) in [
        ("define('DB_PASSWORD', 'Gr4nite!x');", "Gr4nite!x"),
        (
            "define( 'NONCE_SALT',  'x]w4|Kp@3G>y5-Fq^Zt+L_7q,mR0s');",
            "x]w4|Kp@3G>y5-Fq^Zt+L_7q,mR0s",
        ),
        ("$db_pass = 'Gr4nite!x';", "Gr4nite!x"),
        ("password = `Gr4nite!x`", "Gr4nite!x"),
        ("bindpw Gr4nite!x", "Gr4nite!x"),
        ("ldap_default_authtok = Gr4nite!x", "Gr4nite!x"),
        ("  psk=\"Gr4nite!x\"", "Gr4nite!x"),
        ("    Key Content            : Gr4nite42x", "Gr4nite42x"),
        (
            "<add key=\"StorageAccountKey\" value=\"abcDEF123ghiJKL456mno==\"/>",
            "abcDEF123ghiJKL456mno==",
        ),
        (
            "<password encoding=\"base64\">R3Jhbml0ZSE0Mng=</password>",
            "R3Jhbml0ZSE0Mng=",
        ),
        ("sentinel auth-pass mymaster Gr4nite!x", "Gr4nite!x"),
        ("rootpw --plaintext Gr4nite!x", "Gr4nite!x"),
        ("数据库的管理员登录密码是 Gr4nite!x", "Gr4nite!x"),
        ("初期パスワードは Gr4nite!x です", "Gr4nite!x"),
        ("事前共有キー（PSK）は「Gr4nite!x」です。", "Gr4nite!x"),
        (
            "| SecretAccessKey | wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE1 |",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE1",
        ),
        ("mysqladmin -u root password 'Gr4nite!x'", "Gr4nite!x"),
        ("ALTER ROLE app WITH PASSWORD 'Gr4nite!x';", "Gr4nite!x"),
        ("CREATE USER app IDENTIFIED BY 'Gr4nite!x';", "Gr4nite!x"),
        ("user deploy insecure-password Gr4nite!x", "Gr4nite!x"),
        ("password = \"\"\"Gr4nite!x\"\"\"", "Gr4nite!x"),
        ("SET password_plain = 'it''s-Gr4nite'", "it''s-Gr4nite"),
        ("{\"password\": \"ab\\\"cd-Gr4nite\"}", "ab\\\"cd-Gr4nite"),
        ("password: \"!Gr4nite-x\"", "!Gr4nite-x"),
        ("password: '&Gr4nite-x'", "&Gr4nite-x"),
        ("rabbitmqctl add_user monitoring Gr4nite!x", "Gr4nite!x"),
        (
            "net use Z: \\\\fs\\d /user:CORP\\svc Gr4nite!x",
            "Gr4nite!x",
        ),
        (
            "cfg=\"{User:svc Pass:\\\"Gr4nite-x9\\\" Host:h}\"",
            "Gr4nite-x9",
        ),
    ] {
        assert_eq!(found(text), [secret], "{text}");
    }
}

/// Values below their key: a YAML block scalar, redis-cli's numbered
/// reply, a table's secret column, cloud-init's `chpasswd` list.
#[test]
fn values_on_the_lines_below_their_key() {
    assert_eq!(found("password: >-\n  Gr4nite!x\nuser: bob"), ["Gr4nite!x"]);
    assert_eq!(found("1) \"requirepass\"\n2) \"Gr4nite!x\""), ["Gr4nite!x"]);
    assert_eq!(
        found("username,password,created\nsvc,\"Dh\"\"Gr4nite\",2024\nops,Tr0ub4dor!,2023"),
        ["Dh\"\"Gr4nite", "Tr0ub4dor!"]
    );
    // A CSV cell holds commas and doubled quotes.
    assert_eq!(
        found("service,login,secret,notes\nldap,cn=svc,\"V9i\"\"5nP,4Fba\",\"a, b\""),
        ["V9i\"\"5nP,4Fba"]
    );
    // Columns aligned with blanks.
    assert_eq!(
        found("NAME            USERNAME   PASSWORD\ngrafana-admin   admin      Gr4nite%72\n"),
        ["Gr4nite%72"]
    );
    assert_eq!(
        found("用户名 | 密码 | 备注\nadmin | velvet=44VNV | 超级管理员"),
        ["velvet=44VNV"]
    );
    assert_eq!(
        found("chpasswd:\n  expire: false\n  list: |\n    root:Gr4nite!x\n"),
        ["Gr4nite!x"]
    );
}

#[test]
fn what_is_not_a_secret() {
    for text in [
        "PASSWORD_MIN_LENGTH=12",
        "max_tokens: 4096",
        "passwd:         files systemd",
        "  -p, --password     prompt for the password",
        "Error: invalid token: signature has expired",
        "password: ${DB_PASSWORD}",
        "apiKey: process.env.STRIPE_KEY",
        "db_password: !vault |",
        "Authorization: Bearer <YOUR_TOKEN>",
        "cat /etc/passwd",
        "ssl_certificate_key /etc/ssl/private/web.key;",
        "DB_PASSWORD_FILE=/run/secrets/db_password",
        "[sudo] password for alice:",
        "mysql -u root -p app",
        "token_ttl = 3600",
        "compass=N3rth-by-west",
        "bypass_cache=Tru3-or-false",
        "tokenizer: bert-base-uncased",
        "token_endpoint: https://sso.example.com/token",
        "secret_name: db-creds-2024",
        "passwordless_login: true",
        "  public key: 5iz+PZdwZLTAR2ew12znFT8WUUMVsKnpAoeFrvj6erw=",
        "password: '********'",
        "password: \"[REDACTED]\"",
        "DB_PASSWORD=changeme",
        "API_KEY=your-api-key-here",
        "HF_TOKEN=hf_xxxxxxxxxxxxxxxxxxxx",
        "password = var.db_password",
        "password:  20 bytes",
        "パスワード有効期限: 2024/12/31",
        "  - Token scopes: 'gist', 'repo'",
        "| Name | Token | Last used |",
        "# If the master is password protected (using the \"requirepass\" configuration",
    ] {
        assert!(found(text).is_empty(), "{text}: {:?}", found(text));
    }
}

#[test]
fn long_values_are_cut_on_a_character_boundary() {
    // Found by the fuzz target: a value past the length bound was cut
    // inside a character.
    let line = format!("password={}", "é".repeat(300));
    let spans = Pairs::new().find(&line);
    assert!(
        spans
            .iter()
            .all(|r| line.is_char_boundary(r.start) && line.is_char_boundary(r.end))
    );
    let quoted = format!("mysql -p'a1{}' db", "é".repeat(10));
    assert_eq!(found(&quoted), [format!("a1{}", "é".repeat(10)).as_str()]);
}

#[test]
fn lines_full_of_keywords_and_tools() {
    // Each keyword, value and tool is looked at a bounded distance
    // around it (the fuzz target checks the bound): these end.
    let line = "password=".repeat(20_000);
    assert!(!found(&line).is_empty());
    assert!(found(&"passwordpassword".repeat(20_000)).is_empty());
    let tools = "mysql -pAbc123xyz ".repeat(5_000);
    assert_eq!(found(&tools).len(), 5_000);
}
