#!/usr/bin/env bash
# Issue 17's GPU measurements in one call of the device tool (an H200 lent for 15 minutes, all calls
# together, start included; this runs in about 9). Two steps:
#
#   bash scripts/gpu_issue17.sh --prepare      # here: the wheels the device lacks, and a tokenizer, into .whl/
#   (device tool) run  command="bash scripts/gpu_issue17.sh"  carry=[".whl"]  timeout_s=600
#
# Each measurement has its own time limit, so one that hangs leaves the others' figures; logs and
# JSON land in $OUT. The README's Benchmarks section says what each one is checked against.
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--prepare" ]]; then  # on this machine (PyPI reachable), not on the device
    grep -qx "/.whl/" .git/info/exclude 2>/dev/null || echo "/.whl/" >> .git/info/exclude
    mkdir -p .whl
    # what boolcl's training and bench paths import that the device's image lacks or may hold in a version datasets
    # refuses (README of the device tool), at the versions this project is tested with; antlr4 4.9.3 (omegaconf's)
    # is published only as a source archive
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 hydra-core==1.3.8 omegaconf==2.3.1 \
        pyarrow==26.0.1 fsspec==2026.9.0 || exit 1  # datasets 5.2 wants pyarrow >= 24, fsspec <= 2026.9
    python3 -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3 || exit 1
    # the packaged MiniLM's tokenizer (bert-base-uncased's vocabulary) without its 90 MB of weights
    python3 - <<'EOF' || exit 1
import shutil
from pathlib import Path
from transformers import AutoTokenizer
from boolcl.retrieval.models import packaged_model_dir
shutil.rmtree(".whl/tokenizer", ignore_errors=True)
AutoTokenizer.from_pretrained(str(packaged_model_dir())).save_pretrained(".whl/tokenizer")
EOF
    du -sh .whl && ls .whl
    exit 0
fi

OUT=${OUT:-/tmp/gpu-issue17}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export BOOLCL_TEST_TOKENIZER=$PWD/.whl/tokenizer BOOLCL_CACHE=/tmp/boolcl-cache
TOK=$PWD/.whl/tokenizer
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/gpu.txt"

echo "== packed attention on CUDA: varlen (bf16) and nested tensors (fp32) against padded batches"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_packing.py -k "cuda or padded_embeddings" 2>&1 | tee "$OUT/packing_tests.log"

echo "== plain training: padded vs padding-free, mixed lengths, bf16, batch 64, max length 256 (target: MFU >= 20%)"
timeout 240 python3 scripts/bench_train.py --steps 60 --lengths mixed --packed --compile --tokenizer "$TOK" \
    --json "$OUT/bench_train.json" 2>&1 | grep -v -E "it/s\]|step/s|text/s" | tail -40 | tee "$OUT/bench_train.log"

echo "== not_plus against the paper-style recipe per step, DistilBERT-base, bf16 (target: <= 1.3x)"
timeout 150 python3 scripts/bench_not_aware.py --only paper-not not_plus --model distilbert-random --tokenizer "$TOK" \
    --batch 64 --json "$OUT/bench_not_aware.json" train.max_length=256 train.mixed_precision=bf16 2>&1 \
    | grep -v -E "it/s\]|step/s|text/s" | tail -30 | tee "$OUT/bench_not_aware.log"

echo "== the scope head's share of encoding time, batch 512, bf16 (target: <= 10%)"
timeout 150 python3 scripts/bench_encode.py --passages 100000 --batch 512 --scope --tokenizer "$TOK" 2>&1 \
    | grep -v -E "it/s\]|step/s|text/s" | tail -30 | tee "$OUT/bench_encode.log"
