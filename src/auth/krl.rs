//! OpenSSH revoked-key lists (`[auth] revoked_keys`), read as sshd reads
//! its `RevokedKeys` file: a KRL (OpenSSH's PROTOCOL.krl, what
//! `ssh-keygen -k` writes) when the file starts with the KRL magic, else a
//! text list of public keys, one `type base64 [comment]` per line.
//!
//! This module owns the two formats and the verdict on one key or
//! certificate, after OpenSSH's krl.c (`ssh_krl_from_blob`,
//! `ssh_krl_check_key`) and authfile.c (`sshkey_check_revoked`). Reading
//! the file, and refusing to start or reload when it is bad, are
//! `auth::Trust`'s; a certificate's signature, validity and principals
//! are `auth::cert`'s.
//!
//! The file is trusted-ish input, so parsing is total: no panic, linear
//! time, and memory a small multiple of the file at most (serial ranges
//! and bitmaps are kept as written and queried, never expanded). What
//! OpenSSH refuses, this refuses (an unknown section, a critical
//! extension, serial 0, bytes left over): a list that is not understood
//! is an error, never a list that revokes less.
//!
//! One limit is ssh-encoding's, not OpenSSH's: a length prefix over
//! 1 MiB is an error, so a KRL with one section that large (some 19,000
//! explicit Ed25519 keys) is refused rather than read.

use std::collections::BTreeMap;

use russh::keys::ssh_key::encoding::{self, Decode, Encode, Reader};
use russh::keys::ssh_key::public::KeyData;
use russh::keys::ssh_key::{Certificate, PublicKey};
use sha1::{Digest, Sha1};
use sha2::Sha256;

/// What a KRL starts with: "SSHKRL\n\0".
const MAGIC: &[u8] = b"SSHKRL\n\0";
/// The only KRL format there is.
const FORMAT_VERSION: u32 = 1;

// Section types (PROTOCOL.krl, 1).
const CERTIFICATES: u8 = 1;
const EXPLICIT_KEY: u8 = 2;
const FINGERPRINT_SHA1: u8 = 3;
const SIGNATURE: u8 = 4;
const FINGERPRINT_SHA256: u8 = 5;
const EXTENSION: u8 = 255;

// Subsection types of a certificates section (PROTOCOL.krl, 2).
const CERT_SERIAL_LIST: u8 = 0x20;
const CERT_SERIAL_RANGE: u8 = 0x21;
const CERT_SERIAL_BITMAP: u8 = 0x22;
const CERT_KEY_ID: u8 = 0x23;
const CERT_EXTENSION: u8 = 0x39;

/// The longest bitmap OpenSSH reads (`SSHBUF_MAX_BIGNUM`): 16384 bits,
/// plus the zero byte an mpint needs when its top bit is set.
const MAX_BITMAP_BYTES: usize = 16384 / 8 + 1;

/// What a revoked-keys file revokes.
pub(crate) struct Revoked(Kind);

enum Kind {
    Krl(Krl),
    /// A text list's keys; a certificate listed stands for its plain key,
    /// as sshd compares them (`sshkey_equal_public`).
    Keys(Vec<KeyData>),
}

impl Revoked {
    /// Parses a file's bytes: a KRL when it starts with the KRL magic, else
    /// a text key list. Errors are one line, for a text list naming the
    /// 1-based line ("line 3: not a public key").
    pub(crate) fn parse(data: &[u8]) -> Result<Revoked, String> {
        let kind = match data.strip_prefix(MAGIC) {
            Some(krl) => Kind::Krl(Krl::parse(krl).map_err(one_line)?),
            None => Kind::Keys(parse_list(data).map_err(one_line)?),
        };
        Ok(Revoked(kind))
    }

