//! Ending a live session from outside it: an admin in the console, or
//! `walissh sessions kill`. What it owns: the reason (cut, made one
//! line), the `session_killed` row (written once, before the session is
//! told), and the answer to whoever asked. What it leaves to others: the
//! list of open sessions (`bastion::registry`), how a session stops when
//! told (`bridge`, `gateway`: they tell the user and close both sides),
//! who may ask (`web`, `control`).

use crate::audit::{Ids, Kind};
use crate::bastion::{Bastion, Ending};

/// Longest reason kept; the rest is cut.
const MAX_REASON: usize = 200;

/// `by` ends session `id` for `reason` (via `console` or `cli`): audited
/// as `session_killed` before the session is told, so the row is there
/// whatever the session does next. Err says why not.
pub(crate) async fn kill(
    bastion: &Bastion,
    id: &str,
    by: &str,
    reason: &str,
    via: &'static str,
) -> Result<Ids, String> {
    kill_where(bastion, id, (by, reason, via), true).await
}

/// [`kill`] of a session this bastion carries, as another node asked.
pub(crate) async fn kill_here(
    bastion: &Bastion,
    id: &str,
    (by, reason, via): (&str, &str, &'static str),
) -> Result<Ids, String> {
    kill_where(bastion, id, (by, reason, via), false).await
}

async fn kill_where(
    bastion: &Bastion,
    id: &str,
    (by, reason, via): (&str, &str, &'static str),
    forward: bool,
) -> Result<Ids, String> {
    // One line, as it reads: no control character (an escape sequence
    // into the user's terminal), no invisible one (a bidi override that
    // reorders it).
    let reason: String = reason
        .chars()
        .filter(|c| !walissh_policy::invisible(*c) || c.is_control())
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let reason = crate::text::prefix(reason.trim(), MAX_REASON).to_string();
    if reason.is_empty() {
        return Err("a reason is needed: the user is told it".into());
    }
    let Some(ids) = bastion.sessions.get(id) else {
        // Another node's, where several share the audit: it is asked to
        // (never when the ask came from another node: it goes no further).
        if !forward {
            return Err(format!("no session {id} is open on this bastion"));
        }
        let asked = (by, reason.as_str(), via);
        return match bastion.audit.stop_elsewhere(id, asked).await? {
            Some((user, target)) => Ok(Ids {
                session: id.to_string(),
                user,
                target,
            }),
            None => Err(format!("no session {id} is open on this bastion")),
        };
    };
    let row = ids
        .event(Kind::SessionKilled)
        .field("by", by)
        .field("reason", reason.as_str())
        .field("via", via);
    bastion.audit.event(row).await;
    let ending = Ending { reason };
    bastion
        .sessions
        .end(id, ending)
        .ok_or_else(|| format!("session {id} ended before it could be stopped"))
}
