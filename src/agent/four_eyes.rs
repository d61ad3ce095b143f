//! Four-eyes: commands of the agent that need a second person's approval
//! after the user's (`[ai] four_eyes`, `[[targets]] four_eyes`), and the
//! bastion's desk of those waiting for one ([`Approvals`]).
//!
//! What it owns: which commands need it ([`Rule`]), the waiting requests
//! (bounded), who may answer one (a console role of `[ai]
//! second_approver`, never the user who asked), and the end of a wait:
//! approved, denied, timed out, or withdrawn (the wait dropped, as Ctrl-C
//! drops the question). What it leaves to others: asking the user first
//! (the host's `Run?`), the rows of the call (`agent::call`), the pages
//! and the command line that answer (`web`, `control`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio::sync::{oneshot, watch};

use crate::config::{Config, Role};

/// Requests waiting at once, over the whole bastion; more are denied at
/// once (each holds a question, and each is a row on the console).
const MAX_WAITING: usize = 256;
/// Requests of one user waiting at once: one user cannot fill the desk
/// and deny everyone else's.
const MAX_PER_USER: usize = 4;

/// Which commands need a second approval, and from whom.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    globs: walissh_policy::Globs,
    /// The role an approver needs at least.
    pub(crate) approver: Role,
    pub(crate) timeout: Duration,
}

impl Rule {
    /// From a checked config (its globs compile).
    pub(crate) fn new(config: &Config) -> Rule {
        let globs: Vec<String> = config
            .ai
            .four_eyes
            .iter()
            .map(|g| g.get_ref().clone())
            .collect();
        Rule {
            globs: walissh_policy::Globs::new(&globs).unwrap_or_default(),
            approver: *config.ai.second_approver.get_ref(),
            timeout: Duration::from_secs(config.ai.four_eyes_timeout_s.max(1)),
        }
    }

    /// Whether `command` needs a second approval on a target that asks
    /// for one for everything (`target`) or not. The globs are read with
    /// the policy's parser, on a blocking thread; a parse that fails is a
    /// yes.
    pub(crate) async fn applies(&self, target: bool, command: &str) -> bool {
        if target {
            return true;
        }
        if self.globs.is_empty() {
            return false;
        }
        let (globs, command) = (self.globs.clone(), command.to_string());
        tokio::task::spawn_blocking(move || globs.matches(&command))
            .await
            .unwrap_or(true)
    }
}

/// What a host of the agent asks a second approval with.
#[derive(Clone, Copy)]
pub(crate) struct Asking<'a> {
    pub(crate) rule: &'a Rule,
    /// The session's target needs it for everything (`[[targets]]
    /// four_eyes`).
    pub(crate) target: bool,
    pub(crate) approvals: &'a Approvals,
    pub(crate) ids: &'a crate::audit::Ids,
    /// The user's question.
    pub(crate) question: &'a str,
}

impl<'a> Asking<'a> {
    pub(crate) async fn applies(&self, command: &str) -> bool {
        self.rule.applies(self.target, command).await
    }

    /// Puts `command` before the approvers, with the question and why the
    /// model wants it.
    pub(crate) fn ask(&self, command: &str, reason: &str) -> Wait<'a> {
        self.approvals
            .ask(self.request(command, reason), self.rule.timeout)
    }

    pub(crate) fn request(&self, command: &str, reason: &str) -> Request {
        Request {
            session: self.ids.session.clone(),
            user: self.ids.user.clone(),
            target: self.ids.target.clone(),
            command: command.to_string(),
            question: crate::text::prefix(self.question, 1024).to_string(),
            reason: crate::text::prefix(reason, 1024).to_string(),
        }
    }
}

/// What the user is told while a command waits, and how it ended.
pub(crate) fn waiting_line(wait: &Wait<'_>) -> String {
    format!(
        "waiting for a second approval (request {}; Ctrl-C withdraws it)",
        wait.id
    )
}

pub(crate) fn ended_line(second: &Second) -> String {
    match second {
        Second::Approved { by } => format!("approved by {by}"),
        Second::Denied { by } => format!("denied by {by}: not run"),
        Second::TimedOut => "no second approval in time: not run".to_string(),
        Second::Unavailable(why) => format!("{why}: not run"),
    }
}

/// What a request shows its approvers.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Request {
    pub(crate) session: String,
    pub(crate) user: String,
    pub(crate) target: String,
    /// Exactly what will run.
    pub(crate) command: String,
    /// The user's question, and why the model wants the command.
    pub(crate) question: String,
    pub(crate) reason: String,
}

