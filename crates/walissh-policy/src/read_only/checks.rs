//! The checks of a table entry's operands and option values: files that
//! are not secrets, names, verbs that only read (`systemctl status`,
//! `ip route show`), bounded waits.
//!
//! What it leaves to others: which program gets which check (the tables),
//! reading the options (`getopt`).

use super::*;

pub(super) fn any(_: &Parsed) -> Result<(), Why> {
    Ok(())
}

pub(super) fn no_operands(p: &Parsed) -> Result<(), Why> {
    match p.operands.first() {
        None => Ok(()),
        Some(o) => Err(format!("operand {o}")),
    }
}

/// Every operand is a file to read: none may be a secret.
pub(super) fn files(p: &Parsed) -> Result<(), Why> {
    not_secret(p.operands.iter().map(String::as_str))
}

/// Files whose content is read must be named from `/`: a relative path
/// names a secret when the prompt is in `~/.ssh` (`cat config`), and the
/// directory is not known here. `-` is the input.
pub(super) fn not_secret<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<(), Why> {
    for path in paths {
        if path != "-" && !path.starts_with('/') {
            return Err(format!("{path} is relative: name it from /"));
        }
        if let Some(what) = secret(path) {
            return Err(format!("{path} is {what}"));
        }
    }
    Ok(())
}

/// Programs that list names, not contents (`ls`, `find`): only a
/// directory of secrets itself is kept from them.
pub(super) fn names(p: &Parsed) -> Result<(), Why> {
    secret_places(p.operands.iter().map(String::as_str))
}

pub(super) fn secret_places<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<(), Why> {
    for path in paths {
        if let Some(what) = secret(path) {
            return Err(format!("{path} is {what}"));
        }
    }
    Ok(())
}

/// Programs that read what they are given whole (counts, checksums):
/// a device streams without end or reads a whole disk.
/// Counting or summing a file reads it: a secret's checksum or length is
/// a read of the secret, so the operands are judged as [`files`] are.
pub(super) fn no_devices(p: &Parsed) -> Result<(), Why> {
    let device = p.operands.iter().find(|o| {
        let n = normalise(o);
        n.starts_with("/dev/") && n != "/dev/null"
            || n.starts_with("/proc/")
            || n.starts_with("/sys/")
    });
    match device {
        Some(o) => Err(format!("{o} is a device or kernel file")),
        None => files(p),
    }
}

/// grep: the first operand is the pattern unless `-e`/`-f` gave one; the
/// rest are files, and so is `-f`'s value.
pub(super) fn grep(p: &Parsed) -> Result<(), Why> {
    let pattern_given = p.has("-e") || p.has("-f") || p.has("--regexp") || p.has("--file");
    let skip = usize::from(!pattern_given);
    not_secret(p.operands.iter().skip(skip).map(String::as_str))?;
    not_secret(
        p.opts
            .iter()
            .filter(|o| o.name == "-f" || o.name == "--file")
            .filter_map(|o| o.value.as_deref()),
    )
}

/// uniq's second operand is a file it writes.
pub(super) fn uniq(p: &Parsed) -> Result<(), Why> {
    if p.operands.len() > 1 {
        return Err("a second operand is a file it writes".into());
    }
    files(p)
}

/// `date +FORMAT` only prints; any other operand sets the clock.
pub(super) fn date(p: &Parsed) -> Result<(), Why> {
    match p.operands.iter().find(|o| !o.starts_with('+')) {
        Some(o) => Err(format!("operand {o} sets the clock")),
        // Every reference file, in either spelling (the last one counts).
        None => not_secret(
            p.opts
                .iter()
                .filter(|o| matches!(o.name.as_str(), "-r" | "--reference"))
                .filter_map(|o| o.value.as_deref()),
        ),
    }
}

