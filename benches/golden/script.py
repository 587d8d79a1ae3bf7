"""The fixed, ordered list of requests `golden.py record` sends, in three runs:

- `open`: open local mode (rate limits off): reads, lists, searches, grep, tags,
  properties, links, folders, revisions, attachments, sync, MCP, every kind of write with
  fixed `Idempotency-Key` values (replays and conflicting reuse included), review, errors;
- `auth`: auth required with static tokens of each kind: the 401/403 envelopes and
  `WWW-Authenticate`, permissions, MCP's write tools for a writing token;
- `limits`: a write budget and a write rate limit (the 429s and `Retry-After`).

Every write is followed by an unrecorded wait until the index and history have caught up,
so that what a later read sees never depends on timing. Change this file only together
with a new baseline recording (the request lines are compared too).
"""

import json
import os
import urllib.parse

OPEN = """
rate_limit_read_per_minute = 0
rate_limit_write_per_minute = 0
"""

READER, WRITER, REVIEWER, PAT, PAT_WRITER, ELSEWHERE = (
    "golden-reader-0123456789abcdef", "golden-writer-0123456789abcdef",
    "golden-reviewer-0123456789abcdef", "golden-pat-0123456789abcdef",
    "golden-patw-0123456789abcdef", "golden-elsewhere-0123456789abcdef")

AUTH = OPEN + f"""
auth_required = true

[[static_tokens]]
token = "{READER}"
permissions = []

[[static_tokens]]
token = "{WRITER}"
permissions = ["notes.write"]

[[static_tokens]]
token = "{REVIEWER}"
permissions = ["notes.write", "notes.review"]

[[static_tokens]]
token = "{PAT}"
kind = "pat"
permissions = []

[[static_tokens]]
token = "{PAT_WRITER}"
kind = "pat"
permissions = ["notes.write"]

[[static_tokens]]
token = "{ELSEWHERE}"
permissions = ["notes.write"]
vault_id = "some-other-vault"
"""

LIMITS = """
rate_limit_read_per_minute = 0
rate_limit_write_per_minute = 4
"""

q = urllib.parse.quote


def enc(slug):
    return q(slug, safe="")


def qs(**params):
    return urllib.parse.urlencode(params, quote_via=urllib.parse.quote)


def vault_notes(d):
    """Every note's slug of the copied vault, sorted (deterministic for one corpus)."""
    out = []
    for root, dirs, files in os.walk(d.vault):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for f in files:
            if f.endswith(".md") and not f.startswith("."):
                rel = os.path.relpath(os.path.join(root, f), d.vault)
                out.append(rel[:-3])
    return sorted(out)


EXAMPLE = ["Inbox", "Welcome", "daily/2026-11-19", "daily/2026-11-20", "daily/2026-11-21",
           "guides/reading-with-curl", "guides/safe-edits", "guides/search-and-filter",
           "people/2026-11-18 book club", "people/Zoë", "people/marcus", "projects/Garden shed",
           "projects/home-network", "projects/roadmap", "reading/Thinking in Systems",
           "reading/how-to-take-smart-notes", "reading/reading-list",
           "reading/the-design-of-everyday-things", "recipes/chana-masala",
           "recipes/overnight-oats", "recipes/sourdough", "scratchpad", "travel/lisbon-spring-2027",
           "travel/packing-list"]

SEARCHES = [
    "sourdough", "sourdough starter", "Lisbon", "leverage points", "mitre saw", "cinnamon",
    "\"stretch and fold\"", "\"book club\"", "sour*", "lis*", "title:sourdough",
    "tags:recipe", "headings:timeline", "router firmware", "Zoë", "zoe", "Cais do Sodré",
    "shed -garden", "+shed +floor", "garden OR kitchen", "the", "a", "xyzzy-not-there",
    "powershell", "Get-ChildItem", "git rebase", "vim", "docker run", "dendron", "schema",
    "markdown links", "postgres index", "python list comprehension", "tar", "curl",
    "systems thinking", "notes", "2026", "TODO", "#todo", "Marcus", "path:recipes",
    "\"unterminated", "((", "title:", "-", "*", "ünïcödé", "日本語", "emoji 🎉",
]

