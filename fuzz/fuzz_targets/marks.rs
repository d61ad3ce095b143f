//! Fuzzes the scanner that takes walissh's marks out of a session's output
//! (src/terminal/marks.rs): it must never panic, never hold bytes back for
//! good, give the same result however the stream is cut into reads, and
//! leave any stream without the session's nonces exactly as it was. A
//! nested shell's nonce is pending too, so its ready mark (which makes it
//! a level of its own mid-stream) is exercised.
//!
//! Run: cargo +nightly fuzz run marks (from the repository's top).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/terminal/marks.rs"]
#[allow(dead_code)]
mod marks;

use marks::{Level, Mark, Scanner};

const NONCE: &str = "0f1e2d3c4b5a6978";
const NESTED: &str = "8796a5b4c3d2e1f0";

/// Scans `chunks` in order; returns the output and the marks with their
/// offsets in it.
fn scan(chunks: &[&[u8]]) -> (Vec<u8>, Vec<(usize, Level, Mark)>) {
    let mut s = Scanner::new(NONCE);
    s.pending(Some(NESTED), false);
    let mut out = Vec::new();
    let mut marks = Vec::new();
    for c in chunks {
        let r = s.scan(c);
        marks.extend(
            r.marks
                .into_iter()
                .map(|(at, level, m)| (out.len() + at, level, m)),
        );
        out.extend_from_slice(&r.out);
    }
    out.extend(s.flush());
    (out, marks)
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks where to cut the rest into two reads; the
    // nonce is sometimes spliced in so real marks get exercised.
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let mut input = rest.to_vec();
    if cut & 1 == 1 {
        let text = String::from_utf8_lossy(rest)
            .replace("NN", &format!("w={NONCE}"))
            .replace("MM", &format!("w={NESTED}"));
        input = text.into_bytes();
    }
    let whole = scan(&[&input]);
    let at = (cut as usize).min(input.len());
    let (a, b) = input.split_at(at);
    let split = scan(&[a, b]);
    assert_eq!(
        whole, split,
        "the result depends on where the stream is cut"
    );
    let nonce_free = ![NONCE, NESTED]
        .iter()
        .any(|n| input.windows(n.len()).any(|w| w == n.as_bytes()));
    if nonce_free {
        assert_eq!(whole.0, input, "a stream without our nonce was changed");
        assert!(whole.1.is_empty());
    }
    assert!(whole.0.len() <= input.len());
});
