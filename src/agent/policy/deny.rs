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
use super::unwrap::{basename, find_roots};
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
    let n = system_path(target);
    let name = n.rsplit('/').next().unwrap_or(&n);
    // A relative path, or one that climbs, may land anywhere: judge it by
    // its name (`of=../../dev/sda`, `cd /dev && dd of=sda`).
    let unsure = !n.starts_with('/') || target.split('/').any(|c| c == "..");
    if unsure
        && (is_block_device(&format!("/dev/{name}"))
            || ACCOUNT_FILES
                .iter()
                .any(|f| f.ends_with(&format!("/{name}")))
            || matches!(name, "sysrq-trigger" | "sudoers" | "gshadow"))
    {
        return Some(format!(
            "writes {target}, which may be a disk or an account file"
        ));
    }
    if n.starts_with("/sys/") {
        return Some(format!("writes {n}: the kernel's devices and power"));
    }
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

/// `path` as the kernel would find it: normalised, `/proc/PID/root`
/// taken off (it is `/` again).
fn system_path(path: &str) -> String {
    let n = normalise(path);
    let parts: Vec<&str> = n.splitn(5, '/').collect();
    match parts.as_slice() {
        ["", "proc", _, "root"] => "/".into(),
        ["", "proc", _, "root", rest] => normalise(&format!("/{rest}")),
        _ => n,
    }
}

/// A write to a target that is not a plain literal, spelled to reach
/// system places (`> /dev/s[d]a`, `> /etc/shado?`): a glob or expansion
/// there can be any of them.
fn unsure_write(target: &Word) -> Option<String> {
    if target.lit.is_some() {
        return None;
    }
    let raw = target.raw.trim_start_matches(['"', '\'']);
    let system = ["/dev", "/etc", "/proc", "/sys", "/boot", "/"]
        .iter()
        .any(|p| raw.starts_with(p));
    let globbed = raw.contains(['*', '?', '[']);
    (system || globbed).then(|| {
        format!(
            "writes `{}`, a path walissh cannot read literally",
            target.raw
        )
    })
}

