#!/usr/bin/env python3
"""An MCP stdio server that breaks on purpose, for walissh's fault tests.

It answers `initialize` and `tools/list` (one tool, `poke`, read-only) as a
server should, and then, on `tools/call`, does what its argument says:

    crash    exits at once, the call unanswered
    garbage  writes lines that are not JSON-RPC, then a reply to another id,
             and never answers the call

Usage: mcp_broken.py crash|garbage
"""

import json
import sys

MODE = sys.argv[1]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        request = json.loads(line)
    except ValueError:
        continue
    method = request.get("method")
    rid = request.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "broken", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [{
            "name": "poke", "description": "Pokes.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": True}}]}})
    elif method == "tools/call":
        if MODE == "crash":
            sys.exit(3)
        sys.stdout.write("this is not JSON\n\x1b[31m{{{\n")
        send({"jsonrpc": "2.0", "id": 987654, "result": {"content": []}})
        sys.stdout.flush()
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
