//! What a path is to the host: system directories and trees, the files it
//! cannot lose, disks, paths through `/proc`, paths walissh cannot read
//! literally.

use super::*;

/// `path` as the kernel would find it: normalised; `/proc/PID/root` and
/// `/proc/PID/task/TID/root` taken off (they are `/` again); and
/// `/proc/PID/cwd` made relative, since the directory another process
/// runs in is not known here (init's is `/`).
pub(super) fn system_path(path: &str) -> String {
    let mut n = normalise(path);
    loop {
        let parts: Vec<&str> = n.split('/').collect();
        let at = match parts.as_slice() {
            ["", "proc", _, "root" | "cwd", ..] => 3,
            ["", "proc", _, "task", _, "root" | "cwd", ..] => 5,
            _ => return n,
        };
        let rest = parts[at + 1..].join("/");
        n = match parts[at] {
            "root" => normalise(&format!("/{rest}")),
            _ => normalise(&rest),
        };
    }
}

/// A disk, a volume or raw memory (`paths::is_block_device`), ZFS
/// volumes (`/dev/zvol/POOL/…`) too.
pub(super) fn disk(path: &str) -> bool {
    is_block_device(path) || normalise(path).starts_with("/dev/zvol/")
}

/// Whether a bare name (a relative path's last part) could be a device
/// under `/dev`: a disk's name, without the dots and words of file names
/// (`sda1`, `nvme0n1p1`, `md0`, not `md5sums` or `root.tar`).
pub(super) fn device_name(name: &str) -> bool {
    let after_digit = name
        .find(|c: char| c.is_ascii_digit())
        .map_or("", |i| &name[i..]);
    let word_after = after_digit
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_alphabetic() && w[1].is_ascii_alphabetic());
    !name.contains('.') && !word_after && disk(&format!("/dev/{name}"))
}

/// `n` is `dir` or under it.
pub(super) fn under(n: &str, dir: &str) -> bool {
    n.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// `/lib64`, `/usr/lib`, `/usr/lib/x86_64-linux-gnu`: where the system's
/// shared libraries are.
pub(super) fn library_dir(dir: &str) -> bool {
    let parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    let lib = |p: &str| {
        p.strip_prefix("lib")
            .is_some_and(|s| matches!(s, "" | "32" | "64" | "x32"))
    };
    match parts.as_slice() {
        [l] | ["usr", l] => lib(l),
        [l, triplet] | ["usr", l, triplet] => lib(l) && triplet_name(triplet),
        _ => false,
    }
}

/// A multiarch directory's name (`x86_64-linux-gnu`), not a file's
/// (`ld-linux-x86-64.so.2`).
pub(super) fn triplet_name(name: &str) -> bool {
    name.contains("-linux") && !name.contains('.')
}

/// Directories below the top level whose loss stops the host booting,
/// running programs, installing packages or letting anyone log in: each
/// with everything under it.
pub(super) const VITAL_TREES: &[&str] = &[
    "/boot",
    "/lib/modules",
    "/usr/lib/modules",
    "/lib/systemd",
    "/usr/lib/systemd",
    "/var/lib/dpkg",
    "/var/lib/rpm",
    "/var/lib/pacman",
    "/var/spool/cron",
    "/etc/pam.d",
    "/etc/security",
    "/etc/sudoers.d",
    "/etc/ssh",
];

/// Directories that matter as a whole, while what is in them is the
/// admin's (`/etc/systemd/system/app.service.d`).
pub(super) const VITAL_DIRS: &[&str] = &[
    "/etc/systemd",
    "/etc/systemd/system",
    "/etc/network",
    "/etc/netplan",
    "/etc/NetworkManager",
    "/etc/sysconfig",
    "/etc/default",
    "/etc/alternatives",
    "/etc/ld.so.conf.d",
    "/etc/apt",
    "/etc/init.d",
    "/etc/selinux",
];

/// Whether a recursive delete, move or permission change of `n` (a
/// `system_path`) reaches the system: a top-level system directory
/// (`paths::is_system_dir`), a vital tree, or a library directory.
pub(super) fn system_tree(n: &str) -> bool {
    let parts: Vec<&str> = n.split('/').filter(|p| !p.is_empty()).collect();
    let in_libraries = (1..=parts.len().min(3))
        .any(|k| triplet_name(parts[k - 1]) && library_dir(&format!("/{}", parts[..k].join("/"))));
    is_system_dir(n)
        || library_dir(n)
        || in_libraries
        || VITAL_TREES.iter().any(|t| under(n, t))
        || VITAL_DIRS.contains(&n)
}

/// The dynamic loader and the C library, by name wherever they are
/// (`cd /lib64 && rm ld-linux-x86-64.so.2`).
pub(super) fn loader_or_libc(name: &str) -> Option<&'static str> {
    if name.starts_with("ld-linux") || name.starts_with("ld-musl") || name == "ld.so" {
        return Some("the dynamic loader every program starts through");
    }
    if name.starts_with("libc.so") || name.starts_with("libc-") && name.contains(".so") {
        return Some("the C library every program needs");
    }
    None
}

