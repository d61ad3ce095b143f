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

// ---- Against ssh-keygen ----

/// Whether ssh-keygen is here to be the oracle; says so when not.
/// The oracle must be there: a test that skipped it would pass having
/// checked nothing.
fn require_ssh_keygen() {
    let here = Command::new("ssh-keygen").arg("-?").output().is_ok();
    assert!(here, "ssh-keygen (openssh-client) must be installed");
}

/// A key or certificate to ask about, and its file.
enum Subject {
    Key(KeyData),
    Cert(Box<Certificate>),
}

/// Keys, CAs and certificates made by ssh-keygen in a temporary directory.
struct Lab {
    dir: TempDir,
    files: Vec<PathBuf>,
    subjects: Vec<Subject>,
    certs: usize,
}

impl Lab {
    fn keygen(&self, args: &[&str]) -> std::process::Output {
        Command::new("ssh-keygen")
            .current_dir(self.dir.path())
            .args(args)
            .output()
            .unwrap()
    }

    fn keygen_ok(&self, args: &[&str]) {
        let out = self.keygen(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ssh-keygen {args:?}: {err}");
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name))
            .unwrap()
            .trim()
            .to_string()
    }

    fn new_key(&mut self, name: &str, kind: &[&str]) {
        let mut args = vec!["-q", "-N", "", "-C", name, "-f", name];
        args.extend(kind);
        self.keygen_ok(&args);
        let pubkey = PublicKey::read_openssh_file(self.path(&format!("{name}.pub"))).unwrap();
        self.files.push(self.path(&format!("{name}.pub")));
        self.subjects.push(Subject::Key(pubkey.into()));
    }

    /// Signs a copy of `user`'s key as certificate number `n`.
    fn sign(&mut self, ca: &str, user: &str, serial: u64, id: &str) -> String {
        let name = format!("c{}", self.certs);
        self.certs += 1;
        std::fs::copy(
            self.path(&format!("{user}.pub")),
            self.path(&format!("{name}.pub")),
        )
        .unwrap();
        let serial = serial.to_string();
        let args = ["-q", "-s", ca, "-I", id, "-n", "alice", "-z", &serial];
        self.keygen_ok(&[&args[..], &[&format!("{name}.pub")]].concat());
        let file = self.path(&format!("{name}-cert.pub"));
        let cert = Certificate::read_file(&file).unwrap();
        self.files.push(file);
        self.subjects.push(Subject::Cert(Box::new(cert)));
        format!("{name}-cert.pub")
    }

    /// Writes (or with `update`, adds to) KRL `name` from a spec.
    fn krl(&self, name: &str, ca: Option<&str>, update: bool, spec: &str) -> PathBuf {
        let spec_file = format!("{name}.spec");
        std::fs::write(self.path(&spec_file), spec).unwrap();
        let mut args = vec!["-q", "-k", "-f", name];
        if update {
            args.push("-u");
        }
        if let Some(ca) = ca {
            args.extend(["-s", ca]);
        }
        args.push(&spec_file);
        self.keygen_ok(&args);
        self.path(name)
    }

    /// ssh-keygen -Q's verdict on every subject, or None when it
    /// refuses the KRL.
    fn oracle(&self, krl: &Path) -> Option<Vec<bool>> {
        let krl = krl.to_str().unwrap();
        let files: Vec<&str> = self.files.iter().map(|f| f.to_str().unwrap()).collect();
        let out = self.keygen(&[&["-Q", "-f", krl][..], &files].concat());
        if out.status.code() == Some(255) {
            return None;
        }
        let stdout = String::from_utf8(out.stdout).unwrap();
        let verdicts: Vec<bool> = stdout
            .lines()
            .map(|l| match l.rsplit(": ").next() {
                Some("REVOKED") => true,
                Some("ok") => false,
                _ => panic!("ssh-keygen -Q said {l:?}"),
            })
            .collect();
        assert_eq!(verdicts.len(), files.len(), "{stdout}");
        assert_eq!(out.status.success(), !verdicts.contains(&true));
        Some(verdicts)
    }

    fn ours(&self, data: &[u8]) -> Result<Vec<bool>, String> {
        let r = Revoked::parse(data)?;
        Ok(self.verdicts(&r))
    }

    fn verdicts(&self, r: &Revoked) -> Vec<bool> {
        let verdict = |s: &Subject| match s {
            Subject::Key(k) => r.key_revoked(k),
            Subject::Cert(c) => r.cert_revoked(c),
        };
        self.subjects.iter().map(verdict).collect()
    }

    /// Asserts our verdicts are ssh-keygen's on KRL `path`; returns
    /// how many were compared.
    fn compare(&self, path: &Path) -> usize {
        let data = std::fs::read(path).unwrap();
        let ours = self.ours(&data).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let theirs = self.oracle(path).expect("ssh-keygen reads its own KRL");
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a, b, "{path:?} on {:?}", self.files[i]);
        }
        ours.len()
    }
}

