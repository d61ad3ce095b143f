//! Storage faults (issue 18): the state directory on a small tmpfs that
//! fills up (the audit database and the recordings both fail), or only the
//! database's (the recordings on a tmpfs of their own), under both
//! `[audit] on_failure` policies. What must hold: new sessions are refused (or warned) as the
//! docs say, running sessions go on, nothing is dropped silently (the
//! audit rows of the outage are written once the storage is back, and the
//! recording says how much output it missed), and walissh recovers by
//! itself. Mounting needs root: as another user these tests are skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::*;
use crate::lifecycle::read_cast;

/// A tmpfs mounted for a test; unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs on `dir`, keeping the files already in it (the
    /// upstream key the target trusts).
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let kept: Vec<(std::ffi::OsString, Vec<u8>, std::fs::Permissions)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| {
                let meta = e.metadata().unwrap();
                (
                    e.file_name(),
                    std::fs::read(e.path()).unwrap(),
                    meta.permissions(),
                )
            })
            .collect();
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .unwrap();
        if !ok.success() {
            // Root without the right to mount (an unprivileged container).
            return None;
        }
        for (name, bytes, perms) in kept {
            std::fs::write(dir.join(&name), bytes).unwrap();
            std::fs::set_permissions(dir.join(&name), perms).unwrap();
        }
        Some(Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// The disk under the whole state directory fills up.
    Full,
    /// The disk under the audit database fills up; the recordings have
    /// room of their own.
    DatabaseOnly,
}

/// Fills the file system under `dir` to the last byte; returns the filler.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 64 << 10];
    while f.write_all(&chunk).and_then(|_| f.sync_all()).is_ok() {}
    // Whatever is left below a chunk, byte by byte in small writes.
    while f.write_all(&[0u8; 512]).and_then(|_| f.sync_all()).is_ok() {}
    path
}

fn storage_fault(policy: &'static str, fault: Fault) {
    if !is_root() {
        eprintln!("skipped: mounting a tmpfs needs root (CI runs as root)");
        return;
    }
    let mount = std::rc::Rc::new(std::cell::RefCell::new(None));
    let slot = mount.clone();
    let b = Bastion::start_with(Opts {
        on_failure: policy,
        extra_toml: "[web]\nlisten = \"127.0.0.1:0\"\n".to_string(),
        prepare: Some(Box::new(move |state, _| {
            let Some(outer) = Tmpfs::mount(state, "16m") else {
                return;
            };
            let inner = match fault {
                Fault::DatabaseOnly => Tmpfs::mount(&state.join("recordings"), "64m"),
                Fault::Full => None,
            };
            *slot.borrow_mut() = Some((inner, outer));
        })),
        ..Opts::default()
    });
    let Some(mount) = mount.borrow_mut().take() else {
        eprintln!("skipped: this machine does not let even root mount a tmpfs");
        return;
    };
    // A session that runs through the whole outage.
    let mut t = Terminal::spawn(&b.ssh_bob("bob:web1"), 24, 80);
    t.send("echo BEFORE-$((1+1))\r");
    t.expect("BEFORE-2");
    b.wait_event(|e| e["command"] == "echo BEFORE-$((1+1))");

    let filler = fill(&b.state);
    // The running session goes on, and its commands are audited late; its
    // output (some 2 MB) outgrows what the recording's file had room for.
    t.send("seq 1 300000; echo DURING-$((2+2))\r");
    t.expect("DURING-4");
    let broken = b.log.wait_for("audit database write failed");
    // The console's health check says so (and the systemd watchdog, fed
    // by the same check, goes hungry).
    let health = format!("{}/healthz", b.web_url());
    assert_eq!(http_status(&health), "503");
    // A new session meets the policy.
    let out = exec(b.ssh_pw("alice:web1", ALICE_PW), "echo NEW-$((3+3))");
    match policy {
        "refuse" => {
            assert!(!stdout(&out).contains("NEW-6"), "{}", stdout(&out));
            assert!(
                stderr(&out).contains("cannot be written"),
                "{}",
                stderr(&out)
            );
            assert_eq!(out.status.code(), Some(1));
        }
        _ => {
            assert_eq!(stdout(&out), "NEW-6\n");
            assert!(stderr(&out).contains("WARNING: "), "{}", stderr(&out));
        }
    }
    // The storage comes back; walissh catches up by itself.
    std::fs::remove_file(filler).unwrap();
    // /healthz waits for the recordings too: one whose writes failed
    // resumes at its next try, and one that could not be created (a new
    // session's, when it was admitted before the fault was seen) is tried
    // again every second, until it can be. It says ok by itself.
    caught_up(&b, broken, &health);
    t.send("echo RESUMED-$((5+5))\r");
    t.expect("RESUMED-10");
    t.send("exit\r");
    t.wait();
    b.wait_kind("session_end");
    // Nothing of the outage was dropped: the command typed during it is
    // in the audit, and the recording says what it missed.
    let audit = b.audit();
    assert!(
        audit.iter().any(|e| e["kind"] == "command"
            && e["command"] == "seq 1 300000; echo DURING-$((2+2))"),
        "the outage's command row is missing"
    );
    let first = &b.sessions()[0];
    let (_, events) = read_cast(first["recording"].as_str().unwrap());
    let out = crate::lifecycle::output_of(&events);
    let marker = "bytes of output were not recorded: the storage failed]";
    match fault {
        Fault::Full => {
            // The recording says what it missed, and then records on. The
            // command typed after the outage is recorded, unless it fell in
            // the gap too (the retry is once a second): then a marker comes
            // after everything recorded before it.
            assert!(out.contains(marker), "no gap marker: {out}");
            let last_gap = out.rfind(marker).unwrap();
            let before = out.rfind("DURING-4").unwrap_or(0);
            let resumed = out.contains("RESUMED-10");
            assert!(
                resumed || last_gap > before,
                "RESUMED-10 dropped unmarked: {out}"
            );
        }
        Fault::DatabaseOnly => {
            assert!(
                !out.contains(marker),
                "the recording had room, yet has a gap"
            );
            assert!(out.contains("\n300000\r"), "output is missing");
            assert!(out.contains("RESUMED-10"), "the recording stopped: {out}");
        }
    }
    drop(b);
    drop(mount);
}

#[test]
fn a_full_disk_under_refuse() {
    storage_fault("refuse", Fault::Full);
}

#[test]
fn a_full_disk_under_continue() {
    storage_fault("continue", Fault::Full);
}

#[test]
fn an_unwritable_database_under_refuse() {
    storage_fault("refuse", Fault::DatabaseOnly);
}

#[test]
fn an_unwritable_database_under_continue() {
    storage_fault("continue", Fault::DatabaseOnly);
}
