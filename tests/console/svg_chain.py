"""An uploaded SVG cannot act for the person who opens it: headless Chromium (Debian's),
driven by Playwright.

Run by tests/it/console.rs against a daemon it started (auth required, an agent's token with
notes.write alone, an owner's token, the review policy). The agent queues the delete of a
note, uploads an SVG whose script would approve every pending write and create a
notes.review token through the console, and presigns a link to it. A signed-in person
opens the link: the browser must download the file, never render it in the daemon's
origin, and afterwards the delete is still pending, the note is on disk, and no token was
made.

Environment: NV_URL, NV_LINK (a one-time sign-in link), NV_VAULT, NV_AGENT_TOKEN,
NV_OWNER_TOKEN, NV_CHROMIUM.
"""

import os
import uuid

from playwright.sync_api import expect, sync_playwright

from nv import URL, http, launch

LINK = os.environ["NV_LINK"]
VAULT = os.environ["NV_VAULT"]
AGENT = os.environ["NV_AGENT_TOKEN"]
OWNER = os.environ["NV_OWNER_TOKEN"]

# What the attacker's file would do in the console's origin: approve every pending write
# with the person's cookie and CSRF token, and make a reviewer's token.
SCRIPT = """
(async () => {
  const page = await (await fetch('/', {credentials: 'include'})).text();
  const csrf = page.match(/name="csrf" value="([^"]+)"/)[1];
  const form = {'content-type': 'application/x-www-form-urlencoded'};
  for (const m of page.matchAll(/\\/writes\\/([0-9a-f-]{36})\\/approve/g)) {
    await fetch('/writes/' + m[1] + '/approve', {method: 'POST', headers: form, body: 'csrf=' + csrf});
  }
  await fetch('/tokens', {method: 'POST', headers: form,
    body: 'csrf=' + csrf + '&name=stolen&scope=notes.review&expires_in='});
  document.title = 'ran';
})();
"""
SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    "<rect width=\"10\" height=\"10\"/><script><![CDATA[" + SCRIPT + "]]></script></svg>"
).encode()


def multipart(name, data, content_type):
    boundary = "nv" + uuid.uuid4().hex
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
        f"Content-Type: {content_type}\r\n\r\n"
    ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def main():
    # Uploads are refused under review (their bytes cannot wait in the vault): the agent
    # uploads first, then its delete is held for review.
    body, ctype = multipart("diagram.svg", SVG, "image/svg+xml")
    status, up = http("POST", "/v1/attachments", AGENT, raw=body, content_type=ctype, key="svg-up")
    assert status in (200, 201), (status, up)
    path = up["attachment"]["path"]
    status, _ = http(
        "PATCH",
        "/v1/vault/write-settings?update_mask=write_policy",
        OWNER,
        {"write_policy": "review"},
    )
    assert status == 200, status
    status, queued = http("DELETE", "/v1/notes/Inbox", AGENT, key="svg-chain-delete")
    assert status == 202 and queued["status"] == "queued", (status, queued)
    pending = queued["pending_id"]
    status, link = http("POST", "/v1/attachments:presign", AGENT, {"path": path})
    assert status == 200, (status, link)
    status, before = http("GET", "/v1/writes?status=pending", OWNER)
    assert status == 200, before

    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(accept_downloads=True)
        page = context.new_page()
        page.goto(LINK)
        expect(page.get_by_role("heading", name="Pending writes")).to_be_visible()
        expect(page.locator(f"#write-{pending}")).to_be_visible()

        # The person opens the agent's link: a download, not a page of this origin.
        with page.expect_download() as info:
            try:
                page.goto(link["url"])
            except Exception as e:  # Chromium aborts the navigation it turned into a download
                assert "ERR_ABORTED" in str(e) or "Download is starting" in str(e), e
        download = info.value
        assert open(download.path(), "rb").read() == SVG, "the bytes downloaded are the file"
        assert page.url == URL + "/", page.url
        assert page.title() != "ran"

        # The console, read after the download finished: the delete still waits.
        page.goto(URL + "/")
        expect(page.locator(f"#write-{pending}")).to_be_visible()
        page.goto(URL + "/tokens")
        expect(page.locator("body")).not_to_contain_text("stolen")
        browser.close()

    status, row = http("GET", f"/v1/writes/{pending}", OWNER)
    assert status == 200 and row["status"] == "pending", (status, row)
    assert os.path.exists(os.path.join(VAULT, "Inbox.md")), "the note is still there"
    print("the svg chain failed as it should")


if __name__ == "__main__":
    main()
