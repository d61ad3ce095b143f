//! Shell integration: which shells get walissh's marks, and the one-line
//! script that installs them.
//!
//! The script is typed into the target's PTY at session start, behind a
//! short first line (` eval "$(head -n1)"`) that the shell reads at its
//! first prompt; `head` then reads the script itself from the terminal.
//! The PTY is opened with echo off, so neither line is ever echoed, the
//! script never passes through the line editor, and the first line is
//! taken out of the shell's history. The script restores echo, wraps the prompt in
//! OSC 133 A/B, reports C (with the command line) before each command and
//! D (with the exit status) and OSC 7 (the directory) before each prompt,
//! all carrying the session's nonce, and ends with a W ("ready") mark.
//! It also binds three keys of walissh's own: an Enter for the lines the
//! agent types (never a question, no history expansion), a key that takes
//! a new nonce (read unechoed, confirmed with an R mark that carries the
//! old one too), and bracketed
//! paste, so that typed lines are inserted as they are.

use std::path::Path;

/// The most of a command line (or a question) the scripts put in a mark,
/// in characters: a longer one is cut, and taken for one that may start a
/// shell.
pub(crate) const COMMAND_MAX: usize = 4000;

/// A shell walissh knows how to integrate with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shell {
    Bash,
    Zsh,
}

/// `s` as one word for bash and zsh: single-quoted, its own single quotes
/// closed, escaped and reopened.
pub(crate) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
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
/// must stay under the terminal's line limit (4095 bytes). `prefixes` are
/// the `[ai] prefixes` that make a line at the prompt a question.
pub(crate) fn input(shell: Shell, nonce: &str, echo: bool, prefixes: &[String]) -> Vec<u8> {
    let stty = if echo { "stty echo 2>/dev/null;" } else { "" };
    let quoted: Vec<String> = prefixes.iter().map(|p| quote(p)).collect();
    let prefixes = format!("__ws_pf=({});", quoted.join(" "));
    let script = match shell {
        Shell::Bash => bash(nonce, stty, &prefixes),
        Shell::Zsh => zsh(nonce, stty, &prefixes),
    };
    debug_assert!(script.len() < 4000 && !script.contains(['\r', '\n']));
    // Bash may already be in its line editor when this arrives, with CR
    // no longer turned into NL, so its script ends with NL (which ends a
    // line either way); zsh's ends with CR.
    let end = match shell {
        Shell::Bash => '\n',
        Shell::Zsh => '\r',
    };
    format!(" eval \"$(head -n1)\"\r{script}{end}").into_bytes()
}

/// The line walissh typed first, as the shells' history holds it.
const FIRST_LINE: &str = r#"'eval "$(head -n1)"'"#;

/// What a line of the probe holds, as the shells' history holds it.
const PROBE_MARK: &str = "133;P;w=";

/// The probe walissh types at what looks like a nested shell's prompt:
/// one line that bash and zsh answer with a P mark holding their
/// versions, and that other shells answer with empty versions (dash, fish)
/// or an error (tcsh). Nothing in it changes the shell. Its leading space
/// keeps it out of histories that ignore such lines; the bootstrap
/// deletes it from the others.
pub(crate) fn probe(nonce: &str) -> Vec<u8> {
    format!(
        " printf '\\033]{PROBE_MARK}%s;bash=%s;zsh=%s\\007' {nonce} \"$BASH_VERSION\" \"$ZSH_VERSION\"\r"
    )
    .into_bytes()
}