/// A redirection that writes somewhere destructive.
pub(crate) fn redirect(r: &Redirect) -> Option<String> {
    if !r.writes() || r.duplicates() {
        return None;
    }
    let target = r.target.as_ref()?;
    unsure_write(target).or_else(|| bad_write(target.text()))
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
        "mv" if args.iter().any(|w| {
            w.lit
                .as_deref()
                .is_some_and(|v| is_system_dir(&system_path(v)))
        }) =>
        {
            Some("mv moves a system directory".into())
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
                    "StartUnit",
                    "StopUnit",
                    "KillUnit",
                    "Isolate",
                    "SoftReboot",
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
        "cp" | "install" | "ln" | "mv" => copy_into(program, &vals),
        "kill" => kill(args),
        "pkill" | "killall" | "skill" | "snice" => mass_kill(program, &vals),
        "passwd"
            if vals
                .iter()
                .any(|v| matches!(*v, "-d" | "--delete" | "-u" | "-l" | "-e")) =>
        {
            Some("passwd removes or changes a password".into())
        }
        "usermod"
            if vals
                .iter()
                .any(|v| v.starts_with("-p") || v.starts_with("--password")) =>
        {
            Some("usermod sets a password".into())
        }
        "userdel" | "groupdel" if vals.iter().any(|v| matches!(*v, "root" | "0")) => {
            Some(format!("{program} removes root"))
        }
        "machinectl"
            if vals
                .iter()
                .any(|v| matches!(*v, "poweroff" | "reboot" | "kill" | "terminate")) =>
        {
            Some("machinectl stops machines".into())
        }
        "pvcreate" | "sg_format" | "dcfldd" | "ddrescue" | "dd_rescue" | "mkfs" | "zerofree"
        | "scrub" => Some(format!("{program} overwrites disks")),
        "zpool"
            if vals
                .iter()
                .any(|v| matches!(*v, "create" | "add" | "attach" | "replace" | "split")) =>
        {
            Some("zpool rewrites disks".into())
        }
        "mdadm"
            if vals.iter().any(|v| {
                matches!(
                    *v,
                    "--build" | "-B" | "--grow" | "-G" | "--fail" | "--remove"
                )
            }) =>
        {
            Some("mdadm rewrites arrays".into())
        }
        "debugfs"
            if vals
                .iter()
                .any(|v| v.starts_with('-') && !v.starts_with("--") && v.contains('w')) =>
        {
            Some("debugfs -w writes a filesystem".into())
        }
        "dmsetup"
            if vals.iter().any(|v| {
                matches!(
                    *v,
                    "remove_all" | "wipe_table" | "remove" | "clear" | "load" | "reload"
                )
            }) =>
        {
            Some("dmsetup removes or rewrites volumes".into())
        }
        "rsync" => {
            let deletes = vals
                .iter()
                .any(|v| v.starts_with("--del") || v.starts_with("--remove-source"));
            let deleted = args
                .iter()
                .filter(|w| !w.text().starts_with('-'))
                .find(|w| {
                    w.lit.as_deref().is_none_or(|v| {
                        is_system_dir(&system_path(v.trim_end_matches('/'))) || may_be_system(v)
                    })
                });
            match deleted {
                Some(w) if deletes => Some(format!("rsync deletes in {}", w.raw)),
                _ => copy_into(program, &vals),
            }
        }
        "tar" | "zip"
            if vals.iter().any(|v| {
                *v == "--remove-files" || program == "zip" && v.starts_with('-') && v.contains('m')
            }) =>
        {
            args.iter()
                .filter(|w| !w.text().starts_with('-'))
                .find(|w| {
                    w.lit
                        .as_deref()
                        .is_none_or(|v| is_system_dir(&system_path(v)) || may_be_system(v))
                })
                .map(|w| format!("{program} removes the files of {}", w.raw))
        }
        "sed" | "perl" | "ex" | "awk" | "gawk" => {
            in_place(program, args, &vals).or_else(|| interpreter_bomb(program, &vals))
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
        _ => cuts_off(program, &vals)
            .or_else(|| mass_delete(program, &vals))
            .or_else(|| interpreter_bomb(program, &vals))
            .or_else(|| device_operand(program, &vals)),
    }
}

/// Cutting the host off the network: firewall flushes and default
/// policies that drop, in every tool; links, routes and addresses taken
/// down or flushed.
fn cuts_off(program: &str, vals: &[&str]) -> Option<String> {
    let has = |w: &str| vals.contains(&w);
    let drops = vals.iter().any(|v| {
        let v = v.to_ascii_lowercase();
        v.contains("drop") || v.contains("reject") || v == "deny"
    });
    let cut = match program {
        "iptables" | "ip6tables" | "iptables-nft" | "ip6tables-nft" | "iptables-legacy"
        | "ip6tables-legacy" | "ebtables" | "arptables" => {
            let flush = vals.iter().any(|v| {
                *v == "--flush"
                    || *v == "--delete-chain"
                    || (v.starts_with('-') && !v.starts_with("--") && v.contains(['F', 'X']))
            });
            let policy = vals.iter().any(|v| {
                *v == "--policy" || (v.starts_with('-') && !v.starts_with("--") && v.contains('P'))
            });
            flush || policy && drops
        }
        "iptables-restore" | "ip6tables-restore" | "nft" => {
            has("flush")
                || (has("delete") && (has("table") || has("ruleset")))
                || drops
                || program != "nft"
        }
        "ufw" => has("disable") || has("reset") || (has("default") && drops),
        "firewall-cmd" => vals
            .iter()
            .any(|v| v.starts_with("--panic-on") || v.contains("drop")),
        "ip" => {
            has("down")
                || has("flush")
                || vals
                    .first()
                    .is_some_and(|v| "route".starts_with(v) || v.starts_with("ro"))
                    && vals
                        .iter()
                        .any(|v| matches!(*v, "del" | "delete" | "d" | "replace"))
        }
        "ifdown" | "ifconfig" if program == "ifdown" || has("down") => true,
        "nmcli" => has("off") || has("down") || has("disconnect") || has("delete"),
        "networkctl" => has("down") || has("delete"),
        "rfkill" => has("block"),
        _ => false,
    };
    cut.then(|| format!("{program} can cut the host off the network"))
}

/// Mass deletes through container, cluster and scheduler tools.
fn mass_delete(program: &str, vals: &[&str]) -> Option<String> {
    let has = |w: &str| vals.contains(&w);
    let all = vals.iter().any(|v| {
        matches!(*v, "--all" | "-A" | "--all-namespaces" | "--volumes")
            || (v.starts_with('-') && !v.starts_with("--") && v.contains('a') && v.len() <= 4)
    });
    let gone = match program {
        "docker" | "podman" | "nerdctl" => {
            has("prune") && (all || has("system") || has("volume"))
                || (has("rm") || has("rmi")) && all
        }
        "kubectl" | "oc" => {
            has("delete")
                && (all
                    || vals.iter().any(|v| {
                        matches!(
                            *v,
                            "ns" | "namespace"
                                | "namespaces"
                                | "node"
                                | "nodes"
                                | "no"
                                | "pv"
                                | "crd"
                                | "crds"
                        ) || v.starts_with("ns/")
                            || v.starts_with("namespace/")
                            || v.starts_with("node/")
                    }))
        }
        "helm" => has("uninstall") || has("delete"),
        "crontab" => vals.iter().any(|v| {
            *v == "--remove" || (v.starts_with('-') && !v.starts_with("--") && v.contains('r'))
        }),
        "lvremove" | "vgremove" => true,
        "ctr" | "crictl" => has("rm") || has("rmi") || has("prune"),
        _ => false,
    };
    gone.then(|| format!("{program} deletes in bulk"))
}

/// Fork bombs in an interpreter's one-liner: a fork in a loop.
fn interpreter_bomb(program: &str, vals: &[&str]) -> Option<String> {
    let interpreter = [
        "python", "perl", "ruby", "node", "php", "lua", "tclsh", "awk", "gawk",
    ]
    .iter()
    .any(|i| program.starts_with(i));
    let text = vals.join(" ");
    let looping = [
        "while",
        "for ",
        "loop",
        "iter(",
        "until",
        "repeat",
        "fork while",
    ]
    .iter()
    .any(|w| text.contains(w));
    (interpreter && text.contains("fork") && looping)
        .then(|| format!("{program} forks in a loop: a fork bomb's shape"))
}

/// Programs that only look at a block device; any other program given
/// one (as an operand, an option's value or after `=`) may write it
/// (`tar cf /dev/sda`, `sort -o /dev/sda`, `socat - /dev/sda`).
fn device_operand(program: &str, vals: &[&str]) -> Option<String> {
    const LOOKERS: &[&str] = &[
        // Their own rules judge what they do to a disk.
        "fdisk",
        "sfdisk",
        "sgdisk",
        "gdisk",
        "cfdisk",
        "parted",
        "partprobe",
        "badblocks",
        "mdadm",
        "nvme",
        "cryptsetup",
        "zpool",
        "debugfs",
        "dd",
        "tee",
        "truncate",
        "shred",
        "wipefs",
        "mkswap",
        "blkdiscard",
        "sg_format",
        "kpartx",
        "partx",
        "swapon",
        "swapoff",
        "lsblk",
        "blkid",
        "smartctl",
        "file",
        "stat",
        "ls",
        "udevadm",
        "mount",
        "umount",
        "findmnt",
        "df",
        "blockdev",
        "dumpe2fs",
        "xfs_info",
        "pvs",
        "lvs",
        "vgs",
        "pvdisplay",
        "lvdisplay",
        "vgdisplay",
        "fuser",
        "lsof",
        "e2label",
        "hdparm",
        "fsck",
        "e2fsck",
        "xfs_repair",
        "tune2fs",
        "dmsetup",
        "losetup",
        "eject",
        "iostat",
        "cat",
        "head",
        "tail",
        "grep",
        "od",
        "hexdump",
        "xxd",
        "strings",
        "wc",
        "cmp",
        "sudo",
        "doas",
        "echo",
        "printf",
        "test",
        "[",
        "readlink",
        "realpath",
        "basename",
        "dirname",
    ];
    if LOOKERS.contains(&program) {
        return None;
    }
    vals.iter()
        .map(|v| {
            let v = v.rsplit_once('=').map_or(*v, |(_, after)| after);
            v.strip_prefix("-o")
                .filter(|p| p.starts_with('/'))
                .unwrap_or(v)
        })
        .find(|v| v.starts_with('/') && is_block_device(v))
        .map(|v| format!("{program} is given the disk {v}, which it may write"))
}

/// Recursive deletes of system directories, or of paths walissh cannot
/// read literally.
fn rm(args: &[Word], vals: &[&str]) -> Option<String> {
    if vals.iter().any(|v| v.starts_with("--no-pres")) {
        return Some("rm --no-preserve-root".into());
    }
    // `-r` and `-R`; `--r`, `--re`, `--rec`...: rm has no other long
    // option starting `--r`.
    recursive("delete", args, vals, &['r', 'R'], 1)
}

/// chmod, chown and the like: `-R`; `--rec` at least, since `--re` could
/// also be `--reference`.
fn recursive_change(program: &str, args: &[Word], vals: &[&str]) -> Option<String> {
    recursive(program, args, vals, &['R'], 3)
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
        Some(v) if is_system_dir(&system_path(v)) => Some(format!("recursive {what} of {v}")),
        Some(v) if may_be_system(v) => Some(format!(
            "recursive {what} of {v}, which may be a system directory from where it runs"
        )),
        Some(_) => None,
    })
}

