"""Run under `accelerate launch --multi_gpu --num_processes 2`: which items each rank trains on (a file per rank).

Writes ARGV1/rank<i>.txt: the item indices that rank's data loader yields in epoch 0.
"""
import sys
from pathlib import Path

import torch
from accelerate import Accelerator

from boolcl.distributed import cpu_only_distributed
from boolcl.train.sampling import EpochShuffle


class Indices(torch.utils.data.Dataset):
    def __len__(self):
        return 23

    def __getitem__(self, i):
        return i


acc = Accelerator(cpu=cpu_only_distributed())
assert acc.num_processes == 2, acc.distributed_type
loader = acc.prepare(torch.utils.data.DataLoader(Indices(), batch_size=3, sampler=EpochShuffle(23, 0), drop_last=True))
loader.set_epoch(0)
seen = [int(i) for batch in loader for i in batch]
(Path(sys.argv[1]) / f"rank{acc.process_index}.txt").write_text(" ".join(map(str, seen)))

import torch.distributed as dist  # noqa: E402

dist.barrier()
dist.destroy_process_group()  # a clean exit: gloo threads otherwise abort at interpreter shutdown
