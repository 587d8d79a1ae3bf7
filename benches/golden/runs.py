"""The writes, the three runs and their order (see `script.py` for the reads)."""

import base64
import subprocess

from script import (AUTH, ELSEWHERE, LIMITS, OPEN, PAT, PAT_WRITER, READER,
                    REVIEWER, WRITER, attachments_reads, contract, enc, greps, lists,
                    links_folders_revisions, mcp, note_reads, qs, reads, searches,
                    tags_and_properties, vault_notes)

BOUNDARY = "golden-boundary-7f3a"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082")


def multipart(parts):
    """A multipart/form-data body: (name, file name or None, content type, bytes)."""
    out = b""
    for name, filename, ctype, data in parts:
        out += f"--{BOUNDARY}\r\n".encode()
        disp = f'form-data; name="{name}"'
        if filename is not None:
            disp += f'; filename="{filename}"'
        out += f"Content-Disposition: {disp}\r\n".encode()
        if ctype:
            out += f"Content-Type: {ctype}\r\n".encode()
        out += b"\r\n" + data + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def w(d, method, path, body=None, key=None, token=None, **kw):
    """A write: recorded, then an unrecorded wait until it is indexed and in history."""
    return d.call(method, path, json_body=body, key=key, token=token, settle=True, **kw)


