//! Fuzzes the reader of an Ansible module's report (`session::ansible`:
//! the JSON a module prints at its end, read off the target's output for
//! the `ansible_task` row). The properties are
//! `walissh::fuzzing::ansible_report`'s, checked on the crate as it is
//! built.
//!
//! Run: cargo +nightly fuzz run ansible_report (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::ansible_report(data));
