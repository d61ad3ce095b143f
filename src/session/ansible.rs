//! Ansible's tasks, each a row of its own (`ansible_task`). Ansible runs a
//! task as an exec of its module's payload (`python3
//! .../AnsiballZ_command.py`, or a bare `python3` reading it from stdin
//! when pipelining), so the `exec` row names a Python file, not the task.
//! The module prints a JSON report when it ends, with the arguments it
//! ran with (`invocation.module_args`, secrets the module marks `no_log`
//! already masked); walissh reads that report off the exec's output and
//! writes the task's module, command and arguments as a row. It is the
//! target's word on what ran, as the recording of its output is: the
//! exec's command and bytes are audited as for any exec.
//!
//! What it owns: which execs are module runs, the bounded watch of their
//! output, the row. What it leaves to others: the exec itself (`bridge`),
//! writing the row (`audit`).

use std::collections::VecDeque;

use serde_json::Value;

use crate::audit::Event;

/// How much of a module run's output is kept: its last bytes, where the
/// report's arguments are.
const KEEP: usize = 256 * 1024;
/// Longest arguments a row holds, as JSON; longer ones are cut, as text.
const MAX_ARGS: usize = 8 * 1024;

/// An exec that runs an Ansible module: its name (when the command
/// names the payload's file) and the tail of its output.
pub(crate) struct ModuleRun {
    module: Option<String>,
    out: VecDeque<u8>,
    /// Output was dropped from the front: the report's head may be gone.
    cut: bool,
}

impl ModuleRun {
    /// A module run, if `command` is one of Ansible's: a Python that runs
    /// an `AnsiballZ_NAME.py` payload, or (pipelining) a bare Python
    /// under `/bin/sh -c`, ending in Ansible's `&& sleep 0`.
    pub(crate) fn of(command: &[u8]) -> Option<ModuleRun> {
        let text = std::str::from_utf8(command).ok()?;
        if !text.contains("python") {
            return None;
        }
        let module = payload_module(text);
        let piped = text.starts_with("/bin/sh -c ") && text.contains("&& sleep 0");
        if module.is_none() && !piped {
            return None;
        }
        Some(ModuleRun {
            module,
            out: VecDeque::new(),
            cut: false,
        })
    }

    /// More of the exec's standard output: its last [`KEEP`] bytes kept
    /// (a ring: each byte is copied once, however the output is cut).
    pub(crate) fn output(&mut self, data: &[u8]) {
        let skip = data.len().saturating_sub(KEEP);
        self.out.extend(&data[skip..]);
        let over = self.out.len().saturating_sub(KEEP);
        self.cut |= skip + over > 0;
        self.out.drain(..over);
    }

    /// The `ansible_task` row (`event`, filled in), when the output held
    /// a module's report.
    pub(crate) fn row(mut self, event: Event) -> Option<Event> {
        let report = report(self.out.make_contiguous(), self.cut)?;
        let args = report.args;
        let command = command(&args);
        let mut args_text = serde_json::to_string(&args).unwrap_or_default();
        let args = match args_text.len() > MAX_ARGS {
            true => {
                args_text.truncate(crate::text::prefix(&args_text, MAX_ARGS).len());
                Value::String(args_text)
            }
            false => args,
        };
        let mut ev = event
            .field("module", self.module)
            .field("args", args)
            .field("changed", report.changed)
            .field("failed", report.failed);
        if let Some(c) = command {
            ev = ev.field("command", c);
        }
        if let Some(rc) = report.rc {
            ev = ev.field("rc", rc);
        }
        Some(ev)
    }
}

/// `NAME` of the first `AnsiballZ_NAME.py` in `command`.
fn payload_module(command: &str) -> Option<String> {
    let (_, rest) = command.split_once("AnsiballZ_")?;
    let end = rest.find(".py")?;
    let name = &rest[..end];
    let plain = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    plain.then(|| name.to_string())
}

/// What a module's report says.
struct Report {
    args: Value,
    changed: Option<bool>,
    failed: Option<bool>,
    rc: Option<i64>,
}

/// The report in `out`: the whole JSON object when it is all there,
/// else its `invocation` alone, found from the end (it is written last).
fn report(out: &[u8], cut: bool) -> Option<Report> {
    if !cut && let Some(whole) = whole_report(out) {
        let args = whole.pointer("/invocation/module_args")?.clone();
        return Some(Report {
            args,
            changed: whole.get("changed").and_then(Value::as_bool),
            failed: whole.get("failed").and_then(Value::as_bool),
            rc: whole.get("rc").and_then(Value::as_i64),
        });
    }
    let key = b"\"invocation\": ";
    let at = out.windows(key.len()).rposition(|w| w == key)?;
    let rest = &out[at + key.len()..];
    let invocation: Value = serde_json::Deserializer::from_slice(rest)
        .into_iter::<Value>()
        .next()?
        .ok()?;
    Some(Report {
        args: invocation.get("module_args")?.clone(),
        changed: None,
        failed: None,
        rc: None,
    })
}

