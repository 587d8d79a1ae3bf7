#!/usr/bin/env python3
"""A recorded set of requests that proves a refactor changes no answer (issue 42).

    golden.py record --bin TARGET/debug/notevault --out a.jsonl
    golden.py compare benches/golden/baseline.jsonl.xz a.jsonl
    golden.py check --bin B        (record twice, compare: the recording is deterministic)

`record` copies a fixed vault (vault-example plus a deterministic slice of the corpus,
every file's mtime pinned) to a temp dir, starts the daemon on it with a fresh state dir
and a fixed config (open local mode, then auth with static tokens, then a write budget),
waits until the index has caught up, and sends a fixed list of requests in order
(`script.py`, `runs.py`), writing each answer (status, the headers that matter, body) as one JSON
line. A request that depends on an earlier answer (a version id, a page token) names the
value as `@{...}` in its recorded line, so two recordings line up request by request.

`compare` normalizes both recordings (`normalize.py`: ids, times and the like, each
distinct value mapped to a numbered placeholder so that equal values stay equal) and
prints every request whose answers differ with a unified diff; exit status 1 if any do.

Python 3 standard library only.
"""

import argparse
import base64
import gzip
import hashlib
import http.client
import itertools
import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import normalize  # noqa: E402
import runs  # noqa: E402

CORPUS = Path(os.environ.get("NOTEVAULT_CORPUS", REPO.parent / "shared/corpora/realvault.tar.gz"))
# Every n-th markdown file (in sorted order) of each corpus folder joins the vault.
SLICE = {"til": 12, "dendron-site": 10, "PowerShell-Docs": 40, "tldr": 500}
PINNED_MTIME = 1_764_000_000  # 2025-11-24: no answer may depend on when the copy was made
HEADERS = ("content-type", "etag", "location", "retry-after", "www-authenticate",
           "deprecation", "link", "content-disposition", "cache-control",
           "content-security-policy", "x-content-type-options", "allow", "mcp-session-id")


def open_file(path, mode):
    """A recording: plain, `.gz` or `.xz` (the baseline: xz finds the answers repeated
    across runs, such as `/openapi.json`, which gzip's window is too small to see)."""
    if str(path).endswith(".xz"):
        return lzma.open(path, mode + "t", encoding="utf-8",
                         **({"preset": 9} if mode == "w" else {}))
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


_SLICE_CACHE = {}


def corpus_slice() -> Path:
    """The corpus's slice, unpacked once per process (reading the tarball takes seconds)."""
    if "dir" not in _SLICE_CACHE:
        root = Path(tempfile.mkdtemp(prefix="golden-slice-"))
        with tarfile.open(CORPUS) as tar:
            members = sorted((m for m in tar.getmembers()
                              if m.isfile() and m.name.endswith(".md")), key=lambda m: m.name)
            seen = {}
            for m in members:
                parts = m.name.split("/")
                top = parts[1] if len(parts) > 2 else None
                if top not in SLICE or any(p.startswith(".") for p in parts):
                    continue
                seen[top] = seen.get(top, 0) + 1
                if (seen[top] - 1) % SLICE[top]:
                    continue
                target = root / "/".join(parts[1:])
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(m).read())
        _SLICE_CACHE["dir"] = root
    return _SLICE_CACHE["dir"]


def make_vault(dest: Path, corpus: bool) -> int:
    shutil.copytree(REPO / "vault-example", dest)
    sliced = 0
    if corpus and CORPUS.exists():
        shutil.copytree(corpus_slice(), dest / "corpus")
        sliced = sum(len(files) for _, _, files in os.walk(dest / "corpus"))
    elif corpus:
        print(f"golden: no corpus at {CORPUS}; recording vault-example alone", file=sys.stderr)
    for root, dirs, files in os.walk(dest):
        for name in files + dirs:
            os.utime(os.path.join(root, name), (PINNED_MTIME, PINNED_MTIME))
    os.utime(dest, (PINNED_MTIME, PINNED_MTIME))
    return sliced


