//! The checks a pattern's match goes through when the pattern cannot say
//! alone that it is a secret: the value's shape (a literal, not a
//! template, a path or a placeholder), the name it is assigned to, a
//! header's, a flag's.
//!
//! What it leaves to others: the patterns (`patterns`), the allow-lists
//! (`Redactor`).

use super::*;

/// The secret of a match: the first `s…` group that took part.
pub(super) fn value<'t>(caps: &Captures<'t>) -> &'t str {
    ["s", "s1", "s2", "s3", "s4", "s5"]
        .iter()
        .find_map(|n| caps.name(n))
        .or_else(|| caps.get(0))
        .map_or("", |m| m.as_str())
}

/// Whether a value is a real one rather than a reference to one: `$VAR`,
/// `${VAR}`, `$(cmd)`, `{{ template }}`, `null`, `****`, `...`. Such values tell
/// the model where the secret comes from, which is worth keeping.
pub(super) fn is_literal(v: &str) -> bool {
    literal(v, false)
}

/// A value already masked (`gho_****`, `****ABCD`, `[REDACTED]`), a
/// placeholder (`changeme`, `your-api-key-here`, `hf_xxxxxxxx`), or a
/// reference in a configuration language (`var.db_password`,
/// `urn:…:token-type:…`).
pub(super) fn masked_or_example(v: &str) -> bool {
    // Run on every finding, some of them long: no allocation, and no
    // searcher built per word (`str::contains` builds one).
    let masked = repeats(v, "*")
        || repeats(v, "•")
        || [
            "xxxxxx",
            "redacted",
            "[masked]",
            "$encrypted$",
            "placeholder",
        ]
        .iter()
        .any(|w| pairs::contains_ci(v, w));
    // `20 bytes`: `kubectl describe secret` gives sizes only.
    let size = v
        .strip_suffix(" bytes")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    size || masked
        || few_runs(v)
        || pairs::is_word(v, &["changeme", "change_me", "change-me", "changeit"])
        // What a program shows in a secret's place (KeePassXC's `PROTECTED`).
        || pairs::is_word(v, &[
            "protected", "hidden", "masked", "sensitive", "removed", "omitted", "filtered",
        ])
        || ["your", "<your", "example", "var.", "local.", "data.", "module.", "urn:", "secrets.", "vars."]
            .iter()
            .any(|p| pairs::starts_with_ci(v, p))
        || public_token(v)
        || bracketed_word(v)
}

/// Whether `v` holds `c` four times in a row (`****`), found by its
/// first byte, which most values do not hold.
fn repeats(v: &str, c: &str) -> bool {
    let (v, c) = (v.as_bytes(), c.as_bytes());
    let n = c.len();
    memchr::memchr_iter(c[0], v)
        .any(|i| (0..4).all(|k| v.get(i + k * n..i + (k + 1) * n) == Some(c)))
}

/// `XXX/YYY/ZZZ`: at least six letters and digits, in at most four runs
/// of one character each three or more long: nothing drawn at random.
pub(super) fn few_runs(v: &str) -> bool {
    let mut alnum = v.chars().filter(|c| c.is_alphanumeric());
    let Some(mut last) = alnum.next() else {
        return false;
    };
    let (mut runs, mut run, mut total) = (1, 1, 1);
    for c in alnum {
        total += 1;
        if c == last {
            run += 1;
            continue;
        }
        if run < 3 || runs == 4 {
            return false;
        }
        (last, run, runs) = (c, 1, runs + 1);
    }
    total >= 6 && run >= 3
}

/// Public by design: Stripe's and Mapbox's publishable tokens.
/// Prefixes of public keys and tokens: Stripe's and Mapbox's publishable
/// tokens, Tailscale's node, machine and disco keys.
pub(super) const PUBLIC_PREFIXES: &[&str] = &[
    // Not public, but a reference to where the secret is (TeamCity).
    "credentialsJSON:",
    "pk_live_",
    "pk_test_",
    "pk.eyJ",
    "nodekey:",
    "mkey:",
    "discokey:",
    "nlpub:",
];

pub(super) fn public_token(v: &str) -> bool {
    PUBLIC_PREFIXES.iter().any(|p| v.starts_with(p))
}

