//! The jail's disk: its directories, files and stubs, and the real
//! shells copied in with their libraries.

use super::*;

/// Builds the jail under `root`; returns which shells it holds.
pub(super) fn build_jail(root: &Path, typed_rc: &str) -> io::Result<[bool; 3]> {
    let mode = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m));
    fs::create_dir(root)?;
    mode(root, 0o1777)?;
    for (path, writable) in DIRS {
        let p = root.join(path);
        fs::create_dir(&p)?;
        mode(&p, if *writable { 0o1777 } else { 0o755 })?;
    }
    for (link, to) in [
        ("bin", "usr/bin"),
        ("sbin", "usr/sbin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
        ("dev/fd", "/.oracle/proc/self/fd"),
        ("dev/stdin", "/.oracle/proc/self/fd/0"),
        ("dev/stdout", "/.oracle/proc/self/fd/1"),
        ("dev/stderr", "/.oracle/proc/self/fd/2"),
    ] {
        symlink(to, root.join(link))?;
    }
    for (path, content) in FILES {
        let p = root.join(path);
        fs::write(&p, content)?;
        mode(&p, 0o666)?;
    }
    let ro = |path: &str, content: &str, m: u32| -> io::Result<()> {
        let p = root.join(path);
        fs::write(&p, content)?;
        mode(&p, m)
    };
    ro(".oracle/bash.rc", &bash_rc(), 0o444)?;
    ro(".oracle/typed.rc", typed_rc, 0o444)?;
    ro("etc/zsh/zshenv", &zshenv(), 0o444)?;
    ro(".oracle/stub", &format!("{STUB_LOG}{STUB_TAIL}"), 0o555)?;
    ro(
        ".oracle/stub-bash",
        &format!("{STUB_LOG}{STUB_BASH_TAIL}"),
        0o555,
    )?;
    ro(
        ".oracle/stub-zsh",
        &format!("{STUB_LOG}{STUB_ZSH_TAIL}"),
        0o555,
    )?;
    let dash_tail = STUB_DASH_TAIL.replace(
        "pre=$(cat_preamble)",
        &format!("pre='{}'", dash_rc().replace('\'', r#"'\''"#)),
    );
    ro(
        ".oracle/stub-dash",
        &format!("{STUB_LOG}{dash_tail}"),
        0o555,
    )?;

    let mut shells = [false; 3];
    let mut libs = HashSet::new();
    for shell in Shell::ALL {
        let Some(exe) = find_program(shell.name()) else {
            continue;
        };
        let dest = root.join(".oracle/real").join(shell.name());
        copy_program(&exe, &dest)?;
        let Some(needed) = ldd(&exe) else { continue };
        libs.extend(needed);
        shells[shell.index()] = true;
    }
    if !shells[Shell::Dash.index()] {
        // The stubs are dash scripts: no dash, no oracle.
        shells = [false; 3];
    }
    for lib in libs {
        let dest = root.join(lib.strip_prefix("/").unwrap_or(&lib));
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)?;
        }
        copy_program(&lib, &dest)?;
    }
    let names: HashSet<&str> = STUBS.split_whitespace().collect();
    for dir in ["usr/bin", "usr/sbin"] {
        for name in &names {
            let stub = match *name {
                "bash" => "stub-bash",
                "zsh" => "stub-zsh",
                "sh" | "dash" => "stub-dash",
                _ => "stub",
            };
            fs::hard_link(root.join(".oracle").join(stub), root.join(dir).join(name))?;
        }
    }
    Ok(shells)
}

/// Copies a program or library into the jail, read-only. By `cp`, not
/// from this process: a descriptor open for writing here would be
/// inherited by the children other threads fork meanwhile (other
/// oracles' runs), and running the program while one of them still holds
/// it fails ("Text file busy").
pub(super) fn copy_program(from: &Path, to: &Path) -> io::Result<()> {
    let copied = std::process::Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()?;
    if !copied.success() {
        return Err(io::Error::other(format!("cp {} failed", from.display())));
    }
    fs::set_permissions(to, fs::Permissions::from_mode(0o555))
}

/// `name` on the usual system paths, resolved.
pub(super) fn find_program(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
}

/// The libraries (and loader) `ldd` lists for `exe`.
pub(super) fn ldd(exe: &Path) -> Option<Vec<PathBuf>> {
    let out = std::process::Command::new("ldd").arg(exe).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libs = Vec::new();
    for line in text.lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)"
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Some(libs)
}
