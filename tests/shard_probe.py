"""Run under `accelerate launch --multi_gpu --num_processes 2`: which items each rank trains on.

Prints one line per rank with the item indices its data loader yields in epoch 0.
"""
import torch
from accelerate import Accelerator

from boolcl.train.data import EpochShuffle
from boolcl.distributed import cpu_only_distributed


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
print(f"ITEMS rank={acc.process_index} {' '.join(map(str, seen))}", flush=True)

import torch.distributed as dist  # noqa: E402

dist.barrier()
dist.destroy_process_group()  # a clean exit: gloo threads otherwise abort at interpreter shutdown
