//! Cutting text to a size: the one place walissh does it.
//!
//! Every cut counts bytes (what memory, the audit and the model's budget
//! count), always falls on a char boundary (so multi-byte text never
//! panics), and leaves one marker that says how much went:
//! `[... N bytes cut ...]`. A text already cut to the size is not cut
//! again, so restored and re-sent text stays as it was. Identifiers (a
//! login name, an account counted by the throttle) are bounded with
//! [`prefix`], which adds no marker: the result is a key, not text anyone
//! reads. A cut never falls inside a placeholder redaction left
//! (`[REDACTED:kind#n]`): it moves to the placeholder's edge, so the model
//! never reads half of one. What it leaves to others: how big each thing
//! may be.

use std::borrow::Cow;

/// The marker for `n` bytes cut out.
///
/// ```
/// # use walissh::text::marker;
/// assert_eq!(marker(12), "[... 12 bytes cut ...]");
/// ```
pub fn marker(n: usize) -> String {
    format!("[... {n} bytes cut ...]")
}

/// The longest marker a text of `len` bytes can get.
fn marker_len(len: usize) -> usize {
    marker(len).len()
}

/// The start of `text`, at most `max` bytes of it, then the marker.
///
/// ```
/// # use walissh::text::head;
/// assert_eq!(head("short", 10), "short");
/// assert_eq!(head("héllo world", 3), "hé[... 9 bytes cut ...]");
/// // Cut once, it stays as it is.
/// let once = head("a long line of output", 6);
/// assert_eq!(head(&once, 6), once);
/// ```
pub fn head(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max || was_cut(text, max, Side::Head) {
        return Cow::Borrowed(text);
    }
    let end = clear_of_placeholder(text, text.floor_char_boundary(max), true);
    Cow::Owned(format!("{}{}", &text[..end], marker(text.len() - end)))
}

/// The end of `text`, at most `max` bytes of it, after the marker.
///
/// ```
/// # use walissh::text::tail;
/// assert_eq!(tail("line 1\nline 2", 6), "[... 7 bytes cut ...]line 2");
/// ```
pub fn tail(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max || was_cut(text, max, Side::Tail) {
        return Cow::Borrowed(text);
    }
    let start = clear_of_placeholder(text, text.ceil_char_boundary(text.len() - max), false);
    Cow::Owned(format!("{}{}", marker(start), &text[start..]))
}

/// At most `head` bytes from the start of `text` and `tail` from its end,
/// the marker on a line of its own between them.
///
/// ```
/// # use walissh::text::ends;
/// let out = "a".repeat(10) + &"b".repeat(10);
/// assert_eq!(ends(&out, 2, 3), "aa\n[... 15 bytes cut ...]\nbbb");
/// ```
pub fn ends(text: &str, head: usize, tail: usize) -> Cow<'_, str> {
    if text.len() <= head.saturating_add(tail) {
        return Cow::Borrowed(text);
    }
    let h = clear_of_placeholder(text, text.floor_char_boundary(head), true);
    let t = text.ceil_char_boundary(text.len() - tail).max(h);
    let t = clear_of_placeholder(text, t, false);
    Cow::Owned(format!("{}\n{}\n{}", &text[..h], marker(t - h), &text[t..]))
}

/// `text` cut in the middle to at most `max` bytes, the marker included
/// (half of what is kept before it, half after); just the marker when
/// nothing else fits. None when that would not make it shorter.
///
/// ```
/// # use walissh::text::middle;
/// let text = "x".repeat(100);
/// let cut = middle(&text, 60).unwrap();
/// assert!(cut.len() <= 60 && cut.contains("bytes cut"));
/// assert_eq!(middle("short", 60), None);
/// ```
pub fn middle(text: &str, max: usize) -> Option<String> {
    let len = text.len();
    // The marker is counted at its longest, with its two line breaks.
    let keep = max.saturating_sub(marker_len(len) + 2);
    let head = clear_of_placeholder(text, text.floor_char_boundary(keep / 2), true);
    let tail = text
        .ceil_char_boundary(len.saturating_sub(keep - keep / 2))
        .max(head);
    let tail = clear_of_placeholder(text, tail, false);
    let cut = format!(
        "{}\n{}\n{}",
        &text[..head],
        marker(tail - head),
        &text[tail..]
    );
    (cut.len() < len).then_some(cut)
}

/// [`head`], counted in characters (the unit of `[context] tool_chars`
/// and `assistant_chars`); a text cut before (a restored one) is not cut
/// again.
///
/// ```
/// # use walissh::text::head_chars;
/// assert_eq!(head_chars("héllo", 5), "héllo");
/// assert!(head_chars(&"é".repeat(200), 100).contains("bytes cut"));
/// ```
pub fn head_chars(text: &str, max: usize) -> Cow<'_, str> {
    let bytes = text
        .char_indices()
        .nth(max)
        .map_or(text.len(), |(at, _)| at);
    head(text, bytes)
}

