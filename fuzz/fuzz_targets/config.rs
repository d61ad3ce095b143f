//! Fuzzes the config loader, with arbitrary TOML. The properties are `walissh::fuzzing::config`'s, checked on
//! the crate as it is built.
//!
//! Run: cargo +nightly fuzz run config (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::config(data));