/// A waiting request as listed.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Listed {
    pub(crate) id: String,
    #[serde(flatten)]
    pub(crate) request: Request,
    /// Seconds since the Unix epoch.
    pub(crate) asked_at: u64,
}

/// How a wait ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Second {
    Approved {
        by: String,
    },
    Denied {
        by: String,
    },
    /// Nobody answered in time.
    TimedOut,
    /// No approver can be asked (too many waiting).
    Unavailable(&'static str),
}

/// An approver's answer.
struct Answer {
    approve: bool,
    by: String,
}

impl From<Answer> for Second {
    fn from(a: Answer) -> Second {
        match a.approve {
            true => Second::Approved { by: a.by },
            false => Second::Denied { by: a.by },
        }
    }
}

struct Waiting {
    listed: Listed,
    answer: oneshot::Sender<Answer>,
}

/// The requests waiting for a second approval on this bastion.
pub(crate) struct Approvals {
    waiting: Mutex<HashMap<String, Waiting>>,
    /// Bumped at every change: the console's page waits on it.
    changed: watch::Sender<u64>,
}

impl Default for Approvals {
    fn default() -> Approvals {
        Approvals {
            waiting: Mutex::new(HashMap::new()),
            changed: watch::channel(0).0,
        }
    }
}

/// Why an answer was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotTaken {
    /// No such request waits (answered, withdrawn, timed out, or never).
    Gone,
    /// The user who asked cannot be the second pair of eyes.
    OwnRequest,
}

impl NotTaken {
    pub(crate) fn message(&self) -> &'static str {
        match self {
            NotTaken::Gone => "no such approval is waiting (answered, withdrawn or timed out)",
            NotTaken::OwnRequest => "the user who asked cannot give the second approval",
        }
    }
}

impl Approvals {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// Puts `request` before the approvers: its wait ends when one
    /// answers, at `timeout`, or when the [`Wait`] is dropped.
    pub(crate) fn ask(&self, request: Request, timeout: Duration) -> Wait<'_> {
        let (tx, rx) = oneshot::channel();
        let id = new_id();
        let asked_at = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let full = {
            let mut waiting = self.waiting();
            let mine = waiting
                .values()
                .filter(|w| w.listed.request.user == request.user)
                .count();
            let full = waiting.len() >= MAX_WAITING || mine >= MAX_PER_USER;
            if !full {
                let listed = Listed {
                    id: id.clone(),
                    request,
                    asked_at,
                };
                waiting.insert(id.clone(), Waiting { listed, answer: tx });
            }
            full
        };
        if !full {
            self.bump();
        }
        Wait {
            approvals: self,
            id,
            answer: (!full).then_some(rx),
            timeout,
        }
    }

    /// The requests waiting now, oldest first.
    pub(crate) fn list(&self) -> Vec<Listed> {
        let mut all: Vec<Listed> = self.waiting().values().map(|w| w.listed.clone()).collect();
        all.sort_by(|a, b| (a.asked_at, &a.id).cmp(&(b.asked_at, &b.id)));
        all
    }

    /// `by` approves (or denies) request `id`: the request it answered.
    /// The caller has checked `by`'s role; the user who asked is refused
    /// here, whatever their role.
    pub(crate) fn answer(&self, id: &str, by: &str, approve: bool) -> Result<Listed, NotTaken> {
        let taken = {
            let mut waiting = self.waiting();
            match waiting.get(id) {
                None => return Err(NotTaken::Gone),
                Some(w) if w.listed.request.user == by => return Err(NotTaken::OwnRequest),
                Some(_) => waiting.remove(id),
            }
        };
        self.bump();
        let w = taken.ok_or(NotTaken::Gone)?;
        let answer = Answer {
            approve,
            by: by.to_string(),
        };
        // The wait may have ended just now (its timeout): then this answer
        // came too late, as if it had come after.
        w.answer.send(answer).map_err(|_| NotTaken::Gone)?;
        Ok(w.listed)
    }

    /// [`Approvals::answer`], audited whatever comes of it
    /// (`four_eyes_answer`: who, which request, how, by which way in, and
    /// whether it was taken).
    pub(crate) async fn answer_audited(
        &self,
        audit: &crate::audit::Audit,
        (id, by, approve): (&str, &str, bool),
        via: &'static str,
    ) -> Result<Listed, NotTaken> {
        let asked = self.list().into_iter().find(|l| l.id == id);
        let answered = self.answer(id, by, approve);
        let result = match &answered {
            Ok(_) => "taken",
            Err(NotTaken::Gone) => "gone",
            Err(NotTaken::OwnRequest) => "own_request",
        };
        let mut row = crate::audit::Event::new(crate::audit::Kind::FourEyesAnswer)
            .field("by", by)
            .field("request", crate::text::prefix(id, 64))
            .field("approve", approve)
            .field("via", via)
            .field("result", result);
        if let Some(l) = asked {
            row.session = Some(l.request.session);
            row.user = Some(l.request.user);
            row.target = Some(l.request.target);
            row = row.field("command", l.request.command);
        }
        audit.event(row).await;
        answered
    }

    /// Changes to the list: the console's page waits on it.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// One request's wait. Dropping it withdraws the request.