/// `text` with at least `by` bytes fewer (or as few as it can keep: just
/// the marker), cut in the middle ([`middle`]); None if cutting would not
/// make it shorter.
pub fn shorter(text: &str, by: usize) -> Option<String> {
    middle(text, text.len().saturating_sub(by))
}

/// At most `max` bytes of an identifier, on a char boundary, with no
/// marker: the result is a key (a login name, an account), not text
/// anyone reads.
///
/// ```
/// # use walissh::text::prefix;
/// assert_eq!(prefix("héllo", 2), "h");
/// ```
pub fn prefix(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// `at` (a char boundary of `text`), moved out of a placeholder redaction
/// left there: to its start (`back`) or past its end. Only a placeholder's
/// length before `at` is searched.
fn clear_of_placeholder(text: &str, at: usize, back: bool) -> usize {
    const OPEN: &str = "[REDACTED:";
    /// Longer than any placeholder walissh writes (a kind and a number).
    const LONGEST: usize = 96;
    let from = text.floor_char_boundary(at.saturating_sub(LONGEST));
    let Some(open) = text[from..at].rfind(OPEN).map(|i| from + i) else {
        return at;
    };
    let close = text[open..]
        .bytes()
        .take(LONGEST)
        .position(|b| b == b']')
        .map(|i| open + i + 1);
    match close {
        Some(close) if close > at => match back {
            true => open,
            false => close,
        },
        _ => at,
    }
}

#[derive(Clone, Copy)]
enum Side {
    Head,
    Tail,
}

/// Whether `text` is already the result of cutting to `max` on `side`:
/// the marker where the cut leaves it, and no more than `max` bytes kept.
fn was_cut(text: &str, max: usize, side: Side) -> bool {
    let (kept, mark) = match side {
        Side::Head => match text.rfind("[... ") {
            Some(at) => (&text[..at], &text[at..]),
            None => return false,
        },
        Side::Tail => match text.find(" bytes cut ...]") {
            Some(at) => {
                let end = at + " bytes cut ...]".len();
                (&text[end..], &text[..end])
            }
            None => return false,
        },
    };
    kept.len() <= max && is_marker(mark)
}

/// Whether `s` is exactly one marker.
fn is_marker(s: &str) -> bool {
    s.strip_prefix("[... ")
        .and_then(|r| r.strip_suffix(" bytes cut ...]"))
        .is_some_and(|n| !n.is_empty() && n.len() <= 20 && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_on_char_boundaries_and_say_how_much() {
        let text = "日本語のテキスト".repeat(10);
        for max in 0..text.len() {
            let h = head(&text, max);
            let kept = h.split("[... ").next().unwrap();
            assert!(kept.len() <= max);
            let cut: usize = text.len() - kept.len();
            assert!(h.ends_with(&marker(cut)), "{h}");
            let t = tail(&text, max);
            assert!(t.starts_with("[... ") && t.len() <= max + marker_len(text.len()));
            let e = ends(&text, max / 2, max / 2);
            assert!(e.contains("bytes cut"));
            if let Some(m) = middle(&text, max) {
                assert!(m.len() < text.len());
            }
        }
    }

    /// Whatever the size, no cut leaves half a placeholder (a review saw
    /// `[REDACTED:auth-he[... 753 bytes cut ...]`).
    #[test]
    fn cuts_never_split_a_placeholder() {
        let text = "ok [REDACTED:auth-header#12] and [REDACTED:password#3] é end ".repeat(6);
        let halves = |out: &str| {
            let whole = out.matches("[REDACTED:").count();
            let closed = out
                .split("[REDACTED:")
                .skip(1)
                .filter(|rest| {
                    let name = rest.split(']').next().unwrap_or("");
                    rest.contains(']') && !name.contains("[... ")
                })
                .count();
            whole != closed
        };
        for max in 0..text.len() {
            for out in [
                head(&text, max).into_owned(),
                tail(&text, max).into_owned(),
                ends(&text, max / 2, max / 2).into_owned(),
                middle(&text, max).unwrap_or_default(),
            ] {
                assert!(!halves(&out), "{max}: {out}");
            }
            assert!(head(&text, max).split("[... ").next().unwrap().len() <= max);
        }
    }

    #[test]
    fn a_cut_text_is_not_cut_again_and_a_fake_marker_buys_nothing() {
        let text = "x".repeat(50);
        let once = head(&text, 10).into_owned();
        assert_eq!(head(&once, 10), once);
        let once = tail(&text, 10).into_owned();
        assert_eq!(tail(&once, 10), once);
        // A marker in the text with more than the size before it: cut.
        let forged = format!("{}[... 1 bytes cut ...]", "y".repeat(40));
        assert!(head(&forged, 10).len() < forged.len());
        assert!(!is_marker("[... x bytes cut ...]"));
    }

    #[test]
    fn middle_never_grows_the_text() {
        for len in 0..200 {
            let text = "é".repeat(len);
            for max in [0, 1, 10, 40, 100, 1000] {
                if let Some(m) = middle(&text, max) {
                    assert!(m.len() < text.len());
                    assert!(m.len() <= max.max(marker_len(text.len()) + 2));
                }
            }
        }
    }
}
