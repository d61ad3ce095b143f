//! Tests of `auth::krl`.

use super::*;
use russh::keys::ssh_key::PrivateKey;
use russh::keys::ssh_key::certificate::Builder;
use russh::keys::ssh_key::private::Ed25519Keypair;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

// ---- KRLs written by hand, checked against krl.c's rules ----

/// A string: its length, then its bytes.
fn s(bytes: &[u8]) -> Vec<u8> {
    bytes.encode_vec().unwrap()
}

fn u64s(serials: &[u64]) -> Vec<u8> {
    serials.iter().flat_map(|s| s.to_be_bytes()).collect()
}

/// A KRL of these sections (type, body).
fn krl(sections: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend(FORMAT_VERSION.to_be_bytes());
    out.extend(u64s(&[7, 1_700_000_000, 0]));
    out.extend(s(b""));
    out.extend(s(b"a comment"));
    for (kind, body) in sections {
        out.push(*kind);
        out.extend(s(body));
    }
    out
}

/// A certificates section's body: a CA blob (empty: any CA) and subsections.
fn certs(ca: &[u8], subsections: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = [s(ca), s(b"")].concat();
    for (kind, body) in subsections {
        out.push(*kind);
        out.extend(s(body));
    }
    out
}

fn ca_key(seed: u8) -> PrivateKey {
    PrivateKey::from(Ed25519Keypair::from_seed(&[seed; 32]))
}

fn blob(key: &KeyData) -> Vec<u8> {
    key.encode_vec().unwrap()
}

/// A user certificate for the key of `user` (a seed), signed by `ca`.
fn cert(ca: &PrivateKey, user: u8, serial: u64, id: &str) -> Certificate {
    let key = ca_key(user).public_key().key_data().clone();
    let mut b = Builder::new([9; 32], key, 0, u64::MAX).unwrap();
    b.serial(serial).unwrap().key_id(id).unwrap();
    b.valid_principal("alice").unwrap();
    b.sign(ca).unwrap()
}

fn parse(data: &[u8]) -> Revoked {
    Revoked::parse(data).unwrap_or_else(|e| panic!("{e}"))
}

fn refused(data: &[u8], why: &str) {
    match Revoked::parse(data) {
        Ok(_) => panic!("accepted, expected {why:?}"),
        Err(e) => {
            assert!(e.contains(why), "{e:?} does not say {why:?}");
            assert!(!e.contains('\n'), "{e:?}");
        }
    }
}

#[test]
fn an_empty_krl_revokes_nothing_and_the_header_is_checked() {
    let ca = ca_key(1);
    let r = parse(&krl(&[]));
    assert!(!r.cert_revoked(&cert(&ca, 2, 5, "bob")));
    assert!(!r.key_revoked(ca.public_key().key_data()));
    let mut v2 = krl(&[]);
    v2[11] = 2;
    refused(&v2, "format version 2");
    let mut nul = krl(&[]);
    let at = nul.len() - 3;
    nul[at] = 0;
    refused(&nul, "NUL inside");
    refused(&krl(&[])[..30], "header: truncated");
    // A trailing NUL ends a C string, as in OpenSSH.
    let mut ok = krl(&[]);
    let at = ok.len() - 1;
    ok[at] = 0;
    parse(&ok);
}

#[test]
fn serials_ranges_and_key_ids_are_per_ca_or_any_ca() {
    let (ca, other) = (ca_key(1), ca_key(2));
    let ca_blob = blob(ca.public_key().key_data());
    let r = parse(&krl(&[
        (
            CERTIFICATES,
            certs(
                &ca_blob,
                &[
                    (CERT_SERIAL_LIST, u64s(&[5, 9])),
                    (CERT_SERIAL_RANGE, u64s(&[100, 200])),
                    (CERT_KEY_ID, [s(b"bob"), s(b"carol\0")].concat()),
                ],
            ),
        ),
        (CERTIFICATES, certs(b"", &[(CERT_KEY_ID, s(b"dave"))])),
    ]));
    for (serial, id, by_ca, by_other) in [
        (5, "x", true, false),
        (9, "x", true, false),
        (6, "x", false, false),
        (100, "x", true, false),
        (200, "x", true, false),
        (201, "x", false, false),
        (0, "x", false, false),
        (0, "bob", true, false),
        (7, "carol", true, false),
        (7, "dave", true, true),
        (0, "dave", true, true),
        (7, "bob\0tail", true, false),
    ] {
        assert_eq!(
            r.cert_revoked(&cert(&ca, 3, serial, id)),
            by_ca,
            "{serial} {id}"
        );
        assert_eq!(
            r.cert_revoked(&cert(&other, 3, serial, id)),
            by_other,
            "{serial} {id}"
        );
    }
    // A CA's rules are not its key's: the CA key itself is not revoked.
    assert!(!r.key_revoked(ca.public_key().key_data()));
}