/// The JSON object a module printed, among other lines (a warning before
/// it, as Ansible itself allows): from the first line that starts with
/// `{` to the last `}`.
fn whole_report(out: &[u8]) -> Option<Value> {
    let start = match out.first() {
        Some(b'{') => 0,
        _ => out.windows(2).position(|w| w == b"\n{")? + 1,
    };
    let end = out.iter().rposition(|&b| b == b'}')?;
    if end < start {
        return None;
    }
    serde_json::from_slice::<Value>(&out[start..=end])
        .ok()
        .filter(Value::is_object)
}

/// The command a task ran, for the modules that run one: `command` and
/// `shell` (`_raw_params`, or `cmd`, or `argv`), `raw`, `script`.
fn command(args: &Value) -> Option<String> {
    if let Some(s) = ["_raw_params", "cmd"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
    {
        return Some(s.to_string());
    }
    let argv = args.get("argv")?.as_array()?;
    let words: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
    Some(words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        Event::new(crate::audit::Kind::AnsibleTask)
    }

    #[test]
    fn module_runs_are_told_from_other_execs() {
        let run = ModuleRun::of(b"/bin/sh -c '/usr/bin/python3 /root/.ansible/tmp/ansible-tmp-1-2/AnsiballZ_command.py && sleep 0'");
        assert_eq!(run.unwrap().module.as_deref(), Some("command"));
        let piped = ModuleRun::of(b"/bin/sh -c '/usr/bin/python3 && sleep 0'").unwrap();
        assert_eq!(piped.module, None);
        for other in [
            &b"uname -s"[..],
            b"python3 script.py",
            b"/bin/sh -c 'echo ~ && sleep 0'",
            b"/bin/sh -c 'python3 AnsiballZ_$(reboot).py'",
            b"\xff\xfe",
        ] {
            let run = ModuleRun::of(other);
            assert!(run.is_none_or(|r| r.module.is_none()), "{other:?}");
        }
    }

    #[test]
    fn the_report_names_the_tasks_command() {
        let mut run = ModuleRun::of(b"python3 /tmp/AnsiballZ_command.py && sleep 0").unwrap();
        run.output(b"\r\n{\"changed\": true, \"stdout\": \"Linux\", \"rc\": 0, ");
        run.output(b"\"invocation\": {\"module_args\": {\"_raw_params\": \"uname -s\", \"chdir\": null}}}\r\n");
        let row = run.row(event()).unwrap();
        let v = serde_json::to_value(&row.fields).unwrap();
        assert_eq!(v["command"], "uname -s");
        assert_eq!(v["module"], "command");
        assert_eq!(v["changed"], true);
        assert_eq!(v["rc"], 0);
        assert_eq!(v["args"]["_raw_params"], "uname -s");
    }

    #[test]
    fn a_long_output_keeps_the_report_s_arguments() {
        let mut run = ModuleRun::of(b"/bin/sh -c '/usr/bin/python3 && sleep 0'").unwrap();
        run.output(b"{\"changed\": true, \"stdout\": \"");
        for _ in 0..100 {
            run.output(&[b'x'; 8192]);
        }
        run.output(b"\", \"invocation\": {\"module_args\": {\"argv\": [\"ls\", \"-l\"]}}}");
        assert_eq!(run.out.len(), KEEP);
        let v = serde_json::to_value(&run.row(event()).unwrap().fields).unwrap();
        assert_eq!(v["command"], "ls -l");
        assert!(v.get("rc").is_none());
    }

    #[test]
    fn output_without_a_report_makes_no_row() {
        for out in [
            &b""[..],
            b"Traceback (most recent call last):\n",
            b"{\"changed\": false}",
            b"}{",
        ] {
            let mut run = ModuleRun::of(b"/bin/sh -c 'python3 && sleep 0'").unwrap();
            run.output(out);
            assert!(run.row(event()).is_none(), "{out:?}");
        }
    }

    #[test]
    fn long_arguments_are_cut_as_text() {
        let mut run = ModuleRun::of(b"/bin/sh -c 'python3 && sleep 0'").unwrap();
        let big = "y".repeat(20_000);
        run.output(
            format!("{{\"invocation\": {{\"module_args\": {{\"content\": \"{big}\"}}}}}}")
                .as_bytes(),
        );
        let v = serde_json::to_value(&run.row(event()).unwrap().fields).unwrap();
        assert!(v["args"].as_str().unwrap().len() <= MAX_ARGS);
    }
}
