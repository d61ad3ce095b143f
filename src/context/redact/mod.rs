//! Redaction: scrubbing secrets from everything bound for the model.
//!
//! This module owns one judgement: which parts of a text are secrets, and
//! what the model sees instead. The text is first made plain (`plain`: no
//! escape sequences or control characters; the model gets that text), and
//! read through views that map back to it: full-width ASCII and HTML
//! quote entities as ASCII (`plain::folded`, `plain::entities`), rows a
//! terminal wrapped joined (`wrap`). Nothing not redacted is rewritten.
//! Each secret becomes a placeholder `[REDACTED:<kind>#<n>]`, `n` the same
//! for the same secret within a session (`Numbering`), and the text around
//! it is kept (the key name of an assignment, the scheme of an
//! `Authorization` header, the user and host of a URL), so the model still
//! understands what it reads. Patterns are compiled once, in
//! `Redactor::new`; a text with nothing that could be a secret costs a few
//! scans and comes back unchanged.
//!
//! The detectors, most specific first: walissh's own patterns here
//! (private-key blocks, the bastion's own credentials, `[ai] redact`
//! patterns, tokens with a known prefix, JWTs, passwords in URLs, headers,
//! hashes, generic assignments), keys and tools' flags (`pairs`), the
//! operator's rules (`[context] redact_rules`) and gitleaks' (`rules`),
//! the output of a command that reads a secret store (`commands`: on a
//! screen, after its prompt line; for the agent's commands,
//! `redact_output`, the whole of it),
//! the same in URL-encoded text once decoded (mapped back
//! to the characters that spell the secret), and base64 values whose
//! decoded text holds a secret. A finding whose text a `[context]
//! redact_allow` pattern matches is dropped (never the bastion's own
//! credentials). A
//! finding that overlaps one already taken, or a placeholder already in the
//! text, is dropped, so `password=[REDACTED:aws-key#1]` stays as it is. A
//! secret that ends its line takes the lines that look like its rest
//! (`wrapped`), and one the terminal wrapped is read in its rows joined
//! (`wrap`). The patterns lean towards redacting: a false positive costs
//! the model one value, a false negative leaks it. `corpus` measures both.
//!
//! What it leaves to others: where it is called and what is done with the
//! counts. The caller redacts each message (the question, screen text,
//! command output, tool results) on a blocking thread just before it
//! leaves the bastion, and audits the counts; the config checks `[ai]
//! redact` with `check_pattern` and reads the rules file; the agent and
//! `walissh redact` build the redactor one way (`Redactor::for_config`);
//! the session keeps one `Numbering`. `explain` lists what `redact`
//! replaces, from the same findings.

use std::collections::BTreeMap;
use std::ops::Range;

use regex::{Captures, Regex};

use crate::config::{Config, ConfigError, compile_pattern, one_line};

mod commands;
#[cfg(test)]
mod corpus;
mod pairs;
mod panes;
mod plain;
mod prefilter;
mod rules;
mod wrap;

/// `text` as the model reads it before redaction (see `plain`): for the
/// fuzz targets, which check what redaction keeps of it.
#[cfg(any(fuzzing, test))]
pub(crate) fn plain_text(text: &str) -> String {
    plain::plain(text).into_owned()
}

/// How many secrets of each kind one pass replaced, e.g. `[("aws-key", 2)]`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Counts(pub(crate) BTreeMap<String, usize>);

impl Counts {
    /// Secrets replaced, all kinds together.
    pub(crate) fn total(&self) -> usize {
        self.0.values().sum()
    }

