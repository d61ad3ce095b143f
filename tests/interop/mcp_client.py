#!/usr/bin/env python3
"""Drive an MCP server over stdio with the official Python SDK (`pip install mcp`).

Usage:
    mcp_client.py [--call NAME JSON] [--elicit accept|decline|none]
                  [--elicit-content JSON] [--timeout SECONDS] -- COMMAND [ARGS...]

Example:
    python3 mcp_client.py --call run_command '{"command":"echo hi"}' \
        -- ssh -F cfg -s alice:web1@host mcp

The command after `--` is spawned with the SDK's stdio client
(`mcp.client.stdio.stdio_client` + `StdioServerParameters`), inheriting this
process's whole environment. The session initializes with clientInfo name
"walissh-test", lists tools, optionally calls one tool, then prints ONE JSON
object on stdout:

    {"server": "<serverInfo.name>",
     "tools": ["<tool name>", ...],
     "result": {"isError": bool, "text": "<text content joined by newlines>"} | null,
     "elicitations": ["<message of each elicitation/create received>", ...],
     "resources": {"<uri>": "<text>", ...} | null   (with --resources)}

If the tool call is answered with a JSON-RPC error instead of a result,
"result" is {"isError": true, "text": "<error message>", "errorCode": <code>}.

--elicit none (default) does not advertise the elicitation capability;
accept/decline advertise it and answer every elicitation/create that way
(accept sends --elicit-content, or content built from the requested schema's
defaults). The server's stderr goes to this process's stderr.

Exit status: 0 when the session worked (even if the tool reported an error);
2 when the connection itself failed (spawn, initialize, list, timeout), with
{"error": "..."} printed on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
from mcp import types
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

CLIENT_NAME = "walissh-test"


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        sys.stderr.write("usage: mcp_client.py [options] -- COMMAND [ARGS...]\n")
        sys.exit(64)
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1 :]
    if not command:
        sys.stderr.write("mcp_client.py: no command after --\n")
        sys.exit(64)
    p = argparse.ArgumentParser(prog="mcp_client.py")
    p.add_argument("--call", nargs=2, metavar=("NAME", "JSON"), help="call tool NAME with JSON arguments")
    p.add_argument("--elicit", choices=("accept", "decline", "none"), default="none")
    p.add_argument("--elicit-content", metavar="JSON", help="content sent when accepting an elicitation")
    p.add_argument("--parallel", type=int, default=1, help="make the call this many times at once")
    p.add_argument("--wait-for", metavar="FILE", help="after listing the tools, wait until FILE exists")
    p.add_argument("--resources", action="store_true", help="list the resources and read each")
    p.add_argument("--timeout", type=float, default=60.0, help="overall deadline in seconds (default 60)")
    return p.parse_args(opts), command


def placeholder(prop: dict[str, Any]) -> Any:
    if "default" in prop:
        return prop["default"]
    kind = prop.get("type")
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return prop.get("minimum", 1)
    if kind == "array":
        items = prop.get("items", {})
        choices = items.get("enum") or [c.get("const") for c in items.get("anyOf", [])]
        return choices[:1]
    if "enum" in prop:
        return prop["enum"][0]
    if "oneOf" in prop:
        return prop["oneOf"][0].get("const")
    fmt = prop.get("format")
    if fmt == "email":
        return "walissh-test@example.com"
    if fmt == "uri":
        return "https://example.com/"
    if fmt == "date":
        return "2000-01-01"
    if fmt == "date-time":
        return "2000-01-01T00:00:00Z"
    return CLIENT_NAME


def content_for(params: types.ElicitRequestParams) -> dict[str, Any] | None:
    schema = getattr(params, "requested_schema", None)
    if schema is None:  # URL-mode elicitation carries no content
        return None
    if hasattr(schema, "model_dump"):
        schema = schema.model_dump(by_alias=True, exclude_none=True)
    props = schema.get("properties") or {}
    return {name: placeholder(prop) for name, prop in props.items()}


# Every call's result, in the order they came: kept by main on a timeout.
results: list[dict[str, Any]] = []


async def run(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    elicitations: list[str] = []

    async def on_elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        elicitations.append(params.message)
        if args.elicit == "decline":
            return types.ElicitResult(action="decline")
        if args.elicit_content is not None:
            content = json.loads(args.elicit_content)
        else:
            content = content_for(params)
        return types.ElicitResult(action="accept", content=content)

    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    call_name, call_args = (args.call[0], json.loads(args.call[1])) if args.call else (None, None)

    async with stdio_client(server) as (read, write):
        async with ClientSession(
            read,
            write,
            client_info=types.Implementation(name=CLIENT_NAME, version="0.1.0"),
            # Passing a callback is what makes the SDK advertise the capability.
            elicitation_callback=None if args.elicit == "none" else on_elicit,
        ) as session:
            init = await session.initialize()
            tools: list[str] = []
            cursor = None
            while True:
                listed = await session.list_tools(
                    params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                tools.extend(t.name for t in listed.tools)
                cursor = listed.next_cursor
                if not cursor:
                    break
            if args.wait_for:
                while not os.path.exists(args.wait_for):
                    await anyio.sleep(0.05)
            result = None
            if call_name is not None:

                async def one() -> None:
                    try:
                        res = await session.call_tool(call_name, call_args)
                        text = "\n".join(c.text for c in res.content if isinstance(c, types.TextContent))
                        results.append({"isError": bool(res.is_error), "text": text})
                    except MCPError as e:
                        results.append({"isError": True, "text": e.message, "errorCode": e.code})

                async with anyio.create_task_group() as group:
                    for _ in range(args.parallel):
                        group.start_soon(one)
                result = results[0]
            resources = None
            if args.resources:
                resources = {}
                for r in (await session.list_resources()).resources:
                    read = await session.read_resource(r.uri)
                    resources[str(r.uri)] = "\n".join(getattr(c, "text", "") for c in read.contents)
            return {
                "resources": resources,
                "server": init.server_info.name,
                "tools": tools,
                "result": result,
                "elicitations": elicitations,
                "results": results,
            }


def main() -> int:
    args, command = parse_args(sys.argv[1:])

    async def guarded() -> dict[str, Any]:
        with anyio.fail_after(args.timeout):
            return await run(args, command)

    try:
        out = anyio.run(guarded)
    except BaseException as e:  # noqa: BLE001 - any failure here is a failed connection
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        if isinstance(e, BaseExceptionGroup):
            leaves = list(_leaves(e))
            e = leaves[0] if leaves else e
        msg = "timed out" if isinstance(e, TimeoutError) else f"{type(e).__name__}: {e}"
        print(json.dumps({"error": msg, "results": results}))
        sys.stdout.flush()
        return 2
    print(json.dumps(out))
    sys.stdout.flush()
    return 0


def _leaves(group: BaseExceptionGroup):
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from _leaves(e)
        else:
            yield e


if __name__ == "__main__":
    sys.exit(main())
