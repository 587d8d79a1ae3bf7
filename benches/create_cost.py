#!/usr/bin/env python3
"""The daemon's CPU (user + system) and minor page faults per create, read from
/proc/<pid>/stat around a run of creates on a warm vault, the work the creates leave
behind (index publishes and flushes, history commits) included: after the creates it
waits until the daemon is idle again. For comparing builds of the write path where
latency drifts with the machine but CPU per operation drifts less.

    python3 benches/create_cost.py --bin target/release/notevault \\
        --vault /tmp/vault --state /tmp/state --creates 300 --clients 1

The vault is written to (a folder `cost-<run>/` of new notes per run): use a copy (`cp -al`
of the corpus makes one cheaply). Alternate the builds on one vault, each with its own
state directory; each run starts the daemon and waits for its index and an idle moment
before it counts.
"""

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request


def stat(pid):
    """(CPU ticks, minor faults) of the process."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[7])


def wait_idle(pid):
    """Until the process used at most 2 clock ticks over 2 s."""
    before = stat(pid)[0]
    while True:
        time.sleep(2)
        now = stat(pid)[0]
        if now - before <= 2:
            return
        before = now


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--vault", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--creates", type=int, default=300)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--port", type=int, default=4198)
    args = ap.parse_args()
    env = dict(os.environ, RATE_LIMIT_READ_PER_MINUTE="0", RATE_LIMIT_WRITE_PER_MINUTE="0")
    daemon = subprocess.Popen(
        [args.bin, "serve", "--listen", f"127.0.0.1:{args.port}", "--state-dir", args.state, args.vault],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 600
        while True:
            if daemon.poll() is not None or time.time() > deadline:
                sys.exit("the daemon did not start")
            try:
                st = json.load(urllib.request.urlopen(f"http://127.0.0.1:{args.port}/v1/index-status", timeout=5))
                if st["indexed_seq"] == st["committed_seq"] and st["search_index"]["not_yet_indexed"] == 0:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        wait_idle(daemon.pid)
        ticks0, faults0 = stat(daemon.pid)
        run = str(time.time_ns())
        todo = list(range(args.creates))
        lock = threading.Lock()
        failed, latencies = [], []

        def work():
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
            while True:
                with lock:
                    if not todo or failed:
                        return
                    i = todo.pop()
                body = json.dumps({
                    "slug": f"cost-{run}/n{i}",
                    "content": f"# Cost {i}\n\nA note about quokkas, number {i}, with a few words to index.\n",
                    "agent_id": "bench",
                })
                started = time.perf_counter()
                conn.request("POST", "/v1/notes", body,
                             {"Content-Type": "application/json", "Idempotency-Key": f"{run}-{i}"})
                res = conn.getresponse()
                text = res.read()
                latencies.append(time.perf_counter() - started)
                if res.status != 201:
                    failed.append(f"create {i}: {res.status} {text[:200]!r}")

        threads = [threading.Thread(target=work) for _ in range(args.clients)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
        if failed:
            sys.exit(failed[0])
        # What the creates left to do (the index's flush after its idle second, history).
        time.sleep(1.5)
        wait_idle(daemon.pid)
        ticks1, faults1 = stat(daemon.pid)
        hz = os.sysconf("SC_CLK_TCK")
        latencies.sort()
        print(f"{os.path.basename(args.bin)}: {args.creates} creates by {args.clients} client(s): "
              f"CPU {(ticks1 - ticks0) / hz * 1000 / args.creates:.2f} ms a create, "
              f"{(faults1 - faults0) / args.creates:.0f} minor faults a create, "
              f"{args.creates / wall:.0f}/s, p50 {latencies[len(latencies) // 2] * 1000:.2f} ms")
    finally:
        daemon.terminate()
        daemon.wait()


if __name__ == "__main__":
    main()
