//! Cutting the host off the network: firewall flushes, default policies
//! and rules that drop everything or SSH, in every tool; links,
//! addresses, routes and rules taken down; traffic shaped to nothing.

use super::*;

/// Cutting the host off the network: firewall flushes, default policies
/// and rules that drop everything or SSH, in every tool and under every
/// name; links, routes, addresses and rules taken down, flushed or
/// replaced; traffic shaped to nothing.
pub(super) fn cuts_off(program: &str, vals: &[&str]) -> Option<String> {
    let words: Vec<&str> = vals.iter().flat_map(|v| v.split_whitespace()).collect();
    let has = |w: &str| words.contains(&w);
    let drops = words.iter().any(|v| {
        let v = v.to_ascii_lowercase();
        v.contains("drop") || v.contains("reject") || v == "deny"
    });
    let base = program
        .strip_suffix("-nft")
        .or_else(|| program.strip_suffix("-legacy"))
        .unwrap_or(program);
    let cut = match program {
        _ if matches!(base, "iptables" | "ip6tables" | "ebtables" | "arptables") => {
            xtables(vals, drops)
        }
        p if p.contains("tables") && p.ends_with("-restore") => {
            !vals.iter().any(|v| matches!(*v, "-t" | "--test"))
        }
        "nft" => {
            let file = vals.iter().any(|v| {
                matches!(*v, "-f" | "--file")
                    || v.starts_with("--file=")
                    || short_cluster(v).is_some_and(|c| c.starts_with('f'))
            });
            let check = vals.iter().any(|v| matches!(*v, "-c" | "--check"));
            has("flush")
                || (has("delete") || has("destroy"))
                    && (has("table") || has("ruleset") || has("chain"))
                || drops
                || file && !check
        }
        "ufw" => has("disable") || has("reset") || (has("default") && drops) || ufw_blocks(vals),
        "firewall-cmd" => firewalld_cuts(vals),
        "ip" => ip_cuts(vals),
        "ifdown" => true,
        "ifconfig" => has("down") || has("0.0.0.0") || has("0") || has("del"),
        "nmcli" => nmcli_cuts(vals),
        "networkctl" => has("down") || has("delete"),
        "rfkill" => has("block"),
        "tc" => tc_cuts(vals),
        _ => false,
    };
    cut.then(|| format!("{program} can cut the host off the network"))
}

/// iptables and kin: a flush or chain delete (`-F`, `--fl`), a default
/// policy that drops (`-P`, `--pol`), or an added rule that drops
/// everything or SSH (`drops_all`).
pub(super) fn xtables(vals: &[&str], drops: bool) -> bool {
    let short = |letters: &[char]| {
        vals.iter()
            .any(|v| short_cluster(v).is_some_and(|c| c.contains(letters)))
    };
    let long = |name: &str, min: usize| vals.iter().any(|v| is_long_prefix(v, name, min));
    let flush = short(&['F', 'X']) || long("flush", 2) || long("delete-chain", 7);
    let policy = short(&['P']) || long("policy", 2);
    let adds = short(&['A', 'I']) || long("append", 2) || long("insert", 3);
    flush || policy && drops || adds && drops_all(vals)
}

