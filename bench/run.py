"""The measurements of bench/run (issue 7): walissh against direct ssh to
the same sshd and against OpenSSH as a jump host, in one run. bench/run
sets everything up (bench/lib.sh) and passes it here in the environment;
this prints the table and writes the JSON. See bench/run for the usage."""

import json
import math
import os
import pty
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import traceback
from subprocess import DEVNULL, PIPE

E = os.environ
WORK = E["WORK"]
BIN = E["BIN"]
ME = E["ME"]
SSHD_PORT = int(E["SSHD_PORT"])
JUMP_PORT, JUMP_PID = int(E["JUMP_PORT"]), int(E["JUMP_PID"])
W_PORT, W_PID, W_CONFIG = int(E["W_PORT"]), int(E["W_PID"]), E["W_CONFIG"]
OFF_PORT = int(E["OFF_PORT"])
RELAY_PORT, RELAY_PID = int(E["RELAY_PORT"]), int(E["RELAY_PID"])
CONSOLE_PORT, CONSOLE_WEB = int(E["CONSOLE_PORT"]), E["CONSOLE_WEB"]
CONSOLE_PW, CONSOLE_CONFIG = E["CONSOLE_PW"], E["CONSOLE_CONFIG"]
MEM_SSH = int(E["MEM_SSH_PORT"]), int(E["MEM_SSH_PID"]), E["MEM_SSH_CONFIG"]
MEM_LOCAL = int(E["MEM_LOCAL_PORT"]), int(E["MEM_LOCAL_PID"]), E["MEM_LOCAL_CONFIG"]
MODEL_PORT = int(E["MODEL_PORT"])
QUICK = E.get("QUICK") == "1"
JSON_PATH = E["JSON_PATH"]
ONLY = [s for s in E.get("ONLY", "").split(",") if s]
T_START = float(E["T_START"])

SSH = ["ssh", "-F", f"{WORK}/ssh_config"]
MiB = 1024 * 1024

# Sizes and sample counts: full run, --quick.
P = {
    "exec_mb": 256 if QUICK else 1024,
    "exec_runs": 1 if QUICK else 4,
    "pty_mb": 64 if QUICK else 256,
    "pty_runs": 1 if QUICK else 2,
    "keystrokes": 100 if QUICK else 200,
    "setups": 10 if QUICK else 30,
    "idle_ssh": 100,
    "idle_local": [100, 1000],
    "busy_sessions": 50,
    "busy_mb": 16 if QUICK else 64,
    "questions": 10 if QUICK else 30,
}

ROUTES = ("direct", "jump", "walissh")


def dest(route, port=None, target="t"):
    """ssh arguments that reach the target sshd by ROUTE."""
    if route == "direct":
        return ["-p", str(SSHD_PORT), f"{ME}@127.0.0.1"]
    if route == "relay":
        # The reference: a plain TCP relay (bench/relay.py) in walissh's
        # place, which only moves the bytes.
        return ["-p", str(RELAY_PORT), f"{ME}@127.0.0.1"]
    if route == "jump":
        return ["-J", f"{ME}@127.0.0.1:{JUMP_PORT}", "-p", str(SSHD_PORT), f"{ME}@127.0.0.1"]
    if route == "wjump":
        # walissh as the jump host, inspecting: its own server answers the
        # jump's channel, and reaches the target as `bench:t` does.
        return ["-J", f"bench@127.0.0.1:{W_PORT}", f"{ME}@{target}"]
    return ["-p", str(port or W_PORT), f"bench:{target}@127.0.0.1"]


def pct(xs, p):
    """The p-th percentile, nearest rank."""
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def elapsed():
    return time.time() - T_START


def progress(msg):
    print(f"  [{elapsed():5.0f}s] {msg}", file=sys.stderr, flush=True)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


# ---------------------------------------------------------------- rows

rows = []
failures = []


def row(section, metric, unit, direct=None, jump=None, walissh=None, ratio=None,
        budget=None, met=None, note=None, fmt=None, extra=None):
    r = {"section": section, "metric": metric, "unit": unit, "direct": direct,
         "jump": jump, "walissh": walissh, "ratio": ratio, "budget": budget,
         "met": met, "note": note}
    if extra:
        r.update(extra)
    r["_fmt"] = fmt or (lambda v: f"{v:.1f}")
    rows.append(r)
    return r


def ratio(w, d):
    return w / d if w is not None and d else None


# ---------------------------------------------------------------- exec

def exec_download(route, size_mb):
    """MiB/s of `head -c SIZE /dev/zero` read to the end: timed from the
    first byte to the end (set-up is its own row), and from the start."""
    t0 = time.perf_counter()
    p = subprocess.Popen(SSH + dest(route) + [f"head -c {size_mb}M /dev/zero"],
                         stdin=DEVNULL, stdout=PIPE)
    fd = p.stdout.fileno()
    n, first = 0, None
    buf = [bytearray(1 << 20)]   # read into, not allocated per read
    while True:
        k = os.readv(fd, buf)
        if not k:
            break
        if first is None:
            first = time.perf_counter()
        n += k
    t1 = time.perf_counter()
    p.wait()
    if n != size_mb * MiB:
        raise RuntimeError(f"{route}: short read, {n} bytes of {size_mb * MiB}")
    return size_mb / (t1 - first), size_mb / (t1 - t0)