/// ss's filter: state names, the filter's own words and operators, and
/// numbers, addresses and ports written in digits. A host or port name
/// would be looked up (`dst NAME.attacker.example` is a DNS query).
pub(super) fn ss_filter(p: &Parsed) -> Result<(), Why> {
    const WORDS: &[&str] = &[
        "state",
        "exclude",
        "all",
        "connected",
        "synchronized",
        "bucket",
        "big",
        "established",
        "syn-sent",
        "syn-recv",
        "fin-wait-1",
        "fin-wait-2",
        "time-wait",
        "closed",
        "close-wait",
        "last-ack",
        "listening",
        "closing",
        "dst",
        "src",
        "dport",
        "sport",
        "and",
        "or",
        "not",
        "eq",
        "neq",
        "ge",
        "le",
        "gt",
        "lt",
        "autobound",
    ];
    let numeric = |w: &str| {
        w.bytes()
            .all(|b| b.is_ascii_digit() || b":./*[]!=<>()&|".contains(&b))
    };
    match p
        .operands
        .iter()
        .find(|o| !WORDS.contains(&o.as_str()) && !numeric(o))
    {
        Some(o) => Err(format!("{o}: a name in a filter is looked up")),
        None => Ok(()),
    }
}

/// tr's sets write what they name, so they may name only what prints,
/// newlines and tabs: a backslash may only start `\n`, `\t` or `\\`,
/// and an escape may not start a range (`\n-~` runs through every
/// control character above the newline, ESC among them; `\033` names it
/// outright).
pub(super) fn tr_sets(p: &Parsed) -> Result<(), Why> {
    let plain = |s: &str| {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\' {
                let range = b.get(i + 2) == Some(&b'-') && b.len() > i + 3;
                match b.get(i + 1) {
                    Some(b'\\') => {}
                    Some(b'n' | b't') if !range => {}
                    _ => return false,
                }
                i += 2;
            } else {
                i += 1;
            }
        }
        true
    };
    match p.operands.iter().find(|o| !plain(o)) {
        Some(o) => Err(format!("{o} may write a control character")),
        None => Ok(()),
    }
}

/// A sampler with an interval must have a count, or it never ends.
pub(super) fn sampler(p: &Parsed) -> Result<(), Why> {
    let numeric = |o: &str| {
        o.trim()
            .trim_start_matches(['+', '-'])
            .starts_with(|c: char| c.is_ascii_digit())
    };
    let numbers: Vec<&String> = p.operands.iter().filter(|o| numeric(o)).collect();
    // The program reads ` 2` and `+1` as numbers too: only plain digits
    // are counted here, so anything else asks.
    if numbers
        .iter()
        .any(|o| !o.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err("an interval or count that is not plain digits".into());
    }
    if numbers.len() == 1 {
        return Err("an interval without a count never ends".into());
    }
    Ok(())
}

/// printf and test: `-v` assigns (and bash evaluates array subscripts in
/// the name); any other text is only printed or compared.
pub(super) fn no_assign(p: &Parsed) -> Result<(), Why> {
    match p.operands.first().map(String::as_str) {
        Some(v) if v.starts_with("-v") => Err("-v assigns a variable".into()),
        _ => plain_text(p),
    }
}

/// `echo` and `printf` print text, unless a word holds or spells a
/// terminal control sequence (`\e`, `\033`, `\x1b`, `\u001b`, CSI as
/// `\233`, `%b` of a value, a raw control character): output that could
/// redraw the user's screen, set the clipboard or answer for them. Any
/// mention of an escape asks, however it would be read.
pub(super) fn plain_text(p: &Parsed) -> Result<(), Why> {
    p.operands.iter().try_for_each(|w| escapes_in(w))
}

/// A word that holds or spells a terminal control sequence, or a carriage
/// return or backspace (which overwrite what the user reads).
pub(super) fn escapes_in(w: &str) -> Result<(), Why> {
    const SPELLED: &[&str] = &[
        "\\e", "\\0", "\\1", "\\2", "\\3", "\\x", "\\u", "\\c", "\\r", "\\b", "%b",
    ];
    let raw = w
        .chars()
        .any(|c| (c.is_control() && c != '\t' && c != '\n') || c == '\u{9b}');
    let lower = w.to_ascii_lowercase();
    if raw || SPELLED.iter().any(|s| lower.contains(s)) {
        return Err(format!("{w:?} may spell a terminal control sequence"));
    }
    Ok(())
}

/// `stat`: names, not contents; its formats read backslash escapes.
pub(super) fn stat(p: &Parsed) -> Result<(), Why> {
    for o in &p.opts {
        if matches!(o.name.as_str(), "-c" | "--format" | "--printf") {
            escapes_in(o.value.as_deref().unwrap_or(""))?;
        }
    }
    names(p)
}

