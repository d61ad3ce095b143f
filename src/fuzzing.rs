//! The properties the fuzz targets (`fuzz/`) check, one function per
//! parser of untrusted input, each taking raw bytes and panicking when a
//! property fails. The targets only call these, so they fuzz the crate as
//! it is built, not a copy of some of its files; and the unit tests below
//! run the same properties over the seeds and a few hand-picked inputs.
//!
//! Built only under `cargo fuzz` (`--cfg fuzzing`) and for tests: nothing
//! here is part of walissh's interface.

use crate::audit::Kind;
use std::sync::LazyLock;

use crate::config::AiMode;
use crate::context::redact::{Numbering, Redactor};
use crate::terminal::marks::{Level, Mark, Scanner};
use crate::terminal::nested::{self, Nesting};
use crate::terminal::prompt;
use crate::terminal::sanitize::Sanitizer;
use crate::upstream::known_hosts::{self, Known};
use russh::keys::PublicKey;
use walissh_policy::{self as policy, Policy, Verdict};

mod ssh;

/// The scanner that takes walissh's marks out of a session's output
/// (`terminal::marks`): it never panics, never holds bytes back for good,
/// gives the same result however the stream is cut into reads, and leaves
/// any stream without the session's nonces exactly as it was. A nested
/// shell's nonce is pending too, so its ready mark (which makes it a level
/// of its own mid-stream) is exercised, and a new nonce is being given,
/// so its confirmation is: a confirmation (R) is found only where the
/// stream carries the new nonce with the one it replaces. The first byte
/// picks where to cut the rest into two reads; when it is odd, `NN`,
/// `MM`, `RR` and `OO` become the nonces' fields (`OO`: the old one as
/// an R mark's `was=`).
pub fn marks(data: &[u8]) {
    const NONCE: &str = "0f1e2d3c4b5a6978";
    const NESTED: &str = "8796a5b4c3d2e1f0";
    const NEXT: &str = "aa55aa55aa55aa55";
    type Found = (Vec<u8>, Vec<(usize, Level, Mark)>);
    let scan = |chunks: &[&[u8]]| -> Found {
        let mut s = Scanner::new(NONCE);
        s.pending(Some(NESTED), false);
        s.expect(NEXT);
        let (mut out, mut marks) = (Vec::new(), Vec::new());
        for c in chunks {
            let r = s.scan(c);
            let at = out.len();
            marks.extend(r.marks.into_iter().map(|(i, l, m)| (at + i, l, m)));
            out.extend_from_slice(&r.out);
        }
        out.extend(s.flush());
        (out, marks)
    };
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let input = match cut & 1 {
        1 => String::from_utf8_lossy(rest)
            .replace("NN", &format!("w={NONCE}"))
            .replace("MM", &format!("w={NESTED}"))
            .replace("RR", &format!("w={NEXT}"))
            .replace("OO", &format!("was={NONCE}"))
            .into_bytes(),
        _ => rest.to_vec(),
    };
    let whole = scan(&[&input]);
    let (a, b) = input.split_at((cut as usize).min(input.len()));
    assert_eq!(
        whole,
        scan(&[a, b]),
        "the result depends on where the stream is cut"
    );
    let has = |n: &str| input.windows(n.len()).any(|w| w == n.as_bytes());
    let nonce_free = ![NONCE, NESTED, NEXT].iter().any(|n| has(n));
    let confirmed = whole
        .1
        .iter()
        .any(|(_, _, m)| matches!(m, Mark::Rotated(_)));
    assert!(
        !confirmed || (has(&format!("w={NEXT}")) && has(&format!("was={NONCE}"))),
        "a new nonce confirmed without the old one"
    );
    if nonce_free {
        assert_eq!(whole.0, input, "a stream without our nonce was changed");
        assert!(whole.1.is_empty());
    }
    assert!(whole.0.len() <= input.len());
}

