//! The audit rows a session writes for what its terminal model reports: a
//! user's command (from the marks, or read off the screen) and marks
//! dropped as forged. One place for each row, whoever reports it: the
//! pumps, or the seat while the agent answers a question.

use crate::audit::Kind;
use crate::audit::{Audit, Event, Ids};
use crate::terminal::{CommandRecord, Integrity};

/// Audits a record as the user's own command.
pub(crate) async fn command(audit: &Audit, ids: &Ids, record: &CommandRecord) {
    audit.event(command_event(ids, record)).await;
}

/// A record's `command` row.
fn command_event(ids: &Ids, record: &CommandRecord) -> Event {
    let r = record;
    let duration = r.ended.duration_since(r.started).unwrap_or_default();
    let event = ids
        .event(Kind::Command)
        .field("command", r.command.clone())
        .field("exit_code", r.exit_code)
        .field("cwd", r.cwd.clone())
        .field("duration_ms", duration.as_millis() as u64)
        .field("output_bytes", r.output.total())
        .field("depth", r.place.depth as u64)
        .field("shell_user", r.place.user.clone());
    // A start that came while another command ran does not fit.
    let event = match r.overlapped {
        true => event.field("fits", false),
        false => event,
    };
    match &r.place.host {
        Some(host) => event.field("host", host.as_str()),
        None => event,
    }
}

/// Audits a command line read off the screen of a shell walissh does not
/// follow: what it ran, not how it ended.
pub(crate) async fn screen_command(audit: &Audit, ids: &Ids, command: String, depth: usize) {
    let event = ids
        .event(Kind::Command)
        .field("command", command)
        .field("exit_code", serde_json::Value::Null)
        .field("cwd", serde_json::Value::Null)
        .field("detected", "screen")
        .field("depth", depth as u64);
    audit.event(event).await;
}

/// Audits marks dropped because they did not fit what was typed.
pub(crate) async fn integrity(audit: &Audit, ids: &Ids, dropped: &Integrity) {
    let event = ids
        .event(Kind::Integrity)
        .field("mark", dropped.mark)
        .field("reason", dropped.reason)
        .field("dropped", dropped.dropped);
    audit.event(event).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_in_a_nested_shell_names_its_account_and_host() {
        let ids = Ids {
            session: "s".into(),
            user: "u".into(),
            target: "web1".into(),
        };
        let now = std::time::SystemTime::now();
        let mut record = CommandRecord {
            command: Some("ls".into()),
            cwd: None,
            exit_code: Some(0),
            started: now,
            ended: now,
            output: Default::default(),
            place: Default::default(),
            overlapped: false,
        };
        record.place.depth = 2;
        record.place.user = Some("app".into());
        record.place.host = Some("db1".into());
        let ev = command_event(&ids, &record);
        assert_eq!(ev.fields["command"], "ls");
        assert_eq!(ev.fields["depth"], 2);
        assert_eq!(ev.fields["shell_user"], "app");
        assert_eq!(ev.fields["host"], "db1");
        record.place.host = None;
        assert!(!command_event(&ids, &record).fields.contains_key("host"));
    }
}
