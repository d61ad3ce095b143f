//! Fuzzes what makes the agent's command output safe for the user's terminal. The properties are
//! `walissh::fuzzing::sanitize`'s, checked on the crate as it is built.
//!
//! Run: cargo +nightly fuzz run sanitize (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::sanitize(data));