/// What walissh reads of a nested shell (`terminal::nested`): whether a
/// command line starts a shell, and whether output ends at a prompt. Both
/// never panic, and a line with anything but plain words never starts a
/// shell.
pub fn nested(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    // A line that starts a shell may show one; neither ever panics.
    assert!(!nested::starts_shell(&text) || nested::may_show_a_shell(&text));
    if nested::starts_shell(&text) {
        let special = ['\'', '"', '$', '`', ';', '&', '|', '<', '>', '(', ')', '\n'];
        assert!(!text.contains(special), "{text:?}");
    }
    let _ = prompt::at_prompt(data);
    let _ = prompt::answered(data, "x");
    let (question, answer) = text.split_at(text.floor_char_boundary(text.len() / 3));
    let _ = prompt::answered(question.as_bytes(), answer);
    if let Some(command) = prompt::command(&text) {
        assert!(text.ends_with(&command) || text.trim_end().ends_with(&command));
    }
    let (a, b) = text.split_at(text.floor_char_boundary(text.len() / 2));
    let _ = nested::shell_of(a, b);
    // Output in pieces, as a session gets it.
    let mut n = Nesting::watching();
    for piece in data.chunks(7) {
        if !n.output(piece) {
            break;
        }
        let _ = n.at_prompt();
    }
}

/// The policies the property is checked under: two deny globs, the
/// default prefixes; with and without `auto_network`.
fn policies() -> &'static [Policy; 2] {
    static POLICIES: LazyLock<[Policy; 2]> = LazyLock::new(|| {
        let deny = ["*curl*|*sh".to_string(), "iptables -F*".to_string()];
        let prefixes = ["?".to_string(), "ai:".to_string()];
        [false, true].map(|network| Policy::new(&deny, &prefixes, network))
    });
    &POLICIES
}

/// A verdict that depends on the clock: the parse ran out of its time
/// budget (possible on a loaded machine). Comparisons skip those.
fn timed_out(v: &Verdict) -> bool {
    matches!(v, Verdict::Deny(why) if why.contains("too long to read"))
}

/// The agent's approval policy (`agent::policy`): on any line it never
/// panics; `off` denies; `Run` comes only in `auto`; what `confirm` denies,
/// `auto` denies too; and the quoted script a `Run` gives is itself a
/// `Run` (the same script again) with as many commands as the line. The
/// four-eyes globs read any line too, and a line that runs a glob's
/// program, in the line's own words, waits.
pub fn policy(data: &[u8]) {
    let line = &*String::from_utf8_lossy(data);
    let globs = policy::Globs::new(&["systemctl restart *".into(), "rm *".into()])
        .expect("the fuzz target's globs compile");
    let _ = globs.matches(line);
    // Whatever the line leaves open (a quote, a comment, a heredoc, a
    // backslash), `rm` after it is either a command or a name of it
    // elsewhere in the line: it waits.
    assert!(
        globs.matches(&format!("{line}; rm x")),
        "{line:?} with rm after it did not wait"
    );
    let [plain, network] = policies();
    let off = plain.check(line, AiMode::Off);
    assert!(matches!(off, Verdict::Deny(_)), "off did not deny {line:?}");
    let confirm = plain.check(line, AiMode::Confirm);
    assert!(!matches!(confirm, Verdict::Run(_)), "confirm ran {line:?}");
    for p in [plain, network] {
        let auto = p.check(line, AiMode::Auto);
        if matches!(confirm, Verdict::Deny(_)) && !timed_out(&confirm) && !timed_out(&auto) {
            assert!(
                matches!(auto, Verdict::Deny(_)),
                "confirm denied {line:?} ({confirm:?}) but auto said {auto:?}"
            );
        }
        let Verdict::Run(script) = &auto else {
            continue;
        };
        let again = p.check(script, AiMode::Auto);
        if timed_out(&again) {
            continue;
        }
        assert_eq!(
            again, auto,
            "the quoted form of {line:?} is not run as itself"
        );
        if let (Some(a), Some(b)) = (policy::commands(line), policy::commands(script)) {
            assert_eq!(
                a, b,
                "{line:?} and its quoted form {script:?} differ in commands"
            );
        }
    }
}

