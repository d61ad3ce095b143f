//! Fuzzes the login-name reader (`user:target`, `user#target`). The properties are `walissh::fuzzing::login`'s, checked on
//! the crate as it is built.
//!
//! Run: cargo +nightly fuzz run login (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::login(data));
