"""The official MCP Python SDK (`mcp` on PyPI) against a running notevault.

Usage: python e2e.py URL MODE, where MODE is `legacy` (the initialize handshake) or
`auto` (server/discover, the stateless 2026-07-28 revision, falling back to the
handshake). Lists the tools, checks their annotations, calls them, and validates every
`structuredContent` against the tool's `outputSchema` with `jsonschema`. Exits non-zero
on the first failure; prints one line per mode on success.
"""

import asyncio
import sys

import jsonschema
from mcp.client.client import Client
from shared import check, checked_call

EXPECTED_VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28"}
READ_ONLY = {"search", "grep", "list_notes", "read_note", "list_folders", "list_revisions",
             "note_links", "list_tags", "aggregate_properties", "vault_summary"}


async def run(url: str, mode: str) -> int:
    checks = 0
    async with Client(url, mode=mode) as client:
        check(client.protocol_version == EXPECTED_VERSION[mode],
              f"{mode}: negotiated {client.protocol_version}")
        info = client.server_info
        check(info is not None and info.name == "notevault", f"{mode}: server info {info}")
        listing = await client.list_tools()
        tools = {t.name: t for t in listing.tools}
        check(READ_ONLY <= set(tools), f"{mode}: tools {sorted(tools)}")
        check("write_note" not in tools and "edit_note" not in tools,
              f"{mode}: open local mode offers no write tools")
        for tool in tools.values():
            check(tool.annotations is not None and tool.annotations.read_only_hint is True,
                  f"{tool.name}: readOnlyHint")
            check(tool.output_schema is not None and tool.output_schema.get("type") == "object",
                  f"{tool.name}: outputSchema")
            jsonschema.Draft202012Validator.check_schema(tool.output_schema)
            jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            check(len(tool.description or "") > 200, f"{tool.name}: description")
            checks += 1

        async def call(name, arguments):
            nonlocal checks
            checks += 1
            return await checked_call(client, tools, name, arguments)

        seq = (await call("vault_summary", {}))["committed_seq"]
        found = await call("search", {"q": "sourdough starter", "min_seq": seq})
        check(found["results"] and found["coverage"]["notes_searched"] > 0, f"search {found}")
        hit = found["results"][0]
        line = hit["lines"][0] if hit["lines"] else 1
        around = await call("read_note", {"note": hit["slug"], "offset": line, "limit": 3})
        check(around["lines"]["items"][0]["n"] == line, "read_note at a search hit")
        grep = await call("grep", {"pattern": "TODO", "case": "insensitive"})
        check(grep["lines_returned"] > 0 and grep["results"][0]["lines"][0]["n"] >= 1,
              f"grep {grep['coverage']}")
        await call("list_tags", {"order_by": "count desc"})
        await call("aggregate_properties", {"key": "status"})
        summary = await call("vault_summary", {})
        check(summary["notes"] > 0, f"vault_summary {summary}")

        listing = await call("list_notes", {"prefix": "projects/"})
        check(listing["coverage"]["notes_matched"] == len(listing["notes"]) > 0,
              f"list_notes coverage {listing['coverage']}")
        slug = listing["notes"][0]["slug"]
        read = await call("read_note", {"note": slug, "limit": 5})
        check(read["slug"] == slug and read["lines"]["items"][0]["n"] == 1, f"read_note {read}")
        check(len(read["lines"]["items"]) == min(5, read["lines"]["total"]), "read_note slice")
        if read["lines"]["next_offset"] is not None:
            more = await call("read_note", {"note": read["note_id"],
                                            "offset": read["lines"]["next_offset"], "limit": 2})
            check(more["lines"]["items"][0]["n"] == 6, f"read_note next slice {more['lines']}")
        page = await call("list_notes", {"page_size": 2})
        check(page["coverage"]["truncated"] and page["next_page_token"], "list_notes pages")
        await call("list_notes", {"filter": "tags:recipe"})
        folders = await call("list_folders", {})
        check(any(f["path"] == "projects" for f in folders["folders"]), "list_folders")
        await call("list_revisions", {"note": slug})
        await call("note_links", {"note": "Welcome"})

        error = await client.call_tool("read_note", {"note": "no-such-note"})
        check(error.is_error, "a missing note is a tool error")
        envelope = error.structured_content
        check(envelope["reason"] == "NOTE_NOT_FOUND" and envelope["hint"].startswith("List notes"),
              f"error envelope {envelope}")
        bad = await client.call_tool("read_note", {"note": slug, "limit": 0})
        check(bad.is_error and bad.structured_content["reason"] == "VALIDATION_FAILED",
              f"bad argument {bad}")
        checks += 2
    print(f"mcp e2e {mode}: {checks} checks passed against {url}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(run(sys.argv[1], sys.argv[2])))
