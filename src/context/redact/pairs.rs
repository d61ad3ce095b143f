//! Secrets found by where they stand rather than by what they look like:
//! the value of a key that names a secret, in any of the syntaxes ops
//! output uses, and the value of a password-bearing flag of a known tool.
//!
//! Keys: words for a secret in many languages (password, secret, token,
//! 密码, パスワード, Passwort, пароль…), as the whole or the last part of a
//! key (`db_password`, `smtpPassword`, `AuthLDAPBindPassword`; not
//! `tokenizer`, `secret_name`). Syntaxes: `k=v`, `k: v`, `k := v`, `k =>
//! v`, `"k": "v"`, `<k a="b">v</k>`, `k="v"` and `key="k" value="v"` as XML
//! attributes, `define('k', 'v')`, `$k = 'v'`, directives however many
//! words come first (`requirepass v`, `sentinel auth-pass NAME v`), a
//! strong key word then a quoted or random-looking value anywhere, a CJK
//! label words before its value; and over lines: a table's secret column
//! under its header (`|`, `,`, tabs or aligned blanks), a YAML block
//! scalar, redis-cli's numbered reply, `name:secret` lines under a key
//! with no value. Quoted values keep their escapes. A value must look like
//! a secret: not a number, a date, a placeholder, a mask, a reference to an
//! environment variable, a template or a vault, nor a word of prose.
//!
//! Flags: a table of tools and their password flags, in every form a shell
//! accepts: `-p'x'`, `-px`, `-p x`, `--password=x`, `pass:x`,
//! `-storepass x`, and the operands some tools take a secret in
//! (`mc alias set NAME URL KEY SECRET`).
//!
//! Both read the text line by line, and look at most a bounded distance
//! around each keyword: linear in the text. What becomes of the spans is
//! the redactor's.

use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

/// Words that name a secret, lower case (matched without regard to ASCII
/// case; the others are listed in the cases they are written in).
const KEY_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "pass",
    "pw",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "accesskey",
    "access_key",
    "privatekey",
    "private_key",
    "credential",
    "requirepass",
    "masterauth",
    "community",
    "authpass",
    "privpass",
    "authtok",
    "bindpw",
    "rootpw",
    "psk",
    "auth-pass",
    "identified by",
    "key content",
    "key",
    "salt",
    "密码",
    "口令",
    "秘钥",
    "密钥",
    "パスワード",
    "暗証番号",
    "キー",
    "トークン",
    "シークレット",
    "令牌",
    "私钥",
    "密匙",
    "passwort",
    "kennwort",
    "contraseña",
    "contrasena",
    "clave",
    "mot de passe",
    "mot_de_passe",
    "senha",
    "wachtwoord",
    "hasło",
    "haslo",
    "пароль",
    "Пароль",
    "ПАРОЛЬ",
    "비밀번호",
    "패스워드",
    "암호",
    "토큰",
    "密碼",
    "金鑰",
    "密鑰",
    "parola",
    "şifre",
    "Şifre",
    "ŞİFRE",
    "clé secrète",
    "Clé secrète",
    "clé d'api",
    "Clé d'API",
    "chave de acesso",
    "chave secreta",
    "Chave de acesso",
    "Chave secreta",
    "geheimer schlüssel",
    "Geheimer Schlüssel",
    "API-Schlüssel",
    "Schlüssel",
    "Contraseña",
    "mật khẩu",
    "Mật khẩu",
    "MẬT KHẨU",
    "khóa bí mật",
    "Khóa bí mật",
    "ключ",
    "Ключ",
    "κωδικός",
    "Κωδικός",
    "ΚΩΔΙΚΟΣ",
    "סיסמה",
    "סיסמא",
    "كلمة المرور",
    "كلمة السر",
    "مفتاح",
    "पासवर्ड",
    "कुंजी",
    "รหัสผ่าน",
    "權杖",
    "Hasło",
    "heslo",
    "jelszó",
    "lösenord",
    "salasana",
    // MySQL's password hash column.
    "authentication_string",
    "erlang_cookie",
    "erlang-cookie",
    "erlang.cookie",
    "パスフレーズ",
    "秘密鍵",
    "api 키",
    "액세스 키",
    "시크릿 키",
    "비밀 키",
    "비밀키",
    // A Feishu or DingTalk bot's signing secret.
    "签名校验",
    "签名密钥",
    "加签密钥",
    "加签",
];

/// Key words that are parts of other words too: they count only where
/// they end the key.
const SHORT_WORDS: &[&str] = &["pass", "pw"];

/// Whether `word` ends `key` as a part of its own: after a separator or a
/// lower-case letter (camel case), or as the whole key.
fn last_part(key: &str, word: &str) -> bool {
    let Some(prefix) = key.strip_suffix(word) else {
        return false;
    };
    let camel = word.starts_with(|c: char| c.is_ascii_uppercase())
        && prefix.ends_with(|c: char| c.is_ascii_lowercase());
    prefix.is_empty() || prefix.ends_with(['_', '-', '.']) || camel
}

/// How far from a keyword a key and its separator may reach, and how long
/// a value may be: bounds that keep each look short, so the whole is
/// linear in the text.
const KEY_REACH: usize = 64;
const VALUE_MAX: usize = 256;

/// Tools and the flags that carry their password: `(tools, flags)`. A flag
/// of one dash and one letter also takes its value attached (`-pX`).
const FLAGS: &[(&[&str], &[&str])] = &[
    (
        &[
            "mysql",
            "mysqldump",
            "mysqladmin",
            "mariadb",
            "mariadb-dump",
            "mysqlimport",
        ],
        &["-p", "--password"],
    ),
    (&["sshpass"], &["-p"]),
    (&["redis-cli", "valkey-cli"], &["-a", "--pass"]),
    (&["sqlcmd", "bcp", "osql"], &["-P"]),
    (
        &[
            "ldapsearch",
            "ldapadd",
            "ldapmodify",
            "ldapdelete",
            "ldapwhoami",
        ],
        &["-w"],
    ),
    // `ldappasswd -s NEW` sets a new password.
    (&["ldappasswd"], &["-w", "-s"]),
    (&["cqlsh"], &["-p", "--password"]),
    (&["kadmin", "kadmin.local", "kpasswd"], &["-w"]),
    (&["hdbsql"], &["-p"]),
    (
        &["esxcli"],
        &["-p", "--password", "-c", "--password-confirmation"],
    ),
    (
        &[
            "ipa-server-install",
            "ipa-replica-install",
            "ipa-client-install",
        ],
        &[
            "-p",
            "-a",
            "-w",
            "--ds-password",
            "--admin-password",
            "--password",
        ],
    ),
    (
        &["dsquery", "dsadd", "dsmod", "dsget", "dsrm", "netdom"],
        &["-p", "/passwordd:", "/passwordo:"],
    ),
    (&["appcmd"], &["/processModel.password:", "/password:"]),
    (&["schtasks"], &["/RP", "/rp"]),
    (&["security"], &["-w"]),
    (&["influx"], &["-t", "--token"]),
    (&["rabbitmqadmin"], &["-p", "--password"]),
    (&["oc", "odo"], &["-p", "--password", "--token"]),
    (&["drone"], &["--data"]),
    // `user:password` after the flag.
    (
        &["skopeo", "podman", "buildah", "crane"],
        &["--creds", "--src-creds", "--dest-creds"],
    ),
    (&["ipmitool"], &["-P"]),
    (
        &[
            "mongosh",
            "mongo",
            "mongodump",
            "mongorestore",
            "mongoexport",
            "mongoimport",
        ],
        &["-p", "--password"],
    ),
    (
        &["keytool"],
        &[
            "-storepass",
            "-keypass",
            "-srcstorepass",
            "-deststorepass",
            "-srckeypass",
            "-destkeypass",
            "-new",
        ],
    ),
    (
        &["wget"],
        &[
            "--password",
            "--http-password",
            "--ftp-password",
            "--proxy-password",
        ],
    ),
    (&["psql", "pg_dump", "pg_restore"], &["--password"]),
    (&["smbclient", "rpcclient", "net"], &["--password"]),
    (
        &["docker", "podman", "helm", "skopeo", "buildah"],
        &["-p", "--password"],
    ),
    (&["vault"], &["-password"]),
    (&["zip", "unzip"], &["-P"]),
    (&["7z", "7za"], &["-p"]),
    (&["openconnect", "sqlplus"], &["--password", "--pass"]),
    (
        &["rclone"],
        &[
            "--password",
            "--pass",
            "--sftp-pass",
            "--ftp-pass",
            "--webdav-pass",
            "--smb-pass",
        ],
    ),
    (&["htpasswd"], &[]),
    (&["govc"], &["-u"]),
    (&["snyk"], &[]),
    (&["doveadm"], &["-p"]),
    (
        &[
            "mkstore",
            "hdbuserstore",
            "mosquitto_passwd",
            "radtest",
            "ldifde",
        ],
        &[],
    ),
    (&["mc"], &[]),
    (&["aws"], &[]),
    (&["curl"], &["--oauth2-bearer"]),
    (&["openssl"], &[]),
    (&["rabbitmqctl", "grafana-cli", "nmcli"], &[]),
    (&["ngrok", "cloudflared"], &["--authtoken", "--token"]),
    (
        &["mosquitto_pub", "mosquitto_sub", "mosquitto_rr"],
        &["-P", "--pw"],
    ),
    (&["mcrcon", "racadm"], &["-p"]),
    (
        &["az"],
        &[
            "-p",
            "--password",
            "--account-key",
            "--sas-token",
            "--client-secret",
        ],
    ),
    (&["gpg", "gpg2"], &["--passphrase"]),
    (
        &[
            "snmpwalk",
            "snmpget",
            "snmpbulkwalk",
            "snmpset",
            "snmptable",
        ],
        &["-c", "-A", "-X"],
    ),
    (&["xfreerdp", "cmdkey", "wfreerdp"], &[]),
    (&["lftp"], &[]),
];

