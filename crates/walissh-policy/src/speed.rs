//! The policy's speed (`bench/policy`, an ignored test run in release):
//! a check of each line of the corpora, and of lines made to be slow, up
//! to the longest the policy reads. It owns only the inputs and the
//! figures; the bounds it shows are the check's own ([`crate::MAX_LINE`],
//! the parse's and the reading's time budgets).

use std::time::Instant;

use crate::oracle::conformance::corpus;
use crate::{AiMode, MAX_LINE, Policy, Verdict};

/// The median of five timed checks of `line`, after one unmeasured, in
/// milliseconds; and what the policy said.
fn timed(policy: &Policy, line: &str) -> (f64, &'static str) {
    let verdict = policy.check(line, AiMode::Auto);
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(policy.check(line, AiMode::Auto));
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let said = match verdict {
        Verdict::Run(_) => "run",
        Verdict::Ask(_) => "ask",
        Verdict::Deny(_) => "deny",
    };
    (times[2], said)
}

/// `unit` repeated until the line is `size` bytes long, about.
fn filled(unit: &str, size: usize) -> String {
    unit.repeat((size - 64) / unit.len())
}

/// `open` nested around `inner` and closed by `close`, as deep as `size`
/// bytes allow.
fn nested(open: &str, inner: &str, close: &str, size: usize) -> String {
    let depth = (size - 64) / (open.len() + close.len());
    format!("{}{inner}{}", open.repeat(depth), close.repeat(depth))
}

/// Lines of about `size` bytes that each stress one part: the parse
/// (many words, commands, pipes, quotes, substitutions), the reading
/// through wrappers and inner scripts, the checks of operands.
fn hostile(size: usize) -> Vec<(&'static str, String)> {
    vec![
        (
            "one command of many words",
            format!("ls{}", filled(" -la", size)),
        ),
        ("many commands", filled("ls -la; ", size)),
        (
            "a long pipeline",
            format!("cat /etc/hosts{}", filled(" | grep -v x", size)),
        ),
        (
            "quotes of every kind",
            format!("echo{}", filled(" 'a'\"b\"$'c'\\d", size)),
        ),
        ("nested substitutions", nested("echo $(", "id", ")", size)),
        ("nested subshells", nested("(", "id", ")", size)),
        ("nested functions", nested("f(){ ", "id;", " };", size)),
        (
            "nested expansions",
            format!("echo {}", nested("${a:-", "x", "}", size)),
        ),
        (
            "wrappers in a chain",
            format!("{}ls", filled("env nice timeout 5 ", size)),
        ),
        (
            "inner scripts in inner scripts",
            nested("bash -c \"", "id", "\"", size),
        ),
        (
            "find with many actions",
            format!("find /var/log{}", filled(" -name x -print", size)),
        ),
        (
            "paths to check",
            format!("cat{}", filled(" /etc/../etc/./hosts", size)),
        ),
        (
            "unclosed quotes and brackets",
            filled("'( $( \" ${ `", size),
        ),
        ("a here-string per command", filled("cat <<< x; ", size)),
    ]
}

#[test]
#[ignore = "a benchmark: bench/policy runs it in release"]
fn policy_speed() {
    let policy = Policy::new(&[], &["?".to_string()], false);
    for file in ["diagnostics.txt", "adversarial.tsv", "hostile30.tsv"] {
        let lines: Vec<String> = corpus(file)
            .into_iter()
            .map(|l| l.rsplit('\t').next().unwrap_or(&l).to_string())
            .collect();
        let mut times: Vec<f64> = lines.iter().map(|l| timed(&policy, l).0).collect();
        times.sort_by(f64::total_cmp);
        println!(
            "{:34} {:>5} lines: median {:7.3} ms, slowest {:7.3} ms",
            file,
            lines.len(),
            times[times.len() / 2],
            times[times.len() - 1]
        );
    }
    // Linear: a line four times as long takes about four times as long.
    // `POLICY_BENCH=words` times only the lines whose name holds them, for
    // a profiler's run.
    let only = std::env::var("POLICY_BENCH").unwrap_or_default();
    let quarter = hostile(MAX_LINE / 4);
    for ((name, line), (_, short)) in hostile(MAX_LINE).into_iter().zip(quarter) {
        if !name.contains(only.as_str()) {
            continue;
        }
        assert!(line.len() <= MAX_LINE, "{name}: {} bytes", line.len());
        let (ms, said) = timed(&policy, &line);
        let (short_ms, _) = timed(&policy, &short);
        println!(
            "{name:34} {:>5} bytes: {ms:8.3} ms ({said}), {:4.1} times a quarter of it",
            line.len(),
            ms / short_ms.max(0.001)
        );
    }
}