const SERIALS: [u64; 16] = [
    0,
    1,
    5,
    6,
    9,
    10,
    63,
    64,
    70,
    71,
    100,
    199,
    1000,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
];

/// Three CAs (two Ed25519, one ECDSA), six users of three key types,
/// and 25 certificates over a spread of serials and key IDs.
fn lab() -> Lab {
    let mut lab = Lab {
        dir: TempDir::new().unwrap(),
        files: Vec::new(),
        subjects: Vec::new(),
        certs: 0,
    };
    let ed = ["-t", "ed25519"];
    lab.new_key("ca1", &ed);
    lab.new_key("ca2", &["-t", "ecdsa", "-b", "256"]);
    lab.new_key("ca3", &ed);
    for u in ["u1", "u2", "u3", "u4"] {
        lab.new_key(u, &ed);
    }
    lab.new_key("u5", &["-t", "ecdsa", "-b", "384"]);
    lab.new_key("u6", &["-t", "rsa", "-b", "2048"]);
    let users = ["u1", "u2", "u3", "u4", "u5", "u6"];
    let ids = ["alice", "bob", "carol", "dave"];
    for (i, serial) in SERIALS.into_iter().enumerate() {
        lab.sign("ca1", users[i % 6], serial, ids[i % 4]);
    }
    for (i, serial) in [0, 1, 5, 64, 100, u64::MAX].into_iter().enumerate() {
        lab.sign("ca2", users[(i + 1) % 6], serial, ids[(i + 1) % 4]);
    }
    for (i, serial) in [5, 6, 64].into_iter().enumerate() {
        lab.sign("ca3", users[(i + 2) % 6], serial, ids[(i + 3) % 4]);
    }
    lab
}