def note_writes(d):
    create = {"slug": "golden/alpha", "title": "Alpha", "content": "# Alpha\n\nfirst line\n"
              "a twice line\na twice line\n[[recipes/sourdough]] and [[Inbox]]\n",
              "tags": ["golden", "golden/test"], "frontmatter": {"rating": 4, "author": "G"},
              "agent_id": "golden"}
    w(d, "POST", "/v1/notes", create, "g-create-alpha")
    w(d, "POST", "/v1/notes", create, "g-create-alpha")  # replay: the same receipt
    w(d, "POST", "/v1/notes", dict(create, title="Other"), "g-create-alpha")  # reused
    w(d, "POST", "/v1/notes", create)  # no key
    w(d, "POST", "/v1/notes", create, "")
    w(d, "POST", "/v1/notes", create, "g-create-alpha-again")  # the slug exists
    for i, bad in enumerate([
            {"slug": "../escape", "content": "x"}, {"slug": "/abs", "content": "x"},
            {"slug": "a/b/c/d", "content": "x"}, {"slug": ".notevault/x", "content": "x"},
            {"slug": "x\u0000y", "content": "x"}, {"slug": "", "content": "x"},
            {"slug": "golden/long", "content": "x", "agent_id": "a" * 101},
            {"slug": "golden/unknown", "content": "x", "colour": "red"},
            {"slug": "golden/badtags", "content": "x", "tags": "notalist"},
            {"slug": "golden/badfm", "content": "x", "frontmatter": [1]},
            {"content": "no slug, a title only", "title": "Titled from body"},
            {"folder": "projects", "title": "In a folder", "content": "body\n"},
            {"slug": "golden/status", "content": "s\n", "status": "draft"},
            {"slug": "golden/ünï cödé", "content": "unicode\n"},
            {"slug": "golden/with.md", "content": "ext\n"}]):
        w(d, "POST", "/v1/notes", bad, f"g-create-bad-{i}")
    d.call("POST", "/v1/notes", raw=b"{not json", content_type="application/json", key="g-raw-1")
    d.call("POST", "/v1/notes", raw=b'{"slug":"a","slug":"b","content":"x"}',
           content_type="application/json", key="g-raw-2")
    d.call("POST", "/v1/notes", raw=b'{"slug":"golden/ct","content":"x"}',
           content_type="text/plain", key="g-raw-3")
    d.call("POST", "/v1/notes", raw=b"", content_type="application/json", key="g-raw-4")
    reads(d, ["golden/alpha"])
    d.call("GET", "/v1/notes/golden%2Falpha:listRevisions",
           save={"first_rev": lambda j: j["versions"][-1]["revision_id"]})
    d.ctx["stale"] = None

    # :edit and its errors.
    edit = {"version_id": "@{v:golden/alpha}", "old_string": "first line",
            "new_string": "first line, edited", "agent_id": "golden"}
    d.call("GET", "/v1/notes/golden%2Falpha?limit=1", save={"stale": lambda j: j["version_id"]})
    w(d, "POST", "/v1/notes/golden%2Falpha:edit", edit, "g-edit-1")
    w(d, "POST", "/v1/notes/golden%2Falpha:edit", dict(edit, version_id="@{ctx:stale}"),
      "g-edit-1")  # replay with the body as first sent
    w(d, "POST", "/v1/notes/golden%2Falpha:edit", dict(edit, version_id="@{ctx:stale}",
                                                       new_string="other"), "g-edit-1")
    w(d, "POST", "/v1/notes/golden%2Falpha:edit", dict(edit, version_id="@{ctx:stale}"),
      "g-edit-stale")
    w(d, "POST", "/v1/notes/golden%2Falpha:edit", dict(edit, old_string="a twice line"),
      "g-edit-ambiguous")
    w(d, "POST", "/v1/notes/golden%2Falpha:edit", dict(edit, old_string="not there at all"),
      "g-edit-missing")
    w(d, "POST", "/v1/notes/golden%2Falpha:edit", dict(edit, old_string=""), "g-edit-empty")
    w(d, "POST", "/v1/notes/golden%2Falpha:edit", dict(edit, version_id="not-a-uuid"),
      "g-edit-badversion")
    w(d, "POST", "/v1/notes/golden%2Falpha:edit", {"old_string": "a", "new_string": "b"},
      "g-edit-noversion")
    w(d, "POST", "/v1/notes/golden%2Falpha:edit", dict(edit, new_string="x" * 100001),
      "g-edit-long")
    w(d, "POST", "/v1/notes/no-such-note:edit", edit, "g-edit-nonote")
    w(d, "POST", "/v1/notes/golden%2Falpha/edit", dict(
        edit, old_string="first line, edited", new_string="first line, legacy"), "g-edit-legacy")
    w(d, "POST", "/v1/notes/recipes%2Fovernight-oats:edit", {
        "version_id": "@{v:recipes/overnight-oats}", "old_string": "a pinch of cinnamon",
        "new_string": "a big pinch of cinnamon", "agent_id": "me"}, "g-edit-oats")
    w(d, "POST", "/v1/notes/Inbox:edit", {
        "version_id": "@{v:Inbox}", "old_string": "The [[overnight-oats]] want more cinnamon.",
        "new_string": "Done: [[overnight-oats]].", "agent_id": "me"}, "g-edit-inbox")

    # PATCH with masks.
    for i, (mask, body) in enumerate([
            ("title", {"title": "Alpha, retitled"}), ("tags", {"tags": ["golden", "patched"]}),
            ("status", {"status": "done"}), ("frontmatter.rating", {"frontmatter": {"rating": 5}}),
            ("content", {"content": "# Alpha\n\nreplaced body\n[[Welcome]]\n"}),
            ("title,tags", {"title": "Alpha 2", "tags": ["golden"]}),
            ("nosuch", {"title": "x"}), ("", {"title": "x"}), ("title", {"tags": ["x"]}),
            ("frontmatter.", {"frontmatter": {"": 1}})]):
        body = dict(body, version_id="@{v:golden/alpha}", agent_id="golden")
        w(d, "PATCH", f"/v1/notes/golden%2Falpha?update_mask={mask}", body, f"g-patch-{i}")
    w(d, "PATCH", "/v1/notes/golden%2Falpha", {"title": "no mask",
                                               "version_id": "@{v:golden/alpha}"}, "g-patch-nomask")
    w(d, "PATCH", "/v1/notes/golden%2Falpha?update_mask=folder", {
        "folder": "archive", "version_id": "@{v:golden/alpha}"}, "g-patch-folder")
    reads(d, ["archive/alpha"])

    # Move, rename, rollback, delete.
    for path, body, key in [
            ("archive%2Falpha:move", {"folder": "golden", "version_id": "@{v:archive/alpha}"},
             "g-move-1"),
            ("golden%2Falpha:move", {"folder": "../out", "version_id": "@{v:golden/alpha}"},
             "g-move-bad"),
            ("golden%2Falpha/move", {"folder": "golden2", "version_id": "@{v:golden/alpha}"},
             "g-move-legacy"),
            ("golden2%2Falpha:rename", {"name": "beta", "version_id": "@{v:golden2/alpha}"},
             "g-ren-1"),
            ("golden2%2Fbeta/rename", {"name": "gamma", "version_id": "@{v:golden2/beta}"},
             "g-ren-legacy"),
            ("golden2%2Fgamma:rename", {"name": "Welcome/../x",
                                        "version_id": "@{v:golden2/gamma}"}, "g-ren-bad")]:
        w(d, "POST", f"/v1/notes/{path}", body, key)
    w(d, "POST", "/v1/notes/reading%2Freading-list:rename", {
        "name": "books-to-read", "version_id": "@{v:reading/reading-list}"}, "g-ren-linked")
    reads(d, ["Inbox", "reading/books-to-read"], deep=False)
    d.call("GET", "/v1/notes/reading%2Fbooks-to-read:links")
    w(d, "POST", "/v1/notes/golden2%2Fgamma:rollback", {
        "revision_id": "@{ctx:first_rev}", "version_id": "@{v:golden2/gamma}"}, "g-rollback")
    w(d, "POST", "/v1/notes/golden2%2Fgamma:rollback", {
        "revision_id": "01a00000-0000-7000-8000-000000000000",
        "version_id": "@{v:golden2/gamma}"}, "g-rollback-unknown")
    d.call("GET", "/v1/notes/golden2%2Fgamma:listRevisions",
           save={"rev_a": lambda j: j["versions"][0]["revision_id"],
                 "rev_b": lambda j: j["versions"][2]["revision_id"]})
    d.call("GET", "/v1/notes/golden2%2Fgamma:listRevisions?page_size=2",
           save={"page": lambda j: j["next_page_token"]})
    d.call("GET", "/v1/notes/golden2%2Fgamma:listRevisions?page_size=2&page_token=@{ctx:page}")
    d.call("GET", "/v1/notes/golden2%2Fgamma/versions?limit=2")
    d.call("GET", "/v1/notes/golden2%2Fgamma:diff?from=@{ctx:rev_b}&to=@{ctx:rev_a}")
    d.call("GET", "/v1/notes/golden2%2Fgamma:diff?from=@{ctx:rev_b}")
    reads(d, ["golden2/gamma"])
    w(d, "DELETE", "/v1/notes/golden2%2Fgamma?version_id=@{ctx:stale}&agent_id=golden",
      key="g-del-stale")
    w(d, "DELETE", "/v1/notes/golden2%2Fgamma?agent_id=golden", key="g-del-1")
    w(d, "DELETE", "/v1/notes/golden2%2Fgamma?agent_id=golden", key="g-del-1")
    w(d, "DELETE", "/v1/notes/golden2%2Fgamma?agent_id=golden", key="g-del-2")
    w(d, "DELETE", "/v1/notes/no-such-note", key="g-del-3")
    reads(d, ["golden2/gamma"], deep=False)
    d.call("GET", "/v1/notes/golden2%2Fgamma:listRevisions")

    # A burst of creates, each then found by a search that waits for it.
    for i in range(25):
        body = {"slug": f"golden/bulk-{i:02d}", "content":
                f"# Bulk {i}\n\nquokka number {i} lives near [[golden/bulk-{(i + 1) % 25:02d}]]\n"
                + "filler " * i + "\n",  # lengths differ: no two score alike
                "tags": ["bulk"], "agent_id": "golden"}
        w(d, "POST", "/v1/notes", body, f"g-bulk-{i:02d}",
          save={"seq": lambda j: j["committed_seq"]})
        d.call("GET", "/v1/search?q=quokka&page_size=3&min_seq=@{ctx:seq}")
    d.call("GET", "/v1/notes?" + qs(filter="tags:bulk", page_size=30))
    d.call("GET", "/v1/notes?" + qs(order_by="updated_at desc", page_size=10))
    d.call("GET", "/v1/notes/golden%2Fbulk-07:links")