FILTERS = [
    'tags:"project/active"', 'tags:"reading/book" AND frontmatter.rating >= 5',
    'status = "done"', 'status = "draft"', 'folder = "recipes"',
    'title = "Weekend Sourdough Loaf"', 'frontmatter.author = "Don Norman"', 'tags:recipe',
    'NOT status = "active"', 'status = "done" OR status = "draft"', 'path:"corpus/til"',
    'folder = "corpus/til"', 'links_to = "recipes/sourdough"', 'linked_from = "Welcome"',
    'orphan = true', 'created_at > "2020-01-01"', 'updated_at < "2000-01-01"',
    'visibility = "standard"', 'slug = "Inbox"', 'frontmatter.rating > 3',
    # Mistakes: each an INVALID_FILTER with its position.
    'status = ', 'nosuchfield = 1', 'tags:(', '"unterminated', 'status = "done" AND',
    'frontmatter. = 1', 'rating >>= 2',
]


def reads(d, slugs, deep=True):
    for slug in slugs:
        d.call("GET", f"/v1/notes/{enc(slug)}")
        if deep:
            d.call("GET", f"/v1/notes/{enc(slug)}?offset=3&limit=4")
            d.call("GET", f"/v1/notes/{enc(slug)}/raw")


def list_pages(d, params, pages=40):
    """Every page of a listing, following its tokens."""
    d.ctx["page"] = None
    first = True
    for _ in range(pages):
        query = dict(params)
        path = "/v1/notes?" + qs(**query)
        if not first:
            path += "&page_token=@{ctx:page}"
        ans = d.call("GET", path, save={"page": lambda j: j["next_page_token"]})
        first = False
        if not d.ctx.get("page") or ans is None:
            return


def contract(d):
    d.call("GET", "/openapi.json")
    d.call("GET", "/.well-known/oauth-protected-resource")
    d.call("GET", "/.well-known/oauth-protected-resource/mcp")
    d.call("GET", "/v1/vault")
    d.call("GET", "/v1/vault/write-settings")
    d.call("GET", "/v1/sync/e2ee")


def note_reads(d, corpus):
    reads(d, EXAMPLE)
    reads(d, corpus)
    # The same note by other spellings: raw slash, its note id, lower case, with .md.
    d.call("GET", "/v1/notes/recipes/sourdough?limit=3")
    d.call("GET", "/v1/notes/recipes%2fsourdough?limit=3")
    d.call("GET", "/v1/notes/recipes/sourdough.md?limit=3")
    d.call("GET", "/v1/notes/Recipes%2FSourdough?limit=3")
    d.call("GET", "/v1/notes/people%2FZo%C3%AB?limit=2")
    d.call("GET", "/v1/notes/people/Zoe%CC%88?limit=2")  # decomposed ë
    d.call("GET", "/v1/notes/people%2F2026-11-18%20book%20club?limit=2")
    d.call("GET", "/v1/notes/Welcome?limit=1", save={"welcome_id": lambda j: j["note_id"]})
    d.call("GET", "/v1/notes/@{ctx:welcome_id}?offset=10&limit=2")
    d.call("GET", "/v1/notes/@{ctx:welcome_id}/raw")
    for params in ["offset=1&limit=1", "offset=80&limit=10", "offset=82", "offset=83",
                   "offset=1000", "limit=500", "limit=501", "limit=0", "offset=0", "offset=-1",
                   "offset=abc", "limit=", "limit=2&limit=3", "lines=1-3", "offset=2&limit=2&x=1",
                   "offset=1.5"]:
        d.call("GET", f"/v1/notes/Welcome?{params}")
    for bad in ["no-such-note", "daily/2026-11-22", "..%2FWelcome", "%2E%2E/%2E%2E/etc/passwd",
                "daily/../Welcome", "%2Fetc%2Fpasswd", ".notevault%2Fmeta", "Welcome%00",
                "a%ZZ", "attachments/diagram.png", "daily", "%20", "con", "x" * 300]:
        d.call("GET", f"/v1/notes/{bad}")
        d.call("GET", f"/v1/notes/{bad}/raw")


