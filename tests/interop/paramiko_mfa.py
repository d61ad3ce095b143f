"""Logs in to walissh with paramiko, a password (or a key) then a TOTP
code at the keyboard-interactive prompt, as Fabric and Ansible's paramiko
connection do, and runs one command.

Usage: paramiko_mfa.py PORT LOGIN SECRET (--password PW | --key FILE) COMMAND
The code is oathtool's for SECRET, computed when the prompt comes.
Prints the command's output; exits 1 when a step is refused.
"""
import argparse
import socket
import subprocess
import sys

import paramiko


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("login")
    p.add_argument("secret")
    p.add_argument("--password")
    p.add_argument("--key")
    p.add_argument("command")
    a = p.parse_args()

    t = paramiko.Transport(socket.create_connection(("127.0.0.1", a.port)))
    t.start_client(timeout=20)
    if a.password is not None:
        remaining = t.auth_password(a.login, a.password)
    else:
        remaining = t.auth_publickey(a.login, paramiko.Ed25519Key.from_private_key_file(a.key))
    if t.is_authenticated():
        print("one factor was enough", file=sys.stderr)
        sys.exit(1)
    print("partial:", ",".join(remaining), file=sys.stderr)

    def answer(title, instructions, prompts):
        code = subprocess.run(["oathtool", "--totp", "-b", a.secret],
                              capture_output=True, text=True, check=True).stdout.strip()
        return [code if "code" in text.lower() else "" for text, _echo in prompts]

    t.auth_interactive(a.login, answer)
    if not t.is_authenticated():
        sys.exit(1)
    ch = t.open_session()
    ch.exec_command(a.command)
    out = b""
    while True:
        data = ch.recv(65536)
        if not data:
            break
        out += data
    sys.stdout.write(out.decode())
    sys.exit(ch.recv_exit_status())


if __name__ == "__main__":
    main()