def folder_writes(d):
    w(d, "POST", "/v1/folders", {"path": "golden-folder", "agent_id": "golden"}, "g-fold-1")
    w(d, "POST", "/v1/folders", {"path": "golden-folder", "agent_id": "golden"}, "g-fold-1")
    w(d, "POST", "/v1/folders", {"path": "golden-folder", "agent_id": "golden"}, "g-fold-2")
    w(d, "POST", "/v1/folders", {"path": "golden-folder/sub"}, "g-fold-3")
    w(d, "POST", "/v1/folders", {"path": "golden-folder/sub/deeper"}, "g-fold-4")
    w(d, "POST", "/v1/folders", {"path": "../outside"}, "g-fold-5")
    w(d, "POST", "/v1/folders", {"path": ""}, "g-fold-6")
    w(d, "POST", "/v1/notes", {"slug": "golden-folder/sub/inside", "content": "in\n"},
      "g-fold-note")
    w(d, "POST", "/v1/notes", {"folder": "golden-folder", "slug": "golden-folder/top",
                               "content": "top\n"}, "g-fold-note1")
    w(d, "POST", "/v1/notes", {"folder": "golden-folder", "title": "Top", "content": "top\n"},
      "g-fold-note2")
    d.call("GET", "/v1/folders?prefix=golden-folder")
    w(d, "POST", "/v1/folders:rename", {"path": "golden-folder", "name": "renamed-folder"},
      "g-fold-ren")
    w(d, "POST", "/v1/folders:rename", {"path": "no-such-folder", "name": "x"}, "g-fold-ren2")
    w(d, "POST", "/v1/folders:move", {"path": "renamed-folder/sub", "folder": "projects"},
      "g-fold-move")
    w(d, "POST", "/v1/folders:move", {"path": "renamed-folder", "folder": "renamed-folder"},
      "g-fold-move2")
    d.call("GET", "/v1/folders")
    d.call("GET", "/v1/notes?prefix=projects%2F")
    w(d, "POST", "/v1/folders:delete", {"path": "renamed-folder"}, "g-fold-del1")
    w(d, "POST", "/v1/folders:delete", {"path": "renamed-folder", "trash_notes": True},
      "g-fold-del2")
    w(d, "POST", "/v1/folders:delete", {"path": "renamed-folder", "trash_notes": True},
      "g-fold-del2")
    w(d, "POST", "/v1/folders:delete", {"path": "nope"}, "g-fold-del3")
    d.call("GET", "/v1/folders")