def lists(d):
    d.call("GET", "/v1/notes")
    for size in [1, 2, 10, 100, 500]:
        d.call("GET", f"/v1/notes?page_size={size}")
    for order in ["title", "title desc", "slug desc", "created_at", "updated_at desc",
                  "created_at desc, title", "path", "size desc", "title asc", "title DESC",
                  "  title  "]:
        d.call("GET", "/v1/notes?" + qs(order_by=order, page_size=15))
    for prefix in ["projects/", "projects", "corpus/til/", "corpus/", "people/Z", "nope/", "",
                   "../", "/"]:
        d.call("GET", "/v1/notes?" + qs(prefix=prefix, page_size=20))
    for f in FILTERS:
        d.call("GET", "/v1/notes?" + qs(filter=f, page_size=25))
    d.call("GET", "/v1/notes?" + qs(filter='tags:recipe', order_by="title desc"))
    d.call("GET", "/v1/notes?" + qs(prefix="recipes/", filter='status = "active"'))
    for bad in ["page_size=0", "page_size=501", "page_size=x", "page_token=garbage",
                "page_token=YWJj.YWJjYWJjYWJjYWJjYWJjYWJjYWI", "unknown=1", "filter=",
                "order_by=", "order_by=nosuch", "prefix=a&prefix=b"]:
        d.call("GET", f"/v1/notes?{bad}")
    list_pages(d, {"page_size": 60})
    list_pages(d, {"page_size": 7, "prefix": "corpus/dendron-site/"})
    list_pages(d, {"page_size": 9, "order_by": "title desc", "filter": 'path:"corpus"'})
    # A token of another query.
    d.call("GET", "/v1/notes?page_size=2", save={"page": lambda j: j["next_page_token"]})
    d.call("GET", "/v1/notes?page_size=3&page_token=@{ctx:page}")
    d.call("GET", "/v1/notes?page_size=2&order_by=title&page_token=@{ctx:page}")


def searches(d):
    for s in SEARCHES:
        d.call("GET", "/v1/search?" + qs(q=s))
    for s in SEARCHES[:30]:
        d.call("GET", "/v1/search?" + qs(q=s, page_size=3, match="all"))
    for s in ["sourdough", "recipe", "powershell", "the", "git"]:
        for f in ['folder = "recipes"', 'tags:recipe', 'status = "draft"', 'path:"corpus/til"',
                  'status = ']:
            d.call("GET", "/v1/search?" + qs(q=s, filter=f))
    for extra in [dict(order_by="updated_at desc"), dict(order_by="title"),
                  dict(order_by="score"), dict(min_seq=1), dict(min_seq=0),
                  dict(min_seq=-1), dict(min_seq=999999), dict(mode="lexical"),
                  dict(mode="hybrid"), dict(mode="semantic"), dict(match="any"),
                  dict(match="some"), dict(page_size=0), dict(page_size=101),
                  dict(page_size=100)]:
        d.call("GET", "/v1/search?" + qs(q="sourdough", **extra))
    d.call("GET", "/v1/search")
    d.call("GET", "/v1/search?q=")
    d.call("GET", "/v1/search?q=a&q=b")
    d.call("GET", "/v1/search?" + qs(q="x" * 2000))
    # Pages of a search.
    d.call("GET", "/v1/search?q=the&page_size=4", save={"page": lambda j: j["next_page_token"]})
    for _ in range(4):
        d.call("GET", "/v1/search?q=the&page_size=4&page_token=@{ctx:page}",
               save={"page": lambda j: j["next_page_token"]})
    d.call("GET", "/v1/search?q=then&page_size=4&page_token=@{ctx:page}")


def greps(d):
    for pattern, extra in [("TODO", {}), ("todo", {"case": "insensitive"}),
                           ("todo", {"case": "sensitive"}), ("sourdough", {"word": "true"}),
                           ("sour", {"word": "true"}), ("[[", {"literal": "true"}),
                           (r"\[\[.*\]\]", {}), ("^# ", {}), ("Get-[A-Z]\\w+", {}),
                           ("Cais do Sodré", {}), ("zoë", {"case": "insensitive"}),
                           ("a.b", {"literal": "true"}), ("(", {}), ("(", {"literal": "true"}),
                           ("", {}), ("x{1000000}", {}), ("git", {"filter": 'path:"corpus/til"'}),
                           ("the", {"page_size": "5"}), ("the", {"filter": "status = "}),
                           ("sourdough", {"case": "bogus"}), ("sourdough", {"word": "maybe"}),
                           ("docker", {}), ("http", {"page_size": "2"}), ("#", {})]:
        d.call("GET", "/v1/grep?" + qs(pattern=pattern, **extra))
    d.call("GET", "/v1/grep")
    d.call("GET", "/v1/grep?" + qs(q="Cais do Sodré"))
    d.call("GET", "/v1/grep?pattern=the&page_size=3", save={"page": lambda j: j["next_page_token"]})
    for _ in range(3):
        d.call("GET", "/v1/grep?pattern=the&page_size=3&page_token=@{ctx:page}",
               save={"page": lambda j: j["next_page_token"]})