/// A password in an operand: `openssl … pass:X`, `smbclient -U user%X`,
/// `htpasswd -b FILE USER X`, `mc alias set NAME URL KEY X`, `aws
/// configure set aws_secret_access_key X`.
fn operand_secrets(tool: &str, words: &[Word], out: &mut Vec<Range<usize>>) {
    let plain: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    match tool {
        "htpasswd" if plain.iter().any(|w| w.starts_with('-') && w.contains('b')) => {
            let operands: Vec<&Word> = words.iter().filter(|w| !w.text.starts_with('-')).collect();
            if let Some(w) = operands.get(2) {
                out.push(w.value.clone());
            }
        }
        "mc" if plain.windows(2).any(|p| p == ["alias", "set"]) => {
            let i = plain.iter().position(|w| *w == "set").unwrap_or(0);
            let operands: Vec<&Word> = words[i + 1..]
                .iter()
                .filter(|w| !w.text.starts_with('-'))
                .collect();
            for w in operands.iter().skip(2).take(2) {
                out.push(w.value.clone());
            }
        }
        // `net use Z: \\fs\share /user:DOMAIN\name PASSWORD`.
        "net" if plain.first() == Some(&"use") => {
            if let Some(i) = plain.iter().position(|w| starts_with_ci(w, "/user:"))
                && let Some(w) = words.get(i + 1).filter(|w| !w.text.starts_with('/'))
            {
                out.push(w.value.clone());
            }
            // Or right after the share.
            if let Some(i) = plain.iter().position(|w| w.starts_with("\\\\"))
                && let Some(w) = words
                    .get(i + 1)
                    .filter(|w| !w.text.starts_with('/') && w.text != "*")
            {
                out.push(w.value.clone());
            }
        }
        // `ngrok config add-authtoken TOKEN`, `cloudflared service install
        // TOKEN`.
        // `snyk auth TOKEN`.
        "snyk" if plain.first() == Some(&"auth") => {
            if let Some(w) = words.get(1).filter(|w| !w.text.starts_with('-')) {
                out.push(w.value.clone());
            }
        }
        "ngrok" | "cloudflared" => {
            if let Some(i) = plain
                .iter()
                .position(|w| matches!(*w, "add-authtoken" | "authtoken" | "install"))
                && let Some(w) = words.get(i + 1).filter(|w| !w.text.starts_with('-'))
            {
                out.push(w.value.clone());
            }
        }
        // `mkstore -wrl W -createCredential DB USER PW`.
        "mkstore" => {
            if let Some(i) = plain
                .iter()
                .position(|w| matches!(*w, "-createCredential" | "-modifyCredential"))
                && let Some(w) = words.get(i + 3)
            {
                out.push(w.value.clone());
            }
        }
        // `hdbuserstore SET KEY ENV USER PW`.
        "hdbuserstore" => {
            if let Some(i) = plain.iter().position(|w| w.eq_ignore_ascii_case("set"))
                && let Some(w) = words.get(i + 4)
            {
                out.push(w.value.clone());
            }
        }
        // `mosquitto_passwd -b FILE USER PW`.
        "mosquitto_passwd" if plain.contains(&"-b") => {
            let operands: Vec<&Word> = words.iter().filter(|w| !w.text.starts_with('-')).collect();
            if let Some(w) = operands.get(2) {
                out.push(w.value.clone());
            }
        }
        // `radtest USER PW HOST PORT SECRET`.
        "radtest" => {
            let operands: Vec<&Word> = words.iter().filter(|w| !w.text.starts_with('-')).collect();
            for i in [1, 4] {
                if let Some(w) = operands.get(i) {
                    out.push(w.value.clone());
                }
            }
        }
        // `ldifde … -b USER DOMAIN PW`.
        "ldifde" => {
            if let Some(i) = plain.iter().position(|w| *w == "-b")
                && let Some(w) = words.get(i + 3)
            {
                out.push(w.value.clone());
            }
        }
        // `openssl passwd -6 [-salt S] PW`: its first operand.
        "openssl" if plain.first() == Some(&"passwd") => {
            let mut i = 1;
            while let Some(w) = plain.get(i)
                && w.starts_with('-')
            {
                i += if matches!(*w, "-salt" | "-in" | "-table") {
                    2
                } else {
                    1
                };
            }
            // Each operand is a password to hash.
            out.extend(
                words[i.min(words.len())..]
                    .iter()
                    .filter(|w| w.text.len() > 1 && !w.text.starts_with('-'))
                    .map(|w| w.value.clone()),
            );
        }
        // `net user NAME PW /add`.
        "net" if plain.first() == Some(&"user") => {
            if let Some(w) = words
                .get(2)
                .filter(|w| !w.text.starts_with('/') && w.text != "*")
            {
                out.push(w.value.clone());
            }
        }
        // `sqlplus user/pw@db`, `lftp -u user,pw`.
        "sqlplus" | "lftp" => {
            for w in words {
                let sep = if tool == "sqlplus" { '/' } else { ',' };
                if let Some(i) = w.text.find(sep)
                    && !w.text.starts_with(['-', '/', '@'])
                {
                    let rest = &w.text[i + 1..];
                    let end = rest.find('@').unwrap_or(rest.len());
                    if let Some(r) = rest_of_word(w, i + 1) {
                        out.push(r.start..r.start + end.min(r.len()));
                    }
                }
            }
        }
        // `rabbitmqctl add_user NAME PW`, `change_password NAME PW`.
        "rabbitmqctl" => {
            if let Some(i) = plain
                .iter()
                .position(|w| matches!(*w, "add_user" | "change_password" | "authenticate_user"))
                && let Some(w) = words.get(i + 2)
            {
                out.push(w.value.clone());
            }
        }
        // `grafana-cli admin reset-admin-password PW`.
        "grafana-cli" => {
            if let Some(i) = plain.iter().position(|w| *w == "reset-admin-password")
                && let Some(w) = words[i + 1..].iter().find(|w| !w.text.starts_with('-'))
            {
                out.push(w.value.clone());
            }
        }
        // `rclone config create NAME TYPE … pass PW`, `nmcli … password PW`,
        // `… wifi-sec.psk PW`: key and value as two operands.
        "rclone" | "nmcli" => {
            for (i, w) in plain.iter().enumerate() {
                if matches!(
                    *w,
                    "pass" | "password" | "wifi-sec.psk" | "802-1x.password" | "vpn.secrets"
                ) && let Some(v) = words.get(i + 1)
                {
                    out.push(v.value.clone());
                }
            }
        }
        "aws" => {
            if let Some(i) = plain
                .iter()
                .position(|w| w.contains("secret_access_key") || *w == "aws_session_token")
                && let Some(w) = words.get(i + 1)
            {
                out.push(w.value.clone());
            }
        }
        _ => {}
    }
    for w in words {
        if w.text
            .strip_prefix("pass:")
            .is_some_and(|rest| !rest.is_empty())
        {
            out.extend(rest_of_word(w, "pass:".len()));
        }
        // Windows' `/p:X` (xfreerdp), `/pass:X` (cmdkey), `/password:X`.
        for prefix in ["/p:", "/pass:", "/password:"] {
            if w.text.len() > prefix.len() && starts_with_ci(&w.text, prefix) {
                out.extend(rest_of_word(w, prefix.len()));
            }
        }
        // smbclient -U user%password
        if matches!(tool, "smbclient" | "rpcclient" | "net" | "mount.cifs")
            && let Some(i) = w.text.find('%')
            && w.text[..i]
                .chars()
                .all(|c| c.is_alphanumeric() || "._-\\@".contains(c))
        {
            out.extend(rest_of_word(w, i + 1));
        }
    }
}

