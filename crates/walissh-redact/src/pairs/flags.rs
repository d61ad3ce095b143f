//! Secrets on a command line: the flags and operands of known tools that
//! take one (`mysql -p…`, `curl -u user:pass`, `htpasswd -b file user
//! pass`), read off the line's words.
//!
//! What it leaves to others: `key: value` forms (`pairs`).

use super::*;

/// Tools and the flags that carry their password: `(tools, flags)`. A flag
/// of one dash and one letter also takes its value attached (`-pX`).
pub(super) const FLAGS: &[(&[&str], &[&str])] = &[
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
pub(super) fn operand_secrets(tool: &str, words: &[Word], out: &mut Vec<Range<usize>>) {
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
                    // The password ends at `@` or the word's end, found in
                    // the word as written (`r` is in the line, quotes and
                    // all), closing quotes left out.
                    if let Some(r) = rest_of_word(w, i + 1) {
                        let raw = &w.raw[w.raw.len() - r.len()..];
                        let raw = &raw[..raw.find('@').unwrap_or(raw.len())];
                        let end = raw.trim_end_matches(['\'', '"']).len();
                        out.push(r.start..r.start + end);
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
pub(super) struct Word {
    pub(super) text: String,
    pub(super) value: Range<usize>,
    /// The word as written, quotes and all, from `value.start`.
    pub(super) raw: String,
}

/// The span of `w` after its first `skip` bytes of text, as written:
/// quotes inside count as part of it. None when the word as written does
/// not begin with those characters (they were quoted apart).
pub(super) fn rest_of_word(w: &Word, skip: usize) -> Option<Range<usize>> {
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
pub(super) fn unwrap_substitutions(line: &str) -> String {
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
pub(super) fn words(line: &str) -> Vec<Word> {
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
pub(super) fn flag_secrets(
    tool: &str,
    flags: &[&str],
    words: &[Word],
    out: &mut Vec<Range<usize>>,
) {
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
pub(super) fn is_mysql_database(words: &[Word], flag: usize) -> bool {
    flag + 2 == words.len()
}