    /// Adds the counts of another pass (the caller redacts message by
    /// message and audits once per request).
    pub(crate) fn add(&mut self, other: &Counts) {
        for (kind, n) in &other.0 {
            *self.0.entry(kind.clone()).or_default() += n;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.total() == 0
    }
}

/// Decides whether one match really is a secret, for patterns that cannot
/// say it alone (a variable's name, a value that is a template).
type Check = fn(&Captures) -> bool;

/// One kind of secret as a pattern: the kind it reports, and optionally a
/// check on the match.
///
/// What is replaced: the capture group named `s` (or `s1`, `s2`, … when
/// the pattern has alternatives) that took part in the match, or the whole
/// match when the pattern has no such group. Everything else the pattern
/// matched (a key name, a scheme, a delimiter) is kept.
struct Pattern {
    kind: &'static str,
    regex: &'static str,
    check: Option<Check>,
}

const fn pattern(kind: &'static str, regex: &'static str, check: Option<Check>) -> Pattern {
    Pattern { kind, regex, check }
}

/// Private keys come first: a key block holds base64 that later patterns
/// would cut into pieces, and it must go whole: from its BEGIN line to its
/// END line. A `BEGIN` without its `END` (`head -5 key.pem`) takes the
/// lines of a key's shape after it (armour headers, base64, one blank line
/// between; lines apart, or `\n` in JSON), not what the text says after
/// them.
const KEYS: &[Pattern] = &[
    pattern(
        "private-key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:(?s:.*?)-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:[ \t]+[A-Za-z0-9+/=]{4,})+|(?:(?:\r?\n|\\n)(?:Proc-Type|DEK-Info|Version|Comment|Hash):[^\r\n\\]*)*(?:(?:\r?\n|\\n)(?:\r?\n|\\n)?[A-Za-z0-9+/=]+)*)",
        None,
    ),
    // OpenVPN's static keys (`tls-auth`, `tls-crypt`, inline or a file).
    pattern(
        "private-key",
        r"-----BEGIN OpenVPN Static key V[0-9]-----(?:(?s:.*?)-----END OpenVPN Static key V[0-9]-----|(?:\r?\n[0-9a-fA-F]{16,})+)",
        None,
    ),
    // The end of a key whose start was cut off (an output's tail): the
    // base64 lines before the END line go with it.
    pattern(
        "private-key",
        r"(?m)(?:^[A-Za-z0-9+/=]{16,}\r?\n)*-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        None,
    ),
    // A service account's JSON, should its key not be a whole block.
    pattern(
        "private-key",
        r#""private_key"\s*:\s*"(?P<s>(?:[^"\\]|\\.)+)""#,
        None,
    ),
    // A kubeconfig's client key, base64 of a PEM block.
    pattern(
        "private-key",
        r#"(?i)client-key-data["']?[ \t]*:[ \t]*["']?(?P<s>[A-Za-z0-9+/=]{16,})"#,
        None,
    ),
];

/// A key that names a secret, as the group `key`: for the assignment
/// patterns below.
macro_rules! secret_key {
    () => {
        r#"(?P<key>(?:[A-Za-z0-9_.-]*[_.-])?(?:password|passwd|passphrase|(?-i:pwd)|secret|api[_-]?key|apikey|token|secret[_-]?access[_-]?key)|[A-Za-z0-9_.-]*[a-z0-9](?-i:Password|Passwd|Passphrase|Secret|ApiKey|Apikey|Token|AccessKey))"#
    };
}

/// The start of a value: as `\"…\"` in JSON inside JSON (`s4`),
/// double-quoted with `\"` escapes inside (`s1`), or single-quoted with a
/// shell's `'\''` inside (`s2`); the pattern goes on with its unquoted
/// form and closes the group.
macro_rules! quoted_value {
    () => {
        r#"(?:\\"(?P<s4>(?:[^"\\\r\n]|\\[^"\r\n])+)\\"|"(?P<s1>(?:[^"\\\r\n]|\\.)+)"|'(?P<s2>(?:[^'\r\n]|'\\'')+)'"#
    };
}

/// Secrets recognised by their shape, then by where they stand; in order.
const SHAPES: &[Pattern] = &[
    // Access key ids: AKIA long-term, ASIA temporary.
    pattern(
        "aws-key",
        r"(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)",
        None,
    ),
    // A secret access key is 40 base64 characters with no prefix of its
    // own, so only where it is named: credentials files, env, STS JSON.
    pattern(
        "aws-secret",
        r#"(?i)(?:aws_?secret[a-z_]*|secret_?access_?key)["']?[ \t]*[:=][ \t]*["']?(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=\n]|(?m:$))"#,
        None,
    ),
    // Or where it stands next to its key id (`AKIA… wJalr…` in a note).
    pattern(
        "aws-secret",
        r#"(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}["']?[ \t]*[ \t,:;|/][ \t]*["']?(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=\n]|(?m:$))"#,
        None,
    ),
    // Python's basic auth as a tuple (`auth=('svc', "it's")`, as `repr`
    // prints it), or as `HTTPBasicAuth('svc', 'pw')`.
    pattern(
        "password",
        r#"(?i)(?:(?-u:\b)auth[ \t]*=[ \t]*|basic_?auth|digest_?auth)\([ \t]*(?:'[^'\n]{1,64}'|"[^"\n]{1,64}")[ \t]*,[ \t]*(?:'(?P<s>[^'\n]{4,256})'|"(?P<s1>[^"\n]{4,256})")[ \t]*\)"#,
        Some(literal_value),
    ),
    pattern("gcp-key", r"(?-u:\b)AIza[0-9A-Za-z_-]{35}", None),
    // Mapbox's secret tokens (its public ones are `pk.`).
    pattern(
        "api-token",
        r"(?-u:\b)sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{10,}",
        None,
    ),
    // OAuth access tokens Google prints (`gcloud auth print-access-token`).
    pattern("gcp-token", r"(?-u:\b)ya29\.[0-9A-Za-z_-]{20,}", None),
    // The secret `aws configure get` prints on its own line.
    pattern(
        "aws-secret",
        r"aws configure get (?:aws_)?secret_access_key[ \t]*\r?\n(?P<s>[A-Za-z0-9/+]{40})",
        None,
    ),
    // Stripe's secret and restricted keys (the publishable pk_ is public).
    pattern(
        "stripe-key",
        r"(?-u:\b)(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
        Some(literal_value),
    ),
    pattern("docker-token", r"(?-u:\b)dckr_pat_[A-Za-z0-9_-]{20,}", None),
    // Vault's service, batch and recovery tokens, short ones too.
    pattern("vault-token", r"(?-u:\b)hv[sbr]\.[A-Za-z0-9_-]{24,}", None),
    // Mailgun's private API key.
    pattern("mailgun-key", r"(?-u:\b)key-[0-9a-f]{32}(?-u:\b)", None),
    // Telegram bot tokens: the bot's id, then `AA` and 33 more.
    pattern(
        "telegram-token",
        r"(?:(?-u:\b)|bot)[0-9]{8,10}:AA[A-Za-z0-9_-]{33}(?:[^A-Za-z0-9_\n-]|(?m:$))",
        None,
    ),
    // age's secret keys (bech32, upper case).
    pattern("age-key", r"(?-u:\b)AGE-SECRET-KEY-1[0-9A-Z]{50,}", None),
    // Other vendors' tokens by their prefixes, each unambiguous on its
    // own: Hugging Face, CircleCI, Buildkite, 1Password service
    // accounts, Doppler, Supabase, Dynatrace, Brevo, Postman, Sentry,
    // New Relic, Linear, Shopify, DigitalOcean, npm, PyPI, Grafana,
    // Databricks, Atlassian, Heroku, Pulumi, Figma, Notion, Fly.
    pattern(
        "api-token",
        r"(?-u:\b)(?:hf_[A-Za-z0-9]{30,}|CCIPAT_[A-Za-z0-9_]{20,}|bkua_[a-f0-9]{40}|ops_eyJ[A-Za-z0-9_-]{40,}|dp\.(?:st|pt|ct|sa|scim|audit)\.[A-Za-z0-9_.-]{20,}|sbp_[a-f0-9]{40}|dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}|xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}|PMAK-[a-f0-9]{24}-[a-f0-9]{34}|sntry[su]_[A-Za-z0-9+/=_-]{30,}|NRAK-[A-Z0-9]{27}|lin_api_[A-Za-z0-9]{30,}|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}|do[opr]_v1_[a-f0-9]{64}|npm_[A-Za-z0-9]{36}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}|gl(?:sa|c)_[A-Za-z0-9_+/=-]{24,}|dapi[a-f0-9]{32}|ATATT3[A-Za-z0-9_=-]{100,}|HRKU-[A-Za-z0-9_-]{30,}|pul-[a-f0-9]{40}|figd_[A-Za-z0-9_-]{30,}|ntn_[A-Za-z0-9]{40,}|fo1_[A-Za-z0-9_-]{30,})",
        Some(literal_value),
    ),
    // Mailchimp's API keys: 32 hex and the data centre.
    pattern(
        "api-token",
        r"(?-u:\b)[0-9a-f]{32}-us[0-9]{1,2}(?-u:\b)",
        None,
    ),
    // Tailscale's auth, API and OAuth client keys.
    pattern(
        "tailscale-key",
        r"(?-u:\b)tskey-[a-z]+-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}",
        None,
    ),
    // kubeadm's bootstrap tokens: six and sixteen characters, which a
    // host name can be too (`worker.k8s2x…`), so only where a token is
    // named (`--token`, `token:`) or where `kubeadm token list` prints
    // them (first on a line, then the TTL).
    pattern(
        "kubeadm-token",
        r#"(?i)token(?:-ca-cert-hash)?["']?(?:[ \t]*[=:][ \t]*|[ \t]+)["']?(?P<s>[a-z0-9]{6}\.[a-z0-9]{16})(?:[^A-Za-z0-9.\n-]|(?m:$))"#,
        None,
    ),
    pattern(
        "kubeadm-token",
        r"(?m)^(?P<s>[a-z0-9]{6}\.[a-z0-9]{16})[ \t]+(?:[0-9]+[smhd]|<forever>|<invalid>)",
        None,
    ),
    // GRUB's password hashes.
    pattern(
        "password-hash",
        r"(?-u:\b)grub\.pbkdf2\.sha512\.[0-9]+\.[0-9A-Fa-f]+\.[0-9A-Fa-f]+",
        None,
    ),
    // `klist -kK`: each key's bytes, in parentheses after its type.
    pattern("keytab-key", r"\(0x(?P<s>[0-9a-fA-F]{32,})\)", None),
    // Password hashes are secrets too (they can be cracked offline):
    // shadow and htpasswd lines, `{SHA}` and friends.
    pattern(
        "password-hash",
        r"(?m)^[A-Za-z0-9_.@-]{1,64}:(?P<s>\$(?:1|2[abxy]?|5|6|7|y|gy|apr1|argon2(?:id|i|d)|sha1|md5|pbkdf2[a-z0-9-]*|scrypt)\$[^:\s]{8,}|\{(?:SHA|SSHA|SHA256|SSHA256|SHA512|SSHA512|MD5|SMD5|CRYPT|PLAIN|CLEARTEXT|PLAIN-MD5|CRAM-MD5|DIGEST-MD5|[A-Z0-9]+-CRYPT|PBKDF2[A-Z0-9-]*|ARGON2I?D?|BCRYPT|SCRAM-SHA-[0-9]+)\}[^:\s]{4,})",
        None,
    ),
    // The same hashes wherever they stand: crypt(3) strings, a scheme
    // before the hash (`{SSHA}…`), PostgreSQL's SCRAM verifiers and MD5
    // hashes (`pg_authid`, pgbouncer's userlist), and docker-compose's
    // doubled `$$` (`$$apr1$$…`).
    pattern(
        "password-hash",
        r"(?:\$\$?(?:1|2[abxy]|5|6|y|gy|7|apr1)(?:\$\$?[./A-Za-z0-9_-]{1,64}){1,2}\$\$?[./A-Za-z0-9_-]{20,}|\$(?:9|1c|8)\$[./A-Za-z0-9$_-]{16,}|\{(?:SSHA|SSHA256|SSHA512|SHA|SHA256|SHA512|SMD5|CRYPT|PLAIN|CLEARTEXT|[A-Z0-9]+-CRYPT|PBKDF2[A-Z0-9-]*|BCRYPT|ARGON2I?D?)\}[^\s:\x22'<]{4,}|SCRAM-SHA-[0-9]+\$[0-9]+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+|(?-u:\b)md5[0-9a-f]{32}(?-u:\b))",
        None,
    ),
    // Huawei's and H3C's `password cipher …`, `irreversible-cipher …`.
    pattern(
        "password-hash",
        r"(?:irreversible-cipher|cipher)[ \t]+(?P<s>\S{16,})",
        None,
    ),
    // Go's MySQL DSN: `user:password@tcp(host)/db`.
    pattern(
        "password",
        r"(?-u:\b)[A-Za-z0-9_.-]+:(?P<s>[^\s:@/\x22'`]{3,}[^\s/\x22'`]*)@(?:tcp|unix|udp)\(",
        None,
    ),
    // HAProxy's `stats auth user:password`; Postfix's sasl_passwd
    // (`[smtp.host]:587 user:password`); ppp's chap-secrets (`user *
    // secret *`).
    pattern(
        "password",
        r"(?m)^[ \t]*stats[ \t]+auth[ \t]+[^:\s]+:(?P<s>\S+)",
        None,
    ),
    pattern(
        "password",
        r"(?m)^\[[A-Za-z0-9.-]+\](?::[0-9]+)?[ \t]+[^:\s]+:(?P<s>\S+)[ \t]*$",
        Some(literal_value),
    ),
    pattern(
        "password",
        r#"(?m)^[^#\s]\S*[ \t]+(?:\*|"\*"|[A-Za-z0-9_.-]+)[ \t]+(?:"(?P<s1>[^"\r\n]+)"|(?P<s2>\S+))[ \t]+(?:\*|[0-9][0-9./*]*)[ \t]*$"#,
        Some(chap_secret),
    ),
    // Name and value as two fields: Kubernetes and ECS JSON (`{"name":
    // "DB_PASSWORD", "value": "…"}`, one line or two), YAML flow style.
    pattern(
        "env-secret",
        r#"(?m)"(?i:name|key)"[ \t]*:[ \t]*"(?P<name>[A-Za-z0-9_.-]*(?i:secret|password|passwd|passphrase|token|key|pass|pwd)[A-Za-z0-9_.-]*)"[ \t]*,?[ \t]*(?:\r?\n[ \t]*)?"(?i:value)"[ \t]*:[ \t]*"(?P<s1>(?:[^"\\\r\n]|\\.)+)""#,
        Some(env_secret),
    ),
    pattern(
        "env-secret",
        r#"(?i)name:[ \t]*["']?(?P<name>[A-Za-z0-9_.-]*(?:secret|password|passwd|passphrase|token|key|pass|pwd)[A-Za-z0-9_.-]*)["']?[ \t]*,[ \t]*value:[ \t]*(?:"(?P<s1>[^"\r\n]+)"|'(?P<s2>[^'\r\n]+)'|(?P<s3>[^,}\s"']+))"#,
        Some(env_secret),
    ),
    // MySQL: `IDENTIFIED WITH plugin BY '…'`, `SET PASSWORD FOR u = '…'`;
    // Redis: `AUTH [user] pw` at its prompt.
    pattern(
        "password",
        r#"(?i)IDENTIFIED[ \t]+(?:WITH[ \t]+\S+[ \t]+)?BY[ \t]+(?:'(?P<s2>(?:[^'\\\r\n]|''|\\.)+)'|"(?P<s1>(?:[^"\\\r\n]|\\.)+)")"#,
        None,
    ),
    pattern(
        "password",
        r#"(?i)SET[ \t]+PASSWORD(?:[ \t]+FOR[ \t]+\S+)?[ \t]*=[ \t]*(?:PASSWORD\()?(?:'(?P<s2>(?:[^'\\\r\n]|''|\\.)+)'|"(?P<s1>(?:[^"\\\r\n]|\\.)+)")"#,
        None,
    ),
    pattern(
        "password",
        r#"(?im)(?:^|>[ \t]*)AUTH[ \t]+(?:[^\s"']+[ \t]+)?(?P<s>[^\s"']{4,})[ \t]*$"#,
        Some(literal_value),
    ),
    // A Redis ACL user's password: `user app on >pw ~keys +@read`.
    pattern(
        "password",
        r"(?m)^[ \t]*(?:ACL[ \t]+SETUSER|user)[ \t]+\S+[ \t]+(?:\S+[ \t]+)*?>(?P<s>\S+)",
        None,
    ),
    // An XML element named for a secret whose value is in a child below
    // it (`<AdministratorPassword>` then `<Value>…</Value>`, .NET's and
    // Spring's `<setting name="Password"><value>…`).
    pattern(
        "password",
        r#"(?i)<(?:[A-Za-z]*(?:Password|Secret|Token|ApiKey)[A-Za-z]*|(?:setting|property|entry)[ \t]+(?:name|key)="[^"]*(?:password|secret|token|apikey)[^"]*")[^>]{0,64}>[ \t\r\n]{0,64}<value>(?P<s>[^<\r\n]{4,})</value>"#,
        Some(literal_value),
    ),
    // MySQL's password hashes (`mysql.user`'s `authentication_string`).
    pattern(
        "password-hash",
        r#"(?:^|[\s|'":=])(?P<s>\*[0-9A-F]{40})(?-u:\b)"#,
        None,
    ),
    // PowerShell: `ConvertTo-SecureString "pw" -AsPlainText`.
    pattern(
        "password",
        r#"(?i)ConvertTo-SecureString(?:[ \t]+-String)?[ \t]+(?:"(?P<s1>[^"\r\n]+)"|'(?P<s2>[^'\r\n]+)')"#,
        None,
    ),
    // A bearer token wherever it stands (`auth="Bearer …"` in a log).
    pattern(
        "auth-header",
        r"(?-u:\b)Bearer[ \t]+(?P<s>[A-Za-z0-9._~+/-]{16,}=*)",
        Some(literal_value),
    ),
    // Session cookies by their names.
    pattern(
        "session-cookie",
        r"(?i)(?-u:\b)(?:PHPSESSID|JSESSIONID|ASP\.NET_SessionId|connect\.sid|laravel_session|sessionid|session_id|_session|sid)=(?P<s>[A-Za-z0-9%._-]{16,})",
        None,
    ),
    // Cisco: `enable secret 5 …`, `username u secret 9 …`, `password 7 …`.
    pattern(
        "password-hash",
        r"(?im)(?:^|[ \t])(?:secret|password)[ \t]+[0-9][ \t]+(?P<s>[^\s]{4,})",
        Some(literal_value),
    ),
    // ~/.pgpass: host:port:database:user:password.
    pattern(
        "password",
        r"(?m)^(?:[^:\s#]+:(?:[0-9]+|\*):[^:\s]+:[^:\s]+:(?P<s>[^\s]+)|[ \t]+[A-Za-z][^:\s#]*:(?:[0-9]+|\*):[^:\s]+:[^:\s]+:(?P<s1>[^\s:]+))$",
        Some(pgpass_value),
    ),
    // PuTTY keys: the private lines and the MAC.
    pattern(
        "private-key",
        r"(?mR)^Private-Lines:[ \t]*[0-9]+\r?\n(?P<s>[A-Za-z0-9+/=]+$(?:\r?\n[A-Za-z0-9+/=]+$)*)",
        None,
    ),
    pattern(
        "private-key",
        r"(?m)^Private-MAC:[ \t]*(?P<s>[0-9a-fA-F]{16,})",
        None,
    ),
    // `openssl … -text` dumps of private keys: the private numbers.
    pattern(
        "private-key",
        r"(?m)^(?:priv(?:ateExponent)?|prime[12]|exponent[12]|coefficient|private-key):[ \t]*\r?\n(?P<s>(?:[ \t]+[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2})*:?[ \t]*(?:\r?\n|(?m:$)))+)",
        None,
    ),
    // A directive with a quoted header: nginx's `proxy_set_header
    // Authorization "Basic …"`.
    pattern(
        "auth-header",
        r#"(?i)authorization["']?[ \t]+["'](?:basic|bearer|token)[ \t]+(?P<s>[^\s"']+)"#,
        None,
    ),
    // Storage and Service Bus connection strings, and SAS signatures.
    pattern(
        "azure-key",
        r"(?i)(?-u:\b)(?:AccountKey|SharedAccessKey|sig)=(?P<s>[A-Za-z0-9%+/=]{20,})",
        None,
    ),
    pattern(
        "github-token",
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
        None,
    ),
    pattern(
        "gitlab-token",
        r"(?-u:\b)gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt)-[A-Za-z0-9_-]{20,}",
        None,
    ),
    pattern(
        "slack-token",
        r"(?-u:\b)(?:xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[0-9]+-[A-Za-z0-9-]{10,})",
        None,
    ),
    // A webhook URL is a credential in itself; the host stays readable.
    pattern(
        "slack-token",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9/_-]{8,})",
        Some(literal_value),
    ),
    // Mattermost's incoming hooks, Teams' (the key after `IncomingWebhook/`).
    pattern(
        "webhook",
        r"(?:/hooks/(?P<s>[a-z0-9]{26})(?:[^a-z0-9\n]|(?m:$))|/IncomingWebhook/(?P<s1>[0-9a-f]{32})/)",
        None,
    ),
    // A NATS NKEY seed (user, account, operator, server, cluster).
    pattern(
        "private-key",
        r"(?-u:\b)S[UAONCX][A-Z2-7]{56}(?-u:\b)",
        None,
    ),
    // Jenkins' encrypted secrets (`{AQAAABAAAA…}` in credentials.xml): the
    // controller's key opens them.
    pattern(
        "password",
        r"\{(?P<s>AQAAAB[A-Za-z0-9+/]{20,}={0,2})\}",
        None,
    ),
    pattern(
        "webhook",
        r"(?:(?:discord(?:app)?\.com|hooks\.zapier\.com|outlook\.office\.com)/(?:api/webhooks|hooks/catch|webhook)/|open\.(?:feishu\.cn|larksuite\.com)/open-apis/bot/v2/hook/|qyapi\.weixin\.qq\.com/cgi-bin/webhook/send\?key=|oapi\.dingtalk\.com/robot/send\?access_token=)(?P<s>[A-Za-z0-9/_@.-]{8,})",
        None,
    ),
    // OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-api03-). The
    // check asks for a random-looking body, so a host called
    // `sk-prod-cluster-nodes-pool` is left alone.
    pattern(
        "openai-key",
        r"(?-u:\b)sk-(?:proj-|svcacct-|admin-|ant-(?:[a-z]+[0-9]*-)?)?(?P<body>[A-Za-z0-9_-]{20,})",
        Some(random_body),
    ),
    // Header and payload are base64url JSON, so the token starts `eyJ`.
    pattern(
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*){1,3}",
        None,
    ),
    // scheme://user:password@host; the password may hold an `@`, the host
    // may not hold a `/`.
    pattern(
        "url-password",
        r#"(?i)(?-u:\b)[a-z][a-z0-9+.-]*://[^\s:/@?#"'<>]*:(?P<s>(?:[^\s/"'<>\\]|\\.)+)@"#,
        Some(literal_value),
    ),
    // The same, cut at the screen's edge before its `@` (`less -S` marks
    // the cut with `>`): a port is digits, anything else a password.
    pattern(
        "url-password",
        r#"(?im)(?-u:\b)[a-z][a-z0-9+.-]*://[^\s:/@?#"'<>\[]+:(?P<s>[^\s/@"'<>:\]]{4,})>$"#,
        Some(cut_password),
    ),
    pattern(
        "auth-header",
        r#"(?i)(?-u:\b)(?:proxy-)?authorization["']?[ \t]*[:=][ \t]*["']?(?:(?P<scheme>bearer|basic|token|bot|digest|negotiate|ntlm|apikey|sso-key|aws4-hmac-sha256|ssws|geniekey)[ \t]+)?(?P<s>[^\s"',;]+)"#,
        Some(credential_header),
    ),
    // X-API-Key, X-Auth-Token, X-Vault-Token, PRIVATE-TOKEN (GitLab),
    // api-key (Azure OpenAI) and the like.
    pattern(
        "auth-header",
        r#"(?i)(?-u:\b)(?:x-[a-z0-9-]*(?:key|token|secret|password|signature)|api-key|private-token|ocp-apim-subscription-key)["']?[ \t]*:[ \t]*["']?(?P<s>[^\s"',;]+)"#,
        Some(literal_value),
    ),
    // Session cookies are bearer credentials too.
    pattern(
        "auth-header",
        r#"(?i)(?-u:\b)(?:set-)?cookie["']?[ \t]*:[ \t]*(?P<s>[^\r\n"']+)"#,
        None,
    ),
    // `env`/`printenv` output and .env files: the value is the rest of the
    // line, spaces and all. The name must hold a secret word already, so
    // that ordinary `NAME=value` lines cost nothing but the scan; the check
    // then takes the name apart.
    pattern(
        "env-secret",
        r"(?m)^(?P<name>[A-Z0-9_]*(?:SECRET|PASSWORD|PASSWD|PASSPHRASE|TOKEN|KEY|PASS|PWD|PAT)[A-Z0-9_]*)=(?P<s>[^\r\n]+)",
        Some(env_secret),
    ),
    // Assignments in a command line: `export X=…`, `X=… cmd`, `-e X=…`,
    // `declare -x X="…"`, docker inspect's `"Env": ["X=…"]`. What stands
    // before the name is no line break (`^` takes the line's start): a
    // match crosses no line, so the rule reads only its literals' lines.
    // A name with a small letter counts only exported (`env_secret`): the
    // pattern says so, so `token=…` costs no groups to be turned down.
    pattern(
        "env-secret",
        r#"(?m)(?:^|[^\S\n]|[;&|("'\[,{])(?:(?P<export>(?:export|declare[ \t]+-x|typeset[ \t]+-x|local|readonly|ENV|env)[ \t]+|\$env:)(?P<name>[A-Za-z0-9_]*(?i:secret|password|passwd|passphrase|token|key|pass|pwd|pat|session)[A-Za-z0-9_]*)|(?P<bare>[A-Z0-9_]*(?:SECRET|PASSWORD|PASSWD|PASSPHRASE|TOKEN|KEY|PASS|PWD|PAT|SESSION)[A-Z0-9_]*))=(?:"(?P<s1>(?:[^"\\\r\n]|\\.)+)"|\$'(?P<s5>(?:[^'\\\r\n]|\\.)+)'|'(?P<s2>(?:[^'\r\n]|'\\''|'"'"')+)'|(?P<s3>[^\s"'`;&|)]+(?:(?:'\\''|'"'"')[^\s"'`;&|)]*)*))"#,
        Some(env_secret),
    ),
    // Kubernetes manifests: `- name: DB_PASSWORD` then `value: …`.
    pattern(
        "env-secret",
        r#"(?m)name:[ \t]*["']?(?P<name>[A-Za-z0-9_]*(?i:secret|password|passwd|passphrase|token|key|pass|pwd)[A-Za-z0-9_]*)["']?[ \t]*\r?\n[ \t]*value:[ \t]*(?:"(?P<s1>(?:[^"\\\r\n]|\\.)+)"|'(?P<s2>[^'\r\n]+)'|(?P<s3>[^\s"'][^\r\n]*))"#,
        Some(env_secret),
    ),
    // key=value, --key=value, "key"="value", a query string's &token=…:
    // the value ends at a space. The key must end with the secret word
    // (`max_tokens: 100` is not a token), as a word of its own
    // (`db_password`, `clientSecret`, but not `htpasswd: cannot open file`),
    // and must not follow a `/` (`cat: /etc/passwd: Permission denied`);
    // lowercase `pwd` only, as `PWD=` is the working directory.
    pattern(
        "password",
        concat!(
            r#"(?im)(?:^|[^A-Za-z0-9_./${:\n-])"#,
            secret_key!(),
            r#"(?:\\?["'])?\]?="#,
            quoted_value!(),
            r#"|(?P<s3>[^\s"'`&;,<>{\[](?:[^\s"'`&;,<>]|&(?:amp|lt|gt|quot|apos|#[0-9]{1,5});|&[0-9!#%*+=?@^~.-]|'\\''|'"'"')*))"#
        ),
        Some(assigned_value),
    ),
    // key: value, key = value, "key": "value", $cfg['key'] => 'value',
    // escaped JSON inside JSON. Config files (YAML, INI, .properties) put
    // spaces in unquoted values, so the value is the rest of the line, but
    // for a trailing comment; `Token::Separator` and prose such as "the
    // secret: shadow files, keys and tokens" are left (see the check).
    pattern(
        "password",
        concat!(
            r#"(?im)(?:^|[^A-Za-z0-9_./${:\n-])"#,
            secret_key!(),
            r#"(?:\\?["'])?\]?(?:[ \t]*(?:=>|:=|:)|[ \t]+=|=[ \t])[ \t]*"#,
            quoted_value!(),
            r#"|(?P<s3>[^\s"'`&<{\[:][^\r\n]*?)[ \t]*,?(?:[ \t]+#[^\r\n]*)?\r?$)"#
        ),
        Some(config_value),
    ),
    // --password value, -token value.
    pattern(
        "password",
        r#"(?i)(?:(?m:^)|[^\S\n])--?[A-Za-z-]*?(?:password|passwd|passphrase|token|secret|api-?key)[ \t]+(?:"(?P<s1>(?:[^"\\\r\n]|\\.)+)"|'(?P<s2>[^'\r\n]+)'|(?P<s3>[^\s"'-][^\s"']*))"#,
        Some(flag_value),
    ),
    // A password piped to a program that reads it: `echo 'pw' | sudo -S`,
    // `… | passwd --stdin user`, `… | chpasswd`, `… | docker login
    // --password-stdin`.
    pattern(
        "password",
        r#"(?-u:\b)(?:echo|printf)(?:[ \t]+-[a-zA-Z]+)*(?:[ \t]+["']%s(?:\\n)?["'])?[ \t]+(?:"(?P<s1>(?:[^"\\\r\n]|\\.)+)"|'(?P<s2>[^'\r\n]+)'|(?P<s3>[^\s|'"]+))[ \t]*\|[ \t]*(?:sudo[^|\r\n]*[ \t]-[a-zA-Z]*S|passwd[^|\r\n]*--stdin|chpasswd|[a-z-]+[^|\r\n]*--(?:password-stdin|passwd-on-stdin|password-from-stdin)|ipa[^|\r\n]*--password|circleci[^|\r\n]*store-secret)"#,
        Some(assigned_value),
    ),
    // The literal a command line decodes (`echo 'c2VjcmV0' | base64 -d`,
    // `printf '%s' 'a1b2…' | xxd -r -p`).
    pattern(
        "password",
        r#"(?-u:\b)(?:echo|printf)(?:[ \t]+-[a-zA-Z]+)*(?:[ \t]+["']%s(?:\\n)?["'])?[ \t]+["']?(?P<s>[A-Za-z0-9+/_-]{8,}={0,2})["']?[ \t]*\|[ \t]*(?:base64|base32|basenc|xxd)[ \t]+(?:-d|--decode|-D|-r)"#,
        Some(decodes_to_a_secret),
    ),
    // Configuration formats whose secret is not `key = value`:
    // TACACS+'s `login = cleartext "…"`, ipsec.secrets' `: PSK "…"`, a
    // Samba passdb's NT hash, Kafka JAAS' `user_NAME="…"`, Consul's gossip
    // key, ZooKeeper's superDigest, Squid's `login=user:pw`, Nagios'
    // `$USER3$=…`, an Apple profile's `<key>Password</key><string>…`, an
    // XML element's `value=` (`<PASSWORD value="…"/>`), OpenVPN keys in
    // pfSense's config.xml, a Packer variable's default.
    pattern(
        "password",
        r#"(?i)(?-u:\b)(?:login|pap|chap|opap|arap|enable)[ \t]*=[ \t]*(?:cleartext|des|crypt)[ \t]+"?(?P<s>[^"\s]+)"#,
        Some(literal_value),
    ),
    pattern(
        "password",
        r#"(?m):[ \t]*(?:PSK|XAUTH|EAP|NTLM|PIN)[ \t]+(?:"(?P<s>[^"\r\n]+)"|(?:0[sx])?(?P<s1>[^\s"]+))"#,
        Some(literal_value),
    ),
    pattern(
        "password-hash",
        r"(?m)^[^:\s]+:[0-9]+:(?:[0-9A-Fa-f]{32}|X{32}):(?P<s>[0-9A-Fa-f]{32}):",
        None,
    ),
    pattern(
        "password",
        r#"(?m)^[ \t]*user_[A-Za-z0-9_.-]+[ \t]*=[ \t]*"(?P<s>[^"\r\n]+)""#,
        Some(literal_value),
    ),
    pattern(
        "api-token",
        r#"(?m)^[ \t]*"?encrypt"?[ \t]*[=:][ \t]*"(?P<s>[A-Za-z0-9+/]{43}=)""#,
        None,
    ),
    pattern(
        "password-hash",
        r"(?i)superDigest=[^:\s]+:(?P<s>[A-Za-z0-9+/]{27}=)",
        None,
    ),
    pattern(
        "password",
        r"(?-u:\b)login=[^:\s=]+:(?P<s>\S+)",
        Some(literal_value),
    ),
    pattern(
        "password",
        r"(?m)\$USER[0-9]+\$[ \t]*=[ \t]*(?P<s>\S+)",
        Some(literal_value),
    ),
    pattern(
        "password",
        r"(?i)<key>[^<\r\n]*(?:password|passphrase|secret|token|psk)[^<\r\n]*</key>[ \t]*\r?\n?[ \t]*<string>(?P<s>[^<\r\n]+)</string>",
        Some(literal_value),
    ),
    pattern(
        "password",
        r#"(?i)<[A-Za-z_:-]*(?:password|passwd|secret|token)[A-Za-z_:-]*[ \t]+value="(?P<s>[^"\r\n]+)""#,
        Some(literal_value),
    ),
    pattern(
        "private-key",
        r"<(?:tls|shared_key|tls-auth|tls-crypt|static_key)>(?P<s>[A-Za-z0-9+/=\r\n]{40,})</",
        None,
    ),
    pattern(
        "password",
        r#"(?i)variable[ \t]+"[^"\r\n]*(?:password|passwd|secret|token|key)[^"\r\n]*"[ \t]*\{[^}]{0,200}?default[ \t]*=[ \t]*"(?P<s>[^"\r\n]+)""#,
        Some(literal_value),
    ),
    // SonarQube's tokens.
    pattern("api-token", r"(?-u:\b)sq[upa]_[0-9a-f]{40}(?-u:\b)", None),
    // Oracle's `user/password@db` (sqlplus, expdp, rman's `target`).
    pattern(
        "password",
        r#"(?i)(?-u:\b)(?:sqlplus|expdp|impdp|exp|imp|sqlldr|rman|dgmgrl|tkprof)(?:[ \t]+-[A-Za-z]+)*[ \t]+(?:(?:target|catalog|auxiliary)[ \t]+)?["']?[A-Za-z0-9_$#]+/(?P<s>[^@\s"'/]+)"#,
        Some(literal_value),
    ),
    // DB2: `connect to DB user U using PW`.
    pattern(
        "password",
        r"(?i)(?-u:\b)connect[ \t]+to[ \t]+\S+[ \t]+user[ \t]+\S+[ \t]+using[ \t]+(?P<s>\S+)",
        Some(literal_value),
    ),
    // Jenkins' script console: what `Secret.decrypt(…)` printed, below.
    pattern(
        "password",
        r"(?:Secret\.decrypt|getPlainText)\([^\r\n]*\)[ \t]*\r?\n(?P<s>[^\r\n]+)",
        Some(literal_value),
    ),
    // Prose: `the admin password for the switches is `X``, in a runbook.
    pattern(
        "password",
        r"(?i)(?-u:\b)(?:password|passphrase|passwort|secret|token|api key)(?-u:\b)[^`\n]{0,48}?(?-u:\b)(?:is|are|was)[ \t]+`(?P<s>[^`\s]{4,256})`",
        Some(literal_value),
    ),
    // Network gear's keys: an OSPF or BGP digest key, a WLAN's PSK
    // (`set-key ascii 0 X`), a key chain's `key-string 7 X`.
    pattern(
        "password",
        r"(?i)(?-u:\b)(?:message-digest-key[ \t]+[0-9]+[ \t]+md5|authentication-key|set-key[ \t]+(?:ascii|hex)|key-string)[ \t]+(?:[0-9][ \t]+)?(?P<s>[^\s]{4,})",
        Some(literal_value),
    ),
    // SMTP AUTH LOGIN: the line after the server asks `UGFzc3dvcmQ6`
    // (`Password:` in base64).
    pattern(
        "password",
        r"334 UGFzc3dvcmQ6[ \t]*\r?\n[ \t]*(?:C:|->|>>>|>)?[ \t]*(?P<s>[A-Za-z0-9+/]{4,}={0,2})",
        None,
    ),
    // Terraform's plan: a secret's new value after `->`.
    pattern(
        "password",
        r#"(?i)(?:password|passwd|secret|token|key)[A-Za-z0-9_]*[ \t]*=[ \t]*"[^"\r\n]*"[ \t]*->[ \t]*"(?P<s>[^"\r\n]+)""#,
        Some(literal_value),
    ),
    // Elasticsearch's new API key: `encoded` is its id and key in base64.
    pattern(
        "api-token",
        r#""api_key"[ \t]*:[ \t]*"[^"\r\n]+",?[ \t]*\r?\n[ \t]*"encoded"[ \t]*:[ \t]*"(?P<s>[^"\r\n]+)""#,
        None,
    ),
    // An XML element named by its attribute (`<Property
    // name="password">…</Property>`), a CDATA value, PowerShell's
    // here-string.
    pattern(
        "password",
        r#"(?i)<(?:property|setting|entry|param|parameter|add|item)[ \t]+(?:name|key)="[^"\r\n]*(?:password|passwd|secret|token|apikey)[^"\r\n]*"[^>\r\n]{0,64}>(?P<s>[^<\r\n]{4,})</"#,
        Some(literal_value),
    ),
    pattern(
        "password",
        r"(?i)<[A-Za-z_:-]*(?:password|passwd|secret|token)[A-Za-z_:-]*>[ \t]*<!\[CDATA\[(?P<s>[^\r\n]*?)\]\]>[ \t]*</",
        None,
    ),
    pattern(
        "password",
        r#"(?i)\$[A-Za-z_]*(?:pw|pwd|pass|password|passwd|secret|token|key|cred)[A-Za-z0-9_]*[ \t]*=[ \t]*@['"][ \t]*\r?\n(?P<s>[^\r\n]+)\r?\n['"]@"#,
        Some(literal_value),
    ),
    // chrony's and ntpd's keys files: `10 SHA256 HEX:…`.
    pattern(
        "password",
        r"(?im)^[ \t]*[0-9]+[ \t]+(?:MD5|SHA1|SHA256|SHA384|SHA512|SHA3-224|SHA3-256|SHA3-384|SHA3-512|AES128|AES256|AES128CMAC|RMD160|TIGER|M)[ \t]+(?P<s>(?:HEX:|ASCII:)?[^\s#]{4,})",
        Some(literal_value),
    ),
    // Passwords programs print when they make one: MySQL's first start,
    // Elasticsearch's reset.
    pattern(
        "password",
        r"(?i)temporary password is generated for [^\s:]+:[ \t]*(?P<s>\S+)|user successfully reset\.[ \t]*\r?\nNew value:[ \t]*(?P<s1>\S+)",
        None,
    ),
    // PHP's var_dump: `["password"]=>` then `string(16) "…"`.
    pattern(
        "password",
        r#"(?i)\["[^"\n]*(?:pass(?:word|wd|phrase)?|secret|token|api_?key|private_?key|auth_?key)"\]=>[ \t]*\r?\n[ \t]*string\([0-9]+\)[ \t]*"(?P<s>[^"\n]+)""#,
        Some(literal_value),
    ),
    // fish: `set -x AWS_SECRET_ACCESS_KEY …`, `set -gx TOKEN …`.
    pattern(
        "env-secret",
        r"(?m)(?:^|[\s;>$])set[ \t]+(?:-[a-zA-Z]*[xgU][a-zA-Z]*[ \t]+)+(?P<name>[A-Za-z_][A-Za-z0-9_]*)[ \t]+(?P<s>[^\s;]+)",
        Some(env_secret),
    ),
    // A form's or a query's key and value apart (GitLab's variables API:
    // `--form "key=DEPLOY_PASS" --form "value=…"`).
    pattern(
        "env-secret",
        r#"(?i)(?-u:\b)key=(?P<name>[A-Za-z0-9_]+)["']?[^\r\n]{0,64}?(?-u:\b)value=(?P<s>[^\s"'&]+)"#,
        Some(env_secret),
    ),
    // curl -u user:password, mysql -ppassword, sshpass -p password.
    pattern(
        "password",
        r#"(?-u:\b)curl[^\r\n]*?[ \t](?:-u|--user|--proxy-user)[ \t]*["']?[^\s:"']+:(?P<s>(?:[^\s"']|'\\'')+)"#,
        None,
    ),
    pattern(
        "password",
        r#"(?-u:\b)(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)[^\r\n]*?[ \t]-p(?P<s>[^\s"']+)"#,
        Some(literal_value),
    ),
    pattern(
        "password",
        r#"(?-u:\b)sshpass[ \t]+-p[ \t]*(?P<s>[^\s"']+)"#,
        None,
    ),
];

