//! Mass deletes through container, cluster and scheduler tools,
//! containers that act on the host's own files, and removing essential
//! packages.

use super::*;

/// Mass deletes through container, cluster and scheduler tools: pruning
/// with `-a`, removing what a command substitution or `xargs` lists
/// (`docker ps -aq | xargs docker rm -f`), resetting the store, a
/// compose project's volumes, cluster-wide kinds in any spelling.
pub(super) fn mass_delete(program: &str, args: &[Word], vals: &[&str]) -> Option<String> {
    let has = |w: &str| vals.contains(&w);
    let all = vals.iter().any(|v| {
        matches!(*v, "--all" | "-A" | "--all-namespaces" | "--volumes")
            || (v.starts_with("--all=") || v.starts_with("--all-namespaces="))
                && !v.ends_with("=false")
            || short_cluster(v).is_some_and(|c| c.contains('a') && c.len() <= 3)
    });
    // What a command substitution or xargs gives may be everything.
    let many = args
        .iter()
        .any(|w| from_input(w) || w.lit.is_none() && (w.raw.contains("$(") || w.raw.contains('`')));
    let force = vals.iter().any(|v| {
        is_long_prefix(v, "force", 1) || short_cluster(v).is_some_and(|c| c.contains('f'))
    });
    let gone = match program {
        "docker" | "podman" | "nerdctl" => {
            has("prune") && (all || has("system") || has("volume"))
                || (has("rm") || has("rmi")) && (all || many && force)
                || has("system") && has("reset")
                || has("compose") && compose_down(vals)
        }
        "docker-compose" | "podman-compose" => compose_down(vals),
        "kubectl" | "oc" => has("delete") && (all || many || cluster_kinds(vals)),
        "helm" => has("uninstall") || has("delete"),
        "crontab" => vals
            .iter()
            .any(|v| *v == "--remove" || short_cluster(v).is_some_and(|c| c.contains('r'))),
        "lvremove" | "vgremove" => true,
        "ctr" | "crictl" => has("rm") || has("rmi") || has("prune") || has("rmp"),
        _ => false,
    };
    gone.then(|| format!("{program} deletes in bulk"))
}

/// `compose down -v` (`--volumes`, `--rmi`): the project's data too.
pub(super) fn compose_down(vals: &[&str]) -> bool {
    vals.contains(&"down")
        && vals.iter().any(|v| {
            v.starts_with("--volumes")
                || v.starts_with("--rmi")
                || short_cluster(v).is_some_and(|c| c.contains('v'))
        })
}

/// `kubectl delete` of a kind that takes everything in it or the cluster
/// with it: namespaces, nodes, persistent volumes, CRDs, projects; in
/// any case, plural or short name, in a comma list or `kind/name`.
pub(super) fn cluster_kinds(vals: &[&str]) -> bool {
    const KINDS: &[&str] = &[
        "ns",
        "namespace",
        "no",
        "node",
        "pv",
        "persistentvolume",
        "crd",
        "customresourcedefinition",
        "project",
    ];
    let at_risk = |word: &str| {
        word.split(',').any(|w| {
            let kind = w.split('/').next().unwrap_or(w);
            let kind = kind.split('.').next().unwrap_or(kind).to_ascii_lowercase();
            KINDS.contains(&kind.as_str())
                || kind.strip_suffix('s').is_some_and(|k| KINDS.contains(&k))
        })
    };
    let Some(at) = vals.iter().position(|v| *v == "delete") else {
        return false;
    };
    let operands = plain_operands(
        &vals[at + 1..],
        &[
            "-n",
            "--namespace",
            "-l",
            "--selector",
            "-f",
            "--filename",
            "-o",
            "--output",
            "--field-selector",
            "--grace-period",
            "--timeout",
            "--context",
            "--cluster",
            "--kubeconfig",
        ],
    );
    operands.first().is_some_and(|k| at_risk(k))
        || operands.iter().any(|w| w.contains('/') && at_risk(w))
}

/// How many words after `run` are tried as the start of its command.
const CANDIDATES: usize = 8;

/// A container run with a host directory mounted read-write (`-v
/// /:/host`, `--mount type=bind,source=/,target=/host`): the command it
/// runs sees the host's files under the mount point, so it is judged with
/// them put back (`rm -rf /host/etc` is `rm -rf /etc`).
pub(super) fn container_run(program: &str, args: &[Word], depth: usize) -> Option<String> {
    if !matches!(program, "docker" | "podman" | "nerdctl") {
        return None;
    }
    let at = args
        .iter()
        .position(|w| matches!(w.text(), "run" | "create"))?;
    let rest = &args[at + 1..];
    let mounts = host_mounts(rest);
    if mounts.is_empty() {
        return None;
    }
    let host = |w: &Word| {
        let Some(v) = w.lit.as_deref() else {
            return w.clone();
        };
        for (src, dst) in &mounts {
            let dst = dst.trim_end_matches('/');
            if let Some(tail) = v
                .strip_prefix(dst)
                .filter(|t| t.is_empty() || t.starts_with('/'))
            {
                return Word::known(&normalise(&format!("{src}/{tail}")));
            }
        }
        w.clone()
    };
    // Any of the first few later words may be the image or the start of
    // the command (an option's value looks like either); a bound, since
    // each is judged whole and may hold another container run.
    (0..rest.len())
        .filter(|&i| !rest[i].text().starts_with('-'))
        .take(CANDIDATES)
        .find_map(|i| {
            let argv: Vec<Word> = rest[i..].iter().map(host).collect();
            command_at(&argv, depth + 1)
        })
        .map(|why| format!("{program} runs, on the host's mounted files: {why}"))
}

