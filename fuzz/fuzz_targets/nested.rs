//! Fuzzes what walissh reads of a nested shell: whether a command line starts
//! a shell, and whether output ends at a prompt. The properties are
//! `walissh::fuzzing::nested`'s, checked on the crate as it is built.
//!
//! Run: cargo +nightly fuzz run nested (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::nested(data));