def tags_and_properties(d):
    for params in [{}, {"order_by": "count desc"}, {"order_by": "tag desc"},
                   {"order_by": "count"}, {"page_size": "5"}, {"filter": 'folder = "recipes"'},
                   {"filter": 'tag:"recipe"'}, {"filter": "status = "}, {"order_by": "nosuch"},
                   {"page_size": "0"}]:
        d.call("GET", "/v1/tags?" + qs(**params))
    d.call("GET", "/v1/tags?page_size=4", save={"page": lambda j: j["next_page_token"]})
    for _ in range(3):
        d.call("GET", "/v1/tags?page_size=4&page_token=@{ctx:page}",
               save={"page": lambda j: j["next_page_token"]})
    for body in [{"key": "status"}, {"key": "tags"}, {"key": "author"}, {"key": "rating"},
                 {"key": "created"}, {"key": "status", "filter": 'folder = "reading"'},
                 {"key": "status", "limit": 1}, {"key": "ms.date"}, {"key": "title"},
                 {"key": "nosuch"}, {"key": ""}, {}, {"key": "status", "filter": "status = "},
                 {"key": "status", "limit": 0}, {"key": "status", "extra": 1},
                 {"key": "status", "limit": "x"}]:
        d.call("POST", "/v1/properties:aggregate", json_body=body)
    d.call("POST", "/v1/properties:aggregate", raw=b"{not json", content_type="application/json")
    d.call("POST", "/v1/properties:aggregate", raw=b'{"key":"status","key":"tags"}',
           content_type="application/json")
    d.call("POST", "/v1/properties:aggregate", raw=b'{"key":"status"}', content_type="text/plain")


def links_folders_revisions(d, corpus):
    for slug in EXAMPLE + corpus[:30]:
        d.call("GET", f"/v1/notes/{enc(slug)}:links")
    d.call("GET", "/v1/notes/no-such-note:links")
    for params in [{}, {"prefix": "corpus"}, {"prefix": "corpus/"}, {"page_size": "3"},
                   {"prefix": "nope"}, {"page_size": "0"}, {"prefix": "../"}]:
        d.call("GET", "/v1/folders?" + qs(**params))
    d.call("GET", "/v1/folders?page_size=3", save={"page": lambda j: j["next_page_token"]})
    for _ in range(3):
        d.call("GET", "/v1/folders?page_size=3&page_token=@{ctx:page}",
               save={"page": lambda j: j["next_page_token"]})
    for slug in EXAMPLE[:12]:
        d.call("GET", f"/v1/notes/{enc(slug)}:listRevisions")
    d.call("GET", "/v1/notes/Inbox/versions")
    d.call("GET", "/v1/notes/Inbox:listRevisions?page_size=0")
    d.call("GET", "/v1/notes/Inbox:listRevisions?limit=501")
    d.call("GET", "/v1/notes/Inbox:listRevisions?filter=" + q('actor = "filesystem"'))
    d.call("GET", "/v1/notes/Inbox:listRevisions?order_by=nosuch")
    d.call("GET", "/v1/notes/no-such-note:listRevisions")
    d.call("GET", "/v1/notes/Inbox:diff")
    d.call("GET", "/v1/notes/Inbox:diff?from=nonsense")
    d.call("GET", "/v1/notes/Inbox:nosuchmethod")


def attachments_reads(d):
    d.call("GET", "/v1/attachments")
    for params in [{"page_size": "1"}, {"order_by": "size desc"}, {"order_by": "nosuch"},
                   {"filter": 'content_type = "image/png"'}, {"filter": "size > 100"},
                   {"filter": "bad = "}]:
        d.call("GET", "/v1/attachments?" + qs(**params))
    d.call("GET", "/v1/attachments/diagram.png")
    d.call("GET", "/v1/attachments/diagram.png?sha256="
           "423b0058f295012a2dede50fa13b8738edb6ef8518bdc69705e0086e44989c24")
    d.call("GET", "/v1/attachments/diagram.png?sha256=" + "0" * 64)
    d.call("GET", "/v1/attachments/diagram.png?sha256=xyz")
    d.call("GET", "/v1/attachments/attachments%2Fdiagram.png")
    d.call("GET", "/v1/attachments/nope.png")
    d.call("GET", "/v1/attachments/..%2FWelcome.md")
    d.call("GET", "/v1/attachments/Welcome.md")
    d.call("GET", "/v1/attachments/diagram.png?expires=1&signature=abc")


def mcp_post(d, message, *, session=None, modern=False, token=None, headers=None):
    h = {"accept": "application/json, text/event-stream"}
    if session:
        h["mcp-session-id"] = "@{ctx:mcp_session}"
        h["mcp-protocol-version"] = "2025-11-25"
    if modern:
        h["mcp-protocol-version"] = "2026-07-28"
        h["mcp-method"] = message.get("method", "")
        name = message.get("params", {}).get("name")
        if name:
            h["mcp-name"] = name
        params = dict(message.get("params", {}))
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "golden", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}
        message = dict(message, params=params)
    h.update(headers or {})
    return d.call("POST", "/mcp", json_body=message, headers=h, token=token)


