//! Fuzzes what makes the agent's command output safe for the user's
//! terminal (src/terminal/sanitize.rs): it must never panic; give the same
//! bytes however the stream is cut into reads; change nothing more when
//! run over its own output; and let out no string (OSC, DCS, APC, PM,
//! SOS), no reset, no C1 control and no C0 control but the harmless ones.
//!
//! Run: cargo +nightly fuzz run sanitize (from the repository's top).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/terminal/sanitize.rs"]
#[allow(dead_code)]
mod sanitize;

use sanitize::Sanitizer;

fn clean(chunks: &[&[u8]]) -> Vec<u8> {
    let mut s = Sanitizer::default();
    let mut out = Vec::new();
    for c in chunks {
        out.extend_from_slice(&s.clean(c));
    }
    out.extend(s.finish());
    out
}

/// Whether `out` holds only what may reach a terminal.
fn allowed(out: &[u8]) -> Result<(), String> {
    for (i, &b) in out.iter().enumerate() {
        match b {
            0x1b => {
                let next = out.get(i + 1).copied();
                if !matches!(
                    next,
                    Some(b'[' | b'7' | b'8' | b'D' | b'M' | b'E' | b'=' | b'>' | b'(')
                ) {
                    return Err(format!("ESC {next:?} at {i}"));
                }
            }
            b'\t' | b'\n' | b'\r' | 0x08 | 0x07 => {}
            0x00..0x20 => return Err(format!("control {b:#x} at {i}")),
            0xc2 if out.get(i + 1).is_some_and(|n| (0x80..0xa0).contains(n)) => {
                return Err(format!("C1 control at {i}"));
            }
            _ => {}
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let whole = clean(&[data]);
    if let Err(e) = allowed(&whole) {
        panic!("{e}: {whole:?} from {data:?}");
    }
    let cut = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let (a, b) = data.split_at(cut);
    assert_eq!(clean(&[a, b]), whole, "cut at {cut}");
    assert_eq!(clean(&[&whole]), whole, "not stable over its own output");
});