    /// Whether a plain public key is revoked. A certificate passed as a
    /// key is checked as one.
    pub(crate) fn key_revoked(&self, key: &KeyData) -> bool {
        if let Some(cert) = key.certificate() {
            return self.cert_revoked(cert);
        }
        match &self.0 {
            Kind::Krl(krl) => krl.key_revoked(key),
            Kind::Keys(keys) => keys.contains(key),
        }
    }

    /// Whether a user certificate is revoked, as OpenSSH's
    /// `ssh_krl_check_key` decides: its serial or key ID revoked under the
    /// CA that signed it or under any CA, its certified key revoked (as a
    /// blob, or by SHA-1 or SHA-256 hash), or its CA key revoked. For a
    /// text list: its key or its CA key is listed.
    pub(crate) fn cert_revoked(&self, cert: &Certificate) -> bool {
        let (key, ca) = (cert.public_key(), cert.signature_key());
        // A certificate for a certificate, or signed by one: OpenSSH
        // refuses it when reading it (`cert_parse`), so deny it here too.
        if key.is_certificate() || ca.is_certificate() {
            return true;
        }
        match &self.0 {
            Kind::Krl(krl) => krl.key_revoked(key) || krl.cert_listed(cert) || krl.key_revoked(ca),
            Kind::Keys(keys) => keys.contains(key) || keys.contains(ca),
        }
    }
}

/// A KRL as krl.c keeps it once read.
#[derive(Default)]
struct Krl {
    /// Certificates revoked, by the CA that signed them (`None`: any CA).
    /// Sections naming the same CA add to one entry, as in krl.c.
    certs: BTreeMap<Option<KeyData>, CertRules>,
    /// Plain keys' wire blobs (section 2).
    keys: Strings,
    /// SHA-1 and SHA-256 hashes of plain keys' blobs (sections 3 and 5).
    sha1: Vec<[u8; 20]>,
    sha256: Vec<[u8; 32]>,
}

/// The certificates revoked under one CA.
#[derive(Default)]
struct CertRules {
    serials: Vec<u64>,
    /// Inclusive ranges, never expanded: `1-18446744073709551615` is one.
    ranges: Vec<(u64, u64)>,
    /// Each bitmap's first serial and its bytes, most significant first
    /// (the bit of value 1 in the last byte is the first serial).
    bitmaps: Vec<(u64, Box<[u8]>)>,
    key_ids: Strings,
}

/// Byte strings end to end in one buffer: many short ones cost their
/// bytes and an offset each, not an allocation each.
#[derive(Default)]
struct Strings {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Strings {
    fn push(&mut self, s: &[u8]) {
        self.bytes.extend_from_slice(s);
        self.ends.push(self.bytes.len());
    }

    fn contains(&self, s: &[u8]) -> bool {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .any(|(start, &end)| self.bytes.get(start..end) == Some(s))
    }
}

impl Krl {
    /// Reads what follows the magic (`ssh_krl_from_blob`).
    fn parse(mut r: &[u8]) -> Result<Krl, String> {
        header(&mut r).map_err(|e| format!("KRL header: {e}"))?;
        let mut krl = Krl::default();
        let mut n = 0;
        while !r.is_empty() {
            n += 1;
            krl.section(&mut r)
                .map_err(|e| format!("KRL section {n}: {e}"))?;
        }
        Ok(krl)
    }

    fn section(&mut self, r: &mut &[u8]) -> Result<(), String> {
        let kind = u8::decode(r).map_err(wire)?;
        let body = string(r)?;
        match kind {
            CERTIFICATES => self.certificates(body),
            EXPLICIT_KEY => each_string(body, |blob| {
                self.keys.push(blob);
                Ok(())
            }),
            FINGERPRINT_SHA1 => each_string(body, |hash| {
                let hash = hash
                    .try_into()
                    .map_err(|_| "a SHA-1 hash not 20 bytes long")?;
                self.sha1.push(hash);
                Ok(())
            }),
            FINGERPRINT_SHA256 => each_string(body, |hash| {
                let hash = hash
                    .try_into()
                    .map_err(|_| "a SHA-256 hash not 32 bytes long")?;
                self.sha256.push(hash);
                Ok(())
            }),
            // Two strings: the signing key (read above) and the signature.
            // OpenSSH never finished KRL signing; since 9.4 krl.c skips
            // signatures unchecked, and sshd never required them.
            SIGNATURE => string(r).map(|_| ()),
            EXTENSION => extension(body),
            other => Err(format!("unknown section type {other}")),
        }
    }

