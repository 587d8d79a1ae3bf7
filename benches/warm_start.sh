#!/bin/bash
# One warm start of a daemon build on a vault and state dir it has served before:
# spawn -> first 200 of GET /v1/notes, then -> `start_scan.verifying` false, and the
# daemon's `vault scanned` line. Run it alternately for two builds, each with its own
# state dir (a copy), after one start of each that writes its scan cache.
# usage: benches/warm_start.sh BIN VAULT STATE [PORT]
set -u
BIN=$1 VAULT=$2 STATE=$3 PORT=${4:-4711}
LOG=$(mktemp)
while ss -ltn | grep -q ":$PORT "; do sleep 0.1; done
t0=$(date +%s%N)
NOTEVAULT_LOG=notevault=info,notevault::access=warn "$BIN" serve "$VAULT" --state-dir "$STATE" \
  --listen "127.0.0.1:$PORT" > "$LOG" 2>&1 &
PID=$!
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/notes")" = 200 ]; do
  kill -0 $PID 2>/dev/null || { echo "the daemon stopped"; tail -3 "$LOG"; exit 1; }
  sleep 0.005
done
t1=$(date +%s%N)
until curl -s "http://127.0.0.1:$PORT/v1/index-status" | grep -q '"verifying":false'; do
  sleep 0.02
done
t2=$(date +%s%N)
echo "serving $(( (t1 - t0) / 1000000 )) ms, verified $(( (t2 - t0) / 1000000 )) ms"
# The verify writes the scan cache the next start takes: stop once it is there.
for _ in $(seq 1 3000); do
  [ -n "$(find "$STATE/scan.cache" -newermt "@$(( t0 / 1000000000 ))" 2>/dev/null)" ] && break
  sleep 0.02
done
kill $PID
wait $PID
grep -o 'vault scanned.*' "$LOG" | head -1
rm -f "$LOG"