/// A path that climbs (`../../etc`, `/lib/../share` through the merged
/// `/usr` links), or a relative one that starts like a system directory
/// (`etc`, `usr/lib`) when the directory it is run from is not known.
fn may_be_system(path: &str) -> bool {
    let climbs = path.split('/').any(|c| c == "..");
    let first = path
        .split('/')
        .find(|c| !c.is_empty() && *c != ".")
        .unwrap_or("");
    climbs || !path.starts_with('/') && is_system_dir(&format!("/{first}")) && !first.is_empty()
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

/// `--rec` for `--recursive`: GNU accepts any unambiguous prefix; `min`
/// counts the letters after `--`.
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
    // Stopping or signalling the whole system: a target, every unit,
    // init itself.
    let stops = vals
        .iter()
        .any(|v| matches!(*v, "stop" | "kill" | "mask" | "freeze" | "clean"));
    let whole = vals.iter().find(|v| {
        v.ends_with(".target")
            || v.contains(['*', '?', '['])
            || matches!(
                **v,
                "init.scope" | "-.slice" | "system.slice" | "user.slice"
            )
    });
    if let (true, Some(w)) = (stops, whole) {
        return Some(format!("systemctl stops or signals {w}, the whole host"));
    }
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
        match v.trim().trim_start_matches('+').parse::<i64>() {
            Ok(-1..=1) => Some(format!("kill {v} kills every process, init or the session")),
            _ => None,
        }
    })
}

