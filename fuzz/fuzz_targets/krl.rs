//! Fuzzes the revoked-keys reader (`[auth] revoked_keys`: an OpenSSH KRL
//! or a text list of keys). The properties are `walissh::fuzzing::krl`'s,
//! checked on the crate as it is built.
//!
//! Run: cargo +nightly fuzz run krl (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::krl(data));