def attachment_writes(d):
    def up(key, parts, query=""):
        return d.call("POST", f"/v1/attachments{query}", raw=multipart(parts),
                      content_type=f"multipart/form-data; boundary={BOUNDARY}", key=key,
                      settle=True)
    up("g-att-1", [("file", "dot.png", "image/png", PNG), ("agent_id", None, None, b"golden")])
    up("g-att-1", [("file", "dot.png", "image/png", PNG), ("agent_id", None, None, b"golden")])
    up("g-att-1", [("file", "dot.png", "image/png", PNG + b"x")])
    up("g-att-2", [("folder", None, None, b"attachments"),
                   ("file", "notes.txt", "text/plain", b"plain text\n")])
    up("g-att-2b", [("file", "late.txt", "text/plain", b"x\n"), ("folder", None, None, b"x")])
    up("g-att-3", [("file", "dot.png", "image/png", PNG)])  # the same name again
    up("g-att-4", [("file", "evil.exe", "application/x-msdownload", b"MZ")])
    up("g-att-5", [("file", "../up.png", "image/png", PNG)])
    up("g-att-6", [("agent_id", None, None, b"golden")])
    up("g-att-7", [("file", "empty.png", "image/png", b"")])
    up("g-att-8", [("file", "in-folder.png", "image/png", PNG)], "?folder=recipes")
    up(None, [("file", "nokey.png", "image/png", PNG)])
    d.call("POST", "/v1/attachments", raw=b"not multipart", content_type="image/png",
           key="g-att-9")
    d.call("GET", "/v1/attachments")
    d.call("GET", "/v1/attachments/dot.png")
    d.call("GET", "/v1/attachments/notes.txt")
    w(d, "POST", "/v1/attachments/notes.txt:rename", {"name": "renamed.txt"}, "g-att-ren")
    w(d, "POST", "/v1/attachments/renamed.txt:move", {"folder": "recipes"}, "g-att-move")
    w(d, "POST", "/v1/attachments/nope.txt:move", {"folder": "recipes"}, "g-att-move2")
    link = {"link": lambda j: "/" + j["url"].split("//", 1)[1].split("/", 1)[1]}
    w(d, "POST", "/v1/attachments:presign", {"file_name": "diagram.png", "method": "GET"},
      "g-presign-1", save=link)
    d.call("GET", "@{ctx:link}")  # the presigned link: a credential of its own
    d.call("GET", "@{ctx:link}0")  # a signature that does not check
    w(d, "POST", "/v1/attachments:presign", {"file_name": "new.png", "method": "PUT"},
      "g-presign-2", save=link)
    d.call("PUT", "@{ctx:link}", raw=PNG, content_type="image/png", settle=True)
    d.call("PUT", "@{ctx:link}", raw=PNG, content_type="image/png")  # its nonce is spent
    d.call("GET", "/v1/attachments/new.png")
    w(d, "POST", "/v1/attachments:presign", {"file_name": "x", "method": "PATCH"}, "g-presign-3")
    w(d, "DELETE", "/v1/attachments/renamed.txt?agent_id=golden", key="g-att-del")
    w(d, "DELETE", "/v1/attachments/renamed.txt?agent_id=golden", key="g-att-del")
    w(d, "DELETE", "/v1/attachments/renamed.txt", key="g-att-del2")
    d.call("GET", "/v1/attachments?order_by=path")


