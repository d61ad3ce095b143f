//! Fuzzes the syslog form of what users type (`[audit] forward`). The
//! properties are `walissh::fuzzing::syslog`'s, checked on the crate as it is
//! built.
//!
//! Run: cargo +nightly fuzz run syslog (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::syslog(data));
