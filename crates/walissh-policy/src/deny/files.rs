//! Deletes, moves, links, copies and permission changes of what the host
//! cannot lose, recursive or not, and `find` that changes what it finds.

use super::*;

/// Recursive deletes of system directories, or of paths walissh cannot
/// read literally; and files the host cannot lose, one by one.
pub(super) fn rm(args: &[Word], vals: &[&str]) -> Option<String> {
    if vals.iter().any(|v| v.starts_with("--no-pres")) {
        return Some("rm --no-preserve-root".into());
    }
    // `-r` and `-R`; `--r`, `--re`, `--rec`...: rm has no other long
    // option starting `--r`.
    recursive("delete", args, vals, &['r', 'R'], 1).or_else(|| removes("rm", args))
}

/// Files removed one by one: a file the host cannot lose (`vital_file`),
/// or a pattern over a system directory (`rm -f /bin/*`).
pub(super) fn removes(program: &str, args: &[Word]) -> Option<String> {
    operands(args).find_map(|w| match &w.lit {
        None if unsure_in_system(w) => Some(format!(
            "{program} `{}`: a pattern over a system directory",
            w.raw
        )),
        None => None,
        Some(v) => {
            let n = system_path(v);
            vital_file(&n).map(|what| format!("{program} removes {n}, {what}"))
        }
    })
}

/// `what` done recursively (by one of `short`, or a prefix of
/// `--recursive` at least `min` long) to a system tree, to `.`, or to a
/// path that is not a plain literal.
pub(super) fn recursive(
    what: &str,
    args: &[Word],
    vals: &[&str],
    short: &[char],
    min: usize,
) -> Option<String> {
    let recursive = vals.iter().take_while(|v| **v != "--").any(|v| {
        is_long_prefix(v, "recursive", min) || short_cluster(v).is_some_and(|c| c.contains(short))
    });
    if !recursive {
        return None;
    }
    operands(args).find_map(|w| match &w.lit {
        None => Some(format!(
            "recursive {what} of `{}`, a path walissh cannot read literally",
            w.raw
        )),
        // rm refuses to remove `.` itself (what `find . -exec rm -rf {} +`
        // reads as); what is in it is a glob, not a literal.
        Some(v) if what == "delete" && system_path(v) == "." => None,
        Some(v) => tree_at_risk(v).map(|r| format!("recursive {what} of {r}")),
    })
}

/// chmod and chown without `-R` of `/`, a top-level system directory or
/// the loader and libraries, when the change locks others out: a mode
/// that takes away search (`chmod 000 /`, `chmod 0 /usr`) or, for a file,
/// read or execute; an owner that is not root (`chown nobody /`).
pub(super) fn changes_core(program: &str, args: &[Word]) -> Option<String> {
    if !matches!(program, "chmod" | "chown") {
        return None;
    }
    let mut words = args.iter().filter(|w| {
        let v = w.text();
        // chmod's `-x`, `-rwx` are modes, not options.
        !(v.starts_with("--")
            || short_cluster(v).is_some_and(|c| c.chars().all(|c| "Rcfvh".contains(c))))
    });
    let change = words.next()?.lit.clone()?;
    words.find_map(|w| {
        let Some(v) = &w.lit else {
            return unsure_in_system(w).then(|| {
                format!(
                    "{program} {change} of `{}`, which may be a system directory",
                    w.raw
                )
            });
        };
        let n = system_path(v);
        let dir = core_dir(&n) && n != "/root";
        let file =
            loader_or_libc(n.rsplit('/').next().unwrap_or(&n)).is_some() || system_library(&n);
        let locks = match program {
            "chmod" => (dir || file) && locks_out(&change, file),
            _ => {
                dir && change
                    .split([':', '.'])
                    .next()
                    .is_some_and(|u| !matches!(u, "" | "root" | "0"))
            }
        };
        locks.then(|| format!("{program} {change} {n} locks services and logins out of it"))
    })
}

