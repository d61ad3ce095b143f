//! A bounded, ANSI-free capture of a command's output: its head, its tail,
//! and how much there was.
//!
//! Only the head is cleaned as it arrives; the tail is kept raw and cleaned
//! when asked for, so bulk output costs a bounded copy per chunk, not a
//! pass over every byte. Cleaned as everything bound for the model is
//! (`crate::escapes`): a capture keeps what the redactor will judge.

use crate::escapes::Reader;

/// Bytes of the cleaned head, and of the raw tail, kept.
const HEAD: usize = 4 * 1024;
const TAIL: usize = 8 * 1024;

#[derive(Debug, Clone, Default)]
pub(crate) struct Capture {
    head: String,
    head_state: Reader,
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
        let mut out = self.head.clone();
        if self.tail.is_empty() {
            // A character the output ended in the middle of (the reader
            // is a copy: the capture may go on).
            let mut reader = self.head_state;
            reader.finish(&mut out);
        } else {
            // Read afresh: what is left of a sequence the tail starts in
            // reads as text, and of a character, as U+FFFD.
            let mut clean = String::new();
            let mut reader = Reader::default();
            reader.feed(&self.tail, &mut clean);
            reader.finish(&mut clean);
            let cut = self.total - self.head_raw - self.tail.len() as u64;
            if cut > 0 {
                let cut = usize::try_from(cut).unwrap_or(usize::MAX);
                out.push_str(&format!("\n{}\n", crate::text::marker(cut)));
            }
            out.push_str(&clean);
        }
        out
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

    /// What a capture keeps is what the redactor reads: a control
    /// sequence a line break cuts short takes no letter of the next line
    /// (a terminal would take the `p` of `password=`, and the detectors
    /// would read `assword=`).
    #[test]
    fn a_sequence_cut_short_hides_no_letter_from_the_redactor() {
        let mut c = Capture::default();
        c.push(b"x\x1b[01;3\npassword=hunter2hunter2\r\n");
        assert_eq!(c.text(), "x\npassword=hunter2hunter2\n");
        let r = crate::context::redact::Redactor::new(&[], &[]).unwrap();
        let sent = r.redact(&c.text(), &Default::default()).0;
        assert!(!sent.contains("hunter2hunter2"), "{sent}");
        // The same in the tail, past the head.
        let mut c = Capture::default();
        c.push(&vec![b'.'; HEAD * 2]);
        c.push(b"x\x1b[01;3\npassword=hunter2hunter2\r\n");
        assert!(c.text().ends_with("x\npassword=hunter2hunter2\n"));
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
