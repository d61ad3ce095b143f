//! The destructive rules that need no reading of their own, as data: a
//! program refused whatever its arguments say, or when one of its words
//! is one of a list (`zpool destroy`, `userdel root`). Where a rule needs
//! more (which operand, which option cluster, what a path reaches), it is
//! code, in the files beside this one.
//!
//! What it leaves to others: reading the rest of the command
//! (`deny::command`).

use super::super::word::Word;
use super::power::{CRYPTSETUP_DESTROYS, NVME_WRITES};

/// One rule of the table.
struct Refusal {
    programs: &'static [&'static str],
    when: When,
    /// Why, for the user and the model; `{program}` is the program's name.
    why: &'static str,
}

/// When a program of the table is refused.
enum When {
    Always,
    /// When one of its words (an option, a verb, an operand) is one of
    /// these, as the program's option parser reads it (`spells`).
    AnyWord(&'static [&'static str]),
}

const fn always(programs: &'static [&'static str], why: &'static str) -> Refusal {
    Refusal {
        programs,
        when: When::Always,
        why,
    }
}

const fn any_word(
    programs: &'static [&'static str],
    words: &'static [&'static str],
    why: &'static str,
) -> Refusal {
    Refusal {
        programs,
        when: When::AnyWord(words),
        why,
    }
}

const TABLE: &[Refusal] = &[
    // Disks and volumes.
    always(
        &[
            "mkswap",
            "wipefs",
            "blkdiscard",
            "mkntfs",
            "mkexfatfs",
            "mklost+found",
            "pvremove",
            "vgremove",
            "lvremove",
            "lvreduce",
            "killall5",
            "kexec",
            "rtcwake",
            "pvcreate",
            "sg_format",
            "dcfldd",
            "ddrescue",
            "dd_rescue",
            "zerofree",
            "scrub",
        ],
        "{program} is destructive: it overwrites disks or stops the host",
    ),
    any_word(
        &["nvme"],
        NVME_WRITES,
        "nvme erases, writes or removes a disk",
    ),
    any_word(
        &["cryptsetup"],
        CRYPTSETUP_DESTROYS,
        "cryptsetup destroys, suspends or replaces encrypted volumes' headers",
    ),
    any_word(
        &["zpool"],
        &[
            "destroy",
            "labelclear",
            "create",
            "add",
            "attach",
            "replace",
            "split",
        ],
        "zpool destroys or rewrites disks",
    ),
    any_word(&["zfs"], &["destroy"], "zfs destroys data"),
    any_word(
        &["dmsetup"],
        &[
            "remove_all",
            "wipe_table",
            "remove",
            "clear",
            "load",
            "reload",
            "suspend",
        ],
        "dmsetup removes, suspends or rewrites volumes",
    ),
    any_word(
        &["fsfreeze", "xfs_freeze"],
        &["-f", "--freeze"],
        "{program} freezes a filesystem: every write to it hangs",
    ),
    // Power and init.
    always(
        &[
            "reboot",
            "halt",
            "poweroff",
            "pm-suspend",
            "pm-hibernate",
            "pm-suspend-hybrid",
            "s2ram",
            "s2disk",
            "zzz",
        ],
        "{program} stops the host",
    ),
    any_word(
        &["loginctl"],
        &[
            "poweroff",
            "reboot",
            "halt",
            "suspend",
            "hibernate",
            "hybrid-sleep",
            "suspend-then-hibernate",
            "kexec",
        ],
        "loginctl stops the host",
    ),
    any_word(
        &["machinectl"],
        &["poweroff", "reboot", "kill", "terminate"],
        "machinectl stops machines",
    ),
    always(
        &["rmmod"],
        "rmmod unloads drivers, the network's and the disks' among them",
    ),
    // Accounts.
    any_word(
        &["userdel", "groupdel", "deluser", "delgroup"],
        &["root", "0"],
        "{program} removes root",
    ),
    always(
        &["chpasswd", "chgpasswd", "newusers"],
        "{program} sets passwords from its input, which walissh cannot see (root's among them)",
    ),
    // The agent cannot drive a full-screen program, and one left open
    // holds the user's shell.
    always(
        &[
            "vi", "vim", "nvim", "view", "nano", "pico", "emacs", "joe", "mcedit", "ed", "less",
            "more", "most", "man", "top", "htop", "atop", "iotop", "nmon", "watch", "tmux",
            "screen", "mc", "vipw", "sudoedit",
        ],
        "{program} is interactive: the agent cannot drive it \
         (read with cat, head, tail or grep; top -bn1 for top)",
    ),
];

/// Why the table refuses `program` with these words, if it does. A word
/// that is no literal (`$'--freeze'`, `--fr${X}`) may be any of a rule's
/// words: walissh cannot tell, so it refuses.
pub(super) fn refused(program: &str, words: &[Word]) -> Option<String> {
    let rule = TABLE.iter().find(|r| r.programs.contains(&program))?;
    let why = rule.why.replace("{program}", program);
    match rule.when {
        When::Always => Some(why),
        When::AnyWord(listed) => words.iter().find_map(|w| match w.lit.as_deref() {
            Some(v) => listed
                .iter()
                .any(|option| spells(v, option))
                .then(|| why.clone()),
            None => Some(format!(
                "{why}, and `{}` is no literal walissh can read",
                w.raw
            )),
        }),
    }
}