#[test]
fn a_range_to_the_last_serial_is_one_entry() {
    let ca = ca_key(1);
    let sub = (CERT_SERIAL_RANGE, u64s(&[1, u64::MAX]));
    let r = parse(&krl(&[(CERTIFICATES, certs(b"", &[sub]))]));
    let Kind::Krl(k) = &r.0 else { panic!() };
    assert_eq!(k.certs[&None].ranges, [(1, u64::MAX)]);
    for serial in [1, 2, u64::MAX - 1, u64::MAX] {
        assert!(r.cert_revoked(&cert(&ca, 2, serial, "x")), "{serial}");
    }
    assert!(!r.cert_revoked(&cert(&ca, 2, 0, "x")));
}

#[test]
fn serial_zero_and_backward_ranges_are_refused() {
    let any = |sub: (u8, Vec<u8>)| krl(&[(CERTIFICATES, certs(b"", &[sub]))]);
    refused(&any((CERT_SERIAL_LIST, u64s(&[3, 0]))), "serial 0");
    refused(&any((CERT_SERIAL_RANGE, u64s(&[0, 3]))), "serial 0");
    refused(&any((CERT_SERIAL_RANGE, u64s(&[4, 3]))), "backwards");
    refused(
        &any((CERT_SERIAL_RANGE, u64s(&[1, 3, 4]))),
        "8 bytes left over",
    );
    refused(&any((CERT_SERIAL_LIST, vec![1; 12])), "truncated");
    refused(&any((0x24, vec![])), "unknown type 0x24");
}

/// A bitmap subsection: its first serial and mpint.
fn bitmap_sub(first: u64, mpint: &[u8]) -> (u8, Vec<u8>) {
    (CERT_SERIAL_BITMAP, [u64s(&[first]), s(mpint)].concat())
}

#[test]
fn bitmaps_are_read_as_openssh_reads_them() {
    let ca = ca_key(1);
    let any = |sub: (u8, Vec<u8>)| krl(&[(CERTIFICATES, certs(b"", &[sub]))]);
    // Bit 0 is the last byte's lowest: serials 101 and 108; a
    // non-minimal mpint is trimmed, not refused.
    let r = parse(&any(bitmap_sub(100, &[0, 0x01, 0x02])));
    let revoked: Vec<u64> = (95..120)
        .filter(|&n| r.cert_revoked(&cert(&ca, 2, n, "x")))
        .collect();
    assert_eq!(revoked, [101, 108]);
    // Up to the last serial, not past it.
    let r = parse(&any(bitmap_sub(u64::MAX - 7, &[0x00, 0xff])));
    assert!(r.cert_revoked(&cert(&ca, 2, u64::MAX, "x")));
    refused(&any(bitmap_sub(u64::MAX - 6, &[0x01, 0x00])), "past 2^64-1");
    refused(&any(bitmap_sub(0, &[0x03])), "serial 0");
    parse(&any(bitmap_sub(0, &[0x02])));
    refused(&any(bitmap_sub(1, &[0x80])), "negative");
    let mut big = vec![0x7f; MAX_BITMAP_BYTES];
    big[0] = 0;
    parse(&any(bitmap_sub(1, &big)));
    big[0] = 1;
    refused(&any(bitmap_sub(1, &big)), "over 16384 bits");
    refused(
        &any(bitmap_sub(1, &[0; MAX_BITMAP_BYTES + 1])),
        "over 16384",
    );
    // An empty bitmap revokes nothing and is kept as nothing.
    let r = parse(&any(bitmap_sub(1, &[0, 0])));
    let Kind::Krl(k) = &r.0 else { panic!() };
    assert!(k.certs[&None].bitmaps.is_empty());
}

