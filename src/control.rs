//! The control socket: how `walissh sessions kill` and `walissh approve`,
//! run on the bastion's host, reach the running bastion.
//!
//! What it owns: the socket (`<state_dir>/control.sock`, the bastion's
//! own: 0700 by the process's mode mask, in a state directory that is
//! 0700 too, so only its account and root can connect), its one-line
//! JSON requests and answers, their bounds, and who a request is from
//! (the peer's account, from the kernel: `unix:NAME` in the audit). What
//! it leaves to others: what a request does (`session::kill`,
//! `agent::four_eyes`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

use crate::bastion::Bastion;
use crate::shutdown::Watcher;

/// The socket's name in the state directory.
const SOCKET: &str = "control.sock";
/// Requests served at once; more wait for the kernel's backlog.
const AT_ONCE: usize = 8;
/// The longest request line.
const MAX_REQUEST: u64 = 64 * 1024;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SOCKET)
}

/// Binds the socket, replacing one a stopped bastion left (the state
/// directory's lock says no other bastion runs here).
pub(crate) fn bind(state_dir: &Path) -> Result<UnixListener, String> {
    let path = socket_path(state_dir);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", path.display())),
    }
    let listener = UnixListener::bind(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // Its own, whatever the mode mask was.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(listener)
}

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Request {
    /// `walissh sessions kill ID --reason TEXT`
    Kill { session: String, reason: String },
    /// `walissh approvals`
    Approvals,
    /// `walissh approve ID [--deny]`
    Answer { id: String, approve: bool },
}

/// Serves the socket until shutdown.
pub(crate) async fn serve(bastion: Arc<Bastion>, listener: UnixListener, mut shutdown: Watcher) {
    let busy = Arc::new(Semaphore::new(AT_ONCE));
    loop {
        let permit = tokio::select! {
            p = busy.clone().acquire_owned() => p,
            _ = shutdown.requested() => return,
        };
        let Ok(permit) = permit else { return };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.requested() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "control socket: accept failed");
                continue;
            }
        };
        let bastion = bastion.clone();
        tokio::spawn(async move {
            one(&bastion, stream).await;
            drop(permit);
        });
    }
}

/// One connection: one request, one answer.
async fn one(bastion: &Bastion, stream: UnixStream) {
    let Ok(cred) = stream.peer_cred() else {
        return;
    };
    // Reading the account database (NSS) and /proc is blocking work.
    let (uid, pid) = (cred.uid(), cred.pid());
    let peer =
        tokio::task::spawn_blocking(move || (account_name(uid), pid.is_some_and(in_a_session)))
            .await;
    let Ok((name, inside)) = peer else { return };
    let by = format!("unix:{name}");
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(read).take(MAX_REQUEST);
    let read = tokio::time::timeout(READ_TIMEOUT, reader.read_line(&mut line)).await;
    let answer = match read {
        // A shell walissh carries (a local target's, as walissh's own
        // account or as root) could otherwise approve its own user's
        // command, or end others' sessions.
        Ok(Ok(_)) if inside => {
            Err("refused: this runs inside a session walissh carries".to_string())
        }
        Ok(Ok(_)) => match serde_json::from_str::<Request>(&line) {
            Ok(request) => handle(bastion, &by, request).await,
            Err(e) => Err(format!("not a request: {e}")),
        },
        Ok(Err(e)) => Err(format!("cannot read the request: {e}")),
        Err(_) => Err("no request in time".into()),
    };
    let answer = match answer {
        Ok(v) => v,
        Err(e) => json!({"error": e}),
    };
    let mut out = answer.to_string();
    out.push('\n');
    // A client that does not read its answer holds no slot for long.
    let _ = tokio::time::timeout(READ_TIMEOUT, write.write_all(out.as_bytes())).await;
}

/// Whether process `pid` descends from this walissh: a shell of a local
/// target, or anything started from one. Blocking (/proc).
fn in_a_session(pid: i32) -> bool {
    let me = std::process::id() as i32;
    let mut at = pid;
    // Bounded: a chain of parents ends at init long before.
    for _ in 0..256 {
        if at == me {
            return true;
        }
        match parent_of(at) {
            Some(p) if p > 1 => at = p,
            _ => return false,
        }
    }
    // A chain that long is not one a shell makes: taken as inside.
    true
}

/// The parent of process `pid`, from /proc/PID/stat (after the command's
/// name, which may hold spaces and parentheses: the last `)` ends it).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

async fn handle(bastion: &Bastion, by: &str, request: Request) -> Result<Value, String> {
    match request {
        Request::Kill { session, reason } => {
            let ids = crate::session::kill(bastion, &session, by, &reason, "cli").await?;
            Ok(json!({"ok": true, "session": ids.session, "user": ids.user, "target": ids.target}))
        }
        Request::Approvals => Ok(json!({"ok": true, "approvals": bastion.approvals.list()})),
        Request::Answer { id, approve } => {
            // Whoever runs walissh's own account or root on this host is
            // trusted with it whole; the user who asked is still refused.
            let answered = bastion
                .approvals
                .answer_audited(&bastion.audit, (&id, by, approve), "cli")
                .await
                .map_err(|e| e.message().to_string())?;
            Ok(json!({"ok": true, "approval": answered, "by": by}))
        }
    }
}

/// The name of account `uid` (its number when it has none). Blocking.
fn account_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// Sends `request` to the bastion that serves `state_dir` and returns its
/// answer (the command line's side; blocking).
pub(crate) fn ask(state_dir: &Path, request: Value) -> Result<Value, String> {
    use std::io::{BufRead, Write};
    let path = socket_path(state_dir);
    let stream = std::os::unix::net::UnixStream::connect(&path).map_err(|e| {
        format!(
            "cannot reach the running walissh at {} ({e}): is `walissh serve` running with this config, and are you its account or root?",
            path.display()
        )
    })?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let mut line = request.to_string();
    line.push('\n');
    (&stream)
        .write_all(line.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut answer = String::new();
    std::io::BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value = serde_json::from_str(&answer)
        .map_err(|e| format!("{}: a garbled answer ({e})", path.display()))?;
    match value.get("error").and_then(Value::as_str) {
        Some(e) => Err(e.to_string()),
        None => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_of_ours_is_inside_and_one_of_others_is_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(in_a_session(child.id() as i32));
        let _ = child.kill();
        let _ = child.wait();
        // init, and our own parent, are not ours.
        assert!(!in_a_session(1));
        let parent = parent_of(std::process::id() as i32).unwrap();
        assert!(!in_a_session(parent));
    }
}
