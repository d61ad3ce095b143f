//! Fuzzes the agent's approval policy, on the parsed command line. The properties are
//! `walissh::fuzzing::policy`'s, checked on the crate as it is built.
//!
//! Run: cargo +nightly fuzz run policy (from the repository's top), with
//! the seeds in fuzz/corpus/policy/.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::policy(data));