def review(d, token=None):
    def patch(mask, body, key=None):
        w(d, "PATCH", f"/v1/vault/write-settings?update_mask={mask}", body, key, token=token)
    patch("write_policy", {"write_policy": "review"})
    patch("nosuch", {"write_policy": "review"})
    patch("", {"write_policy": "review"})
    patch("write_policy", {"write_policy": "sometimes"})
    d.call("GET", "/v1/vault/write-settings", token=token)
    w(d, "POST", "/v1/notes", {"slug": "golden/queued", "content": "q\n", "agent_id": "bot"},
      "g-q-1", token=token, save={"p1": lambda j: j["pending_id"]})
    w(d, "POST", "/v1/notes", {"slug": "golden/queued", "content": "q\n", "agent_id": "bot"},
      "g-q-1", token=token)
    w(d, "POST", "/v1/notes/Inbox:edit", {"version_id": "@{v:Inbox}", "old_string": "# Inbox",
                                          "new_string": "# Inbox (queued)"}, "g-q-2",
      token=token, save={"p2": lambda j: j["pending_id"]})
    w(d, "DELETE", "/v1/notes/scratchpad", key="g-q-3", token=token,
      save={"p3": lambda j: j["pending_id"]})
    reads(d, ["golden/queued", "Inbox"], deep=False)
    for params in ["", "?status=pending", "?status=applied", "?status=bogus", "?page_size=1",
                   "?filter=" + "kind%20%3D%20%22edit%22"]:
        d.call("GET", f"/v1/writes{params}", token=token)
    d.call("GET", "/v1/writes/@{ctx:p1}", token=token)
    w(d, "POST", "/v1/writes/@{ctx:p1}:approve", token=token)
    w(d, "POST", "/v1/writes/@{ctx:p1}:approve", token=token)
    w(d, "POST", "/v1/writes/@{ctx:p2}/approve", token=token)
    w(d, "POST", "/v1/writes/@{ctx:p3}:reject", token=token)
    w(d, "POST", "/v1/writes/@{ctx:p3}/reject", token=token)
    w(d, "POST", "/v1/writes/00000000-0000-4000-8000-000000000000:approve", token=token)
    w(d, "POST", "/v1/writes/not-an-id:approve", token=token)
    d.call("GET", "/v1/writes/00000000-0000-4000-8000-000000000000", token=token)
    d.call("GET", "/v1/writes?status=applied", token=token)
    d.call("GET", "/v1/writes?status=rejected", token=token)
    reads(d, ["golden/queued", "Inbox", "scratchpad"], deep=False)
    patch("write_policy,write_budget", {"write_policy": "auto_apply", "write_budget": 0})
    d.call("GET", "/v1/vault", token=token)


