//! The policy (the `walissh-policy` crate) held to what only walissh
//! has: its shell integration, which an approved line is typed through,
//! and its sandbox, which a line run unasked goes behind. The policy's own
//! tests are the crate's.

use walissh_policy::oracle::conformance::{self, Runs};
use walissh_policy::oracle::{Integration, Oracle, Shell};

use super::*;
use crate::config::AiMode;

/// walissh's own bash integration, as the bootstrap installs it, for the
/// oracle's typed runs: its script (after the bootstrap's first line), its
/// Enter, and the mark that ends its prompts.
fn integration() -> Integration {
    const NONCE: &str = "0123456789abcdef0123456789abcdef";
    let input = crate::terminal::bootstrap::input(
        crate::terminal::Shell::Bash,
        NONCE,
        false,
        &["?".to_string()],
    );
    let input = String::from_utf8(input).unwrap_or_default();
    Integration {
        script: input
            .split_once('\r')
            .map_or("", |(_, s)| s.trim_end())
            .to_string(),
        accept: crate::terminal::ACCEPT.to_vec(),
        prompt_end: format!("\x1b]133;B;w={NONCE}\x07").into_bytes(),
    }
}

/// A line typed at walissh's integration runs what `bash -c` runs.
#[test]
fn a_typed_line_runs_what_bash_c_runs() {
    let Some(o) = Oracle::new(Some(integration())) else {
        eprintln!("skipped: this machine cannot build the oracle's jail");
        return;
    };
    let line = "echo a; ls -l /tmp | grep x && echo 50%% !! done";
    let mut typed = o.run_typed(line).unwrap();
    let mut plain: Vec<Vec<String>> = o
        .run(Shell::Bash, line)
        .unwrap()
        .into_iter()
        .filter(|a| a[0] != "printf")
        .collect();
    // A pipeline's programs start in either order.
    typed.sort();
    plain.sort();
    assert_eq!(typed, plain);
    assert!(typed.contains(&vec![
        "echo".into(),
        "50%%".into(),
        "!!".into(),
        "done".into()
    ]));
}

/// The asked lines of the policy's corpora and generated stream (one in
/// four), typed into an interactive bash through walissh's integration:
/// the keystroke path runs what `bash -c` runs, and nothing the policy did
/// not see. (The crate's own test holds the unasked lines to every
/// shell.)
#[test]
fn typed_lines_run_what_the_policy_read() {
    let Some(oracle) = Oracle::new(Some(integration())) else {
        eprintln!("skipped: this machine cannot build the oracle's jail");
        return;
    };
    let policy = Policy::new(&[], &["?".to_string(), "ai:".to_string()], false);
    let t = conformance::check(&oracle, &policy, &conformance::lines(), Runs::Typed);
    eprintln!(
        "oracle: {} lines; {} of {} asked lines typed into an interactive bash; \
         {} runs cut short",
        t.lines, t.typed_checked, t.seen_checked, t.unchecked
    );
    assert!(t.typed_checked > 50, "only {} typed", t.typed_checked);
    t.assert_holds(t.typed_checked);
}

/// Every line of the policy's corpora that `auto` runs unasked, run for
/// real behind each wall as a target runs it, in a home of its own: the
/// home and the shared scratch places are the same after each line as
/// before it. The lines a hostile reader wrote to get something past the
/// tables (the policy crate's `tests/policy/`) are among them, with the diagnostics an SRE
/// runs; whatever a table lets through, the wall keeps from changing
/// anything.
#[test]
fn no_line_auto_runs_changes_the_home_or_the_scratch_places() {
    use crate::upstream::sandbox::tests::{run_bounded, scratch, snapshot, walls};
    use crate::upstream::sandbox::{Hide, Wall, command};
    let policy = Policy::new(&[], &["?".to_string()], false);
    let lines: Vec<String> = ["diagnostics.txt", "adversarial.tsv", "hostile30.tsv"]
        .into_iter()
        .flat_map(conformance::corpus)
        .map(|l| l.rsplit('\t').next().unwrap_or(&l).to_string())
        .collect();
    let scripts: Vec<String> = lines
        .iter()
        .filter_map(|l| match policy.check(l, AiMode::Auto) {
            Verdict::Run(script) => Some(script),
            _ => None,
        })
        .collect();
    assert!(
        scripts.len() > 100,
        "only {} lines run unasked",
        scripts.len()
    );
    let tmp = tempfile::tempdir_in("/home").unwrap();
    let home = tmp.path();
    std::fs::create_dir(home.join(".config")).unwrap();
    std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
    std::fs::write(home.join("notes.txt"), "notes\n").unwrap();
    let dir = home.display().to_string();
    let mut changed = Vec::new();
    for wall in walls() {
        for script in &scripts {
            let (mut before, before_scratch) = (Vec::new(), scratch());
            snapshot(home, &mut before);
            let line = format!(
                "{} 2>&1",
                command(script, Some(&dir), wall, &Hide::default())
            );
            run_bounded(&line, home, std::time::Duration::from_secs(3));
            let mut after = Vec::new();
            snapshot(home, &mut after);
            // The shared places change under other processes too (a log
            // being written): there, what counts is a change to a name
            // the line itself spells.
            let named: Vec<String> = scratch()
                .into_iter()
                .filter(|e| !before_scratch.contains(e))
                .map(|e| e.0.display().to_string())
                .filter(|p| {
                    let name = p.rsplit('/').next().unwrap_or(p);
                    script.contains(name)
                })
                .collect();
            if after != before || !named.is_empty() {
                changed.push(format!(
                    "{wall:?}: {script}: home {}, {named:?}",
                    after != before
                ));
            }
        }
    }
    eprintln!(
        "sandbox: {} unasked lines run behind each wall, {} changed something",
        scripts.len(),
        changed.len()
    );
    assert!(changed.is_empty(), "{}", changed.join("\n"));
    // The check can fail: the same kind of line with no wall writes.
    let mut before = Vec::new();
    snapshot(home, &mut before);
    let line = command(
        "'touch' 'written'",
        Some(&dir),
        Wall::None,
        &Hide::default(),
    );
    run_bounded(&line, home, std::time::Duration::from_secs(10));
    let mut after = Vec::new();
    snapshot(home, &mut after);
    assert_ne!(after, before);
}