#[test]
fn verdicts_are_ssh_keygens() {
    require_ssh_keygen();
    let lab = lab();
    let key = |name: &str| lab.read(&format!("{name}.pub"));
    let mut krls = Vec::new();
    krls.push(lab.krl(
        "a",
        Some("ca1.pub"),
        false,
        "serial: 5\nserial: 10-70\nserial: 0x8000000000000000\nid: bob\n",
    ));
    krls.push(lab.krl(
        "b",
        Some("none"),
        false,
        "id: carol\nserial: 6\nserial: 18446744073709551614-18446744073709551615\n",
    ));
    let fp = String::from_utf8(lab.keygen(&["-l", "-f", "u5.pub"]).stdout).unwrap();
    let fp = fp.split(' ').nth(1).unwrap().to_string();
    let spec = format!(
        "key: {}\nsha1: {}\nsha256: {}\nhash: {fp}\nkey: {}\n",
        key("u1"),
        key("u2"),
        key("u3"),
        key("ca2")
    );
    krls.push(lab.krl("c", None, false, &spec));
    // Plain lines: a key (revoked as a blob), certificates (by serial,
    // or by key ID when the serial is 0) under their CA.
    let bare = format!(
        "{}\n{}\n{}\n",
        key("u6"),
        lab.read("c6-cert.pub"),
        lab.read("c16-cert.pub")
    );
    krls.push(lab.krl("d", None, false, &bare));
    let e = lab.krl("e", Some("ca1.pub"), false, "serial: 1\n");
    lab.krl("e", Some("ca2.pub"), true, "serial: 64-100\nid: alice\n");
    lab.krl("e", None, true, &format!("sha256: {}\n", key("ca3")));
    krls.push(e);
    let odd: String = (1..200)
        .step_by(2)
        .map(|n| format!("serial: {n}\n"))
        .collect();
    let f = lab.krl(
        "f",
        Some("ca1.pub"),
        false,
        &(odd + "serial: 1000\nserial: 100000\n"),
    );
    krls.push(f.clone());
    krls.push(lab.krl(
        "g",
        Some("ca2.pub"),
        false,
        "serial: 1-18446744073709551614\n",
    ));
    krls.push(lab.krl("h", None, false, "# nothing\n"));
    let i = lab.krl("i", Some("none"), false, "serial: 1-5\nid: dave\n");
    lab.krl("i", Some("ca3.pub"), true, "id: alice\nserial: 64\n");
    krls.push(i);

    let mut compared = 0;
    let mut revoked = 0;
    for k in &krls {
        compared += lab.compare(k);
        revoked += lab
            .ours(&std::fs::read(k).unwrap())
            .unwrap()
            .iter()
            .filter(|&&v| v)
            .count();
    }
    eprintln!("{compared} verdicts compared with ssh-keygen -Q, {revoked} of them revoked");
    assert!(
        revoked > 30 && revoked < compared / 2,
        "{revoked} of {compared}"
    );
    // ssh-keygen wrote the bitmap, range and list the checks meant to
    // exercise.
    let Kind::Krl(k) = Revoked::parse(&std::fs::read(&f).unwrap()).unwrap().0 else {
        panic!("not a KRL")
    };
    let rules = k.certs.values().next().unwrap();
    assert!(
        !rules.bitmaps.is_empty() && !rules.serials.is_empty(),
        "no bitmap"
    );
    let g = Revoked::parse(&std::fs::read(&krls[6]).unwrap()).unwrap();
    let Kind::Krl(k) = g.0 else { panic!() };
    assert_eq!(k.certs.values().next().unwrap().ranges, [(1, u64::MAX - 1)]);
}

/// Whether a KRL holds what ssh-keygen before 9.4 reads otherwise: a
/// signature (it checked them) or an extension (it knew none).
fn has_newer_sections(data: &[u8]) -> bool {
    let Some(mut r) = data.strip_prefix(MAGIC) else {
        return false;
    };
    if header(&mut r).is_err() {
        return false;
    }
    while let (Ok(kind), Ok(mut body)) = (u8::decode(&mut r), string(&mut r)) {
        match kind {
            SIGNATURE | EXTENSION => return true,
            CERTIFICATES if string(&mut body).and(string(&mut body)).is_ok() => {
                while let (Ok(sub), Ok(_)) = (u8::decode(&mut body), string(&mut body)) {
                    if sub == CERT_EXTENSION {
                        return true;
                    }
                }
            }
            _ => {}
        }
    }
    false
}

