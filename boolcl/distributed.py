"""One place that knows how boolcl's processes find each other (training and encoding alike)."""
from __future__ import annotations

import os


def cpu_only_distributed() -> bool:
    """Several processes but no CUDA: Accelerate must be told to use CPU processes over gloo,
    or each process would silently work alone (`accelerate launch --multi_gpu` on a CPU box)."""
    import torch

    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available()


def process_state():
    """Accelerate's PartialState for this process (one process when not launched)."""
    from accelerate import PartialState

    return PartialState(cpu=cpu_only_distributed())
