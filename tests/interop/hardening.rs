//! The login and session surface under attack (issue 14), with the real
//! OpenSSH client against walissh on loopback.

use crate::harness::*;

/// A local target's commands are started in a session of their own and
/// with only stdin, stdout and stderr: a `run_as` account must not reach
/// the terminal walissh was started from (TIOCSTI would type into the
/// administrator's shell) nor any descriptor walissh holds.
#[test]
fn local_commands_get_no_terminal_and_no_descriptor_of_walissh() {
    if !is_root() {
        eprintln!("skipped: run_as needs the tests to run as root (CI does)");
        return;
    }
    let b = Bastion::start_with(Opts {
        on_a_terminal: true,
        ..Opts::default()
    });
    // walissh itself has a controlling terminal here.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", b.pid())).unwrap();
    let tty_nr: i64 = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().nth(4))
        .and_then(|f| f.parse().ok())
        .unwrap();
    assert_ne!(
        tty_nr, 0,
        "the test did not give walissh a terminal: {stat}"
    );
    // The shell's descriptors, listed by a child (a glob would list the
    // directory the shell opened to read it).
    let probe = "if (exec 3</dev/tty) 2>/dev/null; then echo HAS-TTY; else echo NO-TTY; fi; \
                 ls /proc/$$/fd | sed 's/^/fd /'";
    let out = exec(b.ssh_pw("carol:jail", CAROL_PW), probe);
    let text = stdout(&out);
    assert!(text.contains("NO-TTY"), "{text}\nstderr: {}", stderr(&out));
    let fds: Vec<u32> = text
        .lines()
        .filter_map(|l| l.strip_prefix("fd ")?.parse().ok())
        .collect();
    assert!(!fds.is_empty(), "{text}");
    assert!(
        fds.iter().all(|fd| *fd <= 2 || *fd == 255),
        "descriptors beyond stdio reached the account's shell: {fds:?}"
    );
}
