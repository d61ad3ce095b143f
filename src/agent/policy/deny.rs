//! The built-in rules for destructive commands, applied in every mode to
//! every command a line runs, wrappers taken off (`unwrap`), and to every
//! redirection: disk rewriters, writes to block devices and to the
//! account files, recursive deletes and permission changes of system
//! directories however spelled, power and init, killing every process,
//! fork bombs, and programs the agent cannot drive. Where an argument
//! that matters is not a literal, the rule denies: walissh cannot tell
//! that it is harmless. What it leaves to others: what may run unasked
//! (`auto`), the `[ai] deny` globs (`mod`).

use super::parse::Redirect;
use super::paths::{is_block_device, is_system_dir, normalise};
use super::unwrap::basename;
use super::word::Word;

/// Files the agent must never write.
const ACCOUNT_FILES: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/passwd",
    "/etc/group",
    "/etc/sudoers",
];

/// Whether writing `target` is destructive, and why.
fn bad_write(target: &str) -> Option<String> {
    let n = normalise(target);
    if is_block_device(&n) {
        return Some(format!("writes to the device {n}"));
    }
    if ACCOUNT_FILES.contains(&n.as_str()) || n.starts_with("/etc/sudoers.d/") {
        return Some(format!("writes {n}"));
    }
    if matches!(
        n.as_str(),
        "/proc/sysrq-trigger" | "/sys/power/state" | "/proc/sys/kernel/sysrq"
    ) {
        return Some(format!("writes {n}, which can stop the host"));
    }
    None
}

/// A redirection that writes somewhere destructive.
pub(crate) fn redirect(r: &Redirect) -> Option<String> {
    if !r.writes() || r.duplicates() {
        return None;
    }
    bad_write(r.target.as_ref()?.text())
}

