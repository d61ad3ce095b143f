//! The built-in rules for destructive commands, applied in every mode to
//! every command a line runs, wrappers taken off (`wrappers`), and to every
//! redirection: disk rewriters, writes to block devices and to the
//! account files, recursive deletes and permission changes of system
//! directories however spelled, the files the host cannot lose (the
//! dynamic loader, the C library, programs, kernels, crontabs), power and
//! init, cutting the host off the network, killing every process, fork
//! bombs, mass deletes of containers, clusters and essential packages,
//! and programs the agent cannot drive. Where an argument that matters is
//! not a literal, the rule denies: walissh cannot tell that it is
//! harmless. Commands an interpreter's code or a container runs are
//! judged as well. Each command is judged alone, so where the directory
//! it runs in matters (`cd / && find . -delete`), `.` is taken to be
//! anywhere. What it leaves to others: what may run unasked (`auto`), the
//! `[ai] deny` globs (`mod`).

use super::parse::Redirect;
use super::paths::{is_block_device, is_system_dir, normalise};
use super::word::Word;
use super::wrappers::{basename, find_roots, see};

mod bulk;
mod code;
mod files;
mod network;
mod places;
mod power;
mod processes;
mod refusals;
#[cfg(test)]
mod tests;

use bulk::*;
use code::*;
use files::*;
use network::*;
use places::*;
use power::*;
use processes::*;

/// Programs that only read what they are given and print: whatever their
/// operands name, they change nothing (a `find -exec` of one under `/`,
/// one given a disk).
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

/// Files the agent must never write.
const ACCOUNT_FILES: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/passwd",
    "/etc/group",
    "/etc/sudoers",
];

// ---------------------------------------------------------------------
// Writes.
// ---------------------------------------------------------------------