def exec_upload(route, size_mb):
    """MiB/s of `head -c SIZE /dev/zero | ssh ... 'wc -c'` (wc reads what
    arrives as `cat > /dev/null` does, and says how much): head starts once
    the remote command has, and the time runs from there to wc's count; the
    time from the start is kept too."""
    t0 = time.perf_counter()
    p = subprocess.Popen(SSH + dest(route) + ["echo go; exec wc -c"],
                         stdin=PIPE, stdout=PIPE)
    line = p.stdout.readline()
    if line != b"go\n":
        raise RuntimeError(f"{route}: unexpected {line!r}")
    t1 = time.perf_counter()
    head = subprocess.Popen(["head", "-c", f"{size_mb}M", "/dev/zero"], stdout=p.stdin)
    p.stdin.close()
    count = p.stdout.read()
    t2 = time.perf_counter()
    head.wait()
    p.wait()
    if int(count.strip() or b"0") != size_mb * MiB:
        raise RuntimeError(f"{route}: the target counted {count!r}, not {size_mb * MiB}")
    return size_mb / (t2 - t1), size_mb / (t2 - t0)


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of PID."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        out += kids
        todo += kids
    return out


class JumpCpu:
    """CPU seconds used by the jump sshd's connection processes while
    running: they are polled every 20 ms, and each one's last reading
    counted (sshd's children are not reaped in a way that adds their time
    to the listener's, so it cannot be read off afterwards)."""

    def __enter__(self):
        self.seen, self.done = {}, threading.Event()
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()
        return self

    def poll(self):
        while not self.done.wait(0.02):
            for pid in descendants(JUMP_PID):
                try:
                    self.seen[pid] = cpu_seconds(pid)
                except OSError:
                    pass

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()

    def seconds(self):
        return sum(self.seen.values())


def bastion_run(route, fn, size):
    """FN's result for ROUTE, and the bastion's CPU seconds meanwhile:
    walissh's own, the plain relay's, or the jump sshd's connection (None
    for direct)."""
    if route in ("walissh", "relay"):
        pid = W_PID if route == "walissh" else RELAY_PID
        c0 = cpu_seconds(pid)
        v = fn(route, size)
        return v, cpu_seconds(pid) - c0
    if route == "jump":
        with JumpCpu() as cpu:
            v = fn(route, size)
        return v, cpu.seconds()
    return fn(route, size), None


def ciphers_cpu():
    """CPU seconds per GiB of the two ciphers walissh runs on each byte of
    these loads, at OpenSSL's speed on this machine (`openssl speed -evp`,
    32 KiB blocks): chacha20-poly1305, the client's (OpenSSH asks for it
    first), and AES-256-GCM, walissh's to the target. None without
    `openssl`."""
    total = 0.0
    for cipher in ("chacha20-poly1305", "aes-256-gcm"):
        try:
            out = subprocess.run(["openssl", "speed", "-evp", cipher, "-bytes", "32768",
                                  "-seconds", "1"], capture_output=True, text=True,
                                 timeout=60).stdout
            # The last line: the cipher's name, then thousands of bytes a second.
            kbps = float(out.strip().splitlines()[-1].split()[-1].rstrip("k"))
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            return None
        total += (1 << 30) / (kbps * 1000)
    return total


def bench_exec():
    size, runs = P["exec_mb"], P["exec_runs"]
    routes = ROUTES + ("relay",)
    ciphers = ciphers_cpu()
    for name, fn, label in (("download", exec_download, "exec download"),
                            ("upload", exec_upload, "exec upload")):
        best = {r: (0.0, 0.0) for r in routes}
        every = {r: [] for r in routes}
        cpu = {"jump": [], "walissh": [], "relay": []}
        for i in range(runs):
            for r in routes:  # interleaved, so drift hits every route alike
                v, used = bastion_run(r, fn, size)
                if r in cpu:
                    cpu[r].append(used * 1024 / size)
                progress(f"{label} {r} run {i + 1}: {v[0]:.1f} MiB/s")
                best[r] = max(best[r], v)
                every[r].append(v[0])
        what = f"head -c {size}M /dev/zero" if name == "download" else f"{size} MiB through stdin"
        row("exec", f"{label}, {what}, best of {runs}", "MiB/s",
            best["direct"][0], best["jump"][0], best["walissh"][0],
            ratio(best["walissh"][0], best["direct"][0]), ">= 0.95",
            ratio(best["walissh"][0], best["direct"][0]) >= 0.95,
            note=("timed from the first byte to the end" if name == "download" else
                  "timed from the remote `wc -c`'s start to its count")
            + "; JSON *_with_setup includes connect+auth",
            extra={f"{r}_with_setup": best[r][1] for r in routes})
        if runs > 1:
            med = {r: statistics.median(every[r]) for r in routes}
            row("exec", f"  same, median of {runs}", "MiB/s", med["direct"], med["jump"],
                med["walissh"], ratio(med["walissh"], med["direct"]),
                note="each route's runs in the JSON (*_runs)",
                extra={f"{r}_runs": every[r] for r in routes})
        row("exec", "  same, a plain TCP relay in walissh's place (reference)", "MiB/s",
            best["direct"][0], None, best["relay"][0],
            ratio(best["relay"][0], best["direct"][0]),
            note="bench/relay.py: moves the bytes and nothing else; what any program "
                 "in the path costs on this machine")
        j, w, rl = min(cpu["jump"]), min(cpu["walissh"]), min(cpu["relay"])
        row("exec", f"  bastion CPU per GiB, {label}, least of {runs}", "s", jump=j, walissh=w,
            budget="<= 0.8", met=w <= 0.8, fmt=lambda v: f"{v:.2f}",
            note=f"walissh / OpenSSH jump host: {w / j:.2f}; the jump host relays the client's "
                 "inner connection (decrypts once), walissh ends it (decrypts and encrypts)")
        row("exec", "    reference: the plain relay's CPU + the two ciphers at OpenSSL's speed", "s",
            walissh=rl + ciphers if ciphers is not None else None, fmt=lambda v: f"{v:.2f}",
            note=f"the relay {rl:.2f} s per GiB; chacha20-poly1305 + AES-256-GCM by "
                 + (f"`openssl speed -evp`: {ciphers:.2f} s per GiB" if ciphers is not None
                    else "`openssl speed`: not measured (no openssl)"),
            extra={"relay_cpu": rl, "ciphers_cpu": ciphers})


