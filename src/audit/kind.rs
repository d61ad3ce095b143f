//! The kinds of audit events, one name each: what `walissh audit --kind`
//! takes and `--json` prints as `kind` (the contract,
//! `docs/audit.md`). Rows are written with a `Kind`, so a kind misspelt
//! in code does not compile; rows read back keep the stored text, which
//! `Kind::parse` reads.

use std::fmt;

macro_rules! kinds {
    ($($variant:ident = $name:literal,)*) => {
        /// One kind of audit event.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(crate) enum Kind {
            $($variant,)*
        }

        impl Kind {
            /// Every kind, in the order `docs/audit.md` lists them.
            pub(crate) const ALL: &'static [Kind] = &[$(Kind::$variant,)*];

            /// The kind's name, as stored and printed.
            pub(crate) const fn as_str(self) -> &'static str {
                match self {
                    $(Kind::$variant => $name,)*
                }
            }
        }
    };
}

kinds! {
    AuthOk = "auth_ok",
    AuthFail = "auth_fail",
    TargetDenied = "target_denied",
    SessionStart = "session_start",
    SessionEnd = "session_end",
    Exec = "exec",
    Subsystem = "subsystem",
    UpstreamError = "upstream_error",
    ForwardDenied = "forward_denied",
    EnvRefused = "env_refused",
    ConnectionRefused = "connection_refused",
    StorageError = "storage_error",
    AuditForwardLost = "audit_forward_lost",
    AuditGap = "audit_gap",
    SessionRefused = "session_refused",
    Integrity = "integrity",
    Command = "command",
    AiPrompt = "ai_prompt",
    AiToolCall = "ai_tool_call",
    AiToolResult = "ai_tool_result",
    AiAnswer = "ai_answer",
    AiError = "ai_error",
    AiRedacted = "ai_redacted",
    AiSkill = "ai_skill",
    WebLogin = "web_login",
    WebLoginFail = "web_login_fail",
    SessionWatched = "session_watched",
    SessionKilled = "session_killed",
    FourEyesAnswer = "four_eyes_answer",
    TunnelOpen = "tunnel_open",
    TunnelClose = "tunnel_close",
    AnsibleTask = "ansible_task",
    RemoteForwardOpen = "remote_forward_open",
    RemoteForwardClose = "remote_forward_close",
    RecordingPruned = "recording_pruned",
}

impl Kind {
    /// The kind named `name`, if there is one.
    pub(crate) fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each name once, each read back as its kind, and each in the
    /// operator's documentation.
    #[test]
    fn every_kind_has_one_name_and_is_documented() {
        let doc = include_str!("../../docs/audit.md");
        let mut names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(*k));
            assert!(
                doc.contains(&format!("`{k}`")),
                "{k} is not in docs/audit.md"
            );
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Kind::ALL.len());
        assert_eq!(Kind::parse("auth-ok"), None);
    }
}
