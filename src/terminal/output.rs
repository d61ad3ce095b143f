//! A bounded, ANSI-free capture of a command's output: its head, its tail,
//! and how much there was.
//!
//! Only the head is cleaned as it arrives; the tail is kept raw and cleaned
//! when asked for, so bulk output costs a bounded copy per chunk, not a
//! pass over every byte.

/// Bytes of the cleaned head, and of the raw tail, kept.
const HEAD: usize = 4 * 1024;
const TAIL: usize = 8 * 1024;

#[derive(Debug, Clone, Default)]
pub(crate) struct Capture {
    head: Vec<u8>,
    head_state: Strip,
    /// Raw bytes that went into the head (it is kept cleaned).
    head_raw: u64,
    tail: Vec<u8>,
    total: u64,
}

impl Capture {
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let mut rest = bytes;
        // Fed in pieces that cannot overfill the head (one byte becomes at
        // most three: U+FFFD for a byte that is not UTF-8), not a byte at a
        // time: output made of escapes never fills it.
        while self.head.len() < HEAD && !rest.is_empty() {
            let n = ((HEAD - self.head.len()) / 3).clamp(1, rest.len());
            self.head_state.feed(&rest[..n], &mut self.head);
            self.head_raw += n as u64;
            rest = &rest[n..];
        }
        if rest.is_empty() {
            return;
        }
        let take = &rest[rest.len().saturating_sub(TAIL)..];
        let overflow = (self.tail.len() + take.len()).saturating_sub(TAIL);
        self.tail.drain(..overflow.min(self.tail.len()));
        self.tail.extend_from_slice(take);
    }

    /// Output bytes seen, escape sequences included.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The head, and when there was more, a marker and the cleaned tail.
    pub(crate) fn text(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if !self.tail.is_empty() {
            let clean = strip(&self.tail);
            let cut = self.total - self.head_raw - self.tail.len() as u64;
            if cut > 0 {
                let cut = usize::try_from(cut).unwrap_or(usize::MAX);
                out.push_str(&format!("\n{}\n", crate::text::marker(cut)));
            }
            out.push_str(&String::from_utf8_lossy(&clean));
        }
        out
    }
}

/// A remover of terminal escape sequences (CSI, OSC, DCS and the other
/// strings, charset selections such as `ESC ( B`) and of control
/// characters but line feed and tab, fed in pieces: `vte`'s parser
/// (the one vt100 uses) does the reading, so every sequence a terminal
/// knows ends where the terminal ends it.
#[derive(Default)]
struct Strip(vte::Parser);

impl Strip {
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        self.0.advance(&mut Keep(out), bytes);
    }
}

/// `bytes` as text: without escape sequences and control characters but
/// line feed and tab (see `Strip`).
pub(crate) fn strip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    Strip::default().feed(bytes, &mut out);
    out
}

/// A copy starts reading afresh: a capture is only copied once its
/// command has finished.
impl Clone for Strip {
    fn clone(&self) -> Strip {
        Strip::default()
    }
}

impl std::fmt::Debug for Strip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Strip")
    }
}

/// What `Strip` keeps: text, line feeds and tabs.
struct Keep<'a>(&'a mut Vec<u8>);

impl vte::Perform for Keep<'_> {
    fn print(&mut self, c: char) {
        let mut buf = [0; 4];
        self.0.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }

    fn execute(&mut self, byte: u8) {
        if matches!(byte, b'\n' | b'\t') {
            self.0.push(byte);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_stripped() {
        let mut c = Capture::default();
        c.push(b"\x1b[1;31mred\x1b[0m \x1b]0;title\x07ok\r\n");
        assert_eq!(c.text(), "red ok\n");
        // `tput sgr0` (a charset selection), DCS and APC payloads, a C1
        // CSI: nothing of them is left.
        let mut c = Capture::default();
        c.push(b"a\x1b(B\x1b[mb \x1bPq#0;2;0;0;0\x1b\\c \x1b_hidden\x1b\\d\r\n");
        assert_eq!(c.text(), "ab c d\n");
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let mut c = Capture::default();
        for i in 0..10_000 {
            c.push(format!("line {i}\r\n").as_bytes());
        }
        let text = c.text();
        assert!(text.starts_with("line 0\nline 1\n"));
        // The head is kept cleaned: more raw bytes went into it (the CRs).
        assert!(c.head_raw > HEAD as u64);
        let cut = c.total() - c.head_raw - TAIL as u64;
        assert!(
            text.contains(&format!("{}\n", crate::text::marker(cut as usize))),
            "{text}"
        );
        assert!(text.ends_with("line 9999\n"));
        assert!(text.len() < HEAD + TAIL + 48);
        assert_eq!(
            c.total(),
            (0..10_000)
                .map(|i| format!("line {i}\r\n").len() as u64)
                .sum::<u64>()
        );
    }
}