/// One shell word of a line: its text (quotes removed) and the span of
/// that text in the line (inside the quotes, when it was quoted whole or
/// after a flag).
struct Word {
    text: String,
    value: Range<usize>,
    /// The word as written, quotes and all, from `value.start`.
    raw: String,
}

/// The span of `w` after its first `skip` bytes of text, as written:
/// quotes inside count as part of it. None when the word as written does
/// not begin with those characters (they were quoted apart).
fn rest_of_word(w: &Word, skip: usize) -> Option<Range<usize>> {
    let head = w.text.get(..skip)?;
    let rest = w.raw.strip_prefix(head)?;
    let rest = rest.strip_prefix('=').unwrap_or(rest);
    let rest = rest.trim_start_matches(['\'', '"']);
    let start = w.value.end - rest.len();
    (start < w.value.end).then_some(start..w.value.end)
}

/// `line` with each `"$(` … `)"` that is a whole quoted word blanked at
/// both ends; a `"$(date) start"` is left whole (blanking its start only
/// left a quote that took in the rest of the line).
fn unwrap_substitutions(line: &str) -> String {
    let mut out = line.to_string();
    let mut from = 0;
    while let Some(open) = line[from..].find("\"$(").map(|i| from + i) {
        let inner = open + 3;
        let Some(close) = line[inner..].find(['"', '\n']).map(|i| inner + i) else {
            break;
        };
        if line[..close].ends_with(')') && line[close..].starts_with('"') {
            out.replace_range(open..inner, "   ");
            out.replace_range(close - 1..close + 1, "  ");
        }
        from = close + 1;
    }
    out
}

/// The words of a command line, by simple shell rules: blanks separate,
/// single and double quotes group. Enough to find flags and their values;
/// a word's span covers its text between any quotes.
fn words(line: &str) -> Vec<Word> {
    // `"$(openssl passwd -6 'x')"`: the command inside a quoted
    // substitution is read as words of its own (blanks keep every
    // offset).
    let unwrapped;
    let line = if line.contains("\"$(") {
        unwrapped = unwrap_substitutions(line);
        unwrapped.as_str()
    } else {
        line
    };
    let mut out = Vec::new();
    let mut chars = line.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut text = String::new();
        let (mut first, mut last) = (None::<usize>, start);
        let mut quote: Option<char> = None;
        while let Some(&(i, c)) = chars.peek() {
            match (quote, c) {
                (None, c) if c.is_whitespace() => break,
                (None, '\'' | '"') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (_, c) => {
                    first.get_or_insert(i);
                    text.push(c);
                    last = i + c.len_utf8();
                }
            }
            chars.next();
        }
        let from = first.unwrap_or(start);
        let end = last.max(from);
        out.push(Word {
            text,
            value: from..end,
            raw: line[from..end].to_string(),
        });
    }
    out
}

/// A password flag's value in `words`: `-p X`, `-pX`, `--password=X`,
/// `--password X` (the value's span within the line).
fn flag_secrets(tool: &str, flags: &[&str], words: &[Word], out: &mut Vec<Range<usize>>) {
    let mysql = tool.starts_with("mysql") || tool.starts_with("mariadb");
    for (i, w) in words.iter().enumerate() {
        for &flag in flags {
            let t = w.text.as_str();
            if t == flag {
                // `mysql -p` alone prompts: the next word is not a password
                // when it is another flag.
                if let Some(next) = words.get(i + 1)
                    && !next.text.starts_with('-')
                    && !next.text.is_empty()
                    && !(mysql && flag == "-p" && is_mysql_database(words, i))
                {
                    out.push(next.value.clone());
                }
            } else if let Some(rest) = t.strip_prefix(flag) {
                let short = flag.len() == 2 && !flag.starts_with("--");
                let value = if let Some(v) = rest.strip_prefix('=') {
                    Some(v)
                } else if short || flag.ends_with(':') {
                    // `-pX`; Windows' `/password:X`.
                    Some(rest)
                } else {
                    None
                };
                if value.is_some_and(|v| !v.is_empty()) {
                    // The value is the rest of the word as written: after
                    // the flag (and `=`), quotes and all.
                    out.extend(rest_of_word(w, flag.len()));
                }
            }
        }
    }
}

/// `mysql -p DB`: with a space, mysql's `-p` prompts, and the next word
/// is the database. Taken as a password anyway unless it is the last word
/// (the usual place of a database); a leak costs more than a name.
fn is_mysql_database(words: &[Word], flag: usize) -> bool {
    flag + 2 == words.len()
}

/// The key and flag detector.
pub(crate) struct Pairs {
    keys: AhoCorasick,
    tools: AhoCorasick,
}

