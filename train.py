"""Continue training a dense retriever from a checkout: `accelerate launch train.py recipe=not [key=value ...]`.

The same as `accelerate launch -m boolcl.train ...`, which also works from an installed boolcl
(boolcl/train/command.py). `python train.py recipe=not --cfg job` prints the resolved config
without training.
"""
import sys

from boolcl.train.command import main

if __name__ == "__main__":
    sys.exit(main())
