"""What legitimately differs between two recordings, replaced by stable placeholders.

The answers are normalized as text, so that every other byte (key order, spacing, escapes)
still counts. Each distinct id is numbered in order of first appearance in its recording
(`<uuid-3>`), so the same id in two places stays equal and a different one shows; times
and durations become `<time>` and `<ms>`; a page token keeps its payload (the query's
fingerprint and the cursor, both deterministic) and loses its MAC (keyed by the vault's
random secret); the console's CSRF tokens are numbered like ids; the temp folders and the
address become `<vault>`, `<state>`, `<base>`.
"""

import base64
import difflib
import json
import re

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"
# A page token: base64url(payload) "." base64url(16-byte MAC).
TOKEN = r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])"
HEX32 = r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])"  # request ids
HEX40 = r"(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])"  # history commits
HEX64 = r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])"  # content digests: kept as they are
MS = r"\"(\w*_ms)\":\s*-?\d+(?:\.\d+)?"
SIGNED = r"((?:expires|signature|nonce)=)[^&\"\s\\]+"
CSRF = r'(?<=name="csrf" value=")[A-Za-z0-9_-]{20,}|(?<="X-CSRF-Token": ")[A-Za-z0-9_-]{20,}'
PATTERN = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in [
    ("csrf", CSRF), ("token", TOKEN), ("uuid", UUID), ("time", TIME), ("hex64", HEX64),
    ("hex40", HEX40), ("hex32", HEX32), ("ms", MS), ("signed", SIGNED)]))


def _tie_sorted(value):
    """`value` with every run of hits of equal `score` in a `results` list put in slug
    order: the index orders tied hits by where they sit in its segments, and segment ids
    are random, so two runs of one build may order a tie either way. Which notes tie and
    the page they land on are still compared. Returns (value, whether anything moved)."""
    moved = False
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            v, m = _tie_sorted(v)
            moved |= m
            if k == "results" and isinstance(v, list) and all(
                    isinstance(x, dict) and "score" in x for x in v):
                ordered = sorted(enumerate(v), key=lambda p: (
                    _run_of(v, p[0]), p[1].get("slug", ""), p[0]))
                ordered = [x for _, x in ordered]
                moved |= ordered != v
                v = ordered
            elif isinstance(v, str) and v[:1] == "{":
                try:
                    inner = json.loads(v)
                except ValueError:
                    inner = None
                if inner is not None and _compact(inner) == v:
                    inner, m = _tie_sorted(inner)
                    if m:
                        v, moved = _compact(inner), True
            out[k] = v
        return out, moved
    if isinstance(value, list):
        items = [_tie_sorted(v) for v in value]
        return [v for v, _ in items], any(m for _, m in items)
    return value, False


