"""Run under `accelerate launch --num_processes 2`: each rank writes the run folder it was given.

To ARGV1/rank<i>.txt (files, not stdout: two processes' lines can interleave). Rank 1 waits
past a clock second first, so ranks that named the folder themselves would differ.
"""
import sys
import time
from pathlib import Path

from accelerate import PartialState

from boolcl.config import compose
from boolcl.distributed import cpu_only_distributed
from boolcl.train.loop import agree_on_run_dir

acc = PartialState(cpu=cpu_only_distributed())
assert acc.num_processes == 2, acc.distributed_type
if acc.process_index == 1:
    time.sleep(1.2)
(Path(sys.argv[1]) / f"rank{acc.process_index}.txt").write_text(str(agree_on_run_dir(acc, compose(["recipe=tiny"]))))

import torch.distributed as dist  # noqa: E402

dist.barrier()
dist.destroy_process_group()  # a clean exit: gloo threads otherwise abort at interpreter shutdown