/// Literal credentials shorter than this are not looked for: they would
/// match ordinary words and numbers everywhere.
const MIN_SECRET_CHARS: usize = 4;

/// The prefix of every placeholder; a later rule never touches one.
const MARK: &str = "[REDACTED:";

/// One compiled rule.
struct Rule {
    kind: &'static str,
    regex: Regex,
    /// The indices of the groups named `s`, `s1`, `s2`…; empty: the whole
    /// match is the secret.
    secret_groups: Vec<usize>,
    check: Option<Check>,
}

impl Rule {
    fn new(kind: &'static str, regex: Regex, check: Option<Check>) -> Rule {
        let secret_groups = regex
            .capture_names()
            .enumerate()
            .filter(|(_, name)| name.is_some_and(is_secret_group))
            .map(|(i, _)| i)
            .collect();
        Rule {
            kind,
            regex,
            secret_groups,
            check,
        }
    }

    /// The span to replace in one match, if it is one to replace.
    fn secret(&self, caps: &Captures) -> Option<Range<usize>> {
        if self.check.is_some_and(|check| !check(caps)) {
            return None;
        }
        let span = if self.secret_groups.is_empty() {
            caps.get(0)?.range()
        } else {
            self.secret_groups
                .iter()
                .find_map(|&i| caps.get(i))?
                .range()
        };
        (!span.is_empty()).then_some(span)
    }