    /// A certificates section: a CA (empty: any CA), a reserved string,
    /// then subsections (`parse_revoked_certs`).
    fn certificates(&mut self, mut r: &[u8]) -> Result<(), String> {
        let ca = match string(&mut r)? {
            [] => None,
            blob => Some(ca_key(blob)?),
        };
        string(&mut r)?;
        let rules = self.certs.entry(ca).or_default();
        while !r.is_empty() {
            let kind = u8::decode(&mut r).map_err(wire)?;
            let body = string(&mut r)?;
            rules
                .subsection(kind, body)
                .map_err(|e| format!("certificates subsection {kind:#04x}: {e}"))?;
        }
        Ok(())
    }

    /// `is_key_revoked` for a plain key: by hash or as a blob.
    fn key_revoked(&self, key: &KeyData) -> bool {
        // A key with no wire form cannot be looked up: deny, as OpenSSH
        // takes any error from the check for a revocation.
        let Ok(blob) = key.encode_vec() else {
            return true;
        };
        let sha1: [u8; 20] = Sha1::digest(&blob).into();
        let sha256: [u8; 32] = Sha256::digest(&blob).into();
        self.sha1.contains(&sha1) || self.sha256.contains(&sha256) || self.keys.contains(&blob)
    }

    /// Whether a certificate's serial or key ID is revoked under its CA or
    /// under any CA.
    fn cert_listed(&self, cert: &Certificate) -> bool {
        let signer = cert.signature_key();
        self.certs
            .iter()
            .filter(|(ca, _)| ca.as_ref().is_none_or(|ca| ca == signer))
            .any(|(_, rules)| rules.revokes(cert))
    }
}

/// The header after the magic. Nothing here depends on its KRL version,
/// date, flags (none are defined) or comment, but they must be there.
fn header(r: &mut &[u8]) -> Result<(), String> {
    let version = u32::decode(r).map_err(wire)?;
    if version != FORMAT_VERSION {
        return Err(format!("format version {version}, not {FORMAT_VERSION}"));
    }
    for _ in 0..3 {
        u64::decode(r).map_err(wire)?;
    }
    string(r)?;
    c_string(r)?;
    Ok(())
}

/// A CA key in a certificates section. krl.c parses it
/// (`sshkey_from_blob`), so a blob that is not a key it knows, or has
/// bytes after the key, makes the KRL unreadable there too.
fn ca_key(mut blob: &[u8]) -> Result<KeyData, String> {
    let key = KeyData::decode(&mut blob).map_err(|e| format!("CA key: {e}"))?;
    blob.ensure_finished()
        .map_err(|e| format!("CA key: {}", wire(e)))?;
    if key.is_other() {
        return Err(format!("CA key of an unknown type {}", key.algorithm()));
    }
    Ok(key)
}

impl CertRules {
    fn subsection(&mut self, kind: u8, mut r: &[u8]) -> Result<(), String> {
        match kind {
            CERT_SERIAL_LIST => {
                while !r.is_empty() {
                    let serial = u64::decode(&mut r).map_err(wire)?;
                    self.serials.push(revocable(serial, serial)?.0);
                }
            }
            CERT_SERIAL_RANGE => {
                let lo = u64::decode(&mut r).map_err(wire)?;
                let hi = u64::decode(&mut r).map_err(wire)?;
                r.ensure_finished().map_err(wire)?;
                self.ranges.push(revocable(lo, hi)?);
            }
            CERT_SERIAL_BITMAP => {
                let first = u64::decode(&mut r).map_err(wire)?;
                let bits = string(&mut r)?;
                r.ensure_finished().map_err(wire)?;
                if let Some(bits) = bitmap(first, bits)? {
                    self.bitmaps.push((first, bits.into()));
                }
            }
            CERT_KEY_ID => {
                while !r.is_empty() {
                    self.key_ids.push(c_string(&mut r)?);
                }
            }
            CERT_EXTENSION => extension(r)?,
            other => return Err(format!("unknown type {other:#04x}")),
        }
        Ok(())
    }

