"""Run under `accelerate launch --num_processes 2`: each rank prints the run folder it was given.

Rank 1 waits past a clock second first, so ranks that named the folder themselves would differ.
"""
import time

from accelerate import PartialState

from boolcl.config import compose
from boolcl.distributed import cpu_only_distributed
from boolcl.train.loop import agree_on_run_dir

acc = PartialState(cpu=cpu_only_distributed())
assert acc.num_processes == 2, acc.distributed_type
if acc.process_index == 1:
    time.sleep(1.2)
print(f"RUN_DIR rank={acc.process_index} {agree_on_run_dir(acc, compose(['recipe=tiny']))}", flush=True)

import torch.distributed as dist  # noqa: E402

dist.barrier()
dist.destroy_process_group()  # a clean exit: gloo threads otherwise abort at interpreter shutdown
