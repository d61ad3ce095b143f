//! Power and init: units and targets that stop the host, the bus methods
//! that do it, kernel settings that panic it, freezing or unmounting its
//! file systems, and the disk tools' destructive verbs.

use super::*;

/// A unit name without its type: `ssh.service` is `ssh`.
pub(super) fn unit_base(unit: &str) -> &str {
    [".service", ".socket", ".target"]
        .iter()
        .find_map(|s| unit.strip_suffix(s))
        .unwrap_or(unit)
}

/// Units that stop the host when started: the power targets and the
/// services behind them (`systemd-reboot.service`).
pub(super) fn halting(unit: &str) -> bool {
    let u = unit_base(unit);
    let u = u.strip_prefix("systemd-").unwrap_or(u);
    matches!(
        u,
        "poweroff"
            | "reboot"
            | "halt"
            | "kexec"
            | "suspend"
            | "hibernate"
            | "hybrid-sleep"
            | "suspend-then-hibernate"
            | "soft-reboot"
            | "ctrl-alt-del"
            | "exit"
            | "shutdown"
    )
}

/// Targets that leave the host without its network and services.
pub(super) fn rescue(unit: &str) -> bool {
    matches!(unit_base(unit), "rescue" | "emergency")
}

/// Units the host is reached through: its network and its SSH server.
pub(super) fn lifeline(unit: &str) -> bool {
    matches!(
        unit_base(unit),
        "ssh"
            | "sshd"
            | "networking"
            | "network"
            | "NetworkManager"
            | "network-manager"
            | "systemd-networkd"
            | "wicked"
            | "dbus"
            | "dbus-broker"
    )
}

/// systemctl stopping or changing the whole host (`poweroff`, `isolate`,
/// a target stopped or started), starting or wiring in a unit that
/// halts it (`start systemd-reboot.service`, `set-default
/// poweroff.target`, `add-wants … reboot.target`), booting it to rescue,
/// or stopping what it is reached through (`stop ssh`, `mask --now
/// NetworkManager`).
pub(super) fn systemctl(vals: &[&str]) -> Option<String> {
    const STOPS: &[&str] = &[
        "poweroff",
        "reboot",
        "halt",
        "kexec",
        "suspend",
        "hibernate",
        "hybrid-sleep",
        "suspend-then-hibernate",
        "soft-reboot",
        "emergency",
        "rescue",
        "default",
        "isolate",
        "exit",
        "switch-root",
    ];
    if let Some(v) = vals.iter().find(|v| STOPS.contains(v)) {
        return Some(format!("systemctl {v} stops or changes the whole host"));
    }
    let has = |w: &str| vals.contains(&w);
    let units: Vec<&str> = vals
        .iter()
        .filter(|v| !v.starts_with('-'))
        .copied()
        .collect();
    let starts = vals.iter().any(|v| {
        matches!(
            *v,
            "start"
                | "restart"
                | "try-restart"
                | "reload-or-restart"
                | "try-reload-or-restart"
                | "enable"
                | "reenable"
        )
    });
    let wires = ["add-wants", "add-requires", "set-default", "link"]
        .iter()
        .any(|v| has(v));
    if let Some(u) = units
        .iter()
        .find(|u| halting(u))
        .filter(|_| starts || wires)
    {
        return Some(format!("systemctl makes {u} run, which stops the host"));
    }
    if let Some(u) = units
        .iter()
        .find(|u| rescue(u))
        .filter(|_| has("set-default"))
    {
        return Some(format!(
            "systemctl set-default {u} boots the host without its network"
        ));
    }
    let stops_unit = vals
        .iter()
        .any(|v| matches!(*v, "stop" | "kill" | "mask" | "freeze"))
        || has("disable") && has("--now");
    if let Some(u) = units.iter().find(|u| lifeline(u)).filter(|_| stops_unit) {
        return Some(format!(
            "systemctl stops {u}, which the host is reached through"
        ));
    }
    // Stopping or signalling the whole system: a target, every unit,
    // init itself.
    let stops = vals
        .iter()
        .any(|v| matches!(*v, "stop" | "kill" | "mask" | "freeze" | "clean"));
    let whole = vals.iter().find(|v| {
        v.ends_with(".target")
            || v.contains(['*', '?', '['])
            || matches!(
                **v,
                "init.scope" | "-.slice" | "system.slice" | "user.slice"
            )
    });
    if let (true, Some(w)) = (stops, whole) {
        return Some(format!("systemctl stops or signals {w}, the whole host"));
    }
    let target = vals.iter().find(|v| v.ends_with(".target"));
    match (starts, target) {
        (true, Some(t)) => Some(format!(
            "systemctl starts {t}, which changes the whole host"
        )),
        _ => None,
    }
}