    /// `is_cert_revoked`: by key ID, then by serial, serial 0 (a CA that
    /// gave none) never.
    fn revokes(&self, cert: &Certificate) -> bool {
        // OpenSSH reads both key IDs as C strings: compare up to a NUL.
        let id = cert.key_id().as_bytes();
        let id = id.split(|&b| b == 0).next().unwrap_or_default();
        if self.key_ids.contains(id) {
            return true;
        }
        let serial = cert.serial();
        serial != 0
            && (self.serials.contains(&serial)
                || self
                    .ranges
                    .iter()
                    .any(|&(lo, hi)| (lo..=hi).contains(&serial))
                || self.bitmaps.iter().any(|(first, bits)| {
                    serial
                        .checked_sub(*first)
                        .is_some_and(|index| bit_set(bits, index))
                }))
    }
}

/// A serial range krl.c accepts (`ssh_krl_revoke_cert_by_serial_range`):
/// serial 0 cannot be revoked, and a range runs upwards.
fn revocable(lo: u64, hi: u64) -> Result<(u64, u64), String> {
    if lo == 0 {
        return Err("serial 0 revoked (OpenSSH refuses it)".into());
    }
    if lo > hi {
        return Err(format!("serial range {lo}-{hi} runs backwards"));
    }
    Ok((lo, hi))
}

/// A serial bitmap's bits, as OpenSSH reads the mpint
/// (`sshbuf_get_bignum2_bytes_direct`, then krl.c's checks): positive, at
/// most 16384 bits, leading zero bytes dropped; no bit for serial 0, and
/// no bit past serial 2^64-1, set or not. `None` when no bit is set.
fn bitmap(first: u64, mpint: &[u8]) -> Result<Option<&[u8]>, String> {
    let top = mpint.first().copied().unwrap_or(0);
    if top & 0x80 != 0 {
        return Err("a negative bitmap".into());
    }
    if mpint.len() > MAX_BITMAP_BYTES || (mpint.len() == MAX_BITMAP_BYTES && top != 0) {
        return Err("a bitmap over 16384 bits".into());
    }
    let start = mpint.iter().position(|&b| b != 0).unwrap_or(mpint.len());
    let bits = mpint.get(start..).unwrap_or_default();
    let (Some(&high), Some(&low)) = (bits.first(), bits.last()) else {
        return Ok(None);
    };
    // At most 2049 bytes: no overflow.
    let nbits = (bits.len() - 1) * 8 + (8 - high.leading_zeros() as usize);
    if u128::from(first) + nbits as u128 - 1 > u128::from(u64::MAX) {
        return Err(format!("a bitmap from serial {first} runs past 2^64-1"));
    }
    if first == 0 && low & 1 != 0 {
        return Err("serial 0 revoked (OpenSSH refuses it)".into());
    }
    Ok(Some(bits))
}

/// Whether bit `index` (0: the last byte's lowest) is set.
fn bit_set(bits: &[u8], index: u64) -> bool {
    let byte = usize::try_from(index / 8).ok();
    let at = byte.and_then(|b| bits.len().checked_sub(b.checked_add(1)?));
    at.and_then(|at| bits.get(at))
        .is_some_and(|b| b >> (index % 8) & 1 == 1)
}

/// An extension (section 255, certificates subsection 0x39): a name, a
/// critical flag (any non-zero byte, as krl.c reads it) and contents.
/// OpenSSH knows none, so it skips them unless critical, and so does this.
fn extension(mut r: &[u8]) -> Result<(), String> {
    let name = c_string(&mut r)?;
    let critical = u8::decode(&mut r).map_err(wire)?;
    string(&mut r)?;
    r.ensure_finished().map_err(wire)?;
    if critical != 0 {
        let name: String = String::from_utf8_lossy(name).chars().take(64).collect();
        return Err(format!("critical extension {name:?} not understood"));
    }
    Ok(())
}

/// A `string`'s bytes, borrowed from the input.
fn string<'a>(r: &mut &'a [u8]) -> Result<&'a [u8], String> {
    r.read_prefixed(|body: &mut &'a [u8]| Ok::<_, encoding::Error>(std::mem::take(body)))
        .map_err(wire)
}

