"""Floods walissh with requests a logged-in client may repeat, as the
second hardening review did, then checks the connection still works.

Usage: paramiko_flood.py PORT LOGIN KEY KIND COUNT SIZE
KIND is one of:
  env      COUNT `env` requests for LC_X<i> with SIZE-byte values on one
           channel, then LANG=C.UTF-8 and LC_ALL=C, then `printenv` there;
  forward  COUNT `tcpip-forward` requests for a SIZE-byte host name;
  direct   COUNT `direct-tcpip` channel opens to a SIZE-byte host name;
  channels COUNT session channels, each sent one refused `env` request
           (LC_BAD<i>, SIZE bytes) and closed.
Prints the refusals it saw (`refused N`) and, last, the output of a
command run on a fresh channel afterwards.
"""
import socket
import sys

import paramiko


def main():
    port, login, key, kind, count, size = sys.argv[1:7]
    count, size = int(count), int(size)
    t = paramiko.Transport(socket.create_connection(("127.0.0.1", int(port))))
    t.start_client(timeout=30)
    t.auth_publickey(login, paramiko.Ed25519Key.from_private_key_file(key))
    refused = 0
    if kind == "env":
        chan = t.open_session(timeout=30)
        for i in range(count):
            chan.set_environment_variable("LC_X%d" % i, "x" * size)
        chan.set_environment_variable("LANG", "C.UTF-8")
        chan.set_environment_variable("LC_ALL", "C")
        chan.exec_command("printenv | grep -E '^(LANG|LC_)' | sort")
        print(chan.makefile().read().decode(), end="")
        chan.close()
    elif kind == "forward":
        for _ in range(count):
            try:
                t.request_port_forward("h" * size, 0)
            except paramiko.SSHException:
                refused += 1
    elif kind == "direct":
        for _ in range(count):
            try:
                t.open_channel("direct-tcpip", ("h" * size, 22), ("127.0.0.1", 0), timeout=30)
            except paramiko.ChannelException:
                refused += 1
    elif kind == "channels":
        for i in range(count):
            chan = t.open_session(timeout=30)
            chan.set_environment_variable("LC_BAD%d" % i, "x" * size)
            chan.close()
    else:
        sys.exit("unknown kind " + kind)
    print("refused", refused)
    chan = t.open_session(timeout=30)
    chan.exec_command("echo still-here")
    print(chan.makefile().read().decode(), end="")
    t.close()


if __name__ == "__main__":
    main()
