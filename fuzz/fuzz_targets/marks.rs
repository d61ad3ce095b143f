//! Fuzzes the scanner that takes walissh's marks out of a session's output
//! (src/terminal/marks.rs): it must never panic, never hold bytes back for
//! good, give the same result however the stream is cut into reads, and
//! leave any stream without the session's nonce exactly as it was.
//!
//! Run: cargo +nightly fuzz run marks (from the repository's top).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/terminal/marks.rs"]
#[allow(dead_code)]
mod marks;

use marks::{Mark, Scanner};

const NONCE: &str = "0f1e2d3c4b5a6978";

/// Scans `chunks` in order; returns the output and the marks with their
/// offsets in it.
fn scan(chunks: &[&[u8]]) -> (Vec<u8>, Vec<(usize, Mark)>) {
    let mut s = Scanner::new(NONCE);
    let mut out = Vec::new();
    let mut marks = Vec::new();
    for c in chunks {
        let r = s.scan(c);
        marks.extend(r.marks.into_iter().map(|(at, m)| (out.len() + at, m)));
        out.extend_from_slice(&r.out);
    }
    out.extend(s.flush());
    (out, marks)
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks where to cut the rest into two reads; the
    // nonce is sometimes spliced in so real marks get exercised.
    let Some((&cut, rest)) = data.split_first() else { return };
    let mut input = rest.to_vec();
    if cut & 1 == 1 {
        let text = String::from_utf8_lossy(rest).replace("NN", &format!("w={NONCE}"));
        input = text.into_bytes();
    }
    let whole = scan(&[&input]);
    let at = (cut as usize).min(input.len());
    let (a, b) = input.split_at(at);
    let split = scan(&[a, b]);
    assert_eq!(whole, split, "the result depends on where the stream is cut");
    let nonce_free = !input.windows(NONCE.len()).any(|w| w == NONCE.as_bytes());
    if nonce_free {
        assert_eq!(whole.0, input, "a stream without our nonce was changed");
        assert!(whole.1.is_empty());
    }
    assert!(whole.0.len() <= input.len());
});
