//! The manual: `walissh(1)` and a page for each subcommand
//! (`walissh-serve(1)`, `walissh-audit-verify(1)`, …), the pages the main
//! one names. Their synopsis, options and subcommands come from the CLI's
//! own definition (`clap_mangen`), so they cannot drift from it; what the
//! definition cannot know is added here: ENVIRONMENT, FILES, EXIT STATUS,
//! SIGNALS and SEE ALSO.
//!
//! It also makes the shells' completion scripts, and keeps the copies the
//! package installs (`packaging/`) equal to what it makes (a test fails
//! on a stale one; `tools/gen-packaging` writes them again), so `cargo
//! deb` needs no step before it.
//!
//! What it leaves to others: the CLI itself (`lib.rs`).

use std::fmt::Write as _;

/// Every page, as (file name, roff), the main page first.
pub(crate) fn pages(mut cli: clap::Command) -> Vec<(String, String)> {
    cli = cli.disable_help_subcommand(true);
    // Gives each subcommand its display name (`walissh-audit-verify`).
    cli.build();
    let mut out = Vec::new();
    add(&cli, &mut Vec::new(), &mut out);
    out
}

/// `cmd`'s page, then its subcommands', depth first. `path` names `cmd`
/// under `walissh` (`["audit", "verify"]`): a display name cannot, as a
/// subcommand's name may hold a `-` of its own (`check-config`).
fn add<'c>(cmd: &'c clap::Command, path: &mut Vec<&'c str>, out: &mut Vec<(String, String)>) {
    out.push(page(cmd, path));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        path.push(sub.get_name());
        add(sub, path, out);
        path.pop();
    }
}

fn page(cmd: &clap::Command, path: &[&str]) -> (String, String) {
    let man = clap_mangen::Man::new(cmd.clone()).date("");
    let name = man.get_filename();
    let mut roff = Vec::new();
    // Into memory: no write can fail.
    let _ = man.render(&mut roff);
    let mut roff = String::from_utf8_lossy(&roff).into_owned();
    // The main page speaks for every subcommand; another reads a config
    // when it takes `-c` (global, so its own subcommands take it too).
    let reads_config =
        path.is_empty() || cmd.get_arguments().any(|a| a.get_long() == Some("config"));
    sections(&mut roff, path, reads_config, &subcommands(cmd));
    (name, roff)
}

/// The pages of `cmd`'s subcommands, for SEE ALSO.
fn subcommands(cmd: &clap::Command) -> Vec<String> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set())
        .filter_map(|s| s.get_display_name().map(str::to_string))
        .collect()
}

/// Appends the sections the CLI's definition cannot give, for the page of
/// the subcommand named by `words` (none: the main page).
fn sections(roff: &mut String, words: &[&str], reads_config: bool, subs: &[String]) {
    let first = words.first().copied();
    section(roff, "ENVIRONMENT");
    if reads_config {
        item(
            roff,
            "WALISSH_CONFIG",
            "The config file, when \\fB\\-c\\fR is not given.",
        );
    }
    item(
        roff,
        "RUST_LOG",
        "What to log, when \\fB\\-\\-log\\-level\\fR is not given.",
    );
    item(
        roff,
        "WALISSH_LOG_FORMAT",
        "\\fBjson\\fR: one JSON object a line on stderr, for log collectors.",
    );
    item(roff, "NO_COLOR", "Set and not empty: no colour in the log.");
    if reads_config {
        section(roff, "FILES");
        item(
            roff,
            "/etc/walissh/walissh.toml",
            "The config, when it exists and no other is named; else the embedded \
             default (\\fBwalissh check\\-config\\fR prints which).",
        );
        item(
            roff,
            "/var/lib/walissh",
            "The state directory (\\fB[server] state_dir\\fR): the host and \
             upstream keys, \\fBaudit.db\\fR (the audit trail, hash\\-chained and \
             signed with \\fBaudit_key\\fR), \\fBrecordings/\\fR (asciicast v2).",
        );
        item(
            roff,
            "./walissh\\-state",
            "The embedded default's state directory, in the directory walissh \
             started in; the reading subcommands look there when no config names one.",
        );
    }
    section(roff, "EXIT STATUS");
    let _ = writeln!(roff, "{}", exit_status(first, words.get(1).copied()));
    section(roff, "SIGNALS");
    let _ = writeln!(roff, "{}", signals(first));
    section(roff, "SEE ALSO");
    let mut see: Vec<String> = match words.is_empty() {
        true => subs.to_vec(),
        false => vec!["walissh".into()],
    };
    if words.len() > 1 {
        see.push(format!("walissh-{}", words[0]));
    }
    if words.is_empty() {
        see.extend(["ssh".into(), "sshd".into(), "asciinema".into()]);
    }
    let refs: Vec<String> = see
        .iter()
        .map(|p| format!("\\fB{}\\fR(1)", p.replace('-', "\\-")))
        .collect();
    let _ = writeln!(roff, "{}", refs.join(", "));
}

