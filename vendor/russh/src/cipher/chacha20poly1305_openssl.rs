// walissh's change (see PATCH.md): chacha20-poly1305@openssh.com through
// OpenSSL's libcrypto, whose ChaCha20 and Poly1305 use the widest vector
// units the CPU has (AVX-512 and AVX-512 IFMA where there are), where
// aws-lc's Poly1305 is scalar: on a CPU with them, about 0.3 s of CPU per
// GiB each way instead of 0.73 s.
//
// The construction is OpenSSH's (PROTOCOL.chacha20poly1305): the key's
// first 32 bytes are K_2 (the payload's key), the last 32 K_1 (the
// length's). The nonce is the packet's sequence number; OpenSSL's ChaCha20
// takes it as the last 8 bytes of its 16-byte IV, after a 64-bit block
// counter, as OpenSSH's own libcrypto build does. The Poly1305 key is K_2's
// block 0, the payload starts at block 1, and the tag covers the
// encrypted length and payload.

use std::ptr;

use openssl_sys as ffi;

use super::super::Error;

pub(crate) const KEY_LEN: usize = 64;
const TAG_LEN: usize = 16;

/// One direction's three OpenSSL contexts. `decrypt_packet_length` uses
/// the length's context through `&self`: sound because `Keys` is not
/// `Sync` (raw pointers), so one thread at a time holds it. Never make it
/// `Sync`.
struct Keys {
    payload: *mut ffi::EVP_CIPHER_CTX,
    length: *mut ffi::EVP_CIPHER_CTX,
    mac: *mut ffi::EVP_MAC_CTX,
}

// SAFETY: the contexts are owned by `Keys` alone and OpenSSL contexts may
// move between threads; none is shared (the keys are not Sync).
unsafe impl Send for Keys {}

impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: each pointer was returned by its _new and is freed once.
        unsafe {
            ffi::EVP_CIPHER_CTX_free(self.payload);
            ffi::EVP_CIPHER_CTX_free(self.length);
            ffi::EVP_MAC_CTX_free(self.mac);
        }
    }
}

/// Whether OpenSSL is there and has what the construction needs: checked
/// once, so that russh falls back to its own implementation otherwise.
pub(crate) fn available() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| Keys::new(&[0; KEY_LEN]).is_some())
}

fn cipher_ctx(key: &[u8]) -> Option<*mut ffi::EVP_CIPHER_CTX> {
    // SAFETY: plain libcrypto calls on a context this function owns; the
    // key is 32 bytes, EVP_chacha20's key length.
    unsafe {
        let ctx = ffi::EVP_CIPHER_CTX_new();
        if ctx.is_null() {
            return None;
        }
        let iv = [0u8; 16];
        if ffi::EVP_CipherInit_ex(
            ctx,
            ffi::EVP_chacha20(),
            ptr::null_mut(),
            key.as_ptr(),
            iv.as_ptr(),
            1,
        ) != 1
        {
            ffi::EVP_CIPHER_CTX_free(ctx);
            return None;
        }
        Some(ctx)
    }
}

/// Initialises libcrypto once, without reading an OpenSSL configuration
/// file (`$OPENSSL_CONF` could load a module into the bastion): nothing
/// here needs one.
fn init() {
    static INIT: std::sync::Once = std::sync::Once::new();
    // From OpenSSL's crypto.h.
    const NO_LOAD_CONFIG: u64 = 0x0000_0080;
    const NO_ATEXIT: u64 = 0x0008_0000;
    INIT.call_once(|| {
        // SAFETY: called once, before any other libcrypto call here; a
        // failure shows as the keys below not being made.
        unsafe { ffi::OPENSSL_init_ssl(NO_LOAD_CONFIG | NO_ATEXIT, ptr::null()) };
    });
}

impl Keys {
    fn new(key: &[u8; KEY_LEN]) -> Option<Keys> {
        init();
        let payload = cipher_ctx(&key[..32])?;
        let length = match cipher_ctx(&key[32..]) {
            Some(c) => c,
            None => {
                // SAFETY: made just above, freed once.
                unsafe { ffi::EVP_CIPHER_CTX_free(payload) };
                return None;
            }
        };
        // SAFETY: the MAC is fetched by a constant name; the context keeps
        // its own reference, so the fetched one is released here.
        let mac = unsafe {
            let m = ffi::EVP_MAC_fetch(ptr::null_mut(), c"POLY1305".as_ptr(), ptr::null());
            let ctx = if m.is_null() {
                ptr::null_mut()
            } else {
                let ctx = ffi::EVP_MAC_CTX_new(m);
                ffi::EVP_MAC_free(m);
                ctx
            };
            ctx
        };
        let keys = Keys {
            payload,
            length,
            mac,
        };
        (!mac.is_null()).then_some(keys)
    }

