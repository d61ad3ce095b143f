//! In-place editors, interpreters' one-liners (the commands they run, the
//! trees they delete, the files they write, fork bombs), and programs
//! that write where an option or address tells them (`sort -o`, `tar cf`,
//! `socat`), disks above all.

use super::*;

/// In-place edits (`sed -i`, `sed -Ei`, `sed --in-p`, `perl -pi`, `awk -i
/// inplace`, `ex`) of the files `bad_write` guards.
pub(super) fn in_place(program: &str, args: &[Word], vals: &[&str]) -> Option<String> {
    let inplace = match program {
        "sed" | "perl" => vals.iter().any(|v| {
            is_long_prefix(v, "in-place", 1)
                || short_cluster(v).is_some_and(|c| {
                    c.starts_with(|c: char| c.is_ascii_alphabetic()) && c.contains('i')
                })
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
    edited_files(program, args)
        .into_iter()
        .find_map(bad_target)
        .map(|why| format!("{program} {why}"))
}

/// The files an editor is given: its operands without its script (sed's,
/// awk's and perl's first operand, unless `-e` or `-f` gave one) and
/// without the values of its options. Judging the script as a file would
/// read `s/x/sdk/` as the disk `sdk`.
pub(super) fn edited_files<'a>(program: &str, args: &'a [Word]) -> Vec<&'a Word> {
    // Short options with a value, those of them that give the script,
    // and the long ones of each.
    let (values, scripts, long_values, long_scripts): (&str, &str, &[&str], &[&str]) = match program
    {
        "sed" => (
            "efl",
            "ef",
            &["expression", "file", "line-length"],
            &["expression", "file"],
        ),
        "perl" => ("eEIMmx", "eE", &[], &[]),
        "awk" | "gawk" => (
            "fvFieEl",
            "feE",
            &[
                "file",
                "assign",
                "field-separator",
                "include",
                "source",
                "exec",
                "load",
            ],
            &["file", "source", "exec"],
        ),
        _ => ("cSuiTwW", "", &[], &[]),
    };
    let script_first = matches!(program, "sed" | "perl" | "awk" | "gawk");
    let (mut out, mut given, mut skip, mut after) = (Vec::new(), false, false, false);
    for w in args {
        let v = w.text();
        if skip {
            skip = false;
            continue;
        }
        if !after && v == "--" {
            after = true;
            continue;
        }
        if !after && w.lit.is_some() && v.len() > 1 && v.starts_with(['-', '+']) {
            if let Some(long) = v.strip_prefix("--") {
                let (name, attached) = long
                    .split_once('=')
                    .map_or((long, false), |(n, _)| (n, true));
                let full = |l: &&str| !name.is_empty() && l.starts_with(name);
                given |= long_scripts.iter().any(full);
                skip = !attached && long_values.iter().any(full);
            } else if let Some(cluster) = short_cluster(v) {
                // `-ne SCRIPT`, `-i.bak`, `-es/x/y/`: a letter that takes
                // a value takes the rest of the cluster, or the next word.
                for (i, c) in cluster.char_indices() {
                    if (program == "sed" || program == "perl") && c == 'i' {
                        break;
                    }
                    if values.contains(c) {
                        given |= scripts.contains(c);
                        skip = i + 1 == cluster.len();
                        break;
                    }
                }
            }
            continue;
        }
        if script_first && !given {
            given = true;
            continue;
        }
        out.push(w);
    }
    out
}

/// sed's `w FILE` command and `s///w FILE` flag: the file name runs to
/// the end of the line (`sed -n 'w /proc/sysrq-trigger'`).
pub(super) fn sed_writes(program: &str, vals: &[&str]) -> Option<String> {
    if program != "sed" {
        return None;
    }
    vals.iter()
        .flat_map(|v| v.lines())
        .find_map(|line| {
            line.match_indices(['w', 'W']).find_map(|(i, _)| {
                let rest = &line[i + 1..];
                let file = rest.trim_start();
                let spaced = rest.len() != file.len() || file.starts_with('/');
                (spaced && !file.is_empty())
                    .then(|| bad_write(file.trim_end()))
                    .flatten()
            })
        })
        .map(|why| format!("sed's w command {why}"))
}

/// Programs whose one-line code walissh reads for what it runs.
pub(super) const INTERPRETERS: &[&str] = &[
    "python", "pypy", "perl", "ruby", "irb", "node", "nodejs", "deno", "bun", "php", "lua",
    "luajit", "tclsh", "awk", "gawk", "mawk", "nawk", "Rscript", "julia",
];

/// Calls in code that run a shell command or an argv.
pub(super) const SHELL_CALLS: &[&str] = &[
    "system",
    "popen",
    "exec",
    "execSync",
    "spawnSync",
    "execute",
    "shell_exec",
    "passthru",
    "proc_open",
    "check_output",
    "check_call",
    "call",
    "run",
    "Popen",
    "getoutput",
    "getstatusoutput",
];

/// Calls in code that delete a directory and all it holds.
pub(super) const TREE_DELETES: &[&str] = &[
    "rmtree",
    "rm_rf",
    "rm_r",
    "remove_tree",
    "rmSync",
    "rmdirSync",
    "removedirs",
    "remove_dir_all",
    "remove_entry",
    "remove_entry_secure",
];

/// Calls in code that delete one file.
pub(super) const FILE_DELETES: &[&str] = &["remove", "unlink", "unlinkSync", "delete"];

/// Signs that code writes the files it names (besides an `open` mode
/// that writes: `'wb'`, `"a"`, `'r+'`).
pub(super) const WRITE_HINTS: &[&str] = &[
    ">", "write", "O_WR", "O_RDWR", "truncate", "rename", "copy", "move", "link",
];

/// What a call's first argument is: shell text, or an argv.
pub(super) enum Call {
    Text(String),
    List(Vec<String>),
}

/// What an interpreter's code does that is destructive: a fork bomb's
/// shape; a command it runs (`system("rm -rf /")`,
/// `subprocess.run(["reboot"])`, backticks), judged as one; a recursive
/// delete of a system tree (`shutil.rmtree("/usr")`) or the removal of a
/// file the host cannot lose; a write to a path `bad_write` guards that
/// the code names (`open('/dev/sda', 'wb')`).
pub(super) fn interpreter(program: &str, vals: &[&str], depth: usize) -> Option<String> {
    // `python3.11`, `perl5.36`: a version may follow the name.
    let named = INTERPRETERS.iter().any(|i| {
        program
            .strip_prefix(i)
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
    });
    if !named {
        return None;
    }
    let code = vals.join(" ");
    let shell = shell_calls(program, &code);
    let spawns = shell
        .iter()
        .any(|c| matches!(c, Call::Text(t) if t.trim_end().ends_with('&')));
    if bomb(&code, spawns) {
        return Some(format!(
            "{program} forks or spawns without end: a fork bomb's shape"
        ));
    }
    if let Some(why) = shell.iter().find_map(|c| judge_call(c, depth)) {
        return Some(format!("{program} runs {why}"));
    }
    code_deletes(&code)
        .or_else(|| code_writes(&code))
        .map(|why| format!("{program} {why}"))
}

/// A command an interpreter or socat runs, judged as the line's own.
pub(super) fn judge_call(call: &Call, depth: usize) -> Option<String> {
    match call {
        Call::List(argv) => {
            let words: Vec<Word> = argv.iter().map(|a| Word::known(a)).collect();
            command_at(&words, depth + 1).map(|why| format!("`{}`: {why}", argv.join(" ")))
        }
        Call::Text(text) => {
            let seen = see(text);
            seen.runs
                .iter()
                .find_map(|r| command_at(r, depth + 1))
                .or_else(|| seen.redirects.iter().find_map(redirect))
                .map(|why| format!("`{text}`: {why}"))
        }
    }
}

/// The commands code runs: the arguments of `SHELL_CALLS`; backticks in
/// perl, ruby and php; awk's `print | "cmd"` and `"cmd" | getline`.
pub(super) fn shell_calls(program: &str, code: &str) -> Vec<Call> {
    let mut out: Vec<Call> = SHELL_CALLS
        .iter()
        .flat_map(|name| called_with(code, name))
        .collect();
    if ["perl", "ruby", "php"]
        .iter()
        .any(|p| program.starts_with(p))
    {
        out.extend(
            code.split('`')
                .skip(1)
                .step_by(2)
                .map(|t| Call::Text(t.to_string())),
        );
    }
    if program.contains("awk") {
        for (i, _) in code.match_indices('|') {
            if let Some((text, _)) = string_literal(code[i + 1..].trim_start()) {
                out.push(Call::Text(text));
            }
            let before = code[..i].trim_end();
            if code[i + 1..].trim_start().starts_with("getline")
                && let Some(text) = before
                    .strip_suffix('"')
                    .and_then(|b| b.rsplit_once('"'))
                    .map(|(_, t)| t)
            {
                out.push(Call::Text(text.to_string()));
            }
        }
    }
    out
}

/// The first argument of each call of `name` in `code`: a whole word
/// followed by `(` or a quote (perl's `system "reboot"`).
pub(super) fn called_with(code: &str, name: &str) -> Vec<Call> {
    after_word(code, name)
        .filter_map(|after| {
            let t = after.trim_start();
            let t = t.strip_prefix('(').unwrap_or(t).trim_start();
            if let Some(list) = t.strip_prefix('[') {
                let mut items = Vec::new();
                let mut rest = list.trim_start();
                while let Some((item, r)) = string_literal(rest) {
                    items.push(item);
                    rest = r.trim_start();
                    rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
                }
                return (!items.is_empty()).then_some(Call::List(items));
            }
            string_literal(t).map(|(s, _)| Call::Text(s))
        })
        .collect()
}

/// The text after each whole-word occurrence of `name` in `code`.
pub(super) fn after_word<'a>(code: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(name).filter_map(move |(i, _)| {
        let before = code[..i].chars().next_back();
        let after = &code[i + name.len()..];
        let whole = !before.is_some_and(ident) && !after.starts_with(ident);
        whole.then_some(after)
    })
}