/// `sleep`: a pause of at most [`MAX_SLEEP`] seconds, spelled as a plain
/// number (with `s` at most): a longer one only holds the question.
pub(super) fn short_sleep(p: &Parsed) -> Result<(), Why> {
    let [operand] = p.operands.as_slice() else {
        return Err("sleep takes one plain number of seconds here".into());
    };
    let number = operand.strip_suffix('s').unwrap_or(operand);
    match number.parse::<f64>() {
        Ok(n) if number.bytes().all(|b| b.is_ascii_digit() || b == b'.') && n <= MAX_SLEEP => {
            Ok(())
        }
        _ => Err(format!("sleep {operand}: at most {MAX_SLEEP} s unasked")),
    }
}

/// The longest `sleep` that runs unasked.
pub(super) const MAX_SLEEP: f64 = 5.0;

pub(super) fn test(p: &Parsed) -> Result<(), Why> {
    if p.operands.iter().any(|o| o == "-v" || o == "-R") {
        return Err("-v tests a variable by name".into());
    }
    Ok(())
}

pub(super) fn getent(p: &Parsed) -> Result<(), Why> {
    match p.operands.first().map(String::as_str) {
        Some("passwd" | "group" | "services" | "protocols" | "networks" | "ethers" | "aliases") => {
            Ok(())
        }
        Some(db) => Err(format!("database {db}")),
        None => Err("a database is needed".into()),
    }
}

pub(super) fn getent_hosts(p: &Parsed) -> Result<(), Why> {
    match p.operands.first().map(String::as_str) {
        Some("hosts" | "ahosts" | "ahostsv4" | "ahostsv6") => Ok(()),
        _ => Err("not a host lookup".into()),
    }
}

/// `ps`: UNIX options are read by the spec; BSD letters (`aux`) are
/// checked here. `e` and `E` show every process's environment.
pub(super) fn ps(p: &Parsed) -> Result<(), Why> {
    // procps reads the whole line again the BSD way when a UNIX value does
    // not parse (`-eux`: no user `x`), and BSD `e` shows environments.
    let listed = p.opts.iter().any(|o| {
        o.value.is_some() && !matches!(o.name.as_str(), "-o" | "-O" | "--format" | "--sort")
    });
    if listed && p.has("-e") {
        return Err("-e with a list option: a list that does not parse makes ps read the line the BSD way, where e shows environments".into());
    }
    let formats = p
        .opts
        .iter()
        .filter(|o| matches!(o.name.as_str(), "-o" | "-O" | "--format"));
    if formats
        .filter_map(|o| o.value.as_deref())
        .any(|f| f.to_ascii_lowercase().contains("env"))
    {
        return Err("a format that shows environments".into());
    }
    for o in &p.operands {
        let bsd = o.chars().all(|c| "auxfjlwrcTHmsvnhS".contains(c));
        let pid = o.bytes().all(|b| b.is_ascii_digit() || b == b',');
        if !(bsd || pid) {
            return Err(format!("{o} (environments and others are not listed)"));
        }
    }
    Ok(())
}

/// Verbs that only show.
pub(super) fn verb(p: &Parsed, allowed: &[&str], none_ok: bool) -> Result<(), Why> {
    match p.operands.first() {
        None if none_ok => Ok(()),
        None => Err("a verb is needed".into()),
        Some(v) if allowed.contains(&v.as_str()) => Ok(()),
        Some(v) => Err(format!("{v} is not a read-only verb")),
    }
}

pub(super) fn systemctl(p: &Parsed) -> Result<(), Why> {
    // `show` prints every property, the units' Environment= among them,
    // where secrets are often kept; named properties only.
    if p.operands.first().is_some_and(|v| v == "show") {
        let props: Vec<&str> = p
            .opts
            .iter()
            .filter(|o| matches!(o.name.as_str(), "-p" | "-P" | "--property" | "--value"))
            .filter_map(|o| o.value.as_deref())
            .collect();
        if props.is_empty()
            || props.iter().any(|v| {
                let v = v.to_ascii_lowercase();
                v.contains("environment") || v.contains("credential")
            })
        {
            return Err("show without -p prints the units' environments".into());
        }
    }
    verb(
        p,
        &[
            "status",
            // not `cat`: unit files hold Environment= lines.
            "show",
            "list-units",
            "list-unit-files",
            "list-timers",
            "list-sockets",
            "list-dependencies",
            "list-jobs",
            "is-active",
            "is-enabled",
            "is-failed",
            "is-system-running",
            "get-default",
            "list-machines",
        ],
        true,
    )
}

