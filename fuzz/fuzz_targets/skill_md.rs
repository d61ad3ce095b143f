//! Fuzzes the SKILL.md reader (YAML front matter). The properties are `walissh::fuzzing::skill_md`'s, checked on
//! the crate as it is built.
//!
//! Run: cargo +nightly fuzz run skill_md (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::skill_md(data));