/// The rule one command breaks, if any.
pub(crate) fn command(argv: &[Word]) -> Option<String> {
    let program = basename(argv.first()?.lit.as_deref()?);
    let args = &argv[1..];
    let vals: Vec<&str> = args.iter().map(Word::text).collect();
    match program {
        "rm" => rm(args, &vals),
        "chmod" | "chown" | "chgrp" | "setfacl" | "chattr" | "chcon" => {
            recursive_change(program, args, &vals)
        }
        "mv" => args
            .iter()
            .find(|w| w.lit.as_deref().is_some_and(is_system_dir))
            .map(|w| format!("moves the system directory {}", w.text()))
            .or_else(|| {
                let dest = vals.iter().rev().find(|v| !v.starts_with('-'))?;
                bad_write(dest).map(|why| format!("mv {why}"))
            }),
        "sed" | "perl"
            if vals
                .iter()
                .any(|v| v.starts_with("-i") || v.starts_with("--in-place")) =>
        {
            args.iter()
                .find_map(|w| bad_write(w.text()))
                .map(|why| format!("{program} -i {why}"))
        }
        "badblocks"
            if vals
                .iter()
                .any(|v| v.starts_with('-') && !v.starts_with("--") && v.contains(['w', 'n'])) =>
        {
            Some("badblocks -w/-n writes the disk".into())
        }
        "hdparm"
            if vals.iter().any(|v| {
                v.starts_with("--security-erase")
                    || matches!(
                        *v,
                        "--write-sector"
                            | "--trim-sector-ranges"
                            | "--fwdownload"
                            | "--make-bad-sector"
                    )
            }) =>
        {
            Some("hdparm erases or writes the disk".into())
        }
        "mdadm"
            if vals
                .iter()
                .any(|v| matches!(*v, "--zero-superblock" | "--create" | "-C")) =>
        {
            Some("mdadm destroys arrays".into())
        }
        "ipmitool"
            if vals
                .windows(2)
                .any(|w| w[0] == "power" && matches!(w[1], "off" | "reset" | "cycle" | "soft")) =>
        {
            Some("ipmitool power stops the host".into())
        }
        "busctl" | "dbus-send" | "gdbus"
            if vals.iter().any(|v| {
                [
                    "PowerOff",
                    "Reboot",
                    "Halt",
                    "KExec",
                    "Suspend",
                    "Hibernate",
                ]
                .iter()
                .any(|m| v.contains(m))
            }) =>
        {
            Some(format!("{program} asks logind to stop the host"))
        }
        p if p.starts_with("mkfs") || p.starts_with("mke2fs") || p.starts_with("mkdosfs") => {
            Some(format!("{p} rewrites disks"))
        }
        "mkswap" | "wipefs" | "blkdiscard" | "mkntfs" | "mkexfatfs" | "mklost+found"
        | "pvremove" | "vgremove" | "lvremove" | "lvreduce" | "killall5" | "kexec" | "rtcwake" => {
            Some(format!("{p} is destructive", p = program))
        }
        "shutdown" if !(vals == ["-c"] || vals == ["--show"]) => {
            Some("shutdown stops the host".into())
        }
        "reboot" | "halt" | "poweroff" => Some(format!("{program} stops the host")),
        "init" | "telinit"
            if vals
                .iter()
                .any(|v| !matches!(*v, "q" | "Q" | "u" | "U" | "--help")) =>
        {
            Some(format!("{program} changes the runlevel"))
        }
        "systemctl" => systemctl(&vals),
        "loginctl"
            if vals.iter().any(|v| {
                matches!(
                    *v,
                    "poweroff"
                        | "reboot"
                        | "halt"
                        | "suspend"
                        | "hibernate"
                        | "hybrid-sleep"
                        | "suspend-then-hibernate"
                        | "kexec"
                )
            }) =>
        {
            Some("loginctl stops the host".into())
        }
        "cryptsetup"
            if vals.iter().any(|v| {
                matches!(
                    *v,
                    "erase"
                        | "luksErase"
                        | "luksFormat"
                        | "reencrypt"
                        | "luksKillSlot"
                        | "luksRemoveKey"
                )
            }) =>
        {
            Some("cryptsetup destroys encrypted volumes".into())
        }
        "zpool" if vals.iter().any(|v| matches!(*v, "destroy" | "labelclear")) => {
            Some("zpool destroys a pool".into())
        }
        "zfs" if vals.contains(&"destroy") => Some("zfs destroys data".into()),
        "nvme" if vals.iter().any(|v| matches!(*v, "format" | "sanitize")) => {
            Some("nvme erases a disk".into())
        }
        "fdisk" | "sfdisk" | "sgdisk" | "gdisk" | "cfdisk" | "parted" | "partprobe"
            if !lists_only(program, &vals) =>
        {
            Some(format!("{program} rewrites partition tables"))
        }
        "dd" => args.iter().find_map(|w| {
            let target = w.text().strip_prefix("of=")?;
            match &w.lit {
                None => Some("dd writes to a file walissh cannot read literally".to_string()),
                Some(_) => bad_write(target).map(|why| format!("dd {why}")),
            }
        }),
        "tee" | "truncate" | "shred" | "sponge" => args
            .iter()
            .find_map(|w| bad_write(w.text()))
            .map(|why| format!("{program} {why}")),
        "cp" | "install" | "ln" | "rsync" => {
            let dest = vals.iter().rev().find(|v| !v.starts_with('-'))?;
            bad_write(dest).map(|why| format!("{program} {why}"))
        }
        "kill" => kill(args),
        "pkill" | "killall" | "skill"
            if vals
                .iter()
                .any(|v| matches!(*v, "." | ".*" | "^" | "" | "init" | "systemd" | "-1" | "1")) =>
        {
            Some(format!("{program} kills init or every process"))
        }
        "find" => find(args),
        // The agent cannot drive a full-screen program, and one left open
        // holds the user's shell.
        "vi" | "vim" | "nvim" | "view" | "nano" | "pico" | "emacs" | "joe" | "mcedit" | "ed"
        | "less" | "more" | "most" | "man" | "top" | "htop" | "atop" | "iotop" | "nmon"
        | "watch" | "tmux" | "screen" | "mc" | "vipw" | "sudoedit" => Some(format!(
            "{program} is interactive: the agent cannot drive it \
             (read with cat, head, tail or grep; top -bn1 for top)"
        )),
        _ => None,
    }
}

