//! The sessions open on this bastion now, and the way to tell one to
//! end: a session is in the list from its audited start to its end,
//! whatever it runs. What it leaves to others: who may end one, its row
//! and its reason (`session::kill`), how a session stops when told
//! (`session::bridge`, `session::gateway`).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::audit::Ids;

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
    pub(crate) fn end(&self, id: &str, ending: Ending) -> Option<Ids> {
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
