//! Where walissh's log goes, and in what form.
//!
//! The log is stderr. Three forms:
//! - on a terminal, `tracing`'s usual lines, in colour;
//! - under systemd (stderr is the journal: `JOURNAL_STREAM` names it),
//!   without a timestamp (the journal has its own) and with the line's
//!   priority as the `<N>` prefix the journal reads, so `journalctl -p
//!   warning` works;
//! - with `WALISSH_LOG_FORMAT=json`, one JSON object a line, for log
//!   shippers.
//!
//! Colour only on a terminal, and never with `NO_COLOR` set (not empty).
//! The level comes from `--log-level`, else `RUST_LOG`, else
//! `default_level`. What it leaves to
//! others: what is logged (never a secret or a password: callers log
//! names, addresses and reasons).

use std::io::IsTerminal;

use tracing::Level;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, format};
use tracing_subscriber::registry::LookupSpan;

/// Starts the log for the process, at `level` (`--log-level`: `warn`,
/// `debug`, or a filter such as `walissh=debug,russh=warn`) if given;
/// Err names a level that is not one.
pub(crate) fn init(level: Option<&str>, default_level: &str) -> Result<(), String> {
    let filter = match level {
        Some(level) => tracing_subscriber::EnvFilter::try_new(level)
            .map_err(|e| format!("--log-level {level}: {e}"))?,
        None => tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| OneLine(std::io::stderr()));
    if std::env::var("WALISSH_LOG_FORMAT").is_ok_and(|f| f == "json") {
        builder.json().flatten_event(true).init();
    } else if under_journald() {
        builder
            .with_ansi(false)
            .event_format(Journald(format().without_time()))
            .init();
    } else {
        let colour = std::io::stderr().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        builder.with_ansi(colour).init();
    }
    Ok(())
}

/// One event, one line: a line break or other control character inside
/// an event (a field a client or a server chose: an MCP request id, say)
/// is written escaped, so nobody can forge a second line, or a journal
/// record of the priority they like. Each write is one event: the fmt
/// layer formats the whole event and then writes it at once.
struct OneLine<W>(W);

impl<W: std::io::Write> std::io::Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (body, end) = match buf.strip_suffix(b"\n") {
            Some(body) => (body, &b"\n"[..]),
            None => (buf, &b""[..]),
        };
        let mut out = Vec::with_capacity(buf.len());
        for &b in body {
            match b {
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                // Tabs and the ANSI colours of a terminal stay.
                b'\t' | 0x1b => out.push(b),
                0x00..0x20 | 0x7f => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                _ => out.push(b),
            }
        }
        out.extend_from_slice(end);
        self.0.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Whether stderr is the journal: systemd sets `JOURNAL_STREAM` to the
/// device and inode of the stream it connected, which must be stderr's
/// (a child that inherited the variable may have been redirected).
fn under_journald() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(meta) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    stream == format!("{}:{}", meta.dev(), meta.ino())
}

/// A line's syslog priority, as the journal reads it from a `<N>` prefix.
fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// The usual format behind the line's `<N>` priority prefix.
struct Journald<F>(F);

impl<S, N, F> FormatEvent<S, N> for Journald<F>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        write!(writer, "<{}>", priority(event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What the journal's format writes, through the writer walissh
    /// uses, for the events `log` makes.
    fn journal(log: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .event_format(Journald(format().without_time()))
            .with_writer(move || OneLine(Sink(sink.clone())))
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(out.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn journal_lines_carry_their_priority_and_no_time() {
        let text = journal(|| {
            tracing::warn!(peer = "192.0.2.7:50000", "login failed");
            tracing::info!("listening");
        });
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("<4> WARN"), "{text}");
        assert!(lines[0].contains("peer=\"192.0.2.7:50000\""), "{text}");
        assert!(lines[1].starts_with("<6> INFO"), "{text}");
        assert!(!text.contains("2026-"), "no timestamp: {text}");
    }

    /// A field with a line break and a journal priority in it stays on
    /// its event's line.
    #[test]
    fn a_field_cannot_forge_a_line() {
        let text = journal(|| {
            tracing::warn!(id = %"1\n<2>walissh: forged\r", "response error");
            tracing::info!("next");
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("<4>") && lines[0].contains("1\\n<2>walissh: forged\\r"),
            "{text}"
        );
        assert!(lines[1].starts_with("<6>"), "{text}");
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
