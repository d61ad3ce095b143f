//! The approval policy for commands the agent proposes, enforced in code
//! on the parsed command line (see `shell`), never by asking the model.
//!
//! A command is denied when any of its parts, wherever it hides, matches a
//! built-in rule for destructive commands or an `[ai] deny` glob. In
//! `confirm` mode everything else asks the user. In `auto` mode a command
//! runs unasked only when every part is a known read-only program used in
//! a read-only way, with no redirection, substitution or anything the
//! parser could not take apart; all else asks.

use super::shell::{self, Line, Simple, basename, program_words};
use crate::config::AiMode;

/// What the policy says about a proposed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Never run, never offered; the reason goes back to the model.
    Deny(String),
    /// Show it and ask `Run? [y/N/e]`.
    Ask,
    /// Run without asking.
    Run,
}

pub(crate) struct Policy {
    deny: Vec<glob::Pattern>,
    /// `[ai] prefixes`: a command typed at the prompt that starts with one
    /// would be caught as a question instead of run.
    prefixes: Vec<String>,
}

/// System paths a recursive delete, chmod or chown must not touch.
const SYSTEM_DIRS: &[&str] = &[
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc",
    "/root", "/sbin", "/srv", "/sys", "/usr", "/var", "~", "$HOME", "*",
];

/// Files that must never be written by the agent.
const SENSITIVE_FILES: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/passwd",
    "/etc/group",
    "/etc/sudoers",
];

impl Policy {
    /// `deny` are the `[ai] deny` globs (validated by the config).
    pub(crate) fn new(deny: &[String], prefixes: &[String]) -> Policy {
        Policy {
            deny: deny
                .iter()
                .filter_map(|d| glob::Pattern::new(d).ok())
                .collect(),
            prefixes: prefixes.to_vec(),
        }
    }

    pub(crate) fn check(&self, command: &str, mode: AiMode) -> Verdict {
        if mode == AiMode::Off {
            return Verdict::Deny("the agent is off for this user".into());
        }
        if let Some(why) = shell::typing_problem(command) {
            return Verdict::Deny(why.into());
        }
        if self
            .prefixes
            .iter()
            .any(|p| command.starts_with(p.as_str()))
        {
            return Verdict::Deny("it starts like a question to the agent".into());
        }
        let line = shell::parse(command);
        if let Some(why) = self.denied(command, &line) {
            return Verdict::Deny(why);
        }
        let read_only = !line.opaque
            && !line.substitutes
            && !line.redirects
            && !line.commands.is_empty()
            && line.commands.iter().all(read_only);
        match (mode, read_only) {
            (AiMode::Auto, true) => Verdict::Run,
            _ => Verdict::Ask,
        }
    }

    fn denied(&self, command: &str, line: &Line) -> Option<String> {
        let defines_function = command.contains("(){") || command.contains("() {");
        if line.opaque && defines_function && command.contains('|') && command.contains('&') {
            return Some("looks like a fork bomb".into());
        }
        for pattern in &self.deny {
            if pattern.matches(command.trim()) {
                return Some(format!("matches the deny rule `{pattern}`"));
            }
        }
        for simple in &line.commands {
            let text = simple.words.join(" ");
            for pattern in &self.deny {
                if pattern.matches(&text) {
                    return Some(format!("`{text}` matches the deny rule `{pattern}`"));
                }
            }
            if let Some(why) = builtin_rule(simple) {
                return Some(why);
            }
        }
        None
    }
}

