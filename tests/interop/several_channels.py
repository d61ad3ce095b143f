"""One SSH connection, several channels in turn, as automation libraries
use it: asyncssh (`--lib asyncssh`) or paramiko (`--lib paramiko`) runs
three commands and an SFTP transfer over one connection to
LOGIN@127.0.0.1:PORT with the key KEY, and prints one JSON report.

Usage: several_channels.py --lib asyncssh|paramiko PORT LOGIN KEY FILE"""

import asyncio
import json
import sys


def with_paramiko(port, login, key, path):
    import paramiko
    c = paramiko.SSHClient()
    c.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    c.connect("127.0.0.1", port=port, username=login, key_filename=key,
              allow_agent=False, look_for_keys=False)
    out = []
    for i in range(3):
        _, stdout, _ = c.exec_command(f"echo RUN-{i}")
        out.append(stdout.read().decode().strip())
    sftp = c.open_sftp()
    with sftp.open(path, "w") as f:
        f.write("over sftp\n")
    with sftp.open(path) as f:
        back = f.read().decode()
    sftp.close()
    _, stdout, _ = c.exec_command("echo AFTER")
    out.append(stdout.read().decode().strip())
    c.close()
    return {"runs": out, "sftp": back}


async def with_asyncssh(port, login, key, path):
    import asyncssh
    async with asyncssh.connect("127.0.0.1", port=port, username=login,
                                client_keys=[key], known_hosts=None,
                                agent_path=None) as conn:
        out = []
        for i in range(3):
            r = await conn.run(f"echo RUN-{i}", check=True)
            out.append(r.stdout.strip())
        async with conn.start_sftp_client() as sftp:
            async with sftp.open(path, "w") as f:
                await f.write("over sftp\n")
            async with sftp.open(path) as f:
                back = await f.read()
        r = await conn.run("echo AFTER", check=True)
        out.append(r.stdout.strip())
        return {"runs": out, "sftp": back}


def main():
    import os
    if os.environ.get("SEVERAL_DEBUG"):
        import logging
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
        import asyncssh
        asyncssh.set_debug_level(2)
    args = sys.argv[1:]
    lib = args[1]
    port, login, key, path = int(args[2]), args[3], args[4], args[5]
    try:
        if lib == "asyncssh":
            report = asyncio.run(with_asyncssh(port, login, key, path))
        else:
            report = with_paramiko(port, login, key, path)
    except Exception as e:  # the report says what failed
        report = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(report))


main()