/// A string OpenSSH reads as a C string (`sshbuf_get_cstring`): a NUL
/// only as its last byte, which is not part of it.
fn c_string<'a>(r: &mut &'a [u8]) -> Result<&'a [u8], String> {
    let s = string(r)?;
    let s = s.strip_suffix(b"\0").unwrap_or(s);
    if s.contains(&0) {
        return Err("a NUL inside a string".into());
    }
    Ok(s)
}

/// Calls `f` on each string of a section that is only strings.
fn each_string<'a>(
    mut r: &'a [u8],
    mut f: impl FnMut(&'a [u8]) -> Result<(), String>,
) -> Result<(), String> {
    while !r.is_empty() {
        f(string(&mut r)?)?;
    }
    Ok(())
}

/// A wire-format error, said for someone reading a KRL.
fn wire(e: encoding::Error) -> String {
    match e {
        encoding::Error::Length => "truncated".into(),
        encoding::Error::Overflow => "a length over 1 MiB (the most this reads)".into(),
        encoding::Error::TrailingData { remaining } => format!("{remaining} bytes left over"),
        e => e.to_string(),
    }
}

/// An error as one printable line of bounded length, whatever the file
/// put in it: ssh-key's errors quote what they could not read (an
/// algorithm name, say), newlines included.
fn one_line(e: String) -> String {
    let mut line = String::new();
    for c in e.chars().take(300) {
        if c.is_control() {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    line
}

/// A text list (`sshkey_in_file` as sshd's `sshkey_check_revoked` calls
/// it): one key per line; blank lines and `#` comments skipped.
fn parse_list(text: &[u8]) -> Result<Vec<KeyData>, String> {
    let mut keys = Vec::new();
    for (n, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.trim_ascii();
        if line.is_empty() || line.starts_with(b"#") {
            continue;
        }
        let key = listed_key(line).map_err(|e| format!("line {}: not a public key: {e}", n + 1))?;
        keys.push(key);
    }
    Ok(keys)
}

/// One line's key: its type and base64, then anything (a comment). A
/// certificate stands for its plain key.
fn listed_key(line: &[u8]) -> Result<KeyData, String> {
    let mut fields = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let (Some(kind), Some(base64)) = (fields.next(), fields.next()) else {
        return Err("no base64 after the key type".into());
    };
    // Tabs between fields are sshd's; ssh-key wants one space.
    let text = [kind, b" ", base64].concat();
    let text = std::str::from_utf8(&text).map_err(|_| "not ASCII")?;
    let key = if kind.ends_with(b"-cert-v01@openssh.com") {
        let cert = Certificate::from_openssh(text).map_err(|e| e.to_string())?;
        cert.public_key().clone()
    } else {
        KeyData::from(PublicKey::from_openssh(text).map_err(|e| e.to_string())?)
    };
    // sshd refuses a type it does not know; so does this.
    if key.is_other() || key.is_certificate() {
        return Err(format!("unknown key type {}", key.algorithm()));
    }
    Ok(key)
}

#[cfg(test)]
mod tests;