/// `[hidden]`, `(sensitive)`, `[PROTECTED]`: a word in brackets stands
/// where a value was taken out.
pub(super) fn bracketed_word(v: &str) -> bool {
    let inner = v
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .or_else(|| v.strip_prefix('(').and_then(|v| v.strip_suffix(')')));
    inner.is_some_and(|w| {
        (3..=24).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_alphabetic() || b == b' ')
    })
}

/// `./pw.txt`, `~/.secrets/db`: a path to where the secret is, not it
/// (`--from-file=password=./pw.txt`).
pub(super) fn relative_path(v: &str) -> bool {
    ["./", "../", "~/"].iter().any(|p| v.starts_with(p))
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"./_-~".contains(&b))
}

/// A secret store's path (`secret/data/db`, `prod/db/password`): where
/// the secret is, lower case, two `/` or more.
pub(super) fn store_path(v: &str) -> bool {
    v.matches('/').count() >= 2
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"/._-".contains(&b))
}

/// `is_literal`, knowing whether the value stood in quotes: `"*x"` is a
/// string, `*x` a YAML alias, `!x` a tag, `&x` an anchor.
pub(super) fn literal(v: &str, quoted: bool) -> bool {
    let v = v.trim();
    if masked_or_example(v) || relative_path(v) || store_path(v) {
        return false;
    }
    // Elided in documentation: `****`, `...`, `xxxx`.
    if v.bytes().all(|b| matches!(b, b'*' | b'.' | b'x' | b'X')) {
        return false;
    }
    // A YAML tag, anchor or alias is a name (`*defaults`); `*` then 40
    // generated characters is a MySQL password hash.
    let yaml = !quoted
        && v.starts_with(['!', '&', '*'])
        && !(v.len() >= 17 && pairs::random_looking(&v[1..]));
    if ["${", "$(", "{{", "%("].iter().any(|p| v.starts_with(p)) || yaml {
        return false;
    }
    // `<YOUR_TOKEN>`, `<generate one with …>`, `process.env.STRIPE_KEY`,
    // `vault:secret/data/db#pw`.
    if v.starts_with(['<', '‹'])
        || [
            "process.env.",
            "os.environ",
            "env:",
            "vault:",
            "file:",
            "ENV[",
        ]
        .iter()
        .any(|p| v.starts_with(p))
        // A reference to where the secret is: 1Password's `op://…`,
        // TeamCity's `credentialsJSON:…`; BuildKit's `id=x,src=…`.
        || ["op://", "credentialsJSON:", "id=", "type=", "src=", "env="]
            .iter()
            .any(|p| v.starts_with(p))
    {
        return false;
    }
    // `$DB_PASSWORD` is a variable; `$ecret1` in a config file is a password.
    // `$VAULT_TOKEN" https://…`: a reference, then other text.
    let variable = v.strip_prefix('$').is_some_and(|name| {
        let n = name
            .bytes()
            .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
            .count();
        n > 0
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name[n..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric())
    });
    if variable {
        return false;
    }
    !["null", "none", "nil", "true", "false", "undefined"]
        .iter()
        .any(|w| v.eq_ignore_ascii_case(w))
}

/// Whether the text right before `start` makes it a digest
/// (`sha256:0d6f…` of an image), which is no secret.
pub(super) fn digest(text: &str, start: usize) -> bool {
    let near = &text[text.floor_char_boundary(start.saturating_sub(8))..start];
    // Go's `h1:` module hashes, subresource integrity's `sha384-`.
    [
        "sha256:", "sha512:", "sha384:", "sha1:", " h1:", "sha256-", "sha384-", "sha512-",
    ]
    .iter()
    .any(|d| near.ends_with(d))
}

/// Whether the text before `start` on its line names a public key.
pub(super) fn names_public_key(text: &str, start: usize) -> bool {
    let near = &text[text.floor_char_boundary(start.saturating_sub(32))..start];
    let near = &near[near.rfind('\n').map_or(0, |i| i + 1)..];
    [
        "public key",
        "public_key",
        "publickey",
        "public-key",
        "pubkey",
        "peer:",
        // RADIUS's per-packet HMAC.
        "message-authenticator",
    ]
    .iter()
    .any(|p| pairs::contains_ci(near, p))
}