pub(crate) struct Wait<'a> {
    approvals: &'a Approvals,
    pub(crate) id: String,
    answer: Option<oneshot::Receiver<Answer>>,
    timeout: Duration,
}

impl Wait<'_> {
    pub(crate) async fn ended(&mut self) -> Second {
        let Some(rx) = self.answer.as_mut() else {
            return Second::Unavailable("too many commands wait for a second approval");
        };
        match tokio::time::timeout(self.timeout, &mut *rx).await {
            Ok(Ok(answer)) => answer.into(),
            Ok(Err(_)) => Second::TimedOut,
            Err(_) => {
                // Out of the list first, under its lock: an answer that
                // comes now finds nothing, rather than being told it was
                // taken. One that came just before is the end.
                let gone = self.approvals.waiting().remove(&self.id).is_some();
                self.approvals.bump();
                match (gone, rx.try_recv()) {
                    (false, Ok(answer)) => answer.into(),
                    _ => Second::TimedOut,
                }
            }
        }
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if self.approvals.waiting().remove(&self.id).is_some() {
            self.approvals.bump();
        }
    }
}

/// A request's id: short enough to type (`walissh approve ID`), random
/// enough that one cannot be guessed from another.
fn new_id() -> String {
    use rand::RngExt;
    let n: u64 = rand::rng().random();
    format!("{n:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(user: &str) -> Request {
        Request {
            session: "s1".into(),
            user: user.into(),
            target: "web1".into(),
            command: "systemctl restart nginx".into(),
            question: "restart it".into(),
            reason: String::new(),
        }
    }

    #[tokio::test]
    async fn an_answer_ends_the_wait_and_the_user_cannot_answer_their_own() {
        let desk = Approvals::default();
        let mut wait = desk.ask(request("alice"), Duration::from_secs(60));
        assert_eq!(desk.list().len(), 1);
        assert_eq!(
            desk.answer(&wait.id, "alice", true).unwrap_err(),
            NotTaken::OwnRequest
        );
        desk.answer(&wait.id, "bob", true).unwrap();
        assert_eq!(wait.ended().await, Second::Approved { by: "bob".into() });
        assert!(desk.list().is_empty());
        assert_eq!(
            desk.answer(&wait.id, "bob", true).unwrap_err(),
            NotTaken::Gone
        );
    }

    #[tokio::test]
    async fn a_wait_times_out_and_a_dropped_one_is_withdrawn() {
        let desk = Approvals::default();
        let mut wait = desk.ask(request("alice"), Duration::from_millis(1));
        assert_eq!(wait.ended().await, Second::TimedOut);
        drop(wait);
        assert!(desk.list().is_empty());
        let wait = desk.ask(request("alice"), Duration::from_secs(5));
        let id = wait.id.clone();
        let changes = desk.changes();
        drop(wait);
        assert!(changes.has_changed().unwrap());
        assert_eq!(desk.answer(&id, "bob", false).unwrap_err(), NotTaken::Gone);
    }

    #[tokio::test]
    async fn the_desk_is_bounded_and_shared() {
        let desk = Approvals::default();
        let mine: Vec<_> = (0..MAX_PER_USER)
            .map(|_| desk.ask(request("alice"), Duration::from_secs(60)))
            .collect();
        let mut over = desk.ask(request("alice"), Duration::from_secs(60));
        assert!(matches!(over.ended().await, Second::Unavailable(_)));
        let others: Vec<_> = (0..MAX_WAITING - MAX_PER_USER)
            .map(|i| desk.ask(request(&format!("u{}", i / 2)), Duration::from_secs(60)))
            .collect();
        assert_eq!(desk.list().len(), MAX_WAITING);
        let mut full = desk.ask(request("zed"), Duration::from_secs(60));
        assert!(matches!(full.ended().await, Second::Unavailable(_)));
        drop((mine, others));
        assert!(desk.list().is_empty());
    }
}