/// `find ROOT …` that changes what it finds under a system directory (or
/// a root walissh cannot read literally): `-delete`, or an `-exec` of
/// anything but a reader (find's own recursion makes it recursive); and
/// `-fprint FILE` and the like onto a disk or an account file.
fn find(args: &[Word]) -> Option<String> {
    /// Programs an `-exec` may run under `/` without changing anything.
    const READERS: &[&str] = &[
        "ls",
        "stat",
        "file",
        "grep",
        "egrep",
        "fgrep",
        "cat",
        "head",
        "tail",
        "wc",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "sha512sum",
        "du",
        "echo",
        "printf",
        "test",
        "[",
        "readlink",
        "realpath",
        "basename",
        "dirname",
    ];
    for w in args.windows(2) {
        if matches!(w[0].text(), "-fprint" | "-fprint0" | "-fprintf" | "-fls")
            && let Some(why) = unsure_write(&w[1]).or_else(|| bad_write(w[1].text()))
        {
            return Some(format!("find {}: {why}", w[0].text()));
        }
    }
    let mut execs = args
        .windows(2)
        .filter(|w| matches!(w[0].text(), "-exec" | "-execdir" | "-ok" | "-okdir"));
    let changes = args.iter().any(|w| w.text() == "-delete")
        || execs.any(|w| !READERS.contains(&basename(w[1].text())));
    if !changes {
        return None;
    }
    find_roots(args)
        .find(|w| {
            w.lit
                .as_deref()
                .is_none_or(|v| is_system_dir(&system_path(v)) || may_be_system(v))
        })
        .map(|w| format!("find changes files under {}", w.raw))
}