impl Pairs {
    pub(crate) fn new() -> Pairs {
        // The longest word at a place: `password`, not the `pass` in it.
        let keys = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::DFA))
            .build(KEY_WORDS)
            .expect("the key words build");
        let names: Vec<&str> = FLAGS
            .iter()
            .flat_map(|(tools, _)| tools.iter().copied())
            .collect();
        let tools = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(AhoCorasickKind::DFA))
            .build(names)
            .expect("the tool names build");
        Pairs { keys, tools }
    }

    /// Every secret these find in `text`.
    pub(crate) fn find(&self, text: &str) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut at = 0;
        // A block scalar's key, by its indent: the lines indented more
        // are its value.
        let mut block: Option<usize> = None;
        // The line before named a secret as redis-cli prints it
        // (`1) "requirepass"`): the next holds its value.
        let mut named = false;
        // A table whose header names a secret column: the rows' cells.
        let mut table: Option<Column> = None;
        // The separator and cell count of the last table row: a row of the
        // same shape under it is data, never a header (`| app |
        // caching_sha2_password |` under `| user | plugin |`).
        let mut last_row: Option<(char, usize)> = None;
        // Under an aligned header that names no secret and no value
        // (`NAME  DIGEST  CREATED AT`), a row is names and digests, not
        // `KEY value` pairs.
        let mut quiet = false;
        // A key for secrets with no value of its own (`chpasswd:`): the
        // `name:secret` lines indented below it.
        let mut section: Option<usize> = None;
        for line in text.split_inclusive('\n') {
            let body = line.trim_end_matches(['\n', '\r']);
            let indent = body.len() - body.trim_start().len();
            // A row of a table with a secret column: that cell, and the row
            // is read as any line too.
            let mut row = false;
            if let Some(column) = table {
                match column.cell(body) {
                    Cell::Value(v) => {
                        if is_secret_value(&body[v.clone()], quoted_at(body, v.start)) {
                            out.push(at + v.start..at + v.end);
                        }
                        row = true;
                    }
                    Cell::Rule => {
                        at += line.len();
                        continue;
                    }
                    Cell::Other => table = None,
                }
            }
            if let Some(k) = section {
                if indent > k && !body.trim().is_empty() {
                    // `name:secret` lines (`chpasswd:`), or the value
                    // itself on the line below its key (`rootパスワード:`).
                    let t = body.trim();
                    let alone = (!t.contains([' ', '\t', ':']) && is_secret_value(t, false))
                        .then(|| indent..indent + t.len());
                    if let Some(v) = name_and_secret(body).or(alone) {
                        out.push(at + v.start..at + v.end);
                    }
                } else if !body.trim().is_empty() {
                    section = None;
                }
            }
            if let Some(k) = block {
                if body.trim().is_empty() {
                    at += line.len();
                    continue;
                }
                if indent > k {
                    out.push(at + indent..at + body.trim_end().len());
                    at += line.len();
                    continue;
                }
                block = None;
            }
            let item = numbered_item(body);
            if named
                && let Some(v) = item.clone()
                && is_secret_value(&body[v.clone()], true)
            {
                out.push(at + v.start..at + v.end);
            }
            named = item.is_some_and(|v| self.keys.find(&body[v]).is_some());
            if quiet && (body.trim().is_empty() || super::commands::prompt(body).is_some()) {
                quiet = false;
            }
            let pairs = !quiet || body.contains('=') || body.contains(": ");
            if pairs && self.line_pairs(body, at, &mut out) {
                block = Some(indent);
            }
            self.line_flags(body, at, &mut out);
            let shape = row_shape(body);
            if !row && (shape.is_none() || shape != last_row) {
                table = Column::header(body, |cell| self.names_secret(cell));
                quiet = quiet || table.is_none() && plain_header(body);
            }
            if shape.is_some() || !body.trim().is_empty() && is_rule(body) {
                last_row = shape.or(last_row);
            } else {
                last_row = None;
            }
            let t = body.trim();
            if t.ends_with(':') && !t.contains(char::is_whitespace) && self.keys.find(t).is_some() {
                section = Some(indent);
            }
            at += line.len();
        }
        out
    }

    /// Whether a table's header cell names a secret column: a key word,
    /// then only what says how the secret is written (`password`,
    /// `AccessKey Secret`, `密码`; not `password_changed_at`).
    fn names_secret(&self, cell: &str) -> bool {
        let cell = cell.trim().trim_matches(['"', '\'']);
        // A header's cell is a name (`password`, `AccessKey Secret`,
        // `密码`), not a key and its value or code (`define('X'`).
        let name = cell
            .chars()
            .all(|c| c.is_alphanumeric() || " _-.".contains(c));
        name && cell.chars().count() <= 32
            && self.keys.find_iter(cell).any(|m| {
                let word = &cell[m.range()];
                !is_word(word, WEAK_WORDS) && (!word.is_ascii() || secret_suffix(&cell[m.end()..]))
            })
    }

    fn line_flags(&self, line: &str, at: usize, out: &mut Vec<Range<usize>>) {
        let hits: Vec<Range<usize>> = self
            .tools
            .find_iter(line)
            .map(|m| m.range())
            .filter(|r| word_at(line, r.clone()))
            .collect();
        if hits.is_empty() {
            return;
        }
        let words = words(line);
        let mut found = Vec::new();
        // Each tool's arguments are the words after its name, up to the
        // next tool's: every word is looked at once.
        for (k, hit) in hits.iter().enumerate() {
            let tool = &line[hit.clone()];
            // Every entry that names the tool: one lists its login's
            // flags, another its `--creds`.
            let flags: Vec<&str> = FLAGS
                .iter()
                .filter(|(tools, _)| tools.contains(&tool))
                .flat_map(|(_, f)| f.iter().copied())
                .collect();
            let from = words.partition_point(|w| w.value.start < hit.end);
            let to = hits.get(k + 1).map_or(words.len(), |next| {
                words.partition_point(|w| w.value.start < next.start)
            });
            let args = &words[from..to.max(from)];
            flag_secrets(tool, &flags, args, &mut found);
            operand_secrets(tool, args, &mut found);
        }
        out.extend(
            found
                .into_iter()
                .filter(|r| is_secret_value(&line[r.clone()], quoted_at(line, r.start)))
                .map(|r| r.start + at..r.end + at),
        );
    }

    /// The values of the keys in `line`; true when one is a YAML block
    /// scalar (its value is on the lines below).
    fn line_pairs(&self, line: &str, at: usize, out: &mut Vec<Range<usize>>) -> bool {
        // An INI section's header (`[credential "https://github.com"]`)
        // is a name.
        // (A JSON array, `[{"db_pass": …}]`, is none.)
        let t = line.trim();
        let json = t
            .strip_prefix('[')
            .is_some_and(|r| r.trim_start().starts_with(['{', '"']));
        if t.starts_with('[') && t.ends_with(']') && !t.contains('=') && !json {
            return false;
        }
        let mut last_end = 0;
        let mut block = false;
        for m in self.keys.find_iter(line) {
            if m.start() < last_end {
                continue;
            }
            let found = pair_value(line, m.range()).or_else(|| {
                // A CJK key word, its value several words on.
                line[m.range()]
                    .chars()
                    .any(|c| c as u32 >= 0x2e80)
                    .then(|| cjk_value(line, m.range()))
                    .flatten()
                    .map(|range| Found::Value {
                        range,
                        quoted: false,
                        strict: false,
                    })
            });
            match found {
                Some(Found::Block) => block = true,
                Some(Found::Value {
                    range,
                    quoted,
                    strict,
                }) => {
                    // Key words inside a value taken are not keys; inside
                    // one that is no secret they may be (`key="AccountKey"`).
                    // A key's fingerprint (`主机密钥指纹（SHA256）：…`) is public.
                    let v = &line[range.clone()];
                    let label = line.get(m.end()..range.start).unwrap_or("");
                    let fingerprint = ["指纹", "指紋", "フィンガープリント", "지문", "ingerprint"]
                        .iter()
                        .any(|w| label.contains(w));
                    if is_secret_value(v, quoted) && (!strict || random_looking(v)) && !fingerprint
                    {
                        last_end = range.end;
                        out.push(range.start + at..range.end + at);
                    }
                }
                None => {}
            }
        }
        block
    }
}

/// A table's secret column.
#[derive(Clone, Copy)]
enum Column {
    /// Cells split at `sep`: how many a row has, and which is the secret.
    Split {
        sep: char,
        cells: usize,
        index: usize,
    },
    /// Columns aligned with blanks (`NAME   USERNAME   PASSWORD`): where
    /// the secret column starts, in bytes of an ASCII header.
    Aligned { at: usize },
}

enum Cell {
    /// The secret column's cell, inside its quotes.
    Value(Range<usize>),
    /// A rule between rows (`|----|`, `+---+`).
    Rule,
    /// Not a row of this table.
    Other,
}

impl Column {
    /// The secret column of a header line, if it is one: cells split by
    /// `|`, `│`, `,` or a tab, at least two, one naming a secret.
    fn header(line: &str, names_secret: impl Fn(&str) -> bool) -> Option<Column> {
        let Some(sep) = ['|', '│', '\t', ',']
            .into_iter()
            .find(|&c| line.contains(c))
        else {
            return Column::aligned(line, names_secret);
        };
        let cells = split_cells(line, sep);
        if cells.len() < 2 || cells.len() > 64 {
            return None;
        }
        let index = cells.iter().position(|c| names_secret(&line[c.clone()]))?;
        Some(Column::Split {
            sep,
            cells: cells.len(),
            index,
        })
    }

    /// A header of three or more names aligned with two blanks or more.
    fn aligned(line: &str, names_secret: impl Fn(&str) -> bool) -> Option<Column> {
        let cells = aligned_names(line)?;
        let cell = cells.iter().find(|c| names_secret(&line[(*c).clone()]))?;
        Some(Column::Aligned { at: cell.start })
    }