# ---------------------------------------------------------------- PTY

class Term:
    """An ssh client on a PTY of its own (80x24), as a person's terminal."""

    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            import fcntl, struct, termios
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
            os.execvp(argv[0], argv)
        self.buf = b""

    def send(self, b):
        os.write(self.fd, b if isinstance(b, bytes) else b.encode())

    def read_some(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return None
        try:
            return os.read(self.fd, 65536)
        except OSError:
            return b""

    def expect(self, needle, timeout=30):
        needle = needle.encode() if isinstance(needle, str) else needle
        end = time.monotonic() + timeout
        while needle not in self.buf:
            left = end - time.monotonic()
            got = self.read_some(max(0, left)) if left > 0 else None
            if not got:
                raise RuntimeError(f"timed out waiting for {needle!r}; got {self.buf[-300:]!r}")
            self.buf += got
        at = time.perf_counter()
        self.buf = self.buf[self.buf.index(needle) + len(needle):]
        return at

    def drain(self, quiet=0.05):
        while self.read_some(quiet):
            pass
        self.buf = b""

    def close(self):
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        os.close(self.fd)


def login(route):
    t = Term(SSH + ["-tt"] + dest(route))
    t.send("echo READY-$((6*7))\r")
    t.expect("READY-42")
    time.sleep(0.3)     # the prompt, and walissh's hooks, settle
    t.drain()
    return t


def keystrokes(t, n):
    """Round trips of single keystrokes at the prompt: write one byte to
    the client's terminal, time until its echo is read back; a Backspace
    (untimed) takes it away again."""
    out = []
    for i in range(n):
        c = b"abcdefghij"[i % 10:i % 10 + 1]
        t0 = time.perf_counter()
        t.send(c)
        t1 = t.expect(c, timeout=5)
        out.append(t1 - t0)
        t.send(b"\x7f")
        t.expect(b"\x08", timeout=5)
        t.drain(0.005)
        time.sleep(0.005)
    return out


def enter_to_output(t, n):
    """Enter that ends `echo` to its output (walissh: its shell hooks run)."""
    out = []
    for i in range(n):
        t.send(f"echo ECHO-{i}-$((1+1))")
        time.sleep(0.03)
        t0 = time.perf_counter()
        t.send("\r")
        out.append(t.expect(f"ECHO-{i}-2") - t0)
        time.sleep(0.02)
        t.drain(0.01)
    return out


def bench_latency():
    n = P["keystrokes"]
    ks, en = {}, {}
    for r in ROUTES:
        t = login(r)
        try:
            keystrokes(t, 10)       # warm-up
            ks[r] = keystrokes(t, n)
            en[r] = enter_to_output(t, max(10, n // 10))
        finally:
            t.close()
        progress(f"keystrokes {r}: p50 {statistics.median(ks[r]) * 1e3:.3f} ms, "
                 f"p99 {pct(ks[r], 99) * 1e3:.3f} ms")
    ms = lambda v: f"{v:.3f}"
    for p_name, f in (("p50", statistics.median), ("p99", lambda xs: pct(xs, 99))):
        d, j, w = (f(ks[r]) * 1e3 for r in ROUTES)
        budget, met = None, None
        if p_name == "p99":
            budget, met = "+< 1 ms", (w - d) < 1.0
        row("latency", f"keystroke echo {p_name} ({n} keys, PTY shell)", "ms",
            d, j, w, ratio(w, d), budget, met, fmt=ms,
            note=f"added by walissh: {w - d:+.3f} ms")
    d, j, w = (statistics.median(en[r]) * 1e3 for r in ROUTES)
    row("latency", f"Enter to `echo` output p50 ({len(en['direct'])} lines)", "ms",
        d, j, w, ratio(w, d), "+< 1 ms", (w - d) < 1.0, fmt=ms,
        note=f"added by walissh: {w - d:+.3f} ms (its bash hooks run per command, without a fork)")


# OpenSSH to OpenSSH negotiates sntrup761x25519-sha512, a post-quantum key
# exchange that costs tens of ms of CPU; walissh (russh) offers curve25519,
# on both of its hops. The like-for-like reference forces that on direct.
KEX = ["-o", "KexAlgorithms=curve25519-sha256"]


def bench_setup():
    n = P["setups"]
    res = {}
    routes = [(r, dest(r)) for r in ROUTES] + [("direct-kex", KEX + dest("direct"))]
    for r, args in routes:
        subprocess.run(SSH + args + ["true"], check=True)  # warm-up
        res[r] = []
    for _ in range(n):
        for r, args in routes:   # interleaved, so drift hits every route alike
            t0 = time.perf_counter()
            subprocess.run(SSH + args + ["true"], check=True, stdin=DEVNULL)
            res[r].append(time.perf_counter() - t0)
    for r, _ in routes:
        progress(f"set-up {r}: p50 {statistics.median(res[r]) * 1e3:.1f} ms")
    ms = lambda v: f"{v:.1f}"
    for p_name, f in (("p50", statistics.median), ("p99", lambda xs: pct(xs, 99))):
        d, j, w = (f(res[r]) * 1e3 for r in ROUTES)
        row("setup", f"connect + auth + `true` {p_name} ({n} runs)", "ms",
            d, j, w, ratio(w, d), fmt=ms,
            note=(f"p99 of {n} runs is their maximum" if p_name == "p99" else
                  "direct and -J negotiate sntrup761x25519 (OpenSSH's default); walissh curve25519"))
    for p_name, f in (("p50", statistics.median), ("p99", lambda xs: pct(xs, 99))):
        d, w = f(res["direct-kex"]) * 1e3, f(res["walissh"]) * 1e3
        row("setup", f"  same {p_name}, direct with walissh's kex (curve25519)", "ms",
            d, None, w, ratio(w, d), fmt=ms)


# A live view's reader, in a process of its own (a thread would share the
# interpreter with the PTY's reader, and fall behind with it).
VIEWER = r"""
import base64, os, signal, socket, sys
host, port, cookie, sid = sys.argv[1:5]
s = socket.create_connection((host, int(port)))
key = base64.b64encode(os.urandom(16)).decode()
s.sendall((f"GET /sessions/{sid}/watch HTTP/1.1\r\nHost: {host}:{port}\r\n"
           f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
           f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v2.asciicast\r\n"
           f"Cookie: {cookie}\r\n\r\n").encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(4096)
if not head.startswith(b"HTTP/1.1 101"):
    sys.exit(f"no live view: {head[:80]!r}")
n = 0
def done(*_):
    print(n, flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, done)
print("open", flush=True)
while True:
    k = s.recv(1 << 16)
    if not k:
        break
    n += len(k)
done()
"""


def console_viewer():
    """A live view of the one session open on the console instance, as a
    browser holds it: logs in, opens the WebSocket and reads (and drops)
    what it is sent. Returns its stop, which gives the bytes it read."""
    import http.client
    import urllib.parse
    host, port = CONSOLE_WEB.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    body = urllib.parse.urlencode({"user": "watcher", "password": CONSOLE_PW})
    c.request("POST", "/login", body, {"Content-Type": "application/x-www-form-urlencoded"})
    r = c.getresponse()
    r.read()
    cookie = r.getheader("Set-Cookie").split(";")[0]
    active = subprocess.run([BIN, "sessions", "--active", "--json", "-c", CONSOLE_CONFIG],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    sid = json.loads(active[-1])["id"]
    p = subprocess.Popen([sys.executable, "-c", VIEWER, host, port, cookie, sid],
                         stdout=PIPE, text=True)
    if p.stdout.readline().strip() != "open":
        raise RuntimeError("the live view did not open")

    def stop():
        p.terminate()
        out, _ = p.communicate(timeout=30)
        return int(out.split()[-1]) if out.split() else 0
    return stop


def pty_cat(route, path, size_mb, port=None, watched=False, command=None):
    """MiB/s of `cat PATH` (or COMMAND, which prints SIZE_MB MiB) in an
    interactive PTY shell, from the command to the end of its output
    (login excluded); with `watched`, a live view of the session on the
    console reads it all the while."""
    args = dest(route, port=port)
    p = subprocess.Popen(SSH + ["-tt"] + args, stdin=PIPE, stdout=PIPE, stderr=DEVNULL)
    fd = p.stdout.fileno()
    stop_viewer = None

    buf = bytearray(1 << 20)
    view = memoryview(buf)

    def until(needle, timeout):
        tail, n = b"", 0
        end = time.monotonic() + timeout
        while True:
            r, _, _ = select.select([fd], [], [], max(0, end - time.monotonic()))
            if not r:
                raise RuntimeError(f"{route}: timed out waiting for {needle!r}")
            k = os.readv(fd, [buf])
            if not k:
                raise RuntimeError(f"{route}: the session ended before {needle!r}")
            n += k
            # The needle may straddle two reads: keep the end of the last.
            tail = tail[-64:] + bytes(view[max(0, k - 4096):k])
            if needle in tail:
                return n

    try:
        p.stdin.write(b"echo READY-$((6*7))\n")
        p.stdin.flush()
        until(b"READY-42", 30)
        stop_viewer = console_viewer() if watched else None
        time.sleep(0.3)
        t0 = time.perf_counter()
        p.stdin.write(f"{command or 'cat ' + path}; echo DONE-$((6*7))\n".encode())
        p.stdin.flush()
        n = until(b"DONE-42", 600)
        t1 = time.perf_counter()
        if stop_viewer:
            progress(f"the live view had {stop_viewer() / MiB:.0f} MiB of events by the end")
        p.stdin.write(b"exit\n")
        p.stdin.flush()
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if n < size_mb * MiB:
        raise RuntimeError(f"{route}: {n} bytes of output for {size_mb} MiB")
    return size_mb / (t1 - t0)


def bench_pty():
    size, runs = P["pty_mb"], P["pty_runs"]
    path = f"{WORK}/big.log"
    line = b'127.0.0.1 - - [01/Jan/2025:00:00:00 +0000] "GET /index.html HTTP/1.1" 200 1234 "-" "Mozilla/5.0" 0.003\n'
    with open(path, "wb") as f:
        block = line * (MiB // len(line) + 1)
        for _ in range(size):
            f.write(block[:MiB])
    configs = [("direct", None), ("jump", None), ("walissh", None), ("off", OFF_PORT),
               ("console", CONSOLE_PORT), ("watched", CONSOLE_PORT)]
    best = {c: 0.0 for c, _ in configs}
    for i in range(runs):
        for c, port in configs:
            route = c if c in ROUTES else "walissh"
            v = pty_cat(route, path, size, port, watched=c == "watched")
            progress(f"pty cat {c} run {i + 1}: {v:.1f} MiB/s")
            best[c] = max(best[c], v)
    os.unlink(path)
    d = best["direct"]
    row("interactive", f"PTY `cat` of a {size} MiB log, best of {runs}", "MiB/s",
        d, best["jump"], best["walissh"], ratio(best["walissh"], d), ">= 0.8",
        ratio(best["walissh"], d) >= 0.8,
        note="walissh default: shell integration, screen model, recording on")
    row("interactive", "  same, walissh terminal model off (reference)", "MiB/s",
        d, None, best["off"], ratio(best["off"], d),
        note="shell_integration = false, screen_model = false; recording still on")
    row("interactive", "  same, web console on", "MiB/s",
        d, None, best["console"], ratio(best["console"], d),
        note="[web] listen set, nobody watching: compare with the walissh row")
    row("interactive", "  same, watched live in the console", "MiB/s",
        d, None, best["watched"], ratio(best["watched"], d),
        note="a live view (WebSocket) reads the session's recording as it is written")
    # A flood the target's CPU makes as fast as it can: base64 of random
    # bytes, 76 columns (4/3 of the input, plus a newline a line).
    flood_in = size * 3 // 4
    flood = f"head -c {flood_in}M /dev/urandom | base64 -w 76"
    flood_mb = flood_in * 4 / 3 * 77 / 76
    fl = {}
    for i in range(runs):
        for r in ("direct", "walissh", "relay"):
            v = pty_cat(r, None, flood_mb, command=flood)
            progress(f"pty base64 flood {r} run {i + 1}: {v:.1f} MiB/s")
            fl[r] = max(fl.get(r, 0.0), v)
    row("interactive", f"PTY `base64` flood, {flood_mb:.0f} MiB (CPU-bound), best of {runs}", "MiB/s",
        fl["direct"], None, fl["walissh"], ratio(fl["walissh"], fl["direct"]), ">= 0.9",
        ratio(fl["walissh"], fl["direct"]) >= 0.9,
        note="the target's base64, the client and walissh share the machine's cores")
    row("interactive", "  same, a plain TCP relay in walissh's place (reference)", "MiB/s",
        fl["direct"], None, fl["relay"], ratio(fl["relay"], fl["direct"]),
        note="bench/relay.py, as in the exec rows")


# ---------------------------------------------------------------- concurrency

def busy(route, n, size_mb, discard=False):
    """n concurrent exec sessions, each reading size_mb MiB. All n connect
    and log in first (each says `ready` on stderr), then all are told to go
    at once: the time is the data's alone, not key exchanges'. The output
    is read and counted through pipes, or with DISCARD left to ssh to write
    to /dev/null (then only the aggregate, and ssh's exit status)."""
    procs = []
    for i in range(n):
        procs.append(subprocess.Popen(
            SSH + dest(route) + [f"echo ready >&2; read go; exec head -c {size_mb}M /dev/zero"],
            stdin=PIPE, stdout=DEVNULL if discard else PIPE, stderr=PIPE))
    for p in procs:
        got = b""
        while len(got) < 6:
            b = os.read(p.stderr.fileno(), 6 - len(got))
            if not b:
                raise RuntimeError(f"{route}: a busy session ended before it was ready")
            got += b
        if got != b"ready\n":
            raise RuntimeError(f"{route}: unexpected {got!r}")
    t0 = time.perf_counter()
    for p in procs:
        p.stdin.write(b"go\n")
        p.stdin.close()
    if discard:
        if any(p.wait() != 0 for p in procs):
            raise RuntimeError(f"{route}: a busy session failed")
        t1 = time.perf_counter()
        return None, None, n * size_mb / (t1 - t0)
    fds = {p.stdout.fileno(): i for i, p in enumerate(procs)}
    got = {i: 0 for i in range(n)}
    end = {}
    open_fds = set(fds)
    buf = [bytearray(1 << 20)]
    while open_fds:
        r, _, _ = select.select(list(open_fds), [], [], 120)
        if not r:
            raise RuntimeError(f"{route}: busy sessions stalled")
        for fd in r:
            k = os.readv(fd, buf)
            i = fds[fd]
            if k:
                got[i] += k
            else:
                end[i] = time.perf_counter()
                open_fds.discard(fd)
    t1 = time.perf_counter()
    for p in procs:
        p.wait()
    short = [i for i in range(n) if got[i] != size_mb * MiB]
    if short:
        raise RuntimeError(f"{route}: {len(short)} busy sessions got short reads")
    per = [size_mb / (end[i] - t0) for i in range(n)]
    return statistics.median(per), min(per), n * size_mb / (t1 - t0)


class PeakRss:
    """Samples a process's RSS every 50 ms while in use."""

    def __init__(self, pid):
        self.pid, self.peak, self.done = pid, 0, threading.Event()

    def __enter__(self):
        def sample():
            while not self.done.wait(0.05):
                self.peak = max(self.peak, rss_kib(self.pid))
        self.th = threading.Thread(target=sample, daemon=True)
        self.th.start()
        return self

    def __exit__(self, *_):
        self.done.set()
        self.th.join()


def bench_busy():
    n, size = P["busy_sessions"], P["busy_mb"]
    res = {}
    before = rss_kib(W_PID)
    for r in ROUTES:
        if r == "walissh":
            with PeakRss(W_PID) as peak:
                res[r] = busy(r, n, size)
        else:
            res[r] = busy(r, n, size)
        progress(f"busy {r}: median {res[r][0]:.1f} MiB/s per session, aggregate {res[r][2]:.1f}")
    row("concurrency", f"{n} busy exec sessions x {size} MiB: per-session median", "MiB/s",
        *(res[r][0] for r in ROUTES), ratio(res["walissh"][0], res["direct"][0]),
        note="all logged in first, then started at once; timed from the start to each one's end; slowest in JSON",
        extra={f"{r}_slowest": res[r][1] for r in ROUTES})
    row("concurrency", f"{n} busy exec sessions: aggregate", "MiB/s",
        *(res[r][2] for r in ROUTES), ratio(res["walissh"][2], res["direct"][2]))
    dis = {r: busy(r, n, size, discard=True)[2] for r in ("direct", "walissh", "relay")}
    progress(f"busy, output discarded: direct {dis['direct']:.1f}, walissh {dis['walissh']:.1f}, "
             f"relay {dis['relay']:.1f} MiB/s")
    row("concurrency", "  same aggregate, output discarded (ssh > /dev/null)", "MiB/s",
        dis["direct"], None, dis["walissh"], ratio(dis["walissh"], dis["direct"]), ">= 0.9",
        ratio(dis["walissh"], dis["direct"]) >= 0.9,
        note="the ratio depends on how the output is consumed; see the JSON for both")
    row("concurrency", "  same, a plain TCP relay in walissh's place (reference)", "MiB/s",
        dis["direct"], None, dis["relay"], ratio(dis["relay"], dis["direct"]),
        note="bench/relay.py, as in the exec rows")
    row("concurrency", f"walissh RSS peak during the {n} busy sessions", "MiB",
        walissh=peak.peak / 1024, note=f"{before / 1024:.1f} MiB before")


def children(pid):
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        n += 1
            except (OSError, IndexError, ValueError):
                pass
    return n


def upstream_conns(port):
    """Established TCP connections to PORT on loopback (walissh's ends)."""
    n = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            if parts[3] == "01" and int(parts[2].split(":")[1], 16) == port:
                n += 1
    return n


def settle(pid, timeout=60):
    """Waits until walissh's RSS has not moved by more than 1% for 2 s."""
    end = time.monotonic() + timeout
    last = rss_kib(pid)
    while time.monotonic() < end:
        time.sleep(1)
        now = rss_kib(pid)
        if abs(now - last) <= last * 0.01:
            time.sleep(1)
            again = rss_kib(pid)
            if abs(again - now) <= now * 0.01:
                return again
            now = again
        last = now
    return rss_kib(pid)


def idle_sessions(inst, target, counts, ready):
    """Holds COUNTS idle PTY sessions open through one OpenSSH ControlMaster
    connection to walissh (one TCP connection, a channel per session, a
    small mux client process per session), opening them 50 at a time;
    READY(n) says when n sessions have reached the target. Returns the RSS
    (KiB) at 0 and at each count, and how many sessions stood at the end."""
    port, pid, _ = inst
    ctl = f"{WORK}/mux-{port}"
    base = SSH + ["-S", ctl, "-p", str(port), f"bench:{target}@127.0.0.1"]
    master = subprocess.Popen(SSH + ["-M", "-S", ctl, "-N", "-o", "ControlPersist=no",
                                     "-p", str(port), f"bench:{target}@127.0.0.1"],
                              stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL)
    # Every client's stdin is the same terminal, 80x24, never typed on: the
    # shells wait at their prompts, and each session asks for an 80x24 PTY
    # (with a pipe or a FIFO as stdin, ssh asks for 0x0, and walissh's
    # screen model would be 1x1).
    tty_master, hold = pty.openpty()
    import fcntl, struct, termios
    fcntl.ioctl(hold, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    clients = []
    result = {}
    try:
        end = time.monotonic() + 30
        while subprocess.run(base + ["-O", "check"], stderr=DEVNULL, stdout=DEVNULL).returncode:
            if time.monotonic() > end or master.poll() is not None:
                raise RuntimeError("the ControlMaster did not come up")
            time.sleep(0.1)
        time.sleep(0.5)
        result[0] = settle(pid)
        for count in counts:
            while len(clients) < count:
                batch = min(50, count - len(clients))
                for _ in range(batch):
                    clients.append(subprocess.Popen(base + ["-tt"], stdin=hold,
                                                    stdout=DEVNULL, stderr=DEVNULL))
                want = len(clients)
                end = time.monotonic() + 60
                while ready() < want:
                    if time.monotonic() > end:
                        break
                    time.sleep(0.1)
            time.sleep(2)   # every shell to its prompt
            result[count] = settle(pid)
            progress(f"{count} idle sessions ({target}): walissh RSS {result[count] / 1024:.1f} MiB, "
                     f"{ready()} up")
        standing = ready()
        alive = sum(1 for c in clients if c.poll() is None)
        return result, min(standing, alive)
    finally:
        subprocess.run(base + ["-O", "exit"], stderr=DEVNULL, stdout=DEVNULL)
        master.terminate()
        for c in clients:
            if c.poll() is None:
                c.terminate()
        for c in clients:
            c.wait()
        master.wait()
        os.close(hold)
        os.close(tty_master)


def bench_memory():
    kib = lambda v: f"{v:.0f}"
    n = P["idle_ssh"]
    res, standing = idle_sessions(MEM_SSH, "t", [n], lambda: upstream_conns(SSHD_PORT))
    row("concurrency", "walissh RSS, 0 sessions (fresh)", "MiB",
        walissh=res[0] / 1024, fmt=lambda v: f"{v:.1f}")
    per = (res[n] - res[0]) / n
    row("concurrency", f"RSS per idle PTY session, {n} sessions (sshd target)", "KiB/session",
        walissh=per, budget="< 1 MiB", met=per < 1024 and standing >= n, fmt=kib,
        note=f"{standing}/{n} up; RSS {res[n] / 1024:.1f} MiB",
        extra={"rss_kib": res, "standing": standing})
    counts = P["idle_local"]
    res, standing = idle_sessions(MEM_LOCAL, "l", counts, lambda: children(MEM_LOCAL[1]))
    for c in counts:
        per = (res[c] - res[0]) / c
        row("concurrency", f"RSS per idle PTY session, {c} sessions (local target)",
            "KiB/session", walissh=per, budget="< 1 MiB", met=per < 1024, fmt=kib,
            note=f"RSS {res[c] / 1024:.1f} MiB" + ("; a `kind = \"local\"` target: 1000 sshd sessions"
                                                   " do not fit" if c >= 1000 else ""),
            extra={"rss_kib": res[c], "rss0_kib": res[0]})
    top = counts[-1]
    row("concurrency", f"idle PTY sessions held at once (local target)", "sessions",
        walissh=standing, budget=">= 1000", met=standing >= 1000, fmt=lambda v: f"{v:.0f}",
        note="--quick opens fewer than 1000" if top < 1000 else None)


# ---------------------------------------------------------------- agent

def bench_agent():
    n = P["questions"]
    first_byte = []

    def model_server():
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", MODEL_PORT))
        srv.listen(16)
        while True:
            conn, _ = srv.accept()
            data = conn.recv(65536)
            first_byte.append(time.perf_counter())
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = int([l.split(b":")[1] for l in head.split(b"\r\n")
                          if l.lower().startswith(b"content-length")][0])
            while len(body) < length:
                body += conn.recv(65536)
            chunk = {"id": "x", "object": "chat.completion.chunk",
                     "choices": [{"index": 0, "delta": {"content": "ANSWERED"}}]}
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"connection: close\r\n\r\n"
                         + f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
            conn.close()

    threading.Thread(target=model_server, daemon=True).start()
    t = login("walissh")
    xs = []
    try:
        for i in range(n + 2):
            t.send(f"? question {i}")
            time.sleep(0.05)
            before = len(first_byte)
            t0 = time.perf_counter()
            t.send("\r")
            t.expect("ANSWERED")
            t.send(f"echo BACK-{i}-$((1+1))\r")
            t.expect(f"BACK-{i}-2")
            if i >= 2:   # two warm-ups
                xs.append(first_byte[before] - t0)
    finally:
        t.close()
    ms = lambda v: f"{v:.2f}"
    for p_name, f in (("p50", statistics.median), ("p99", lambda xs: pct(xs, 99))):
        row("agent", f"Enter on `?` line to first request byte, {p_name} ({n})", "ms",
            walissh=f(xs) * 1e3, fmt=ms, note="a scripted model server on loopback")


# ---------------------------------------------------------------- main

def bench_jump():
    """`ssh -J` through walissh (it ends the inner connection: recorded,
    audited) against `ssh -J` through OpenSSH (a blind relay), in one run:
    connect time and exec download."""
    n, size, runs = P["setups"], P["exec_mb"], P["exec_runs"]
    times = {"jump": [], "wjump": []}
    for r in times:
        subprocess.run(SSH + dest(r) + ["true"], check=True, stdin=DEVNULL)  # warm-up
    for _ in range(n):
        for r in times:  # interleaved, so drift hits both alike
            t0 = time.perf_counter()
            subprocess.run(SSH + dest(r) + ["true"], check=True, stdin=DEVNULL)
            times[r].append(time.perf_counter() - t0)
    j, w = (statistics.median(times[r]) * 1e3 for r in ("jump", "wjump"))
    row("jump", f"ssh -J: connect + auth + `true` p50 ({n} runs)", "ms", jump=j, walissh=w,
        ratio=w / j, fmt=lambda v: f"{v:.1f}",
        note="ssh -J column: OpenSSH as the jump host (blind); walissh column: walissh's jump "
             "(inspecting: two logins, one of them walissh's own to the target); ratio walissh / OpenSSH")
    best = {"jump": 0.0, "wjump": 0.0}
    for i in range(runs):
        for r in best:
            v, _ = exec_download(r, size)
            progress(f"jump download {r} run {i + 1}: {v:.1f} MiB/s")
            best[r] = max(best[r], v)
    row("jump", f"ssh -J: exec download, head -c {size}M /dev/zero, best of {runs}", "MiB/s",
        jump=best["jump"], walissh=best["wjump"], ratio=best["wjump"] / best["jump"],
        note="ratio walissh / OpenSSH; timed from the first byte")


SECTIONS = [("setup", bench_setup), ("latency", bench_latency), ("agent", bench_agent),
            ("exec", bench_exec), ("interactive", bench_pty), ("busy", bench_busy),
            ("memory", bench_memory), ("jump", bench_jump)]


def show(v, f):
    return "—" if v is None else f(v)


def table():
    head = ("metric", "direct", "ssh -J", "walissh", "w/direct", "budget", "met")
    lines = []
    body = []
    for r in rows:
        f = r["_fmt"]
        met = {True: "yes", False: "NO", None: ""}[r["met"]]
        body.append((f"{r['metric']} [{r['unit']}]", show(r["direct"], f), show(r["jump"], f),
                     show(r["walissh"], f), show(r["ratio"], lambda v: f"{v:.2f}"),
                     r["budget"] or "", met))
    w = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    fmt = lambda x: "  ".join(s.ljust(w[0]) if i == 0 else s.rjust(w[i]) for i, s in enumerate(x))
    lines.append(fmt(head))
    lines.append("  ".join("-" * n for n in w))
    section = None
    for r, x in zip(rows, body):
        if section is not None and r["section"] != section:
            lines.append("")
        section = r["section"]
        lines.append(fmt(x))
    notes = [f"  {r['metric'].strip()}: {r['note']}" for r in rows if r["note"]]
    return "\n".join(lines), notes


def others():
    """Builds and test runs on the machine besides this benchmark."""
    seen = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue
            if name in ("cargo", "rustc", "cc", "ld") or name.startswith("interop"):
                seen.add(name)
    return sorted(seen)


def main():
    load0 = os.getloadavg()
    busy0 = others()
    for name, fn in SECTIONS:
        if ONLY and name not in ONLY:
            continue
        progress(f"{name} ...")
        try:
            fn()
        except Exception as e:
            traceback.print_exc()
            failures.append(f"{name}: {e}")
            row(name, f"{name}: NOT MEASURED ({e})"[:110], "-", fmt=str)
    took = elapsed()
    text, notes = table()
    mode = "quick" if QUICK else "full"
    print()
    busy1 = others()
    print(f"walissh vs OpenSSH on loopback ({mode} run, {os.cpu_count()} cores, {took:.0f} s; "
          f"1-min load average {load0[0]:.2f} at the start; other work running: "
          f"{', '.join(sorted(set(busy0) | set(busy1))) or 'none seen'} at start/end)")
    print(text)
    print()
    print("Notes:")
    for n in notes:
        print(n)
    print("  ssh -J: OpenSSH as the jump host (a second sshd on loopback); w/direct: walissh / direct, same run")
    if failures:
        print("Could not measure: " + "; ".join(failures))
    doc = {
        "mode": mode, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "elapsed_s": took,
        "cores": os.cpu_count(), "loadavg_start": load0, "loadavg_end": os.getloadavg(),
        "other_work_start": busy0, "other_work_end": busy1,
        "ssh": subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip(),
        "params": P, "failures": failures,
        "rows": [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
    }
    with open(JSON_PATH, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"JSON: {JSON_PATH}")
    # Exit 1 only when a whole section could not be measured.
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
