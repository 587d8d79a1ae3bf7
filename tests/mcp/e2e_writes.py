"""The MCP write tools through the official MCP Python SDK (`mcp` on PyPI), with a bearer
token: usage `python e2e_writes.py URL MODE TOKEN` (MODE `legacy` or `auto`). Lists the
tools (the write tools are there, not read-only), writes a note with `write_note`, edits
it with `edit_note`, validates each `structuredContent` against the tool's `outputSchema`,
and checks a retried call replays. Prints one line on success; exits non-zero on the
first failure.
"""

import asyncio
import sys

import httpx2
import jsonschema
from mcp.client.client import Client
from shared import check, checked_call
from mcp.client.streamable_http import streamable_http_client


async def run(url: str, mode: str, token: str) -> int:
    checks = 0
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("write_note", "edit_note"):
            check(name in tools, f"{mode}: {name} in {sorted(tools)}")
            check(tools[name].annotations is None or tools[name].annotations.read_only_hint is not True,
                  f"{name}: not read-only")
            jsonschema.Draft202012Validator.check_schema(tools[name].input_schema)
            jsonschema.Draft202012Validator.check_schema(tools[name].output_schema)
            checks += 1

        async def call(name, arguments):
            nonlocal checks
            checks += 1
            return await checked_call(client, tools, name, arguments)

        slug = f"sdk/{mode}"
        args = {"note": slug, "content": "# Written by the SDK\n\nfirst line\n"}
        written = await call("write_note", args)
        check(written["status"] == "applied" and written["slug"] == slug, f"write_note {written}")
        again = await call("write_note", args)
        check(again == written, "a retried call replays its first answer")
        edited = await call("edit_note", {"note": slug, "version_id": written["version_id"],
                                          "old_string": "first line", "new_string": "edited line"})
        check(edited["status"] == "applied" and edited["version_id"] != written["version_id"],
              f"edit_note {edited}")
    print(f"mcp e2e writes {mode}: {checks} checks passed against {url}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(run(sys.argv[1], sys.argv[2], sys.argv[3])))
