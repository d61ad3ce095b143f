//! Fuzzes the assembly of the model's streamed tool calls. The properties are `walissh::fuzzing::tool_calls`'s, checked on
//! the crate as it is built.
//!
//! Run: cargo +nightly fuzz run tool_calls (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::tool_calls(data));
