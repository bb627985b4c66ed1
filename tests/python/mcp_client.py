"""A real MCP client (the official Python SDK, PyPI `mcp` 2.x) driving `cheng serve`.

Run by tests/all/serve.rs:

    python3 mcp_client.py SCENARIO --mode MODE (--stdio CMD... | --url URL --token TOKEN)

MODE is `legacy` (the initialize handshake at the SDK's newest handshake revision,
2025-11-25), `2025-06-18` (the handshake pinned to that revision) or `2026-07-28` (the
stateless revision). The scenario's observations are printed as one JSON object on the
last line of stdout; the Rust test asserts on them.
"""

import argparse
import json
import sys

import anyio
import httpx2
import mcp
import mcp.client.session
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("scenario")
    p.add_argument("--mode", default="legacy")
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("--answer", default="accept", help="what the elicitation callback answers")
    p.add_argument("--path", default="inside.txt")
    p.add_argument("--roots", help="declare the roots capability with these file:// URIs (comma-separated; '' = none)")
    p.add_argument("--then-roots", help="after the first call, change the roots to these and notify")
    p.add_argument("--stdio", nargs=argparse.REMAINDER)
    return p.parse_args()


def structured(result):
    """A result as the test reads it. An error carries no structured content: its text
    is the whole envelope (`error`, `error_kind`, `summary`, `terminal`)."""
    text = "".join(getattr(c, "text", "") for c in result.content)
    out = {"is_error": bool(result.is_error), "structured": result.structured_content, "text": text}
    if result.is_error:
        out["envelope"] = json.loads(text)
    return out


async def run(args):
    if args.mode == "2025-06-18":
        # The SDK proposes its newest handshake revision; pin the older one.
        mcp.client.session.LATEST_HANDSHAKE_VERSION = "2025-06-18"
    mode = "legacy" if args.mode in ("legacy", "2025-06-18") else args.mode
    if args.stdio:
        server = StdioServerParameters(command=args.stdio[0], args=args.stdio[1:])
    else:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        server = streamable_http_client(args.url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))

    seen = {"elicitations": [], "progress": []}

    async def elicit(context, params):
        seen["elicitations"].append(params.message)
        if args.answer == "accept":
            return mcp.types.ElicitResult(action="accept", content={"approve": True})
        if args.answer in ("run", "always"):
            return mcp.types.ElicitResult(action="accept", content={"approve": True, "scope": args.answer})
        if args.answer.startswith("message:"):
            return mcp.types.ElicitResult(
                action="accept", content={"approve": False, "message": args.answer[len("message:"):]}
            )
        return mcp.types.ElicitResult(action="decline")

    async def progress(progress, total, message):
        seen["progress"].append({"progress": progress, "message": message})

    roots = {"now": [u for u in (args.roots or "").split(",") if u]}

    async def list_roots(context):
        seen.setdefault("roots_asked", 0)
        seen["roots_asked"] += 1
        return mcp.types.ListRootsResult(roots=[mcp.types.Root(uri=u) for u in roots["now"]])

    extra = {"list_roots_callback": list_roots} if args.roots is not None else {}
    out = {}
    async with Client(server, mode=mode, elicitation_callback=elicit, **extra) as client:
        out["protocol_version"] = client.protocol_version
        if args.scenario == "tools":
            tools = (await client.list_tools()).tools
            out["tools"] = sorted(t.name for t in tools)
            out["annotations"] = {
                t.name: {
                    "read_only": t.annotations.read_only_hint if t.annotations else None,
                    "destructive": t.annotations.destructive_hint if t.annotations else None,
                    "title": t.title,
                    "has_output_schema": t.output_schema is not None,
                    "input_properties": sorted((t.input_schema or {}).get("properties", {}).keys()),
                }
                for t in tools
            }
        elif args.scenario == "read":
            out["read"] = structured(await client.call_tool("read_file", {"path": args.path}))
        elif args.scenario == "roots":
            # Which workspace the session got: read a file only one candidate holds.
            out["first"] = structured(await client.call_tool("read_file", {"path": args.path}))
            if args.then_roots is not None:
                roots["now"] = [u for u in args.then_roots.split(",") if u]
                await client.send_roots_list_changed()
                await anyio.sleep(0.3)
                out["second"] = structured(await client.call_tool("read_file", {"path": args.path}))
        elif args.scenario == "refusals":
            out["denied"] = structured(await client.call_tool("workspace_shell", {"command": "ls"}))
            out["bad_args"] = structured(await client.call_tool("read_file", {"nope": 1}))
            try:
                await client.call_tool("no_such_tool", {})
                out["unknown"] = "no error"
            except Exception as e:  # the SDK raises the JSON-RPC error
                out["unknown"] = str(e)
        elif args.scenario == "crash":
            out["crash"] = structured(await client.call_tool("evil__probe", {"action": "trap"}))
            out["after"] = structured(await client.call_tool("read_file", {"path": args.path}))
            out["flood"] = structured(await client.call_tool("evil__probe", {"action": "flood", "n": 4 << 20}))
            out["after_flood"] = structured(await client.call_tool("read_file", {"path": args.path}))
        elif args.scenario == "cancel":
            with anyio.move_on_after(2):
                await client.call_tool(
                    "workspace_shell", {"command": "sleep", "args": ["100.125"], "timeout_ms": 600000}
                )
            out["cancelled"] = True
            # The session goes on: a normal call after the cancelled one.
            out["after"] = structured(await client.call_tool("read_file", {"path": args.path}))
        elif args.scenario == "progress":
            out["result"] = structured(
                await client.call_tool(
                    "workspace_shell", {"command": "sleep", "args": ["3"]}, progress_callback=progress
                )
            )
        elif args.scenario == "mcp_echo":
            out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            out["echo"] = structured(await client.call_tool("every__echo", {"message": "through cheng serve"}))
        elif args.scenario == "approve":
            out["result"] = structured(await client.call_tool("workspace_shell", {"command": "echo", "args": ["approved"]}))
        elif args.scenario == "approve_twice":
            out["result"] = structured(await client.call_tool("workspace_shell", {"command": "echo", "args": ["approved"]}))
            out["again"] = structured(await client.call_tool("workspace_shell", {"command": "echo", "args": ["approved"]}))
        else:
            raise SystemExit(f"unknown scenario {args.scenario}")
    out.update(seen)
    print(json.dumps(out))


if __name__ == "__main__":
    args = parse()
    try:
        anyio.run(run, args)
    except Exception as e:
        print(json.dumps({"exception": f"{type(e).__name__}: {e}"}))
        sys.exit(1)