/// A `.pgpass` line's password, not the tail of a shadow row
/// (`root:*:19000:0:99999:7:::` has the same shape).
pub(super) fn pgpass_value(caps: &Captures) -> bool {
    let v = value(caps);
    !v.bytes().all(|b| b.is_ascii_digit() || b == b':') && is_literal(v)
}

/// A chap-secrets row's secret: a literal that looks like one (the row's
/// shape, four words, is common).
pub(super) fn chap_secret(caps: &Captures) -> bool {
    let quoted = caps.name("s1").is_some();
    pairs::is_secret_value(value(caps), quoted)
}

/// A value that is no reference, placeholder or mask (`$VAULT_TOKEN`,
/// `-pxxxxxxxx` as `ps` shows a password mysql overwrote).
pub(super) fn literal_value(caps: &Captures) -> bool {
    is_literal(value(caps))
}

/// For assignments: a literal value, and an unquoted one that is neither
/// code nor prose: five words and more are a sentence, not a passphrase.
/// A literal a command line decodes, unless it is base64 of prose or JSON
/// (`ZGVwbG95IGZpbmlzaGVk…`, `eyJhbGciOiJSUzI1NiJ9`): what cannot be read
/// is taken for a secret.
pub(super) fn decodes_to_a_secret(caps: &Captures) -> bool {
    let Some(text) = decode_base64(value(caps)) else {
        return true;
    };
    !commands::readable(text.trim())
}

/// A URL's password cut before its `@`: not a port.
pub(super) fn cut_password(caps: &Captures) -> bool {
    !value(caps).bytes().all(|b| b.is_ascii_digit()) && literal_value(caps)
}

pub(super) fn assigned_value(caps: &Captures) -> bool {
    let v = value(caps);
    let unquoted = caps.name("s3").is_some();
    // Five words are a sentence; so are three of lower-case letters only
    // (`invalid token: signature has expired`).
    let words = v.split_whitespace();
    let prose = words.clone().nth(4).is_some()
        || (words.clone().nth(2).is_some()
            && words
                .clone()
                .all(|w| w.bytes().all(|b| b.is_ascii_lowercase())));
    // `auth.existingSecret=redis-auth`, `passwordSecretRef: x`: the name
    // of where a secret is.
    let key = caps
        .name("key")
        .map_or("", |k| k.as_str())
        .to_ascii_lowercase();
    let reference = key.contains("existing")
        || key.ends_with("ref")
        || key.ends_with("name")
        || key.starts_with("from_");
    literal(v, !unquoted) && !reference && !(unquoted && (looks_like_code(v) || prose))
}

/// For `--password value`: an unquoted value must look like a secret
/// (`--password     prompt for the password` is help text).
pub(super) fn flag_value(caps: &Captures) -> bool {
    assigned_value(caps)
        && (caps.name("s3").is_none() || pairs::is_secret_value(value(caps), false))
}

/// For `key: value` lines: as `assigned_value`, but nsswitch.conf's
/// `passwd:   files systemd` names a database, not a password.
pub(super) fn config_value(caps: &Captures) -> bool {
    let nsswitch =
        caps.name("key").is_some_and(|k| k.as_str() == "passwd") && caps.name("s3").is_some();
    // `password: >-`: a YAML block scalar, its value below (`pairs`).
    let block = caps
        .name("s3")
        .is_some_and(|v| v.as_str().starts_with(['|', '>']));
    assigned_value(caps) && !nsswitch && !block
}

/// Source code read through the agent has assignments too, whose values
/// are expressions and types: `token = get_token(user)`,
/// `password = os.environ["X"]`, `token: Option<Vec<u8>>`,
/// `TOKEN: u8 = 61;`, `id: Token::Ident`, markdown's backticks.
pub(super) fn looks_like_code(v: &str) -> bool {
    v.contains(['(', ')', '[', '{', '`'])
        || ["::", "->", " = "].iter().any(|s| v.contains(s))
        || (v.contains('<') && v.contains('>'))
        || v.ends_with(';')
}