    /// XORs `data` in place with `ctx`'s key stream for packet `seq`, from
    /// block `block`.
    fn chacha(ctx: *mut ffi::EVP_CIPHER_CTX, seq: u32, block: u8, data: &mut [u8]) {
        let mut iv = [0u8; 16];
        iv[0] = block;
        iv[8..].copy_from_slice(&u64::from(seq).to_be_bytes());
        #[allow(clippy::unwrap_used)]
        let len = i32::try_from(data.len()).unwrap();
        let mut out = 0;
        // SAFETY: the context was set up with EVP_chacha20; a stream
        // cipher may write in place, and writes exactly `len` bytes.
        let ok = unsafe {
            ffi::EVP_CipherInit_ex(ctx, ptr::null(), ptr::null_mut(), ptr::null(), iv.as_ptr(), -1)
                == 1
                && ffi::EVP_CipherUpdate(ctx, data.as_mut_ptr(), &mut out, data.as_ptr(), len) == 1
        };
        // A failure here would send or accept garbage: never go on.
        assert!(ok && out == len, "OpenSSL's ChaCha20 failed");
    }

    /// The Poly1305 tag of `data` (the whole encrypted packet) for `seq`.
    fn tag(&mut self, seq: u32, data: &[u8]) -> [u8; TAG_LEN] {
        let mut poly_key = [0u8; 32];
        Self::chacha(self.payload, seq, 0, &mut poly_key);
        let mut tag = [0u8; TAG_LEN];
        let mut len = 0;
        // SAFETY: the MAC context is POLY1305's; its key is 32 bytes and
        // its output 16.
        let ok = unsafe {
            ffi::EVP_MAC_init(self.mac, poly_key.as_ptr(), poly_key.len(), ptr::null()) == 1
                && ffi::EVP_MAC_update(self.mac, data.as_ptr(), data.len()) == 1
                && ffi::EVP_MAC_final(self.mac, tag.as_mut_ptr(), &mut len, TAG_LEN) == 1
        };
        assert!(ok && len == TAG_LEN, "OpenSSL's Poly1305 failed");
        poly_key.fill(0);
        // Not optimised away: the key is read after the fill.
        std::hint::black_box(&poly_key);
        tag
    }
}

pub struct OpeningKey(Keys);

pub struct SealingKey(Keys);

pub(crate) fn opening_key(k: &[u8]) -> Option<OpeningKey> {
    Keys::new(k.try_into().ok()?).map(OpeningKey)
}

pub(crate) fn sealing_key(k: &[u8]) -> Option<SealingKey> {
    Keys::new(k.try_into().ok()?).map(SealingKey)
}

impl super::OpeningKey for OpeningKey {
    fn decrypt_packet_length(
        &self,
        sequence_number: u32,
        encrypted_packet_length: &[u8],
    ) -> [u8; 4] {
        let mut len = [0u8; 4];
        len.copy_from_slice(&encrypted_packet_length[..4]);
        Keys::chacha(self.0.length, sequence_number, 0, &mut len);
        len
    }

    fn tag_len(&self) -> usize {
        TAG_LEN
    }

    fn open<'a>(
        &mut self,
        sequence_number: u32,
        ciphertext_and_tag: &'a mut [u8],
    ) -> Result<&'a [u8], Error> {
        let Some(body) = ciphertext_and_tag.len().checked_sub(TAG_LEN) else {
            return Err(Error::DecryptionError);
        };
        if body < 4 {
            return Err(Error::DecryptionError);
        }
        let (ciphertext, tag) = ciphertext_and_tag.split_at_mut(body);
        let want = self.0.tag(sequence_number, ciphertext);
        // SAFETY: both are TAG_LEN bytes.
        let same = unsafe {
            ffi::CRYPTO_memcmp(want.as_ptr().cast(), tag.as_ptr().cast(), TAG_LEN) == 0
        };
        if !same {
            return Err(Error::DecryptionError);
        }
        let payload = &mut ciphertext[4..];
        Keys::chacha(self.0.payload, sequence_number, 1, payload);
        Ok(payload)
    }
}

