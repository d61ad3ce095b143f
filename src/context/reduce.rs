//! Cutting the history to a token budget, one message group at a time.
//!
//! This file owns the arithmetic of the context window: an approximate
//! token count, the grouping of a conversation into groups that are kept
//! or dropped whole, the choice of groups under a budget (three
//! strategies, chosen in config), and, as a last resort, cutting the
//! content of the messages kept. It leaves to others what the messages say
//! (the prompt builder, the session store), the budget's value (config),
//! and the system message, which the caller sends outside the history.
//!
//! The invariant everything here keeps: the model never sees a tool result
//! without the call that asked for it, nor a call without its result. Chat
//! APIs reject such a request outright, so a group (an assistant message
//! with its calls, and their results) is one unit: kept whole or dropped
//! whole, and `fit` shortens messages but never removes one.

use std::collections::HashSet;

use super::Message;
use super::failures::is_error_line;
use crate::config::Strategy;

/// What every message costs beyond its text: the role and the separators
/// that chat templates wrap around it.
const MESSAGE_OVERHEAD: usize = 4;

/// The approximate number of tokens of a text: one per 2.5 bytes of
/// UTF-8, rounded up.
///
/// Real tokenizers average about 4 bytes per token on English prose, about
/// 3 on code, shell output and paths, and 2 to 2.5 on hex and base64
/// (hashes, ids, keys); CJK text is about 3 bytes per character and close
/// to one token per character. Counting 2.5 bytes per token overcounts
/// prose and output, and undercounts only the densest hex a little, which
/// is the safe side for a budget: a request a bit smaller than it could
/// be, rather than one the server refuses or silently truncates. It needs
/// no vocabulary, so it is the same for every model.
pub(crate) fn tokens(text: &str) -> usize {
    (text.len() * 2).div_ceil(5)
}

/// The approximate tokens of one message: its text, its tool calls (name,
/// arguments and id: the id travels too, and counting it keeps the count on
/// the safe side) and a fixed overhead.
pub(crate) fn message_tokens(m: &Message) -> usize {
    let body = match m {
        Message::System(t) | Message::User(t) => tokens(t),
        Message::Assistant { text, calls } => {
            tokens(text)
                + calls
                    .iter()
                    .map(|c| tokens(&c.id) + tokens(&c.name) + tokens(&c.arguments))
                    .sum::<usize>()
        }
        Message::Tool { call_id, content } => tokens(call_id) + tokens(content),
    };
    body + MESSAGE_OVERHEAD
}

/// Messages that are kept or dropped together: one user message; one
/// assistant message with the results of all its calls; a system message;
/// an assistant message without calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) messages: Vec<Message>,
}

impl Group {
    /// The approximate tokens of the whole group.
    pub(crate) fn tokens(&self) -> usize {
        self.messages.iter().map(message_tokens).sum()
    }

    /// Whether one of the group's tool results says something went wrong:
    /// a non-zero exit code, an interrupted command, or an error line in
    /// the output. Such groups are what an investigation is about, so the
    /// priority strategy keeps them before older successes.
    pub(crate) fn has_error(&self) -> bool {
        self.messages.iter().any(|m| match m {
            Message::Tool { content, .. } => tool_result_has_error(content),
            _ => false,
        })
    }

    /// A group that is the user's question.
    fn is_user(&self) -> bool {
        matches!(self.messages.as_slice(), [Message::User(_)])
    }

    /// A group that is an instruction.
    fn is_system(&self) -> bool {
        matches!(self.messages.as_slice(), [Message::System(_)])
    }
}

/// Whether a tool result reports a failure. Its first line may be the
/// command as the agent typed it (`$ grep -i error ...`): that is not
/// output, so it is not searched for error words.
fn tool_result_has_error(content: &str) -> bool {
    content.lines().map(str::trim).any(|line| {
        if line.starts_with("$ ") {
            return false;
        }
        if let Some(code) = line.strip_prefix("exit code ") {
            return code.trim().parse::<i64>().is_ok_and(|c| c != 0);
        }
        line.starts_with("interrupted") || is_error_line(line)
    })
}

/// Splits a conversation into groups, oldest first, repairing what must
/// never be sent: a tool result that does not follow the call it answers
/// (an orphan, or a second result for the same call) is dropped, and a call
/// that has no result is removed from its assistant message (an assistant
/// message left with neither text nor calls is dropped).
pub(crate) fn groups(messages: Vec<Message>) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    // The assistant group still taking results, and the calls it answered.
    let mut open: Option<(Group, HashSet<String>)> = None;
    for m in messages {
        match m {
            Message::Tool { ref call_id, .. } => {
                if let Some((g, answered)) = &mut open
                    && asks(&g.messages[0], call_id)
                    && answered.insert(call_id.clone())
                {
                    g.messages.push(m);
                }
                // Otherwise an orphan: dropped.
            }
            Message::Assistant { ref calls, .. } if !calls.is_empty() => {
                close(&mut out, open.take());
                open = Some((Group { messages: vec![m] }, HashSet::new()));
            }
            m => {
                close(&mut out, open.take());
                out.push(Group { messages: vec![m] });
            }
        }
    }
    close(&mut out, open);
    out
}

/// Whether an assistant message made the call `id`.
fn asks(m: &Message, id: &str) -> bool {
    matches!(m, Message::Assistant { calls, .. } if calls.iter().any(|c| c.id == id))
}

/// Ends an assistant group: removes the calls that got no result, then
/// adds the group to `out` unless nothing is left of it.
fn close(out: &mut Vec<Group>, open: Option<(Group, HashSet<String>)>) {
    let Some((mut g, answered)) = open else {
        return;
    };
    if let Message::Assistant { text, calls } = &mut g.messages[0] {
        calls.retain(|c| answered.contains(&c.id));
        if text.is_empty() && calls.is_empty() {
            return;
        }
    }
    out.push(g);
}

