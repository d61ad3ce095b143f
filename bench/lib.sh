# Shared set-up for the benchmarks: release walissh in front of a
# throwaway sshd on loopback, everything stopped on exit. Source it; it
# sets $work, $bin, $me (the account logged in to), $sshd_port, ssh_opts (an `ssh -F` config of its
# own, so `ssh -J` hops use it too), and the functions start_sshd,
# start_jump_sshd, start_walissh and rss.
# Needs sshd and ssh (Debian: openssh-server, openssh-client).
# WALISSH_BIN=path: that binary, not a fresh build of the tree.

# WALISSH_BIN: measure that build instead (a before/after pair in one
# sitting); otherwise the tree's, built first.
if [ -n "${WALISSH_BIN:-}" ]; then
    bin=$WALISSH_BIN
else
    cargo build --release --quiet
    bin=$PWD/target/release/walissh
fi
work=$(mktemp -d)
chmod 755 "$work"   # $me reads authorized_keys and the files made here
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The account the benchmarks log in to: as root, a plain one of their own,
# made on first use with Debian's default dotfiles (root's own rc files can
# cost more than the transport: one that starts pyenv adds ~0.1 s to every
# login and runs a hook at every prompt); otherwise your own.
if [ "$(id -u)" = 0 ]; then
    me=walissh-bench
    # '*': no password, yet not locked (sshd refuses locked accounts' keys).
    id "$me" > /dev/null 2>&1 || useradd --create-home --shell /bin/bash --password '*' "$me"
else
    me=$(id -un)
fi
ssh-keygen -q -t ed25519 -N '' -f "$work/host" -C host
ssh-keygen -q -t ed25519 -N '' -f "$work/user" -C user
ssh-keygen -q -t ed25519 -N '' -f "$work/upstream" -C walissh
mkdir -p /run/sshd
cat "$work/user.pub" "$work/upstream.pub" > "$work/authorized_keys"

# The client's settings, in a file rather than -o options: `ssh -J` starts
# its hop with the same -F file, and -o options would not reach it.
cat > "$work/ssh_config" <<CFG
Host *
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
    BatchMode yes
    IdentitiesOnly yes
    IdentityFile $work/user
CFG
ssh_opts=(-F "$work/ssh_config")

# start_sshd NAME: a throwaway sshd on loopback (same host key and
# authorized_keys as the others); sets $started_port.
start_sshd() {
    local name=$1
    started_port=$(free_port)
    cat > "$work/sshd_$name.config" <<CFG
Port $started_port
ListenAddress 127.0.0.1
HostKey $work/host
PidFile none
AuthorizedKeysFile $work/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
PermitRootLogin prohibit-password
MaxStartups 200
MaxSessions 100
CFG
    /usr/sbin/sshd -D -e -f "$work/sshd_$name.config" 2> "$work/sshd_$name.log" &
    started_pid=$!
    pids+=($!)
    until grep -q "Server listening" "$work/sshd_$name.log" 2>/dev/null; do sleep 0.1; done
}

# The target every benchmark reaches.
start_sshd target
sshd_port=$started_port

# start_jump_sshd: a second sshd on loopback, for OpenSSH as a jump host
# (`ssh -J "$me@127.0.0.1:$jump_port" ...`); sets $jump_port.
start_jump_sshd() {
    start_sshd jump
    jump_port=$started_port jump_pid=$started_pid
}

# A `kind = "local"` target (a login shell on this machine, as $me) to add
# to start_walissh's EXTRA_TOML.
local_target_toml=$'[[targets]]\nname = "l"\nkind = "local"'
[ "$me" = "$(id -un)" ] || local_target_toml+=$'\nrun_as = "'"$me"'"'

# start_walissh NAME [EXTRA_TOML]: starts a walissh in front of the sshd
# (target `t`; user `bench` reaches every target), sets $walissh_port and
# $walissh_pid. EXTRA_TOML is appended (more [[targets]], [terminal],
# [llm], ...); $server_toml, if set, goes into [server], and
# $upstream_toml into [upstream]. Every instance shares the upstream key.
# The benchmarks open more sessions and connections (50 busy ones at
# once; 1000 idle sessions on one ControlMaster connection) as one user
# than the defaults allow: these limits, less any $server_toml sets.
bench_limits() {
    local kv
    for kv in "max_sessions_per_user = 1000" "max_connections_per_user = 100" \
        "max_sessions_per_connection = 1000"; do
        case $'\n'"${server_toml:-}" in
        *$'\n'"${kv%% *}"*) ;;
        *) echo "$kv" ;;
        esac
    done
}
start_walissh() {
    local name=$1 extra=${2:-}
    mkdir -p "$work/$name"
    cat > "$work/$name/walissh.toml" <<TOML
[server]
listen = ["127.0.0.1:0"]
state_dir = "$work/$name/state"
$(bench_limits)
${server_toml:-}
[upstream]
identity = "$work/upstream"
${upstream_toml:-}
[[targets]]
name = "t"
host = "127.0.0.1"
port = $sshd_port
user = "$me"
[[users]]
name = "bench"
authorized_keys = ["$(cat "$work/user.pub")"]
targets = ["*"]
$extra
TOML
    RUST_LOG=info "$bin" serve --config "$work/$name/walissh.toml" 2> "$work/$name/walissh.log" &
    walissh_pid=$!
    pids+=($walissh_pid)
    until grep -q "listening addr=" "$work/$name/walissh.log" 2>/dev/null; do sleep 0.1; done
    walissh_port=$(sed -n 's/.*listening addr=127.0.0.1:\([0-9]*\).*/\1/p' "$work/$name/walissh.log" | head -1)
}

# ttys COUNT ROWS COLS CMD...: runs COUNT copies of CMD, each on a terminal
# of its own of ROWS by COLS (its controlling terminal, stdin, stdout and
# stderr, as a terminal emulator does), reading and dropping what they
# print; ends when they all have. Run it in the background. (OpenSSH's
# `ssh -tt` with only its stdin on a PTY, or with a pipe or a FIFO, often
# asks for a 0x0 terminal.)
ttys() {
    python3 - "$@" <<'PY'
import fcntl, os, pty, select, struct, sys, termios
count, rows, cols, argv = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
masters = []
for _ in range(count):
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execvp(argv[0], argv)
    masters.append(fd)
while masters:
    for fd in select.select(masters, [], [])[0]:
        try:
            done = not os.read(fd, 65536)
        except OSError:
            done = True
        if done:
            masters.remove(fd)
            os.close(fd)
PY
}

rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
