"""Continue training a dense retriever: `accelerate launch train.py recipe=not [key=value ...]`.

The same command runs on one CPU, one GPU, or N GPUs. `python train.py recipe=not --cfg job`
prints the resolved config without training.
"""
import os
import sys

import hydra
from omegaconf import DictConfig

from boolcl.config import check_overrides, validate
from boolcl.errors import ConfigError

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@hydra.main(config_path="recipes", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from boolcl.train.run import train

    validate(cfg)
    print(f"saved {train(cfg)}")
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()  # a clean exit for multi-process runs


if __name__ == "__main__":
    try:
        check_overrides(sys.argv[1:])
    except ConfigError as e:
        sys.exit(f"train.py: {e}")
    main()
