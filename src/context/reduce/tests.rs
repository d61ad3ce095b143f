//! Tests of `context::reduce`.

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
        let shrink = |t: &String| "m".repeat(t.len().min(crate::text::marker(t.len()).len() + 2));
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