/// Redaction (`context::redact`): on any text it never panics; its output
/// holds no escape sequence or control character but tab and newline; a
/// second pass over its output keeps every placeholder the first made (it
/// may find more: gitleaks' rules span lines, and a placeholder changes
/// what surrounds it); and a secret planted in a known shape (appended as
/// `password=…` on a line of its own) never survives, whatever comes
/// before it. The same text read as a command line, and as the output
/// of a command that reads a secret store, never panics either; and a
/// command's capture, fed the bytes in two pieces, reads what the
/// redactor reads.
pub fn redact(data: &[u8]) {
    static REDACTOR: LazyLock<Redactor> =
        LazyLock::new(|| Redactor::new(&[], &[]).expect("the rules load"));
    let text = String::from_utf8_lossy(data);
    let session = Numbering::default();
    let (out, _) = REDACTOR.redact(&text, &session);
    // A command's capture reads the bytes as the redactor reads their
    // text (`escapes`), however the stream is cut.
    let cut = data
        .first()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let (mut reader, mut read) = (crate::escapes::Reader::default(), String::new());
    reader.feed(&data[..cut], &mut read);
    reader.feed(&data[cut..], &mut read);
    reader.finish(&mut read);
    assert_eq!(read, crate::context::redact::plain_text(&text));
    let control = out
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t');
    assert!(!control, "a control character survived: {out:?}");
    let (again, _) = REDACTOR.redact(&out, &session);
    let marks = |t: &str| t.matches("[REDACTED:").count();
    assert!(
        marks(&again) >= marks(&out),
        "a second pass lost a placeholder"
    );
    // CAN ends any escape sequence the text left open (a string runs to
    // its terminator, and may hide anything: it never reaches the model).
    let planted = format!("{text}\x18\npassword=Fz9-planted-Secret\n");
    let (out, _) = REDACTOR.redact(&planted, &session);
    assert!(
        !out.contains("Fz9-planted-Secret"),
        "the planted secret survived: {out:?}"
    );
    // The text as a command line (split into simple commands, judged by
    // the command rules) and as its output: total, and the output of a
    // command that reads a secret store keeps its line count.
    let (out, _) = REDACTOR.redact_output(&text, "first\nsecond\n", &session);
    assert_eq!(out.lines().count(), 2, "{out:?}");
    let (out, _) = REDACTOR.redact_output("cat /run/secrets/db", &text, &session);
    let lines = |t: &str| t.lines().count();
    assert_eq!(
        lines(&out),
        lines(&crate::context::redact::plain_text(&text)),
        "{out:?}"
    );
}

/// What walissh lets through of the user's keys to an integrated shell
/// (`terminal::own_keys`): never one of walissh's own keys, however the
/// input is cut into reads or nested; only `~` bytes are taken out; and
/// the same result for any cut. The first byte picks the cuts.
pub fn own_keys(data: &[u8]) {
    use crate::terminal::own_keys::{OwnKeys, holds_a_key};
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let whole = OwnKeys::default().strip(rest);
    assert!(!holds_a_key(&whole));
    let mut kept = whole.iter();
    for &b in rest {
        if kept.as_slice().first() == Some(&b) {
            kept.next();
        } else {
            assert_eq!(b, b'~', "only a key's last byte is taken out");
        }
    }
    assert!(kept.as_slice().is_empty());
    let step = usize::from(pick % 7) + 1;
    let mut k = OwnKeys::default();
    let cut: Vec<u8> = rest
        .chunks(step)
        .flat_map(|c| k.strip_bytes(bytes::Bytes::copy_from_slice(c)))
        .collect();
    assert_eq!(cut, whole);
}

