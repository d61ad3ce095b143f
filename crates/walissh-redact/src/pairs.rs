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

mod columns;
mod flags;
mod values;

use columns::*;
use flags::*;
use values::*;

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
mod tests;