/// Whether a chmod mode leaves others without search on a directory, or
/// without read or execute on a file (octal or symbolic).
pub(super) fn locks_out(mode: &str, file: bool) -> bool {
    let needed: &[char] = if file { &['r', 'x'] } else { &['x'] };
    if !mode.is_empty() && mode.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        let others = mode.bytes().last().map_or(0, |b| b - b'0');
        let lacks_x = others & 1 == 0;
        let lacks_r = others & 4 == 0;
        return lacks_x || file && lacks_r;
    }
    mode.split(',').any(|clause| {
        let Some(at) = clause.find(['+', '-', '=']) else {
            return false;
        };
        let (who, rest) = clause.split_at(at);
        let reaches_others = who.is_empty() || who.contains(['o', 'a']);
        let perms = &rest[1..];
        reaches_others
            && match rest.as_bytes()[0] {
                b'-' => perms.contains(needed),
                b'=' => needed.iter().any(|c| !perms.contains(*c)),
                _ => false,
            }
    })
}

/// The sources and the destination of `cp`, `mv`, `ln`, `install` and
/// `rsync`: the last operand, or the directory of `-t DIR`
/// (`--target-directory`, any prefix, `=` or attached), the values of
/// `-S SUFFIX` and of install's `-m`, `-o`, `-g` left out.
pub(super) fn copy_operands<'a>(
    program: &str,
    args: &'a [Word],
) -> (Vec<&'a Word>, Option<String>) {
    // rsync's `-t` keeps times; it has no target directory.
    let short_t = program != "rsync";
    let valued: &[&str] = match program {
        "install" => &["-S", "--suffix", "-m", "-o", "-g"],
        _ => &["-S", "--suffix"],
    };
    let (mut sources, mut dir, mut after) = (Vec::new(), None, false);
    let mut words = args.iter();
    while let Some(w) = words.next() {
        let v = w.text();
        if !after && v == "--" {
            after = true;
        } else if after || !v.starts_with('-') || v == "-" || w.lit.is_none() {
            sources.push(w);
        } else if short_t && v == "-t"
            || is_long_prefix(v, "target-directory", 1) && !v.contains('=')
        {
            dir = words.next().map(|d| d.text().to_string());
        } else if let Some(d) = v
            .split_once('=')
            .filter(|(o, _)| is_long_prefix(o, "target-directory", 1))
            .map(|(_, d)| d)
            .or_else(|| v.strip_prefix("-t").filter(|d| short_t && !d.is_empty()))
        {
            dir = Some(d.to_string());
        } else if valued.contains(&v) {
            words.next();
        }
    }
    if dir.is_none() {
        dir = sources.pop().map(|d| d.text().to_string());
    }
    (sources, dir)
}

/// `mv` of a system tree or a file the host cannot lose (it is gone from
/// where the system looks), or of a pattern over a system directory
/// (`mv /et? /tmp/`).
pub(super) fn moves(args: &[Word]) -> Option<String> {
    copy_operands("mv", args)
        .0
        .into_iter()
        .find_map(|w| match &w.lit {
            None => unsure_in_system(w)
                .then(|| format!("mv `{}`: a pattern over a system directory", w.raw)),
            Some(v) => {
                let n = system_path(v);
                if let Some(what) = vital_file(&n) {
                    return Some(format!("mv moves {n} away, {what}"));
                }
                system_tree(&n).then(|| format!("mv moves {n}, a system directory"))
            }
        })
}

/// `ln -sfn X /lib64`: with `-n` or `-T`, a forced link replaces a link
/// to a directory instead of going inside it, so a system directory
/// reached through a link (`/lib64`, `/bin` on merged systems) is gone.
pub(super) fn relinks(args: &[Word], vals: &[&str]) -> Option<String> {
    let flag = |short: char, long: &str| {
        vals.iter().any(|v| {
            short_cluster(v).is_some_and(|c| c.contains(short)) || is_long_prefix(v, long, 3)
        })
    };
    let replaces = flag('n', "no-dereference") || flag('T', "no-target-directory");
    if !(replaces && flag('f', "force")) {
        return None;
    }
    let n = system_path(&copy_operands("ln", args).1?);
    system_tree(&n).then(|| format!("ln replaces {n}, a system directory, with a link"))
}