    fn cell(&self, line: &str) -> Cell {
        // The next prompt ends a table.
        if super::commands::prompt(line).is_some() {
            return Cell::Other;
        }
        let (sep, count, index) = match *self {
            Column::Split { sep, cells, index } => (sep, cells, index),
            Column::Aligned { at } => return aligned_cell(line, at),
        };
        let t = line.trim();
        if !t.is_empty() && t.chars().all(|c| "-+|=:│─┼├┤ ".contains(c)) {
            return Cell::Rule;
        }
        let pieces = split_cells(line, sep);
        match pieces.get(index) {
            Some(r) if pieces.len() == count => {
                let piece = &line[r.clone()];
                let lead = piece.len() - piece.trim_start().len();
                let inner = piece.trim();
                let quoted = inner.len() >= 2
                    && (inner.starts_with('"') && inner.ends_with('"')
                        || inner.starts_with('\'') && inner.ends_with('\''));
                let q = usize::from(quoted);
                let v = r.start + lead + q..r.start + lead + inner.len() - q;
                if v.is_empty() {
                    Cell::Rule
                } else {
                    Cell::Value(v)
                }
            }
            _ => Cell::Other,
        }
    }
}

/// The cells of a header of three or more names aligned with two blanks
/// or more (`NAME   USERNAME   PASSWORD`); a row of values
/// (`db-credentials  Opaque  2`) is none.
fn aligned_names(line: &str) -> Option<Vec<Range<usize>>> {
    if !line.is_ascii() || line.len() > 512 || !line.contains("  ") {
        return None;
    }
    let mut cells = Vec::new();
    let mut start = None;
    let bytes = line.as_bytes();
    for i in 0..=bytes.len() {
        let gap = i == bytes.len() || (bytes[i] == b' ' && bytes.get(i + 1) == Some(&b' '));
        match (start, gap) {
            (None, false) if bytes[i] != b' ' => start = Some(i),
            (Some(s), true) => {
                cells.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    // A header is names only (`NAME  TYPE  DATA`): a row of values
    // (`db-credentials  Opaque  2`) is none.
    let names = cells.iter().all(|c| {
        line[c.clone()]
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b" _-".contains(&b))
    });
    if cells.len() < 3 || !names {
        return None;
    }
    Some(cells)
}

/// An aligned header that names neither a secret nor a value
/// (`NAME  DIGEST  CREATED AT`, `fly secrets list`).
fn plain_header(line: &str) -> bool {
    aligned_names(line).is_some_and(|cells| {
        cells.iter().all(|c| {
            let name = line[c.clone()].to_ascii_lowercase();
            ![
                "value", "data", "content", "secret", "password", "token", "key",
            ]
            .iter()
            .any(|w| name.contains(w))
        })
    })
}

/// The separator and cell count of a row split by `|` or `│`.
fn row_shape(line: &str) -> Option<(char, usize)> {
    let sep = ['|', '│'].into_iter().find(|&c| line.contains(c))?;
    let n = split_cells(line, sep).len();
    (n >= 2).then_some((sep, n))
}

/// A rule between a table's rows (`+----+`, `|----|`).
fn is_rule(line: &str) -> bool {
    line.trim().chars().all(|c| "-+|=:│─┼├┤ ".contains(c))
}

/// The word of `line` that starts at `at`, the column of a table aligned
/// with blanks; a row whose word does not start there ends the table.
fn aligned_cell(line: &str, at: usize) -> Cell {
    let b = line.as_bytes();
    let starts = at < b.len() && b[at] != b' ' && (at == 0 || b[at - 1] == b' ');
    if !line.is_char_boundary(at) || !starts {
        return Cell::Other;
    }
    let end = line[at..]
        .find(char::is_whitespace)
        .map_or(line.len(), |e| at + e);
    Cell::Value(at..end)
}

/// The cells of a row, split at `sep`; in CSV (`,`) a double-quoted cell
/// holds commas and doubled quotes (`"a,""b"""`).
fn split_cells(line: &str, sep: char) -> Vec<Range<usize>> {
    let mut cells = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' if sep == ',' => quoted = !quoted,
            c if c == sep && !quoted => {
                cells.push(start..i);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    cells.push(start..line.len());
    cells
}

/// `  root:password` under a secrets key (cloud-init's `chpasswd` list):
/// the part after the colon, when no blank follows the colon (`expire:
/// false` is YAML).
fn name_and_secret(line: &str) -> Option<Range<usize>> {
    let t = line.trim_start().trim_start_matches("- ");
    let (name, secret) = t.split_once(':')?;
    let plain_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || "._-@".contains(c));
    let secret = secret.trim_end();
    if !plain_name || secret.is_empty() || secret.starts_with(char::is_whitespace) {
        return None;
    }
    let start = line.len() - t.len() + name.len() + 1;
    is_secret_value(secret, false).then_some(start..start + secret.len())
}

/// Whether the value at `start` of `line` stood in quotes.
fn quoted_at(line: &str, start: usize) -> bool {
    line[..start].ends_with(['"', '\'', '`'])
}

/// `1) "requirepass"`, as redis-cli numbers a reply's items: the span of
/// the item's text.
fn numbered_item(line: &str) -> Option<Range<usize>> {
    let t = line.trim_start();
    let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let r = t[digits..].strip_prefix(") \"")?;
    let inner = r.strip_suffix('"')?;
    let start = line.len() - r.len();
    (digits > 0).then_some(start..start + inner.len())
}

/// A value found on weak evidence must look generated: long enough, with
/// letters and digits or symbols, no blanks, and not a date, a version, a
/// URL or an ARN.
pub(super) fn random_looking(v: &str) -> bool {
    mixed(v) || symbols_or_digits(v)
}

/// Letters only, drawn at random: both cases, often (`wcMcJkqnKWdQfETU`),
/// not words in camel case (`ProductionDatabase`).
fn mixed(v: &str) -> bool {
    let upper = v.bytes().filter(u8::is_ascii_uppercase).count();
    let lower = v.bytes().filter(u8::is_ascii_lowercase).count();
    let longest_lower = v
        .as_bytes()
        .chunk_by(|a, b| a.is_ascii_lowercase() == b.is_ascii_lowercase())
        .filter(|r| r[0].is_ascii_lowercase())
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0);
    v.len() >= 12
        && v.bytes().all(|b| b.is_ascii_alphabetic())
        && upper >= 3
        && lower >= 3
        && longest_lower <= 4
}

fn symbols_or_digits(v: &str) -> bool {
    let letters = v.chars().filter(|c| c.is_alphabetic()).count();
    let digits = v.chars().filter(char::is_ascii_digit).count();
    let symbols = v.chars().filter(|c| !c.is_alphanumeric()).count();
    v.chars().count() >= 8
        && letters > 0
        && (digits > 0
            || symbols > 0
                && v.chars().any(char::is_uppercase)
                && v.chars().any(char::is_lowercase))
        && !v.contains(char::is_whitespace)
        && !v.contains("://")
        && !v.starts_with("arn:")
}

/// Whether `range` of `line` is a word of its own (a command name).
fn word_at(line: &str, range: Range<usize>) -> bool {
    let before = line[..range.start].chars().next_back();
    let after = line[range.end..].chars().next();
    // `C:\Tools>racadm …`: a Windows prompt's `>` or a path's `\` too.
    let edge =
        |c: Option<char>| c.is_none_or(|c| c.is_whitespace() || "|;&(`$'\"/=>\\".contains(c));
    // `/usr/bin/mysql` is mysql; `mysql.conf` is not.
    edge(before) && after.is_none_or(|c| c.is_whitespace() || ";|&)".contains(c))
}

fn key_char(c: char) -> bool {
    c.is_alphanumeric() || "_.-[]".contains(c)
}

/// What a key's syntax gives: a value, which must then look like a
/// secret (more strictly where the syntax alone says little), or a YAML
/// block scalar whose value is on the lines below.
enum Found {
    Value {
        range: Range<usize>,
        /// It stood in quotes: `"!x…"` is a string, not a YAML tag.
        quoted: bool,
        /// Found by weak evidence (a key word then a bare word, anywhere
        /// in a line; a key that ends in `key`): it must look random.
        strict: bool,
    },
    Block,
}

/// Key words that name a secret on their own, wherever they stand in a
/// line: `… password 'x'`, `IDENTIFIED BY 'x'`, `insecure-password x`.
const STRONG_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "psk",
    "authtok",
    "bindpw",
    "rootpw",
    "requirepass",
    "masterauth",
    "identified by",
    "auth-pass",
];