#[test]
fn keys_are_revoked_as_blobs_and_by_hash_with_their_certificates() {
    let (ca, user) = (ca_key(1), ca_key(2));
    let key = user.public_key().key_data();
    let ca_public = ca.public_key().key_data();
    let sha1: [u8; 20] = Sha1::digest(blob(key)).into();
    let sha256: [u8; 32] = Sha256::digest(blob(ca_public)).into();
    for (kind, body, user_revoked, ca_revoked) in [
        (EXPLICIT_KEY, s(&blob(key)), true, false),
        (FINGERPRINT_SHA1, s(&sha1), true, false),
        (FINGERPRINT_SHA256, s(&sha256), false, true),
        (EXPLICIT_KEY, s(&blob(ca_public)), false, true),
    ] {
        let r = parse(&krl(&[(kind, body)]));
        assert_eq!(r.key_revoked(key), user_revoked);
        assert_eq!(r.key_revoked(ca_public), ca_revoked);
        // Any certificate of a revoked key, or from a revoked CA.
        let c = cert(&ca, 2, 5, "x");
        assert!(r.cert_revoked(&c));
        assert!(!r.cert_revoked(&cert(&ca_key(3), 4, 5, "x")));
        let as_key = KeyData::from(c);
        assert!(r.key_revoked(&as_key));
    }
    refused(&krl(&[(FINGERPRINT_SHA1, s(&[0; 32]))]), "not 20 bytes");
    refused(&krl(&[(FINGERPRINT_SHA256, s(&[0; 20]))]), "not 32 bytes");
    refused(&krl(&[(EXPLICIT_KEY, vec![0, 0, 0, 9, 1])]), "truncated");
}

#[test]
fn errors_are_one_line_whatever_the_file_holds() {
    // Found by the fuzzer: ssh-key quotes a bad algorithm name.
    let ca = [s(b"ss\nx"), s(b"")].concat();
    let e = Revoked::parse(&krl(&[(CERTIFICATES, certs(&ca, &[]))])).err();
    assert!(e.as_ref().is_some_and(|e| !e.contains('\n')), "{e:?}");
    let e = Revoked::parse(b"ssh-ed25519\r\x1b[31m AAAA\n")
        .err()
        .unwrap();
    assert!(!e.contains(['\n', '\r', '\x1b']), "{e:?}");
    let long = krl(&[(EXTENSION, [s(&[b'x'; 5000]), vec![1], s(b"")].concat())]);
    assert!(Revoked::parse(&long).err().unwrap().len() < 400);
}

#[test]
fn ca_keys_must_be_keys() {
    let mut ca = blob(ca_key(1).public_key().key_data());
    ca.push(0);
    refused(
        &krl(&[(CERTIFICATES, certs(&ca, &[]))]),
        "1 bytes left over",
    );
    let unknown = [s(b"foo@example.com"), s(b"data")].concat();
    refused(
        &krl(&[(CERTIFICATES, certs(&unknown, &[]))]),
        "unknown type",
    );
    refused(&krl(&[(CERTIFICATES, certs(b"junk", &[]))]), "CA key");
}

#[test]
fn extensions_are_skipped_unless_critical_and_signatures_skipped() {
    let ext = |critical: u8| [s(b"x@example.com"), vec![critical], s(b"v")].concat();
    parse(&krl(&[(EXTENSION, ext(0))]));
    refused(
        &krl(&[(EXTENSION, ext(1))]),
        "critical extension \"x@example.com\"",
    );
    refused(&krl(&[(EXTENSION, ext(2))]), "critical extension");
    let sub = |critical| (CERT_EXTENSION, ext(critical));
    parse(&krl(&[(CERTIFICATES, certs(b"", &[sub(0)]))]));
    refused(&krl(&[(CERTIFICATES, certs(b"", &[sub(1)]))]), "critical");
    refused(
        &krl(&[(EXTENSION, [ext(0), vec![0]].concat())]),
        "left over",
    );
    refused(&krl(&[(6, vec![])]), "unknown section type 6");
    // A signature: the key as the section's body, then the signature.
    let mut signed = krl(&[(SIGNATURE, s(b"key"))]);
    signed.extend(s(b"signature"));
    let r = parse(&signed);
    assert!(!r.key_revoked(ca_key(1).public_key().key_data()));
    refused(&krl(&[(SIGNATURE, s(b"key"))]), "truncated");
}

#[test]
fn lengths_past_a_mebibyte_are_refused_not_read() {
    let mut data = krl(&[]);
    data.push(EXPLICIT_KEY);
    data.extend(0x0010_0000u32.to_be_bytes());
    data.extend(vec![0; 0x0010_0000]);
    refused(&data, "over 1 MiB");
}

