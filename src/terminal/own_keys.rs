//! walissh's own keys, out of what the user types.
//!
//! The shell integration binds five escape sequences no keyboard sends
//! (`\e[208~` to `\e[212~`: accept the line, walissh's Enter hooks, a new
//! nonce; see `bootstrap`). Only walissh may press them: typed by a user
//! (raw, from a client of their own), the Enter hook could prepare a
//! command's mark for a line the user then edits and runs with another
//! key, so that the audit and the nested-shell check read one command while
//! the shell runs another. [`OwnKeys`] keeps the user's input from ever
//! holding one: any byte that would complete one of them, given what went
//! to the shell before it (in this read or an earlier one), is dropped.
//! Nothing is held back (an escape reaches the shell at once), and
//! dropping a byte cannot splice a key out of its neighbours, because
//! what is checked is the stream the shell gets. What walissh types
//! itself does not pass through here.

/// The longest of walissh's keys, less one: what is kept of the output.
const TAIL: usize = 5;

/// The end of what went to the shell, across reads.
#[derive(Debug, Default)]
pub(crate) struct OwnKeys {
    tail: [u8; TAIL],
    /// How much of `tail` is filled (until TAIL bytes went).
    len: usize,
}

impl OwnKeys {
    /// [`OwnKeys::strip`], with no copy for the reads (nearly all) that
    /// cannot complete a key: no `~` in them.
    pub(crate) fn strip_bytes(&mut self, keys: bytes::Bytes) -> bytes::Bytes {
        if memchr::memchr(b'~', &keys).is_none() {
            self.remember(&keys);
            return keys;
        }
        bytes::Bytes::from(self.strip(&keys))
    }

    /// `keys`, less each byte that would complete one of walissh's keys.
    pub(crate) fn strip(&mut self, keys: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(keys.len());
        for &b in keys {
            if b == b'~' && self.completes() {
                continue;
            }
            out.push(b);
            self.remember(&[b]);
        }
        out
    }

    /// Whether a `~` now would end one of walissh's keys: `\e[2` (or
    /// 0xDB `2`, which readline's `convert-meta`, on in 8-bit locales,
    /// reads as `\e[2`) and then 08 to 12.
    fn completes(&self) -> bool {
        let t = &self.tail[..self.len];
        let number = |d: &[u8]| matches!(d, [b'0', b'8' | b'9'] | [b'1', b'0'..=b'2']);
        match t {
            [.., 0x1b, b'[', b'2', x, y] | [.., 0xdb, b'2', x, y] => number(&[*x, *y]),
            _ => false,
        }
    }

    fn remember(&mut self, sent: &[u8]) {
        for &b in sent.iter().skip(sent.len().saturating_sub(TAIL)) {
            if self.len < TAIL {
                self.tail[self.len] = b;
                self.len += 1;
            } else {
                self.tail.rotate_left(1);
                self.tail[TAIL - 1] = b;
            }
        }
    }
}

/// walissh's keys, as the shell's key bindings spell them.
#[cfg(any(test, fuzzing))]
pub(crate) fn holds_a_key(stream: &[u8]) -> bool {
    (208..=212).any(|n| {
        let key = format!("\x1b[{n}~");
        let meta = format!("\u{0}{n}~");
        let mut meta = meta.into_bytes();
        meta[0] = 0xdb;
        [key.as_bytes(), &meta[..]]
            .iter()
            .any(|k| stream.windows(k.len()).any(|w| w == *k))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What reaches the shell of `chunks`, read one by one (through
    /// `strip_bytes`, which must agree with `strip`).
    fn strip_in(chunks: &[&[u8]]) -> Vec<u8> {
        let (mut k, mut j) = (OwnKeys::default(), OwnKeys::default());
        let out: Vec<u8> = chunks.iter().flat_map(|c| k.strip(c)).collect();
        let fast: Vec<u8> = chunks
            .iter()
            .flat_map(|c| j.strip_bytes(bytes::Bytes::copy_from_slice(c)))
            .collect();
        assert_eq!(out, fast);
        assert!(!holds_a_key(&out), "{out:?}");
        out
    }

    #[test]
    fn walissh_keys_are_cut_and_others_kept() {
        for key in ["208", "209", "210", "211", "212"] {
            let typed = format!("echo a\x1b[{key}~\x15bash\x0f");
            let want = format!("echo a\x1b[{key}\x15bash\x0f");
            assert_eq!(strip_in(&[typed.as_bytes()]), want.as_bytes());
        }
        // F12, Insert, paste brackets, arrows, a lone escape: kept.
        for keys in [
            &b"\x1b[24~"[..],
            b"\x1b[2~",
            b"\x1b[200~ls\x1b[201~",
            b"\x1b[A\x1b",
            b"\x1b[207~\x1b[213~\x1b[20x",
            "\u{6db}~".as_bytes(),
        ] {
            assert_eq!(strip_in(&[keys]), keys, "{keys:?}");
        }
        // The 8-bit spelling readline's convert-meta reads as `\e[`.
        assert_eq!(strip_in(&[b"ls\xdb210~"]), b"ls\xdb210");
    }

    #[test]
    fn no_key_is_made_across_reads_or_by_splicing() {
        let key = b"\x1b[209~";
        for cut in 1..key.len() {
            let (a, b) = key.split_at(cut);
            let mut k = OwnKeys::default();
            // What came first goes at once (an escape must not wait)...
            assert_eq!(k.strip(a), a);
            // ... and the key never ends.
            assert_eq!(
                k.strip(&[b, &b"ls"[..]].concat()),
                [&b[..b.len() - 1], b"ls"].concat()
            );
        }
        let one: Vec<&[u8]> = key.chunks(1).collect();
        assert_eq!(strip_in(&one), b"\x1b[209");
        // A key inside a key: taking the inner one out must not make the
        // outer one whole.
        assert_eq!(strip_in(&[b"\x1b[2\x1b[209~09~"]), b"\x1b[2\x1b[20909~");
        assert_eq!(strip_in(&[b"\x1b[20", b"9~~"]), b"\x1b[209");
        // Not a key after all: everything reaches the shell.
        assert_eq!(strip_in(&[b"\x1b[2", b"4~"]), b"\x1b[24~");
    }
}