/// A string literal at the start of `t`, quotes and escapes taken off,
/// and what follows it.
pub(super) fn string_literal(t: &str) -> Option<(String, &str)> {
    let quote = t.chars().next().filter(|c| matches!(c, '"' | '\''))?;
    let mut out = String::new();
    let mut chars = t[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => out.extend(chars.next().map(|(_, n)| n)),
            c if c == quote => return Some((out, &t[1 + i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// Every string literal in `code`.
pub(super) fn string_literals(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(['"', '\'']) {
        match string_literal(&rest[at..]) {
            Some((s, after)) => {
                out.push(s);
                rest = after;
            }
            None => rest = &rest[at + 1..],
        }
    }
    out
}

/// A fork bomb's shape in code: it forks (or backgrounds a shell command)
/// in a loop, or in a function that calls itself.
pub(super) fn bomb(code: &str, spawns: bool) -> bool {
    let forks = code.contains("fork") || spawns;
    let loops = [
        "while", "for ", "for(", "loop", "iter(", "until", "repeat", "redo", "goto",
    ]
    .iter()
    .any(|w| code.contains(w));
    forks && (loops || recursive_function(code))
}

/// A function that calls itself: a name defined (`def f`, `sub f`,
/// `function f`, `f = lambda`, `f = ->`) and called at least twice, once
/// inside and once to start.
pub(super) fn recursive_function(code: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut names: Vec<String> = Vec::new();
    for keyword in ["def", "sub", "function"] {
        for after in after_word(code, keyword) {
            let name: String = after
                .trim_start()
                .chars()
                .take_while(|c| ident(*c))
                .collect();
            names.push(name);
        }
    }
    for (i, _) in code.match_indices('=') {
        let rhs = code[i + 1..].trim_start();
        if ["lambda", "function", "->", "proc", "sub"]
            .iter()
            .any(|k| rhs.starts_with(k))
            || rhs.starts_with('(') && rhs.contains("=>")
        {
            let lhs = code[..i].trim_end();
            // After the last character that is no part of a name, which
            // may take more than one byte (`…=lambda`).
            let start = lhs
                .char_indices()
                .rev()
                .find(|&(_, c)| !ident(c))
                .map_or(0, |(j, c)| j + c.len_utf8());
            names.push(lhs[start..].to_string());
        }
    }
    names.iter().filter(|n| !n.is_empty()).any(|name| {
        after_word(code, name)
            .filter(|after| after.trim_start().starts_with('('))
            .count()
            >= 2
    })
}

/// Deletes in code: a recursive one of a system tree, or of a file the
/// host cannot lose.
pub(super) fn code_deletes(code: &str) -> Option<String> {
    let first = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .flat_map(|n| called_with(code, n))
            .filter_map(|c| match c {
                Call::Text(t) => Some(t),
                Call::List(_) => None,
            })
            .collect()
    };
    first(TREE_DELETES)
        .iter()
        .find_map(|p| tree_at_risk(p))
        .map(|r| format!("deletes {r} and all it holds"))
        .or_else(|| {
            first(FILE_DELETES).iter().find_map(|p| {
                let n = system_path(p);
                vital_file(&n).map(|what| format!("removes {n}, {what}"))
            })
        })
}

/// A path `bad_write` guards, named in code that writes.
pub(super) fn code_writes(code: &str) -> Option<String> {
    let literals = string_literals(code);
    let mode = |s: &String| {
        !s.is_empty()
            && s.chars().all(|c| "rwabt+x".contains(c))
            && (s.contains(['w', '+']) || s.starts_with('a'))
    };
    if !WRITE_HINTS.iter().any(|h| code.contains(h)) && !literals.iter().any(mode) {
        return None;
    }
    literals
        .iter()
        .filter(|s| s.starts_with('/'))
        .find_map(|s| bad_write(s))
}

/// The values of the short option `opt` (`-o FILE`, `-oFILE`, in a
/// cluster `-uoFILE`) and of its long name (`--output FILE`,
/// `--output=FILE`, or a prefix of three letters or more). `takes` are
/// the other short options with a value, which would take the rest of a
/// cluster.
pub(super) fn option_values(vals: &[&str], opt: char, long: &str, takes: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < vals.len() {
        let v = vals[i];
        i += 1;
        if v == "--" {
            break;
        }
        if let Some(name) = v.strip_prefix("--") {
            let (name, attached) = name
                .split_once('=')
                .map_or((name, None), |(n, a)| (n, Some(a)));
            if (name.len() >= 3 || name == long) && long.starts_with(name) {
                match attached {
                    Some(a) => out.push(a.to_string()),
                    None => {
                        out.extend(vals.get(i).map(|s| s.to_string()));
                        i += 1;
                    }
                }
            }
            continue;
        }
        let Some(cluster) = short_cluster(v) else {
            continue;
        };
        for (j, c) in cluster.char_indices() {
            if c == opt || takes.contains(c) {
                let rest = &cluster[j + c.len_utf8()..];
                let value = if rest.is_empty() {
                    i += 1;
                    vals.get(i - 1).map(|s| s.to_string())
                } else {
                    Some(rest.to_string())
                };
                if c == opt {
                    out.extend(value);
                }
                break;
            }
        }
    }
    out
}

/// Files a program is told to write: sort's and shuf's `-o` (`sort
/// -uo/dev/sda`, `cd /dev && sort -o sda`), uniq's second operand, the
/// archive tar creates (`tar -cf/dev/sda`), curl's `-o`, wget's `-O`.
pub(super) fn outputs(program: &str, vals: &[&str]) -> Option<String> {
    let files = match program {
        "sort" | "shuf" => option_values(vals, 'o', "output", "kStTin"),
        "uniq" => plain_operands(vals, &["-f", "-s", "-w"])
            .get(1)
            .map(|f| f.to_string())
            .into_iter()
            .collect(),
        "tar" => tar_archive(vals),
        "curl" => option_values(vals, 'o', "output", "dHXuAeFTxbcKmrwyYzCEPQtUD"),
        "wget" => option_values(vals, 'O', "output-document", "oaiBtTwQPUARDXIle"),
        _ => return None,
    };
    files
        .iter()
        .find_map(|f| bad_write(f))
        .map(|why| format!("{program} {why}"))
}

/// The archive tar creates or appends to (`-cf FILE`, `cf FILE`,
/// `--file=FILE`); none when it only reads one.
pub(super) fn tar_archive(vals: &[&str]) -> Vec<String> {
    let writes = |letters: &str| letters.contains(['c', 'r', 'u', 'A']);
    let old_style = vals
        .first()
        .filter(|v| !v.starts_with('-') && v.contains('f'));
    if let Some(first) = old_style {
        return if writes(first) {
            vals.get(1).map(|f| f.to_string()).into_iter().collect()
        } else {
            Vec::new()
        };
    }
    let creates = vals.iter().any(|v| {
        ["create", "append", "update", "catenate", "concatenate"]
            .iter()
            .any(|l| is_long_prefix(v, l, 2))
            || short_cluster(v).is_some_and(|c| {
                let before_value = c.split(|l| "bCfFgHIKLNTVX".contains(l)).next().unwrap_or(c);
                writes(before_value)
            })
    });
    if creates {
        option_values(vals, 'f', "file", "bCFgHIKLNTVX")
    } else {
        Vec::new()
    }
}

/// socat's addresses: a file or device one writes (`OPEN:/dev/sda`,
/// `FILE:…`, a bare path; not the read-only one of `-u` or `-U`), and the
/// commands `EXEC:` and `SYSTEM:` run.
pub(super) fn socat(vals: &[&str], depth: usize) -> Option<String> {
    let mut addresses = Vec::new();
    let mut i = 0;
    while i < vals.len() {
        let v = vals[i];
        i += 1;
        if matches!(
            v,
            "-b" | "-t" | "-T" | "-L" | "-W" | "-lf" | "-lp" | "-r" | "-R"
        ) {
            i += 1;
        } else if !v.starts_with('-') || v == "-" {
            addresses.push(v);
        }
    }
    let one_way = vals.contains(&"-u");
    let reverse = vals.contains(&"-U");
    for (k, address) in addresses.iter().enumerate() {
        let (kind, rest) = address.split_once(':').unwrap_or(("", address));
        let kind = kind.to_ascii_uppercase();
        let head = rest.split(',').next().unwrap_or(rest);
        if matches!(kind.as_str(), "EXEC" | "SYSTEM")
            && let Some(why) = judge_call(&Call::Text(head.to_string()), depth)
        {
            return Some(format!("socat runs {why}"));
        }
        if one_way && k == 0 || reverse && k == 1 {
            continue;
        }
        let path = match kind.as_str() {
            "" => address.split(',').next().unwrap_or(address),
            "OPEN" | "FILE" | "CREATE" | "CREAT" | "GOPEN" | "PIPE" => head,
            _ => continue,
        };
        if path != "-"
            && let Some(why) = bad_write(path)
        {
            return Some(format!("socat {why}"));
        }
    }
    device_operand("socat", vals)
}

/// Programs that only look at a block device; any other program given
/// one may write it (as an operand, after `=`, after a socat-style
/// `TYPE:`, attached to a short option: `tar cf /dev/sda`, `sort
/// -o/dev/sda`, `socat - OPEN:/dev/sda`).
pub(super) fn device_operand(program: &str, vals: &[&str]) -> Option<String> {
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
        "od",
        "hexdump",
        "xxd",
        "strings",
        "cmp",
        "sudo",
        "doas",
    ];
    if LOOKERS.contains(&program) || READERS.contains(&program) {
        return None;
    }
    vals.iter()
        .flat_map(|v| {
            let after_eq = v.rsplit_once('=').map(|(_, a)| a);
            let after_type = v
                .split_once(':')
                .map(|(_, a)| a.split(',').next().unwrap_or(a));
            let attached = short_cluster(v).and_then(|_| v.find("/dev/").map(|i| &v[i..]));
            [Some(*v), after_eq, after_type, attached]
        })
        .flatten()
        .find(|v| v.starts_with('/') && disk(v))
        .map(|v| format!("{program} is given the disk {v}, which it may write"))
}