/// The host directories a container run mounts writable, as (host path,
/// mount point): `-v SRC:DST[:OPTS]`, `--volume=…`, `--mount
/// type=bind,source=SRC,target=DST`; read-only ones (`:ro`, `readonly`)
/// and named volumes left out.
pub(super) fn host_mounts(args: &[Word]) -> Vec<(String, String)> {
    let mut mounts = Vec::new();
    for (i, w) in args.iter().enumerate() {
        let v = w.text();
        let next = || args.get(i + 1).map(Word::text).unwrap_or("");
        let volume = match v {
            "-v" | "--volume" => Some(next()),
            _ => v
                .strip_prefix("--volume=")
                .or_else(|| v.strip_prefix("-v").filter(|s| s.starts_with('/'))),
        };
        if let Some(spec) = volume {
            let mut parts = spec.split(':');
            if let (Some(src), Some(dst)) = (parts.next(), parts.next())
                && src.starts_with('/')
                && !parts.any(|o| o.split(',').any(|o| o == "ro"))
            {
                mounts.push((src.into(), dst.into()));
            }
        }
        let mount = match v {
            "--mount" => Some(next()),
            _ => v.strip_prefix("--mount="),
        };
        if let Some(spec) = mount {
            let field = |names: &[&str]| {
                spec.split(',').find_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    names.contains(&k).then_some(v)
                })
            };
            let readonly = spec
                .split(',')
                .any(|kv| matches!(kv, "readonly" | "ro" | "readonly=true" | "ro=true"));
            if let (Some(src), Some(dst)) = (
                field(&["source", "src"]),
                field(&["target", "destination", "dst"]),
            ) && src.starts_with('/')
                && !readonly
            {
                mounts.push((src.into(), dst.into()));
            }
        }
    }
    mounts
}

/// Packages whose removal leaves a host that cannot run programs, boot,
/// install anything or let anyone in.
pub(super) const ESSENTIAL: &[&str] = &[
    "libc6",
    "libc-bin",
    "glibc",
    "glibc-common",
    "musl",
    "systemd",
    "systemd-sysv",
    "sysvinit",
    "init",
    "bash",
    "dash",
    "coreutils",
    "util-linux",
    "dpkg",
    "apt",
    "rpm",
    "yum",
    "dnf",
    "pacman",
    "apk-tools",
    "openssh-server",
    "openssh",
    "sudo",
    "login",
    "passwd",
    "shadow-utils",
    "base-files",
    "base-passwd",
    "libpam-modules",
    "libpam0g",
    "pam",
];

/// Package removals that take the system's essentials with them: the
/// managers' own overrides (`--force-remove-essential`,
/// `--allow-remove-essential`, `rpm -e --nodeps`, `pacman -Rdd`), or an
/// essential package removed by name (`apt purge libc6`).
pub(super) fn removes_essentials(program: &str, vals: &[&str]) -> Option<String> {
    let cluster = |v: &str, first: char| short_cluster(v).is_some_and(|c| c.starts_with(first));
    let removing = match program {
        "dpkg" => vals.iter().any(|v| {
            matches!(*v, "-r" | "-P")
                || is_long_prefix(v, "remove", 3)
                || is_long_prefix(v, "purge", 2)
        }),
        "rpm" => vals
            .iter()
            .any(|v| cluster(v, 'e') || is_long_prefix(v, "erase", 2)),
        "pacman" => vals
            .iter()
            .any(|v| cluster(v, 'R') || is_long_prefix(v, "remove", 3)),
        "apk" => vals.contains(&"del"),
        _ => vals.iter().any(|v| {
            matches!(
                *v,
                "remove" | "purge" | "erase" | "autoremove" | "autopurge" | "rm"
            )
        }),
    };
    let overrides = vals.iter().any(|v| {
        v.starts_with("--force-remove-essential")
            || v.starts_with("--force-remove-protected")
            || *v == "--allow-remove-essential"
            || removing && (*v == "--nodeps" || v.starts_with("--force-all"))
            || program == "pacman"
                && short_cluster(v)
                    .is_some_and(|c| c.starts_with('R') && c.matches('d').count() >= 2)
    });
    let essential = |pkg: &&str| {
        let name = pkg.split([':', '=']).next().unwrap_or(pkg);
        ESSENTIAL.iter().any(|e| {
            name.strip_prefix(e).is_some_and(|rest| {
                rest.is_empty()
                    || rest.starts_with('.')
                    || rest
                        .strip_prefix('-')
                        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
            })
        })
    };
    if overrides {
        return Some(format!(
            "{program} is told to remove what the system cannot run without"
        ));
    }
    let pkg = vals
        .iter()
        .filter(|v| !v.starts_with('-'))
        .find(|p| essential(p))
        .filter(|_| removing)?;
    Some(format!(
        "{program} removes {pkg}, which the system cannot run without"
    ))
}