/// The built-in rules for destructive commands.
fn builtin_rule(simple: &Simple) -> Option<String> {
    for (op, target) in &simple.redirects {
        let writes = op.contains('>');
        if writes && (SENSITIVE_FILES.contains(&target.as_str()) || is_disk(target)) {
            return Some(format!("writes to {target}"));
        }
    }
    let words = program_words(&simple.words);
    let program = basename(words.first()?);
    let args = &words[1..];
    let flag = |short: char, long: &str| {
        args.iter().any(|a| {
            a == long || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains(short))
        })
    };
    let system_target = || args.iter().find(|a| is_system_path(a)).cloned();
    match program {
        "rm" if args.iter().any(|a| a == "--no-preserve-root") => {
            Some("rm --no-preserve-root".to_string())
        }
        "rm" if flag('r', "--recursive") || flag('R', "--recursive") => {
            system_target().map(|t| format!("recursive delete of {t}"))
        }
        "chmod" | "chown" | "chgrp" if flag('R', "--recursive") => {
            system_target().map(|t| format!("recursive {program} of {t}"))
        }
        p if p.starts_with("mkfs")
            || matches!(
                p,
                "mke2fs" | "mkswap" | "wipefs" | "sfdisk" | "fdisk" | "parted" | "blkdiscard"
            ) =>
        {
            Some(format!("{p} rewrites disks"))
        }
        "dd" if args
            .iter()
            .any(|a| a.strip_prefix("of=").is_some_and(is_disk)) =>
        {
            Some("dd onto a device".to_string())
        }
        "shutdown" | "reboot" | "halt" | "poweroff" => Some(format!("{program} stops the host")),
        "init" | "telinit" if args.iter().any(|a| a == "0" || a == "6") => {
            Some(format!("{program} {} stops the host", args.join(" ")))
        }
        "systemctl"
            if args.iter().any(|a| {
                matches!(
                    a.as_str(),
                    "poweroff"
                        | "reboot"
                        | "halt"
                        | "kexec"
                        | "suspend"
                        | "hibernate"
                        | "emergency"
                        | "rescue"
                )
            }) =>
        {
            Some("systemctl stops the host".to_string())
        }
        "kill" | "pkill" | "killall" if args.iter().any(|a| a == "1" || a == "-1") => {
            Some("kills init or every process".to_string())
        }
        // The agent cannot drive a full-screen program, and one left open
        // holds the user's shell.
        "vi" | "vim" | "nvim" | "view" | "nano" | "pico" | "emacs" | "joe" | "mcedit" | "ed"
        | "less" | "more" | "most" | "man" | "top" | "htop" | "atop" | "iotop" | "nmon"
        | "watch" | "tmux" | "screen" | "mc" => Some(format!(
            "{program} is interactive: the agent cannot drive it \
             (read with cat, head, tail or grep; top -bn1 for top)"
        )),
        "tee" | "cp" | "mv" | "install" | "ln" | "truncate" | "shred" => args
            .iter()
            .find(|a| SENSITIVE_FILES.contains(&a.as_str()) || is_disk(a))
            .map(|t| format!("{program} writes {t}")),
        _ => None,
    }
}

/// Files whose content is a secret: shadow files, SSH and TLS private keys,
/// credential files, environments of processes.
fn is_secret(arg: &str) -> bool {
    let name = basename(arg);
    let ssh = (arg.contains("/.ssh/") || arg.starts_with(".ssh/")) && !name.ends_with(".pub");
    SENSITIVE_FILES[..2].contains(&arg)
        || ssh
        || name.starts_with("id_") && !name.ends_with(".pub")
        || name.ends_with(".key")
        || name.ends_with(".pem")
        || matches!(
            name,
            ".env" | ".netrc" | ".pgpass" | ".my.cnf" | "credentials" | "environ" | "shadow"
        )
}

fn is_system_path(arg: &str) -> bool {
    let trimmed = arg.trim_end_matches('/');
    let trimmed = trimmed.strip_suffix("/*").unwrap_or(trimmed);
    let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
    SYSTEM_DIRS.contains(&trimmed)
}

fn is_disk(path: &str) -> bool {
    [
        "/dev/sd",
        "/dev/hd",
        "/dev/vd",
        "/dev/xvd",
        "/dev/nvme",
        "/dev/mmcblk",
        "/dev/mapper/",
        "/dev/mem",
        "/dev/kmem",
        "/dev/disk/",
    ]
    .iter()
    .any(|p| path.starts_with(p))
}

