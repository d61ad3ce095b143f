//! Secrets found by where they stand rather than by what they look like:
//! the value of a key that names a secret, in any of the syntaxes ops
//! output uses, and the value of a password-bearing flag of a known tool.
//!
//! Keys: words for a secret in many languages (password, secret, token,
//! 密码, パスワード, Passwort, пароль…), as the whole or a part of a key
//! (`db_password`, `smtpPassword`, `AuthLDAPBindPassword`). Syntaxes:
//! `k=v`, `k: v`, `k := v`, `k => v`, `"k": "v"`, `<k>v</k>`, `k="v"` as an
//! XML attribute, and directives (`requirepass v`, `rocommunity v`,
//! `enable secret 5 v`), where the key opens the line. A value must look
//! like a secret: not a number, a placeholder, a reference to an
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

use aho_corasick::{AhoCorasick, MatchKind};

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
    "密码",
    "口令",
    "秘钥",
    "密钥",
    "パスワード",
    "暗証番号",
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
    "parola",
    "şifre",
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
            "ldappasswd",
            "ldapwhoami",
        ],
        &["-w"],
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
    (&["zip", "7z", "unzip"], &["-P"]),
    (
        &["openconnect", "sqlplus", "rclone"],
        &["--password", "--pass"],
    ),
    (&["htpasswd"], &[]),
    (&["mc"], &[]),
    (&["aws"], &[]),
    (&["curl"], &["--oauth2-bearer"]),
    (&["openssl"], &[]),
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

