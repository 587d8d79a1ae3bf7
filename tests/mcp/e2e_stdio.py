"""`notevault mcp` through the official MCP Python SDK's stdio client: usage
`python e2e_stdio.py MODE TOKEN BIN ARG...` (MODE `legacy` or `auto`). Launches
`BIN ARG...` (`notevault mcp VAULT ...`) with the token in NOTEVAULT_TOKEN, lists the tools (the write tools are
there), searches, reads a hit, writes a note with `write_note`, validating each
`structuredContent` against the tool's `outputSchema`. Prints one line on success; exits
non-zero on the first failure.
"""

import asyncio
import sys

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from shared import check, checked_call


async def run(mode: str, token: str, binary: str, args: list[str]) -> int:
    checks = 0
    server = StdioServerParameters(command=binary, args=args,
                                   env={"NOTEVAULT_TOKEN": token, "NOTEVAULT_LOG": "warn"})
    async with Client(stdio_client(server), mode=mode) as client:
        info = client.server_info
        check(info is not None and info.name == "notevault", f"{mode}: server info {info}")
        tools = {t.name: t for t in (await client.list_tools()).tools}
        check({"search", "read_note", "write_note"} <= set(tools), f"{mode}: {sorted(tools)}")

        async def call(name, arguments):
            nonlocal checks
            checks += 1
            return await checked_call(client, tools, name, arguments)

        seq = (await call("vault_summary", {}))["committed_seq"]
        found = await call("search", {"q": "sourdough starter", "min_seq": seq})
        check(found["results"], f"search {found}")
        hit = found["results"][0]
        read = await call("read_note", {"note": hit["slug"], "limit": 3})
        check(read["lines"]["items"][0]["n"] == 1, f"read_note {read}")
        slug = f"stdio/{mode}"
        written = await call("write_note", {"note": slug, "content": "# Over stdio\n"})
        check(written["status"] == "applied" and written["slug"] == slug, f"write_note {written}")
    print(f"mcp e2e stdio {mode}: {checks} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(run(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])))