/// Whether writing `target` is destructive, and why.
fn bad_write(target: &str) -> Option<String> {
    let n = system_path(target);
    let name = n.rsplit('/').next().unwrap_or(&n);
    // A relative path, or one that climbs, may land anywhere: judge it by
    // its name (`of=../../dev/sda`, `cd /dev && dd of=sda`).
    let unsure = !n.starts_with('/') || target.split('/').any(|c| c == "..");
    if unsure
        && (device_name(name)
            || ACCOUNT_FILES
                .iter()
                .any(|f| f.ends_with(&format!("/{name}")))
            || matches!(name, "sysrq-trigger" | "sudoers" | "gshadow")
            || loader_or_libc(name).is_some())
    {
        return Some(format!(
            "writes {target}, whose name is a disk's, an account file's, the C library's \
             or the kernel's trigger, in a directory walissh cannot tell"
        ));
    }
    if n.starts_with("/sys/") {
        return Some(format!("writes {n}: the kernel's devices and power"));
    }
    if disk(&n) {
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
    core_file(&n).map(|what| format!("overwrites {n}, {what}"))
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
    (system || globbed || from_input(target)).then(|| {
        format!(
            "writes `{}`, a path walissh cannot read literally",
            target.raw
        )
    })
}

/// Either rule for a word a program writes.
fn bad_target(w: &Word) -> Option<String> {
    unsure_write(w).or_else(|| bad_write(w.text()))
}

/// A redirection that writes somewhere destructive.
pub(crate) fn redirect(r: &Redirect) -> Option<String> {
    if !r.writes() || r.duplicates() {
        return None;
    }
    bad_target(r.target.as_ref()?)
}

// ---------------------------------------------------------------------
// One command.
// ---------------------------------------------------------------------

/// The rule one command breaks, if any.
pub(crate) fn command(argv: &[Word]) -> Option<String> {
    command_at(argv, 0)
}

/// How deep commands inside commands (an interpreter's code, socat's
/// `EXEC:`, a container's command) are followed; deeper is refused: each
/// level may fan out, and the check must end in bounded time and stack.
const MAX_NESTED: usize = 4;

/// [`command`] for a command found `depth` levels inside another.
pub(super) fn command_at(argv: &[Word], depth: usize) -> Option<String> {
    if depth > MAX_NESTED {
        return Some("commands nested deeper than walissh checks".into());
    }
    let program = basename(argv.first()?.lit.as_deref()?);
    let args = &argv[1..];
    let vals: Vec<&str> = args.iter().map(Word::text).collect();
    let has = |w: &str| vals.contains(&w);
    // What needs no reading of its own is a table (`refusals`).
    if let Some(why) = refusals::refused(program, args) {
        return Some(why);
    }
    match program {
        "rm" => rm(args, &vals),
        "unlink" => removes(program, args),
        "chmod" | "chown" | "chgrp" | "setfacl" | "chattr" | "chcon" => {
            recursive(program, args, &vals, &['R'], 3).or_else(|| changes_core(program, args))
        }
        "mv" => moves(args).or_else(|| copy_into(program, args)),
        "ln" => relinks(args, &vals).or_else(|| copy_into(program, args)),
        "cp" | "install" => copy_into(program, args),
        "tee" | "sponge" => writes(program, args),
        "truncate" | "shred" => destroys(program, args),
        "dd" => args.iter().find_map(|w| {
            let target = w.text().strip_prefix("of=")?;
            match &w.lit {
                None => Some("dd writes to a file walissh cannot read literally".to_string()),
                Some(_) => bad_write(target).map(|why| format!("dd {why}")),
            }
        }),
        "find" => find(args),
        "rsync" => rsync(args, &vals),
        "tar" | "zip"
            if vals.iter().any(|v| {
                is_long_prefix(v, "remove-files", 3)
                    || program == "zip" && v.starts_with('-') && v.contains('m')
            }) =>
        {
            args.iter()
                .filter(|w| !w.text().starts_with('-'))
                .find(|w| w.lit.as_deref().is_none_or(reaches_system))
                .map(|w| format!("{program} removes the files of {}", w.raw))
        }
        "sed" | "perl" | "ex" | "awk" | "gawk" => in_place(program, args, &vals)
            .or_else(|| sed_writes(program, &vals))
            .or_else(|| interpreter(program, &vals, depth)),
        p if p.starts_with("xtables") && p.ends_with("-multi") => command(args),
        // Disks and volumes.
        p if p.starts_with("mkfs") || p.starts_with("mke2fs") || p.starts_with("mkdosfs") => {
            Some(format!("{p} rewrites disks"))
        }
        "badblocks"
            if vals
                .iter()
                .any(|v| v.starts_with('-') && !v.starts_with("--") && v.contains(['w', 'n'])) =>
        {
            Some("badblocks -w/-n writes the disk".into())
        }
        "hdparm" if hdparm_erases(&vals) => Some("hdparm erases or writes the disk".into()),
        "mdadm" if mdadm_destroys(&vals) => Some("mdadm destroys or degrades arrays".into()),
        "lvresize" if shrinks(&vals) => {
            Some("lvresize to a size that is not an increase may shrink a volume".into())
        }
        "fdisk" | "sfdisk" | "sgdisk" | "gdisk" | "cfdisk" | "parted" | "partprobe"
            if !lists_only(program, &vals) =>
        {
            Some(format!("{program} rewrites partition tables"))
        }
        "debugfs"
            if vals
                .iter()
                .any(|v| v.starts_with('-') && !v.starts_with("--") && v.contains('w')) =>
        {
            Some("debugfs -w writes a filesystem".into())
        }
        "umount" if unmounts_the_system(args, &vals) => {
            Some("umount takes away every filesystem, or the system's own".into())
        }
        "udevadm" if removes_devices(&vals) => {
            Some("udevadm trigger --action=remove takes the host's devices away".into())
        }
        "sysctl" => sysctl(&vals),
        // Power and init.
        "shutdown" if !(vals == ["-c"] || vals == ["--show"]) => {
            Some("shutdown stops the host".into())
        }
        "init" | "telinit"
            if vals
                .iter()
                .any(|v| !matches!(*v, "q" | "Q" | "u" | "U" | "--help")) =>
        {
            Some(format!("{program} changes the runlevel"))
        }
        "systemctl" => systemctl(&vals),
        "busctl" | "dbus-send" | "gdbus" | "mdbus2" => bus_call(program, &vals),
        p if p.starts_with("qdbus") => bus_call(program, &vals),
        "ipmitool"
            if has("raw")
                || vals.windows(2).any(|w| {
                    w[0] == "power" && matches!(w[1], "off" | "reset" | "cycle" | "soft" | "down")
                }) =>
        {
            Some("ipmitool power or raw commands can stop the host".into())
        }
        "modprobe"
            if vals.iter().any(|v| {
                is_long_prefix(v, "remove", 3) || short_cluster(v).is_some_and(|c| c.contains('r'))
            }) =>
        {
            Some("modprobe -r unloads drivers, the network's and the disks' among them".into())
        }
        // Processes.
        "kill" => kill(args),
        "pkill" | "killall" | "skill" | "snice" => mass_kill(program, &vals),
        // Accounts.
        "passwd"
            if vals.iter().any(|v| {
                matches!(*v, "-d" | "-u" | "-l" | "-e")
                    || ["delete", "unlock", "lock", "expire"]
                        .iter()
                        .any(|l| is_long_prefix(v, l, 1))
            }) =>
        {
            Some("passwd removes, locks or expires a password".into())
        }
        "usermod" => usermod(&vals),
        // chage of root with anything but listing.
        "chage"
            if last_is_root(&vals)
                && vals.iter().any(|v| {
                    v.starts_with('-') && !matches!(*v, "-l" | "--list" | "-i" | "--iso8601")
                }) =>
        {
            Some("chage changes when root's password or account expires".into())
        }
        // Packages.
        "dpkg" | "rpm" | "apt" | "apt-get" | "aptitude" | "yum" | "dnf" | "microdnf" | "zypper"
        | "pacman" | "apk" => removes_essentials(program, &vals),
        "socat" => socat(&vals, depth),
        _ => cuts_off(program, &vals)
            .or_else(|| mass_delete(program, args, &vals))
            .or_else(|| container_run(program, args, depth))
            .or_else(|| interpreter(program, &vals, depth))
            .or_else(|| outputs(program, &vals))
            .or_else(|| device_operand(program, &vals)),
    }
}

/// `-abc` as `abc`: a cluster of short options (not `--long`, not `-`).
fn short_cluster(v: &str) -> Option<&str> {
    v.strip_prefix('-')
        .filter(|c| !c.is_empty() && !c.starts_with('-'))
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

/// The words of `vals` that are not options nor the value of one of the
/// options in `valued` (given as a separate word); `-` is an operand.
fn plain_operands<'a>(vals: &[&'a str], valued: &[&str]) -> Vec<&'a str> {
    let mut skip = false;
    vals.iter()
        .copied()
        .filter(|v| {
            let value = std::mem::replace(&mut skip, valued.contains(v));
            !(value || v.starts_with('-') && v.len() > 1)
        })
        .collect()
}

/// Whether the last operand is root.
fn last_is_root(vals: &[&str]) -> bool {
    vals.last().is_some_and(|v| *v == "root")
}