/// `cp`, `mv`, `install`, `ln`, `rsync` onto a disk or an account file:
/// the last operand, or `-t DIR`; into a directory, each source's name in
/// it (`cp /tmp/shadow /etc/`).
fn copy_into(program: &str, vals: &[&str]) -> Option<String> {
    let mut operands = Vec::new();
    let mut dir = None;
    let mut i = 0;
    while i < vals.len() {
        let v = vals[i];
        i += 1;
        if v == "-t" || v == "--target-directory" {
            dir = vals.get(i).copied();
            i += 1;
        } else if let Some(d) = v
            .strip_prefix("--target-directory=")
            .or_else(|| v.strip_prefix("-t").filter(|d| !d.is_empty()))
        {
            dir = Some(d);
        } else if !v.starts_with('-') {
            operands.push(v);
        }
    }
    let (sources, dest) = match dir {
        Some(d) => (operands.as_slice(), d),
        None => match operands.split_last() {
            Some((dest, sources)) => (sources, *dest),
            None => return None,
        },
    };
    let mut targets = vec![dest.to_string()];
    for source in sources {
        let name = source
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(source);
        targets.push(format!("{}/{name}", dest.trim_end_matches('/')));
    }
    targets
        .iter()
        .find_map(|t| bad_write(t))
        .map(|why| format!("{program} {why}"))
}

/// pkill and friends aimed at every process: a pattern that is a broad
/// regular expression, `-v`, root's processes, init.
fn mass_kill(program: &str, vals: &[&str]) -> Option<String> {
    let mut i = 0;
    while i < vals.len() {
        let v = vals[i];
        i += 1;
        match v {
            "-v" | "--inverse" | "-r" | "--regexp" if program != "skill" || v == "-v" => {
                return Some(format!("{program} {v} may match every process"));
            }
            "-u" | "-U" | "--uid" | "--euid" | "--user" | "-G" | "--group" | "-P" | "--parent"
            | "-s" | "--session" | "-t" | "--terminal" => {
                if vals.get(i).is_some_and(|u| {
                    u.split(',').any(|u| matches!(u, "root" | "0" | "1")) || program == "skill"
                }) {
                    return Some(format!(
                        "{program} {v} kills a whole user's or session's processes"
                    ));
                }
                i += 1;
            }
            v if v.starts_with('-') => {}
            pattern => {
                let broad = pattern.len() < 3
                    || pattern.contains([
                        '.', '*', '+', '?', '[', ']', '^', '$', '|', '(', ')', '{', '\\',
                    ])
                    || matches!(pattern, "init" | "systemd" | "sshd" | "kthreadd");
                if broad {
                    return Some(format!("{program} `{pattern}` may match every process"));
                }
            }
        }
    }
    None
}

/// In-place edits (`sed -i`, `sed -Ei`, `perl -pi`, `awk -i inplace`,
/// `ex`, `ed`) of the account files.
fn in_place(program: &str, args: &[Word], vals: &[&str]) -> Option<String> {
    let inplace = match program {
        "sed" | "perl" => vals.iter().any(|v| {
            v.starts_with("--in-place")
                || v.starts_with('-')
                    && !v.starts_with("--")
                    && v[1..].starts_with(|c: char| c.is_ascii_alphabetic())
                    && v.contains('i')
        }),
        "awk" | "gawk" => {
            vals.windows(2).any(|w| w[0] == "-i" && w[1] == "inplace")
                || vals.iter().any(|v| v.starts_with("--include=inplace"))
        }
        _ => true,
    };
    if !inplace {
        return None;
    }
    args.iter()
        .find_map(|w| bad_write(w.text()))
        .map(|why| format!("{program} {why}"))
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
