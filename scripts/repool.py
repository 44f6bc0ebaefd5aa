"""A copy of a scope-pooled model folder that pools its head's token classes by another rule.

    python scripts/repool.py results/parts/runs/tokens-s1 results/repool/tokens-s1-parts --mode parts
    python scripts/repool.py results/generalisation/runs/not_plus-s1 results/repool/np-s1-d0.6 --drop 0.6
    python scripts/repool.py results/generalisation/runs/not_plus-s1 results/repool/np-s1-shift1 --shift 1
    boolcl evaluate results/repool/tokens-s1-parts data=sample eval.max_length=128

The encoder and the head stay as trained; only `ScopePooling.mode`, `.drop` and/or `.shift`
(pooling.py) change, in the copy's `modules.json`-listed ScopePooling config. This is how
docs/not_plus.md's "Where not_plus's NOT MRR@10 goes" scores a model trained with `tokens` pooling
under `parts`, and how "Moving along the trade" scores trained models at other subtraction strengths
and with the exclusion classes' logits shifted.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

from boolcl.files import new_folder
from boolcl.pooling import MODES, check_mode

SCOPE_TYPE = "boolcl.pooling.ScopePooling"


def repool(src: Path, out: Path, mode: str | None = None, drop: float | None = None,
           shift: float | None = None) -> Path:
    """Copy `src` to `out` with the scope head's mode, drop and/or shift set; returns the changed config file."""
    if mode is None and drop is None and shift is None:
        raise SystemExit("nothing to change: give --mode, --drop, --shift or several")
    if mode is not None:
        try:
            check_mode(mode)
        except ValueError as err:
            raise SystemExit(f"--mode: {err}") from None
    if drop is not None and not drop >= 0:
        raise SystemExit(f"--drop is how hard the excluded part is subtracted (>= 0), got {drop}")
    if shift is not None and not math.isfinite(shift):
        raise SystemExit(f"--shift is added to the exclusion classes' logits (a finite number), got {shift}")
    if not (src / "modules.json").is_file():
        raise SystemExit(f"{src}: not a model folder (no modules.json)")
    modules = json.loads((src / "modules.json").read_text())
    heads = [m for m in modules if m.get("type") == SCOPE_TYPE]
    if not heads:
        raise SystemExit(f"{src}: this model has no scope head ({SCOPE_TYPE} is not in its modules.json)")
    if out.exists():
        raise SystemExit(f"{out} exists; choose another folder")
    with new_folder(out) as partial:
        shutil.copytree(src, partial)
        config = partial / heads[0]["path"] / "config.json"
        settings = json.loads(config.read_text())
        settings |= {k: v for k, v in (("mode", mode), ("drop", drop), ("shift", shift)) if v is not None}
        config.write_text(json.dumps(settings, indent=4) + "\n")
    return out / heads[0]["path"] / "config.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="a model folder with scope pooling (a run folder)")
    ap.add_argument("out", type=Path, help="where the copy goes (must not exist)")
    ap.add_argument("--mode", help=f"the pooling rule: {' | '.join(MODES)} (default: as trained)")
    ap.add_argument("--drop", type=float, help="how hard the excluded part is subtracted (default: as trained)")
    ap.add_argument("--shift", type=float,
                    help="added to the marker and excluded classes' logits when pooling (default: as trained, 0)")
    args = ap.parse_args(argv)
    changed = repool(args.model, args.out, args.mode, args.drop, args.shift)
    settings = json.loads(changed.read_text())
    print(f"{args.out}: the scope head pools by {settings['mode']!r} at drop {settings['drop']}, "
          f"shift {settings.get('shift', 0.0)} ({changed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