def sync(d):
    d.call("GET", "/v1/sync/ops?after_seq=0&page_size=40",
           save={"after": lambda j: j.get("next_after_seq")})
    d.call("GET", "/v1/sync/ops?after_seq=30&page_size=500")
    d.call("GET", "/v1/sync/ops?after_seq=-1")
    d.call("GET", "/v1/sync/ops?after_seq=999999")
    d.call("GET", "/v1/sync/snapshot?page_size=3", save={"page": lambda j: j["next_page_token"]})
    d.call("GET", "/v1/sync/snapshot?page_size=3&page_token=@{ctx:page}")
    w(d, "POST", "/v1/sync/checkpoint", {"device_id": "golden-device", "seq": 5}, "g-ckpt")
    w(d, "POST", "/v1/sync/checkpoint", {"device_id": "", "seq": -5}, "g-ckpt2")
    w(d, "POST", "/v1/sync/ops", {"device_id": "golden-device", "ops": []}, "g-push")
    sync_push(d)


def b64(text):
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def sync_push(d):
    """A device's pushes: the same writes through the sync plane, and its refusals."""
    def push(key, *ops):
        w(d, "POST", "/v1/sync/ops", {"device_id": "golden-device", "ops": list(ops)}, key)
    d.call("GET", "/v1/vault", save={"seq": lambda j: j["committed_seq"]})
    create = {"kind": "upsert", "path": "sync/pushed.md", "content_base64": b64("# Pushed\n")}
    push("g-sync-1", create)
    push("g-sync-1", create)
    push("g-sync-1", dict(create, content_base64=b64("other\n")))
    push("g-sync-2", {"kind": "upsert", "path": "Welcome.md", "base_version_id": "@{v:Welcome}",
                      "content_base64": b64("# Welcome\n\nreplaced by a device\n")},
         {"kind": "move", "path": "travel/packing-list.md", "to_path": "travel/packing.md",
          "base_version_id": "@{v:travel/packing-list}"},
         {"kind": "delete", "path": "daily/2026-11-19.md",
          "base_version_id": "@{v:daily/2026-11-19}"})
    push("g-sync-3", {"kind": "upsert", "path": "Welcome.md", "content_base64": b64("x"),
                      "base_version_id": "00000000-0000-0000-0000-000000000000"})
    push("g-sync-4", {"kind": "upsert", "path": "sync/op-key.md", "content_base64": b64("k\n"),
                      "idempotency_key": "g-sync-op-1"})
    push("g-sync-5", {"kind": "upsert", "path": "sync/op-key.md", "content_base64": b64("k\n"),
                      "idempotency_key": "g-sync-op-1"})
    for i, op in enumerate([
            {"kind": "upsert", "path": "n.md", "content_base64": "%%%"},
            {"kind": "upsert", "path": "n.md", "content_base64": b64(b"\xff\xfe")},
            {"kind": "frob", "path": "n.md"},
            {"kind": "delete", "path": "Inbox.md"},
            {"kind": "move", "path": "Inbox.md", "base_version_id": "@{v:Inbox}"},
            {"kind": "move", "path": "Inbox.md", "to_path": "a/b/c.md",
             "base_version_id": "@{v:Inbox}"},
            {"kind": "upsert", "path": "n.md", "content_base64": "eA==", "visibility": "private"},
            {"kind": "upsert", "path": "n.md", "content_base64": "eA==", "visibility": "secret"},
            {"kind": "upsert", "path": "../n.md", "content_base64": "eA=="},
            {"kind": "upsert", "path": "n.txt", "content_base64": "eA=="},
            {"kind": "upsert", "path": "n.md", "content_base64": "eA==", "extra": 1}]):
        push(f"g-sync-bad-{i}", op)
    push("g-sync-dup", {"kind": "delete", "path": "Inbox.md", "base_version_id": "@{v:Inbox}"},
         {"kind": "upsert", "path": "Inbox.md", "base_version_id": "@{v:Inbox}",
          "content_base64": "eA=="})
    d.call("GET", "/v1/sync/ops?after_seq=@{ctx:seq}&page_size=50")
    reads(d, ["sync/pushed", "Welcome", "travel/packing", "daily/2026-11-19"], deep=False)