    /// This rule's secrets in `text`.
    fn spans<'t>(&'t self, text: &'t str) -> impl Iterator<Item = Range<usize>> + 't {
        self.regex
            .captures_iter(text)
            .filter_map(|caps| self.secret(&caps))
    }
}

/// Numbers the secrets of one session: the same secret gets the same
/// placeholder in every text, so the model can tell that two files hold
/// the same password without seeing it; and a number names one secret of
/// one kind: the kind it was first found as stays with it (a password
/// seen again in a URL is still `password#3`, never `url-password#3`).
/// Only a keyed hash of each secret is kept, never the secret.
#[derive(Default)]
pub(crate) struct Numbering {
    key: std::hash::RandomState,
    numbers: std::sync::Mutex<std::collections::HashMap<u64, (usize, String)>>,
    /// Numbers up to this one are taken (see `start_above`).
    after: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Numbering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Numbering")
    }
}

impl Numbering {
    /// The numbers, held for all of one text's placeholders (`Numbers`).
    fn lock(&self) -> Numbers<'_> {
        Numbers {
            numbers: self.numbers.lock().unwrap_or_else(|e| e.into_inner()),
            numbering: self,
        }
    }

    /// New numbers start above those in `text` (a conversation restored
    /// from an earlier session, numbered there): the model must not take
    /// a new secret for an old one.
    pub(crate) fn start_above(&self, text: &str) {
        let highest = text
            .match_indices(MARK)
            .filter_map(|(i, _)| {
                let rest = &text[i..text.len().min(i + 80)];
                let hash = rest.find('#')?;
                let end = rest.find(']')?;
                rest.get(hash + 1..end)?.parse::<usize>().ok()
            })
            .max()
            .unwrap_or(0);
        self.after
            .fetch_max(highest, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A `Numbering` locked while one text's placeholders are written.
struct Numbers<'n> {
    numbers: std::sync::MutexGuard<'n, std::collections::HashMap<u64, (usize, String)>>,
    numbering: &'n Numbering,
}

impl Numbers<'_> {
    /// Writes to `out` the placeholder for `secret`, found as `kind`:
    /// `[REDACTED:kind#n]` with the kind and number it first had; and
    /// returns that kind.
    fn write(&mut self, secret: &str, kind: &str, out: &mut String) -> &str {
        use std::fmt::Write;
        use std::hash::BuildHasher;
        let n = &self.numbering;
        let h = n.key.hash_one(secret);
        let next = self.numbers.len() + 1 + n.after.load(std::sync::atomic::Ordering::Relaxed);
        let (number, kind) = self
            .numbers
            .entry(h)
            .or_insert_with(|| (next, kind.to_string()));
        let _ = write!(out, "{MARK}{kind}#{number}]");
        kind
    }
}

