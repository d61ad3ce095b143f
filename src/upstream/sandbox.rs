//! The command line that runs a checked script apart from the user's
//! shell, and the walls around it: what `auto` runs unasked runs where the
//! kernel itself stops writes, network and secret reads, so a table of the
//! policy that is wrong about one option of one program cannot do harm.
//!
//! What it owns: the line given to the target account's login shell
//! ([`command`]), the sandbox it sets up ([`Wall`]: bubblewrap, or
//! util-linux `unshare` for a root login, or none), the paths the sandbox
//! hides ([`HIDDEN`], which the policy's secret check reads too, so either
//! wall alone stops the read), and the probe that finds which wall works
//! on a target ([`probe_line`], [`Found`]). What it leaves to others:
//! which wall a command gets (`agent::exec`, from `[ai] auto_sandbox`),
//! starting the line (`Runner`), and its time and output limits
//! (`agent::exec`).
//!
//! The script always runs under `/bin/bash --noprofile --norc`: the
//! policy read it with bash's grammar, and `/bin/sh` (dash on Debian)
//! reads some lines otherwise (`echo 10>x` is a descriptor to bash, an
//! argument to dash).

use crate::terminal::bootstrap::quote;

/// The only PATH a command run clean sees: the system's directories, the
/// sbin ones included (`ss`, `ip`, `sysctl` live there on some systems).
pub(crate) const CLEAN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where the programs walissh names are looked for: fixed paths, never the
/// account's PATH.
const BASH: &str = "/bin/bash";
const BWRAP: &str = "/usr/bin/bwrap";
const UNSHARE: &str = "/usr/bin/unshare";
const SETPRIV: &str = "/usr/bin/setpriv";

/// What stands around a script run clean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wall {
    /// bubblewrap: for root and, where user namespaces are allowed, for
    /// ordinary accounts.
    Bwrap,
    /// util-linux `unshare` and `setpriv`: root logins only (it needs the
    /// privilege to make mounts, then drops every capability).
    Unshare,
    /// None: the policy alone (`auto_sandbox = "prefer"` where nothing
    /// works, `"off"`, and commands the user approved).
    None,
}

impl Wall {
    /// The name audit rows carry (`sandbox`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Wall::Bwrap => "bwrap",
            Wall::Unshare => "unshare",
            Wall::None => "none",
        }
    }
}

/// What a target's probe found: the best wall that works there, and
/// whether it has bash at its fixed path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) wall: Wall,
    pub(crate) bash: bool,
}

/// The paths hidden from a sandboxed command (an empty directory or file
/// in their place), as globs: `*` within one component, `~` the target
/// account's home. `[ai] sandbox_hide` adds more. The list is the policy's
/// (`walissh_policy::HIDDEN`), so that its secret check and this wall
/// read the same places.
pub(crate) use walissh_policy::HIDDEN;

/// What the script runs under: bash, by its fixed path, with no start-up
/// file, its arguments after it.
const RUN: &str = "/bin/bash --noprofile --norc -c \"$s\" bash";