impl super::SealingKey for SealingKey {
    fn padding_length(&self, payload: &[u8]) -> usize {
        super::chacha20poly1305::padding_length(payload)
    }

    fn fill_padding(&self, padding_out: &mut [u8]) {
        padding_out.fill(0);
    }

    fn tag_len(&self) -> usize {
        TAG_LEN
    }

    fn seal(
        &mut self,
        sequence_number: u32,
        plaintext_in_ciphertext_out: &mut [u8],
        tag: &mut [u8],
    ) {
        let (len, payload) = plaintext_in_ciphertext_out.split_at_mut(4);
        Keys::chacha(self.0.length, sequence_number, 0, len);
        Keys::chacha(self.0.payload, sequence_number, 1, payload);
        tag.copy_from_slice(&self.0.tag(sequence_number, plaintext_in_ciphertext_out));
    }
}

/// For walissh's tests (russh's own are not run there): seals `packet`
/// (the 4-byte length, then the payload) as packet `seq` under `key` with
/// this implementation and with the reference one, and checks that the
/// two agree byte for byte, that each opens the other's, and that a
/// flipped bit is refused. `Err` says what differed.
#[doc(hidden)]
#[cfg(feature = "aws-lc-rs")]
pub fn matches_the_reference(key: &[u8; KEY_LEN], seq: u32, packet: &[u8]) -> Result<(), String> {
    matches_the_reference_for(key, &[(seq, packet)])
}

/// [`matches_the_reference`] for a stream of packets under one key each
/// way (the contexts carry nothing from one packet to the next).
#[doc(hidden)]
#[cfg(feature = "aws-lc-rs")]
pub fn matches_the_reference_for(
    key: &[u8; KEY_LEN],
    packets: &[(u32, &[u8])],
) -> Result<(), String> {
    use super::chacha20poly1305::{reference_opening_key, reference_sealing_key};
    use super::{OpeningKey as _, SealingKey as _};
    let mut reference_seal = reference_sealing_key(key);
    let mut reference_open = reference_opening_key(key);
    let mut our_seal = sealing_key(key).ok_or("OpenSSL is not available")?;
    let mut our_open = opening_key(key).ok_or("OpenSSL is not available")?;
    for &(seq, packet) in packets {
        let mut theirs = packet.to_vec();
        let mut their_tag = [0u8; TAG_LEN];
        reference_seal.seal(seq, &mut theirs, &mut their_tag);
        let mut ours = packet.to_vec();
        let mut our_tag = [0u8; TAG_LEN];
        our_seal.seal(seq, &mut ours, &mut our_tag);
        if ours != theirs || our_tag != their_tag {
            return Err(format!("packet {seq}: the sealed packets differ"));
        }
        if our_open.decrypt_packet_length(seq, &theirs[..4]) != packet[..4] {
            return Err(format!("packet {seq}: the decrypted lengths differ"));
        }
        // A changed byte anywhere (length, payload, tag) is refused, and
        // refusing leaves the key as it was.
        for at in [0, ours.len() / 2, ours.len() + TAG_LEN - 1] {
            let mut both = [ours.as_slice(), &our_tag].concat();
            both[at] ^= 1;
            if our_open.open(seq, &mut both).is_ok() {
                return Err(format!("packet {seq}: opened with byte {at} changed"));
            }
        }
        let mut both = [theirs.as_slice(), &their_tag].concat();
        let opened = our_open
            .open(seq, &mut both)
            .map_err(|e| format!("packet {seq}: OpenSSL refused the reference's: {e}"))?;
        if opened != &packet[4..] {
            return Err(format!("packet {seq}: OpenSSL opened the reference's to something else"));
        }
        let mut both = [ours.as_slice(), &our_tag].concat();
        let opened = reference_open
            .open(seq, &mut both)
            .map_err(|e| format!("packet {seq}: the reference refused OpenSSL's: {e}"))?;
        if opened != &packet[4..] {
            return Err(format!("packet {seq}: the reference opened OpenSSL's to something else"));
        }
    }
    Ok(())
}