/// The words of a command line, by simple shell rules: blanks separate,
/// single and double quotes group. Enough to find flags and their values;
/// a word's span covers its text between any quotes.
fn words(line: &str) -> Vec<Word> {
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
fn flag_secrets(flags: &[&str], words: &[Word], out: &mut Vec<Range<usize>>) {
    for (i, w) in words.iter().enumerate() {
        for &flag in flags {
            let t = w.text.as_str();
            if t == flag {
                // `mysql -p` alone prompts: the next word is not a password
                // when it is another flag.
                if let Some(next) = words.get(i + 1)
                    && !next.text.starts_with('-')
                    && !next.text.is_empty()
                    && !(flag == "-p" && is_mysql_database(words, i))
                {
                    out.push(next.value.clone());
                }
            } else if let Some(rest) = t.strip_prefix(flag) {
                let short = flag.len() == 2 && !flag.starts_with("--");
                let value = if let Some(v) = rest.strip_prefix('=') {
                    Some(v)
                } else if short {
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
            .build(KEY_WORDS)
            .expect("the key words build");
        let names: Vec<&str> = FLAGS
            .iter()
            .flat_map(|(tools, _)| tools.iter().copied())
            .collect();
        let tools = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(names)
            .expect("the tool names build");
        Pairs { keys, tools }
    }

    /// Every secret these find in `text`.
    pub(crate) fn find(&self, text: &str) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let body = line.trim_end_matches(['\n', '\r']);
            self.line_pairs(body, at, &mut out);
            self.line_flags(body, at, &mut out);
            at += line.len();
        }
        out
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
            let flags = FLAGS
                .iter()
                .find(|(tools, _)| tools.contains(&tool))
                .map_or(&[][..], |(_, f)| *f);
            let from = words.partition_point(|w| w.value.start < hit.end);
            let to = hits.get(k + 1).map_or(words.len(), |next| {
                words.partition_point(|w| w.value.start < next.start)
            });
            let args = &words[from..to.max(from)];
            flag_secrets(flags, args, &mut found);
            operand_secrets(tool, args, &mut found);
        }
        out.extend(
            found
                .into_iter()
                .filter(|r| is_secret_value(&line[r.clone()]))
                .map(|r| r.start + at..r.end + at),
        );
    }

    fn line_pairs(&self, line: &str, at: usize, out: &mut Vec<Range<usize>>) {
        let mut last_end = 0;
        for m in self.keys.find_iter(line) {
            if m.start() < last_end {
                continue;
            }
            if let Some(value) = pair_value(line, m.range()) {
                last_end = value.end;
                if is_secret_value(&line[value.clone()]) {
                    out.push(value.start + at..value.end + at);
                }
            }
        }
    }
}

/// Whether `range` of `line` is a word of its own (a command name).
fn word_at(line: &str, range: Range<usize>) -> bool {
    let before = line[..range.start].chars().next_back();
    let after = line[range.end..].chars().next();
    let edge = |c: Option<char>| c.is_none_or(|c| c.is_whitespace() || "|;&(`$'\"/=".contains(c));
    // `/usr/bin/mysql` is mysql; `mysql.conf` is not.
    edge(before) && after.is_none_or(|c| c.is_whitespace() || ";|&)".contains(c))
}

fn key_char(c: char) -> bool {
    c.is_alphanumeric() || "_.-[]".contains(c)
}

/// The value of the key around the keyword at `hit` in `line`, if the
/// syntax there makes one.
fn pair_value(line: &str, hit: Range<usize>) -> Option<Range<usize>> {
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
    // (`bypass`, `compass`, `pwm`).
    let word = &line[hit.clone()];
    if SHORT_WORDS.iter().any(|w| word.eq_ignore_ascii_case(w)) && !last_part(key, word) {
        return None;
    }
    // A path or a file name, not a key: `/etc/passwd`, `.htpasswd`,
    // `secret.key`; and a key for where a secret is, or how it is used.
    if line[..start].ends_with(['/', '\\', '.', '$', '{', '%'])
        || key.ends_with("_file")
        || key.ends_with("_FILE")
        || key.ends_with("_path")
        || key.ends_with("_PATH")
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
    let xml_element = before.ends_with('<');
    let directive = near
        && (before.is_empty()
            || (before.split_whitespace().nth(1).is_none()
                && !before.contains(['=', ':', '"', '\''])));
    let rest = &line[end..];
    let skip_close = rest.len() - rest.trim_start_matches(['"', '\'', ']']).len();
    let after_key = end + skip_close;
    let rest = &line[after_key..];
    let trimmed = rest.trim_start_matches([' ', '\t']);
    let spaces = rest.len() - trimmed.len();
    let (sep_len, kind) = if xml_element {
        if !trimmed.starts_with('>') {
            return None;
        }
        (1, Sep::Element)
    } else if let Some(sep) = ["=>", ":=", "=", ":", "：", "＝"]
        .iter()
        .find(|s| trimmed.starts_with(**s))
    {
        // `k: v` and `k = v` need the separator then a blank or a value;
        // `k:v` in a URL or a log is left to other rules.
        (sep.len(), Sep::Assign)
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
    } else {
        return None;
    };
    let mut from = after_key + spaces + sep_len;
    if kind == Sep::Directive {
        // `enable secret 5 X`, `password 7 X`: a type number first.
        let r = &line[from..];
        let digits = r.len() - r.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 && digits <= 2 && r[digits..].starts_with(' ') {
            from += digits + 1;
        }
    }
    let r = &line[from..];
    let r_trim = r.trim_start_matches([' ', '\t']);
    from += r.len() - r_trim.len();
    value_at(line, from, kind)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sep {
    Assign,
    Element,
    Directive,
}

/// The value starting at `from`: quoted, an element's text, or a bare
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
    if let Some(q) = r.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let inner = &r[1..];
        let end = inner.find(q)?;
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

/// Words that are not secrets wherever they stand.
const NOT_SECRETS: &[&str] = &[
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

/// Whether a value looks like a secret: not a number, a placeholder, a
/// reference or a word of prose. A value of letters only must be long
/// and mixed (`Tr0ub4dor` has a digit; `correcthorsebattery` is long).
pub(crate) fn is_secret_value(v: &str) -> bool {
    let v = v.trim();
    let n = v.chars().count();
    if n < 4 || n > VALUE_MAX {
        return false;
    }
    // References and placeholders (`process.env.X`, `<TOKEN>`, `!vault`)
    // are `is_literal`'s; a reference inside a value, a path and a
    // placeholder already made are not secrets either.
    if !super::is_literal(v)
        || v.contains("${")
        || v.contains("$(")
        || v.starts_with('/')
        || v.starts_with(super::MARK)
    {
        return false;
    }
    if v.chars()
        .all(|c| c.is_ascii_digit() || c == '.' || c == '_' || c == ',')
    {
        return false;
    }
    if NOT_SECRETS.iter().any(|w| v.eq_ignore_ascii_case(w)) {
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
