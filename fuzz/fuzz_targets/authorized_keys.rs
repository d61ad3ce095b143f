//! Fuzzes the authorized_keys reader. The properties are `walissh::fuzzing::authorized_keys`'s, checked on
//! the crate as it is built.
//!
//! Run: cargo +nightly fuzz run authorized_keys (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::authorized_keys(data));
