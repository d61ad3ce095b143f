# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_walissh_global_optspecs
    string join \n log-level= h/help V/version
end

function __fish_walissh_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_walissh_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_walissh_using_subcommand
    set -l cmd (__fish_walissh_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c walissh -n "__fish_walissh_needs_command" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_needs_command" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_needs_command" -s V -l version -d 'Print version'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "serve" -d 'Run the bastion (the embedded default when there is no config)'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "check-config" -d 'Validate the config: exit 0, or 1 naming the file, line and key'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "hash-password" -d 'Read a password from stdin and print its argon2id PHC string'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "pubkey" -d 'Print the bastion\'s upstream public key (creating it if needed)'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "totp" -d 'Manage users\' TOTP second factors'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "sessions" -d 'List sessions; or end one'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "migrate" -d 'Bring the audit database\'s schema to this version\'s (PostgreSQL\'s versioned migrations; SQLite\'s file is made or updated). walissh serve does this too at every start'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "approvals" -d 'List the agent\'s commands waiting for a second approval (four-eyes), oldest first'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "approve" -d 'Give the second approval of a waiting command (`walissh approvals`), as `unix:ACCOUNT`; or, with `--deny`, refuse it'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "man" -d 'Print the man page (roff): `walissh man > walissh.1`; or, with `--dir`, write it and a page for each subcommand there'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "completions" -d 'Print the completion script for a shell: `walissh completions bash`'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "play" -d 'Replay a session\'s recording in this terminal'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "redact" -d 'Print FILE (or stdin) as the agent sends it to the model, secrets redacted'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "backup" -d 'Copy the audit into DIR while the bastion runs: the database (by SQLite\'s online backup), its head file, the recordings and the audit key\'s public half, laid out as the state directory is'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "audit" -d 'List audit events, oldest first; or check or show what secures them'
complete -c walissh -n "__fish_walissh_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c walissh -n "__fish_walissh_using_subcommand serve" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand serve" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand serve" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand check-config" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand check-config" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand check-config" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand hash-password" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand hash-password" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand pubkey" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand pubkey" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand pubkey" -l ca -d 'Print the upstream CA\'s public key instead (`[upstream] ca_key`): the line for a target\'s TrustedUserCAKeys'
complete -c walissh -n "__fish_walissh_using_subcommand pubkey" -l host-ca -d 'Print the line users put in known_hosts to trust the targets\' host certificates through the jump (`ssh -J bastion web1`): `@cert-authority NAMES KEY`, NAMES every target\'s name and aliases'
complete -c walissh -n "__fish_walissh_using_subcommand pubkey" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand totp; and not __fish_seen_subcommand_from enroll help" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand totp; and not __fish_seen_subcommand_from enroll help" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand totp; and not __fish_seen_subcommand_from enroll help" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand totp; and not __fish_seen_subcommand_from enroll help" -f -a "enroll" -d 'Make a new TOTP secret for USER (replacing any) and print it as an otpauth:// URI and a QR code for an authenticator app'
complete -c walissh -n "__fish_walissh_using_subcommand totp; and not __fish_seen_subcommand_from enroll help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c walissh -n "__fish_walissh_using_subcommand totp; and __fish_seen_subcommand_from enroll" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand totp; and __fish_seen_subcommand_from enroll" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand totp; and __fish_seen_subcommand_from enroll" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand totp; and __fish_seen_subcommand_from help" -f -a "enroll" -d 'Make a new TOTP secret for USER (replacing any) and print it as an otpauth:// URI and a QR code for an authenticator app'
complete -c walissh -n "__fish_walissh_using_subcommand totp; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and not __fish_seen_subcommand_from kill help" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and not __fish_seen_subcommand_from kill help" -l reap -d 'End in the audit the sessions NODE left open when it died (`session_end`, reason `node_reaped`), where several bastions share a PostgreSQL audit and NODE will not start again. A node that starts again ends its own' -r
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and not __fish_seen_subcommand_from kill help" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and not __fish_seen_subcommand_from kill help" -l json -d 'One JSON object per line'
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and not __fish_seen_subcommand_from kill help" -l active -d 'Only the sessions open now (none ended in the audit), each with its node: the machine whose walissh carries it'
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and not __fish_seen_subcommand_from kill help" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and not __fish_seen_subcommand_from kill help" -f -a "kill" -d 'End a live session on this bastion: its user sees the reason, and `session_killed` is audited (by `unix:ACCOUNT`)'
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and not __fish_seen_subcommand_from kill help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and __fish_seen_subcommand_from kill" -l reason -d 'What the user is told' -r
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and __fish_seen_subcommand_from kill" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and __fish_seen_subcommand_from kill" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and __fish_seen_subcommand_from kill" -l json -d 'One JSON object per line'
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and __fish_seen_subcommand_from kill" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "kill" -d 'End a live session on this bastion: its user sees the reason, and `session_killed` is audited (by `unix:ACCOUNT`)'
complete -c walissh -n "__fish_walissh_using_subcommand sessions; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c walissh -n "__fish_walissh_using_subcommand migrate" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand migrate" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand migrate" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand approvals" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand approvals" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand approvals" -l json -d 'One JSON object per line'
complete -c walissh -n "__fish_walissh_using_subcommand approvals" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand approve" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand approve" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand approve" -l deny -d 'Refuse it instead: the command does not run'
complete -c walissh -n "__fish_walissh_using_subcommand approve" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand man" -l dir -d 'Write every page (`walissh.1`, `walissh-serve.1` and the rest) into DIR' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand man" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand man" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand completions" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand completions" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand play" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand play" -l speed -d 'Play this many times faster' -r
complete -c walissh -n "__fish_walissh_using_subcommand play" -l from -d 'Start at this marker: its number, or words of its label' -r
complete -c walissh -n "__fish_walissh_using_subcommand play" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand play" -l markers -d 'List the markers instead of playing'
complete -c walissh -n "__fish_walissh_using_subcommand play" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand redact" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand redact" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand redact" -l explain -d 'Print, instead, one line per secret found: `LINE:COL-LINE:COL<TAB>KIND<TAB>RULE` (its first and last characters, 1-based, in the text without escape sequences), then how many; never the secret'
complete -c walissh -n "__fish_walissh_using_subcommand redact" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c walissh -n "__fish_walissh_using_subcommand backup" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand backup" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand backup" -l with-secrets -d 'Copy the secrets too (the audit, host, host CA and upstream keys, the TOTP store and its key, known_hosts): for a copy that is kept offline and encrypted'
complete -c walissh -n "__fish_walissh_using_subcommand backup" -l no-recordings -d 'Leave the recordings out'
complete -c walissh -n "__fish_walissh_using_subcommand backup" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -l session -d 'Only this session\'s events' -r
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -l user -d 'Only this user\'s events' -r
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -l target -d 'Only events on this target' -r
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -l kind -d 'Only events of this kind (repeat for several)' -r
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -l since -d 'Only events at or after this time: RFC 3339, or a duration ago (1h)' -r
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -l until -d 'Only events at or before this time: RFC 3339, or a duration ago' -r
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -l follow -d 'Keep printing new events as they are written'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -l json -d 'One JSON object per line'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -f -a "verify" -d 'Check the hash chain, every checkpoint\'s signature and every finished recording; exit 0 only when all are intact'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -f -a "key" -d 'Print the audit key\'s public half and its fingerprint'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -f -a "search" -d 'Find commands and questions that hold TEXT (whole words, any case)'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and not __fish_seen_subcommand_from verify key search help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from verify" -l key -d 'The audit key\'s public half to check against (an OpenSSH public key file), instead of the one in the state directory: pin the key you recorded elsewhere' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from verify" -l against -d 'Also check the database against the checkpoints `[audit] forward` sent: a file of the syslog lines or JSON lines a collector received. A database rolled back or cut before one of them fails' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from verify" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from verify" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from verify" -l json -d 'One JSON object per line'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from verify" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from key" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from key" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from key" -l json -d 'One JSON object per line'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from key" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from search" -s c -l config -d 'The config file [default: /etc/walissh/walissh.toml if it exists, else the embedded default]' -r -F
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from search" -l log-level -d 'What to log: error, warn, info, debug, trace, or a filter (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for serve and warn for the rest]' -r
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from search" -l json -d 'One JSON object per line'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from search" -s h -l help -d 'Print help'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from help" -f -a "verify" -d 'Check the hash chain, every checkpoint\'s signature and every finished recording; exit 0 only when all are intact'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from help" -f -a "key" -d 'Print the audit key\'s public half and its fingerprint'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from help" -f -a "search" -d 'Find commands and questions that hold TEXT (whole words, any case)'
complete -c walissh -n "__fish_walissh_using_subcommand audit; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "serve" -d 'Run the bastion (the embedded default when there is no config)'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "check-config" -d 'Validate the config: exit 0, or 1 naming the file, line and key'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "hash-password" -d 'Read a password from stdin and print its argon2id PHC string'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "pubkey" -d 'Print the bastion\'s upstream public key (creating it if needed)'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "totp" -d 'Manage users\' TOTP second factors'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "sessions" -d 'List sessions; or end one'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "migrate" -d 'Bring the audit database\'s schema to this version\'s (PostgreSQL\'s versioned migrations; SQLite\'s file is made or updated). walissh serve does this too at every start'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "approvals" -d 'List the agent\'s commands waiting for a second approval (four-eyes), oldest first'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "approve" -d 'Give the second approval of a waiting command (`walissh approvals`), as `unix:ACCOUNT`; or, with `--deny`, refuse it'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "man" -d 'Print the man page (roff): `walissh man > walissh.1`; or, with `--dir`, write it and a page for each subcommand there'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "completions" -d 'Print the completion script for a shell: `walissh completions bash`'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "play" -d 'Replay a session\'s recording in this terminal'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "redact" -d 'Print FILE (or stdin) as the agent sends it to the model, secrets redacted'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "backup" -d 'Copy the audit into DIR while the bastion runs: the database (by SQLite\'s online backup), its head file, the recordings and the audit key\'s public half, laid out as the state directory is'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "audit" -d 'List audit events, oldest first; or check or show what secures them'
complete -c walissh -n "__fish_walissh_using_subcommand help; and not __fish_seen_subcommand_from serve check-config hash-password pubkey totp sessions migrate approvals approve man completions play redact backup audit help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c walissh -n "__fish_walissh_using_subcommand help; and __fish_seen_subcommand_from totp" -f -a "enroll" -d 'Make a new TOTP secret for USER (replacing any) and print it as an otpauth:// URI and a QR code for an authenticator app'
complete -c walissh -n "__fish_walissh_using_subcommand help; and __fish_seen_subcommand_from sessions" -f -a "kill" -d 'End a live session on this bastion: its user sees the reason, and `session_killed` is audited (by `unix:ACCOUNT`)'
complete -c walissh -n "__fish_walissh_using_subcommand help; and __fish_seen_subcommand_from audit" -f -a "verify" -d 'Check the hash chain, every checkpoint\'s signature and every finished recording; exit 0 only when all are intact'
complete -c walissh -n "__fish_walissh_using_subcommand help; and __fish_seen_subcommand_from audit" -f -a "key" -d 'Print the audit key\'s public half and its fingerprint'
complete -c walissh -n "__fish_walissh_using_subcommand help; and __fish_seen_subcommand_from audit" -f -a "search" -d 'Find commands and questions that hold TEXT (whole words, any case)'