/// The groups' messages, in order.
pub(crate) fn flatten(groups: Vec<Group>) -> Vec<Message> {
    groups.into_iter().flat_map(|g| g.messages).collect()
}

/// How many of the newest groups hybrid keeps before it goes by priority.
const HYBRID_NEWEST: usize = 2;

/// Chooses the groups of `history` (the conversation after the system
/// message, oldest first) to send within `budget` tokens, in their
/// original order.
///
/// Always kept: the last group (the current question or the newest tool
/// results: without it the model would answer something else), the current
/// task (the last user message: what the whole investigation is about) and
/// any system group. If these alone exceed the budget, they are all that is
/// kept, and `fit` is left to shorten them.
pub(crate) fn reduce(strategy: Strategy, history: Vec<Group>, budget: usize) -> Vec<Group> {
    let cost: Vec<usize> = history.iter().map(Group::tokens).collect();
    let mut pick = Picker {
        cost: &cost,
        kept: vec![false; history.len()],
        used: 0,
        budget,
    };
    for i in always_kept(&history) {
        pick.force(i);
    }
    if pick.used <= budget {
        let newest_first = (0..history.len()).rev();
        match strategy {
            Strategy::Window => pick.window(newest_first),
            Strategy::Priority => pick.priority(&history),
            Strategy::Hybrid => {
                pick.window(newest_first.take(HYBRID_NEWEST));
                pick.priority(&history);
            }
        }
    }
    history
        .into_iter()
        .zip(pick.kept)
        .filter_map(|(g, keep)| keep.then_some(g))
        .collect()
}

/// The indices of the groups that are kept whatever the budget.
fn always_kept(history: &[Group]) -> Vec<usize> {
    let mut always: Vec<usize> = (0..history.len())
        .filter(|&i| history[i].is_system())
        .collect();
    always.extend(history.iter().rposition(Group::is_user));
    always.extend(history.len().checked_sub(1));
    always
}

/// The state of a choice of groups: which are kept, and the tokens they use.
struct Picker<'a> {
    cost: &'a [usize],
    kept: Vec<bool>,
    used: usize,
    budget: usize,
}

impl Picker<'_> {
    /// Keeps group `i` whatever it costs.
    fn force(&mut self, i: usize) {
        if !self.kept[i] {
            self.kept[i] = true;
            self.used += self.cost[i];
        }
    }

    /// Keeps group `i` if it fits; says whether it is kept.
    fn try_keep(&mut self, i: usize) -> bool {
        if self.kept[i] {
            return true;
        }
        if self.used + self.cost[i] > self.budget {
            return false;
        }
        self.force(i);
        true
    }

    /// Keeps groups in the given order until one does not fit.
    fn window(&mut self, order: impl Iterator<Item = usize>) {
        for i in order {
            if !self.try_keep(i) {
                break;
            }
        }
    }

    /// Keeps the groups with errors, newest first, then the others, newest
    /// first, skipping those that do not fit: a small old group may still
    /// fit where a large newer one did not.
    fn priority(&mut self, history: &[Group]) {
        let (errors, rest): (Vec<usize>, Vec<usize>) = (0..history.len())
            .rev()
            .partition(|&i| history[i].has_error());
        for i in errors.into_iter().chain(rest) {
            self.try_keep(i);
        }
    }
}

/// Shortens the kept groups until they fit `budget`: the content of the
/// largest tool results first, then the largest assistant texts, each cut
/// in the middle (the head says what ran, the tail how it ended) with a
/// marker saying how much was cut. User and system messages are never cut
/// (the question must reach the model verbatim), and no message is
/// removed, so every call keeps its result. Stops when the groups fit or
/// nothing is left to cut.
pub(crate) fn fit(groups: &mut [Group], budget: usize) {
    // Each message is cut at most once, by as much as is still needed, so
    // that markers never nest.
    let mut done: HashSet<(usize, usize)> = HashSet::new();
    loop {
        let total: usize = groups.iter().map(Group::tokens).sum();
        if total <= budget {
            return;
        }
        let Some((g, m)) = largest_cuttable(groups, &done, true)
            .or_else(|| largest_cuttable(groups, &done, false))
        else {
            return;
        };
        done.insert((g, m));
        let text = match &mut groups[g].messages[m] {
            Message::Tool { content, .. } => content,
            Message::Assistant { text, .. } => text,
            _ => unreachable!("only tool results and assistant texts are cut"),
        };
        // 2.5 bytes fewer are one token fewer (see `tokens`); a little
        // more covers the rounding.
        if let Some(cut) = crate::text::shorter(text, ((total - budget) * 5).div_ceil(2) + 3) {
            *text = cut;
        }
    }
}

/// The position of the largest tool result (`tools`) or assistant text
/// not cut yet.
fn largest_cuttable(
    groups: &[Group],
    done: &HashSet<(usize, usize)>,
    tools: bool,
) -> Option<(usize, usize)> {
    let mut best: Option<((usize, usize), usize)> = None;
    for (g, group) in groups.iter().enumerate() {
        for (m, msg) in group.messages.iter().enumerate() {
            let len = match msg {
                Message::Tool { content, .. } if tools => content.len(),
                Message::Assistant { text, .. } if !tools => text.len(),
                _ => continue,
            };
            if !done.contains(&(g, m)) && best.is_none_or(|(_, l)| len > l) {
                best = Some(((g, m), len));
            }
        }
    }
    best.map(|(at, _)| at)
}

#[cfg(test)]
mod tests;