def console(d):
    """The web console's pages, signed in through a one-time link (`login-link`)."""
    out = subprocess.run([d.binary, "login-link", str(d.vault), "--state-dir", str(d.state),
                          "--config", str(d.config)], capture_output=True, text=True, check=True)
    url = next(w for w in out.stdout.split() if "://" in w)
    d.ctx["login"] = "/" + url.split("//", 1)[1].split("/", 1)[1]
    d.call("GET", "/")
    d.call("GET", "@{ctx:login}")
    cookie = d.last_headers.get("set-cookie", "").split(";")[0]
    d.ctx["cookie"] = cookie
    d.call("GET", "@{ctx:login}")  # a link signs in once
    for page in ["/", "/pending", "/settings", "/activity", "/vault", "/tokens",
                 "/assets/console.css", "/nosuch", "/sign-in"]:
        d.call("GET", page, headers={"cookie": "@{ctx:cookie}"})
    d.call("POST", "/settings", headers={"cookie": "@{ctx:cookie}"}, raw=b"write_policy=review",
           content_type="application/x-www-form-urlencoded")  # no CSRF token
    d.call("GET", "/v1/audit-events?page_size=3", headers={"cookie": "@{ctx:cookie}"})


def errors(d):
    for method, path in [("GET", "/v1/nosuch"), ("GET", "/v2/notes"), ("PUT", "/v1/notes"),
                         ("DELETE", "/v1/notes"), ("PATCH", "/v1/search"), ("POST", "/v1/search"),
                         ("GET", "/v1/notes/Inbox:edit"), ("PUT", "/v1/notes/Inbox"),
                         ("OPTIONS", "/v1/notes"), ("HEAD", "/v1/notes/Inbox"),
                         ("GET", "/"), ("GET", "/nosuch"), ("GET", "//v1//notes"),
                         ("GET", "/v1/notes/"), ("GET", "/v1/notes/%"),
                         ("GET", "/v1/audit-events"), ("POST", "/v1/export"),
                         ("POST", "/v1/vault/purge"), ("POST", "/v1/sync:compact"),
                         ("POST", "/v1/auth/token"), ("GET", "/v1/writes/x"),
                         ("BREW", "/v1/notes"), ("GET", "/v1/notes?%ZZ=1")]:
        d.call(method, path)
    d.call("GET", "/v1/notes", headers={"host": "evil.example"})
    d.call("GET", "/v1/notes?page_size=1", headers={"origin": "https://evil.example"})
    d.call("OPTIONS", "/v1/notes", headers={"origin": "https://evil.example",
                                            "access-control-request-method": "GET"})
    d.call("POST", "/v1/auth/token", json_body={"grant_type": "authorization_code", "code": "x",
                                                "code_verifier": "y", "redirect_uri": "z"})
    d.call("POST", "/v1/vault/purge", json_body={"confirm": "no"})
    d.call("PUT", "/v1/sync/e2ee/keys", json_body={"keyVersion": 0})


