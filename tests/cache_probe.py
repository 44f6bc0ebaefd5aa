"""Run under `accelerate launch --multi_gpu --num_processes 2`: encode a corpus into the shard cache.

argv: MODEL_DIR CACHE_DIR OUT_DIR. Each rank writes OUT_DIR/rank<i>.txt: shards it encoded, digest of what it read.
"""
import hashlib
import sys
from pathlib import Path

from accelerate import PartialState

from boolcl.distributed import cpu_only_distributed
from boolcl.retrieval.cache import encode_cached
from boolcl.retrieval.encode import encode
from boolcl.retrieval.models import load_model

state = PartialState(cpu=cpu_only_distributed())
assert state.num_processes == 2, state.distributed_type
model = load_model(sys.argv[1])
texts = [f"passage number {i} about topic {i % 3}" for i in range(10)]
emb, info = encode_cached(lambda ts: encode(model, ts, show_progress=False), texts, Path(sys.argv[2]), shard_size=3)
(Path(sys.argv[3]) / f"rank{state.process_index}.txt").write_text(
    f"encoded={info['encoded_here']} digest={hashlib.md5(emb.round(5).tobytes()).hexdigest()}")
state.wait_for_everyone()
import torch.distributed as dist  # noqa: E402

dist.destroy_process_group()