/// A secret found: where, and of what kind, an index into the redactor's
/// kinds. Kinds are in the order of the detectors, most specific first,
/// so the lower one wins when two findings overlap (`merge`). `via` says
/// how it was read (`explain` names the rule from the kind and this).
struct Span {
    range: Range<usize>,
    kind: usize,
    via: Via,
}

/// How a finding was read: in the text as it is, or once decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Via {
    #[default]
    Text,
    /// In URL-encoded text once decoded (`find_url_encoded`).
    UrlEncoded,
    /// A line of output of a command that reads a secret store, by the
    /// command rule with this index (`commands`).
    Command(usize),
}

/// One finding, as `walissh redact --explain` lists it: where it is in
/// the plain text (`plain`, what the redactor works on), of what kind
/// (the placeholder's), and which rule found it (`walissh:<kind>`, `keys`,
/// `operator:<id>`, `gitleaks:<id>`, `base64`, `url-encoded`…). Never the
/// secret itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    /// Bytes of the plain text.
    pub(crate) span: Range<usize>,
    /// 1-based line and column (in characters) of its first character.
    pub(crate) start: (usize, usize),
    /// 1-based line and column (in characters) of its last character.
    pub(crate) end: (usize, usize),
    pub(crate) kind: String,
    pub(crate) rule: String,
}

/// Scrubs secrets from text bound for the model.
pub(crate) struct Redactor {
    rules: Vec<Rule>,
    /// Where each rule can match, these and then gitleaks': one pass over
    /// the text finds the literals the rules need, and each runs only on
    /// the lines around its own.
    prefilter: prefilter::Literals,
    /// Those of walissh's rules with no literal that stay within a line.
    lines: Option<prefilter::Lines>,
    /// Keys that name a secret and tools' password flags.
    pairs: pairs::Pairs,
    /// The operator's rules (`[context] redact_rules`), after walissh's
    /// own, before gitleaks'; none by default.
    operator: rules::Rules,
    /// gitleaks' rules, after walissh's own.
    gitleaks: rules::Rules,
    /// Commands whose output is a secret, and the kind their output gets.
    commands: commands::Commands,
    output_kind: usize,
    /// Values that must pass (`[context] redact_allow`): a finding whose
    /// text one of them matches is not one, but for the bastion's own
    /// credentials.
    allow: Vec<Regex>,
    /// The rule of the bastion's own credentials, if it holds any.
    credential: Option<usize>,
    /// The rules of `[ai] redact`'s patterns.
    custom: Range<usize>,
    /// Every kind a finding may have: walissh's rules', `password` (keys),
    /// the operator's ids, gitleaks' ids, `base64-secret`.
    kinds: Vec<String>,
    /// What a placeholder looks like.
    placeholder: Regex,
    /// A base64 value long enough to hold a secret.
    base64: Regex,
    /// A run of URL-encoded text: it holds at least one `%XX`.
    url_encoded: Regex,
}