pub(super) fn status_verb(p: &Parsed) -> Result<(), Why> {
    verb(
        p,
        &[
            "status",
            "show",
            "list",
            "list-sessions",
            "list-users",
            "list-seats",
            "show-session",
            "show-user",
            "user-status",
            "session-status",
            "list-timezones",
            "list-locales",
            "list-keymaps",
            "timesync-status",
            "show-timesync",
        ],
        true,
    )
}

/// `ip [OPTIONS] OBJECT [show|list|get] ...`: iproute2 takes any prefix
/// of a word and the first match wins (`s` is `set`), so only whole
/// words of objects and of showing verbs are allowed.
pub(super) fn ip(args: &[&str]) -> Result<(), Why> {
    const OPTIONS: &[&str] = &[
        "-br",
        "-brief",
        "-s",
        "-stats",
        "-statistics",
        "-4",
        "-6",
        "-j",
        "-json",
        "-pretty",
        "-details",
        "-o",
        "-oneline",
        "-human",
    ];
    let at = args
        .iter()
        .position(|a| !a.starts_with('-'))
        .unwrap_or(args.len());
    if let Some(o) = args[..at].iter().find(|o| !OPTIONS.contains(o)) {
        return Err(format!("ip: option {o} is not on ip's read-only list"));
    }
    let p = Parsed {
        operands: args[at..].iter().map(|w| w.to_string()).collect(),
        ..Parsed::default()
    };
    ip_object(&p).map_err(|e| format!("ip: {e}"))
}

pub(super) fn ip_object(p: &Parsed) -> Result<(), Why> {
    const OBJECTS: &[&str] = &[
        "a",
        "addr",
        "address",
        "r",
        "ro",
        "route",
        "link",
        "neigh",
        "neighbor",
        "neighbour",
        "rule",
        "maddr",
        "maddress",
        "netconf",
        "ntable",
        "tunnel",
        "nexthop",
        "mroute",
    ];
    let mut words = p.operands.iter().map(String::as_str);
    let Some(object) = words.next() else {
        return Err("an object is needed".into());
    };
    if !OBJECTS.contains(&object) {
        return Err(format!("object {object}"));
    }
    match words.next() {
        None | Some("show" | "list") => Ok(()),
        Some("get") if matches!(object, "r" | "ro" | "route") => Ok(()),
        Some(v) => Err(format!("{v} is not a read-only verb")),
    }
}

/// journalctl's `-n` takes the next word only when it is a count
/// (`-n 50`, `-n +5`, `-n all`); alone it means 10, and the word after it
/// is an option of its own (`-n --vacuum-size=1M`). The table reads the
/// next word as its value, so a value that is not a count is a misread.
pub(super) fn journalctl(p: &Parsed) -> Result<(), Why> {
    for name in ["-n", "--lines"] {
        if let Some(v) = p.value(name) {
            let count = v.strip_prefix('+').unwrap_or(v);
            if !(count == "all" || !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit())) {
                return Err(format!("{name} {v}: not a count"));
            }
        }
    }
    no_operands(p)
}

pub(super) fn sysctl(p: &Parsed) -> Result<(), Why> {
    if ["-a", "-A", "-X", "--all"].iter().any(|o| p.has(o)) {
        return Err("it lists every setting, keys among them".into());
    }
    // A key, or a subtree that holds one (`net.ipv4` lists
    // `tcp_fastopen_key`; `net.ipv6.conf.*.stable_secret`).
    let holds_key = |o: &str| {
        let o = o.replace('/', ".");
        o.contains("key")
            || o.contains("secret")
            || "net.ipv4.tcp_fastopen_key".starts_with(&format!("{o}."))
            || "net.ipv6.conf.".starts_with(&format!("{o}."))
            || o.starts_with("net.ipv6.conf.") && o.split('.').count() < 5
    };
    if let Some(o) = p.operands.iter().find(|o| holds_key(o)) {
        return Err(format!("{o} is or holds a key"));
    }
    match p.operands.iter().find(|o| o.contains('=')) {
        Some(o) => Err(format!("{o} sets a value")),
        None => Ok(()),
    }
}