/// D-Bus calls to logind and systemd that stop the host, or start, stop
/// or kill units and sessions: `Reboot`, `ScheduleShutdown`,
/// `RestartUnit`, `EnqueueUnitJob`, a unit object's `Start`.
pub(super) fn bus_call(program: &str, vals: &[&str]) -> Option<String> {
    const MANAGER: &[&str] = &[
        "PowerOff",
        "Reboot",
        "Halt",
        "KExec",
        "Suspend",
        "Hibernate",
        "HybridSleep",
        "SuspendThenHibernate",
        "SoftReboot",
        "ScheduleShutdown",
        "StartUnit",
        "StartUnitReplace",
        "StartUnitWithFlags",
        "StopUnit",
        "RestartUnit",
        "TryRestartUnit",
        "ReloadOrRestartUnit",
        "ReloadOrTryRestartUnit",
        "KillUnit",
        "QueueSignalUnit",
        "FreezeUnit",
        "CleanUnit",
        "EnqueueUnitJob",
        "StartTransientUnit",
        "EnqueueMarkedJobs",
        "Exit",
        "SetDefaultTarget",
        "MaskUnitFiles",
        "LinkUnitFiles",
        "KillSession",
        "KillUser",
        "TerminateSession",
        "TerminateUser",
        "TerminateSeat",
    ];
    const UNIT: &[&str] = &[
        "Start",
        "Stop",
        "Restart",
        "TryRestart",
        "ReloadOrRestart",
        "ReloadOrTryRestart",
        "Kill",
        "Freeze",
        "Clean",
        "EnqueueJob",
        "QueueSignal",
    ];
    let on_unit = vals.iter().any(|v| {
        ["systemd1.Unit", "systemd1.Service", "systemd1.Scope"]
            .iter()
            .any(|i| v.contains(i))
    });
    vals.iter()
        .find(|v| {
            let method = v.rsplit('.').next().unwrap_or(v);
            MANAGER.contains(&method) || on_unit && UNIT.contains(&method)
        })
        .map(|v| format!("{program} calls {v}, which stops the host or its services"))
}

/// Kernel settings that take the host down: panics on routine events,
/// more huge pages than any host's memory, IPv6 switched off.
pub(super) fn sysctl(vals: &[&str]) -> Option<String> {
    let harms = |key: &str, value: &str| {
        let key = key.trim().replace('/', ".");
        let value = value.trim();
        match key.as_str() {
            k if k.contains("panic_on") || k.ends_with("_panic") => value != "0",
            "vm.nr_hugepages" | "vm.nr_overcommit_hugepages" => {
                value.parse::<u64>().map_or(true, |n| n > 65536)
            }
            k if k.starts_with("net.ipv6.conf.") && k.ends_with(".disable_ipv6") => value != "0",
            _ => false,
        }
    };
    vals.iter()
        .filter_map(|v| v.split_once('='))
        .find(|(k, v)| harms(k, v))
        .map(|(k, v)| format!("sysctl {k}={v} can take the host down"))
}

/// `umount -a`, or a lazy, forced or recursive unmount of `/` or a
/// top-level system directory.
pub(super) fn unmounts_the_system(args: &[Word], vals: &[&str]) -> bool {
    let all = vals
        .iter()
        .any(|v| is_long_prefix(v, "all", 2) || short_cluster(v).is_some_and(|c| c.contains('a')));
    let forced = vals.iter().any(|v| {
        matches!(*v, "--lazy" | "--force" | "--recursive")
            || short_cluster(v).is_some_and(|c| c.contains(['l', 'f', 'R']))
    });
    all || forced
        && operands(args).any(|w| w.lit.as_deref().is_some_and(|v| core_dir(&system_path(v))))
}

/// `udevadm trigger --action=remove` (or `unbind`, `offline`).
pub(super) fn removes_devices(vals: &[&str]) -> bool {
    vals.contains(&"trigger")
        && option_values(vals, 'c', "action", "tsSaApgyb")
            .iter()
            .any(|a| matches!(a.as_str(), "remove" | "unbind" | "offline"))
}

/// nvme subcommands that erase, write, trim or remove namespaces, or
/// reset or reprogram the controller.
pub(super) const NVME_WRITES: &[&str] = &[
    "format",
    "sanitize",
    "write-zeroes",
    "write-uncor",
    "write",
    "delete-ns",
    "detach-ns",
    "dsm",
    "admin-passthru",
    "io-passthru",
    "fw-download",
    "fw-commit",
    "reset",
    "subsystem-reset",
    "security-send",
];

/// cryptsetup actions that destroy keys or headers, or freeze a volume.
pub(super) const CRYPTSETUP_DESTROYS: &[&str] = &[
    "erase",
    "luksErase",
    "luksFormat",
    "reencrypt",
    "luksKillSlot",
    "luksRemoveKey",
    "luksHeaderRestore",
    "luksSuspend",
    "convert",
];

/// hdparm options that erase, lock or write the disk.
pub(super) fn hdparm_erases(vals: &[&str]) -> bool {
    vals.iter().any(|v| {
        v.starts_with("--security-") && *v != "--security-freeze"
            || v.starts_with("--sanitize-") && *v != "--sanitize-status"
            || v.starts_with("--fwdownload")
            || matches!(
                *v,
                "--write-sector"
                    | "--trim-sector-ranges"
                    | "--trim-sector-ranges-stdin"
                    | "--make-bad-sector"
                    | "--dco-restore"
                    | "--dco-setmax"
            )
    })
}

/// mdadm creating, building or growing arrays over disks, wiping their
/// superblocks, or failing and removing a member (`-CR`, `--zero-super`,
/// `mdadm /dev/md0 -f /dev/sda1 -r /dev/sda1`).
pub(super) fn mdadm_destroys(vals: &[&str]) -> bool {
    let manage = vals.first().is_some_and(|v| !v.starts_with('-')) || vals.contains(&"--manage");
    vals.iter().any(|v| {
        ["create", "build", "grow", "fail"]
            .iter()
            .any(|l| is_long_prefix(v, l, 2))
            || is_long_prefix(v, "zero-superblock", 4)
            || is_long_prefix(v, "remove", 3)
            || is_long_prefix(v, "set-faulty", 3)
            || short_cluster(v)
                .is_some_and(|c| c.contains(['C', 'B', 'G']) || manage && c.contains(['f', 'r']))
    })
}

/// lvresize to a size that is not an increase (`-L 1M`, `--size=-5G`).
pub(super) fn shrinks(vals: &[&str]) -> bool {
    let mut sizes = option_values(vals, 'L', "size", "lAiI");
    sizes.extend(option_values(vals, 'l', "extents", "LAiI"));
    sizes.iter().any(|s| !s.starts_with('+'))
}
