"""Run under `accelerate launch --multi_gpu --num_processes 2`: which texts each rank encodes when
training scores the model (train/periodic_eval.py's shared_encode), and the rows every rank gets back.

Writes ARGV1/rank<i>.json. The encoder is replaced by one whose vector names its text, so a row
out of place shows.
"""
import json
import sys
from pathlib import Path

import numpy as np
from accelerate import Accelerator

from boolcl.distributed import cpu_only_distributed
from boolcl.train import periodic_eval

seen: list[str] = []


def named_vectors(model, texts, **_):
    seen.extend(texts)
    return np.array([[float(t), -float(t)] for t in texts], dtype=np.float32).reshape(len(texts), 2)


class Width2:
    def get_sentence_embedding_dimension(self):
        return 2


periodic_eval.encode = named_vectors
acc = Accelerator(cpu=cpu_only_distributed())
assert acc.num_processes == 2, acc.distributed_type
out = {}
for n in (7, 1):  # 7 texts: slices of 4 and 3; 1 text: the second rank has none
    seen.clear()
    rows = periodic_eval.shared_encode(acc, Width2(), [str(i) for i in range(n)], prompt=None, batch_size=2)
    out[n] = {"seen": list(seen), "rows": rows.tolist()}
(Path(sys.argv[1]) / f"rank{acc.process_index}.json").write_text(json.dumps(out))
acc.wait_for_everyone()

import torch.distributed as dist  # noqa: E402

dist.destroy_process_group()  # a clean exit: gloo threads otherwise abort at interpreter shutdown