/// Every prefix and single-byte change of a real KRL is read as
/// ssh-keygen reads it: refused or not, and then the same verdicts.
#[test]
fn damaged_krls_are_read_as_ssh_keygen_reads_them() {
    require_ssh_keygen();
    let lab = lab();
    let key = |name: &str| lab.read(&format!("{name}.pub"));
    let odd: String = (101..132)
        .step_by(2)
        .map(|n| format!("serial: {n}\n"))
        .collect();
    let spec = format!("serial: 5\nserial: 10-70\nid: bob\n{odd}");
    let path = lab.krl("k", Some("ca1.pub"), false, &spec);
    let keys = format!(
        "key: {}\nsha1: {}\nsha256: {}\n",
        key("u1"),
        key("u2"),
        key("u3")
    );
    lab.krl("k", None, true, &keys);
    lab.krl("k", Some("none"), true, "id: carol\n");
    let data = std::fs::read(&path).unwrap();
    lab.compare(&path);

    let scratch = lab.path("damaged");
    let (mut same, mut refused, mut newer) = (0, 0, 0);
    let mut check = |d: &[u8]| {
        let ours = lab.ours(d);
        if d.len() < MAGIC.len() {
            // Not a KRL: ssh-keygen -Q reads only KRLs.
            return;
        }
        std::fs::write(&scratch, d).unwrap();
        let theirs = lab.oracle(&scratch);
        match (&ours, &theirs) {
            (Ok(a), Some(b)) => assert_eq!(a, b, "{d:?}"),
            (Err(_), None) => refused += 1,
            (Ok(_), None) if has_newer_sections(d) => newer += 1,
            _ => panic!("we said {ours:?}, ssh-keygen {theirs:?}, on {d:?}"),
        }
        same += 1;
    };
    for n in 0..data.len() {
        check(&data[..n]);
    }
    for i in MAGIC.len()..data.len() {
        for flip in [0x01, 0x80] {
            let mut d = data.clone();
            d[i] ^= flip;
            check(&d);
        }
    }
    eprintln!(
        "{same} damaged KRLs ({} bytes) read as ssh-keygen reads them: {refused} refused by both, {newer} with post-9.2 sections",
        data.len()
    );
    assert!(refused > same / 4);
}

#[test]
fn a_text_list_revokes_what_sshd_would() {
    require_ssh_keygen();
    let lab = lab();
    // sshd (sshkey_in_file with check_ca): a listed key, or a listed CA
    // key, revokes; ssh-keygen -Q reads only KRLs, so the expected
    // verdicts are built here.
    let text = format!(
        "# revoked\n\n{}\n\t{}\n",
        lab.read("u2.pub"),
        lab.read("ca3.pub")
    );
    let r = parse(text.as_bytes());
    let (u2, ca3) = (&lab.subjects[4], &lab.subjects[2]);
    let (Subject::Key(u2), Subject::Key(ca3)) = (u2, ca3) else {
        panic!()
    };
    let mut compared = 0;
    for (s, verdict) in lab.subjects.iter().zip(lab.verdicts(&r)) {
        let expected = match s {
            Subject::Key(k) => k == u2 || k == ca3,
            Subject::Cert(c) => c.public_key() == u2 || c.signature_key() == ca3,
        };
        assert_eq!(verdict, expected);
        compared += 1;
    }
    assert!(lab.verdicts(&r).iter().filter(|&&v| v).count() >= 6);
    eprintln!("{compared} text-list verdicts checked");
}

