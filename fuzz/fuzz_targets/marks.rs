//! Fuzzes the scanner that takes walissh's marks out of a session's output. The properties are
//! `walissh::fuzzing::marks`'s, checked on the crate as it is built.
//!
//! Run: cargo +nightly fuzz run marks (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::marks(data));