/// Whether a simple command is a read-only program used read-only.
fn read_only(simple: &Simple) -> bool {
    let words = program_words(&simple.words);
    if words.len() != simple.words.len() {
        // sudo, env, xargs... change who runs what: ask.
        return false;
    }
    let Some(program) = words.first().map(|w| w.as_str()) else {
        return false;
    };
    let args = &words[1..];
    let has = |opts: &[&str]| {
        args.iter().any(|a| {
            opts.iter()
                .any(|o| a == o || a.starts_with(&format!("{o}=")))
        })
    };
    if args.iter().any(|a| is_secret(a)) {
        // Reading it is harmless to the host, not to the secret: what a
        // command prints goes to the model's provider. Ask.
        return false;
    }
    // A short option in a cluster (`-tK`) or alone.
    let short = |c: char| {
        args.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].contains(c))
    };
    match program {
        "ls" | "cat" | "head" | "tail" | "grep" | "egrep" | "fgrep" | "zgrep" | "wc" | "df"
        | "du" | "free" | "uptime" | "uname" | "id" | "whoami" | "groups" | "ps" | "pgrep"
        | "pstree" | "stat" | "file" | "pwd" | "echo" | "which" | "type" | "lsblk" | "lscpu"
        | "lsmem" | "nproc" | "netstat" | "w" | "who" | "last" | "getent" | "cut" | "host"
        | "dig" | "nslookup" | "vmstat" | "iostat" | "mpstat" | "lsof" | "md5sum" | "sha256sum"
        | "readlink" | "realpath" | "basename" | "dirname" | "true" | "false" => true,
        // `-v` assigns, and bash evaluates array subscripts in the name:
        // `printf -v 'a[$(cmd)]'` runs cmd.
        "printf" | "test" => !args.iter().any(|a| a == "-v"),
        // With an operand, or -F/-b, hostname sets the host's name.
        "hostname" => args.iter().all(|a| {
            a.starts_with('-') && !matches!(a.as_str(), "-F" | "--file" | "-b" | "--boot")
        }),
        // `date -s` and `date MMDDhhmm` set the clock; `+FORMAT` only prints.
        "date" => {
            !has(&["-s", "--set"])
                && !short('s')
                && args
                    .iter()
                    .all(|a| a.starts_with('-') || a.starts_with('+'))
        }
        // `ss -K` kills the sockets it lists.
        "ss" => !has(&["--kill"]) && !short('K'),
        "sort" => !has(&["-o", "--output"]),
        "uniq" => args.iter().filter(|a| !a.starts_with('-')).count() <= 1,
        "dmesg" => !has(&[
            "-c",
            "-C",
            "-D",
            "-E",
            "-n",
            "--clear",
            "--read-clear",
            "--console-off",
            "--console-on",
            "--console-level",
        ]),
        "journalctl" => !args.iter().any(|a| {
            a.starts_with("--vacuum")
                || matches!(
                    a.as_str(),
                    "--rotate"
                        | "--flush"
                        | "--sync"
                        | "--relinquish-var"
                        | "--smart-relinquish-var"
                        | "--setup-keys"
                        | "--update-catalog"
                )
        }),
        "systemctl" => args
            .iter()
            .find(|a| !a.starts_with('-'))
            .is_some_and(|verb| {
                matches!(
                    verb.as_str(),
                    "status"
                        | "show"
                        | "cat"
                        | "list-units"
                        | "list-unit-files"
                        | "list-timers"
                        | "list-sockets"
                        | "is-active"
                        | "is-enabled"
                        | "is-failed"
                )
            }),
        "ip" => !args.iter().any(|a| {
            matches!(
                a.as_str(),
                "add"
                    | "del"
                    | "delete"
                    | "set"
                    | "flush"
                    | "change"
                    | "replace"
                    | "append"
                    | "prepend"
                    | "exec"
                    | "up"
                    | "down"
            )
        }),
        "find" => !has(&[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
            "-fls",
        ]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(cmd: &str, mode: AiMode) -> Verdict {
        let deny = ["*curl*|*sh".to_string(), "iptables -F*".to_string()];
        Policy::new(&deny, &["?".to_string()]).check(cmd, mode)
    }

    fn denied(cmd: &str) -> bool {
        matches!(verdict(cmd, AiMode::Auto), Verdict::Deny(_))
    }

    #[test]
    fn destructive_commands_are_denied_wherever_they_hide() {
        for cmd in [
            "rm -rf /",
            "rm -fr /*",
            "sudo rm -r --no-preserve-root /",
            "ls; rm -rf /etc",
            "true && rm -Rf /usr/",
            "echo $(rm -rf /var)",
            "echo `rm -rf ~`",
            "cat x | sh -c 'rm -rf /'",
            "find / -name x | xargs rm -rf /",
            "mkfs.ext4 /dev/sda1",
            "dd if=/dev/zero of=/dev/sda bs=1M",
            "shutdown -h now",
            "systemctl reboot",
            "init 0",
            "chmod -R 777 /",
            "chown -R nobody /",
            "echo x > /etc/shadow",
            "echo root::0:0::/:/bin/sh | tee -a /etc/passwd",
            ":(){ :|:& };:",
            "? why",
            "ls\nrm -rf /tmp/x",
            "echo !!",
            "kill -9 -1",
            "iptables -F INPUT",
            "vim /etc/hosts",
            "journalctl -u x | less",
            "sudo top",
        ] {
            assert!(denied(cmd), "{cmd} was not denied");
        }
    }

    #[test]
    fn ordinary_commands_are_not_denied() {
        for cmd in [
            "rm -rf /tmp/build",
            "rm /etc/nginx/sites-enabled/old",
            "ls -la /",
            "chmod -R g+w /srv/app",
            "dd if=/dev/sda of=/tmp/mbr bs=512 count=1",
        ] {
            assert!(!denied(cmd), "{cmd} was denied");
        }
    }

    #[test]
    fn auto_runs_only_read_only_commands() {
        for cmd in [
            "ls -la /var/log",
            "df -h; free -m",
            "ps aux | grep nginx | head -5",
            "systemctl status nginx",
            "journalctl -u nginx -n 50",
            "ip addr show",
            "find /var/log -name '*.gz'",
            "tail -n 100 /var/log/syslog 2>/dev/null",
            "date +%s",
            "hostname -f",
            "ss -tlnp",
            "printf '%s\\n' x",
            "cat ~/.ssh/id_ed25519.pub",
        ] {
            assert_eq!(verdict(cmd, AiMode::Auto), Verdict::Run, "{cmd}");
        }
        for cmd in [
            "ls > /tmp/x",
            "echo $(id)",
            "systemctl restart nginx",
            "sudo ls",
            "find / -delete",
            "sort -o out in",
            "curl http://x",
            "ip route add 10.0.0.0/8 dev eth0",
            "printf -v 'a[$(id)]' x",
            "test -v 'a[$(id)]'",
            "hostname evil",
            "date -s 2020-01-01",
            "date 01010000",
            "ss -tK dst 10.0.0.1",
            "cat /etc/shadow",
            "head ~/.ssh/id_ed25519",
            "cat /srv/app/.env",
            "cat /proc/1/environ",
            "printenv",
        ] {
            assert_eq!(verdict(cmd, AiMode::Auto), Verdict::Ask, "{cmd}");
        }
    }

    #[test]
    fn confirm_asks_and_off_refuses() {
        assert_eq!(verdict("ls", AiMode::Confirm), Verdict::Ask);
        assert!(matches!(verdict("ls", AiMode::Off), Verdict::Deny(_)));
    }
}
