"""The web console in a real browser: headless Chromium (Debian's), driven by Playwright.

Run by tests/it/console.rs against a daemon it started (auth required, an agent's
static token, a fresh vault). Every step asserts what a person sees, and the files on disk
where a decision changes them. Screenshots of the main pages go to NV_SHOTS.

Environment: NV_URL (the daemon), NV_LINK (a one-time sign-in link), NV_VAULT (the vault
folder), NV_AGENT_TOKEN (a token with notes.write), NV_SHOTS (a folder), NV_CHROMIUM.
"""

import os
import sys
import time

from playwright.sync_api import expect, sync_playwright

from nv import URL, http, launch

LINK = os.environ["NV_LINK"]
VAULT = os.environ["NV_VAULT"]
AGENT = os.environ["NV_AGENT_TOKEN"]
SHOTS = os.environ["NV_SHOTS"]


def shot(page, name, full_page=True):
    page.screenshot(path=os.path.join(SHOTS, name + ".png"), full_page=full_page)


def main():
    os.makedirs(SHOTS, exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        page = context.new_page()
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        console_errors = []
        # Script errors and Content-Security-Policy refusals (a page's own 401 or 400 is
        # logged as a failed load: those are the statuses asserted below).
        page.on(
            "console",
            lambda m: m.type == "error"
            and not m.text.startswith("Failed to load resource")
            and console_errors.append(m.text),
        )

        # Not signed in: every page is the sign-in page.
        res = page.goto(URL + "/")
        assert res.status == 401, res.status
        expect(page.get_by_role("heading", name="Sign in to notevault")).to_be_visible()

        # The printed link signs in, once (a page that goes on to the console by itself).
        page.goto(LINK)
        expect(page.get_by_role("heading", name="Pending writes")).to_be_visible()
        assert page.url == URL + "/", page.url
        cookies = context.cookies()
        session = [c for c in cookies if c["name"] == "notevault_session"]
        assert session and session[0]["httpOnly"] and session[0]["sameSite"] == "Strict", cookies

        # Hold agents' writes for review, from the settings page.
        page.get_by_role("link", name="Write settings").click()
        page.locator("input[value=review]").check()
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("status")).to_contain_text("Write settings saved")
        assert page.locator("input[value=review]").is_checked()

        # An agent queues two writes while the review page is open: both appear.
        page.get_by_role("link", name="Review").click()
        expect(page.locator("#no-pending")).to_be_visible()
        status, created = http(
            "POST",
            "/v1/notes",
            AGENT,
            {
                "slug": "from-agent",
                "agent_id": "claude",
                "content": "# <b>Bold</b> & <script>alert('x')</script>\n\nA proposal from an agent.\n",
            },
            key="browser-1",
        )
        assert status == 202, (status, created)
        status, inbox = http("GET", "/v1/notes/Inbox?limit=1", AGENT)
        assert status == 200, inbox
        status, edit = http(
            "POST",
            "/v1/notes/Inbox:edit",
            AGENT,
            {
                "version_id": inbox["version_id"],
                "old_string": "Quick captures.",
                "new_string": "Quick captures, reviewed.",
                "agent_id": "claude",
            },
            key="browser-2",
        )
        assert status == 202, (status, edit)
        first = page.locator(f"#write-{created['pending_id']}")
        second = page.locator(f"#write-{edit['pending_id']}")
        expect(first).to_be_visible(timeout=15000)
        expect(second).to_be_visible(timeout=15000)
        # The title with markup is text, never markup.
        expect(first.locator("pre.diff")).to_contain_text("<script>alert('x')</script>")
        assert first.locator("script").count() == 0
        expect(second.locator("pre.diff .del")).to_contain_text("Quick captures.")
        expect(second.locator("pre.diff .add")).to_contain_text("Quick captures, reviewed.")
        shot(page, "review-escaping")
        # Times read in the browser's zone, the UTC instant kept in the tooltip.
        when = first.locator("time")
        assert when.get_attribute("title") == when.get_attribute("datetime"), when.get_attribute("title")
        assert not when.inner_text().endswith("Z"), when.inner_text()

        # A second tab sees the same write; the first tab approves it. The second tab is a
        # stale one: its list does not refresh (its polls are cut), so it still offers
        # the write when the first tab has decided it.
        other = context.new_page()
        other.route("**/pending?*", lambda route: route.abort())
        other.goto(URL + "/")
        other_first = other.locator(f"#write-{created['pending_id']}")
        expect(other_first).to_be_visible()

        note = os.path.join(VAULT, "from-agent.md")
        assert not os.path.exists(note)
        notes_before = int(page.locator("#overview strong").first.inner_text())
        first.get_by_role("button", name="Approve").click()
        expect(page.locator(f"#write-{created['pending_id']}")).to_contain_text("Approved")
        with open(note, encoding="utf-8") as f:
            assert "A proposal from an agent." in f.read()
        # Without a reload: the count in the navigation, the vault's note count and the
        # decided list follow the decision.
        expect(page.locator("#pending-badge")).to_have_text("1")
        expect(page.locator("#overview strong").first).to_have_text(str(notes_before + 1))
        expect(page.locator("#decided")).to_contain_text("from-agent.md")
        expect(page.locator("#decided")).to_contain_text("applied")

        # The other tab's approve of the decided write changes nothing and says so.
        other_first.get_by_role("button", name="Approve").click()
        expect(other.locator(f"#write-{created['pending_id']}")).to_contain_text(
            "already decided"
        )
        other.close()

        inbox_path = os.path.join(VAULT, "Inbox.md")
        with open(inbox_path, encoding="utf-8") as f:
            before = f.read()
        second.get_by_role("button", name="Reject").click()
        expect(page.locator(f"#write-{edit['pending_id']}")).to_contain_text("Rejected")
        with open(inbox_path, encoding="utf-8") as f:
            assert f.read() == before, "a rejected edit changed the note"

        expect(page.locator("#pending-badge")).to_be_hidden()
        expect(page.locator("#decided")).to_contain_text("rejected")

        # Decided writes are listed after a reload.
        page.reload()
        expect(page.locator("table.rows")).to_contain_text("applied")
        expect(page.locator("table.rows")).to_contain_text("rejected")

        # Bulk: an agent queues three notes; two selected are approved at once, each its
        # own decision recorded with its decider; the third waits.
        bulk = []
        for i in range(3):
            status, queued = http(
                "POST",
                "/v1/notes",
                AGENT,
                {
                    "slug": f"ideas/idea-{i}",
                    "agent_id": "claude",
                    "content": f"# Idea {i}\n\nA small idea from the agent, number {i}.\n",
                },
                key=f"browser-bulk-{i}",
            )
            assert status == 202, (status, queued)
            bulk.append(queued["pending_id"])
        for pending_id in bulk:
            expect(page.locator(f"#write-{pending_id}")).to_be_visible(timeout=15000)
        expect(page.locator("#pending-badge")).to_have_text("3")
        # The README's screenshot (docs/console-review.png): a clean queue, the first
        # screenful (the decided list below holds the escaping test's title).
        shot(page, "review", full_page=False)
        for pending_id in bulk[:2]:
            page.locator(f"#write-{pending_id} input.select").check()
        page.get_by_role("button", name="Approve selected").click()
        expect(page.get_by_role("status")).to_contain_text("Decided the selected writes")
        for i in range(2):
            assert os.path.exists(os.path.join(VAULT, "ideas", f"idea-{i}.md")), i
        assert not os.path.exists(os.path.join(VAULT, "ideas", "idea-2.md"))
        expect(page.locator(f"#write-{bulk[2]}")).to_be_visible()
        expect(page.locator("#pending-badge")).to_have_text("1")
        decided_rows = page.locator("#decided tbody tr")
        expect(decided_rows.filter(has_text="idea-0.md")).to_contain_text("a person signed in to the console")
        expect(decided_rows.filter(has_text="idea-1.md")).to_contain_text("applied")
        # Nothing selected: nothing decided, and the page says so.
        page.get_by_role("button", name="Reject selected").click()
        expect(page.get_by_role("alert")).to_contain_text("select writes first")
        expect(page.locator(f"#write-{bulk[2]}")).to_be_visible()

        # A token for a new agent: shown once, with the MCP configuration; it works from
        # an HTTP client, and a session-only route refuses it.
        page.get_by_role("link", name="Access tokens").click()
        page.get_by_label("Name").fill("claude-code")
        page.get_by_label("notes.write", exact=False).check()
        page.get_by_role("button", name="Create token").click()
        token = page.locator("#new-token").inner_text().strip()
        assert token.startswith("nvp_"), token
        expect(page.locator("#mcp-config")).to_contain_text("/mcp")
        expect(page.locator("#mcp-config")).to_contain_text("Bearer " + token)
        shot(page, "tokens")
        status, listing = http("GET", "/v1/notes?page_size=1", token)
        assert status == 200, (status, listing)
        status, refused = http("GET", "/v1/audit-events", token)
        assert status == 403 and refused["reason"] == "CREDENTIAL_FORBIDDEN", refused
        # Reloading the list never shows the token again.
        page.goto(URL + "/tokens")
        assert token not in page.content()
        expect(page.locator("table.rows")).to_contain_text("claude-code")

        # Activity shows what happened, as ids and counters.
        page.get_by_role("link", name="Activity").click()
        table = page.locator("table.rows")
        for kind in ["write.queued", "write.approved", "write.rejected", "token.created", "session.signed_in"]:
            expect(table).to_contain_text(kind)
        assert "A proposal from an agent" not in page.content()
        # Rows name the note a decision was about and the token a change was about.
        expect(table).to_contain_text("from-agent.md")
        expect(table).to_contain_text("token claude-code")
        shot(page, "activity")

        page.get_by_role("link", name="Vault").click()
        expect(page.get_by_role("heading", name="Purge the daemon's data")).to_be_visible()
        assert "`" not in page.locator("main").inner_text(), "markdown backticks on the page"
        shot(page, "vault")

        # A purge with the wrong name changes nothing.
        page.get_by_label("Type the vault's name", exact=False).fill("not-the-name")
        page.get_by_role("button", name="Purge").click()
        expect(page.get_by_role("alert")).to_contain_text("Nothing purged")

        # A post without the CSRF token (another page's form) is refused; nothing changes.
        res = page.request.post(
            URL + "/settings",
            form={"write_policy": "auto_apply", "write_budget": "0"},
        )
        assert res.status == 403, res.status
        status, settings = http("GET", "/v1/vault/write-settings", AGENT)
        assert settings["write_policy"] == "review", settings

        # A phone-width screen still shows the review page's actions.
        page.set_viewport_size({"width": 390, "height": 844})
        page.get_by_role("link", name="Review").click()
        expect(page.get_by_role("button", name="Approve selected")).to_be_visible()
        shot(page, "review-phone")
        # Nothing wider than the screen: no sideways scrolling, on any page.
        for name in ["Review", "Access tokens", "Write settings", "Activity", "Vault"]:
            page.get_by_role("link", name=name).first.click()
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (name, width)
        page.get_by_role("link", name="Activity").click()
        shot(page, "activity-phone")

        # Sign out: the pages are refused, and the used link does not sign in again.
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("heading", name="Sign in to notevault")).to_be_visible()
        res = page.goto(URL + "/tokens")
        assert res.status == 401, res.status
        page.goto(LINK)
        expect(page.get_by_role("alert")).to_contain_text("used already")
        res = page.goto(URL + "/")
        assert res.status == 401, res.status

        assert not dialogs, f"a script ran: {dialogs}"
        assert not console_errors, f"console errors: {console_errors}"
        browser.close()
    print("console browser test: ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"console browser test failed: {e}", file=sys.stderr)
        raise