/// Hand-written KRLs at krl.c's edges: refused when ssh-keygen refuses
/// them, and read to the same verdicts when it reads them.
#[test]
fn edges_are_ssh_keygens() {
    require_ssh_keygen();
    let lab = lab();
    let ca1 = blob(
        &PublicKey::from_openssh(&lab.read("ca1.pub"))
            .unwrap()
            .into(),
    );
    let cert_blob = Certificate::read_file(&lab.path("c0-cert.pub")).unwrap();
    let cert_blob = cert_blob.to_bytes().unwrap();
    let on = |ca: &[u8], sub: (u8, Vec<u8>)| krl(&[(CERTIFICATES, certs(ca, &[sub]))]);
    let list = |serials: &[u64]| (CERT_SERIAL_LIST, u64s(serials));
    let range = |lo, hi| (CERT_SERIAL_RANGE, u64s(&[lo, hi]));
    let mut big = vec![0x11; MAX_BITMAP_BYTES];
    big[0] = 0;
    let mut too_big = big.clone();
    too_big[0] = 1;
    let mut trailing = ca1.clone();
    trailing.push(0);
    let mut v2 = krl(&[]);
    v2[11] = 2;
    let comment = |c: &[u8]| {
        let mut k = krl(&[]);
        k.truncate(k.len() - 13);
        [k, s(c)].concat()
    };
    let cases: Vec<(&str, bool, Vec<u8>)> = vec![
        ("serial 0 listed", false, on(&ca1, list(&[5, 0]))),
        ("serials listed", true, on(&ca1, list(&[5, 64, 1 << 63]))),
        ("range from 0", false, on(&ca1, range(0, 3))),
        ("range backwards", false, on(&ca1, range(4, 3))),
        ("range of all", true, on(&ca1, range(1, u64::MAX))),
        ("range of one", true, on(&ca1, range(u64::MAX, u64::MAX))),
        (
            "range, bytes left",
            false,
            on(&ca1, (CERT_SERIAL_RANGE, u64s(&[1, 3, 4]))),
        ),
        ("bitmap serial 0", false, on(&ca1, bitmap_sub(0, &[0x03]))),
        ("bitmap from 0", true, on(&ca1, bitmap_sub(0, &[0x02]))),
        (
            "bitmap to the end",
            true,
            on(b"", bitmap_sub(u64::MAX - 7, &[0, 0xff])),
        ),
        (
            "bitmap past the end",
            false,
            on(b"", bitmap_sub(u64::MAX - 6, &[1, 0])),
        ),
        (
            "bitmap clear past the end",
            false,
            on(b"", bitmap_sub(u64::MAX - 6, &[0x01, 0, 0])),
        ),
        ("bitmap negative", false, on(&ca1, bitmap_sub(1, &[0x80]))),
        (
            "bitmap not minimal",
            true,
            on(&ca1, bitmap_sub(63, &[0, 0, 0x81])),
        ),
        ("bitmap empty", true, on(&ca1, bitmap_sub(63, &[]))),
        ("bitmap at most", true, on(&ca1, bitmap_sub(60, &big))),
        ("bitmap too big", false, on(&ca1, bitmap_sub(60, &too_big))),
        (
            "key ID with a NUL at its end",
            true,
            on(b"", (CERT_KEY_ID, s(b"bob\0"))),
        ),
        (
            "key ID with a NUL inside",
            false,
            on(b"", (CERT_KEY_ID, s(b"b\0ob"))),
        ),
        ("key ID empty", true, on(&ca1, (CERT_KEY_ID, s(b"")))),
        ("CA with bytes left", false, on(&trailing, list(&[5]))),
        ("CA a certificate", true, on(&cert_blob, list(&[5]))),
        (
            "CA unknown",
            false,
            on(&[s(b"foo@example.com"), s(b"x")].concat(), list(&[5])),
        ),
        ("unknown subsection", false, on(&ca1, (0x24, vec![]))),
        ("unknown section", false, krl(&[(6, vec![])])),
        ("format version 2", false, v2),
        ("comment with a NUL at its end", true, comment(b"krl\0")),
        ("comment with a NUL inside", false, comment(b"k\0rl")),
        (
            "empty sections",
            true,
            krl(&[(1, certs(b"", &[])), (2, vec![]), (3, vec![]), (5, vec![])]),
        ),
        ("empty key blob", true, krl(&[(EXPLICIT_KEY, s(b""))])),
        (
            "SHA-1 too long",
            false,
            krl(&[(FINGERPRINT_SHA1, s(&[0; 21]))]),
        ),
        (
            "section, bytes left",
            false,
            krl(&[(EXPLICIT_KEY, vec![0, 0, 0, 0, 1])]),
        ),
        (
            "one CA twice",
            true,
            [
                on(&ca1, list(&[5])),
                krl(&[(1, certs(&ca1, &[range(63, 64)]))])[krl(&[]).len()..].to_vec(),
            ]
            .concat(),
        ),
    ];
    let scratch = lab.path("edge");
    let (mut compared, n) = (0, cases.len());
    for (what, accepted, data) in cases {
        std::fs::write(&scratch, &data).unwrap();
        let (ours, theirs) = (lab.ours(&data), lab.oracle(&scratch));
        assert_eq!(ours.is_ok(), accepted, "{what}: {ours:?}");
        match (&ours, &theirs) {
            (Ok(a), Some(b)) => {
                assert_eq!(a, b, "{what}");
                compared += a.len();
            }
            (Err(_), None) => {}
            _ => panic!("{what}: we said {ours:?}, ssh-keygen {theirs:?}"),
        }
    }
    eprintln!("{n} edge KRLs refused or read as ssh-keygen does: {compared} verdicts");
}
