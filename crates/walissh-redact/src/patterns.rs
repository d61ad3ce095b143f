//! The redactor's own patterns, as data: the private keys first
//! (`KEYS`), then every other shape of secret (`SHAPES`), each with the
//! kind it reports and, where the pattern cannot say it alone, a check of
//! the match (`checks`).
//!
//! What it leaves to others: compiling and running them (`Redactor`).

use super::checks::*;
use super::*;

/// Decides whether one match really is a secret, for patterns that cannot
/// say it alone (a variable's name, a value that is a template).
pub(super) type Check = fn(&Captures) -> bool;

/// One kind of secret as a pattern: the kind it reports, and optionally a
/// check on the match.
///
/// What is replaced: the capture group named `s` (or `s1`, `s2`, … when
/// the pattern has alternatives) that took part in the match, or the whole
/// match when the pattern has no such group. Everything else the pattern
/// matched (a key name, a scheme, a delimiter) is kept.
pub(super) struct Pattern {
    pub(super) kind: &'static str,
    pub(super) regex: &'static str,
    pub(super) check: Option<Check>,
}

pub(super) const fn pattern(
    kind: &'static str,
    regex: &'static str,
    check: Option<Check>,
) -> Pattern {
    Pattern { kind, regex, check }
}

/// Private keys come first: a key block holds base64 that later patterns
/// would cut into pieces, and it must go whole: from its BEGIN line to its
/// END line. A `BEGIN` without its `END` (`head -5 key.pem`) takes the
/// lines of a key's shape after it (armour headers, base64, one blank line
/// between; lines apart, or `\n` in JSON), not what the text says after
/// them.
pub(super) const KEYS: &[Pattern] = &[
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
pub(super) const SHAPES: &[Pattern] = &[
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