pub(super) fn lsof(p: &Parsed) -> Result<(), Why> {
    // `-g` and `-F` take a value only when it is attached; the table reads
    // the next word, so an option there was eaten unchecked.
    if let Some(host) = p
        .opts
        .iter()
        .filter(|o| o.name == "-i")
        .find_map(|o| o.value.as_deref().filter(|v| v.contains('@')))
    {
        return Err(format!("-i {host} looks up a host"));
    }
    for name in ["-i", "-g", "-F", "-p", "-u", "-c", "-d", "-s"] {
        if let Some(v) = p.value(name).filter(|v| v.starts_with(['-', '+'])) {
            return Err(format!("{name} {v}: an option read as a value"));
        }
    }
    // `+L1` lists deleted files still open (a full disk's usual cause);
    // other `+` options repeat for ever (`+r`) or walk directories.
    if let Some(o) = p
        .operands
        .iter()
        .find(|o| o.starts_with('+') && !matches!(o.as_str(), "+L" | "+L1"))
    {
        return Err(format!("{o} (+ options repeat or recurse)"));
    }
    if !p.has("-n") {
        return Err("without -n it looks up host names".into());
    }
    Ok(())
}

pub(super) fn netstat(p: &Parsed) -> Result<(), Why> {
    if !p.has("-n") && !p.has("--numeric") {
        return Err("without -n it looks up host names".into());
    }
    no_operands(p)
}

pub(super) fn mount_list(p: &Parsed) -> Result<(), Why> {
    no_operands(p)
}

pub(super) fn dpkg(p: &Parsed) -> Result<(), Why> {
    let query = [
        "-l",
        "-s",
        "-L",
        "-S",
        "-p",
        "--list",
        "--status",
        "--listfiles",
        "--search",
        "--print-avail",
        "--get-selections",
        "--print-architecture",
        "-W",
        "--show",
    ];
    if p.opts.iter().any(|o| query.contains(&o.name.as_str())) {
        Ok(())
    } else {
        Err("only queries run unasked".into())
    }
}

pub(super) fn apt_cache(p: &Parsed) -> Result<(), Why> {
    verb(
        p,
        &[
            "policy", "show", "search", "depends", "rdepends", "showpkg", "madison", "stats",
            "pkgnames",
        ],
        false,
    )
}

/// `find ROOTS EXPRESSION`: tests and printing only; nothing that runs,
/// deletes or writes files (`-exec`, `-delete`, `-fprint`...).
pub(super) fn find(p: &Parsed) -> Result<(), Why> {
    const TESTS: &[&str] = &[
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-type",
        "-xtype",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-size",
        "-maxdepth",
        "-mindepth",
        "-user",
        "-group",
        "-uid",
        "-gid",
        "-perm",
        "-newer",
        "-regex",
        "-iregex",
        "-links",
        "-inum",
        "-samefile",
        "-printf",
        "-fstype",
    ];
    const FLAGS: &[&str] = &[
        "-print",
        "-print0",
        "-xdev",
        "-mount",
        "-empty",
        "-o",
        "-or",
        "-a",
        "-and",
        "-not",
        "!",
        "(",
        ")",
        "-ls",
        "-true",
        "-false",
        "-nouser",
        "-nogroup",
        "-readable",
        "-writable",
        "-executable",
        "-prune",
        "-quit",
        "-depth",
        "-follow",
        "-daystart",
        "-H",
        "-L",
        "-P",
    ];
    let is_root = |w: &&str| !w.starts_with('-') && !matches!(*w, "!" | "(" | ")");
    // Its starting points are listed as `ls` lists them.
    secret_places(p.operands.iter().map(String::as_str).take_while(is_root))?;
    let mut words = p.operands.iter().map(String::as_str).skip_while(is_root);
    while let Some(w) = words.next() {
        if TESTS.contains(&w) {
            let Some(value) = words.next() else {
                return Err(format!("{w} needs a value"));
            };
            // find reads backslash escapes in a format itself.
            if w == "-printf" {
                escapes_in(value)?;
            }
        } else if !FLAGS.contains(&w) {
            return Err(format!("{w} is not on find's read-only list"));
        }
    }
    Ok(())
}

pub(super) fn ping(p: &Parsed) -> Result<(), Why> {
    if !p.has("-c") {
        return Err("without -c it never ends".into());
    }
    Ok(())
}
