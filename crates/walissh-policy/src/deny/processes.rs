//! Killing every process (or init, or a whole user's), and taking root's
//! account away; partitioning tools that only list.

use super::*;

/// `kill` aimed at every process (`-1`), init (`1`) or the whole session
/// (`0`), in any spelling: `kill -9 -1`, `kill -s KILL -- -1`, `kill -KILL
/// -01`; or at a process walissh cannot read literally (`kill $(…)`).
pub(super) fn kill(args: &[Word]) -> Option<String> {
    let mut i = 0;
    // The first word may name the signal (`-9`, `-KILL`, `-s KILL`).
    match args.first().map(Word::text) {
        Some("-l" | "-L" | "--list" | "--table") => return None,
        Some("-s" | "-n" | "--signal") => i = 2,
        Some("--") => {}
        Some(v) if v.starts_with('-') => i = 1,
        _ => {}
    }
    let targets = args.get(i..).unwrap_or_default();
    targets.iter().filter(|w| w.text() != "--").find_map(|w| {
        let Some(v) = &w.lit else {
            return Some(format!(
                "kill of `{}`, a process walissh cannot read literally",
                w.raw
            ));
        };
        match v.trim().trim_start_matches('+').parse::<i64>() {
            Ok(-1..=1) => Some(format!("kill {v} kills every process, init or the session")),
            _ => None,
        }
    })
}

/// A `pkill -f` pattern found in nearly every process's command line
/// (`bin`, `usr`, `sh`): it matches the system's own.
pub(super) fn in_every_command_line(pattern: &str) -> bool {
    [
        "/usr/bin/",
        "/usr/sbin/",
        "/usr/lib/systemd/systemd",
        "/sbin/init",
        "/bin/bash",
        "sshd: root@",
    ]
    .iter()
    .any(|line| line.contains(pattern))
}

/// pkill and friends aimed at every process: a pattern that is a broad
/// regular expression or (with `-f`) found in every command line, `-v`,
/// root's processes (`-u0`, `--euid=0`, `--user=root`), init's children.
pub(super) fn mass_kill(program: &str, vals: &[&str]) -> Option<String> {
    const VALUED: &[&str] = &[
        "-u",
        "-U",
        "-G",
        "-P",
        "-s",
        "-t",
        "-g",
        "--uid",
        "--euid",
        "--user",
        "--group",
        "--parent",
        "--session",
        "--terminal",
        "--pgroup",
    ];
    let full = program == "pkill"
        && vals.iter().any(|v| {
            *v == "--full"
                || short_cluster(v)
                    .is_some_and(|c| c.chars().all(|c| c.is_ascii_lowercase()) && c.contains('f'))
        });
    let mut i = 0;
    while i < vals.len() {
        let v = vals[i];
        i += 1;
        let (name, attached) = match v.split_once('=') {
            Some((n, a)) if v.starts_with("--") => (n, Some(a)),
            // `-uroot`: an option and its value in one word (the first
            // two bytes, when they are a whole option: the word may be
            // any text, `-` and a multi-byte character among it).
            _ if v.len() > 2
                && !v.starts_with("--")
                && v.get(..2).is_some_and(|o| VALUED.contains(&o))
                && !v[2..].starts_with(|c: char| c.is_ascii_uppercase()) =>
            {
                (&v[..2], Some(&v[2..]))
            }
            _ => (v, None),
        };
        let signal = program == "killall" && matches!(name, "-s" | "--signal");
        match name {
            "-v" | "--inverse" | "-r" | "--regexp" if program != "skill" || v == "-v" => {
                return Some(format!("{program} {v} may match every process"));
            }
            _ if signal => i += usize::from(attached.is_none()),
            n if VALUED.contains(&n) => {
                let value = attached.or_else(|| {
                    i += 1;
                    vals.get(i - 1).copied()
                });
                if value.is_some_and(|u| {
                    u.split(',').any(|u| matches!(u, "root" | "0" | "1")) || program == "skill"
                }) {
                    return Some(format!(
                        "{program} {v} kills a whole user's or session's processes"
                    ));
                }
            }
            v if v.starts_with('-') => {}
            pattern => {
                let broad = pattern.len() < 3
                    || pattern.contains([
                        '.', '*', '+', '?', '[', ']', '^', '$', '|', '(', ')', '{', '\\',
                    ])
                    || matches!(pattern, "init" | "systemd" | "sshd" | "kthreadd")
                    || full && in_every_command_line(pattern);
                if broad {
                    return Some(format!("{program} `{pattern}` may match every process"));
                }
            }
        }
    }
    None
}

/// usermod setting a password, or locking, expiring, renaming, moving or
/// giving another shell or uid to root.
pub(super) fn usermod(vals: &[&str]) -> Option<String> {
    if vals
        .iter()
        .any(|v| v.starts_with("-p") || is_long_prefix(v, "password", 3))
    {
        return Some("usermod sets a password".into());
    }
    let changes_root = last_is_root(vals)
        && vals.iter().any(|v| {
            short_cluster(v)
                .is_some_and(|c| c.contains('L') || c.starts_with(['e', 'f', 's', 'l', 'u', 'd']))
                || [
                    "lock",
                    "expiredate",
                    "inactive",
                    "shell",
                    "login",
                    "uid",
                    "home",
                ]
                .iter()
                .any(|l| is_long_prefix(v, l, 2))
        });
    changes_root.then(|| "usermod locks, expires or changes root's account".into())
}

/// Whether a partitioning tool is only asked to list.
pub(super) fn lists_only(program: &str, vals: &[&str]) -> bool {
    let listing: &[&str] = match program {
        "fdisk" => &["-l", "--list", "-x", "--list-details"],
        "sfdisk" => &[
            "-l",
            "--list",
            "-d",
            "--dump",
            "-s",
            "--show-size",
            "-V",
            "--verify",
            "-J",
            "--json",
            "-g",
            "--show-geometry",
            "-F",
            "--list-free",
        ],
        "sgdisk" => &[
            "-p",
            "--print",
            "-v",
            "--verify",
            "-O",
            "--print-mbr",
            "-L",
            "--list-types",
        ],
        "gdisk" => &["-l"],
        "parted" => &["-l", "--list"],
        _ => &[],
    };
    let options_ok = vals
        .iter()
        .filter(|v| v.starts_with('-'))
        .all(|v| listing.contains(v) || matches!(*v, "-s" | "--script" | "-m" | "--machine"));
    let listed = vals.iter().any(|v| listing.contains(v));
    let parted_print = program == "parted"
        && vals.iter().any(|v| matches!(*v, "print" | "p"))
        && vals
            .iter()
            .filter(|v| !v.starts_with('-') && !v.starts_with("/dev/"))
            .all(|v| {
                matches!(
                    *v,
                    "print" | "p" | "unit" | "s" | "B" | "MiB" | "GiB" | "%" | "free"
                )
            });
    options_ok && (listed || parted_print)
}