MCP_READS = [
    ("vault_summary", {}), ("search", {"q": "sourdough starter"}),
    ("search", {"q": "lisbon", "page_size": 2}), ("search", {"q": "title:sourdough"}),
    ("search", {"q": ""}), ("search", {"q": "x", "filter": "status = "}),
    ("read_note", {"note": "recipes/sourdough", "offset": 5, "limit": 3}),
    ("read_note", {"note": "Welcome", "limit": 5}), ("read_note", {"note": "no-such-note"}),
    ("read_note", {"note": "../etc/passwd"}), ("read_note", {}),
    ("grep", {"pattern": "TODO", "case": "insensitive"}), ("grep", {"pattern": "("}),
    ("list_tags", {"order_by": "count desc"}), ("aggregate_properties", {"key": "status"}),
    ("list_notes", {"prefix": "projects/"}), ("list_notes", {"page_size": 2}),
    ("list_notes", {"filter": "tags:recipe"}), ("list_notes", {"filter": "nosuch = 1"}),
    ("list_folders", {}), ("list_revisions", {"note": "Inbox"}),
    ("note_links", {"note": "Welcome"}), ("note_links", {"note": "nope"}),
    ("no_such_tool", {}), ("search", {"q": 5}), ("search", {"q": "a", "unknown": 1}),
]


def mcp(d, token=None, writes=False):
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "golden", "version": "0"}}}
    mcp_post(d, init, token=token)
    d.ctx["mcp_session"] = d.last_headers.get("mcp-session-id")
    mcp_post(d, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session=True,
             token=token)
    mcp_post(d, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, session=True,
             token=token)
    for i, (tool, args) in enumerate(MCP_READS[:12], start=2):
        mcp_post(d, {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                     "params": {"name": tool, "arguments": args}}, session=True, token=token)
    mcp_post(d, {"jsonrpc": "2.0", "id": 40, "method": "nosuch/method", "params": {}},
             session=True, token=token)
    # The stateless 2026-07-28 revision.
    mcp_post(d, {"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {}},
             modern=True, token=token)
    mcp_post(d, {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}, modern=True,
             token=token)
    for tool, args in MCP_READS:
        mcp_post(d, {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                     "params": {"name": tool, "arguments": args}}, modern=True, token=token)
    # Malformed: no session, no _meta, not JSON-RPC, not JSON.
    mcp_post(d, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, token=token)
    mcp_post(d, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, token=token,
             headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"})
    mcp_post(d, {"hello": "world"}, token=token)
    d.call("POST", "/mcp", raw=b"{", content_type="application/json", token=token,
           headers={"accept": "application/json, text/event-stream"})
    d.call("GET", "/mcp", token=token)
    d.call("PUT", "/mcp", token=token)
    if writes:
        mcp_writes(d, token)


def mcp_writes(d, token):
    d.written = True  # write_note replaces a note below
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call"}
    args = {"note": "agents/plan", "content": "# Plan\n\nfirst\n", "agent_id": "golden"}
    for _ in range(2):  # the second: a client's retry, the same receipt
        mcp_post(d, dict(call, params={"name": "write_note", "arguments": args}), modern=True,
                 token=token)
        d.settle(token)
    mcp_post(d, dict(call, params={"name": "write_note", "arguments": {
        "note": "agents/plan", "content": "second\n", "version_id": "@{v:agents/plan}"}}),
        modern=True, token=token)
    d.settle(token)
    mcp_post(d, dict(call, params={"name": "edit_note", "arguments": {
        "note": "agents/plan", "version_id": "@{v:agents/plan}", "old_string": "second",
        "new_string": "third"}}), modern=True, token=token)
    d.settle(token)
    mcp_post(d, dict(call, params={"name": "edit_note", "arguments": {
        "note": "agents/plan", "version_id": "00000000-0000-0000-0000-000000000000",
        "old_string": "third", "new_string": "x"}}), modern=True, token=token)
    mcp_post(d, dict(call, params={"name": "edit_note", "arguments": {
        "note": "agents/plan", "version_id": "@{v:agents/plan}", "old_string": "absent",
        "new_string": "x"}}), modern=True, token=token)
    mcp_post(d, dict(call, params={"name": "write_note", "arguments": {
        "note": "../escape", "content": "x\n"}}), modern=True, token=token)
    d.call("GET", "/v1/notes/agents%2Fplan:listRevisions", token=token)
    d.call("GET", "/v1/notes/agents%2Fplan/raw", token=token)
