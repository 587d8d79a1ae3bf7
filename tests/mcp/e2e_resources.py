"""Resources and prompts of `notevault mcp` through the official MCP Python SDK's stdio
client (the handshake era, where resources/subscribe lives): usage
`python e2e_resources.py TOKEN BIN ARG...`. Lists the notes as resources (every page),
reads one as markdown, lists the template, subscribes to a note and waits for
notifications/resources/updated after `append_note` changes it, then lists and gets
every prompt. Prints one line on success; exits non-zero on the first failure.
"""

import asyncio
import sys
import warnings

import anyio
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from shared import check


async def run(token: str, binary: str, args: list[str]) -> int:
    warnings.simplefilter("ignore")
    checks = 0
    updated = []
    arrived = anyio.Event()

    async def handler(message):
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            updated.append(str(root.params.uri))
            arrived.set()

    server = StdioServerParameters(command=binary, args=args,
                                   env={"NOTEVAULT_TOKEN": token, "NOTEVAULT_LOG": "warn"})
    async with Client(stdio_client(server), mode="legacy", message_handler=handler) as client:
        uris, cursor = [], None
        while True:
            page = await client.list_resources(cursor=cursor)
            uris += [str(r.uri) for r in page.resources]
            for r in page.resources:
                check(r.mime_type == "text/markdown", f"{r}")
            cursor = page.next_cursor
            if not cursor:
                break
        check("note://Inbox" in uris and len(uris) > 10, f"resources {uris}")
        checks += 1
        read = await client.read_resource("note://Inbox")
        text = read.contents[0].text
        check(text.startswith("# Inbox\n"), f"read {text[:80]}")
        checks += 1
        templates = await client.list_resource_templates()
        check(templates.resource_templates[0].uri_template == "note://{+slug}", f"{templates}")
        checks += 1

        await client.subscribe_resource("note://Inbox")
        result = await client.call_tool("append_note", {"note": "Inbox", "content": "- heard"})
        check(not result.is_error, f"append_note {result}")
        with anyio.fail_after(10):
            await arrived.wait()
        check(updated == ["note://Inbox"], f"updated {updated}")
        checks += 1
        await client.unsubscribe_resource("note://Inbox")

        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        arguments = {"find_notes": {"topic": "sourdough"}, "changes_since": {"since": "2026-11-01"},
                     "tidy_note": {"note": "Inbox"}}
        check(set(prompts) == set(arguments), f"prompts {sorted(prompts)}")
        for name, given in arguments.items():
            got = await client.get_prompt(name, given)
            said = got.messages[0].content.text
            check(all(v in said for v in given.values()), f"{name}: {said}")
            checks += 1
    print(f"mcp e2e resources: {checks} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(run(sys.argv[1], sys.argv[2], sys.argv[3:])))
