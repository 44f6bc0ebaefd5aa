"""`python -m boolcl.train` (and `accelerate launch -m boolcl.train`): see boolcl/train/command.py."""
import sys

from boolcl.train.command import main

sys.exit(main())
