#!/usr/bin/env python3
"""Standalone reproducer of the soak's editor race (benches/soak.rs `editor_race`), stdlib only:
before 02c26ff ~2 % of runs lost one save; since, 0 / 263 (benches/README, "editor race
reproducer").

Usage:
  editor_race.py --bin PATH [--iters N] [--budget SECONDS] [--load K] [--out DIR] [--keep]
  editor_race.py --editor NOTE LOG STOPFILE      (internal: the editor process)

Each iteration: fresh vault (a few notes + soak-race.md), start the daemon, wait until
index-status is settled, run the editor (separate process, 5 ms cadence, even N in place,
odd N via .soak-race.md.swp + rename) against 300 API rounds (GET ?limit=2000, POST :edit
with version_id / counter line / Idempotency-Key), then count `editor N` lines missing.
On a loss the iteration's directory (editor log, API log, daemon log, final note) is kept.
"""
import argparse, hashlib, http.client, json, os, shutil, socket, subprocess, sys
import tempfile, threading, time

SAVES = 300
ROUNDS = 300


# ---------------------------------------------------------------- editor process
def write_file(path, data):
    """Write `data` to `path` as std::fs::write does (O_TRUNC); (time opened, inode)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    opened = time.monotonic()
    inode = os.fstat(fd).st_ino
    try:
        mv = memoryview(data)
        while mv:
            mv = mv[os.write(fd, mv):]
    finally:
        os.close(fd)
    return opened, inode


def editor_main(note, log_path, stop_file):
    d = os.path.dirname(note)
    tmp = os.path.join(d, ".soak-race.md.swp")
    log = []
    n = 0
    while n < SAVES and not os.path.exists(stop_file):
        n += 1
        time.sleep(0.005)
        t0 = time.monotonic()
        try:
            fd = os.open(note, os.O_RDONLY | os.O_CLOEXEC)
            try:
                rino = os.fstat(fd).st_ino
                chunks = []
                while True:
                    b = os.read(fd, 65536)
                    if not b:
                        break
                    chunks.append(b)
                cur = b"".join(chunks)
            finally:
                os.close(fd)
            rerr = None
        except OSError as e:  # Rust: read_to_string(..).unwrap_or_default()
            cur, rino, rerr = b"", None, repr(e)
        t1 = time.monotonic()
        nxt = cur + b"editor %d\n" % n
        if n % 2 == 0:
            t_opened, winode = write_file(note, nxt)
            mode = "inplace"
        else:
            t_opened, winode = write_file(tmp, nxt)
            os.rename(tmp, note)
            mode = "rename"
        t2 = time.monotonic()
        prev_ok = n == 1 or (b"editor %d\n" % (n - 1)) in cur
        log.append({"n": n, "mode": mode, "t_read": t0, "t_read_end": t1, "t_opened": t_opened, "t_written": t2,
                    "read_inode": rino, "write_inode": winode, "read_len": len(cur),
                    "read_err": rerr, "read_sha": hashlib.blake2b(cur, digest_size=8).hexdigest(),
                    "prev_seen": prev_ok,
                    "counter_line": next((l for l in cur.decode(errors="replace").splitlines()
                                          if l.startswith("counter: ")), None)})
    with open(log_path, "w") as f:
        json.dump(log, f)


# ---------------------------------------------------------------- daemon
class Daemon:
    def __init__(self, binp, vault, state, logpath):
        env = dict(os.environ, RATE_LIMIT_READ_PER_MINUTE="0", RATE_LIMIT_WRITE_PER_MINUTE="0")
        self.logf = open(logpath, "w")
        self.proc = subprocess.Popen(
            [binp, "serve", vault, "--listen", "127.0.0.1:0", "--state-dir", state],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.addr = None
        ready = threading.Event()

        def pump():
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace")
                self.logf.write("%.6f %s" % (time.monotonic(), line))
                self.logf.flush()
                if self.addr is None and "on http://" in line:
                    self.addr = line.split("on http://", 1)[1].strip()
                    ready.set()
            ready.set()
        self.th = threading.Thread(target=pump, daemon=True)
        self.th.start()
        if not ready.wait(120) or self.addr is None:
            self.stop()
            raise RuntimeError("daemon did not start serving")
        host, port = self.addr.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.conn = None

    def request(self, method, path, body=None, headers=None):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
            try:
                h = dict(headers or {})
                data = None
                if body is not None:
                    data = json.dumps(body).encode()
                    h["Content-Type"] = "application/json"
                self.conn.request(method, path, body=data, headers=h)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, ConnectionError, socket.timeout):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def settle(self):
        t0 = time.monotonic()
        while True:
            try:
                st, b = self.request("GET", "/v1/index-status")
                if st == 200:
                    s = json.loads(b)
                    if (s.get("indexed_seq") == s.get("committed_seq")
                            and (s.get("history") or {}).get("pending", 0) == 0):
                        return
            except OSError:
                pass
            if time.monotonic() - t0 > 600:
                raise RuntimeError("daemon did not settle")
            time.sleep(0.2)

    def stop(self):
        if self.conn:
            self.conn.close()
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.th.join(5)
        self.logf.close()


# ---------------------------------------------------------------- one iteration
def make_vault(root):
    vault = os.path.join(root, "vault")
    os.makedirs(os.path.join(vault, "sub"))
    for i in range(8):
        with open(os.path.join(vault, f"note-{i}.md"), "w") as f:
            f.write(f"# Note {i}\n\nSome text about topic {i}, with a [[note-{(i+1)%8}]] link.\n")
    with open(os.path.join(vault, "sub", "deeper.md"), "w") as f:
        f.write("# Deeper\n\ntags: #x\n")
    with open(os.path.join(vault, "soak-race.md"), "w") as f:
        f.write("# Race\n\ncounter: 0\n")
    return vault


def iteration(binp, workdir):
    vault = make_vault(workdir)
    state = os.path.join(workdir, "state")
    os.makedirs(state)
    note = os.path.join(vault, "soak-race.md")
    d = Daemon(binp, vault, state, os.path.join(workdir, "daemon.log"))
    try:
        d.settle()
        stop_file = os.path.join(workdir, "stop")
        elog = os.path.join(workdir, "editor.json")
        t_start = time.monotonic()
        ed = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--editor",
                               note, elog, stop_file])
        api = []
        applied = moved = 0
        other = []
        for i in range(ROUNDS):
            tg = time.monotonic()
            st, b = d.request("GET", "/v1/notes/soak-race?limit=2000")
            note_js = json.loads(b)
            items = ((note_js.get("lines") or {}).get("items")) or []
            text = "\n".join(l["text"] for l in items if isinstance(l.get("text"), str))
            line = next((l for l in text.splitlines() if l.startswith("counter: ")), None)
            if line is None:
                api.append({"i": i, "t_get": tg, "get_status": st, "skip": True})
                continue
            try:
                n = int(line[len("counter: "):])
            except ValueError:
                n = 0
            tp = time.monotonic()
            st2, b2 = d.request("POST", "/v1/notes/soak-race:edit",
                                {"version_id": note_js.get("version_id"), "old_string": line,
                                 "new_string": f"counter: {n+1}"},
                                {"Idempotency-Key": f"soak-race-{i}"})
            te = time.monotonic()
            rec = {"i": i, "t_get": tg, "t_post": tp, "t_done": te, "version": note_js.get("version_id"),
                   "counter": n, "status": st2}
            if st2 == 200:
                applied += 1
            elif st2 == 409:
                moved += 1
                rec["body"] = b2.decode(errors="replace")[:300]
            else:
                other.append(st2)
                rec["body"] = b2.decode(errors="replace")[:300]
            api.append(rec)
        open(stop_file, "w").close()
        ed.wait()
        t_end = time.monotonic()
        with open(note, "rb") as f:
            final = f.read().decode(errors="replace")
        with open(elog) as f:
            edlog = json.load(f)
        saves = len(edlog)
        lost = [k for k in range(1, saves + 1) if f"editor {k}\n" not in final]
    finally:
        d.stop()
    with open(os.path.join(workdir, "api.json"), "w") as f:
        json.dump(api, f)
    with open(os.path.join(workdir, "final.md"), "w") as f:
        f.write(final)
    return {"saves": saves, "applied": applied, "moved": moved, "other": other,
            "lost": lost, "secs": t_end - t_start, "edlog": edlog, "api": api,
            "leftover": sorted(x for x in os.listdir(vault) if x.startswith("."))}


def describe_loss(res, workdir):
    out = []
    ed = {e["n"]: e for e in res["edlog"]}
    for k in res["lost"]:
        e = ed[k]
        nxt = ed.get(k + 1)
        out.append(f"  lost editor {k} ({e['mode']}), read_inode={e['read_inode']} write_inode={e['write_inode']}"
                   f" t_written={e['t_written']:.6f} open took {(e.get('t_opened', e['t_read_end'])-e['t_read_end'])*1e6:.0f}us")
        if nxt:
            out.append(f"    next save {k+1} ({nxt['mode']}) read at {nxt['t_read']:.6f}: inode={nxt['read_inode']}"
                       f" saw editor {k}: {nxt['prev_seen']} err={nxt['read_err']}")
        lo, hi = e["t_read"] - 0.05, e["t_written"] + 0.05
        for a in res["api"]:
            if "t_post" in a and a["t_done"] >= lo and a["t_post"] <= hi:
                out.append(f"    api round {a['i']}: post {a['t_post']:.6f}-{a['t_done']:.6f}"
                           f" counter {a['counter']} -> {a['status']} {a.get('body', '')[:160]}")
    return "\n".join(out)


def cpu_burner():
    while True:
        pass


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--editor":
        editor_main(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--budget", type=float, default=600, help="stop starting iterations after this many seconds")
    ap.add_argument("--load", type=int, default=0, help="busy-loop processes in the background")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "target", "editor-race"))
    ap.add_argument("--label", default=None)
    ap.add_argument("--keep", action="store_true", help="keep every iteration's directory")
    a = ap.parse_args()
    label = a.label or f"{os.path.basename(os.path.dirname(a.bin))}-load{a.load}"
    os.makedirs(a.out, exist_ok=True)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.load)]
    t0 = time.monotonic()
    runs = losses = 0
    times = []
    summary = open(os.path.join(a.out, f"{label}.txt"), "a")

    def say(s):
        print(s, flush=True)
        summary.write(s + "\n")
        summary.flush()
    try:
        for it in range(a.iters):
            if time.monotonic() - t0 > a.budget:
                break
            wd = tempfile.mkdtemp(prefix=f"race-{label}-{it}-")
            try:
                res = iteration(a.bin, wd)
            except Exception as e:
                say(f"[{label}] iter {it}: ERROR {e!r} (dir {wd})")
                continue
            runs += 1
            times.append(res["secs"])
            line = (f"[{label}] iter {it}: {res['saves']} saves, {res['applied']} applied, "
                    f"{res['moved']} moved, other={res['other']}, lost={res['lost']}, "
                    f"{res['secs']:.2f}s, leftover={res['leftover']}")
            say(line)
            if res["lost"] or res["other"]:
                losses += bool(res["lost"])
                keep = os.path.join(a.out, f"{label}-iter{it}")
                shutil.copytree(wd, keep, symlinks=True, dirs_exist_ok=True)
                say(describe_loss(res, wd) + f"\n  kept in {keep}")
            if not a.keep:
                shutil.rmtree(wd, ignore_errors=True)
    finally:
        for b in burners:
            b.kill()
            b.wait()
        if times:
            say(f"[{label}] SUMMARY: {losses} / {runs} runs lost an editor save; "
                f"race time mean {sum(times)/len(times):.2f}s (min {min(times):.2f}, max {max(times):.2f}); "
                f"wall {time.monotonic()-t0:.0f}s")
        summary.close()


if __name__ == "__main__":
    main()
