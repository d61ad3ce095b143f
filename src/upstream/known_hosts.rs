//! What a target's host key is checked against: a `known_hosts` file, read
//! as OpenSSH reads it. Lines are parsed by `ssh-key`; this module matches
//! them: host patterns (`*`, `?`, `!` negation, `[host]:port`), hashed
//! names (`|1|salt|hash`, HMAC-SHA1), and the `@revoked` and
//! `@cert-authority` markers. What to do with the answer (the host key
//! policy, learning new keys) is `ssh`'s.
//!
//! A line that cannot be parsed is an error naming it: a file that pins or
//! revokes keys in a way walissh cannot read must not let a key through as
//! merely unknown.

use hmac::{KeyInit, Mac};
use russh::keys::PublicKey;
use russh::keys::ssh_key::known_hosts::{Entry, HostPatterns, Marker};

/// What the file says of a host's key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Known {
    /// A line for this host lists this key.
    Listed,
    /// A line for this host revokes this key (`@revoked`).
    Revoked,
    /// Lines for this host list other keys: of this key's algorithm when
    /// `same_algorithm`, else only of other algorithms.
    Other { same_algorithm: bool },
    /// No line lists a key for this host.
    Unknown,
}

/// Looks `key` up for `host` on `port` in a known_hosts file's text. Err
/// is the first line that cannot be read (1-based) and why.
pub(crate) fn look_up(
    text: &str,
    host: &str,
    port: u16,
    key: &PublicKey,
) -> Result<Known, (usize, String)> {
    let name = host_name(host, port);
    let (mut listed, mut same, mut other) = (false, false, false);
    for (i, line) in text.lines().enumerate() {
        // As ssh-key's own reader: a `#` starts a comment anywhere.
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let entry: Entry = line
            .parse()
            .map_err(|e: russh::keys::ssh_key::Error| (i + 1, e.to_string()))?;
        if !matches_host(entry.host_patterns(), &name) {
            continue;
        }
        let equal = entry.public_key().key_data() == key.key_data();
        match entry.marker() {
            Some(Marker::Revoked) if equal => return Ok(Known::Revoked),
            // A revoked other key says nothing of this one; walissh does not
            // take host certificates, so a CA's line pins nothing either.
            Some(_) => {}
            None if equal => listed = true,
            None if entry.public_key().algorithm() == key.algorithm() => same = true,
            None => other = true,
        }
    }
    Ok(match (listed, same, other) {
        (true, ..) => Known::Listed,
        (false, false, false) => Known::Unknown,
        (false, same_algorithm, _) => Known::Other { same_algorithm },
    })
}

/// The name a host is known by: `host`, or `[host]:port` off port 22.
fn host_name(host: &str, port: u16) -> String {
    match port {
        22 => host.to_ascii_lowercase(),
        _ => format!("[{}]:{port}", host.to_ascii_lowercase()),
    }
}

/// Whether a line's hosts take in `name`: a hashed name is the HMAC-SHA1
/// of the name under its salt; a list matches when a pattern does and no
/// negated pattern does.
fn matches_host(patterns: &HostPatterns, name: &str) -> bool {
    match patterns {
        HostPatterns::HashedName { salt, hash } => {
            let Ok(mut mac) = hmac::Hmac::<sha1::Sha1>::new_from_slice(salt) else {
                return false;
            };
            mac.update(name.as_bytes());
            mac.verify_slice(hash).is_ok()
        }
        HostPatterns::Patterns(list) => {
            let mut hit = false;
            for pattern in list {
                let pattern = pattern.to_ascii_lowercase();
                match pattern.strip_prefix('!') {
                    Some(negated) if glob(negated.as_bytes(), name.as_bytes()) => return false,
                    Some(_) => {}
                    None => hit |= glob(pattern.as_bytes(), name.as_bytes()),
                }
            }
            hit
        }
    }
}