/// The SSH transport of both of walissh's ends (the vendored russh's
/// packet reader and message parsing, `fuzzing/ssh.rs`), fed what a
/// hostile client or target sends: it never panics, always ends once the
/// peer's stream does, and never hands on more channel data than the peer
/// sent. The first byte picks the end (bit 0: the server, or the client
/// dialling a target); whether the rest is the raw stream, or packets
/// after a handshake on the `none` algorithms, so that all a logged-in
/// peer can send is reached in the clear (bit 1); and whether each packet
/// waits for the end to deal with the one before, as a peer answering
/// requests does, or all come at once (bit 2).
pub fn ssh_transport(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let got = ssh::transport(pick, rest);
    assert!(got.len() <= rest.len(), "more channel data than was sent");
}

/// What makes the agent's command output safe for the user's terminal
/// (`terminal::sanitize`): it never panics; gives the same bytes however
/// the stream is cut into reads; changes nothing more when run over its
/// own output; lets out no string (OSC, DCS, APC, PM, SOS), no reset,
/// no C1 control and no C0 control but the harmless ones; and, read by a
/// terminal emulator, leaves the cursor no higher than it began and the
/// main screen showing (what a command printed cannot reach the lines
/// above it, such as the next `Run?`).
pub fn sanitize(data: &[u8]) {
    let clean = |chunks: &[&[u8]]| {
        let mut s = Sanitizer::default();
        let mut out = Vec::new();
        for c in chunks {
            out.extend_from_slice(&s.clean(c));
        }
        out.extend(s.finish());
        out
    };
    let whole = clean(&[data]);
    if let Err(e) = terminal_safe(&whole) {
        panic!("{e}: {whole:?} from {data:?}");
    }
    let cut = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let (a, b) = data.split_at(cut);
    assert_eq!(clean(&[a, b]), whole, "cut at {cut}");
    assert_eq!(clean(&[&whole]), whole, "not stable over its own output");
    let nz = |n| std::num::NonZeroU16::new(n).expect("not zero");
    let mut vt = vt100::Parser::new(nz(24), nz(80), 0);
    vt.process(b"1\r\n2\r\n3\r\n4\r\n$ ");
    let (row, _) = vt.screen().cursor_position();
    vt.process(&whole);
    assert!(
        !vt.screen().alternate_screen(),
        "left in the alternate screen"
    );
    assert!(vt.screen().cursor_position().0 >= row, "the cursor went up");
}

/// The known_hosts reader (`upstream::known_hosts`): on any file it never
/// panics, and a key it says is listed for a host is one of the file's.
pub fn known_hosts(data: &[u8]) {
    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHMTPR0d+PrPU0WH3b7gJLajZMMutiK2XEYTom1UgY8S";
    static PUBLIC: LazyLock<PublicKey> =
        LazyLock::new(|| PublicKey::from_openssh(KEY).expect("a valid key"));
    let text = String::from_utf8_lossy(data);
    let blob = KEY.split(' ').nth(1).unwrap_or_default();
    for (host, port) in [("web1", 22), ("10.0.0.7", 2222)] {
        if let Ok(Known::Listed) = known_hosts::look_up(&text, host, port, &PUBLIC) {
            assert!(text.contains(blob), "listed without the key in the file");
        }
    }
}

/// The config loader on arbitrary TOML: it never panics, and an error is
/// one line naming the file.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = crate::config::Config::parse(&text, "fuzz.toml", false) {
        assert!(e.0.starts_with("fuzz.toml:"), "{e}");
        assert!(!e.0.contains('\n'), "not one line: {e}");
    }
}

/// The SKILL.md reader (front matter in YAML): it never panics, takes
/// linear time (aliases are refused before loading), and an error starts
/// with the line it is about.
pub fn skill_md(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = crate::agent::skills::check_skill_md(&text) {
        let line = e.split(':').next().unwrap_or("");
        assert!(line.parse::<usize>().is_ok(), "{e}");
    }
}