/// The outer script, run by `/bin/bash` (no start-up files) with `$1` the
/// script, `$2` the directory (empty: stay where the login shell is),
/// `$3` the wall, `$4` `net` when the network stays (`[ai] auto_network`)
/// and the rest the globs to hide. It builds the wall, goes
/// to the directory and runs the script with a lifeline
/// ([`with_lifeline`]). Any step of the wall that fails stops it before the
/// script runs: a sandbox that could not be built is never a command run
/// without one.
fn outer() -> String {
    let bwrap = format!(
        r#"a=(--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /var/tmp --tmpfs /dev/shm
   --unshare-all --die-with-parent --new-session --cap-drop ALL)
  [ "$n" = net ] && a+=(--share-net)
  # A new /proc still writes the host's kernel settings (root may write
  # /proc/sys and /proc/sysrq-trigger): those parts stay read-only.
  for k in /proc/sys /proc/sysrq-trigger /proc/irq /proc/bus /proc/fs; do
    [ ! -e "$k" ] || a+=(--ro-bind "$k" "$k")
  done
  for p in "${{hide[@]}}"; do
    if [ -d "$p" ]; then a+=(--tmpfs "$p"); else a+=(--ro-bind /dev/null "$p"); fi
  done
  [ -z "$d" ] || a+=(--chdir "$d")
  run() {{ {BWRAP} "${{a[@]}}" -- {RUN}; }}"#
    );
    let unshare = format!(
        r#"[ "$(id -u)" = 0 ] || {{ echo 'walissh: unshare needs a root login' >&2; exit 125; }}
  net=--net; [ "$n" = net ] && net=--pid
  run() {{ {UNSHARE} --mount "$net" --pid --ipc --uts --fork --kill-child --mount-proc \
    --propagation private -- /bin/bash --noprofile --norc -c "$inside" bash "$s" "$d" "${{hide[@]}}"; }}"#
    );
    format!(
        r#"s=$1 d=$2 w=$3 n=$4; shift 4
IFS=
shopt -s nullglob dotglob
hide=()
# A path through a symlink (/var/run is /run) is hidden where it leads:
# neither wall can mount over a symlink. Resolved without a fork unless
# a symlink is on the way.
real() {{
  r=$1; local rest=${{1#/}} q= c
  while [ -n "$rest" ]; do
    c=${{rest%%/*}}; [ "$c" = "$rest" ] && rest= || rest=${{rest#*/}}
    q+=/$c
    if [ -L "$q" ]; then r=$(readlink -f -- "$1"); return; fi
  done
}}
# A place to hide, once: where it leads, unless a hidden directory holds
# it already.
add() {{
  [ -e "$1" ] || return 0
  real "$1"
  for x in "${{hide[@]}}"; do case $r in "$x"|"$x"/*) return 0;; esac; done
  hide+=("$r")
}}
# `~/` globs are expanded in the home itself, never spliced into a
# pattern: a `[`, `*` or `\` in its path would make them match nothing,
# and the wall would fail open.
here=$PWD
for g in "$@"; do
  case $g in
  "~/"*)
    cd -- "$HOME" || {{ echo 'walissh: cannot enter the home to hide its secrets' >&2; exit 125; }}
    for p in ${{g#"~/"}}; do add "$HOME/$p"; done
    cd -- "$here" || exit 125;;
  *) for p in $g; do add "$p"; done;;
  esac
done
case $w in
none)
  [ -z "$d" ] || cd -- "$d" || exit 1
  run() {{ {RUN}; }};;
bwrap)
  {bwrap};;
unshare)
  inside={inside}
  {unshare};;
*) exit 125;;
esac
{lifeline}"#,
        inside = quote(&unshare_inside()),
        lifeline = with_lifeline("run"),
    )
}

/// What runs inside `unshare`'s new namespaces as root: every mount made
/// read-only, a private `/tmp`, the hidden paths covered, then every
/// capability dropped (an empty bounding set: nothing the script runs,
/// set-uid programs included, gets one back) before the script. The new
/// network namespace's `lo` stays down: no network at all.
fn unshare_inside() -> String {
    format!(
        r#"set -e
s=$1 d=$2; shift 2
mps=()
while read -r _ _ _ _ mp _; do
  case $mp in *\\*) echo 'walissh: a mount point walissh cannot name' >&2; exit 125;; esac
  mps+=("$mp")
done </proc/self/mountinfo
for mp in "${{mps[@]}}"; do mount -o remount,bind,ro -- "$mp"; done
# A /dev of its own, as bwrap's: a read-only mount does not stop a write
# to a device node, and root owns the disks'.
mount -t tmpfs -o mode=755,size=64k tmpfs /dev
for n in null:3 zero:5 full:7 random:8 urandom:9; do mknod -m 666 "/dev/${{n%:*}}" c 1 "${{n#*:}}"; done
ln -s /proc/self/fd /dev/fd; ln -s fd/0 /dev/stdin; ln -s fd/1 /dev/stdout; ln -s fd/2 /dev/stderr
mkdir /dev/shm /dev/pts
for t in /tmp /var/tmp /dev/shm; do [ ! -d "$t" ] || mount -t tmpfs -o mode=1777,size=64m tmpfs "$t"; done
mount -o remount,bind,ro /dev
for p in "$@"; do
  [ -e "$p" ] || continue
  if [ -d "$p" ]; then mount -t tmpfs -o ro,size=4k,mode=755 tmpfs "$p"; else mount --bind /dev/null "$p"; fi
done
[ -z "$d" ] || cd -- "$d"
exec {SETPRIV} --no-new-privs --bounding-set=-all --inh-caps=-all --ambient-caps=-all -- {RUN}"#
    )
}

/// How a command run clean is stopped, all of it, when walissh gives it
/// up (Ctrl-C, its timeout). A signal is not enough: sshd passes a TERM
/// to the session's process group, but refuses to for some accounts
/// (OpenSSH sends no signal into a root login's session), and a closed
/// channel stops nothing that does not write. So the command's input,
/// which walissh holds open and never writes to, is a lifeline: `run`
/// gets `/dev/null` instead, and a watcher waits for that input to end,
/// which it does when walissh drops the channel or the process, then
/// signals the whole process group: TERM, and two seconds later KILL, for
/// what ignores TERM (the watcher ignores it itself, to live that long).
/// sshd makes each session's process the leader of a group of its own
/// (setsid), and walissh each local one (`local::open`), so the group is
/// the command's and nothing else's; the line must never run where it is
/// not. A sandbox's processes are in a session of their own, but die with
/// the sandbox's first process, which is in the group. When `run` ends
/// first, the watcher is stopped, and the exit status is `run`'s.
fn with_lifeline(run: &str) -> String {
    format!(
        "exec 3<&0 </dev/null; {run} 3<&- & p=$!; \
         {{ trap '' TERM; read -r x <&3; kill -TERM 0; sleep 2; kill -KILL 0; }} & w=$!; \
         exec 3<&-; wait $p; s=$?; kill -KILL $w 2>/dev/null; exit $s"
    )
}

/// The command line, for the target account's login shell, that runs
/// `script` (a bash script, already fully quoted by the policy) clean,
/// behind `wall`, hiding `hide` (globs, after [`HIDDEN`]) when walled:
///
/// ```text
/// \exec '/usr/bin/env' '-i' 'PATH=<CLEAN_PATH>' 'LANG=C.UTF-8' "HOME=$HOME" \
///     '/bin/bash' '--noprofile' '--norc' '-c' '<OUTER>' 'walissh' SCRIPT CWD WALL GLOBS…
/// ```
///
/// The login shell is unavoidable (sshd runs every exec command through
/// it, and a local target's exec does the same), so it is given one thing
/// to do: replace itself with `env`, which empties the environment and
/// starts bash with a fixed PATH and no start-up file. Bash builds the
/// wall, goes to the prompt's directory (`cwd`; without one it stays
/// where the login shell started, the home directory) and runs the script
/// in a bash of its own so that giving it up stops all of it.
///
/// What that protects against: everything the user's interactive shell
/// would add to a checked name. Aliases (every word the login shell reads
/// is quoted, so neither bash's nor zsh's aliases, global ones included,
/// apply), functions and PATH entries from rc files, and exported ones
/// (`env -i` drops `BASH_FUNC_*`, `PATH`, `ENV`, `BASH_ENV`, `LD_PRELOAD`,
/// `IFS` and the rest; `env` and bash are named by absolute path), shell
/// options, and the interactive rc files themselves.
///
/// What it does not: the login shell's own non-interactive start-up runs
/// before this line is read (`~/.zshenv`, a `BASH_ENV` sshd passes on),
/// and a function named `exec` defined there takes this line over. Those
/// files, like bash and the programs in the fixed PATH, are the target
/// account's own: an account can make any of its commands do anything.
/// The walls are the kernel's, not the account's: once bwrap or unshare
/// runs, the script cannot write outside its private `/tmp`, reach the
/// network or read what is hidden.
///
/// The quoting is POSIX single quotes, which is what bash and zsh (the
/// login shells the agent runs with: it needs their shell integration)
/// read; fish reads `\\` inside them differently.
pub(crate) fn command(script: &str, cwd: Option<&str>, wall: Wall, hide: &Hide) -> String {
    let mut line = format!(
        "\\exec '/usr/bin/env' '-i' 'PATH={CLEAN_PATH}' 'LANG=C.UTF-8' \"HOME=$HOME\" '{BASH}' \
         '--noprofile' '--norc' '-c' {} 'walissh' {} {} '{}' '{}'",
        quote(&outer()),
        quote(script),
        quote(cwd.unwrap_or("")),
        wall.name(),
        if hide.network { "net" } else { "nonet" },
    );
    if wall != Wall::None {
        let bus: &[&str] = if needs_bus(script) { &[] } else { BUS };
        for glob in HIDDEN
            .iter()
            .chain(bus)
            .copied()
            .chain(hide.paths.iter().map(String::as_str))
        {
            line.push(' ');
            line.push_str(&quote(glob));
        }
    }
    line
}

/// The system bus and systemd's own sockets. Through them a root process
/// asks systemd or logind to start a unit, reboot, or kill a session, and
/// a read-only file system does not stop a connect. They are hidden from
/// every line but those that run one of [`BUS_CLIENTS`], whose verbs the
/// policy's table limits to showing.
const BUS: &[&str] = &[
    "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket",
    "/run/systemd/private",
    "/run/systemd/io.systemd.*",
    "/run/systemd/userdb",
    "/run/user/*/bus",
    "/run/user/*/systemd",
];

/// The programs of the policy's table that need the bus.
const BUS_CLIENTS: &[&str] = &[
    "systemctl",
    "loginctl",
    "timedatectl",
    "hostnamectl",
    "localectl",
    "networkctl",
    "busctl",
    "resolvectl",
];

/// Whether `script` (every word single-quoted, as the policy renders it)
/// names a bus client anywhere. A word that only mentions one (a grep
/// pattern) leaves the bus reachable, as it was before this wall.
fn needs_bus(script: &str) -> bool {
    BUS_CLIENTS
        .iter()
        .any(|c| script.contains(&format!("'{c}'")) || script.contains(&format!("/{c}'")))
}

/// What a wall leaves out besides [`HIDDEN`]: `[ai] sandbox_hide`, and
/// whether the network stays (`[ai] auto_network`: lookups may run
/// unasked, so they must be able to).
#[derive(Debug, Clone, Default)]
pub(crate) struct Hide {
    pub(crate) paths: Vec<String>,
    pub(crate) network: bool,
}

/// What the probe's script prints in a wall that works.
const PROBE_OK: &str = "walissh-wall-ok";

/// The probe of one wall: the line that runs a script printing
/// [`PROBE_OK`] behind `wall`, exactly as a command would be run.
pub(crate) fn probe_line(wall: Wall, hide: &Hide) -> String {
    command(&format!("echo {PROBE_OK}"), None, wall, hide)
}

/// Whether a probe's output says its wall works.
pub(crate) fn probe_worked(output: &[u8]) -> bool {
    String::from_utf8_lossy(output).trim() == PROBE_OK
}

/// The walls to try, best first.
pub(crate) const WALLS: [Wall; 3] = [Wall::Bwrap, Wall::Unshare, Wall::None];

#[cfg(test)]
pub(crate) mod tests;
