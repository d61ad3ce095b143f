"""A plain TCP relay, the reference bench/run measures walissh against:
what any program in the bastion's place costs on this machine when it
only moves the bytes (the kernel's socket copies, a read and a write per
chunk), without decrypting, encrypting or recording them. Each accepted
connection is joined to the target's port, one thread per direction,
reading into a buffer of its own and writing it out (no splice: walissh
has to see the bytes, so the fair floor does too).

Usage: python3 relay.py LISTEN_PORT TARGET_PORT (on 127.0.0.1). Prints
`listening` once it accepts; runs until killed."""

import socket
import sys
import threading

CHUNK = 256 * 1024


def pump(src, dst):
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    try:
        while True:
            n = src.recv_into(buf)
            if n == 0:
                break
            dst.sendall(view[:n])
    except OSError:
        pass
    finally:
        # The other direction may still have bytes to carry: half-close.
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def join(client, target_port):
    try:
        upstream = socket.create_connection(("127.0.0.1", target_port))
    except OSError:
        client.close()
        return
    for s in (client, upstream):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ways = [threading.Thread(target=pump, args=(a, b), daemon=True)
            for a, b in ((client, upstream), (upstream, client))]
    for w in ways:
        w.start()
    for w in ways:
        w.join()
    client.close()
    upstream.close()


def main():
    listen_port, target_port = int(sys.argv[1]), int(sys.argv[2])
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", listen_port))
    srv.listen(256)
    print("listening", flush=True)
    while True:
        client, _ = srv.accept()
        threading.Thread(target=join, args=(client, target_port), daemon=True).start()


if __name__ == "__main__":
    main()