/// The authorized_keys reader: it never panics, and a key it accepts is
/// of the type the line names.
pub fn authorized_keys(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        if let Ok(key) = crate::keys::parse_authorized_key(line) {
            let named = line.split_whitespace().next().unwrap_or("");
            assert_eq!(key.algorithm().as_str(), named, "{line:?}");
        }
    }
}

/// The login-name reader (`user:target`, `user#target`): it never panics,
/// and what it reads puts the name back together.
pub fn login(data: &[u8]) {
    let name = String::from_utf8_lossy(data);
    let login = crate::route::Login::parse(&name);
    match &login.target {
        Some(target) => {
            let sep = &name[login.user.len()..login.user.len() + 1];
            assert!(sep == ":" || sep == "#", "{name:?}");
            assert_eq!(format!("{}{sep}{target}", login.user), name);
        }
        None => assert!(name.starts_with(&login.user)),
    }
}

/// The model's streamed tool-call assembly: any sequence of chunks (one
/// JSON value per line of the input) never panics, and gives at most as
/// many calls as the chunks held call fragments.
pub fn tool_calls(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut acc = crate::agent::model::Accumulator::default();
    let mut fragments = 0;
    for line in text.lines() {
        let Ok(chunk) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let calls = &chunk["choices"][0]["delta"]["tool_calls"];
        let message_calls = &chunk["choices"][0]["message"]["tool_calls"];
        fragments += calls.as_array().map_or(0, Vec::len);
        fragments += message_calls.as_array().map_or(0, Vec::len);
        let _ = acc.absorb(&chunk);
    }
    let turn = acc.finish();
    assert!(
        turn.tool_calls.len() <= fragments,
        "{} calls from {fragments} fragments",
        turn.tool_calls.len()
    );
}

/// What an MCP server says (`agent::mcp`): any line the SDK takes as a
/// tool becomes a declaration under a name the model accepts (at most 64
/// of `[A-Za-z0-9_-]`, never a built-in's), with a bounded, printable
/// description; any it takes as a call's result becomes bounded text.
pub fn mcp_reply(data: &[u8]) {
    use crate::agent::mcp;
    let text = String::from_utf8_lossy(data);
    let mut taken = Vec::new();
    for line in text.lines() {
        if let Ok(tool) = serde_json::from_str::<rmcp::model::Tool>(line)
            && let Ok(o) = mcp::declare("srv", &tool, &taken)
        {
            let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
            assert!(o.name.len() <= 64 && o.name.chars().all(ok), "{:?}", o.name);
            assert!(!crate::config::TOOLS.contains(&o.name.as_str()));
            assert!(
                !taken.iter().any(|t: &mcp::Offered| t.name == o.name),
                "{:?} twice",
                o.name
            );
            let d = o.declaration["function"]["description"]
                .as_str()
                .unwrap_or("");
            assert!(d.len() < 2 * 1024 && !d.contains('\x1b'), "{d:?}");
            taken.push(o);
        }
        if let Ok(result) = serde_json::from_str::<rmcp::model::CallToolResult>(line) {
            let r = mcp::returned(&result);
            assert!(r.text.len() <= 4 << 20);
        }
    }
}

/// A recording `walissh play` reads (`audit::play`): whatever the file
/// holds, reading it ends with a cast or a reason, its markers are
/// numbered from 1 in order, and playing it at any speed writes only its
/// output events.
pub fn cast(data: &[u8]) {
    if let Ok(c) = crate::audit::play::read(data) {
        let markers = c.markers();
        assert!(markers.iter().enumerate().all(|(i, m)| m.number == i + 1));
        let mut out = Vec::new();
        let from = markers.first();
        c.play(f64::MAX, from, &mut out).unwrap();
    }
}

