//! The modules' imports flow one way (ARCHITECTURE.md, "Layering"): this
//! reads every file under src/ and fails on a cycle between top-level
//! modules, naming it, and on an import of a module the documented order
//! puts above the importer. `cargo test --test layering -- --nocapture`
//! prints the whole graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The top-level modules each top-level module names as `crate::x`.
fn imports() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = Graph::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap();
            let first = rel.iter().next().unwrap().to_string_lossy();
            let module = first.trim_end_matches(".rs").to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            // Tests may reach anywhere; comments are not imports.
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
            let edges = graph.entry(module.clone()).or_default();
            for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for named in names(line) {
                    if named != module {
                        edges.insert(named);
                    }
                }
            }
        }
    }
    graph
}

/// The `x` of every `crate::x` on a line, and every name of a
/// `use crate::{x, y::z}` group.
fn names(line: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        let s = s.trim_start();
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (i, _) in line.match_indices("crate::") {
        let rest = &line[i + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            out.push(ident(rest));
            continue;
        };
        // The group's items: split at its top-level commas.
        let (mut depth, mut item) = (0, String::new());
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(ident(&item));
                    item.clear();
                    continue;
                }
                _ => {}
            }
            item.push(c);
        }
        out.push(ident(&item));
    }
    out.retain(|n| !n.is_empty());
    out
}

/// A path from `from` back to `to`, if there is one.
fn path_back(
    graph: &Graph,
    from: &str,
    to: &str,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    for next in graph.get(from).into_iter().flatten() {
        if next == to {
            return Some(vec![next.clone()]);
        }
        if seen.insert(next.clone())
            && let Some(mut rest) = path_back(graph, next, to, seen)
        {
            rest.insert(0, next.clone());
            return Some(rest);
        }
    }
    None
}

#[test]
fn imports_flow_one_way() {
    let graph = imports();
    for (module, edges) in &graph {
        let list: Vec<&str> = edges.iter().map(String::as_str).collect();
        println!("{module} -> {}", list.join(" "));
    }
    assert!(graph.contains_key("session") && graph["session"].contains("agent"));
    if let Some(cycle) = cycle(&graph) {
        panic!("import cycle: {cycle}");
    }
}

/// The layers ARCHITECTURE.md lists under "Layering", top first: the
/// modules each bullet names (before its colon), by their rank. A module
/// it does not name is one of "the small helpers", at the bottom.
fn documented_order() -> BTreeMap<String, usize> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    let section = doc
        .split("## Layering")
        .nth(1)
        .expect("ARCHITECTURE.md has a Layering section");
    let section = section.split("\n## ").next().unwrap();
    let mut ranks = BTreeMap::new();
    let bullets = section.lines().filter_map(|l| l.strip_prefix("- "));
    for (rank, bullet) in bullets.enumerate() {
        let head = bullet.split(':').next().unwrap();
        for name in head.split('`').skip(1).step_by(2) {
            ranks.insert(name.to_string(), rank);
        }
    }
    ranks
}

/// The imports of a module listed above the importer, as `a -> b`.
fn upward(graph: &Graph, ranks: &BTreeMap<String, usize>) -> Vec<String> {
    let bottom = ranks.values().max().copied().unwrap_or(0);
    let rank = |m: &str| ranks.get(m).copied().unwrap_or(bottom);
    graph
        .iter()
        .flat_map(|(module, edges)| {
            edges
                .iter()
                .filter(|next| rank(next) < rank(module))
                .map(move |next| format!("{module} -> {next}"))
        })
        .collect()
}

#[test]
fn imports_follow_the_documented_order() {
    let ranks = documented_order();
    assert!(ranks["lib"] < ranks["session"] && ranks["session"] < ranks["terminal"]);
    let up = upward(&imports(), &ranks);
    assert!(up.is_empty(), "imports of a layer above: {}", up.join(", "));
}

#[test]
fn an_import_upward_is_found() {
    let edge = |a: &str, b: &str| (a.to_string(), BTreeSet::from([b.to_string()]));
    let ranks = BTreeMap::from([("a".to_string(), 0), ("b".to_string(), 1)]);
    assert!(upward(&Graph::from([edge("a", "b")]), &ranks).is_empty());
    assert_eq!(upward(&Graph::from([edge("b", "a")]), &ranks), ["b -> a"]);
    // An unlisted module is a small helper: it imports nothing listed.
    assert_eq!(
        upward(&Graph::from([edge("helper", "a")]), &ranks),
        ["helper -> a"]
    );
}

/// The first cycle in `graph`, as `a -> b -> a`.
fn cycle(graph: &Graph) -> Option<String> {
    for (module, edges) in graph {
        for next in edges {
            if let Some(back) = path_back(graph, next, module, &mut BTreeSet::new()) {
                return Some(format!("{module} -> {next} -> {}", back.join(" -> ")));
            }
        }
    }
    None
}

#[test]
fn a_cycle_is_found_and_named() {
    let edge = |a: &str, b: &str| (a.to_string(), BTreeSet::from([b.to_string()]));
    let mut graph = Graph::from([edge("a", "b"), edge("b", "c")]);
    assert_eq!(cycle(&graph), None);
    graph.insert("c".into(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycle(&graph).as_deref(), Some("a -> b -> c -> a"));
}

#[test]
fn names_are_read_from_paths_and_groups() {
    assert_eq!(names("use crate::audit::Ids;"), ["audit"]);
    assert_eq!(
        names("use crate::{config::AiMode, text, terminal::{a, b}};"),
        ["config", "text", "terminal"]
    );
    assert_eq!(names("let x = crate::text::head(s, 3);"), ["text"]);
}
