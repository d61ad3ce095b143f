# Shared set-up for the benchmarks: a release walissh in front of a
# throwaway sshd on loopback, both stopped on exit. Source it; it sets
# $work, $bin, $sshd_port, $walissh_port, $walissh_pid and ssh_opts.
# Needs sshd and ssh (Debian: openssh-server, openssh-client).

cargo build --release --quiet
bin=$PWD/target/release/walissh
work=$(mktemp -d)
cleanup() { kill "${sshd_pid:-}" "${walissh_pid:-}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
me=$(id -un)
ssh-keygen -q -t ed25519 -N '' -f "$work/host" -C host
ssh-keygen -q -t ed25519 -N '' -f "$work/user" -C user
mkdir -p /run/sshd
sshd_port=$(free_port)

cat > "$work/walissh.toml" <<TOML
[server]
listen = ["127.0.0.1:0"]
state_dir = "$work/state"
[[targets]]
name = "t"
host = "127.0.0.1"
port = $sshd_port
user = "$me"
[[users]]
name = "bench"
authorized_keys = ["$(cat "$work/user.pub")"]
targets = ["t"]
TOML
{ cat "$work/user.pub"; "$bin" pubkey --config "$work/walissh.toml"; } > "$work/authorized_keys"

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
CFG
/usr/sbin/sshd -D -e -f "$work/sshd_config" 2> "$work/sshd.log" &
sshd_pid=$!
RUST_LOG=info "$bin" serve --config "$work/walissh.toml" 2> "$work/walissh.log" &
walissh_pid=$!
until grep -q "Server listening" "$work/sshd.log" 2>/dev/null; do sleep 0.1; done
until grep -q "listening addr=" "$work/walissh.log" 2>/dev/null; do sleep 0.1; done
walissh_port=$(sed -n 's/.*listening addr=127.0.0.1:\([0-9]*\).*/\1/p' "$work/walissh.log" | head -1)

ssh_opts=(-F /dev/null -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
    -o LogLevel=ERROR -o BatchMode=yes -o IdentitiesOnly=yes -i "$work/user")
