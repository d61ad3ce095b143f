//! The value after a key: where it starts and ends (quotes, separators,
//! block scalars, CJK punctuation), and what is no value at all.
//!
//! What it leaves to others: finding the keys (`pairs`), judging the
//! value (`is_secret_value`).

use super::*;

/// The value of the key around the keyword at `hit` in `line`, if the
/// syntax there makes one.
pub(super) fn pair_value(line: &str, hit: Range<usize>) -> Option<Found> {
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
pub(super) fn qualifier_end(line: &str, at: usize) -> usize {
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
pub(super) fn after_grep_prefix(before: &str) -> &str {
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
pub(super) fn secret_suffix(rest: &str) -> bool {
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
pub(super) fn block_scalar(v: &str) -> bool {
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

pub(super) fn value(line: &str, from: usize, kind: Sep, strict: bool) -> Option<Found> {
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
pub(super) fn cjk_value(line: &str, hit: Range<usize>) -> Option<Range<usize>> {
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
pub(super) enum Sep {
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
pub(super) fn value_at(line: &str, from: usize, kind: Sep) -> Option<Range<usize>> {
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
        // Cut on the cell's own boundaries: `lead` may be a blank of
        // more than one byte (a no-break space).
        let end = text.floor_char_boundary(text.len().min(VALUE_MAX));
        return (!text.is_empty()).then(|| from + lead..from + lead + end);
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
pub(super) fn closing_quote(inner: &str, q: char) -> Option<usize> {
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