class Daemon:
    """One daemon on a fresh copy of the vault, and the recorder of its answers."""

    def __init__(self, binary, run, config, out, counter, corpus, waiter=None):
        self.run = run
        self.waiter = waiter
        self.out = out
        self.counter = counter
        self.tmp = Path(tempfile.mkdtemp(prefix=f"golden-{run}-"))
        self.vault = self.tmp / "vault"
        self.state = self.tmp / "state"
        self.sliced = make_vault(self.vault, corpus)
        cfg = self.config = self.tmp / "config.toml"
        cfg.write_text(config)
        self.binary = binary
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("NOTEVAULT_") and k not in (
                   "AUTH_REQUIRED", "RATE_LIMIT_READ_PER_MINUTE", "RATE_LIMIT_WRITE_PER_MINUTE",
                   "IDP_API_KEY", "RUST_LOG")}
        self.proc = subprocess.Popen(
            [binary, "serve", str(self.vault), "--state-dir", str(self.state),
             "--listen", "127.0.0.1:0", "--config", str(cfg)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        self.log = []
        addr = None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace")
            self.log.append(line)
            if " on http://" in line:
                addr = line.split(" on http://")[1].split()[0]
                break
        if addr is None:
            raise SystemExit(f"golden: the daemon did not start:\n{''.join(self.log)}")
        threading.Thread(target=self._drain, daemon=True).start()
        host, port = addr.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.conn = None
        self.ctx = {}
        self.last_headers = {}
        self.settle()
        # Set by the first applied write: from then on BM25's statistics depend on timing
        # (a changed note waits in the index's in-memory overlay, scored with the disk
        # index's statistics, until a flush when writes pause; replaced and deleted
        # documents count until a background merge drops them), and so do the scores' last
        # digits and the order they give.
        self.written = False
        out.write(json.dumps({"meta": {"run": run, "vault": str(self.vault),
                                        "state": str(self.state), "base": f"http://{addr}",
                                        "sliced": self.sliced}}) + "\n")

    def _drain(self):
        for raw in self.proc.stderr:
            self.log.append(raw.decode("utf-8", "replace"))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- HTTP -------------------------------------------------------------------------

    def send(self, method, path, body=None, headers=None):
        """One request on the kept-alive connection: (status, headers, body bytes)."""
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
            try:
                self.conn.request(method, path, body=body, headers=headers or {})
                res = self.conn.getresponse()
                data = res.read()
                if res.getheader("connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return res.status, res.getheaders(), data
            except (http.client.HTTPException, ConnectionError, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def get_json(self, path, token=None):
        token = token or self.waiter
        headers = {"authorization": f"Bearer {token}"} if token else {}
        status, _, data = self.send("GET", path, headers=headers)
        if status != 200:
            raise SystemExit(f"golden: GET {path}: {status} {data[:400]!r}")
        return json.loads(data)

    def settle(self, token=None, limit=120.0):
        """Wait until every recorded change is indexed and in history (unrecorded polls)."""
        deadline = time.monotonic() + limit
        while True:
            st = self.get_json("/v1/index-status", token)
            idx = st.get("search_index", {})
            if (st["indexed_seq"] == st["committed_seq"] and idx.get("not_yet_indexed") == 0
                    and isinstance(idx.get("synced_notes"), int)
                    and st.get("start_scan", {}).get("verifying") is not True
                    and st.get("history", {}).get("pending", 0) == 0
                    and st.get("history", {}).get("backlog", 0) == 0):
                return st
            if time.monotonic() > deadline:
                raise SystemExit(f"golden: the index never caught up: {st}")
            time.sleep(0.01)

    def page_edge_ties(self, sent, parsed, token):
        """How many hits at the start and the end of a search page tie with the page before
        or after it (read now, unrecorded): which of such tied hits land on this page
        depends on the index's random segment order, so `normalize` compares their count
        and score only."""
        marks = {}
        hits = parsed.get("results") if isinstance(parsed, dict) else None
        prev_tail, self.prev_tail = getattr(self, "prev_tail", None), None
        if not hits:
            return marks

        def run(seq):
            return sum(1 for _ in itertools.takewhile(
                lambda h: h["score"] == seq[0]["score"], seq))
        if "page_token=" in sent and prev_tail is not None and hits[0]["score"] == prev_tail:
            marks["tie_head"] = run(hits)
        token_next = parsed.get("next_page_token")
        if token_next:
            base = re.sub(r"&?page_token=[^&]*", "", sent)
            nxt = self.get_json(f"{base}&page_token={urllib.parse.quote(token_next)}", token)
            if nxt.get("results") and nxt["results"][0]["score"] == hits[-1]["score"]:
                marks["tie_tail"] = run(hits[::-1])
            self.prev_tail = hits[-1]["score"]
        return marks

    # ---- templates --------------------------------------------------------------------

    PLACEHOLDER = re.compile(r"@\{([^}]+)\}")

    def resolve(self, name, token):
        kind, _, arg = name.partition(":")
        if kind == "q":  # a path segment, every reserved character encoded (`/` as %2F)
            return urllib.parse.quote(arg, safe="")
        if kind == "v":  # the current version of a note, read now (unrecorded)
            return self.get_json(f"/v1/notes/{urllib.parse.quote(arg, safe='')}?limit=1",
                                 token)["version_id"]
        if kind == "ctx":
            value = self.ctx[arg]
            return "" if value is None else str(value)
        raise KeyError(name)

    def fill(self, value, token):
        if isinstance(value, str):
            return self.PLACEHOLDER.sub(lambda m: self.resolve(m.group(1), token), value)
        if isinstance(value, list):
            return [self.fill(v, token) for v in value]
        if isinstance(value, dict):
            return {k: self.fill(v, token) for k, v in value.items()}
        return value

    # ---- the recorded request ---------------------------------------------------------

    def call(self, method, path, *, json_body=None, raw=None, content_type=None, key=None,
             token=None, headers=None, settle=False, save=None, note=None):
        """Send one request and record it. `path`, `json_body` and header values may hold
        `@{...}` placeholders; the recorded line keeps them unfilled. `save` maps a context
        name to a function of the parsed answer. Returns the parsed JSON answer (or None)."""
        sent_headers = {}
        body = None
        if json_body is not None:
            body = json.dumps(self.fill(json_body, token)).encode()
            sent_headers["content-type"] = "application/json"
        elif raw is not None:
            body = raw
        if content_type:
            sent_headers["content-type"] = content_type
        if key is not None:
            sent_headers["idempotency-key"] = key
        if token:
            sent_headers["authorization"] = token if " " in token else f"Bearer {token}"
        for k, v in (headers or {}).items():
            sent_headers[k] = self.fill(v, token)
        status, res_headers, data = self.send(method, self.fill(path, token), body, sent_headers)
        kept = {}
        self.last_headers = {k.lower(): v for k, v in res_headers}
        for k, v in res_headers:
            k = k.lower()
            if k in HEADERS:
                kept[k] = v if k not in kept else kept[k] + ", " + v
        ctype = kept.get("content-type", "")
        try:
            text = data.decode("utf-8")
            answer = {"text": text}
        except UnicodeDecodeError:
            text = None
            answer = {"base64": base64.b64encode(data).decode()}
        self.counter[0] += 1
        request = {"method": method, "path": path}
        if json_body is not None:
            request["json"] = json_body
        elif raw is not None:
            request["raw_sha"] = hashlib.sha256(raw).hexdigest()
        if key is not None:
            request["key"] = key
        if token:
            request["token"] = token
        if headers:
            request["headers"] = headers
        if note:
            request["note"] = note
        line = {"i": self.counter[0], "run": self.run, "request": request, "status": status,
                "headers": kept, **answer}
        parsed = None
        if text is not None:
            parsed = normalize.parse_body(ctype, text)
        sent = self.fill(path, token)
        if method == "GET" and sent.startswith("/v1/search"):
            line.update(self.page_edge_ties(sent, parsed, token))
        if self.written and text is not None and '"score"' in text:
            line["scores_after_writes"] = True
        self.out.write(json.dumps(line, ensure_ascii=False) + "\n")
        if save:
            for name, pick in save.items():
                try:
                    self.ctx[name] = pick(parsed)
                except (KeyError, TypeError, IndexError):
                    self.ctx[name] = None
        if settle and status < 300:
            self.written = True
        if settle:
            self.settle(token if token and " " not in token else None)
        return parsed


def record(binary, out_path, corpus=True, only=None):
    counter = [0]
    binary = str(Path(binary).resolve())
    with open_file(out_path, "w") as out:
        for run, config, body, waiter in runs.RUNS:
            if only and run not in only:
                continue
            d = Daemon(binary, run, config, out, counter, corpus, waiter)
            try:
                body(d)
            except BaseException:
                sys.stderr.write("".join(d.log[-40:]))
                raise
            finally:
                d.stop()
            print(f"golden: {run}: {counter[0]} requests so far", file=sys.stderr)
    if "dir" in _SLICE_CACHE:
        shutil.rmtree(_SLICE_CACHE.pop("dir"), ignore_errors=True)
    print(f"golden: recorded {counter[0]} requests to {out_path}", file=sys.stderr)
    return counter[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="run the requests against a daemon binary")
    rec.add_argument("--bin", required=True)
    rec.add_argument("--out", required=True, help="JSON lines (.gz, .xz: compressed)")
    rec.add_argument("--no-corpus", action="store_true", help="vault-example alone")
    rec.add_argument("--only", action="append", help="record only this run (repeatable)")
    cmp_ = sub.add_parser("compare", help="normalize two recordings and diff them")
    cmp_.add_argument("a")
    cmp_.add_argument("b")
    cmp_.add_argument("--max", type=int, default=50, help="differences printed in full")
    chk = sub.add_parser("check", help="record a binary twice and compare the two")
    chk.add_argument("--bin", required=True)
    chk.add_argument("--keep", help="folder to keep the two recordings in")
    args = ap.parse_args()
    if args.cmd == "record":
        record(args.bin, args.out, corpus=not args.no_corpus, only=args.only)
    elif args.cmd == "compare":
        sys.exit(normalize.compare(args.a, args.b, open_file, args.max))
    else:
        folder = Path(args.keep or tempfile.mkdtemp(prefix="golden-check-"))
        folder.mkdir(parents=True, exist_ok=True)
        a, b = folder / "first.jsonl", folder / "second.jsonl"
        record(args.bin, a)
        record(args.bin, b)
        sys.exit(normalize.compare(a, b, open_file, 50))


if __name__ == "__main__":
    main()
