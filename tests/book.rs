//! The reference in `docs/` is an mdBook (`mdbook build docs`): this
//! checks what the book needs of its pages without mdbook itself. Every
//! page is in `SUMMARY.md`; every link between pages names a page of the
//! book and, with `#`, a heading on it (as mdbook makes their ids); no
//! link leaves the book by a relative path, which the built book could
//! not follow (files elsewhere in the repository are named as paths).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
}

/// The book's pages: every `.md` file in `docs/` but the summary.
fn pages() -> Vec<String> {
    let mut pages: Vec<String> = std::fs::read_dir(docs())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "SUMMARY.md")
        .collect();
    pages.sort();
    pages
}

/// The targets of a page's inline links, `[text](target)`, outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code spans are not links.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

/// The ids mdbook gives a page's headings: lower case, letters, digits,
/// `-` and `_` kept, spaces made `-`, anything else dropped; a repeated
/// heading gets `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let Some(title) = line.strip_prefix('#').filter(|_| !fenced) else {
            continue;
        };
        let title = title.trim_start_matches('#').trim();
        let id: String = title
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
                _ => None,
            })
            .collect();
        let mut unique = id.clone();
        let mut n = 1;
        while ids.contains(&unique) {
            unique = format!("{id}-{n}");
            n += 1;
        }
        ids.insert(unique);
    }
    ids
}

#[test]
fn every_page_is_in_the_summary() {
    let summary = std::fs::read_to_string(docs().join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let missing: Vec<String> = pages()
        .into_iter()
        .filter(|p| !listed.contains(p))
        .collect();
    assert!(missing.is_empty(), "not in SUMMARY.md: {missing:?}");
}

#[test]
fn links_stay_in_the_book_and_lead_somewhere() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(docs().join(&page)).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if file.is_empty() { page.as_str() } else { file };
            if file.starts_with("../") || file.starts_with('/') || !file.ends_with(".md") {
                broken.push(format!("{page}: ({target}) leaves the book"));
                continue;
            }
            let Ok(linked) = std::fs::read_to_string(docs().join(file)) else {
                broken.push(format!("{page}: ({target}) names no page"));
                continue;
            };
            if !anchor.is_empty() && !anchors(&linked).contains(anchor) {
                broken.push(format!("{page}: ({target}) names no heading of {file}"));
            }
        }
    }
    assert!(checked > 10, "only {checked} links read");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The checks can fail: a link out of the book, to no page, and to no
/// heading are each found; a heading's id is mdbook's.
#[test]
fn the_link_reader_finds_what_it_must() {
    let text = "[a](../README.md) `[b](x.md)` [c](agent.md#the-agent)\n```\n[d](e.md)\n```\n";
    assert_eq!(links(text), ["../README.md", "agent.md#the-agent"]);
    let ids = anchors("# The agent\n## What runs, and how?\n## The agent\n");
    assert_eq!(
        ids,
        BTreeSet::from([
            "the-agent".to_string(),
            "what-runs-and-how".to_string(),
            "the-agent-1".to_string()
        ])
    );
}
