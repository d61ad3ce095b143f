//! The sessions open on this bastion now, and the way to end one from
//! outside it: an admin in the console, or `walissh sessions kill`.
//!
//! What it owns: the list (a session is in it from its audited start to
//! its end, whatever it runs), ending one with a reason (`session_killed`,
//! audited once, by whoever asked), and what its user is told. What it
//! leaves to others: how a session stops when told (`bridge`, `gateway`:
//! they tell the user and close both sides), who may ask (`web`,
//! `control`).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::audit::{Ids, Kind};
use crate::bastion::Bastion;

/// Longest reason kept; the rest is cut.
const MAX_REASON: usize = 200;

/// Why a session is being ended (who ended it is in the audit).
#[derive(Clone, Debug)]
pub(crate) struct Ending {
    pub(crate) reason: String,
}

impl Ending {
    /// The one line the session's user sees.
    pub(crate) fn line(&self) -> String {
        format!(
            "this session was ended by an administrator: {}",
            self.reason
        )
    }
}

struct Entry {
    ids: Ids,
    end: oneshot::Sender<Ending>,
}

/// The sessions open on this bastion.
#[derive(Default)]
pub(crate) struct Registry {
    open: Mutex<HashMap<String, Entry>>,
}

/// A session's place in the registry, for as long as it runs: it leaves
/// when this is dropped.
pub(crate) struct Open<'a> {
    registry: &'a Registry,
    id: String,
    ended: Option<oneshot::Receiver<Ending>>,
}

impl Registry {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enters the session `ids` names.
    pub(crate) fn enter(&self, ids: &Ids) -> Open<'_> {
        let (end, ended) = oneshot::channel();
        let entry = Entry {
            ids: ids.clone(),
            end,
        };
        self.open().insert(ids.session.clone(), entry);
        Open {
            registry: self,
            id: ids.session.clone(),
            ended: Some(ended),
        }
    }

    /// Whether session `id` runs here now, and who is on it.
    pub(crate) fn get(&self, id: &str) -> Option<Ids> {
        self.open().get(id).map(|e| e.ids.clone())
    }

    /// Tells session `id` to end: its ids, or None when it is not open
    /// here (ended, on another node, or never).
    fn end(&self, id: &str, ending: Ending) -> Option<Ids> {
        let entry = self.open().remove(id)?;
        // A session that ended just now has dropped its receiver: it is
        // ended all the same.
        let _ = entry.end.send(ending);
        Some(entry.ids)
    }
}

impl Open<'_> {
    /// Resolves when the session is told to end; never otherwise.
    pub(crate) async fn ended(&mut self) -> Ending {
        match self.ended.as_mut() {
            Some(rx) => match rx.await {
                Ok(ending) => ending,
                Err(_) => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.registry.open().remove(&self.id);
    }
}

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
    let reason: String = reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let reason = crate::text::prefix(reason.trim(), MAX_REASON).to_string();
    if reason.is_empty() {
        return Err("a reason is needed: the user is told it".into());
    }
    let Some(ids) = bastion.sessions.get(id) else {
        return Err(format!("no session {id} is open on this bastion"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(id: &str) -> Ids {
        Ids {
            session: id.into(),
            user: "alice".into(),
            target: "web1".into(),
        }
    }

    #[tokio::test]
    async fn a_session_is_listed_while_open_and_told_when_ended() {
        let registry = Registry::default();
        let mut open = registry.enter(&ids("s1"));
        assert_eq!(registry.get("s1").unwrap().user, "alice");
        let ending = Ending {
            reason: "incident 42".into(),
        };
        assert!(registry.end("s1", ending).is_some());
        let told = open.ended().await;
        assert_eq!(
            told.line(),
            "this session was ended by an administrator: incident 42"
        );
        assert!(registry.get("s1").is_none());
        drop(open);
        let open = registry.enter(&ids("s2"));
        drop(open);
        assert!(registry.get("s2").is_none());
        let ending = Ending { reason: "x".into() };
        assert!(registry.end("s2", ending).is_none());
    }
}