def open_run(d):
    notes = vault_notes(d)
    corpus = [s for s in notes if s.startswith("corpus/")]
    picked = corpus[::max(1, len(corpus) // 45)][:45]
    contract(d)
    note_reads(d, picked)
    lists(d)
    searches(d)
    greps(d)
    tags_and_properties(d)
    links_folders_revisions(d, picked)
    attachments_reads(d)
    mcp(d)
    errors(d)
    note_writes(d)
    folder_writes(d)
    attachment_writes(d)
    review(d)
    sync(d)
    console(d)
    # What the writes changed, read again.
    contract(d)
    lists(d)
    for s in ["sourdough", "quokka", "alpha", "cinnamon", "books-to-read", "golden"]:
        d.call("GET", "/v1/search?" + qs(q=s, page_size=100))
    d.call("GET", "/v1/tags")
    d.call("GET", "/v1/folders")
    for slug in ["Welcome", "Inbox", "reading/books-to-read", "recipes/overnight-oats"]:
        d.call("GET", f"/v1/notes/{enc(slug)}:links")
        d.call("GET", f"/v1/notes/{enc(slug)}:listRevisions")


def auth_run(d):
    every = [None, "nonsense-token", "Basic dXNlcjpwYXNz", "Bearer", READER, WRITER, REVIEWER,
             PAT, PAT_WRITER, ELSEWHERE]
    for token in every:
        d.call("GET", "/v1/notes?page_size=2", token=token)
        d.call("GET", "/v1/notes/Welcome?limit=2", token=token)
        d.call("GET", "/v1/search?q=sourdough&page_size=2", token=token)
        d.call("GET", "/v1/vault", token=token)
        d.call("GET", "/openapi.json", token=token)
        d.call("GET", "/v1/writes", token=token)
        d.call("GET", "/v1/audit-events?page_size=5", token=token)
        d.call("GET", "/v1/sync/e2ee", token=token)
        if token in (None, PAT):
            d.call("POST", "/v1/export", json_body={}, token=token)
        d.call("PATCH", "/v1/vault/write-settings?update_mask=write_budget",
               json_body={"write_budget": 0}, token=token)
        n = every.index(token)
        body = {"slug": f"auth/{n}", "content": "a\n"}
        if token in (WRITER, REVIEWER, PAT_WRITER):
            w(d, "POST", "/v1/notes", body, f"a-create-{n}", token=token)
        else:
            d.call("POST", "/v1/notes", json_body=body, key=f"a-create-{n}", token=token)
        d.call("POST", "/mcp", token=token, json_body={
            "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "golden", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}}}},
            headers={"accept": "application/json, text/event-stream",
                     "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"})
    d.call("POST", "/v1/sync/e2ee:enable", token=PAT_WRITER, json_body={
        "keyVersion": 1, "kdf": {"salt": "c2FsdA", "N": 131072, "r": 8, "p": 1},
        "wrappedDek": "d3JhcHBlZA", "recovery": None})
    d.call("PUT", "/v1/sync/e2ee/keys", token=PAT, json_body={"keyVersion": 1})
    d.call("POST", "/v1/vault/purge", token=PAT_WRITER, json_body={"confirm": "x"})
    d.call("GET", "/v1/notes", headers={"authorization": "Bearer " + WRITER + "x"})
    d.call("GET", "/v1/notes", headers={"authorization": "bearer " + WRITER})
    review(d, token=REVIEWER)
    w(d, "PATCH", "/v1/vault/write-settings?update_mask=write_policy",
      {"write_policy": "review"}, token=REVIEWER)
    w(d, "POST", "/v1/notes", {"slug": "auth/queued", "content": "q\n"}, "a-q-1", token=WRITER,
      save={"p": lambda j: j["pending_id"]})
    d.call("GET", "/v1/writes/@{ctx:p}", token=WRITER)
    d.call("POST", "/v1/writes/@{ctx:p}:approve", token=WRITER)
    d.call("POST", "/v1/writes/@{ctx:p}:approve", token=PAT_WRITER)
    w(d, "POST", "/v1/writes/@{ctx:p}:reject", token=REVIEWER)
    w(d, "PATCH", "/v1/vault/write-settings?update_mask=write_policy",
      {"write_policy": "auto_apply"}, token=REVIEWER)
    mcp(d, token=READER)
    mcp(d, token=WRITER, writes=True)
    d.call("POST", "/mcp", token=READER, json_body={
        "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "write_note", "arguments": {"note": "reader/x", "content": "x\n"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "golden", "version": "0"},
                      "io.modelcontextprotocol/clientCapabilities": {}}}},
        headers={"accept": "application/json, text/event-stream",
                 "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                 "mcp-name": "write_note"})
    for slug in ["agents/plan", "auth/5", "auth/6", "auth/8", "reader/x"]:
        d.call("GET", f"/v1/notes/{enc(slug)}/raw", token=READER)


def limits_run(d):
    w(d, "PATCH", "/v1/vault/write-settings?update_mask=write_budget", {"write_budget": 2})
    for i in range(4):
        w(d, "POST", "/v1/notes", {"slug": f"limits/n{i}", "content": f"{i}\n"}, f"l-{i}")
    d.call("GET", "/v1/vault/write-settings")
    d.call("GET", "/v1/notes?prefix=limits%2F")
    for i in range(3):
        d.call("POST", "/v1/folders", json_body={"path": f"limits-{i}"}, key=f"l-f-{i}")


# (name, config, run, the token of the unrecorded waits)
RUNS = [("open", OPEN, open_run, None), ("auth", AUTH, auth_run, READER),
        ("limits", LIMITS, limits_run, None)]