#[test]
fn big_krls_parse_in_linear_time() {
    let serials: Vec<u64> = (1..=100_000).collect();
    let list = (CERT_SERIAL_LIST, u64s(&serials));
    let ids: Vec<u8> = (0..20_000)
        .flat_map(|i| s(format!("id{i}").as_bytes()))
        .collect();
    let many: Vec<(u8, Vec<u8>)> = (0..20_000)
        .map(|_| (EXTENSION, [s(b"x@y"), vec![0], s(b"")].concat()))
        .collect();
    let mut data = krl(&[(CERTIFICATES, certs(b"", &[list, (CERT_KEY_ID, ids)]))]);
    data.extend(krl(&many).split_off(krl(&[]).len()));
    let t = std::time::Instant::now();
    let r = parse(&data);
    assert!(t.elapsed().as_secs() < 2, "{:?}", t.elapsed());
    assert!(r.cert_revoked(&cert(&ca_key(1), 2, 99_999, "x")));
    assert!(r.cert_revoked(&cert(&ca_key(1), 2, 0, "id19999")));
}

#[test]
fn every_prefix_and_byte_flip_of_a_krl_parses_without_panic() {
    let (ca, user) = (ca_key(1), ca_key(2));
    let data = krl(&[
        (
            CERTIFICATES,
            certs(
                &blob(ca.public_key().key_data()),
                &[
                    (CERT_SERIAL_LIST, u64s(&[5])),
                    (CERT_SERIAL_RANGE, u64s(&[9, 12])),
                    bitmap_sub(60, &[0x55, 0xaa]),
                    (CERT_KEY_ID, s(b"bob")),
                ],
            ),
        ),
        (EXPLICIT_KEY, s(&blob(user.public_key().key_data()))),
        (FINGERPRINT_SHA1, s(&[1; 20])),
        (FINGERPRINT_SHA256, s(&[2; 32])),
        (EXTENSION, [s(b"x@y"), vec![0], s(b"")].concat()),
    ]);
    let c = cert(&ca, 3, 61, "x");
    assert!(parse(&data).cert_revoked(&c));
    for n in 0..=data.len() {
        if let Ok(r) = Revoked::parse(&data[..n]) {
            let _ = (
                r.cert_revoked(&c),
                r.key_revoked(user.public_key().key_data()),
            );
        }
    }
    for i in 0..data.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut d = data.clone();
            d[i] ^= flip;
            if let Ok(r) = Revoked::parse(&d) {
                let _ = (
                    r.cert_revoked(&c),
                    r.key_revoked(user.public_key().key_data()),
                );
            }
        }
    }
}

// ---- Text lists ----

#[test]
fn a_text_list_names_its_bad_line() {
    let key = ca_key(2).public_key().to_openssh().unwrap();
    let text = format!("# revoked\n\n  {key} someone\nssh-ed25519 AAAA!!\n");
    assert_eq!(
        Revoked::parse(text.as_bytes())
            .err()
            .unwrap()
            .split(':')
            .next(),
        Some("line 4")
    );
    let text = format!("{key}\nnot a key\n");
    let e = Revoked::parse(text.as_bytes()).err().unwrap();
    assert!(e.starts_with("line 2: not a public key"), "{e}");
    assert!(!e.contains('\n'));
    let e = Revoked::parse(b"\xff\xfe binary\n").err().unwrap();
    assert!(e.starts_with("line 1: "), "{e}");
    // Tabs, CRLF and comments after the key are sshd's format too.
    let tabbed = key.replacen(' ', "\t", 1);
    let r = parse(format!("{tabbed}\t# x\r\n").as_bytes());
    assert!(r.key_revoked(ca_key(2).public_key().key_data()));
    // An empty file revokes nothing.
    assert!(!parse(b"").key_revoked(ca_key(2).public_key().key_data()));
}

#[test]
fn a_text_list_revokes_keys_and_their_certificates_and_cas() {
    let (ca, other, user) = (ca_key(1), ca_key(2), ca_key(3));
    let listed = [
        user.public_key().to_openssh().unwrap(),
        ca.public_key().to_openssh().unwrap(),
        cert(&other, 4, 1, "x").to_openssh().unwrap(),
    ];
    let r = parse(listed.join("\n").as_bytes());
    assert!(r.key_revoked(user.public_key().key_data()));
    assert!(r.key_revoked(ca.public_key().key_data()));
    assert!(r.key_revoked(ca_key(4).public_key().key_data()));
    assert!(!r.key_revoked(other.public_key().key_data()));
    assert!(r.cert_revoked(&cert(&other, 3, 7, "x")));
    assert!(r.cert_revoked(&cert(&ca, 5, 7, "x")));
    assert!(r.cert_revoked(&cert(&other, 4, 9, "y")));
    assert!(!r.cert_revoked(&cert(&other, 5, 7, "x")));
}

/// The parser against ssh-keygen itself, on the same files.
mod against_ssh_keygen;