/// For environment variables: the name says secret, the value is literal,
/// and a lowercase name is a shell variable only after `export` and the
/// like (otherwise `db_password=x` is left to the `password` rule).
pub(super) fn env_secret(caps: &Captures) -> bool {
    let name = caps
        .name("name")
        .or(caps.name("bare"))
        .map_or("", |m| m.as_str());
    let exported = caps.name("export").is_some();
    (exported || !name.bytes().any(|b| b.is_ascii_lowercase()))
        && secret_name(name)
        && is_literal(value(caps))
}

/// Whether a variable's name says it holds a secret. Matched on the parts
/// between underscores, so `DB_PASSWORD`, `GITHUB_TOKEN`, `API_KEY`,
/// `APIKEY`, `SMTP_PASS` are secrets but `KEYBOARD`, `TOKENIZERS_PARALLELISM`,
/// `PWD` and `GIT_ASKPASS` are not; nor is a name for where a secret is
/// (`_FILE`, `_PATH`, `_DIR`) or one that is public.
pub(super) fn secret_name(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    let last = name.rsplit('_').next().unwrap_or("");
    // Where a secret is, or a measure of one (`PASSWORD_MIN_LENGTH`,
    // `TOKEN_EXPIRY_SECONDS`), not the secret.
    let measure = matches!(
        last,
        "FILE"
            | "PATH"
            | "DIR"
            | "LENGTH"
            | "LEN"
            | "SECONDS"
            | "TTL"
            | "EXPIRY"
            | "TIMEOUT"
            | "COUNT"
            | "SIZE"
            | "ROUNDS"
            | "MIN"
            | "MAX"
            | "BITS"
            | "AGE"
            | "DAYS"
            | "HOURS"
    );
    if measure || name.contains("PUBLIC") || name.contains("PUBKEY") {
        return false;
    }
    // Password managers' session keys (`BW_SESSION`, `OP_SESSION_acme`).
    if name == "BW_SESSION" || name.starts_with("OP_SESSION_") {
        return true;
    }
    // The secret word is the last part, or only parts that say how it is
    // written follow (`SECRET_KEY_BASE`, `DB_PASSWORD_B64`): `KEY_ALGORITHM`,
    // `PASSWORD_POLICY`, `TOKEN_ENDPOINT` name no secret.
    let parts: Vec<&str> = name.split('_').collect();
    let how = |p: &&str| {
        p.bytes().all(|b| b.is_ascii_digit())
            || [
                "VALUE",
                "B64",
                "BASE64",
                "HASH",
                "ENC",
                "ENCRYPTED",
                "PLAIN",
                "BASE",
                "HEX",
                "RAW",
                "DATA",
                "STRING",
            ]
            .contains(p)
    };
    let secret_part = |part: &str| {
        ["SECRET", "PASSWORD", "PASSWD", "PASSPHRASE"]
            .iter()
            .any(|w| part.contains(w) && !part.ends_with("LESS") && !part.ends_with("HASHER"))
            || part.ends_with("TOKEN")
            || part.ends_with("TOKENS")
            || part.ends_with("KEY")
            || part == "KEYS"
            || part == "PASS"
            || part == "PAT"
            || (part == "PWD" && name != "PWD")
    };
    // An access key's id goes with its key (`AWS_ACCESS_KEY_ID`).
    name.contains("ACCESS_KEY")
        || (0..parts.len()).any(|i| {
            secret_part(parts[i]) && parts[i + 1..].iter().all(|p| how(p) || secret_part(p))
        })
}

/// An `Authorization` value with a scheme is a credential; without one, only
/// if it looks like one, so that `Authorization: required` stays readable.
pub(super) fn credential_header(caps: &Captures) -> bool {
    let v = value(caps);
    is_literal(v)
        && (caps.name("scheme").is_some()
            || (v.len() >= 8 && v.bytes().any(|b| b.is_ascii_digit())))
}

/// Generated keys mix upper case, lower case and digits; names do not.
pub(super) fn random_body(caps: &Captures) -> bool {
    let body = caps.name("body").map_or("", |m| m.as_str()).as_bytes();
    body.iter().any(u8::is_ascii_uppercase)
        && body.iter().any(u8::is_ascii_lowercase)
        && body.iter().any(u8::is_ascii_digit)
}
