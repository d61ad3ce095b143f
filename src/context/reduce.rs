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
mod tests {
    use super::*;
    use crate::context::ToolCall;

    fn user(t: &str) -> Message {
        Message::User(t.into())
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "run_command".into(),
            arguments: r#"{"command":"ls"}"#.into(),
        }
    }

    fn asks(text: &str, ids: &[&str]) -> Message {
        Message::Assistant {
            text: text.into(),
            calls: ids.iter().map(|id| call(id)).collect(),
        }
    }

    fn says(text: &str) -> Message {
        asks(text, &[])
    }

    fn result(id: &str, content: &str) -> Message {
        Message::Tool {
            call_id: id.into(),
            content: content.into(),
        }
    }

    fn group(messages: Vec<Message>) -> Group {
        Group { messages }
    }

    fn total(gs: &[Group]) -> usize {
        gs.iter().map(Group::tokens).sum()
    }

    #[test]
    fn tokens_round_up_and_never_undercount_much() {
        assert_eq!(tokens(""), 0);
        assert_eq!(tokens("a"), 1);
        assert_eq!(tokens("ab"), 1);
        assert_eq!(tokens("abc"), 2);
        assert_eq!(tokens("abcde"), 2);
        // One CJK character is 3 bytes, about one token: never fewer.
        assert!(tokens("語語語") >= 3);
        assert_eq!(message_tokens(&user("abc")), 2 + MESSAGE_OVERHEAD);
        let a = asks("", &["c1"]);
        assert_eq!(
            message_tokens(&a),
            tokens("c1") + tokens("run_command") + tokens(r#"{"command":"ls"}"#) + MESSAGE_OVERHEAD
        );
    }

    #[test]
    fn a_call_and_its_results_are_one_group() {
        let conv = vec![
            Message::System("sys".into()),
            user("why?"),
            asks("checking", &["c1", "c2"]),
            result("c1", "one"),
            result("c2", "two"),
            says("because"),
            user("and?"),
        ];
        let gs = groups(conv.clone());
        let sizes: Vec<usize> = gs.iter().map(|g| g.messages.len()).collect();
        assert_eq!(sizes, vec![1, 1, 3, 1, 1]);
        assert_eq!(flatten(gs), conv);
    }

    #[test]
    fn orphans_and_unanswered_calls_are_repaired() {
        let conv = vec![
            result("c0", "orphan at the start"),
            user("q"),
            asks("x", &["c1", "c2"]),
            result("c1", "one"),
            result("c1", "a second result for c1"),
            result("zz", "answers nothing"),
            user("late"),
            result("c2", "too late: a user message came between"),
            asks("", &["c3"]),
        ];
        let gs = groups(conv);
        assert_eq!(
            gs,
            vec![
                group(vec![user("q")]),
                group(vec![asks("x", &["c1"]), result("c1", "one")]),
                group(vec![user("late")]),
            ]
        );
    }

    #[test]
    fn errors_in_tool_results_are_seen() {
        let g = |content: &str| group(vec![asks("", &["c"]), result("c", content)]);
        assert!(g("$ make\nexit code 2\nmake: *** Error 2").has_error());
        assert!(g("$ false\nexit code 1\n").has_error());
        assert!(g("$ less x\ninterrupted: it was waiting for input (:)").has_error());
        assert!(g("$ ls\nexit code 0\nbash: x: Permission denied").has_error());
        assert!(!g("$ grep -i error app.log\nexit code 0\nall good").has_error());
        assert!(!g("$ ls\nexit code 0\nerror.log").has_error());
        assert!(!g("$ x\nexit code unknown\n").has_error());
        // Only tool results count: the user may well ask about an error.
        assert!(!group(vec![user("why does it fail with error 5?")]).has_error());
    }

    /// A history of `n` exchanges of a question, a call and its result,
    /// with the results of `failing` exchanges saying exit code 1.
    fn history(n: usize, failing: &[usize], size: usize) -> Vec<Group> {
        let mut conv = Vec::new();
        for i in 0..n {
            let id = format!("c{i}");
            let code = if failing.contains(&i) { 1 } else { 0 };
            conv.push(user(&format!("q{i}")));
            conv.push(asks("", &[&id]));
            conv.push(result(
                &id,
                &format!("exit code {code}\n{}", "x".repeat(size)),
            ));
        }
        groups(conv)
    }

    /// The user messages of the kept groups.
    fn questions(gs: &[Group]) -> Vec<String> {
        gs.iter()
            .filter_map(|g| match g.messages.as_slice() {
                [Message::User(t)] => Some(t.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn window_keeps_the_newest_that_fit_and_stops() {
        let h = history(6, &[0], 300);
        let per_exchange = total(&h[..2]);
        // Room for the last question and its exchange, and a bit more.
        let budget = per_exchange * 2 + 10;
        let out = reduce(Strategy::Window, h.clone(), budget);
        assert!(total(&out) <= budget);
        assert_eq!(out, h[h.len() - 4..].to_vec());
    }

    #[test]
    fn window_stops_at_the_first_group_that_does_not_fit() {
        let mut h = history(3, &[], 30);
        // A large group in the middle: window stops there even though
        // smaller, older groups would fit.
        h[3] = group(vec![
            asks(&"y".repeat(3000), &["c1"]),
            result("c1", "exit code 0"),
        ]);
        let keep_after = total(&h[4..]);
        let out = reduce(Strategy::Window, h.clone(), keep_after + total(&h[..1]) + 5);
        assert_eq!(out, h[4..].to_vec());
    }

    #[test]
    fn priority_keeps_the_task_and_errors_first() {
        let h = history(6, &[1], 300);
        // Too little slack for even a lone question to fit.
        let budget = total(&h[h.len() - 2..]) + total(&h[3..4]) + 2;
        let out = reduce(Strategy::Priority, h.clone(), budget);
        // The current exchange (the always-kept) and the failed one.
        assert_eq!(out, [&h[3..4], &h[h.len() - 2..]].concat());
        assert!(out.iter().any(Group::has_error));
        assert!(total(&out) <= budget);
    }

    #[test]
    fn priority_keeps_the_current_task_when_tool_results_follow_it() {
        // The task is asked once, then the agent works through several
        // steps: the question is far back but must stay.
        let mut conv = vec![user("why is nginx returning 502?")];
        for i in 0..6 {
            let id = format!("c{i}");
            conv.push(asks("", &[&id]));
            conv.push(result(&id, &format!("exit code 0\n{}", "z".repeat(500))));
        }
        let h = groups(conv);
        for s in [Strategy::Window, Strategy::Priority, Strategy::Hybrid] {
            let out = reduce(s, h.clone(), total(&h[h.len() - 1..]) + 20);
            assert_eq!(out, vec![h[0].clone(), h[h.len() - 1].clone()], "{s:?}");
        }
    }

    #[test]
    fn priority_skips_what_does_not_fit_and_goes_on() {
        let mut h = history(4, &[], 30);
        // A large old success the budget cannot take, older small ones can.
        h[5] = group(vec![asks("", &["c2"]), result("c2", &"w".repeat(3000))]);
        let budget = total(&h) - total(&h[5..6]) + 5;
        let out = reduce(Strategy::Priority, h.clone(), budget);
        assert_eq!(out.len(), h.len() - 1);
        assert!(!out.contains(&h[5]));
    }

    #[test]
    fn hybrid_keeps_the_newest_two_then_errors() {
        let h = history(6, &[0], 300);
        let budget = total(&h[h.len() - 3..]) + total(&h[1..2]) + 2;
        let out = reduce(Strategy::Hybrid, h.clone(), budget);
        // The current exchange, its question, and the failed first exchange
        // rather than the newer successes.
        assert_eq!(out, [&h[1..2], &h[h.len() - 3..]].concat());
        assert_eq!(questions(&out), vec!["q5"]);
        // Window, at the same budget, keeps the newest instead.
        let w = reduce(Strategy::Window, h.clone(), budget);
        assert!(!w.contains(&h[1]));
    }

    #[test]
    fn the_always_kept_groups_stay_even_over_budget() {
        let h = history(3, &[], 3000);
        for s in [Strategy::Window, Strategy::Priority, Strategy::Hybrid] {
            let out = reduce(s, h.clone(), 10);
            assert_eq!(out, h[h.len() - 2..].to_vec(), "{s:?}");
        }
        assert!(reduce(Strategy::Hybrid, Vec::new(), 10).is_empty());
    }

    #[test]
    fn a_huge_budget_keeps_everything() {
        let h = history(5, &[2], 100);
        for s in [Strategy::Window, Strategy::Priority, Strategy::Hybrid] {
            assert_eq!(reduce(s, h.clone(), usize::MAX), h);
        }
    }

    #[test]
    fn strategy_reads_from_config() {
        #[derive(serde::Deserialize)]
        struct C {
            history: Strategy,
        }
        let s = |t: &str| {
            toml::from_str::<C>(&format!("history = \"{t}\""))
                .unwrap()
                .history
        };
        assert_eq!(s("window"), Strategy::Window);
        assert_eq!(s("priority"), Strategy::Priority);
        assert_eq!(s("hybrid"), Strategy::Hybrid);
        assert_eq!(Strategy::default(), Strategy::Hybrid);
    }

    #[test]
    fn fit_cuts_the_largest_tool_result_in_the_middle() {
        let big = format!("HEAD{}TAIL", "é".repeat(5000));
        let mut gs = vec![
            group(vec![user("q")]),
            group(vec![
                asks("a", &["c1", "c2"]),
                result("c1", "small"),
                result("c2", &big),
            ]),
        ];
        let budget = 400;
        fit(&mut gs, budget);
        assert!(total(&gs) <= budget);
        let Message::Tool { content, .. } = &gs[1].messages[2] else {
            panic!("not a tool result");
        };
        assert!(content.starts_with("HEAD"), "{content}");
        assert!(content.ends_with("TAIL"), "{content}");
        assert!(content.contains("bytes cut ...]"));
        assert_eq!(gs[1].messages[1], result("c1", "small"));
        assert_eq!(gs[0].messages[0], user("q"));
    }

    #[test]
    fn fit_cuts_assistant_text_after_tool_results_and_never_the_question() {
        let question = "q".repeat(450);
        let mut gs = vec![
            group(vec![user(&question)]),
            group(vec![
                asks(&"t".repeat(3000), &["c1"]),
                result("c1", &"r".repeat(3000)),
            ]),
        ];
        fit(&mut gs, 300);
        assert_eq!(gs[0].messages[0], user(&question));
        let Message::Assistant { text, calls } = &gs[1].messages[0] else {
            panic!("not an assistant message");
        };
        assert!(text.len() < 3000);
        assert_eq!(calls.len(), 1);
        assert_eq!(gs[1].messages.len(), 2);
        assert!(total(&gs) <= 300);
    }

    #[test]
    fn fit_stops_when_nothing_is_left_to_cut() {
        let question = "q".repeat(600);
        let mut gs = vec![group(vec![user(&question)])];
        fit(&mut gs, 10);
        assert_eq!(gs, vec![group(vec![user(&question)])]);
        let mut gs = vec![group(vec![asks("", &["c"]), result("c", "tiny")])];
        fit(&mut gs, 1);
        assert_eq!(gs[0].messages[1], result("c", "tiny"));
    }

    #[test]
    fn cut_middle_keeps_char_boundaries() {
        let text = "語".repeat(100);
        for want in [0, 1, 2, 3, 50, 299, 300, 1000] {
            let cut = crate::text::shorter(&text, want);
            // Cutting anything at all shortens it (a slice off a char
            // boundary would have panicked).
            assert!(want == 0 || cut.is_some(), "{want}");
            if let Some(cut) = cut {
                assert!(cut.len() < text.len());
                assert!(cut.len() + want <= text.len() || cut.trim() == crate::text::marker(300));
            }
        }
    }

    mod properties {
        use super::super::*;
        use crate::context::ToolCall;
        use proptest::prelude::*;
        // The trait, not the reducer's enum of the same name.
        use proptest::strategy::Strategy;

        /// Pieces of text of various sizes and encodings: ASCII, 2-, 3- and
        /// 4-byte characters, lines that read as errors or exit codes.
        const PIECES: &[&str] = &[
            "a",
            "ok ",
            "é",
            "語",
            "🦀",
            "\n",
            "exit code 0\n",
            "exit code 1\n",
            "error: no such thing\n",
            "interrupted: it was waiting for input\n",
            "0 errors\n",
            "lorem ipsum dolor sit amet, consectetur adipiscing elit\n",
        ];

        fn text() -> impl Strategy<Value = String> {
            let piece = prop_oneof![
                8 => prop::sample::select(PIECES).prop_map(str::to_string),
                1 => (1usize..4000).prop_map(|n| "x".repeat(n)),
                1 => (1usize..600).prop_map(|n| "ж語".repeat(n)),
            ];
            prop::collection::vec(piece, 0..12).prop_map(|p| p.concat())
        }

        /// One step of a conversation, before ids are given out.
        #[derive(Debug, Clone)]
        enum Step {
            User(String),
            System(String),
            /// An assistant message, and for each call its result, or none.
            Assistant(String, Vec<Option<String>>),
            /// A tool result for call number `n`, wherever it falls: it may
            /// answer nothing, answer an old call, or repeat a result.
            Stray(usize, String),
        }

        fn step() -> impl Strategy<Value = Step> {
            let result = prop_oneof![9 => text().prop_map(Some), 1 => Just(None)];
            prop_oneof![
                4 => text().prop_map(Step::User),
                1 => text().prop_map(Step::System),
                6 => (text(), prop::collection::vec(result, 0..=3))
                    .prop_map(|(t, r)| Step::Assistant(t, r)),
                1 => (0usize..12, text()).prop_map(|(n, t)| Step::Stray(n, t)),
            ]
        }

        fn conversation() -> impl Strategy<Value = Vec<Message>> {
            prop::collection::vec(step(), 0..24).prop_map(|steps| {
                let mut out = Vec::new();
                let mut next = 0;
                for s in steps {
                    match s {
                        Step::User(t) => out.push(Message::User(t)),
                        Step::System(t) => out.push(Message::System(t)),
                        Step::Stray(n, t) => out.push(Message::Tool {
                            call_id: format!("call_{n}"),
                            content: t,
                        }),
                        Step::Assistant(text, results) => {
                            let ids: Vec<String> = (next..next + results.len())
                                .map(|n| format!("call_{n}"))
                                .collect();
                            next += results.len();
                            let calls = ids
                                .iter()
                                .map(|id| ToolCall {
                                    id: id.clone(),
                                    name: "run_command".into(),
                                    arguments: format!(r#"{{"command":"{id}"}}"#),
                                })
                                .collect();
                            out.push(Message::Assistant { text, calls });
                            for (id, r) in ids.into_iter().zip(results) {
                                if let Some(content) = r {
                                    out.push(Message::Tool {
                                        call_id: id,
                                        content,
                                    });
                                }
                            }
                        }
                    }
                }
                out
            })
        }

        fn strategy() -> impl Strategy<Value = super::super::Strategy> {
            prop::sample::select(vec![
                super::super::Strategy::Window,
                super::super::Strategy::Priority,
                super::super::Strategy::Hybrid,
            ])
        }

        fn total(gs: &[Group]) -> usize {
            gs.iter().map(Group::tokens).sum()
        }

        /// Every tool result follows, with only results in between, the
        /// assistant message that made its call; every call has its result.
        fn assert_integrity(messages: &[Message]) -> Result<(), TestCaseError> {
            let mut open: Option<(Vec<&str>, HashSet<&str>)> = None;
            let check_done = |open: &Option<(Vec<&str>, HashSet<&str>)>| {
                if let Some((calls, answered)) = open {
                    for c in calls {
                        prop_assert!(answered.contains(c), "call {c} has no result");
                    }
                }
                Ok(())
            };
            for m in messages {
                match m {
                    Message::Tool { call_id, .. } => {
                        let Some((calls, answered)) = &mut open else {
                            return Err(TestCaseError::fail(format!("{call_id} follows no call")));
                        };
                        prop_assert!(
                            calls.contains(&call_id.as_str()),
                            "{call_id} answers no call"
                        );
                        prop_assert!(
                            answered.insert(call_id.as_str()),
                            "{call_id} answered twice"
                        );
                    }
                    Message::Assistant { calls, .. } => {
                        check_done(&open)?;
                        open = Some((
                            calls.iter().map(|c| c.id.as_str()).collect(),
                            HashSet::new(),
                        ));
                    }
                    _ => {
                        check_done(&open)?;
                        open = None;
                    }
                }
            }
            check_done(&open)
        }

        /// Whether `sub` is `all` with some groups left out.
        fn is_subsequence(sub: &[Group], all: &[Group]) -> bool {
            let mut rest = all.iter();
            sub.iter().all(|g| rest.any(|h| h == g))
        }

        /// The groups always kept, by the rules `reduce` documents.
        fn always(gs: &[Group]) -> Vec<&Group> {
            let last_user = gs.iter().rposition(Group::is_user);
            gs.iter()
                .enumerate()
                .filter(|&(i, g)| g.is_system() || Some(i) == last_user || i + 1 == gs.len())
                .map(|(_, g)| g)
                .collect()
        }

        /// The fewest tokens `fit` could reach: every tool result and
        /// assistant text cut down to a bare marker (or left as it is, if
        /// shorter), everything else as it is.
        fn floor(gs: &[Group]) -> usize {
            let shrink =
                |t: &String| "m".repeat(t.len().min(crate::text::marker(t.len()).len() + 2));
            gs.iter()
                .flat_map(|g| &g.messages)
                .map(|m| match m {
                    Message::Tool { call_id, content } => message_tokens(&Message::Tool {
                        call_id: call_id.clone(),
                        content: shrink(content),
                    }),
                    Message::Assistant { text, calls } => message_tokens(&Message::Assistant {
                        text: shrink(text),
                        calls: calls.clone(),
                    }),
                    m => message_tokens(m),
                })
                .sum()
        }

        proptest! {
            // 96 cases keep the suite under a second. A failure prints its
            // shrunk input; it is not saved to a regressions file, so a run
            // leaves nothing behind in the work tree.
            #![proptest_config(ProptestConfig {
                cases: 96,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            #[test]
            fn grouping_repairs_and_round_trips(conv in conversation()) {
                let gs = groups(conv);
                let flat = flatten(gs.clone());
                assert_integrity(&flat)?;
                prop_assert_eq!(groups(flat), gs);
            }

            #[test]
            fn reduce_and_fit_keep_the_invariants(
                conv in conversation(),
                strategy in strategy(),
                percent in 0usize..130,
            ) {
                let gs = groups(conv);
                let budget = total(&gs) * percent / 100;
                let always: Vec<Group> = always(&gs).into_iter().cloned().collect();

                let mut out = reduce(strategy, gs.clone(), budget);
                // (4) order is preserved: the output is the history with
                // groups left out.
                prop_assert!(is_subsequence(&out, &gs));
                // (3) the last group and the current task are kept.
                prop_assert!(is_subsequence(&always, &out));
                prop_assert_eq!(out.last(), gs.last());
                // (1) integrity.
                assert_integrity(&flatten(out.clone()))?;
                // (2) within budget whenever the always-kept fit; otherwise
                // exactly the always-kept.
                if total(&always) <= budget {
                    prop_assert!(total(&out) <= budget);
                } else {
                    prop_assert_eq!(&out, &always);
                }

                let before = out.clone();
                fit(&mut out, budget);
                // (1) still intact, no message removed, questions verbatim.
                assert_integrity(&flatten(out.clone()))?;
                prop_assert_eq!(out.len(), before.len());
                for (a, b) in out.iter().zip(&before) {
                    prop_assert_eq!(a.messages.len(), b.messages.len());
                    for (m, n) in a.messages.iter().zip(&b.messages) {
                        prop_assert_eq!(std::mem::discriminant(m), std::mem::discriminant(n));
                        if matches!(n, Message::User(_) | Message::System(_)) {
                            prop_assert_eq!(m, n);
                        }
                    }
                }
                // (2) within budget whenever cutting can get there.
                if floor(&before) <= budget {
                    prop_assert!(total(&out) <= budget, "{} > {budget}", total(&out));
                }
                // Cutting never grows anything.
                prop_assert!(total(&out) <= total(&before));
            }

            #[test]
            fn a_huge_budget_changes_nothing(conv in conversation(), strategy in strategy()) {
                let gs = groups(conv);
                prop_assert_eq!(reduce(strategy, gs.clone(), usize::MAX), gs.clone());
                let mut fitted = gs.clone();
                fit(&mut fitted, total(&gs));
                prop_assert_eq!(fitted, gs);
            }
        }
    }
}