/// Key words too common to count but as the last part of a key whose
/// value looks random: `AUTH_KEY`, `StorageAccountKey`, `NONCE_SALT`.
const WEAK_WORDS: &[&str] = &["key", "salt"];

/// Keys ending in a weak word that name no secret.
const NOT_SECRET_KEYS: &[&str] = &[
    "public",
    "pub_",
    "pub-",
    "primary",
    "foreign",
    "sort",
    "partition",
    "cache",
    "hash",
    "lookup",
    "index",
    "unique",
    "idempotency",
    "ssh",
    "host",
    "gpg",
    "pgp",
    "map",
    "route",
    "cursor",
    "object",
    "bucket",
    "group",
    "range",
    "shard",
    "dedup",
    "row",
    "order",
    "kid",
    "key_id",
    "keyid",
    "fingerprint",
];

/// Whether `word` is one of `list`, ASCII case aside.
pub(super) fn is_word(word: &str, list: &[&str]) -> bool {
    list.iter().any(|w| word.eq_ignore_ascii_case(w))
}

/// Whether `s` ends with `suffix`, ASCII case aside.
fn ends_with_ci(s: &str, suffix: &str) -> bool {
    s.len() >= suffix.len()
        && s.is_char_boundary(s.len() - suffix.len())
        && s[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

/// Whether `s` starts with `prefix`, ASCII case aside.
pub(super) fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.as_bytes()
        .get(..prefix.len())
        .is_some_and(|x| x.eq_ignore_ascii_case(prefix.as_bytes()))
}

/// Whether `s` holds `needle`, ASCII case aside: looked for only where
/// its first letter is, so a long value costs one fast scan per word.
pub(super) fn contains_ci(s: &str, needle: &str) -> bool {
    let (s, needle) = (s.as_bytes(), needle.as_bytes());
    let Some(&first) = needle.first() else {
        return true;
    };
    let (lower, upper) = (first.to_ascii_lowercase(), first.to_ascii_uppercase());
    let mut at = 0;
    while let Some(i) = memchr::memchr2(lower, upper, &s[at..]) {
        match s.get(at + i..at + i + needle.len()) {
            Some(w) if w.eq_ignore_ascii_case(needle) => return true,
            Some(_) => at += i + 1,
            None => return false,
        }
    }
    false
}

/// The value of the key around the keyword at `hit` in `line`, if the
/// syntax there makes one.
fn pair_value(line: &str, hit: Range<usize>) -> Option<Found> {
    // The key: the keyword with the key characters around it.
    let mut start = hit.start;
    for (i, c) in line[..hit.start].char_indices().rev() {
        if !key_char(c) || hit.start - i > KEY_REACH {
            break;
        }
        start = i;
    }
    let mut end = hit.end;
    for (i, c) in line[hit.end..].char_indices() {
        if !key_char(c) || i > KEY_REACH {
            break;
        }
        end = hit.end + i + c.len_utf8();
    }
    let key = &line[start..end];
    // Short words stand for a secret only as the last part of a key
    // (`pass`, `smtp_pass`, `db-pw`, `smtpPass`), not inside a word
    // (`bypass`, `compass`, `pwm`); weak ones likewise, and not in a key
    // for what is no secret (`public_key`, `sort_key`).
    let word = &line[hit.clone()];
    let weak = is_word(word, WEAK_WORDS);
    if (is_word(word, SHORT_WORDS) || weak) && !last_part(key, word) {
        return None;
    }
    let key_lower = key.to_ascii_lowercase();
    // A key whose value names a secret kept elsewhere (Drone's
    // `from_secret: docker_password`).
    if ["from_secret", "secretkeyref", "secret_ref", "secretref"].contains(&key_lower.as_str()) {
        return None;
    }
    if weak {
        // Within reach only: a line with no blank must not cost a scan
        // per key word.
        let near = &line[line.floor_char_boundary(start.saturating_sub(KEY_REACH))..start];
        let word_before = near.split_whitespace().next_back().unwrap_or("");
        if NOT_SECRET_KEYS.iter().any(|n| key_lower.contains(n))
            || is_word(word_before, &["public", "pub", "host", "ssh"])
        {
            return None;
        }
    }
    // The key word ends the key, or only a part that says how the secret
    // is written follows it: `password2`, `tokenValue`, `secret_b64`; not
    // `tokenizer`, `token_endpoint`, `secret_name`, `passwordless_login`.
    // An access key's id goes with it (`AWS_ACCESS_KEY_ID`).
    let access_id =
        starts_with_ci(word, "access") && line[hit.end..end].eq_ignore_ascii_case("_id");
    if word.is_ascii() && !secret_suffix(&line[hit.end..end]) && !access_id {
        return None;
    }
    // A path or a file name, not a key: `/etc/passwd`, `.htpasswd`,
    // `secret.key`; and a key for where a secret is, or how it is used.
    // `$db_pass = '…'` is a variable assigned (PHP, Perl), `$PASSWORD`
    // alone a reference.
    let dollar = line[..start].ends_with('$');
    // A resource's name in an ARN (`arn:aws:secretsmanager:…:secret:x`).
    let reach = &line[line.floor_char_boundary(start.saturating_sub(KEY_REACH))..start];
    if reach.contains("arn:") {
        return None;
    }
    if line[..start].ends_with(['/', '\\', '.', '{', '%'])
        || key_lower.ends_with("_file")
        || key_lower.ends_with("_path")
        || key.contains('.')
            && key.rsplit('.').next().is_some_and(|e| {
                [
                    "key", "pem", "txt", "json", "yaml", "yml", "conf", "crt", "htpasswd",
                ]
                .contains(&e)
            })
    {
        return None;
    }
    // What stands before the key, within reach: a directive's key opens
    // the line, or follows one word (`enable secret 5 X`, `snmp-server
    // community X`).
    let near = start <= KEY_REACH;
    let before = line[..start].trim_end();
    let xml_element = before.ends_with('<') && key.is_ascii();
    // Read only when near: on a long line with no `:`, reading what
    // stands before every key word would cost the line's length each time.
    let directive = near && {
        let opening = after_grep_prefix(before);
        // Junos' and VyOS' `set snmp community X`: the words before the
        // key are its path in the configuration.
        let set_line = before.starts_with("set ") && !before.contains(['=', ':', '"', '\'']);
        opening.is_empty()
            || set_line
            || (opening.split_whitespace().nth(1).is_none()
                && !opening.contains(['=', ':', '"', '\'']))
    };
    let quote_before = line[..start]
        .chars()
        .next_back()
        .filter(|c| "\"'`".contains(*c));
    let rest = &line[end..];
    let skip_close = rest.len() - rest.trim_start_matches(['"', '\'', ']', '`']).len();
    let after_key = qualifier_end(line, end + skip_close);
    let rest = &line[after_key..];
    let trimmed = rest.trim_start_matches([' ', '\t']);
    let spaces = rest.len() - trimmed.len();
    let at = after_key + spaces;
    // `<add key="StorageAccountKey" value="…"/>`: the key is an
    // attribute's value, the secret another's.
    if quote_before.is_some()
        && ["key=", "name=", "id="]
            .iter()
            .any(|a| ends_with_ci(&line[..start - 1], a))
    {
        let window = &trimmed[..trimmed.floor_char_boundary(KEY_REACH)];
        let i = window.to_ascii_lowercase().find("value=")?;
        return value(line, at + i + "value=".len(), Sep::Assign, false);
    }
    // `$db_pass = '…'` (PHP, Perl, PowerShell): a literal is quoted;
    // `$pw = ConvertTo-SecureString …` is code.
    if dollar
        && !(trimmed.starts_with('=')
            && !trimmed.starts_with("==")
            && trimmed[1..].trim_start().starts_with(['"', '\'']))
    {
        return None;
    }
    let (sep_len, kind) = if xml_element {
        // `<password>x</password>`, `<Pass encoding="base64">x</Pass>`.
        let window = &trimmed[..trimmed.floor_char_boundary(KEY_REACH)];
        let close = window.find('>')?;
        if window[..close].contains('<') {
            return None;
        }
        // An element closes with its name on its line, after a value of
        // at most `VALUE_MAX`: `enter <password> when asked` in an HTML
        // page is prose. (Read within that reach: a line of `<password>a`
        // repeated must not cost the rest of the line per key.)
        let closing = format!("</{key}");
        let reach = &trimmed[..trimmed.floor_char_boundary(close + 1 + VALUE_MAX + closing.len())];
        if !contains_ci(reach, &closing) {
            return None;
        }
        (close + 1, Sep::Element)
    } else if let Some(sep) = ["=>", ":=", "=", ":", "：", "＝"]
        .iter()
        .find(|s| trimmed.starts_with(**s))
    {
        // `k: v` and `k = v` need the separator then a blank or a value;
        // `k:v` in a URL or a log is left to other rules.
        (sep.len(), Sep::Assign)
    } else if trimmed.starts_with(['|', '│']) && before.starts_with(['|', '│', '+'])
        || trimmed.starts_with(['|', '│']) && before.is_empty()
    {
        // A table row: `| SecretAccessKey | … |`; a cell may be a
        // header, so its value must look generated.
        (trimmed.chars().next().map_or(1, char::len_utf8), Sep::Cell)
    } else if trimmed.starts_with(',') && quote_before.is_some() && skip_close > 0 {
        // `define('DB_PASSWORD', '…')`, `Setenv("TOKEN", "…")`.
        let from = at + 1;
        let r = &line[from..];
        let v = from + (r.len() - r.trim_start().len());
        return line[v..]
            .starts_with(['"', '\'', '`'])
            .then(|| value(line, v, Sep::Assign, false))
            .flatten();
    } else if spaces > 0
        && directive
        && key
            .to_lowercase()
            .ends_with(&line[hit.clone()].to_lowercase())
    {
        // A directive's key ends with the word (`requirepass`,
        // `AuthLDAPBindPassword`); `default-token-x7k2p   kubernetes.io/…`
        // is a name in a table.
        (0, Sep::Directive)
    } else if spaces > 0
        && is_word(word, STRONG_WORDS)
        && (key.eq_ignore_ascii_case(word) || last_part(key, word))
    {
        // `mysqladmin … password 'x'`, `ALTER ROLE app PASSWORD 'x'`,
        // `user admin insecure-password x`: quoted, or random-looking.
        let quoted = trimmed.starts_with(['"', '\'', '`']);
        return value(line, at, Sep::Assign, !quoted);
    } else {
        return None;
    };
    let mut from = at + sep_len;
    let mut strict = weak || kind == Sep::Cell;
    if kind == Sep::Directive {
        // `enable secret 5 X`, `password 7 X`: a type number first;
        // `rootpw --plaintext X`: flags first.
        let r = &line[from..];
        let digits = r.len() - r.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 && digits <= 2 && r[digits..].starts_with(' ') {
            from += digits + 1;
        }
        while line[from..].starts_with("--") {
            let r = &line[from..];
            let w = r.find([' ', '\t']).unwrap_or(r.len());
            let r2 = &r[w..];
            from += w + (r2.len() - r2.trim_start().len());
        }
        // `sentinel auth-pass NAME PW`: of two or three words, the last
        // (not after a weak word: `key fingerprint is SHA256:…`).
        let words: Vec<&str> = line[from..].split_whitespace().take(4).collect();
        if !weak
            && (2..=3).contains(&words.len())
            && !is_secret_value(words[0], false)
            && let Some(last) = words.last()
            && let Some(i) = line[from..].rfind(last)
        {
            from += i;
            strict = true;
        }
    }
    let r = &line[from..];
    let r_trim = r.trim_start_matches([' ', '\t']);
    from += r.len() - r_trim.len();
    if kind == Sep::Assign && block_scalar(r_trim) {
        return Some(Found::Block);
    }
    value(line, from, kind, strict)
}

/// Past a qualifier between a key and its separator (`Parola (VPN): x`,
/// `密码（生产）：x`), or `at` itself.
fn qualifier_end(line: &str, at: usize) -> usize {
    let r = &line[at..];
    let t = r.trim_start_matches(' ');
    let Some(inner) = t.strip_prefix(['(', '（']) else {
        return at;
    };
    let window = &inner[..inner.floor_char_boundary(32)];
    let Some(close) = window.find([')', '）']) else {
        return at;
    };
    let close_len = window[close..].chars().next().map_or(1, char::len_utf8);
    let after = at + (r.len() - t.len()) + t.len() - inner.len() + close + close_len;
    let next = line[after..].trim_start_matches(' ');
    if next.starts_with([':', '：', '=']) {
        after
    } else {
        at
    }
}

/// `before` without the file name (and line number) `grep` puts at the
/// start of a line it found (`/etc/redis/sentinel.conf:12:sentinel …`).
fn after_grep_prefix(before: &str) -> &str {
    let Some((file, rest)) = before.split_once(':') else {
        return before;
    };
    if file.is_empty() || file.contains(char::is_whitespace) || !file.contains(['/', '.']) {
        return before;
    }
    match rest.split_once(':') {
        Some((n, rest)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => rest,
        _ => rest,
    }
}

/// What may follow a key word in a key that names a secret.
fn secret_suffix(rest: &str) -> bool {
    let rest = rest.trim_end_matches(|c: char| c.is_ascii_digit());
    let rest = rest
        .trim_start_matches(['_', '-', '.'])
        .to_ascii_lowercase();
    [
        "",
        "s",
        "value",
        "b64",
        "base64",
        "hash",
        "enc",
        "encrypted",
        "plain",
        "plaintext",
        "str",
        "string",
        "data",
        "key",
        "key_base",
        "keybase",
        "hex",
        "raw",
        "clear",
        "cleartext",
    ]
    .contains(&rest.as_str())
}

/// `|`, `>-`, `|+2`…: a YAML block scalar's indicator, its value below.
fn block_scalar(v: &str) -> bool {
    // The indicator is short: a look at the rest of a long line would
    // cost a scan per key word.
    if !v.starts_with(['|', '>']) {
        return false;
    }
    let v = &v[..v.floor_char_boundary(16)];
    let v = v.split(" #").next().unwrap_or(v).trim_end();
    v.starts_with(['|', '>'])
        && v.len() <= 4
        && v[1..]
            .bytes()
            .all(|b| b == b'-' || b == b'+' || b.is_ascii_digit())
}

fn value(line: &str, from: usize, kind: Sep, strict: bool) -> Option<Found> {
    let quoted = line[from..].starts_with(['"', '\'', '`']) && kind != Sep::Element;
    value_at(line, from, kind).map(|range| Found::Value {
        range,
        quoted,
        strict,
    })
}

/// The value in a CJK sentence after its key word, several words on:
/// `管理员的登录密码是 X`, `初期パスワードは X です`, `密码（生产环境）：X`,
/// `パスワード「X」`. CJK text, blanks, colons and brackets are skipped;
/// the value is the first run of other characters, to a blank, CJK text or
/// a closing bracket.
fn cjk_value(line: &str, hit: Range<usize>) -> Option<Range<usize>> {
    let cjk = |c: char| c as u32 >= 0x2e80 && !"「」『』【】（）".contains(c);
    let mut from = None;
    let mut depth = 0;
    for (i, c) in line[hit.end..].char_indices() {
        if i > KEY_REACH {
            return None;
        }
        match c {
            '（' | '(' => depth += 1,
            '）' | ')' => depth -= 1,
            _ if depth > 0 => {}
            c if c.is_whitespace() || cjk(c) || ":：=＝「『【】」』→⇒➡\"'".contains(c) =>
                {}
            _ => {
                from = Some(hit.end + i);
                break;
            }
        }
    }
    let from = from?;
    let r = &line[from..];
    let r = &r[..r.floor_char_boundary(VALUE_MAX + 2)];
    let end = r
        .find(|c: char| c.is_whitespace() || cjk(c) || "」』】）\"'，。、".contains(c))
        .unwrap_or(r.len());
    let end = r.floor_char_boundary(end.min(VALUE_MAX));
    (end > 0).then_some(from..from + end)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sep {
    Assign,
    Element,
    Directive,
    /// A table's cell, to the next `|`.
    Cell,
}

/// The value starting at `from`: quoted (escapes kept inside: `\"` in
/// JSON, `'\''` in a shell), an element's text, a table cell, or a bare
/// word (config values may hold spaces only when quoted here; the regex
/// rules take whole-line values).
fn value_at(line: &str, from: usize, kind: Sep) -> Option<Range<usize>> {
    // Never look further than a value may be long.
    let r = &line[from..];
    let r = &r[..r.floor_char_boundary(VALUE_MAX + 2)];
    // A value longer than a value may be is cut, on a character boundary.
    let limit = |n: usize| r.floor_char_boundary(n.min(VALUE_MAX));
    if kind == Sep::Element {
        let end = r.find('<').unwrap_or(r.len());
        return Some(from..from + limit(end));
    }
    if kind == Sep::Cell {
        let end = r.find(['|', '│']).unwrap_or(r.len());
        let cell = &r[..end];
        let lead = cell.len() - cell.trim_start().len();
        let text = cell.trim();
        return (!text.is_empty()).then(|| from + lead..from + lead + limit(text.len()));
    }
    // A value quoted with escaped quotes, as Go's `%+v` or a JSON string
    // inside a string prints it: `Pass:\"x\"`.
    if let Some(inner) = r.strip_prefix("\\\"") {
        let end = inner.find("\\\"")?;
        return (end > 0)
            .then(|| from + 2..from + 2 + inner.floor_char_boundary(end.min(VALUE_MAX)));
    }
    // SQL's national and escape strings: `N'…'`, `E'…'`.
    if r.len() > 2 && r.starts_with(['N', 'E', 'n', 'e']) && r[1..].starts_with('\'') {
        return value_at(line, from + 1, kind);
    }
    // Python's bytes and raw strings: `b"…"`, `rb'…'`.
    for prefix in ["b", "r", "rb", "br"] {
        if let Some(q) = r.strip_prefix(prefix)
            && q.len() > 1
            && q.starts_with(['"', '\''])
        {
            return value_at(line, from + prefix.len(), kind);
        }
    }
    if let Some(q) = r.chars().next().filter(|c| "\"'`".contains(*c)) {
        // Three quotes (TOML, Python) close with three.
        let triple: String = [q, q, q].iter().collect();
        if let Some(body) = r.strip_prefix(&triple) {
            let end = body.find(&triple)?;
            return (end > 0)
                .then(|| from + 3..from + 3 + body.floor_char_boundary(end.min(VALUE_MAX)));
        }
        let inner = &r[1..];
        let end = closing_quote(inner, q)?;
        return Some(from + 1..from + 1 + inner.floor_char_boundary(end.min(VALUE_MAX)));
    }
    let end = r
        .find(|c: char| c.is_whitespace() || ";,<>\"'`()[]".contains(c))
        .unwrap_or(r.len());
    // `token = get_token(user)`, `key = keys[0]`: code, not a value.
    if r[end..].starts_with(['(', '[']) {
        return None;
    }
    // A value that ends a sentence keeps no full stop.
    let end = if r[..end].ends_with('.') {
        end - 1
    } else {
        end
    };
    (end > 0).then(|| from..from + limit(end))
}

/// Where the quote `q` that closes `inner` is: past `\"` (JSON, a double-
/// quoted shell string) and past `'\''` (a single quote in a single-
/// quoted shell string).
///
/// A quote doubled is one quote in SQL and CSV (`'it''s'`, `"a""b"`).
fn closing_quote(inner: &str, q: char) -> Option<usize> {
    let mut chars = inner.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if q != '\'' => {
                chars.next();
            }
            c if c == q => {
                if q == '\'' && inner[i..].starts_with("'\\''") {
                    chars.next();
                    chars.next();
                    chars.next();
                    continue;
                }
                if i > 0 && chars.peek().is_some_and(|&(_, n)| n == q) {
                    chars.next();
                    continue;
                }
                return Some(i);
            }
            _ => {}
        }
    }
    None
}

/// Words that are not secrets wherever they stand.
const NOT_SECRETS: &[&str] = &[
    // How a password is stored, before it (`enable password sha512 …`).
    "sha512",
    "sha256",
    "sha1",
    "md5",
    "scrypt",
    "pbkdf2",
    "encrypted",
    "hashed",
    "cleartext",
    "plaintext",
    "protected",
    // A registry value's type (`DefaultPassword    REG_SZ    …`).
    "reg_sz",
    "reg_expand_sz",
    "reg_multi_sz",
    "reg_binary",
    "reg_dword",
    "reg_qword",
    "required",
    "optional",
    "none",
    "null",
    "nil",
    "true",
    "false",
    "yes",
    "no",
    "on",
    "off",
    "prompt",
    "files",
    "systemd",
    "sss",
    "ldap",
    "compat",
    "default",
    "disabled",
    "enabled",
    "changeme",
    "password",
    "secret",
    "redacted",
    "hidden",
    "undefined",
    "empty",
    "unset",
    "invalid",
    "expired",
    "missing",
    "accepted",
    "denied",
    "failed",
    "ok",
    "public",
    "private",
];

/// Whether a value looks like a secret: not a number, a date, a
/// placeholder, a mask, a reference or a word of prose. A value of letters
/// only must be long and mixed (`Tr0ub4dor` has a digit;
/// `correcthorsebattery` is long). `quoted`: it stood in quotes, so a
/// leading `!`, `&` or `*` is part of the string, not YAML's.
pub(crate) fn is_secret_value(v: &str, quoted: bool) -> bool {
    let v = v.trim();
    let n = v.chars().count();
    if !(4..=VALUE_MAX).contains(&n) {
        return false;
    }
    // References and placeholders (`process.env.X`, `<TOKEN>`, `!vault`)
    // are `literal`'s; a reference inside a value, a path and a
    // placeholder already made are not secrets either.
    if !super::literal(v, quoted)
        || v.contains("${")
        || v.contains("$(")
        || v.starts_with(['/', '~'])
        || v.starts_with("./")
        || v.starts_with(super::MARK)
    {
        return false;
    }
    // A question (`Passwort vergessen?`), in words of no capitals
    // (`CorrectHorseBatteryStaple?` is a passphrase).
    if v.strip_suffix('?')
        .is_some_and(|w| w.chars().all(|c| c.is_alphabetic() && !c.is_uppercase()))
    {
        return false;
    }
    // Numbers, dates, times (`2024-04-02T09:13:44Z`), versions, addresses;
    // CJK dates and quantities (`2025年3月31日`, `90日間`, `12文字`).
    if v.chars()
        .all(|c| c.is_ascii_digit() || ".,_-/:".contains(c))
        || v.starts_with(|c: char| c.is_ascii_digit())
            && (v
                .chars()
                .all(|c| c.is_ascii_digit() || ".,_-/:+TZ".contains(c))
                || v.chars().all(|c| {
                    c.is_ascii_digit() || "年月日時分秒間週文字桁回個ヶカ以上内".contains(c)
                }))
    {
        return false;
    }
    // `Token scopes: …`: a label, not a value.
    if NOT_SECRETS.iter().any(|w| v.eq_ignore_ascii_case(w)) || v.ends_with(':') {
        return false;
    }
    let digit = v.chars().any(|c| c.is_ascii_digit());
    let symbol = v.chars().any(|c| !c.is_alphanumeric());
    let upper = v.chars().skip(1).any(|c| c.is_uppercase());
    // An identifier (`alias_token`, `vault-token`): code or a name.
    let identifier = v
        .chars()
        .all(|c| c.is_ascii_lowercase() || "_-.".contains(c));
    if identifier && n < 24 {
        return false;
    }
    let letters_only = !digit && !symbol;
    if letters_only && !(upper && n >= 8) && n < 16 {
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
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
}
