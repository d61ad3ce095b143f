//! Fuzzes what walissh reads of a nested shell (src/terminal/nested.rs):
//! whether a command line starts a shell, and whether output ends at a
//! prompt. Both must never panic, and a line with anything but plain
//! words never starts a shell.
//!
//! Run: cargo +nightly fuzz run nested (from the repository's top).

#![no_main]

use libfuzzer_sys::fuzz_target;

/// What nested.rs takes from its parent module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shell {
    Bash,
    Zsh,
}

#[path = "../../src/terminal/nested.rs"]
#[allow(dead_code)]
mod nested;

// nested.rs reads prompts through the terminal model's stripper, which
// marks cuts as text.rs does.
#[path = "../../src/terminal/output.rs"]
#[allow(dead_code)]
mod output;

#[path = "../../src/text.rs"]
#[allow(dead_code)]
mod text;

use nested::{Nesting, prompt_like, shell_of, starts_shell};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if starts_shell(&text) {
        assert!(
            !text.contains(['\'', '"', '$', '`', ';', '&', '|', '<', '>', '(', ')', '\n']),
            "{text:?}"
        );
    }
    let _ = prompt_like(data);
    let (a, b) = text.split_at(text.floor_char_boundary(text.len() / 2));
    let _ = shell_of(a, b);
    // Output in pieces, as a session gets it.
    let mut n = Nesting::watching();
    for piece in data.chunks(7) {
        if !n.output(piece) {
            break;
        }
        let _ = n.at_prompt();
    }
});