/// Whether `word` says `listed` to a program that reads its options with
/// getopt: exactly; a long option by any prefix of its name, with or
/// without `=value` (getopt_long takes `--freez` for `--freeze`, and the
/// program's other options cannot make a prefix of one of them mean
/// anything else but ambiguous, which is refused too); a short option
/// anywhere in a cluster (`-vf`). Verbs and operands only exactly.
fn spells(word: &str, listed: &str) -> bool {
    if word == listed {
        return true;
    }
    if let Some(name) = listed.strip_prefix("--") {
        let said = word
            .strip_prefix("--")
            .map(|w| w.split('=').next().unwrap_or(w));
        return said.is_some_and(|s| !s.is_empty() && name.starts_with(s));
    }
    let short = listed
        .strip_prefix('-')
        .filter(|l| l.len() == 1)
        .and_then(|l| l.chars().next());
    let cluster = word
        .strip_prefix('-')
        .filter(|w| !w.starts_with('-') && w.len() > 1);
    match (short, cluster) {
        (Some(letter), Some(cluster)) => cluster.contains(letter),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `refused` on words that are all literals.
    fn says(program: &str, words: &[&str]) -> Option<String> {
        let words: Vec<Word> = words.iter().map(|w| Word::known(w)).collect();
        refused(program, &words)
    }

    /// A word walissh cannot read may say what a row refuses: refused,
    /// saying which word. A row refused always is refused as before.
    #[test]
    fn a_word_that_is_no_literal_is_refused_where_a_word_decides() {
        let unknown = [Word::unknown("$'--freeze'"), Word::known("/")];
        let why = refused("fsfreeze", &unknown).expect("refused");
        assert!(why.contains("`$'--freeze'` is no literal"), "{why}");
        assert!(refused("zfs", &[Word::unknown("$VERB"), Word::known("pool/x")]).is_some());
        assert_eq!(
            refused("reboot", &[Word::unknown("$X")]).as_deref(),
            Some("reboot stops the host")
        );
        assert!(refused("ls", &[Word::unknown("$X")]).is_none());
    }

    /// A program is in the table once: the first rule naming it would
    /// hide a later one.
    #[test]
    fn each_program_is_named_once() {
        let mut seen = std::collections::HashSet::new();
        for p in TABLE.iter().flat_map(|r| r.programs) {
            assert!(seen.insert(*p), "{p} is named twice");
        }
    }

    #[test]
    fn words_must_match_exactly() {
        assert!(says("zfs", &["list"]).is_none());
        assert!(says("zfs", &["destroy", "pool/x"]).is_some());
        assert!(says("zfs", &["destroyed"]).is_none());
        assert_eq!(
            says("deluser", &["root"]).as_deref(),
            Some("deluser removes root")
        );
        assert!(says("ls", &[]).is_none());
    }

    /// Options as getopt reads them: a long one by a prefix of its name,
    /// a short one inside a cluster.
    #[test]
    fn options_are_read_as_getopt_reads_them() {
        for freeze in ["--freez", "--fr", "--f", "--freeze=x", "-f", "-uf", "-ff"] {
            assert!(says("fsfreeze", &[freeze, "/srv"]).is_some(), "{freeze}");
        }
        for other in [
            "--unfreeze",
            "--u",
            "--frx",
            "--",
            "-u",
            "--freezer",
            "f",
            "-",
        ] {
            assert!(says("fsfreeze", &[other, "/srv"]).is_none(), "{other}");
        }
    }

    /// Checked against the real `fsfreeze`: every word it reads as
    /// `--freeze` is refused. Beside `-u`, a word that freezes makes it
    /// say the two are mutually exclusive, before it opens anything (the
    /// mount point does not exist either).
    #[test]
    fn every_word_fsfreeze_reads_as_freeze_is_says() {
        if std::process::Command::new("fsfreeze")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("fsfreeze is not installed: skipped");
            return;
        }
        let mut words: Vec<String> = Vec::new();
        for long in ["--freeze", "--unfreeze", "--help", "--version"] {
            for end in 3..=long.len() {
                words.push(long[..end].to_string());
                words.push(format!("{}=1", &long[..end]));
            }
        }
        for cluster in [
            "-f", "-u", "-fu", "-uf", "-ff", "-Vf", "-x", "-fx", "--fx", "--frezze",
        ] {
            words.push(cluster.to_string());
        }
        let mut freezing = 0;
        for word in &words {
            let out = std::process::Command::new("fsfreeze")
                .args(["-u", word, "/nonexistent-walissh-mount"])
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stderr);
            if said.contains("mutually exclusive") {
                freezing += 1;
                assert!(says("fsfreeze", &["-u", word]).is_some(), "{word}: {said}");
            }
        }
        assert!(
            freezing >= 8,
            "fsfreeze read only {freezing} words as --freeze"
        );
    }
}
