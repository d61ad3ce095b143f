//! Fuzzes the SSH transport of both of walissh's ends: the vendored
//! russh's packet reader and message parsing, fed what a hostile client
//! or target sends. The properties are `walissh::fuzzing::ssh_transport`'s,
//! checked on the crate as it is built.
//!
//! Run: cargo +nightly fuzz run ssh_transport (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::ssh_transport(data));
