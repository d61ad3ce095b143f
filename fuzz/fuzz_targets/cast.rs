//! Fuzzes reading and playing a recording (`walissh play`). The
//! properties are `walissh::fuzzing::cast`'s, checked on the crate as it is
//! built.
//!
//! Run: cargo +nightly fuzz run cast (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::cast(data));