def _scores_dropped(value):
    """`value` with the hits of every `results` list in slug order and their scores
    replaced (an answer read after writes: see `scores_after_writes` in golden.py); which
    notes match, their lines and snippets are still compared."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            v = _scores_dropped(v)
            if k == "results" and isinstance(v, list) and all(
                    isinstance(x, dict) and "score" in x for x in v):
                v = sorted((dict(x, score="<score>") for x in v),
                           key=lambda x: x.get("slug", ""))
            elif isinstance(v, str) and v[:1] == "{":
                try:
                    inner = json.loads(v)
                except ValueError:
                    inner = None
                if inner is not None and _compact(inner) == v:
                    v = _compact(_scores_dropped(inner))
            out[k] = v
        return out
    if isinstance(value, list):
        return [_scores_dropped(v) for v in value]
    return value


def _run_of(hits, i):
    """The index of the first hit of the run of equal scores that hit `i` belongs to."""
    while i > 0 and hits[i - 1]["score"] == hits[i]["score"]:
        i -= 1
    return i


def _compact(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _edges(value, head, tail):
    """The search page `value` with its first `head` and last `tail` hits (tied with the
    page before or after) reduced to their score."""
    hits = value["results"]
    edge = [{"score": h["score"], "tied_at_page_edge": True} for h in hits]
    value["results"] = edge[:head] + hits[head:len(hits) - tail] + edge[len(hits) - tail:]
    return value


def canonical_ties(text, head=0, tail=0, drop_scores=False):
    """`text` with tied hits in slug order, when its JSON round-trips byte for byte (else
    unchanged, and a tie shows as a difference)."""
    if '"score"' not in text:
        return text
    rest = text
    if not text.startswith("{"):  # an event stream: the JSON after `data:`
        for line in text.splitlines(keepends=True):
            if line.startswith("data:") and line[5:].strip().startswith("{"):
                rest = line
                break
        else:
            return text
        prefix = "data: " if rest.startswith("data: ") else "data:"
        body = rest[len(prefix):].rstrip("\n")
        end = rest[len(prefix) + len(body):]
        fixed = canonical_ties(body, drop_scores=drop_scores)
        return text.replace(rest, prefix + fixed + end, 1) if fixed != body else text
    try:
        value = json.loads(rest)
    except ValueError:
        return text
    if _compact(value) != rest:
        return text
    if drop_scores:
        return _compact(_scores_dropped(value))
    if head or tail:
        return _compact(_tie_sorted(_edges(value, head, tail))[0])
    value, moved = _tie_sorted(value)
    return _compact(value) if moved else text


def parse_body(content_type, text):
    """The JSON of an answer: its body, or the JSON-RPC message of an event stream."""
    if "text/event-stream" in content_type:
        for line in text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                try:
                    return json.loads(line[5:])
                except ValueError:
                    return None
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


class Normalizer:
    def __init__(self):
        self.seen = {}
        self.literal = []

    def number(self, kind, value):
        table = self.seen.setdefault(kind, {})
        if value not in table:
            table[value] = len(table) + 1
        return f"<{kind}-{table[value]}>"

    def meta(self, meta):
        # Longest first: the state dir and vault sit inside the run's temp folder.
        for key in ("state", "vault", "base"):
            if meta.get(key):
                self.literal.append((meta[key], f"<{key}>"))
        self.literal.sort(key=lambda p: -len(p[0]))

    def _sub(self, m):
        kind = m.lastgroup
        text = m.group(0)
        if kind == "token":
            payload_b64 = text.split(".")[0]
            try:
                payload = base64.urlsafe_b64decode(payload_b64 + "=" * (-len(payload_b64) % 4))
                payload = payload.decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                return self.number("token", text)
            if "\n" not in payload:
                return self.number("token", text)
            fingerprint, _, cursor = payload.partition("\n")
            # The fingerprint hashes the query's parameters, a note's random id among them
            # on some routes: numbered like an id.
            return f"<page:{self.number('query', fingerprint)}|{self.text(cursor)}>"
        if kind == "uuid":
            return self.number("uuid", text)
        if kind == "csrf":
            return self.number("csrf", text)
        if kind == "time":
            return "<time>"
        if kind == "hex64":
            return text
        if kind == "hex40":
            return self.number("sha1", text)
        if kind == "hex32":
            return self.number("rid", text)
        if kind == "ms":
            return f"\"{m.group('ms').split(chr(34))[1]}\":<ms>"
        if kind == "signed":
            return text.split("=")[0] + "=<signed>"
        return text

    def text(self, s):
        for value, placeholder in self.literal:
            s = s.replace(value, placeholder)
        return PATTERN.sub(self._sub, s)

    def body(self, text, head=0, tail=0, drop_scores=False):
        """`text` with the order of equally scored hits made canonical, then normalized."""
        return self.text(canonical_ties(text, head, tail, drop_scores))

    def line(self, rec):
        """A recorded answer, normalized: (request, answer text, status and headers)."""
        head = {"status": rec["status"],
                "headers": {k: self.text(v) for k, v in sorted(rec["headers"].items())}}
        if "text" in rec:
            body = self.body(rec["text"], rec.get("tie_head", 0), rec.get("tie_tail", 0),
                             rec.get("scores_after_writes", False))
        else:
            body = "base64:" + rec["base64"]
        if rec["status"] == 429:
            # Seconds until a rate or budget window frees up: they count from earlier
            # writes, so a slower run waits a second less. That a wait is given stays.
            if "retry-after" in head["headers"]:
                head["headers"]["retry-after"] = "<seconds>"
            body = re.sub(r'"retryDelay":"\d+s"', '"retryDelay":"<seconds>"', body)
        return rec["request"], rec["run"], head, body


def load(path, open_file):
    norm = Normalizer()
    out = []
    with open_file(path, "r") as f:
        for raw in f:
            rec = json.loads(raw)
            if "meta" in rec:
                norm.meta(rec["meta"])
                continue
            out.append(norm.line(rec))
    return out


def pretty(head, body):
    """A readable form for the diff: headers, then the body's JSON indented."""
    lines = [f"status {head['status']}"] + [f"{k}: {v}" for k, v in head["headers"].items()]
    parsed = None
    if not body.startswith("base64:"):
        if body.lstrip().startswith(("{", "[")):
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
        events = [ln[5:] for ln in body.splitlines() if ln.startswith("data:") and ln[5:].strip()]
        if parsed is None and events:
            chunks = []
            for e in events:
                try:
                    chunks.append(json.dumps(json.loads(e), indent=1, ensure_ascii=False))
                except ValueError:
                    chunks.append(e)
            return lines + ["(event stream)"] + "\n".join(chunks).splitlines()
    if parsed is not None:
        return lines + json.dumps(parsed, indent=1, ensure_ascii=False).splitlines()
    return lines + body.splitlines()


def describe(run, request):
    desc = f"[{run}] {request['method']} {request['path']}"
    if "key" in request:
        desc += f"  (Idempotency-Key: {request['key']})"
    if "token" in request:
        desc += f"  (as {request['token']})"
    if "json" in request:
        desc += "\n    body: " + json.dumps(request["json"], ensure_ascii=False)[:300]
    return desc


def compare(a_path, b_path, open_file, max_shown=50):
    a = load(a_path, open_file)
    b = load(b_path, open_file)
    differ = 0
    for i, (x, y) in enumerate(zip(a, b), start=1):
        (req_a, run_a, head_a, body_a), (req_b, run_b, head_b, body_b) = x, y
        if (req_a, run_a) != (req_b, run_b):
            print(f"#{i}: the recordings ask different requests from here on:\n"
                  f"  {describe(run_a, req_a)}\n  {describe(run_b, req_b)}")
            print(f"golden: {differ + 1} difference(s)")
            return 1
        if head_a == head_b and body_a == body_b:
            continue
        differ += 1
        if differ > max_shown:
            continue
        print(f"#{i} {describe(run_a, req_a)}")
        diff = list(difflib.unified_diff(pretty(head_a, body_a), pretty(head_b, body_b),
                                         str(a_path), str(b_path), lineterm="", n=2))
        if not diff:
            diff = ["(the same JSON, written differently)"] + list(difflib.unified_diff(
                [body_a], [body_b], str(a_path), str(b_path), lineterm=""))
        print("\n".join(diff))
        print()
    if len(a) != len(b):
        print(f"golden: {len(a)} answers in {a_path}, {len(b)} in {b_path}")
        differ += 1
    if differ:
        print(f"golden: {differ} of {min(len(a), len(b))} answers differ")
        return 1
    print(f"golden: all {len(a)} answers identical after normalization")
    return 0
