//! The wrappers that run the command after their own options, as data:
//! each one's option grammar (`getopt::Spec`), and how many operands of
//! its own come before the command (`timeout 5 CMD`). A wrapper whose
//! options cannot be read this way (a script option, a command inside an option,
//! too many options to model) is code, in `wrappers` and `programs`.
//!
//! What it leaves to others: reading a line's words with a row
//! (`wrappers::wrapped`).

use super::Spec;

/// One wrapper of the table.
pub(super) struct Wrapper {
    /// The names it is run by.
    pub(super) programs: &'static [&'static str],
    /// Its options (they stop at its first operand).
    pub(super) spec: Spec,
    /// Its own operands before the command it runs.
    pub(super) operands: usize,
}

/// The wrapper `program` is, if it is one of the table.
pub(super) fn wrapper(program: &str) -> Option<&'static Wrapper> {
    TABLE.iter().find(|w| w.programs.contains(&program))
}

/// A row whose options are all short, and no operand of its own.
const fn short(
    programs: &'static [&'static str],
    flags: &'static str,
    values: &'static str,
) -> Wrapper {
    Wrapper {
        programs,
        spec: Spec::wrapper(flags, values),
        operands: 0,
    }
}

const TABLE: &[Wrapper] = &[
    Wrapper {
        programs: &["sudo"],
        spec: Spec {
            long_flags: &[
                "login",
                "shell",
                "non-interactive",
                "stdin",
                "askpass",
                "background",
                "set-home",
                "preserve-groups",
                "reset-timestamp",
                "remove-timestamp",
                "edit",
                "bell",
                "list",
                "validate",
            ],
            long_values: &[
                "user",
                "group",
                "chdir",
                "chroot",
                "close-from",
                "host",
                "prompt",
                "role",
                "type",
                "command-timeout",
                "other-user",
            ],
            long_optional: &["preserve-env"],
            ..Spec::wrapper("AbEHiKklnPSsVe", "CDghpRTUurt")
        },
        operands: 0,
    },
    short(&["doas"], "Lns", "Cu"),
    Wrapper {
        programs: &["pkexec"],
        spec: Spec {
            long_values: &["user"],
            long_flags: &["disable-internal-agent", "keep-cwd"],
            ..Spec::wrapper("", "")
        },
        operands: 0,
    },
    Wrapper {
        programs: &["nice"],
        spec: Spec {
            long_values: &["adjustment"],
            ..Spec::wrapper("0123456789", "n")
        },
        operands: 0,
    },
    Wrapper {
        programs: &["ionice"],
        spec: Spec {
            long_values: &["class", "classdata", "pid", "pgid", "uid"],
            long_flags: &["ignore"],
            ..Spec::wrapper("t", "cnpPu")
        },
        operands: 0,
    },
    Wrapper {
        programs: &["time"],
        spec: Spec {
            long_flags: &["portability", "verbose", "append", "quiet"],
            long_values: &["format", "output"],
            ..Spec::wrapper("pavq", "fo")
        },
        operands: 0,
    },
    // `timeout DURATION CMD`.
    Wrapper {
        programs: &["timeout"],
        spec: Spec {
            long_flags: &["foreground", "preserve-status", "verbose"],
            long_values: &["kill-after", "signal"],
            ..Spec::wrapper("fpv", "ks")
        },
        operands: 1,
    },
    Wrapper {
        programs: &["stdbuf"],
        spec: Spec {
            long_values: &["input", "output", "error"],
            ..Spec::wrapper("", "ioe")
        },
        operands: 0,
    },
    short(
        &[
            "nohup",
            "noglob",
            "nocorrect",
            "-",
            "builtin",
            "catchsegv",
            "unbuffer",
            "proxychains",
            "proxychains4",
            "torsocks",
            "firejail",
            "run0",
        ],
        "",
        "",
    ),
    Wrapper {
        programs: &["setsid"],
        spec: Spec {
            long_flags: &["ctty", "fork", "wait"],
            ..Spec::wrapper("cfw", "")
        },
        operands: 0,
    },
    short(&["command"], "pvV", ""),
    short(&["exec"], "cl", "a"),
    // `chroot NEWROOT CMD`.
    Wrapper {
        programs: &["chroot"],
        spec: Spec {
            long_values: &["userspec", "groups"],
            long_flags: &["skip-chdir"],
            ..Spec::wrapper("", "")
        },
        operands: 1,
    },
    // `taskset MASK CMD`, `chrt PRIORITY CMD`.
    Wrapper {
        programs: &["taskset"],
        spec: Spec::wrapper("acp", ""),
        operands: 1,
    },
    Wrapper {
        programs: &["chrt"],
        spec: Spec::wrapper("abdefiomprRv", "TPD"),
        operands: 1,
    },
    Wrapper {
        programs: &["ltrace"],
        spec: Spec {
            long_values: &["output", "library", "config", "align", "indent"],
            long_flags: &["demangle", "no-signals"],
            ..Spec::wrapper("bcCfhiLrStTV", "aAeFlnopsuwxX")
        },
        operands: 0,
    },
    Wrapper {
        programs: &["strace"],
        spec: Spec {
            long_values: &["trace", "output", "attach", "signal", "user", "env"],
            long_flags: &["follow-forks", "summary-only", "output-separately"],
            ..Spec::wrapper("fFhiqrtTvVxyzCcDwZkn", "abeEIoOpPsSuUXA")
        },
        operands: 0,
    },
    // `-e` is `--env` since util-linux 2.40; `-S` and `-G` take optional
    // values there.
    Wrapper {
        programs: &["nsenter"],
        spec: Spec {
            optional: "muinpUCTrwSG",
            long_values: &["target", "setuid", "setgid", "env"],
            long_flags: &[
                "all",
                "no-fork",
                "preserve-credentials",
                "follow-context",
                "keep-caps",
                "join-cgroup",
            ],
            long_optional: &[
                "mount",
                "uts",
                "ipc",
                "net",
                "pid",
                "user",
                "cgroup",
                "time",
                "root",
                "wd",
                "user-parent",
            ],
            ..Spec::wrapper("aFZe", "t")
        },
        operands: 0,
    },
    Wrapper {
        programs: &["unshare"],
        spec: Spec {
            long_flags: &[
                "fork",
                "kill-child",
                "map-root-user",
                "map-current-user",
                "keep-caps",
                "mount-proc",
            ],
            long_values: &[
                "propagation",
                "setgroups",
                "map-user",
                "map-group",
                "map-users",
                "map-groups",
                "root",
                "wd",
                "setuid",
                "setgid",
                "monotonic",
                "boottime",
            ],
            long_optional: &[
                "mount", "uts", "ipc", "net", "pid", "user", "cgroup", "time", "map-auto",
            ],
            ..Spec::wrapper("fmuinpUCTrcl", "RWSG")
        },
        operands: 0,
    },
    Wrapper {
        programs: &["setpriv"],
        spec: Spec {
            long_flags: &[
                "nnp",
                "no-new-privs",
                "init-groups",
                "clear-groups",
                "keep-groups",
                "reset-env",
                "dump",
            ],
            long_values: &[
                "reuid",
                "regid",
                "ruid",
                "rgid",
                "euid",
                "egid",
                "groups",
                "inh-caps",
                "ambient-caps",
                "bounding-set",
                "securebits",
                "pdeathsig",
                "selinux-label",
                "apparmor-profile",
                "landlock-access",
                "landlock-rule",
                "ptracer",
            ],
            ..Spec::wrapper("d", "")
        },
        operands: 0,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A program is in the table once, and the code's own wrappers are
    /// not in it: a row would hide them.
    #[test]
    fn each_wrapper_is_named_once() {
        let mut seen = std::collections::HashSet::new();
        for p in TABLE.iter().flat_map(|w| w.programs) {
            assert!(seen.insert(*p), "{p} is named twice");
            assert!(
                !matches!(
                    *p,
                    "env" | "su" | "sh" | "bash" | "script" | "xargs" | "find" | "flock"
                ),
                "{p} is read by code"
            );
        }
    }
}
