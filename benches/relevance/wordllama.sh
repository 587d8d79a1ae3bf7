#!/bin/sh
# A real static embedding model for `mode=hybrid` that this machine can get: WordLlama's
# l2_supercat (MIT; 32,000 Llama-2 BPE tokens × 256 dimensions, F16; the mean of a
# text's token rows, normalized, as model2vec embeds) ships inside the `wordllama` wheel
# on PyPI. This downloads the wheel once under target/wordllama/ and lays the model out as
# the model2vec folder `NOTEVAULT_EMBED_MODEL` names (`model.safetensors` with an
# `embeddings` tensor, `tokenizer.json`, `config.json`); it prints the folder. Used by
# `cargo bench --bench relevance` runs only; nothing in the daemon or CI downloads it.
#   NOTEVAULT_EMBED_MODEL=$(benches/relevance/wordllama.sh) cargo bench --bench relevance
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
dir="$root/target/wordllama"
model="$dir/model"
if [ ! -f "$model/config.json" ]; then
    mkdir -p "$dir/wheel" "$model"
    (cd "$dir/wheel" && python3 -m pip download --quiet --no-deps 'wordllama==0.4.0.post1' >&2)
    python3 - "$dir" <<'EOF'
import json, pathlib, struct, sys, zipfile
dir = pathlib.Path(sys.argv[1])
wheel = zipfile.ZipFile(next((dir / "wheel").glob("wordllama-*.whl")))
weights = wheel.read("wordllama/weights/l2_supercat_256.safetensors")
n = struct.unpack("<Q", weights[:8])[0]
header = json.loads(weights[8 : 8 + n])
# The same bytes; only the tensor's name changes to model2vec's.
out = json.dumps({"embeddings": header["embedding.weight"]}).encode()
out += b" " * (-len(out) % 8)
model = dir / "model"
(model / "model.safetensors").write_bytes(struct.pack("<Q", len(out)) + out + weights[8 + n :])
(model / "tokenizer.json").write_bytes(
    wheel.read("wordllama/tokenizers/l2_supercat_tokenizer_config.json")
)
(model / "config.json").write_text(
    json.dumps({"model_type": "wordllama-l2_supercat-256", "normalize": True, "hidden_dim": 256})
)
EOF
fi
echo "$model"