impl Redactor {
    /// `extra`: the `[ai] redact` regexes (the config checked them; an Err
    /// names one that does not compile); `secrets`: literal credentials the
    /// bastion holds (target passwords, its API key); empty or very short
    /// (< 4 chars) ones are ignored. For tests and fuzzing: the bastion
    /// builds its redactor from the config (`for_config`).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn new(extra: &[String], secrets: &[String]) -> Result<Redactor, String> {
        Redactor::build(extra, secrets, rules::Rules::empty(), Vec::new())
    }

    /// The redactor a config asks for: the agent's, and `walissh redact`'s,
    /// so the two cannot differ. `[ai] redact`'s patterns, the credentials
    /// the bastion holds (`held`), `[context] redact_rules` (the file as
    /// read at load) and `redact_allow`. An Err names the config's file,
    /// line and key, and for a rules file, the rule and what is wrong.
    pub(crate) fn for_config(config: &Config) -> Result<Redactor, ConfigError> {
        let c = &config.context;
        let operator = match &c.redact_rules_file {
            None => rules::Rules::empty(),
            Some(file) => {
                rules::Rules::parse(&file.text, rules::Origin::Operator).map_err(|e| {
                    let span = c.redact_rules.as_ref().map(|p| p.span());
                    let msg = format!("{}: {e}", file.path.display());
                    config.error_at(span, "context.redact_rules", &msg)
                })?
            }
        };
        let allow = c
            .redact_allow
            .iter()
            .map(|p| {
                compile_pattern(p.get_ref()).map_err(|e| {
                    let msg = format!("bad regex: {e}");
                    config.error_at(Some(p.span()), "context.redact_allow", &msg)
                })
            })
            .collect::<Result<_, _>>()?;
        let extra: Vec<String> = config
            .ai
            .redact
            .iter()
            .map(|p| p.get_ref().clone())
            .collect();
        Redactor::build(&extra, &Redactor::held(config), operator, allow)
            .map_err(|e| config.error_at(None, "ai.redact", &e))
    }

    /// The credentials the bastion holds, which never reach the model,
    /// whatever prints them: target passwords and the model's API key,
    /// from the environment variables the config names.
    pub(crate) fn held(config: &Config) -> Vec<String> {
        let mut held: Vec<String> = config
            .targets
            .iter()
            .filter_map(|t| t.password_env.as_ref())
            .filter_map(|var| std::env::var(var.get_ref()).ok())
            .collect();
        if let Some(var) = &config.llm.api_key_env {
            held.extend(std::env::var(var).ok());
        }
        held
    }

    fn build(
        extra: &[String],
        secrets: &[String],
        operator: rules::Rules,
        allow: Vec<Regex>,
    ) -> Result<Redactor, String> {
        let mut rules: Vec<Rule> = KEYS.iter().map(builtin).collect();
        let mut credential = None;
        if let Some(regex) = literals(secrets) {
            credential = Some(rules.len());
            rules.push(Rule::new("bastion-credential", regex, None));
        }
        // The operator's patterns come before the guesses: they know their
        // secrets better than any heuristic.
        let custom_start = rules.len();
        for p in extra {
            let regex = compile_pattern(p)
                .map_err(|e| format!("[ai] redact pattern {p:?} is invalid: {e}"))?;
            rules.push(Rule::new("custom", regex, None));
        }
        let custom = custom_start..rules.len();
        rules.extend(SHAPES.iter().map(builtin));
        let patterns: Vec<&str> = rules.iter().map(|r| r.regex.as_str()).collect();
        let gitleaks = rules::Rules::load()?;
        let prefilter = prefilter::prefilter(&patterns)?.chain(gitleaks.keywords())?;
        let kinds: Vec<String> = rules
            .iter()
            .map(|r| r.kind.to_string())
            .chain(std::iter::once("password".to_string()))
            .chain((0..operator.len()).map(|i| operator.id(i).to_string()))
            .chain((0..gitleaks.len()).map(|i| gitleaks.id(i).to_string()))
            .chain(["secret-output".to_string(), "base64-secret".to_string()])
            .collect();
        let placeholder = Regex::new(r"\[REDACTED:[a-z0-9_-]{1,64}(?:#[0-9]{1,9})?\]")
            .expect("the placeholder pattern compiles");
        let base64 = Regex::new(r"[A-Za-z0-9+/]{24,}={0,2}").expect("the base64 pattern compiles");
        let url_encoded = Regex::new(
            r"[A-Za-z0-9._~!*'()+=&:/?@%-]*%[0-9A-Fa-f]{2}[A-Za-z0-9._~!*'()+=&:/?@%-]*",
        )
        .expect("the URL-encoding pattern compiles");
        let lines = prefilter::Lines::new(&patterns, prefilter.always());
        Ok(Redactor {
            base64,
            url_encoded,
            rules,
            lines,
            prefilter,
            pairs: pairs::Pairs::new(),
            operator,
            gitleaks,
            commands: commands::Commands::load()?,
            output_kind: kinds.len() - 2,
            allow,
            credential,
            custom,
            kinds,
            placeholder,
        })
    }

    /// `text` as the model may see it: without escape sequences or control
    /// characters (see `plain`), and with every secret replaced by a
    /// placeholder `[REDACTED:<kind>#<n>]`, `n` from `numbering` (one per
    /// session); and how many of each kind were replaced. Placeholders
    /// already in the text are left as they are.
    pub(crate) fn redact(&self, text: &str, numbering: &Numbering) -> (String, Counts) {
        let text = plain::plain(text);
        let spans = self.spans(&text);
        if spans.is_empty() {
            return (text.into_owned(), Counts::default());
        }
        self.render(&text, &spans, numbering)
    }

    /// `text` with each of `spans` (disjoint, in order) replaced by its
    /// placeholder, and the counts by kind.
    fn render(&self, text: &str, spans: &[Span], numbering: &Numbering) -> (String, Counts) {
        let mut counts = Counts::default();
        let mut out = String::with_capacity(text.len());
        let mut numbers = numbering.lock();
        let mut done = 0;
        for span in spans {
            out.push_str(&text[done..span.range.start]);
            let found = &text[span.range.clone()];
            let kind = numbers.write(found, &self.kinds[span.kind], &mut out);
            match counts.0.get_mut(kind) {
                Some(count) => *count += 1,
                None => {
                    counts.0.insert(kind.to_string(), 1);
                }
            }
            done = span.range.end;
        }
        out.push_str(&text[done..]);
        (out, counts)
    }

    /// What `redact` would replace in `text`, in order: each finding's
    /// place in the plain text, its kind and its rule (see `Finding`).
    pub(crate) fn explain(&self, text: &str) -> Vec<Finding> {
        let text = plain::plain(text);
        let spans = self.spans(&text);
        // Lines and columns in one walk over the text, span by span.
        let (mut at, mut line, mut col) = (0, 1, 1);
        let mut walk = |to: usize| {
            for c in text[at..to].chars() {
                match c {
                    '\n' => (line, col) = (line + 1, 1),
                    _ => col += 1,
                }
            }
            at = to;
            (line, col)
        };
        spans
            .into_iter()
            .map(|s| {
                let start = walk(s.range.start);
                let last = text[..s.range.end]
                    .char_indices()
                    .next_back()
                    .map_or(s.range.start, |(i, _)| i.max(s.range.start));
                let end = walk(last);
                Finding {
                    start,
                    end,
                    kind: self.kinds[s.kind].clone(),
                    rule: self.rule(&s),
                    span: s.range,
                }
            })
            .collect()
    }

    /// The findings `redact` replaces in plain `text`, disjoint and in
    /// order: every detector's (`find`), less those `[context]
    /// redact_allow` lets pass, merged with the placeholders already there
    /// (`merge`), each taking the lines of its rest (`wrapped`). A secret
    /// the terminal wrapped is found whole in the rows joined, and goes
    /// whole (`wrap::extend`).
    fn spans(&self, text: &str) -> Vec<Span> {
        self.spans_in_views(text, 0)
    }

    /// `spans`, `depth` views deep. Each view undoes something, so a view
    /// of a view ends; the bound is the second wall, should one not (one
    /// that undid nothing once overflowed the stack).
    fn spans_in_views(&self, text: &str, depth: usize) -> Vec<Span> {
        const MAX_VIEWS: usize = 4;
        if depth >= MAX_VIEWS {
            return self.spans_here(text);
        }
        // Full-width keys are read as keys; the text keeps its characters.
        let mapped = |view: &str, from: &[usize]| {
            let mut spans = self.spans_in_views(view, depth + 1);
            for s in &mut spans {
                s.range = from[s.range.start]..from[s.range.end];
            }
            spans
        };
        if let Some((folded, from)) = plain::folded(text) {
            return mapped(&folded, &from);
        }
        // Quotes written as HTML entities, or escaped twice (JSON in a
        // string in JSON), slashes escaped in JSON: read as they are, and
        // decoded.
        let mut spans = self.spans_here(text);
        for (view, from) in plain::entities(text)
            .into_iter()
            .chain(plain::unescaped(text))
        {
            wrap::absorb(&mut spans, mapped(&view, &from));
        }
        spans.sort_by_key(|s| s.range.start);
        spans
    }

    /// `spans` of the text as it stands, no view decoded.
    fn spans_here(&self, text: &str) -> Vec<Span> {
        // A public key is no secret, whatever its shape (`public key:`
        // and `peer:` in `wg show`, `PublicKey = …`).
        let find = |t: &str| {
            let mut found = self.find(t);
            // Several rules find most secrets: each place is judged once.
            let mut judged = std::collections::HashMap::new();
            found.retain(|s| {
                let command = matches!(s.via, Via::Command(_));
                *judged
                    .entry((s.range.start, s.range.end, command))
                    .or_insert_with(|| !public_or_masked(t, s.range.clone(), command))
            });
            found
        };
        let mut found = find(text);
        for side in plain::word_diff(text).iter().flatten() {
            found.extend(find(side));
        }
        // Panes side by side: each read as a screen of its own.
        for pane in panes::split(text) {
            let mut more = find(&pane.text);
            wrap::extend(&pane.text, &mut more, find);
            let back = more
                .iter()
                .flat_map(|s| {
                    pane.back(s.range.clone()).into_iter().map(|range| Span {
                        range,
                        kind: s.kind,
                        via: s.via,
                    })
                })
                .collect();
            wrap::absorb(&mut found, back);
        }
        wrap::extend(text, &mut found, find);
        if !self.allow.is_empty() {
            found.retain(|s| {
                Some(s.kind) == self.credential
                    || !text
                        .get(s.range.clone())
                        .is_some_and(|v| self.allow.iter().any(|a| a.is_match(v)))
            });
        }
        let mut spans = merge(found, &placeholders(&self.placeholder, text));
        wrap::wrapped(text, &mut spans);
        spans
    }

    /// The rule that found a span, as `explain` names it.
    fn rule(&self, s: &Span) -> String {
        match s.via {
            Via::UrlEncoded => return "url-encoded".to_string(),
            Via::Command(i) => return format!("command:{}", self.commands.id(i)),
            Via::Text => {}
        }
        let pairs = self.rules.len();
        let operator = pairs + 1..pairs + 1 + self.operator.len();
        let gitleaks = operator.end..operator.end + self.gitleaks.len();
        let kind = self.kinds.get(s.kind).map_or("?", String::as_str);
        match s.kind {
            i if Some(i) == self.credential => format!("walissh:{kind}"),
            i if self.custom.contains(&i) => format!("ai.redact:{}", i - self.custom.start + 1),
            i if i < pairs => format!("walissh:{kind}"),
            i if i == pairs => "keys".to_string(),
            i if operator.contains(&i) => format!("operator:{kind}"),
            i if gitleaks.contains(&i) => format!("gitleaks:{kind}"),
            _ if kind == "base64-secret" => "base64".to_string(),
            _ => format!("walissh:{kind}"),
        }
    }

    /// Every finding in `text`, in no order: of every rule, in URL-encoded
    /// text once decoded, and base64 values whose decoded text holds a
    /// secret.
    fn find(&self, text: &str) -> Vec<Span> {
        let mut spans = self.find_plain(text);
        spans.extend(self.find_url_encoded(text));
        spans.extend(self.find_base64(text));
        spans.extend(self.find_outputs(text));
        spans
    }

    /// The lines of output of commands that read a secret store, on a
    /// screen's text: after a prompt line whose command a rule of
    /// `commands.toml` names (`cat /run/secrets/db`, `vault kv get`).
    fn find_outputs(&self, text: &str) -> Vec<Span> {
        self.commands
            .outputs(text)
            .into_iter()
            .map(|(range, rule)| Span {
                range,
                kind: self.output_kind,
                via: Via::Command(rule),
            })
            .collect()
    }

    /// `output` of `command` as the model may see it: every line replaced
    /// when the command reads a secret store (their count kept, so the
    /// model sees that it printed something), else as `redact` makes it.
    pub(crate) fn redact_output(
        &self,
        command: &str,
        output: &str,
        numbering: &Numbering,
    ) -> (String, Counts) {
        let Some(reading) = self.commands.reading(command) else {
            return self.redact(output, numbering);
        };
        let rule = reading.rule;
        let text = plain::plain(output);
        let mut sifter = self.commands.sifter(command.to_string(), &reading);
        let mut spans = Vec::new();
        // The lines left to the detectors (the command failing, a prompt,
        // a public field, what a sink printed), read in one pass below.
        let mut left: Vec<Range<usize>> = Vec::new();
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let start = at;
            at += line.len();
            let body = line.trim_end_matches(['\n', '\r']);
            if sifter.leaves(body) {
                // Lines left one after another are one block: a key's
                // lines go together.
                match left.last_mut() {
                    Some(block) if text[block.end..start].trim_start_matches('\r') == "\n" => {
                        block.end = start + body.len();
                    }
                    _ => left.push(start..start + body.len()),
                }
                continue;
            }
            // (A line of blanks is an empty value, not a reversed range.)
            let lead = body.len() - body.trim_start().len();
            let value = start + lead..start + lead + body.trim().len();
            let placeholder = self
                .placeholder
                .find(&text[value.clone()])
                .is_some_and(|m| m.len() == value.len());
            if !value.is_empty() && !placeholder {
                spans.push(Span {
                    range: value,
                    kind: self.output_kind,
                    via: Via::Command(rule),
                });
            }
        }
        if !left.is_empty() {
            // What the detectors find, cut to the blocks left: the lines
            // replaced whole are the command's, and a finding that goes on
            // into them (a key whose middle row looks like a digest) still
            // takes its part of a block.
            for s in self.spans(&text) {
                let first = left.partition_point(|l| l.end <= s.range.start);
                for block in left[first..].iter().take_while(|l| l.start < s.range.end) {
                    let range = s.range.start.max(block.start)..s.range.end.min(block.end);
                    if !range.is_empty() {
                        spans.push(Span { range, ..s });
                    }
                }
            }
            spans.sort_by_key(|s| s.range.start);
        }
        self.render(&text, &spans, numbering)
    }

    /// Base64 values whose decoded text holds a secret, whole. The decoded
    /// runs are searched as one text, a line each (see
    /// `find_url_encoded`); a finding marks every run it touches.
    fn find_base64(&self, text: &str) -> Vec<Span> {
        let kind = self.kinds.len() - 1;
        let mut secret: Vec<(Range<usize>, bool)> = Vec::new();
        let mut joined = String::new();
        // Where each run's decoded text starts in `joined`.
        let mut starts = Vec::new();
        for m in self.base64.find_iter(text) {
            let Some(decoded) = decode_base64(m.as_str()) else {
                // The first row of a PEM key's base64 that the terminal
                // wrapped (`tls.key: LS0tLS1CRUdJTiBFQyBQUklW…`): its
                // rows below go with it (`wrapped`).
                if encodes_private_key(m.as_str()) {
                    secret.push((m.range(), true));
                }
                continue;
            };
            secret.push((
                m.range(),
                decoded.contains("PRIVATE KEY") || credentials(&decoded),
            ));
            starts.push(joined.len());
            joined.push_str(&decoded);
            joined.push('\n');
        }
        if !joined.is_empty() {
            for f in self.find_plain(&joined) {
                let first = starts.partition_point(|&s| s <= f.range.start) - 1;
                let last = starts.partition_point(|&s| s < f.range.end.max(1)) - 1;
                for run in &mut secret[first..=last.max(first)] {
                    run.1 = true;
                }
            }
        }
        secret
            .into_iter()
            .filter(|(_, s)| *s)
            .map(|(range, _)| Span {
                range,
                kind,
                via: Via::Text,
            })
            .collect()
    }

    /// The findings of walissh's own rules, each run only on the windows
    /// of the text where the prefilter says it can match: on text dense
    /// with secrets, each line holds a few kinds, not all of them.
    #[cfg(test)]
    fn find_own(&self, text: &str) -> Vec<Span> {
        let mut windows = self.prefilter.windows(text.as_bytes());
        windows.truncate(self.rules.len());
        self.narrow(text, &mut windows);
        self.find_own_in(text, windows)
    }

    /// The windows of the rules with no literal that stay within a line,
    /// narrowed to the lines one of them may match on (`Lines`).
    fn narrow(&self, text: &str, windows: &mut [Vec<Range<usize>>]) {
        if let Some(lines) = &self.lines {
            lines.narrow(text.as_bytes(), windows);
        }
    }

    /// `find_own`, given each rule's windows.
    fn find_own_in(&self, text: &str, windows: Vec<Vec<Range<usize>>>) -> Vec<Span> {
        let mut spans = Vec::new();
        for (i, windows) in windows.into_iter().enumerate() {
            for w in windows {
                spans.extend(self.rules[i].spans(&text[w.clone()]).map(|r| Span {
                    range: w.start + r.start..w.start + r.end,
                    kind: i,
                    via: Via::Text,
                }));
            }
        }
        spans
    }

    /// The secrets in URL-encoded runs of `text` (`p%40ss`, a query string
    /// inside a redirect URL, JSON sent as a form), found in the decoded
    /// text and mapped back to the encoded characters that spell them, so
    /// only the secret goes and the rest of the URL stays. All runs are
    /// decoded into one text, a line each, and searched once: text made of
    /// thousands of short runs must not cost a search per run.
    fn find_url_encoded(&self, text: &str) -> Vec<Span> {
        let mut joined = String::new();
        // Where each byte of `joined` came from in `text`, and where each
        // run ends in `joined`.
        let mut from: Vec<usize> = Vec::new();
        let mut ends: Vec<usize> = Vec::new();
        for m in self.url_encoded.find_iter(text) {
            let Some((decoded, map)) = decode_url(m.as_str()) else {
                continue;
            };
            joined.push_str(&decoded);
            from.extend(map.into_iter().map(|i| m.start() + i));
            ends.push(joined.len());
            joined.push('\n');
        }
        if joined.is_empty() {
            return Vec::new();
        }
        self.find_plain(&joined)
            .into_iter()
            .filter_map(|s| {
                // A finding is cut to the run it starts in (a line break
                // between runs is in none of them).
                let mut start = s.range.start;
                if ends.binary_search(&start).is_ok() {
                    start += 1;
                }
                let run = ends.partition_point(|&e| e <= start);
                let end = s.range.end.min(*ends.get(run)?);
                (end > start).then(|| Span {
                    range: from[start]..from[end],
                    kind: s.kind,
                    via: Via::UrlEncoded,
                })
            })
            .collect()
    }

    /// Every finding of every rule in `text`, in no order.
    fn find_plain(&self, text: &str) -> Vec<Span> {
        // One pass finds where walissh's rules and gitleaks' may match.
        let mut windows = self.prefilter.windows(text.as_bytes());
        let theirs = windows.split_off(self.rules.len());
        self.narrow(text, &mut windows);
        let mut spans = self.find_own_in(text, windows);
        let pairs = self.rules.len();
        spans.extend(self.pairs.find(text).into_iter().map(|range| Span {
            range,
            kind: pairs,
            via: Via::Text,
        }));
        // The operator's rules (`[context] redact_rules`), then gitleaks'.
        // gitleaks' secrets are sometimes wider than the secret (the user
        // with the password, a webhook's host with its path): where one of
        // walissh's rules, tuned to keep that context, found it too, its
        // span wins in `merge`. A rule's secret group may end inside a
        // character.
        let gitleaks = pairs + 1 + self.operator.len();
        let found = [
            (self.operator.find(text.as_bytes()), pairs + 1),
            (
                self.gitleaks.find_in_windows(text.as_bytes(), theirs),
                gitleaks,
            ),
        ];
        for (found, first) in found {
            spans.extend(found.into_iter().map(|f| Span {
                range: text.floor_char_boundary(f.span.start)..text.ceil_char_boundary(f.span.end),
                kind: first + f.rule,
                via: Via::Text,
            }));
        }
        spans
    }
}

