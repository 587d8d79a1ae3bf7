#!/usr/bin/env python3
"""Instructions per request of a daemon build, counted by callgrind: a figure that does
not drift with the machine (this 2-core machine's CPU time per request moves by 20-40 %
between runs of the same binary), for comparing two builds of a hot path.

The daemon runs under `valgrind --tool=callgrind --instr-atstart=no` (so its start is not
slowed down), on a vault and state directory of your choice (a warm one: the index
built, the scan cache written). Once the index has caught up and the daemon is idle, one
pass over the requests warms it; then instrumentation is switched on, `--requests`
requests are sent over 8 keep-alive connections, instrumentation is switched off and the
counts are dumped. It prints the user-space instructions per request (the kernel's share
of a request, the socket and the scheduler, is not counted).

    python3 benches/instructions.py --bin target/release/notevault \\
        --vault target/bench-corpus/realvault --state /tmp/state --mix search --requests 920

Mixes: `search` (the search bench's 46 keyword queries, benches/common/mod.rs),
`questions` (the relevance bench's 78 questions, page_size=10), `reads` (line-sliced
reads, `?limit=200`, of 1,000 PowerShell-Docs pages of the vault, a fixed sample).
Needs valgrind (Debian's package) and python3; each request must answer 200.
"""

import argparse
import http.client
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mix_paths(mix, vault):
    if mix == "search":
        src = open(os.path.join(ROOT, "benches/common/mod.rs")).read()
        block = src[src.index("SEARCH_QUERIES") :]
        block = block[: block.index("];")]
        queries = [q.replace('\\"', '"') for q in re.findall(r'^\s*"((?:[^"\\]|\\.)*)",\s*$', block, re.M)]
        return ["/v1/search?q=" + urllib.parse.quote(q, safe="") for q in queries]
    if mix == "questions":
        lines = open(os.path.join(ROOT, "benches/relevance/questions.tsv")).read().splitlines()
        queries = [l.split("\t")[0] for l in lines if l.strip() and not l.startswith("#")]
        return ["/v1/search?page_size=10&q=" + urllib.parse.quote(q, safe="") for q in queries]
    if mix == "reads":
        slugs = []
        for d, _, files in os.walk(os.path.join(vault, "PowerShell-Docs")):
            slugs += [os.path.relpath(os.path.join(d, f), vault)[:-3] for f in files if f.endswith(".md")]
        if not slugs:
            sys.exit(f"no PowerShell-Docs notes under {vault}")
        slugs.sort()
        random.Random(7).shuffle(slugs)
        return ["/v1/notes/" + urllib.parse.quote(s, safe="") + "?limit=200" for s in slugs[:1000]]
    sys.exit(f"unknown mix {mix!r} (search, questions, reads)")


def drive(port, paths, n):
    todo = [paths[i % len(paths)] for i in range(n)]
    lock = threading.Lock()
    failed = []

    def work():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if not todo or failed:
                    return
                path = todo.pop()
            conn.request("GET", path)
            res = conn.getresponse()
            res.read()
            if res.status != 200:
                failed.append(f"{path}: {res.status}")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        sys.exit(f"a request failed: {failed[0]}")


def settled(port):
    try:
        st = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/index-status", timeout=5))
    except Exception:
        return False
    return (
        st["indexed_seq"] == st["committed_seq"]
        and st["search_index"]["not_yet_indexed"] == 0
        and st.get("start_scan", {}).get("verifying") is not True
    )


def cpu_ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--vault", required=True)
    ap.add_argument("--state", required=True, help="the state directory (reused: warm)")
    ap.add_argument("--mix", default="search")
    ap.add_argument("--requests", type=int, default=920)
    ap.add_argument("--port", type=int, default=4199)
    args = ap.parse_args()
    paths = mix_paths(args.mix, args.vault)
    out = tempfile.mkdtemp(prefix="notevault-callgrind-")
    env = dict(os.environ, RATE_LIMIT_READ_PER_MINUTE="0", RATE_LIMIT_WRITE_PER_MINUTE="0")
    daemon = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.out",
         args.bin, "serve", "--listen", f"127.0.0.1:{args.port}", "--state-dir", args.state, args.vault],
        env=env, stdout=subprocess.DEVNULL, stderr=open(f"{out}/daemon.log", "w"),
    )
    try:
        deadline = time.time() + 900
        while not settled(args.port):
            if daemon.poll() is not None or time.time() > deadline:
                sys.exit(f"the daemon did not settle (log: {out}/daemon.log)")
            time.sleep(1)
        # Idle: at most 4 clock ticks of CPU over 2 s (its merges and rescan done).
        before = cpu_ticks(daemon.pid)
        while True:
            time.sleep(2)
            now = cpu_ticks(daemon.pid)
            if now - before <= 4:
                break
            before = now
        drive(args.port, paths, len(paths))
        control = lambda *a: subprocess.run(["callgrind_control", *a, str(daemon.pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        control("-i", "on")
        drive(args.port, paths, args.requests)
        control("-i", "off")
        control("-d")
    finally:
        daemon.terminate()
        daemon.wait()
    # Each dump's count is its `totals:` line (its `summary:` may say 0).
    total = 0
    for name in os.listdir(out):
        if name.startswith("cg.out"):
            lines = open(os.path.join(out, name)).read().splitlines()
            total += max((int(l.split()[1]) for l in lines if l.startswith(("summary:", "totals:"))), default=0)
    print(f"{os.path.basename(args.bin)} {args.mix}: {total / args.requests:,.0f} instructions per request "
          f"({args.requests} requests; callgrind files in {out})")


if __name__ == "__main__":
    main()