fn bash(n: &str, stty: &str, prefixes: &str) -> String {
    [
        stty,
        // Before 4.4 there is no PS0 nor ${PS1@P}: no integration.
        &format!(r#"if ((BASH_VERSINFO[0]*100+BASH_VERSINFO[1]<404));then builtin printf '\e]133;W;w={n};plain=1\a';else "#),
        // Only if the first line is there (with ignorespace it is not, and
        // the user's own last command must stay), then the probe's, if a
        // nested shell got one.
        &format!(r#"for __ws_e in 1 2;do __ws_e=$(HISTTIMEFORMAT= builtin history 1);[[ $__ws_e == *{FIRST_LINE} || $__ws_e == *"{PROBE_MARK}"* ]]||break;__ws_e=${{__ws_e#"${{__ws_e%%[! ]*}}"}};builtin history -d ${{__ws_e%%[!0-9]*}} 2>/dev/null;done;unset __ws_e;"#),
        // The nonce lives in unexported variables only: PS1 refers to them
        // by name, so an exported PS1 shows children no nonce.
        &format!(r#"__ws_n={n};__ws_A=$'\e]133;A;w={n}\a';__ws_B=$'\e]133;B;w={n}\a';"#),
        // Every flag set, so that `set -u` finds none unbound.
        r#"__ws_1=0;__ws_b=0;__ws_H=0;__ws_k=0;"#,
        prefixes,
        r#"__ws_l="${PS1@P}";__ws_l="${__ws_l//[^$'\n']/}";"#,
        r#"__ws_d(){ local s=$?;builtin printf '\e]133;D;%s;w=%s\a\e]7;w=%s;%s\a' "$s" "$__ws_n" "$__ws_n" "${PWD//[$'\a\e']/}";__ws_h=$HISTCMD;__ws_1=1;__ws_k=0;((__ws_H))&&{ set -H;__ws_H=0;};return $s;};"#,
        // Enter runs __ws_q, then whatever \e[208~ is bound to: accept-line,
        // or, for a question at the primary prompt, a redraw (the line is
        // cleared and handed to walissh with a Q mark instead).
        r#"__ws_q(){ local p;if ((__ws_1));then for p in "${__ws_pf[@]}";do if [[ $READLINE_LINE == "$p"* ]];then builtin printf '\e]133;Q;w=%s;kept=0;text=%s\a' "$__ws_n" "${READLINE_LINE:0:4000}";READLINE_LINE=;bind '"\e[208~": redraw-current-line';__ws_b=1;return;fi;done;__ws_m "$READLINE_LINE";else __ws_k=0;fi;__ws_1=0;__ws_a;};"#,
        // Enter back to accept-line after a question, and only then: a
        // bind is most of what Enter costs here.
        // (Status 0 always: a failing bind -x command ends a `set -e` shell.)
        r#"__ws_a(){ ((__ws_b))&&{ __ws_b=0;bind '"\e[208~": accept-line';};return 0;};"#,
        r#"bind -x '"\e[209~": __ws_q';bind '"\e[208~": accept-line';bind '"\C-m": "\e[209~\e[208~"';bind '"\C-j": "\e[209~\e[208~"';"#,
        // walissh's own Enter (\e[210~) for the lines it types: never a
        // question, and run without history expansion (restored at the
        // next prompt), whatever histchars says.
        r#"__ws_x(){ __ws_m "$READLINE_LINE";__ws_1=0;[[ $- == *H* ]]&&{ set +H;__ws_H=1;};__ws_a;};"#,
        r#"bind -x '"\e[211~": __ws_x';bind '"\e[210~": "\e[211~\e[208~"';"#,
        // A new nonce (\e[212~ then 32 hex digits, read unechoed), which
        // the shell confirms with an R mark carrying it and the old one.
        r#"__ws_r(){ local n;IFS= read -rs -n 32 n;[[ $n =~ ^[0-9a-f]{32}$ ]]||return 0;builtin printf '\e]133;R;w=%s;was=%s\a' "$n" "$__ws_n";__ws_n=$n;__ws_A=$'\e]133;A;w='$n$'\a';__ws_B=$'\e]133;B;w='$n$'\a';};"#,
        // Typed text inserted as it is (no byte read as a key binding),
        // without turning the terminal's paste mode on.
        r#"bind -x '"\e[212~": __ws_r';bind '"\e[200~": bracketed-paste-begin' 2>/dev/null;"#,
        // PS2 (a command goes on to another line, however the first was
        // accepted) makes the command's mark come from the history.
        r#"__ws_p(){ [[ $PS1 == *'${__ws_B}'* ]]||PS1='\[${__ws_A}\]'"$PS1"'\[${__ws_B}\]';[[ $PS2 == *'__ws_k=0]}'* ]]||PS2='${__ws_C[__ws_1=__ws_k=0]}'"$PS2";};"#,
        r#"__ws_c(){ local c h;c=$(HISTTIMEFORMAT= builtin history 1);h=${c#"${c%%[! ]*}"};h=${h%%[!0-9]*};"#,
        r#"if [[ $h == "$__ws_h" ]];then c=${c#*[0-9]  };c=${c//[$'\a\e']/};builtin printf '\e]133;C;w=%s;cmd=%s\a' "$__ws_n" "${c:0:4000}";else builtin printf '\e]133;C;w=%s\a' "$__ws_n";fi;};"#,
        // Children must not inherit hooks they do not have.
        r#"export -n PROMPT_COMMAND 2>/dev/null;"#,
        r#"if [[ $(declare -p PROMPT_COMMAND 2>/dev/null) == 'declare -a'* ]];then PROMPT_COMMAND=(__ws_d "${PROMPT_COMMAND[@]}" __ws_p);"#,
        // Newlines, not ';': the user's PROMPT_COMMAND may end with one.
        r#"else PROMPT_COMMAND="__ws_d"$'\n'"${PROMPT_COMMAND-}"$'\n'"__ws_p";fi;"#,
        // The C mark without a fork when the accepted line is known to be
        // the command: one line with no history expansion in it, accepted
        // by Enter at the primary prompt (walissh drops its keys from what
        // the user types, so no other key sets __ws_k; PS2 and each prompt
        // reset it). __ws_m makes the mark at Enter and sets __ws_k; PS0
        // prints it, or (__ws_k=0) forks for the history's text, and sets
        // __ws_k back to 0 in a subscript, which needs no fork either.
        r#"__ws_m(){ local c=$1 h=${histchars-'!^#'};if [[ $c == *$'\n'* || $c == *"${h:0:1}"* || $c == "${h:1:1}"* ]];then __ws_k=0;else c=${c//[$'\a\e']/};__ws_C[1]=$'\e]133;C;w='$__ws_n';cmd='${c:0:4000}$'\a';__ws_k=1;fi;};"#,
        r#"__ws_F=(1);__ws_C=('');__ws_k=0;PS0='${__ws_F[__ws_k]:+$(__ws_c)}${__ws_C[__ws_k]}${__ws_C[__ws_k=0]}'"${PS0-}";"#,
        // Who the shell runs as and where, without a fork.
        r#"__ws_u='\u';__ws_h='\H';"#,
        r#"builtin printf '\e]133;W;w=%s;lines=%s;nl=1;keys=1;paste=1;user=%s;host=%s\a' "$__ws_n" "${#__ws_l}" "${__ws_u@P}" "${__ws_h@P}";unset __ws_u __ws_h;fi"#,
    ]
    .concat()
}

fn zsh(n: &str, stty: &str, prefixes: &str) -> String {
    [
        stty,
        // zsh cannot delete a history entry: if the first line walissh
        // typed is there, write the list out without it and start a fresh
        // list from that. The old list gets no file, so it is never saved.
        // (fc -W writes at most SAVEHIST entries: the whole list here.)
        r#"__ws_t=$(mktemp 2>/dev/null)&&{ (){ local SAVEHIST=$HISTSIZE;fc -W $__ws_t;};__ws_l=("${(@f)$(<$__ws_t)}");"#,
        // The probe's line goes too, if a nested shell got one.
        &format!(r#"__ws_f=${{#__ws_l}};[[ ${{__ws_l[-1]}} == *{FIRST_LINE} ]]&&__ws_l=("${{(@)__ws_l[1,-2]}}");[[ ${{__ws_l[-1]}} == *"{PROBE_MARK}"* ]]&&__ws_l=("${{(@)__ws_l[1,-2]}}");"#),
        r#"if ((${#__ws_l}!=__ws_f));then if ((${#__ws_l}));then print -rl -- $__ws_l >|$__ws_t;else :>|$__ws_t;fi;"#,
        r#"__ws_f=$HISTFILE;HISTFILE=;fc -p $__ws_t;HISTFILE=$__ws_f;fi;command rm -f $__ws_t;};unset __ws_t __ws_f __ws_l;"#,
        // The prompt gets the nonce: it must not travel to children.
        r#"typeset +x PS1 PROMPT 2>/dev/null;"#,
        &format!("__ws_n={n};"),
        prefixes,
        r#"__ws_l=${(%)PS1};__ws_l=${__ws_l//[^$'\n']/};"#,
        r#"__ws_d(){ local s=$?;print -rn -- $'\e]133;D;'$s';w='$__ws_n$'\a\e]7;w='$__ws_n';'${PWD//[$'\a\e']/}$'\a';__ws_1=1;[[ -n $__ws_hc ]]&&{ histchars=$__ws_hc;__ws_hc=;};return $s;};"#,
        // Not `.accept-line`: the user's own accept-line wrappers still run.
        r#"__ws_q(){ local p;if ((__ws_1));then for p in "${__ws_pf[@]}";do if [[ $BUFFER == "$p"* ]];then zle -I;print -rn -- $'\e]133;Q;w='$__ws_n';kept=1;text='${${BUFFER//[$'\a\e']/}[1,4000]}$'\a';BUFFER=;return;fi;done;fi;__ws_1=0;zle accept-line;};"#,
        r#"zle -N __ws_q;bindkey '^M' __ws_q;bindkey '^J' __ws_q;"#,
        // walissh's own Enter: never a question, no history expansion
        // (histchars restored at the next prompt; zsh decides on
        // expansion before the line is edited, so the option cannot do).
        r#"__ws_x(){ __ws_1=0;__ws_hc=$histchars;histchars=$'\0\0\0';zle accept-line;};zle -N __ws_x;bindkey '^[[210~' __ws_x;"#,
        // A new nonce; the prompt holds the old one in its marks.
        r#"__ws_r(){ local n;read -k 32 n;[[ ${#n} == 32 && $n != *[^0-9a-f]* ]]||return 0;print -rn -- $'\e]133;R;w='$n';was='$__ws_n$'\a';PS1=${PS1//$__ws_n/$n};__ws_n=$n;};zle -N __ws_r;bindkey '^[[212~' __ws_r;"#,
        r#"__ws_k=0;zle -la bracketed-paste >/dev/null&&bindkey '^[[200~' bracketed-paste&&__ws_k=1;"#,
        r#"__ws_p(){ [[ $PS1 == *"133;B;w=$__ws_n"* ]]||PS1=$'%{\e]133;A;w='$__ws_n$'\a%}'$PS1$'%{\e]133;B;w='$__ws_n$'\a%}';};"#,
        r#"__ws_c(){ print -rn -- $'\e]133;C;w='$__ws_n';cmd='${${1//[$'\a\e']/}[1,4000]}$'\a';};"#,
        r#"precmd_functions=(__ws_d $precmd_functions __ws_p);preexec_functions+=(__ws_c);"#,
        r#"print -rn -- $'\e]133;W;w='$__ws_n';lines='${#__ws_l}$';nl=1;keys=1;paste='$__ws_k';user='${(%):-%n}';host='${(%):-%M}$'\a';unset __ws_k"#,
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
            let prefixes = ["?".to_string(), "it's:".to_string()];
            let input = input(shell, "0123456789abcdef", true, &prefixes);
            let text = String::from_utf8(input).unwrap();
            let (first, rest) = text.split_once('\r').unwrap();
            assert_eq!(first, " eval \"$(head -n1)\"");
            let script = rest.strip_suffix(['\r', '\n']).unwrap();
            assert!(script.len() < 4000);
            assert!(!script.contains(['\r', '\n']));
            assert!(script.contains("w=%s") || script.contains("w='$__ws_n"));
            assert!(script.contains(r"__ws_pf=('?' 'it'\''s:')"), "{script}");
            // Every cut of a line is COMMAND_MAX characters (bash's
            // `${h:0:1}` takes one of histchars).
            let cuts: Vec<usize> = [":0:", "[1,"]
                .iter()
                .flat_map(|c| script.match_indices(c).map(|(i, _)| i + c.len()))
                .map(|i| {
                    let digits = script[i..].bytes().take_while(u8::is_ascii_digit).count();
                    // Not a number (zsh's `[1,-2]`): not a cut of a line.
                    script[i..i + digits].parse().unwrap_or(0)
                })
                .filter(|&n: &usize| n > 1)
                .collect();
            assert!(cuts.len() >= 2, "{script}");
            assert!(cuts.iter().all(|&n| n == COMMAND_MAX), "{cuts:?}");
        }
    }

    /// Each script parses in its real shell (`-n`: read, not run), and
    /// the probe in bash, zsh and dash.
    #[test]
    fn scripts_and_the_probe_parse_in_the_real_shells() {
        let parses = |shell: &str, text: &str| match std::process::Command::new(shell)
            .args(["-n", "-c", text])
            .output()
        {
            Ok(out) => assert!(
                out.status.success(),
                "{shell}: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(_) => eprintln!("{shell} is not installed here"),
        };
        for (shell, name) in [(Shell::Bash, "bash"), (Shell::Zsh, "zsh")] {
            let input = String::from_utf8(input(shell, "0123abcd", true, &["?".into()])).unwrap();
            let script = input.split_once('\r').unwrap().1;
            parses(name, script.trim_end());
        }
        let probe = String::from_utf8(probe("0123abcd")).unwrap();
        for shell in ["bash", "zsh", "dash"] {
            parses(shell, probe.trim());
        }
    }
}
