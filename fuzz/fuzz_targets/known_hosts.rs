//! Fuzzes the known_hosts reader: host patterns, hashed names, markers.
//! The properties are `walissh::fuzzing::known_hosts`'s, checked on the
//! crate as it is built.
//!
//! Run: cargo +nightly fuzz run known_hosts (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::known_hosts(data));
