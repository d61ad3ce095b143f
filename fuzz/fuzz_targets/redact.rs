//! Fuzzes redaction (src/context/redact/): on any text it must never
//! panic; its output holds no escape sequence or control character but tab
//! and newline; a second pass over its output keeps every placeholder the
//! first made (it may find more: gitleaks' rules span lines, and a
//! placeholder changes what surrounds it); and a secret planted in a known
//! shape (appended as `password=…` on a line of its own) never survives,
//! whatever text comes before it.
//!
//! Run: cargo +nightly fuzz run redact (from the repository's top).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/context/redact/mod.rs"]
#[allow(dead_code)]
mod redact;

use redact::{Numbering, Redactor};

thread_local! {
    static REDACTOR: Redactor = Redactor::new(&[], &[]).expect("the rules load");
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    REDACTOR.with(|r| {
        let session = Numbering::default();
        let (out, _) = r.redact(&text, &session);
        assert!(
            !out.chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "a control character survived: {out:?}"
        );
        let (again, _) = r.redact(&out, &session);
        let marks = |t: &str| t.matches("[REDACTED:").count();
        assert!(
            marks(&again) >= marks(&out),
            "a second pass lost a placeholder"
        );
        // CAN ends any escape sequence the text left open (a string runs
        // to its terminator, and may hide anything: it never reaches the
        // model).
        let planted = format!("{text}\x18\npassword=Fz9-planted-Secret\n");
        let (out, _) = r.redact(&planted, &session);
        assert!(
            !out.contains("Fz9-planted-Secret"),
            "the planted secret survived: {out:?}"
        );
    });
});