/// Recursive deletes of system directories, or of paths walissh cannot
/// read literally.
fn rm(args: &[Word], vals: &[&str]) -> Option<String> {
    if vals.iter().any(|v| v.starts_with("--no-pres")) {
        return Some("rm --no-preserve-root".into());
    }
    // `-r` and `-R`; `--r`, `--re`, `--rec`...: rm has no other long
    // option starting `--r`.
    recursive("delete", args, vals, &['r', 'R'], 3)
}

/// chmod, chown and the like: `-R`; `--rec` at least, since `--re` could
/// also be `--reference`.
fn recursive_change(program: &str, args: &[Word], vals: &[&str]) -> Option<String> {
    recursive(program, args, vals, &['R'], 5)
}

/// `what` done recursively (by one of `short`, or a prefix of
/// `--recursive` at least `min` long) to a system directory or to a path
/// that is not a plain literal.
fn recursive(
    what: &str,
    args: &[Word],
    vals: &[&str],
    short: &[char],
    min: usize,
) -> Option<String> {
    let recursive = vals.iter().take_while(|v| **v != "--").any(|v| {
        is_long_prefix(v, "recursive", min)
            || v.starts_with('-') && !v.starts_with("--") && v.contains(short)
    });
    if !recursive {
        return None;
    }
    operands(args).find_map(|w| match &w.lit {
        None => Some(format!(
            "recursive {what} of `{}`, a path walissh cannot read literally",
            w.raw
        )),
        Some(v) if is_system_dir(v) => Some(format!("recursive {what} of {v}")),
        Some(_) => None,
    })
}

/// Words that are not options (after `--`, everything).
fn operands(args: &[Word]) -> impl Iterator<Item = &Word> {
    let mut after = false;
    args.iter().filter(move |w| {
        if after {
            return true;
        }
        if w.text() == "--" {
            after = true;
            return false;
        }
        !w.text().starts_with('-') || w.lit.is_none()
    })
}

/// `--rec` for `--recursive`: GNU accepts any unambiguous prefix.
fn is_long_prefix(word: &str, long: &str, min: usize) -> bool {
    let Some(name) = word.strip_prefix("--") else {
        return false;
    };
    let name = name.split('=').next().unwrap_or(name);
    name.len() >= min && long.starts_with(name)
}

fn systemctl(vals: &[&str]) -> Option<String> {
    const STOPS: &[&str] = &[
        "poweroff",
        "reboot",
        "halt",
        "kexec",
        "suspend",
        "hibernate",
        "hybrid-sleep",
        "suspend-then-hibernate",
        "soft-reboot",
        "emergency",
        "rescue",
        "default",
        "isolate",
        "exit",
        "switch-root",
    ];
    if let Some(v) = vals.iter().find(|v| STOPS.contains(v)) {
        return Some(format!("systemctl {v} stops or changes the whole host"));
    }
    let starts = vals.iter().any(|v| {
        matches!(
            *v,
            "start"
                | "restart"
                | "try-restart"
                | "reload-or-restart"
                | "try-reload-or-restart"
                | "enable"
                | "reenable"
        )
    });
    let target = vals.iter().find(|v| v.ends_with(".target"));
    match (starts, target) {
        (true, Some(t)) => Some(format!(
            "systemctl starts {t}, which changes the whole host"
        )),
        _ => None,
    }
}

/// `kill` aimed at every process (`-1`), init (`1`) or the whole session
/// (`0`), in any spelling: `kill -9 -1`, `kill -s KILL -- -1`, `kill -KILL
/// -01`; or at a process walissh cannot read literally (`kill $(…)`).
fn kill(args: &[Word]) -> Option<String> {
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
        match v.trim_start_matches('+').parse::<i64>() {
            Ok(-1..=1) => Some(format!("kill {v} kills every process, init or the session")),
            _ => None,
        }
    })
}

