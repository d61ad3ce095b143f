//! Fuzzes what an MCP server says (tool lists, call results). The
//! properties are `walissh::fuzzing::mcp_reply`'s, checked on the crate as
//! it is built.
//!
//! Run: cargo +nightly fuzz run mcp_reply (from the repository's top).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| walissh::fuzzing::mcp_reply(data));