/// What a user types, forwarded (`audit::forward`): any login name,
/// session or fields make one RFC 5424 line with well-formed structured
/// data, under a datagram's size.
pub fn syslog(data: &[u8]) {
    use crate::audit::forward::{Item, syslog};
    let text = String::from_utf8_lossy(data);
    let (user, command) = text.split_at(text.floor_char_boundary(text.len() / 2));
    let mut event = crate::audit::Event::new(Kind::Exec)
        .user(user)
        .field("command", command);
    event.session = Some(command.chars().take(20).collect());
    let m = syslog(
        &Item::Event {
            seq: 1,
            hash: "0".repeat(64),
            event,
        },
        user,
    );
    assert!(!m.contains('\n') && !m.contains('\r'), "{m:?}");
    assert!(m.len() < 65_507, "{}", m.len());
    let sd = &m[m.find(" [walissh@32473").expect("structured data")..];
    // The SD ends at the first `]` not escaped.
    let mut escaped = false;
    let end = sd.char_indices().find(|&(_, c)| {
        let close = c == ']' && !escaped;
        escaped = c == '\\' && !escaped;
        close
    });
    let end = end.expect("the SD element ends").0;
    assert!(sd[end + 1..].starts_with(" {"), "{m:?}");
}

/// The certificate `krl` asks about: `ssh-keygen -s ca -I fuzz -n alice
/// -z 42 user.pub`, an Ed25519 key and CA.
const KRL_CERT: &str = "ssh-ed25519-cert-v01@openssh.com \
    AAAAIHNzaC1lZDI1NTE5LWNlcnQtdjAxQG9wZW5zc2guY29tAAAAIGfYSTNjwtnx\
    bXxhOZ0vbDqHbeHao354apU+ftpIfXPFAAAAIMOOKd9CkIWP1MGaotvlgQ49LO7L\
    9PxC6qcXISEgGs8NAAAAAAAAACoAAAABAAAABGZ1enoAAAAJAAAABWFsaWNlAAAA\
    AAAAAAD//////////wAAAAAAAACCAAAAFXBlcm1pdC1YMTEtZm9yd2FyZGluZwAA\
    AAAAAAAXcGVybWl0LWFnZW50LWZvcndhcmRpbmcAAAAAAAAAFnBlcm1pdC1wb3J0\
    LWZvcndhcmRpbmcAAAAAAAAACnBlcm1pdC1wdHkAAAAAAAAADnBlcm1pdC11c2Vy\
    LXJjAAAAAAAAAAAAAAAzAAAAC3NzaC1lZDI1NTE5AAAAIEBRZNSfCf9jaDvDh9qi\
    P/pmrtAYzJxADogFaDaHw7aCAAAAUwAAAAtzc2gtZWQyNTUxOQAAAEC2UnVaNcNK\
    Mg1KQRZtkFPPfJo880GHCUCqPPTYg3kHMfVJpIBu4Q2fZ5GuHGO2rMCseuTQHGtZ\
    gKGt924EqBwL";

/// The revoked-keys reader (`auth::krl`, `[auth] revoked_keys`): on any
/// file, a KRL or a text list, it never panics and an error is one line
/// (a text list's naming its line); once read, asking about a key, its CA
/// and a certificate of it never panics, and a revoked key or CA revokes
/// the certificate too.
pub fn krl(data: &[u8]) {
    use crate::auth::krl::Revoked;
    use russh::keys::ssh_key::Certificate;
    static FIXED: LazyLock<Certificate> =
        LazyLock::new(|| Certificate::from_openssh(KRL_CERT).expect("a valid certificate"));
    let r = match Revoked::parse(data) {
        Ok(r) => r,
        Err(e) => {
            assert!(!e.contains('\n'), "{e:?}");
            if !data.starts_with(b"SSHKRL\n\0") {
                assert!(e.starts_with("line "), "{e:?}");
            }
            return;
        }
    };
    let (key, ca) = (FIXED.public_key(), FIXED.signature_key());
    let revoked = r.cert_revoked(&FIXED);
    if r.key_revoked(key) || r.key_revoked(ca) {
        assert!(revoked, "the key or CA is revoked, its certificate not");
    }
}

