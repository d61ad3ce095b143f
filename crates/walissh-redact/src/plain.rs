//! Text as the model reads it, and the other views the detectors read it
//! in.
//!
//! The redactor judges and sends the same text, so nothing can hide from
//! the detectors inside an escape sequence (a secret in a window title, a
//! key split by `grep --color`'s codes) and nothing is cut half-way through
//! one: [`plain`] (`crate::escapes`, the one reader of escape sequences
//! for every text bound for the model) takes them out. Beside it, the
//! views of a text that undo what hides a key from a pattern: full-width
//! ASCII read as ASCII (`folded`), HTML entities (`entities`), doubled
//! escapes (`unescaped`), `git diff --word-diff`'s markers (`word_diff`).
use crate::escapes::non_ascii;
pub(crate) use crate::escapes::plain;
#[cfg(test)]
use std::borrow::Cow;

/// Full-width ASCII (`ｐａｓｓｗｏｒｄ＝`, common in CJK text) as ASCII, so a
/// key written that way is read as one.
fn halfwidth(c: char) -> char {
    match c {
        '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0).unwrap_or(c),
        '\u{3000}' => ' ',
        c => c,
    }
}

/// `text` as the detectors read it: full-width ASCII as ASCII, and where
/// each of its bytes came from in `text` (one more entry, for the end);
/// None when it has none. The text the model gets keeps them: never is
/// text rewritten that is not being redacted.
pub(crate) fn folded(text: &str) -> Option<(String, Vec<usize>)> {
    if non_ascii(text).all(|c| halfwidth(c) == c) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut from = Vec::with_capacity(text.len() + 1);
    let mut at = 0;
    // Runs of ASCII are copied whole; only other characters are looked at.
    while at < text.len() {
        let run = text.as_bytes()[at..]
            .iter()
            .position(|b| !b.is_ascii())
            .map_or(text.len(), |n| at + n);
        out.push_str(&text[at..run]);
        from.extend(at..run);
        let Some(c) = text[run..].chars().next() else {
            break;
        };
        let h = halfwidth(c);
        out.push(h);
        from.extend(std::iter::repeat_n(run, h.len_utf8()));
        at = run + c.len_utf8();
    }
    from.push(text.len());
    Some((out, from))
}

