//! Every verdict checked against `ssh-keygen -Q` on the same KRL and
//! keys: the real thing the parser models.

use super::*;

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
