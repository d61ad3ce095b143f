//! Fuzzes redaction of everything bound for the model. The properties are
//! `walissh::fuzzing::redact`'s, checked on the crate as it is built.
//!
//! Run: cargo +nightly fuzz run redact (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::redact(data));
