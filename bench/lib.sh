# Shared set-up for the benchmarks: release walissh in front of a
# throwaway sshd on loopback, everything stopped on exit. Source it; it
# sets $work, $bin, $me, $sshd_port, ssh_opts, and start_walissh.
# Needs sshd and ssh (Debian: openssh-server, openssh-client).

cargo build --release --quiet
bin=$PWD/target/release/walissh
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
me=$(id -un)
ssh-keygen -q -t ed25519 -N '' -f "$work/host" -C host
ssh-keygen -q -t ed25519 -N '' -f "$work/user" -C user
ssh-keygen -q -t ed25519 -N '' -f "$work/upstream" -C walissh
mkdir -p /run/sshd
sshd_port=$(free_port)
cat "$work/user.pub" "$work/upstream.pub" > "$work/authorized_keys"

cat > "$work/sshd_config" <<CFG
Port $sshd_port
ListenAddress 127.0.0.1
HostKey $work/host
PidFile none
AuthorizedKeysFile $work/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
PermitRootLogin prohibit-password
MaxStartups 200
CFG
/usr/sbin/sshd -D -e -f "$work/sshd_config" 2> "$work/sshd.log" &
pids+=($!)
until grep -q "Server listening" "$work/sshd.log" 2>/dev/null; do sleep 0.1; done

# start_walissh NAME [EXTRA_TOML]: starts a walissh in front of the sshd,
# sets $walissh_port and $walissh_pid. Every instance shares the upstream key.
start_walissh() {
    local name=$1 extra=${2:-}
    mkdir -p "$work/$name"
    cat > "$work/$name/walissh.toml" <<TOML
[server]
listen = ["127.0.0.1:0"]
state_dir = "$work/$name/state"
[upstream]
identity = "$work/upstream"
[[targets]]
name = "t"
host = "127.0.0.1"
port = $sshd_port
user = "$me"
[[users]]
name = "bench"
authorized_keys = ["$(cat "$work/user.pub")"]
targets = ["t"]
$extra
TOML
    RUST_LOG=info "$bin" serve --config "$work/$name/walissh.toml" 2> "$work/$name/walissh.log" &
    walissh_pid=$!
    pids+=($walissh_pid)
    until grep -q "listening addr=" "$work/$name/walissh.log" 2>/dev/null; do sleep 0.1; done
    walissh_port=$(sed -n 's/.*listening addr=127.0.0.1:\([0-9]*\).*/\1/p' "$work/$name/walissh.log" | head -1)
}

ssh_opts=(-F /dev/null -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
    -o LogLevel=ERROR -o BatchMode=yes -o IdentitiesOnly=yes -i "$work/user")
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
