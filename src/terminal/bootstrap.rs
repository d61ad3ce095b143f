//! Shell integration: which shells get walissh's marks, and the one-line
//! script that installs them.
//!
//! The script is typed into the target's PTY at session start, behind a
//! short first line (` eval "$(head -n1)"`) that the shell reads at its
//! first prompt; `head` then reads the script itself from the terminal.
//! The PTY is opened with echo off, so neither line is ever echoed, the
//! script never passes through the line editor, and bash drops the first
//! line from its history. The script restores echo, wraps the prompt in
//! OSC 133 A/B, reports C (with the command line) before each command and
//! D (with the exit status) and OSC 7 (the directory) before each prompt,
//! all carrying the session's nonce, and ends with a W ("ready") mark.

use std::path::Path;

/// A shell walissh knows how to integrate with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shell {
    Bash,
    Zsh,
}

impl Shell {
    /// The shell behind a login shell's path; `None` for the others (sh,
    /// dash, fish, busybox...), which get no bootstrap.
    pub(crate) fn from_path(path: &str) -> Option<Shell> {
        match Path::new(path.trim()).file_name()?.to_str()? {
            "bash" => Some(Shell::Bash),
            "zsh" => Some(Shell::Zsh),
            _ => None,
        }
    }
}

/// What to type into the PTY: the first line and the script. The script
/// must stay under the terminal's line limit (4095 bytes).
pub(crate) fn input(shell: Shell, nonce: &str, echo: bool) -> Vec<u8> {
    let stty = if echo { "stty echo 2>/dev/null;" } else { "" };
    let script = match shell {
        Shell::Bash => bash(nonce, stty),
        Shell::Zsh => zsh(nonce, stty),
    };
    debug_assert!(script.len() < 4000 && !script.contains(['\r', '\n']));
    format!(" eval \"$(head -n1)\"\r{script}\r").into_bytes()
}

fn bash(n: &str, stty: &str) -> String {
    [
        stty,
        "builtin history -d $HISTCMD 2>/dev/null;",
        &format!("__ws_n={n};"),
        r#"__ws_l="${PS1@P}";__ws_l="${__ws_l//[^$'\n']/}";"#,
        r#"__ws_d(){ local s=$?;builtin printf '\e]133;D;%s;w=%s\a\e]7;w=%s;%s\a' "$s" "$__ws_n" "$__ws_n" "${PWD//[$'\a\e']/}";__ws_h=$HISTCMD;return $s;};"#,
        r#"__ws_p(){ [[ $PS1 == *"133;B;w=$__ws_n"* ]]||PS1="\[\e]133;A;w=$__ws_n\a\]$PS1\[\e]133;B;w=$__ws_n\a\]";};"#,
        r#"__ws_c(){ local c;c=$(HISTTIMEFORMAT= builtin history 1);local h=${c%%[^ 0-9]*};h=${h// /};"#,
        r#"if [[ $h == "$__ws_h" ]];then c=${c#*[0-9]  };builtin printf '\e]133;C;w=%s;cmd=%s\a' "$__ws_n" "${c//[$'\a\e']/}";else builtin printf '\e]133;C;w=%s\a' "$__ws_n";fi;};"#,
        r#"if [[ $(declare -p PROMPT_COMMAND 2>/dev/null) == 'declare -a'* ]];then PROMPT_COMMAND=(__ws_d "${PROMPT_COMMAND[@]}" __ws_p);"#,
        // Newlines, not ';': the user's PROMPT_COMMAND may end with one.
        r#"else PROMPT_COMMAND="__ws_d"$'\n'"$PROMPT_COMMAND"$'\n'"__ws_p";fi;"#,
        r#"PS0='$(__ws_c)'"$PS0";"#,
        r#"builtin printf '\e]133;W;w=%s;lines=%s;nl=1\a' "$__ws_n" "${#__ws_l}""#,
    ]
    .concat()
}

fn zsh(n: &str, stty: &str) -> String {
    [
        stty,
        &format!("__ws_n={n};"),
        r#"__ws_l=${(%)PS1};__ws_l=${__ws_l//[^$'\n']/};"#,
        r#"__ws_d(){ local s=$?;print -rn -- $'\e]133;D;'$s';w='$__ws_n$'\a\e]7;w='$__ws_n';'${PWD//[$'\a\e']/}$'\a';return $s;};"#,
        r#"__ws_p(){ [[ $PS1 == *"133;B;w=$__ws_n"* ]]||PS1=$'%{\e]133;A;w='$__ws_n$'\a%}'$PS1$'%{\e]133;B;w='$__ws_n$'\a%}';};"#,
        r#"__ws_c(){ print -rn -- $'\e]133;C;w='$__ws_n';cmd='${1//[$'\a\e']/}$'\a';};"#,
        r#"precmd_functions=(__ws_d $precmd_functions __ws_p);preexec_functions+=(__ws_c);"#,
        r#"print -rn -- $'\e]133;W;w='$__ws_n';lines='${#__ws_l}$';nl=1\a'"#,
    ]
    .concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_by_path() {
        assert_eq!(Shell::from_path("/bin/bash"), Some(Shell::Bash));
        assert_eq!(Shell::from_path("/usr/bin/zsh\n"), Some(Shell::Zsh));
        assert_eq!(Shell::from_path("/bin/dash"), None);
        assert_eq!(Shell::from_path("/usr/bin/fish"), None);
        assert_eq!(Shell::from_path(""), None);
    }

    #[test]
    fn scripts_fit_on_one_terminal_line() {
        for shell in [Shell::Bash, Shell::Zsh] {
            let input = input(shell, "0123456789abcdef", true);
            let text = String::from_utf8(input).unwrap();
            let (first, rest) = text.split_once('\r').unwrap();
            assert_eq!(first, " eval \"$(head -n1)\"");
            let script = rest.strip_suffix('\r').unwrap();
            assert!(script.len() < 4000);
            assert!(!script.contains(['\r', '\n']));
            assert!(script.contains("w=%s") || script.contains("w='$__ws_n"));
        }
    }
}