/// `cp`, `mv`, `install`, `ln`, `rsync` onto a disk, an account file or
/// a file the host needs: the last operand, or `-t DIR`; into a
/// directory, each source's name in it (`cp /tmp/shadow /etc/`). And a
/// link or copy that makes the host stop at boot: a halting target made
/// the default one or wanted by another.
pub(super) fn copy_into(program: &str, args: &[Word]) -> Option<String> {
    let (sources, dest) = copy_operands(program, args);
    let dest = dest?;
    let sources: Vec<&str> = sources.iter().map(|w| w.text()).collect();
    let mut targets = vec![dest.to_string()];
    for source in &sources {
        let name = source
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(source);
        targets.push(format!("{}/{name}", dest.trim_end_matches('/')));
    }
    if let Some(why) = targets.iter().find_map(|t| bad_write(t)) {
        return Some(format!("{program} {why}"));
    }
    let halts = |s: &&str| {
        let unit = basename(s.trim_end_matches('/'));
        halting(unit) || rescue(unit)
    };
    targets.iter().find_map(|t| {
        let (parent, name) = t.rsplit_once('/').unwrap_or(("", t));
        let default = name == "default.target" && sources.iter().any(halts);
        let wanted = [".wants", ".requires", ".upholds"]
            .iter()
            .any(|s| parent.ends_with(s))
            && halting(name);
        (default || wanted).then(|| format!("{program} makes {t} stop the host at boot"))
    })
}

/// tee and sponge: onto a disk, an account file or a core file, or onto
/// files `xargs` reads from its input.
pub(super) fn writes(program: &str, args: &[Word]) -> Option<String> {
    operands(args)
        .find_map(bad_target)
        .map(|why| format!("{program} {why}"))
}

/// truncate and shred: as `writes`, and of any file the host cannot lose;
/// shred of a file walissh cannot read literally (`shred "$DEV"`).
pub(super) fn destroys(program: &str, args: &[Word]) -> Option<String> {
    let unknown = operands(args).find(|w| w.lit.is_none() && (program == "shred" || from_input(w)));
    if let Some(w) = unknown {
        return Some(format!(
            "{program} of `{}`, which walissh cannot read literally and may be a disk",
            w.raw
        ));
    }
    writes(program, args).or_else(|| removes(program, args))
}

/// rsync deleting in a system tree (`--delete`, `--remove-source-files`),
/// or copying onto what `copy_into` guards.
pub(super) fn rsync(args: &[Word], vals: &[&str]) -> Option<String> {
    let deletes = vals
        .iter()
        .any(|v| v.starts_with("--del") || v.starts_with("--remove-sou"));
    let deleted = args
        .iter()
        .filter(|w| !w.text().starts_with('-'))
        .find(|w| w.lit.as_deref().is_none_or(reaches_system));
    match deleted {
        Some(w) if deletes => Some(format!("rsync deletes in {}", w.raw)),
        _ => copy_into("rsync", args),
    }
}

/// `find ROOT …` that changes what it finds under a system tree (or a
/// root walissh cannot read literally): `-delete`, or an `-exec` of
/// anything but a reader (find's own recursion makes it recursive); and
/// `-fprint FILE` and the like onto a disk or an account file. With no
/// root, or `.`, it changes the directory it runs in, which walissh does
/// not know (`cd / && find . -delete`): that is refused unless a name
/// test narrows what it changes (`find . -name '*.pyc' -delete`).
pub(super) fn find(args: &[Word]) -> Option<String> {
    /// Tests that pick files by name.
    const NAMED: &[&str] = &[
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-lname",
        "-ilname",
        "-samefile",
        "-inum",
    ];
    for w in args.windows(2) {
        if matches!(w[0].text(), "-fprint" | "-fprint0" | "-fprintf" | "-fls")
            && let Some(why) = bad_target(&w[1])
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
    let named = args
        .windows(2)
        .any(|w| NAMED.contains(&w[0].text()) && !matches!(w[1].text(), "*" | "*.*"));
    let here = "the directory it runs in, which walissh does not know and may be /";
    let roots: Vec<&Word> = find_roots(args).collect();
    if roots.is_empty() && !named {
        return Some(format!("find changes files under {here}"));
    }
    roots.iter().find_map(|w| match w.lit.as_deref() {
        None => Some(format!("find changes files under {}", w.raw)),
        Some(v) if reaches_system(v) => Some(format!("find changes files under {v}")),
        Some(v) if system_path(v) == "." && !named => {
            Some(format!("find changes files under `{v}`, {here}"))
        }
        Some(_) => None,
    })
}