/// A firewall rule that drops or rejects, narrowed by nothing that keeps
/// SSH out of it: no source or destination but everywhere, no protocol
/// but TCP, no port but one that takes in 22, no state but NEW or
/// ESTABLISHED. Any match walissh does not know counts as narrowing (the
/// line is asked).
pub(super) fn drops_all(rule: &[&str]) -> bool {
    let (mut drops, mut narrowed) = (false, false);
    let mut i = 0;
    while i < rule.len() {
        let v = rule[i];
        i += 1;
        let (name, attached) = match v.split_once('=') {
            Some((n, a)) if v.starts_with("--") => (n, Some(a)),
            _ if v.len() > 2
                && short_cluster(v)
                    .is_some_and(|c| c.starts_with(|c: char| "AIjpsdiomt".contains(c))) =>
            {
                (&v[..2], Some(&v[2..]))
            }
            _ => (v, None),
        };
        const VALUED: &[&str] = &[
            "-A",
            "-I",
            "--append",
            "--insert",
            "-j",
            "--jump",
            "-p",
            "--protocol",
            "-s",
            "--source",
            "--src",
            "-d",
            "--destination",
            "--dst",
            "-i",
            "--in-interface",
            "-o",
            "--out-interface",
            "-m",
            "--match",
            "-t",
            "--table",
            "--reject-with",
            "--dport",
            "--destination-port",
            "--dports",
            "--destination-ports",
            "--sport",
            "--source-port",
            "--sports",
            "--source-ports",
            "--state",
            "--ctstate",
        ];
        let value = match attached {
            Some(a) => a,
            None if VALUED.contains(&name) => {
                i += 1;
                rule.get(i - 1).copied().unwrap_or("")
            }
            None => "",
        };
        match name {
            "-A" | "-I" | "--append" | "--insert" if value == "FORWARD" => return false,
            "-A" | "-I" | "--append" | "--insert" | "-m" | "--match" | "-t" | "--table"
            | "--reject-with" | "-w" | "--wait" | "--syn" | "-v" | "--verbose" | "-n" => {}
            "-j" | "--jump" => {
                drops = matches!(value.to_ascii_uppercase().as_str(), "DROP" | "REJECT")
            }
            "-p" | "--protocol" => {
                narrowed |= !matches!(
                    value.to_ascii_lowercase().as_str(),
                    "tcp" | "all" | "6" | "0"
                )
            }
            "-s" | "--source" | "--src" | "-d" | "--destination" | "--dst" => {
                narrowed |= !matches!(value, "0.0.0.0/0" | "0/0" | "::/0" | "0.0.0.0/0.0.0.0")
            }
            "-i" | "--in-interface" | "-o" | "--out-interface" => narrowed |= value == "lo",
            "--dport"
            | "--destination-port"
            | "--dports"
            | "--destination-ports"
            | "--sport"
            | "--source-port"
            | "--sports"
            | "--source-ports" => narrowed |= !ssh_port(value),
            "--state" | "--ctstate" => {
                narrowed |= !value.split(',').any(|s| matches!(s, "NEW" | "ESTABLISHED"))
            }
            n if n.starts_with('-') || n == "!" => narrowed = true,
            _ => {}
        }
    }
    drops && !narrowed
}

/// Whether a port list (`22`, `ssh`, `20:30`, `22/tcp`, `80,22`) takes
/// in SSH's port.
pub(super) fn ssh_port(spec: &str) -> bool {
    let spec = spec.split('/').next().unwrap_or(spec);
    spec.split(',').any(|p| {
        let p = p.trim();
        if p.eq_ignore_ascii_case("ssh") || p.eq_ignore_ascii_case("openssh") {
            return true;
        }
        match p.split_once(':') {
            Some((low, high)) => {
                low.parse::<u32>().unwrap_or(0) <= 22 && high.parse::<u32>().unwrap_or(65535) >= 22
            }
            None => p == "22",
        }
    })
}

/// `ufw deny|reject …` of SSH, or of everything: no source but anywhere,
/// no other port or application narrowing it.
pub(super) fn ufw_blocks(vals: &[&str]) -> bool {
    let Some(at) = vals.iter().position(|v| matches!(*v, "deny" | "reject")) else {
        return false;
    };
    if vals[..at].contains(&"delete") {
        return false;
    }
    let rest = &vals[at + 1..];
    let (mut ssh, mut from_somewhere, mut narrowed) = (false, false, false);
    let mut i = 0;
    while i < rest.len() {
        let w = rest[i];
        i += 1;
        let next = rest.get(i).copied().unwrap_or("");
        match w {
            "in" | "out" | "log" | "log-all" | "any" => {}
            "on" | "proto" | "comment" => i += 1,
            "from" | "to" => {
                i += 1;
                let anywhere = matches!(next, "any" | "0.0.0.0/0" | "::/0");
                from_somewhere |= w == "from" && !anywhere;
                narrowed |= !anywhere;
            }
            "port" | "app" => {
                i += 1;
                ssh |= ssh_port(next);
                narrowed |= !ssh_port(next);
            }
            w if ssh_port(w) => ssh = true,
            _ => narrowed = true,
        }
    }
    !from_somewhere && (ssh || !narrowed)
}

/// firewalld: panic mode; the default zone or a zone's target made to
/// drop; SSH taken out of a zone; an interface moved into `block` or
/// `drop`. Listing and queries never cut.
pub(super) fn firewalld_cuts(vals: &[&str]) -> bool {
    let reads = ["--list", "--get", "--query", "--info", "--state"];
    if vals.iter().any(|v| reads.iter().any(|r| v.starts_with(r))) {
        return false;
    }
    let (mut closed_zone, mut moves) = (false, false);
    for (i, v) in vals.iter().enumerate() {
        if v.starts_with("--panic-on") {
            return true;
        }
        let (name, value) = match v.split_once('=') {
            Some((n, value)) => (n, value),
            None => (*v, vals.get(i + 1).copied().unwrap_or("")),
        };
        let value = value.to_ascii_lowercase();
        let closed = matches!(value.as_str(), "block" | "drop");
        let cut = match name {
            "--set-default-zone" => closed,
            "--set-target" => matches!(value.as_str(), "reject" | "drop" | "%%reject%%"),
            "--remove-service" | "--remove-service-from-zone" => value == "ssh",
            "--remove-port" | "--remove-port-from-zone" => ssh_port(&value),
            "--zone" => {
                closed_zone |= closed;
                false
            }
            "--change-interface" | "--add-interface" | "--change-zone" => {
                moves = true;
                false
            }
            _ => false,
        };
        if cut {
            return true;
        }
    }
    let direct = vals
        .iter()
        .position(|v| matches!(*v, "--add-rule" | "--insert-rule"));
    closed_zone && moves || direct.is_some_and(|at| drops_all(&vals[at + 1..]))
}

