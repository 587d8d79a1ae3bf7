"""What the console's browser scripts share: the daemon's address, an HTTP client beside
the browser, and Debian's Chromium launched as this machine allows (no network beyond
loopback, no sandbox as root)."""

import json
import os
import urllib.error
import urllib.request

URL = os.environ["NV_URL"]
CHROMIUM = os.environ.get("NV_CHROMIUM", "/usr/bin/chromium")


def http(method, path, token, body=None, key=None, raw=None, content_type=None):
    """(status, JSON body) of one request with `token`; `raw` bytes instead of JSON."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(URL + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", content_type or "application/json")
    if key:
        req.add_header("Idempotency-Key", key)
    try:
        with urllib.request.urlopen(req) as res:
            return res.status, json.loads(res.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def launch(playwright):
    """Headless Chromium, with the flags that keep it off the closed network."""
    return playwright.chromium.launch(
        executable_path=CHROMIUM,
        args=[
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    )
