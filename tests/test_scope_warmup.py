"""scripts/scope_warmup.py: the head's warm-up alone, as train() sets it up, scored on the held-out questions."""
import json
import subprocess
import sys

import pytest
from conftest import ROOT

from boolcl.config import compose
from boolcl.train import loop


def test_the_script_fits_the_head_and_scores_every_question_type(tiny_model_dir):
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "scope_warmup.py"), f"model={tiny_model_dir}",
                          "train.scope.warmup=3", "train.scope.warmup_until=0", "train.scope.warmup_rows=32",
                          "--seeds", "1"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert (row["seed"], row["steps"], row["rows"]) == (1, 3, 32)
    for key in ("not_token_accuracy", "not_excluded_recall", "and_false_exclusions", "or_false_exclusions"):
        assert 0 <= row[key] <= 1, key


def test_decomposition_targets_without_the_start_are_refused(tiny_model_dir):
    cfg = compose(["recipe=not_plus_tiny", f"model={tiny_model_dir}", "train.eval_every=0", "train.negation.pairs=0"])
    model, _ = loop.build_model(cfg)
    with pytest.raises(ValueError, match="needs `start`"):
        loop.build_data(cfg, model, cfg.train.batch_size, None, None)
