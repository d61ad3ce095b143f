//! What the command line does to the store itself, for operators of
//! several bastions: `walissh migrate` (the schema to this version's) and
//! `walissh sessions --reap NODE` (a dead node's sessions ended).
//!
//! What it leaves to others: the store's own writing (`pg`, `db`), and
//! the events' shape (`db::left_open`'s kin below).

use std::time::{Duration, SystemTime};

use super::{Record, Store, chain, db};
use crate::config::Config;

/// Migrates the schema; one line per migration applied, or one saying
/// it was up to date. Blocking.
pub(crate) fn migrate(config: &Config) -> Result<Vec<String>, String> {
    match Store::of(config)? {
        Store::Sqlite(path) => {
            db::open_writer(&path)?;
            Ok(vec![format!(
                "sqlite:{}: schema up to date",
                path.display()
            )])
        }
        Store::Postgres { pg, .. } => {
            let applied = pg.migrate()?;
            Ok(match applied.is_empty() {
                true => vec![format!("{}: schema up to date", pg.name)],
                false => applied
                    .into_iter()
                    .map(|m| format!("{}: applied {m}", pg.name))
                    .collect(),
            })
        }
    }
}

/// Ends, in the audit, every session `node` left open: a `session_end`
/// each, `reason = "node_reaped"`, `by` the account that asked, chained by
/// this node. Its recordings stay where that node wrote them. Returns how
/// many. Blocking.
pub(crate) fn reap(config: &Config, node: &str, by: &str) -> Result<usize, String> {
    if node == config.node_name() {
        return Err(format!(
            "{node} is this node: its own start ends what it left open (restart walissh here)"
        ));
    }
    let Store::Postgres { pg, .. } = Store::of(config)? else {
        return Err("--reap is for several bastions sharing a PostgreSQL audit".into());
    };
    // Never made here: only a node's first start makes the audit key.
    let key_file = config.state_dir().join(chain::KEY_FILE);
    if !key_file.exists() {
        return Err(format!(
            "{}: no audit key: run --reap as walissh's account on a node (the head it writes is signed)",
            key_file.display()
        ));
    }
    let key = chain::key(config.state_dir())?;
    let mut reaper = pg.clone();
    pg.while_dead(node, || {
        let open = reaper.open_sessions(node)?;
        let now = SystemTime::now();
        let mut repaired = 0;
        let records: Vec<Record> = open
            .iter()
            .map(|s| {
                let who = (s.id.as_str(), s.user.as_str(), s.target.as_str());
                // Its recording is digested where this machine reaches it
                // (a shared directory); else the end says it was not.
                let mut finish = |r: &str| super::repair(r, &mut repaired);
                let ev = db::left_open(
                    (now, "node_reaped"),
                    who,
                    s.recording.as_deref(),
                    &mut finish,
                );
                let unreached =
                    s.recording.is_some() && !ev.fields.contains_key("recording_sha256");
                let ev = ev.field("reaped_node", node).field("by", by);
                Record::Event(match unreached {
                    true => ev.field("recording_unreached", true),
                    false => ev,
                })
            })
            .collect();
        // The head is signed with the audit key, as every node signs it;
        // the next checkpoint a running node signs covers these rows.
        let policy = chain::Checkpoints {
            key: Some(key),
            every_events: 1,
            every: Duration::from_secs(60),
        };
        let mut head = reaper.head(policy)?;
        head.node = config.node_name();
        db::Sink::write(&mut reaper, &records, &mut head)?;
        Ok(open.len())
    })
}