/// `ip`, leading options and abbreviations read as ip reads them (`ip -4
/// r d default`): routes deleted, changed, replaced or flushed; addresses
/// deleted or flushed; rules flushed, deleting the main table or sending
/// traffic nowhere (`ip rule add prohibit`); links down, deleted or moved
/// to another namespace; a batch file walissh cannot see.
pub(super) fn ip_cuts(vals: &[&str]) -> bool {
    let mut i = 0;
    while let Some(v) = vals.get(i).filter(|v| v.starts_with('-')) {
        i += 1;
        match *v {
            "-b" | "-batch" => return true,
            "-n" | "-netns" | "-f" | "-family" | "-rc" | "-rcvbuf" | "-l" | "-loops" => i += 1,
            _ => {}
        }
    }
    let words = vals.get(i..).unwrap_or_default();
    let has = |w: &str| words.contains(&w);
    let is = |w: &str, full: &str| !w.is_empty() && full.starts_with(w);
    let object = words.first().copied().unwrap_or("");
    let verb = words.get(1).copied().unwrap_or("");
    // ip's own order of objects decides an abbreviation (`r` is route).
    let objects = [
        "address",
        "addrlabel",
        "maddress",
        "route",
        "rule",
        "neighbor",
        "neighbour",
        "ntable",
        "ntbl",
        "link",
    ];
    let restore = verb.len() >= 3 && is(verb, "restore");
    match objects.into_iter().find(|o| is(object, o)) {
        Some("address") => is(verb, "delete") || is(verb, "flush") || restore,
        Some("route") => {
            ["delete", "change", "replace", "flush"]
                .iter()
                .any(|f| is(verb, f))
                || verb == "chg"
                || restore
        }
        Some("rule") => {
            is(verb, "flush")
                || restore
                || is(verb, "add")
                    && words
                        .iter()
                        .any(|w| matches!(*w, "prohibit" | "blackhole" | "unreachable"))
                || is(verb, "delete")
                    && words
                        .iter()
                        .any(|w| matches!(*w, "main" | "local" | "default" | "0" | "32766"))
        }
        Some("link") => has("down") || is(verb, "delete") || is(verb, "set") && has("netns"),
        _ => has("down") || has("flush"),
    }
}

/// nmcli, abbreviations as nmcli reads them (`nmcli d dis`, `nmcli con
/// del`): networking or radios off, a connection or device down,
/// disconnected or deleted.
pub(super) fn nmcli_cuts(vals: &[&str]) -> bool {
    let words = plain_operands(
        vals,
        &[
            "-f",
            "--fields",
            "-g",
            "--get-values",
            "-e",
            "--escape",
            "-c",
            "--colors",
            "-m",
            "--mode",
            "-w",
            "--wait",
        ],
    );
    let is = |w: &str, full: &str| !w.is_empty() && full.starts_with(w);
    let object = words.first().copied().unwrap_or("");
    let verb = words.get(1).copied().unwrap_or("");
    words
        .iter()
        .any(|w| matches!(*w, "off" | "down" | "disconnect" | "delete"))
        || (is(object, "connection") || is(object, "device")) && verb.starts_with('d')
}

/// tc: a blackhole qdisc, or netem losing or corrupting half the traffic
/// or more (`netem loss 100%`).
pub(super) fn tc_cuts(vals: &[&str]) -> bool {
    let percent = |v: &str| v.trim_end_matches('%').parse::<f64>().unwrap_or(0.0);
    vals.contains(&"blackhole")
        || vals.iter().enumerate().any(|(i, v)| {
            matches!(*v, "loss" | "corrupt" | "drop")
                && vals[i + 1..]
                    .iter()
                    .take(2)
                    .enumerate()
                    .any(|(j, p)| (j == 0 || p.ends_with('%')) && percent(p) >= 50.0)
        })
}