/// Whether what a rule found at `range` of `t` is no secret after all:
/// masked, an example, or public by its name or shape. A command's output
/// is never taken for masked.
fn public_or_masked(t: &str, range: Range<usize>, command: bool) -> bool {
    // A token shape masked in documentation (`ghp_xxxx…`). A finding over
    // lines is a block, no value: a banner of `*****` between two PEM
    // keys it spans masks neither.
    let value = &t[range.clone()];
    let masked = !command && !value.contains('\n') && masked_or_example(value);
    masked
        || names_public_key(t, range.start)
        || digest(t, range.start)
        || public_token(value)
        || PUBLIC_PREFIXES
            .iter()
            .any(|p| t[..range.start].ends_with(p))
}

/// Base64 `text` decoded, if it is base64 of printable UTF-8 text.
/// Padding may be there or not, as programs print it either way.
fn decode_base64(text: &str) -> Option<String> {
    use base64::Engine;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    let text = String::from_utf8(LENIENT.decode(text).ok()?).ok()?;
    let printable = text
        .chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'));
    printable.then_some(text)
}

/// Whether base64 `text` starts with a PEM private key's `BEGIN` line,
/// whatever follows (a piece of it, the rest on the rows below).
fn encodes_private_key(text: &str) -> bool {
    use base64::Engine;
    let head = &text[..text.len().min(64) / 4 * 4];
    base64::engine::general_purpose::STANDARD
        .decode(head)
        .is_ok_and(|d| d.starts_with(b"-----BEGIN") && d.windows(11).any(|w| w == b"PRIVATE KEY"))
}