/// What `n` (a `system_path`) is, when overwriting it breaks the host:
/// the loader and the C library, kernels, the package database, what
/// every program preloads. (Account files and devices: `bad_write`.)
pub(super) fn core_file(n: &str) -> Option<&'static str> {
    let name = n.rsplit('/').next().unwrap_or(n);
    if let Some(what) = loader_or_libc(name) {
        return Some(what);
    }
    let kernel = ["vmlinuz", "vmlinux", "initrd", "initramfs", "bzImage"]
        .iter()
        .any(|k| name.starts_with(k));
    if under(n, "/boot") && kernel || under(n, "/boot/efi") {
        return Some("a kernel or the boot loader");
    }
    if n == "/var/lib/dpkg/status" || under(n, "/var/lib/rpm") {
        return Some("the package database");
    }
    if matches!(n, "/etc/ld.so.preload" | "/etc/ld.so.cache") {
        return Some("what every program loads");
    }
    None
}

/// What `n` (a `system_path`) is, when removing, truncating or moving it
/// away breaks the host: besides `core_file` and the account files, any
/// system library or program, anything under `/boot`, kernel modules,
/// crontabs, the package database, the login and boot configuration.
pub(super) fn vital_file(n: &str) -> Option<&'static str> {
    let (dir, name) = n.rsplit_once('/').unwrap_or((".", n));
    let dir = if dir.is_empty() { "/" } else { dir };
    if let Some(what) = core_file(n) {
        return Some(what);
    }
    if ACCOUNT_FILES.contains(&n) {
        return Some("an account file");
    }
    if system_library(n) {
        return Some("a system library");
    }
    if matches!(dir, "/bin" | "/sbin" | "/usr/bin" | "/usr/sbin") {
        return Some("a system program");
    }
    if under(n, "/var/spool/cron") {
        return Some("a crontab");
    }
    if VITAL_TREES.iter().any(|t| under(n, t)) && !name.contains("lock") {
        return Some("a file the host needs to boot, install or let anyone log in");
    }
    if matches!(
        n,
        "/etc/fstab" | "/etc/nsswitch.conf" | "/etc/ld.so.conf" | "/etc/inittab" | "/etc/crypttab"
    ) {
        return Some("a file the host needs to boot or let anyone log in");
    }
    None
}

/// A shared library in one of the system's library directories.
pub(super) fn system_library(n: &str) -> bool {
    n.rsplit_once('/')
        .is_some_and(|(dir, name)| library_dir(dir) && name.contains(".so"))
}

/// `/`, a top-level system directory or one of `/usr`'s program and
/// library directories: where a permission or owner change alone (no
/// `-R`) stops services or logins.
pub(super) fn core_dir(n: &str) -> bool {
    let parts: Vec<&str> = n.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        [] => true,
        [top] => matches!(
            *top,
            "bin"
                | "boot"
                | "dev"
                | "etc"
                | "home"
                | "lib"
                | "lib32"
                | "lib64"
                | "libx32"
                | "proc"
                | "root"
                | "run"
                | "sbin"
                | "sys"
                | "usr"
                | "var"
        ),
        ["usr", second] => matches!(
            *second,
            "bin" | "sbin" | "lib" | "lib32" | "lib64" | "libexec"
        ),
        _ => false,
    }
}

/// A path that climbs (`../../etc`, `/lib/../share` through the merged
/// `/usr` links), or a relative one that starts like a system directory
/// (`etc`, `usr/lib`) when the directory it is run from is not known.
pub(super) fn may_be_system(path: &str) -> bool {
    let climbs = path.split('/').any(|c| c == "..");
    let first = path
        .split('/')
        .find(|c| !c.is_empty() && *c != ".")
        .unwrap_or("");
    climbs || !path.starts_with('/') && is_system_dir(&format!("/{first}")) && !first.is_empty()
}

/// Whether the literal `v` is a system tree, or may be one from where it
/// runs.
pub(super) fn reaches_system(v: &str) -> bool {
    let n = system_path(v);
    system_tree(&n) || may_be_system(v) || !n.starts_with('/') && may_be_system(&n)
}

/// Why a recursive delete, move or change starting at the literal `v`
/// may reach the system, if it may: a system tree, a path that may be one
/// from where it runs, or `.` itself, since the directory a command runs
/// in is not known to walissh (`cd / && chmod -R 000 .`, `env -C /`).
pub(super) fn tree_at_risk(v: &str) -> Option<String> {
    let n = system_path(v);
    if n == "." {
        return Some(format!(
            "`{v}`: the directory it runs in is not known to walissh and may be /"
        ));
    }
    if system_tree(&n) {
        return Some(n);
    }
    reaches_system(v).then(|| format!("{v}, which may be a system directory from where it runs"))
}

/// A word that is not a plain literal, written to range over a system
/// directory (`/bin/*`, `/et?`, `/boot/vmlinuz-*`): the directory is the
/// literal part before the first expansion, up to its last `/`.
pub(super) fn unsure_in_system(w: &Word) -> bool {
    if w.lit.is_some() {
        return false;
    }
    let raw = w.raw.trim_start_matches(['"', '\'']);
    if !raw.starts_with('/') {
        return false;
    }
    let fixed = &raw[..raw
        .find(['*', '?', '[', '{', '$', '`', '\\', '"', '\''])
        .unwrap_or(raw.len())];
    let dir = match fixed.rsplit_once('/') {
        Some(("", _)) | None => "/",
        Some((dir, _)) => dir,
    };
    system_tree(&system_path(dir))
}

/// The arguments `xargs` adds from its input (`unwrap` stands them in as
/// one word that is not a literal): any file at all.
pub(super) fn from_input(w: &Word) -> bool {
    w.lit.is_none() && w.raw == "<input>"
}