/// OpenSSH's host glob: `*` any run, `?` any one byte. Greedy with one
/// backtrack point, so it takes at most pattern × name steps.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHMTPR0d+PrPU0WH3b7gJLajZMMutiK2XEYTom1UgY8S";
    const OTHER: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDzXFZHpOBgdiaJbXzyHmdz6KxgJEwq44X5sjdx5Fe1S";

    fn key() -> PublicKey {
        PublicKey::from_openssh(KEY).unwrap()
    }

    #[test]
    fn globs_match_as_openssh_does() {
        for (p, n, want) in [
            ("*", "web1", true),
            ("web?", "web1", true),
            ("web?", "web12", false),
            ("*.example.com", "a.b.example.com", true),
            ("*.example.com", "example.com", false),
            ("[10.0.0.*]:2222", "[10.0.0.7]:2222", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("", "", true),
            ("**", "x", true),
        ] {
            assert_eq!(glob(p.as_bytes(), n.as_bytes()), want, "{p} vs {n}");
        }
    }

    #[test]
    fn markers_patterns_and_negation() {
        let k = key();
        let at = |text: &str, host: &str, port: u16| look_up(text, host, port, &k).unwrap();
        assert_eq!(at(&format!("web1 {KEY}\n"), "web1", 22), Known::Listed);
        assert_eq!(at(&format!("WEB1 {KEY}\n"), "web1", 22), Known::Listed);
        assert_eq!(at(&format!("web1 {KEY}\n"), "web1", 2222), Known::Unknown);
        assert_eq!(
            at(&format!("[web1]:2222 {KEY}\n"), "web1", 2222),
            Known::Listed
        );
        assert_eq!(at(&format!("*,!web1 {KEY}\n"), "web1", 22), Known::Unknown);
        assert_eq!(at(&format!("*,!web2 {KEY}\n"), "web1", 22), Known::Listed);
        assert_eq!(
            at(&format!("web1 {OTHER}\n"), "web1", 22),
            Known::Other {
                same_algorithm: true
            }
        );
        let revoked = format!("web1 {KEY}\n@revoked * {KEY}\n");
        assert_eq!(at(&revoked, "web1", 22), Known::Revoked);
        let ca = format!("@cert-authority *.example.com {KEY}\n");
        assert_eq!(at(&ca, "a.example.com", 22), Known::Unknown);
        assert_eq!(at(&format!("# web1 {KEY}\n\n"), "web1", 22), Known::Unknown);
    }

    #[test]
    fn a_line_that_cannot_be_read_is_named() {
        let text = format!("web1 {KEY}\nweb2 ssh-ed25519 notbase64\n");
        let (line, _) = look_up(&text, "web1", 22, &key()).unwrap_err();
        assert_eq!(line, 2);
    }

    /// Hashed names and patterns, each judged by walissh and by OpenSSH's
    /// own `ssh-keygen -F` over the same file.
    #[test]
    fn hosts_match_as_ssh_keygen_finds_them() {
        let dir = tempfile::tempdir().unwrap();
        let lines = [
            "web1",
            "web?,!web3",
            "*.example.com,!bad.example.com",
            "[10.0.0.*]:2222",
            "db1,db2",
            "hashed.example.org",
        ];
        let plain: Vec<String> = lines.iter().map(|l| format!("{l} {KEY}")).collect();
        let path = dir.path().join("known_hosts");
        std::fs::write(&path, plain.join("\n") + "\n").unwrap();
        // Hash them all (ssh-keygen keeps patterns it cannot hash as they are).
        let hashed = std::process::Command::new("ssh-keygen")
            .arg("-H")
            .arg("-f")
            .arg(&path)
            .output()
            .unwrap();
        assert!(hashed.status.success(), "{hashed:?}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("|1|"), "nothing was hashed: {text}");
        let names = [
            ("web1", 22),
            ("web2", 22),
            ("web3", 22),
            ("web12", 22),
            ("a.example.com", 22),
            ("bad.example.com", 22),
            ("10.0.0.9", 2222),
            ("10.0.0.9", 22),
            ("db2", 22),
            ("db3", 22),
            ("hashed.example.org", 22),
            ("hashed.example.org", 2200),
        ];
        for (host, port) in names {
            let query = match port {
                22 => host.to_string(),
                _ => format!("[{host}]:{port}"),
            };
            let found = std::process::Command::new("ssh-keygen")
                .args(["-F", &query, "-f"])
                .arg(&path)
                .output()
                .unwrap();
            let openssh = found.status.success() && !found.stdout.is_empty();
            let ours = look_up(&text, host, port, &key()).unwrap() == Known::Listed;
            assert_eq!(
                ours, openssh,
                "{query}: walissh {ours}, ssh-keygen -F {openssh}"
            );
        }
    }
}