fn exit_status(first: Option<&str>, second: Option<&str>) -> &'static str {
    match (first, second) {
        (Some("serve"), _) => {
            "0 once a shutdown asked for by a signal is done; 1 when the bastion \
             cannot start (a bad config, a port taken, a state directory it \
             cannot write), with one line on stderr; 2 bad usage."
        }
        (Some("check-config"), _) => {
            "0 when the config is valid; 1 naming the file, line and key of the \
             first error; 2 bad usage."
        }
        (Some("audit"), Some("verify")) => {
            "0 only when the chain, every checkpoint, the head and every finished \
             recording are intact; 1 with what failed; 2 bad usage."
        }
        (Some("redact"), _) => {
            "0 success; 1 a bad config or a file that cannot be read; 2 input over \
             64 MiB, or bad usage."
        }
        _ => {
            "0 success, also when whoever reads the output stops early \
             (\\fBwalissh audit | head \\-1\\fR); 1 an error, told in one line on \
             stderr; 2 bad usage."
        }
    }
}

/// What `serve` does on each signal (a macro: `concat!` takes only
/// literals).
macro_rules! serve_signals {
    () => {
        "SIGHUP reloads the config (a bad one is refused and the running one \
         kept); SIGTERM and SIGINT stop accepting, tell each session's user, \
         close its audit rows and recording, and flush the audit database \
         before exiting (at most about 15 s)."
    };
}

fn signals(first: Option<&str>) -> &'static str {
    match first {
        Some("serve") => serve_signals!(),
        None => concat!(
            "\\fBwalissh serve\\fR: ",
            serve_signals!(),
            " Other subcommands end at once on SIGINT or SIGTERM."
        ),
        Some("audit") => {
            "SIGINT or SIGTERM ends it at once, \\fB\\-\\-follow\\fR too; the audit \
             database is only read."
        }
        _ => "SIGINT or SIGTERM ends it at once.",
    }
}

fn section(roff: &mut String, title: &str) {
    let _ = writeln!(roff, ".SH {title}");
}

fn item(roff: &mut String, tag: &str, text: &str) {
    let _ = writeln!(roff, ".TP\n\\fB{tag}\\fR\n{text}");
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// What the package installs that the CLI's definition makes, as (path
    /// under `packaging/`, text): the pages and the bash, zsh and fish
    /// completions.
    fn packaged(cli: clap::Command) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = super::pages(cli.clone())
            .into_iter()
            .map(|(name, roff)| (format!("man/{name}"), roff))
            .collect();
        use clap_complete::Shell;
        for (shell, file) in [
            (Shell::Bash, "walissh.bash"),
            (Shell::Zsh, "_walissh"),
            (Shell::Fish, "walissh.fish"),
        ] {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cli.clone(), "walissh", &mut script);
            let script = String::from_utf8_lossy(&script).into_owned();
            out.push((format!("completions/{file}"), script));
        }
        out
    }

    /// The copies under `packaging/` are what the CLI makes today; with
    /// `WALISSH_BLESS=1` they are written again (`tools/gen-packaging`).
    #[test]
    fn the_packaged_pages_and_completions_are_current() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging");
        let bless = std::env::var_os("WALISSH_BLESS").is_some();
        let mut stale = Vec::new();
        for (path, text) in packaged(crate::Cli::command()) {
            let file = dir.join(&path);
            if std::fs::read_to_string(&file).ok().as_deref() == Some(text.as_str()) {
                continue;
            }
            if bless {
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, text).unwrap();
            } else {
                stale.push(path);
            }
        }
        assert!(
            stale.is_empty(),
            "stale under packaging/ (run tools/gen-packaging): {stale:?}"
        );
    }

    #[test]
    fn every_page_the_main_page_names_is_made() {
        let pages = super::pages(crate::Cli::command());
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        let main = &pages[0].1;
        for sub in ["serve", "check-config", "audit", "redact", "play"] {
            let name = format!("walissh-{sub}.1");
            assert!(names.contains(&name.as_str()), "{names:?}");
            let named = format!("walissh-{sub}(1)").replace('-', "\\-");
            assert!(main.contains(&named), "{main}");
        }
        assert!(names.contains(&"walissh-audit-verify.1"), "{names:?}");
        for (name, roff) in &pages {
            for section in [".SH EXIT STATUS", ".SH SIGNALS", ".SH SEE ALSO"] {
                assert!(roff.contains(section), "{name} lacks {section}");
            }
        }
        let page = |name: &str| &pages.iter().find(|(n, _)| n == name).unwrap().1;
        let serve = page("walissh-serve.1");
        assert!(serve.contains("SIGHUP reloads") && serve.contains(".SH FILES"));
        // A subcommand whose name holds a `-` gets its own sections, and
        // names no page that does not exist.
        let check = page("walissh-check-config.1");
        assert!(check.contains(".SH FILES"), "{check}");
        assert!(check.contains("naming the file, line and key"), "{check}");
        let hash = page("walissh-hash-password.1");
        assert!(!hash.contains(".SH FILES"), "{hash}");
        assert!(!hash.contains("walissh\\-hash\\fR(1)"), "{hash}");
        assert!(page("walissh-audit-verify.1").contains("only when the chain"));
    }
}