/// `find ROOT … -delete`, or `-exec rm`, `shred`, `chmod` and the like,
/// under a system directory (or a root walissh cannot read literally):
/// find's own recursion makes them recursive.
fn find(args: &[Word]) -> Option<String> {
    const CHANGERS: &[&str] = &[
        "rm", "unlink", "shred", "truncate", "chmod", "chown", "chgrp", "mv", "setfacl", "chattr",
    ];
    let mut execs = args
        .windows(2)
        .filter(|w| matches!(w[0].text(), "-exec" | "-execdir" | "-ok" | "-okdir"));
    let changes = args.iter().any(|w| w.text() == "-delete")
        || execs.any(|w| CHANGERS.contains(&basename(w[1].text())));
    if !changes {
        return None;
    }
    args.iter()
        .take_while(|w| !w.text().starts_with('-') && !matches!(w.text(), "(" | "!"))
        .find(|w| w.lit.as_deref().is_none_or(is_system_dir))
        .map(|w| format!("find changes files under {}", w.raw))
}

/// Whether a partitioning tool is only asked to list.
fn lists_only(program: &str, vals: &[&str]) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(line: &str) -> Option<String> {
        let argv: Vec<Word> = line.split(' ').map(Word::new).collect();
        command(&argv)
    }

    #[test]
    fn destructive_families() {
        for line in [
            "rm -rf /",
            "rm -fr //",
            "rm -r -f /./etc",
            "rm --recursive /usr",
            "rm --rec /var",
            "rm -R /etc/..",
            "rm -rf /*",
            "rm -rf $DIR",
            "rm -rf ~",
            "rm --no-preserve-root -rf /",
            "chmod -R 777 /",
            "chmod --recursive 000 /etc",
            "chown -R nobody /usr/",
            "chgrp -hR x /var",
            "mkfs.ext4 /dev/sda1",
            "mkswap /dev/sdb",
            "wipefs -a /dev/sda",
            "sgdisk -Z /dev/sda",
            "sfdisk /dev/sda",
            "parted /dev/sda mklabel gpt",
            "fdisk /dev/sda",
            "cryptsetup luksFormat /dev/sdb",
            "cryptsetup erase /dev/sdb",
            "lvremove -f vg/lv",
            "vgremove vg",
            "dd if=/dev/zero of=/dev/nvme0n1",
            "dd of=/dev/mapper/root",
            "dd of=/dev/vg0/root",
            "tee /dev/sda",
            "tee -a /etc/passwd",
            "shutdown -h now",
            "reboot",
            "poweroff",
            "init 0",
            "telinit 6",
            "systemctl poweroff",
            "systemctl -i reboot",
            "systemctl soft-reboot",
            "systemctl isolate rescue.target",
            "systemctl start poweroff.target",
            "loginctl poweroff",
            "kill -9 -1",
            "kill -KILL -1",
            "kill -s KILL -- -1",
            "kill -- -1",
            "kill -9 1",
            "killall5 -9",
            "find / -delete",
            "vim /etc/hosts",
            "mv /etc /tmp/x",
        ] {
            assert!(denied(line).is_some(), "{line}");
        }
    }

    #[test]
    fn ordinary_commands_pass() {
        for line in [
            "rm -rf /tmp/build",
            "rm /etc/nginx/sites-enabled/old",
            "rm -f /etc",
            "chmod -R g+w /srv/app",
            "chmod 644 /etc/hosts",
            "dd if=/dev/sda of=/tmp/mbr bs=512 count=1",
            "fdisk -l",
            "sfdisk -l /dev/sda",
            "parted /dev/sda print",
            "parted -l",
            "sgdisk -p /dev/sda",
            "systemctl status reboot.target",
            "systemctl restart nginx",
            "kill -9 1234",
            "kill -HUP 4321",
            "kill -l",
            "shutdown -c",
            "find /tmp -delete",
            "tee /tmp/x",
        ] {
            assert_eq!(denied(line), None, "{line}");
        }
    }
}