/// URL-encoded `text` (`%XX`, and `+` for a space) decoded, and for each
/// byte of the decoded text (and its end) where it starts in `text`; None
/// when the decoded bytes are not UTF-8.
fn decode_url(text: &str) -> Option<(String, Vec<usize>)> {
    let bytes = text.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut from = Vec::with_capacity(bytes.len() + 1);
    let mut i = 0;
    while i < bytes.len() {
        from.push(i);
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', hi, lo]) => hex(*hi).zip(hex(*lo)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    from.push(bytes.len());
    Some((String::from_utf8(out).ok()?, from))
}

/// `user:password` (docker's `auth`, HTTP basic), the password a secret:
/// a user name's characters, then the password right after the colon
/// (`owner: platform-team` is YAML, not a credential).
fn credentials(decoded: &str) -> bool {
    decoded.split_once(':').is_some_and(|(user, pass)| {
        !user.is_empty()
            && user.len() <= 128
            && user
                .chars()
                .all(|c| c.is_alphanumeric() || "._-@\\+".contains(c))
            && !pass.starts_with(char::is_whitespace)
            && !pass.trim_end().contains(char::is_whitespace)
            && pairs::is_secret_value(pass.trim_end(), false)
    })
}

/// The findings as disjoint spans, in order. The most specific rule goes
/// first: a finding that overlaps one already taken, or a placeholder
/// already in the text, is dropped (a generic `key: rest of the line` rule
/// must not swallow the text after a token a specific rule found).
fn merge(mut spans: Vec<Span>, marks: &[Range<usize>]) -> Vec<Span> {
    spans.retain(|s| !s.range.is_empty());
    // A command's output goes whole, whatever else was found in it; of
    // two findings of one kind at one place, the longer (a URL's encoded
    // password read as it stands, not the piece its decoding spells).
    spans.sort_by_key(|s| {
        (
            !matches!(s.via, Via::Command(_)),
            s.kind,
            s.range.start,
            std::cmp::Reverse(s.range.end),
        )
    });
    // Taken spans by start; they never overlap, so the one starting last
    // before a span's end is the only one that can reach into it.
    let mut taken: BTreeMap<usize, Span> = BTreeMap::new();
    for m in marks {
        taken.insert(
            m.start,
            Span {
                range: m.clone(),
                kind: usize::MAX,
                via: Via::Text,
            },
        );
    }
    for s in spans {
        let clashes = taken
            .range(..s.range.end)
            .next_back()
            .is_some_and(|(_, t)| t.range.end > s.range.start);
        if !clashes {
            taken.insert(s.range.start, s);
        }
    }
    taken
        .into_values()
        .filter(|s| s.kind != usize::MAX)
        .collect()
}

/// The most line breaks one match of `pattern` can hold, None when that
/// is unbounded (or the pattern does not parse here). Decided on the
/// parsed pattern, so it is exact: both the pieces of `find_own` and the
/// windows of gitleaks' rules (`rules`) rest on it.
pub(super) fn max_line_breaks(pattern: &str) -> Option<usize> {
    use regex_syntax::hir::{Class, Hir, HirKind};
    fn breaks(hir: &Hir) -> Option<usize> {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => Some(0),
            HirKind::Literal(l) => Some(l.0.iter().filter(|&&b| b == b'\n').count()),
            HirKind::Class(Class::Unicode(c)) => Some(usize::from(
                c.ranges()
                    .iter()
                    .any(|r| r.start() <= '\n' && '\n' <= r.end()),
            )),
            HirKind::Class(Class::Bytes(c)) => Some(usize::from(
                c.ranges()
                    .iter()
                    .any(|r| r.start() <= b'\n' && b'\n' <= r.end()),
            )),
            HirKind::Repetition(r) => match breaks(&r.sub)? {
                0 => Some(0),
                b => r.max.map(|max| b.saturating_mul(max as usize)),
            },
            HirKind::Capture(c) => breaks(&c.sub),
            HirKind::Concat(v) => v
                .iter()
                .try_fold(0usize, |a, h| Some(a.saturating_add(breaks(h)?))),
            HirKind::Alternation(v) => v.iter().try_fold(0usize, |a, h| Some(a.max(breaks(h)?))),
        }
    }
    breaks(&parse_as_gitleaks(pattern)?)
}

/// `pattern` parsed as gitleaks' rules compile (`rules::compile`): on
/// bytes first, then with Unicode.
pub(super) fn parse_as_gitleaks(pattern: &str) -> Option<regex_syntax::hir::Hir> {
    regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()
        .or_else(|| regex_syntax::parse(pattern).ok())
}

fn builtin(p: &Pattern) -> Rule {
    let regex = Regex::new(p.regex).expect("built-in redaction pattern compiles");
    Rule::new(p.kind, regex, p.check)
}

/// One pattern for all the bastion's credentials, longest first so that a
/// password that contains another is replaced whole.
fn literals(secrets: &[String]) -> Option<Regex> {
    let mut secrets: Vec<&str> = secrets
        .iter()
        .map(String::as_str)
        .filter(|s| s.chars().count() >= MIN_SECRET_CHARS)
        .collect();
    if secrets.is_empty() {
        return None;
    }
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    let alternation: Vec<String> = secrets.into_iter().map(regex::escape).collect();
    Some(Regex::new(&alternation.join("|")).expect("escaped literals compile"))
}

fn is_secret_group(name: &str) -> bool {
    name.strip_prefix('s')
        .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit()))
}

/// Where the placeholders already in `text` are.
/// Only the exact shape counts: a `[REDACTED:` that goes on with anything
/// else shields nothing that follows it.
fn placeholders(shape: &Regex, text: &str) -> Vec<Range<usize>> {
    if !text.contains(MARK) {
        return Vec::new();
    }
    shape.find_iter(text).map(|m| m.range()).collect()
}

/// The secret of a match: the first `s…` group that took part.
fn value<'t>(caps: &Captures<'t>) -> &'t str {
    ["s", "s1", "s2", "s3", "s4", "s5"]
        .iter()
        .find_map(|n| caps.name(n))
        .or_else(|| caps.get(0))
        .map_or("", |m| m.as_str())
}

/// Whether a value is a real one rather than a reference to one: `$VAR`,
/// `${VAR}`, `$(cmd)`, `{{ template }}`, `null`, `****`, `...`. Such values tell
/// the model where the secret comes from, which is worth keeping.
fn is_literal(v: &str) -> bool {
    literal(v, false)
}

/// A value already masked (`gho_****`, `****ABCD`, `[REDACTED]`), a
/// placeholder (`changeme`, `your-api-key-here`, `hf_xxxxxxxx`), or a
/// reference in a configuration language (`var.db_password`,
/// `urn:…:token-type:…`).
fn masked_or_example(v: &str) -> bool {
    // Run on every finding, some of them long: no allocation.
    let masked = v.contains("****")
        || v.contains("••••")
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

/// `XXX/YYY/ZZZ`: at least six letters and digits, in at most four runs
/// of one character each three or more long: nothing drawn at random.
fn few_runs(v: &str) -> bool {
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
const PUBLIC_PREFIXES: &[&str] = &[
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

fn public_token(v: &str) -> bool {
    PUBLIC_PREFIXES.iter().any(|p| v.starts_with(p))
}

/// `[hidden]`, `(sensitive)`, `[PROTECTED]`: a word in brackets stands
/// where a value was taken out.
fn bracketed_word(v: &str) -> bool {
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
fn relative_path(v: &str) -> bool {
    ["./", "../", "~/"].iter().any(|p| v.starts_with(p))
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"./_-~".contains(&b))
}

/// A secret store's path (`secret/data/db`, `prod/db/password`): where
/// the secret is, lower case, two `/` or more.
fn store_path(v: &str) -> bool {
    v.matches('/').count() >= 2
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"/._-".contains(&b))
}

/// `is_literal`, knowing whether the value stood in quotes: `"*x"` is a
/// string, `*x` a YAML alias, `!x` a tag, `&x` an anchor.
fn literal(v: &str, quoted: bool) -> bool {
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
fn digest(text: &str, start: usize) -> bool {
    let near = &text[text.floor_char_boundary(start.saturating_sub(8))..start];
    // Go's `h1:` module hashes, subresource integrity's `sha384-`.
    [
        "sha256:", "sha512:", "sha384:", "sha1:", " h1:", "sha256-", "sha384-", "sha512-",
    ]
    .iter()
    .any(|d| near.ends_with(d))
}

/// Whether the text before `start` on its line names a public key.
fn names_public_key(text: &str, start: usize) -> bool {
    let near = &text[text.floor_char_boundary(start.saturating_sub(32))..start];
    let near = &near[near.rfind('\n').map_or(0, |i| i + 1)..];
    let near = near.to_ascii_lowercase();
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
    .any(|p| near.contains(p))
}

/// A `.pgpass` line's password, not the tail of a shadow row
/// (`root:*:19000:0:99999:7:::` has the same shape).
fn pgpass_value(caps: &Captures) -> bool {
    let v = value(caps);
    !v.bytes().all(|b| b.is_ascii_digit() || b == b':') && is_literal(v)
}

/// A chap-secrets row's secret: a literal that looks like one (the row's
/// shape, four words, is common).
fn chap_secret(caps: &Captures) -> bool {
    let quoted = caps.name("s1").is_some();
    pairs::is_secret_value(value(caps), quoted)
}

/// A value that is no reference, placeholder or mask (`$VAULT_TOKEN`,
/// `-pxxxxxxxx` as `ps` shows a password mysql overwrote).
fn literal_value(caps: &Captures) -> bool {
    is_literal(value(caps))
}

/// For assignments: a literal value, and an unquoted one that is neither
/// code nor prose: five words and more are a sentence, not a passphrase.
/// A literal a command line decodes, unless it is base64 of prose or JSON
/// (`ZGVwbG95IGZpbmlzaGVk…`, `eyJhbGciOiJSUzI1NiJ9`): what cannot be read
/// is taken for a secret.
fn decodes_to_a_secret(caps: &Captures) -> bool {
    let Some(text) = decode_base64(value(caps)) else {
        return true;
    };
    !commands::readable(text.trim())
}

/// A URL's password cut before its `@`: not a port.
fn cut_password(caps: &Captures) -> bool {
    !value(caps).bytes().all(|b| b.is_ascii_digit()) && literal_value(caps)
}

fn assigned_value(caps: &Captures) -> bool {
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
fn flag_value(caps: &Captures) -> bool {
    assigned_value(caps)
        && (caps.name("s3").is_none() || pairs::is_secret_value(value(caps), false))
}

/// For `key: value` lines: as `assigned_value`, but nsswitch.conf's
/// `passwd:   files systemd` names a database, not a password.
fn config_value(caps: &Captures) -> bool {
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
fn looks_like_code(v: &str) -> bool {
    v.contains(['(', ')', '[', '{', '`'])
        || ["::", "->", " = "].iter().any(|s| v.contains(s))
        || (v.contains('<') && v.contains('>'))
        || v.ends_with(';')
}

/// For environment variables: the name says secret, the value is literal,
/// and a lowercase name is a shell variable only after `export` and the
/// like (otherwise `db_password=x` is left to the `password` rule).
fn env_secret(caps: &Captures) -> bool {
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
fn secret_name(name: &str) -> bool {
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
fn credential_header(caps: &Captures) -> bool {
    let v = value(caps);
    is_literal(v)
        && (caps.name("scheme").is_some()
            || (v.len() >= 8 && v.bytes().any(|b| b.is_ascii_digit())))
}

/// Generated keys mix upper case, lower case and digits; names do not.
fn random_body(caps: &Captures) -> bool {
    let body = caps.name("body").map_or("", |m| m.as_str()).as_bytes();
    body.iter().any(u8::is_ascii_uppercase)
        && body.iter().any(u8::is_ascii_lowercase)
        && body.iter().any(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests;