/// The reader of an Ansible module's report (`session::ansible`), on a
/// module run's output: it never panics, its row's arguments stay within
/// their bound, and the row is the same however the output is cut into
/// reads (the first byte picks where).
pub fn ansible_report(data: &[u8]) {
    use crate::session::ansible::ModuleRun;
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let command = b"/bin/sh -c '/usr/bin/python3 /tmp/AnsiballZ_command.py && sleep 0'";
    let row = |chunks: &[&[u8]]| {
        let mut run = ModuleRun::of(command).expect("a module run");
        for c in chunks {
            run.output(c);
        }
        run.row(crate::audit::Event::new(Kind::AnsibleTask))
            .map(|e| serde_json::Value::Object(e.fields))
    };
    let whole = row(&[rest]);
    let cut = usize::from(first) * rest.len() / 256;
    assert_eq!(whole, row(&[&rest[..cut], &rest[cut..]]));
    if let Some(v) = whole {
        let args = serde_json::to_string(&v["args"]).unwrap_or_default();
        assert!(args.len() <= 8 * 1024 + 2 + 8 * 1024 / 2, "{}", args.len());
    }
}

/// Whether `out` holds only what may reach a terminal.
fn terminal_safe(out: &[u8]) -> Result<(), String> {
    for (i, &b) in out.iter().enumerate() {
        match b {
            0x1b => {
                let next = out.get(i + 1).copied();
                let allowed = b"[78DME=>(";
                if !next.is_some_and(|n| allowed.contains(&n)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs every property is run over: the policy seeds kept in the
    /// repository, and lines that reach each parser's edges.
    fn inputs() -> Vec<Vec<u8>> {
        let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/policy");
        let mut all: Vec<Vec<u8>> = std::fs::read_dir(seeds)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("seed-"))
            .filter_map(|e| std::fs::read(e.path()).ok())
            .collect();
        assert!(!all.is_empty(), "the policy seeds are gone from {seeds}");
        let edges: [&[u8]; 18] = [
            b"\x03\x1b[2\x1b[209~09~\xdb210~~\x1b[212~\x1b[21",
            b"",
            b"\x01NN;A\x07 MM;B\x07 \x1b]133;A\x07",
            b"\x03\x1b]133;R;RR\x07\x1b]133;R;RR;was=0\x07\x1b]133;R;RR;OO\x07\x1b]133;A;RR\x07",
            b"\x00Ticket number > T\r\napp@db:~$ ? x\r\npostgres=# ? y",
            b"sudo -i\nroot@db1:~# ",
            b"ls $(rm -rf /) 'a'\"b\" `id` <(x) >>y",
            b"\x1bP1$r\x1b\\ \x1b_hidden\x1b\\ \x9b31m \xc2\x9b",
            b"password=hunter2hunter2 AKIAIOSFODNN7EXAMPLE",
            "bash\u{0}\u{ff}é漢字🙂".as_bytes(),
            b"\x1b[31mred\x1b(B\x1b[m\r\n$ ",
            b"@revoked * ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHMTPR0d+PrPU0WH3b7gJLajZMMutiK2XEYTom1UgY8S\n|1|x|y ssh-rsa AAAA\n",
            b"[server]\nlisten = [\"x\"]\n[[users]]\nname = 1\n",
            b"---\nname: a\ndescription: &d x\nb: *d\n---\n",
            b"alice:web1#x",
            "$ sh -c 'cat \"/run/secrets/x\"' | base64 -d\nv1\nC:\\>type a\\token.txt\nX=$(cat a.key\n| u | password |\n|---|---|\n| b | x1 |\npassword: >-\n  v\n1) \"requirepass\"\n2) \"x\"\nchpasswd:\n  root:x\n密码（生产）：「x」".as_bytes(),
            b"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":18446744073709551615,\"id\":\"c\",\"function\":{\"name\":\"run_command\",\"arguments\":\"{\\\"com\"}}]}}]}\n{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":{\"a\":1}}}]}}]}\n",
            b"{\"name\":\"read_file\",\"description\":\"\\u001b[31mx\",\"inputSchema\":{\"type\":\"object\"}}\n{\"name\":\"read.file\",\"inputSchema\":{}}\n{\"content\":[{\"type\":\"text\",\"text\":\"hi\"},{\"type\":\"image\",\"data\":\"AA\",\"mimeType\":\"x\"}],\"isError\":true}\n",
        ];
        all.extend(edges.iter().map(|e| e.to_vec()));
        all
    }

    #[test]
    fn the_fuzzed_properties_hold_on_the_seeds_and_edges() {
        for input in inputs() {
            marks(&input);
            nested(&input);
            policy(&input);
            redact(&input);
            sanitize(&input);
            own_keys(&input);
            known_hosts(&input);
            config(&input);
            skill_md(&input);
            authorized_keys(&input);
            login(&input);
            tool_calls(&input);
            mcp_reply(&input);
            cast(&input);
            syslog(&input);
            ssh_transport(&input);
        }
    }

    /// The revoked-keys property on a real KRL (`ssh-keygen -k -s ca`
    /// revoking serial 42 and key ID `fuzz`, so `KRL_CERT`), its prefixes,
    /// and text lists (the CA's key; the user's key, then a bad line).
    #[test]
    fn the_ansible_report_property_holds_on_reports_and_their_prefixes() {
        let report = b"\x80warning\n{\"changed\": true, \"rc\": 0, \"invocation\": {\"module_args\": {\"_raw_params\": \"uname -s\"}}}\n";
        for n in 0..=report.len() {
            ansible_report(&report[..n]);
        }
        ansible_report(b"\x10{\"invocation\": {\"module_args\": [[[[[[[[[[[[[[[[[[");
        ansible_report(b"\xff}\n{\"invocation\": \"invocation\": {");
    }

    #[test]
    fn the_krl_property_holds_on_a_real_krl_and_its_prefixes() {
        const KRL: &[u8] = b"\
            \x53\x53\x48\x4b\x52\x4c\x0a\x00\x00\x00\x00\x01\x00\x00\x00\x00\
            \x00\x00\x00\x00\x00\x00\x00\x00\x6b\x0f\xd8\xc1\x00\x00\x00\x00\
            \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\
            \x55\x00\x00\x00\x33\x00\x00\x00\x0b\x73\x73\x68\x2d\x65\x64\x32\
            \x35\x35\x31\x39\x00\x00\x00\x20\x40\x51\x64\xd4\x9f\x09\xff\x63\
            \x68\x3b\xc3\x87\xda\xa2\x3f\xfa\x66\xae\xd0\x18\xcc\x9c\x40\x0e\
            \x88\x05\x68\x36\x87\xc3\xb6\x82\x00\x00\x00\x00\x20\x00\x00\x00\
            \x08\x00\x00\x00\x00\x00\x00\x00\x2a\x23\x00\x00\x00\x08\x00\x00\
            \x00\x04\x66\x75\x7a\x7a";
        let r = crate::auth::krl::Revoked::parse(KRL).expect("a valid KRL");
        let cert = russh::keys::ssh_key::Certificate::from_openssh(KRL_CERT).unwrap();
        assert!(r.cert_revoked(&cert));
        for n in 0..=KRL.len() {
            krl(&KRL[..n]);
        }
        krl(b"# nothing\n\nssh-ed25519 \
            AAAAC3NzaC1lZDI1NTE5AAAAIEBRZNSfCf9jaDvDh9qiP/pmrtAYzJxADogFaDaHw7aC ca\n");
        krl(b"ssh-ed25519 \
            AAAAC3NzaC1lZDI1NTE5AAAAIMOOKd9CkIWP1MGaotvlgQ49LO7L9PxC6qcXISEgGs8N\nx\n");
    }
}