/// `text` with the HTML entities that hide quotes and brackets decoded
/// (`{&quot;apiKey&quot;:&quot;…&quot;}` in a page's attribute), and
/// where each byte came from, as `folded`; None when it has none. `&amp;`
/// stays: a decoded `&` would end values at it.
pub(crate) fn entities(text: &str) -> Option<(String, Vec<usize>)> {
    const NAMES: &[(&str, char)] = &[
        ("&quot;", '"'),
        ("&#34;", '"'),
        ("&#x22;", '"'),
        ("&apos;", '\''),
        ("&#39;", '\''),
        ("&#x27;", '\''),
        ("&lt;", '<'),
        ("&gt;", '>'),
    ];
    if !text.contains("&quot;") && !text.contains("&#") && !text.contains("&apos;") {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut from = Vec::with_capacity(text.len() + 1);
    let mut i = 0;
    let mut decoded = false;
    while i < text.len() {
        let rest = &text[i..];
        if let Some((name, c)) = NAMES.iter().find(|(n, _)| rest.starts_with(n)) {
            out.push(*c);
            from.push(i);
            i += name.len();
            decoded = true;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        from.extend(std::iter::repeat_n(i, c.len_utf8()));
        i += c.len_utf8();
    }
    from.push(text.len());
    // Nothing decoded (`&#123;`): no other view, and the caller, which
    // reads the view it gets the same way, must not be handed it again.
    decoded.then_some((out, from))
}

/// `text` with a second level of escapes undone, and where each byte
/// came from, as `folded`: backslashes doubled before a quote
/// (`{\\\"token\\\":…}`, JSON in a string in a string) and JSON's escaped
/// slash (`https:\/\/hooks…`). None when it has neither.
pub(crate) fn unescaped(text: &str) -> Option<(String, Vec<usize>)> {
    if !(text.contains("\\\\\"") || text.contains("\\/")) {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(text.len());
    let mut from = Vec::with_capacity(text.len() + 1);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            let run = bytes[i..].iter().take_while(|&&b| b == b'\\').count();
            let next = bytes.get(i + run);
            let drop = (run >= 2 && next == Some(&b'"')) || (run == 1 && next == Some(&b'/'));
            if !drop {
                out.extend_from_slice(&bytes[i..i + run]);
                from.extend(i..i + run);
            }
            i += run;
            continue;
        }
        out.push(bytes[i]);
        from.push(i);
        i += 1;
    }
    from.push(text.len());
    // Nothing dropped (`a\\\\/b`): no other view, and the caller, which
    // reads the view it gets the same way, must not be handed it again.
    if out.len() == text.len() {
        return None;
    }
    // Only ASCII backslashes were dropped: the rest is whole characters.
    Some((String::from_utf8(out).ok()?, from))
}

/// `git diff --word-diff` (and `--color-words` once its colours are
/// gone) writes a changed word as `[-old-]{+new+}`, with no blank between
/// them and the key: read as the line before and the line after, each of
/// the same length as `text` (what the other side held, and the markers,
/// blanked), so a finding's place is its place in `text`. None when no
/// line holds both markers.
pub(crate) fn word_diff(text: &str) -> Option<[String; 2]> {
    if !(text.contains("[-") && text.contains("{+")) {
        return None;
    }
    let mut sides = [text.as_bytes().to_vec(), text.as_bytes().to_vec()];
    let mut changed = false;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        // Other lines are blank in both views: the text is read whole
        // anyway, and a view of blanks costs nothing to read.
        if !(line.contains("[-") || line.contains("{+")) {
            let body = line.trim_end_matches('\n').len();
            for side in &mut sides {
                side[at..at + body].fill(b' ');
            }
            at += line.len();
            continue;
        }
        for (side, (open, close)) in [("[-", "-]"), ("{+", "+}")].into_iter().enumerate() {
            let mut from = 0;
            while let Some(o) = line[from..].find(open) {
                let o = from + o;
                let Some(c) = line[o + 2..].find(close) else {
                    break;
                };
                let c = o + 2 + c;
                // This side keeps the word, the markers blanked; the
                // other loses it all.
                for b in [o, o + 1, c, c + 1] {
                    sides[side][at + b] = b' ';
                }
                sides[1 - side][at + o..at + c + 2].fill(b' ');
                changed = true;
                from = c + 2;
            }
        }
        at += line.len();
    }
    // Blanks put in place of whole characters and of ASCII markers.
    let [before, after] = sides;
    changed.then(|| [before, after].map(|s| String::from_utf8(s).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view that undoes nothing is no view: `a\\\\/b` (two backslashes
    /// before the slash) once sent the redactor into itself until the
    /// stack overflowed, which aborts the bastion.
    #[test]
    fn a_view_that_undoes_nothing_is_none() {
        assert!(unescaped("a\\\\/b").is_none());
        assert!(unescaped("plain").is_none());
        let (view, _) = unescaped("https:\\/\\/x").unwrap();
        assert_eq!(view, "https://x");
        let r = super::super::Redactor::new(&[], &[]).unwrap();
        let text = "sed 's/\\\\/\\//g' a\\\\/b";
        assert_eq!(r.redact(text, &Default::default()).0, text);
    }

    #[test]
    fn colours_titles_and_controls_go() {
        assert_eq!(
            plain("\x1b[01;31m\x1b[KAKIAEXAMPLE\x1b[m\x1b[K rest"),
            "AKIAEXAMPLE rest"
        );
        assert_eq!(plain("a\x1b]0;password=x\x07b"), "ab");
        assert_eq!(
            plain("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b"),
            "alinkb"
        );
        assert_eq!(plain("a\x1b(Bb\x1b=c"), "abc");
        assert_eq!(plain("a\u{9b}31mb"), "ab");
        assert_eq!(plain("one\r\ntwo\rthree\x08\x00"), "one\ntwo\nthree\n");
        assert_eq!(
            plain("HOME=/root\0DB_PASSWORD=x"),
            "HOME=/root\nDB_PASSWORD=x"
        );
    }

    #[test]
    fn a_string_cut_short_goes_to_the_end() {
        assert_eq!(plain("ok\x1b]0;never ends"), "ok");
        assert_eq!(plain("ok\x1b["), "ok");
        assert_eq!(plain("ok\x1b]0;cancelled\x18password=x"), "okpassword=x");
    }

    #[test]
    fn a_control_sequence_cut_short_ends_at_the_line() {
        // Found by the fuzz target: the `p` of the next line ended the
        // sequence, and `password=` read as `assword=`.
        assert_eq!(plain("a\x1b[01;3\npassword=x"), "a\npassword=x");
        assert_eq!(plain("a\x1b\r\npassword=x"), "a\npassword=x");
    }

    #[test]
    fn invisible_characters_hide_nothing() {
        assert_eq!(plain("pass\u{200b}word=x\u{feff}y"), "password=xy");
        assert_eq!(plain("ok\u{e0041}\u{e0042}\u{202e}done\u{ad}"), "okdone");
        assert!(matches!(plain("密码: é ü"), Cow::Borrowed(_)));
        // Full-width text stays; the detectors read it folded.
        assert!(matches!(
            plain("ｐａｓｓｗｏｒｄ＝Ｘ１　密码："),
            Cow::Borrowed(_)
        ));
        let (folded, from) = folded("ｐａ＝Ｘ密码：").unwrap();
        assert_eq!(folded, "pa=X密码:");
        assert_eq!(from, [0, 3, 6, 9, 12, 12, 12, 15, 15, 15, 18, 21]);
        assert!(super::folded("密码: ok").is_none());
        // ASCII runs copied whole map as each character folded alone did.
        let text = "key＝ab ｃd　密码：x\né９";
        let (folded, from) = super::folded(text).unwrap();
        let (mut want, mut want_from) = (String::new(), Vec::new());
        for (i, c) in text.char_indices() {
            want.push(halfwidth(c));
            want_from.extend(std::iter::repeat_n(i, halfwidth(c).len_utf8()));
        }
        want_from.push(text.len());
        assert_eq!((folded, from), (want, want_from));
        // Found on a held-out set: an entity it does not decode gave the
        // same text back, and the redactor read it again, and again.
        assert!(entities("&#123; &#x7b;").is_none());
        let (text, from) = entities("a&quot;b").unwrap();
        assert_eq!(
            (text.as_str(), from.as_slice()),
            ("a\"b", &[0, 1, 7, 8][..])
        );
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(plain("plain\ttext\n"), Cow::Borrowed(_)));
    }
}
