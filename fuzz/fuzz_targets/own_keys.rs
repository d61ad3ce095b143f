//! Fuzzes what walissh lets through of a user's keys to an integrated
//! shell: never one of walissh's own keys. The properties are
//! `walissh::fuzzing::own_keys`'s, checked on the crate as it is built.
//!
//! Run: cargo +nightly fuzz run own_keys (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::own_keys(data));
