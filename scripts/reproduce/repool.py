"""A copy of a scope-pooled model folder that pools its head's token classes by another rule.

    python scripts/reproduce/repool.py MODEL OUT --mode parts      # pool by parts instead of tokens
    python scripts/reproduce/repool.py MODEL OUT --drop 0.6        # subtract the excluded part harder or softer
    python scripts/reproduce/repool.py MODEL OUT --shift 1         # shift the exclusion logits at retrieval
    boolcl evaluate OUT data=sample

The encoder and the head stay as trained; only `ScopePooling.mode`, `.drop` and/or `.shift`
(pooling.py) change, in the copy's `modules.json`-listed ScopePooling config: a trained model is
scored at another pooling rule, subtraction strength or shift without training again
(docs/method.md, "Scope pooling").
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

from boolcl.errors import ConfigError
from boolcl.files import TEMP_MARK, new_folder
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
    try:
        with new_folder(out) as partial:
            shutil.copytree(src, partial, dirs_exist_ok=True, ignore=shutil.ignore_patterns(TEMP_MARK))
            config = partial / heads[0]["path"] / "config.json"
            settings = json.loads(config.read_text())
            settings |= {k: v for k, v in (("mode", mode), ("drop", drop), ("shift", shift)) if v is not None}
            config.write_text(json.dumps(settings, indent=4) + "\n")
    except ConfigError as err:  # a folder of the user's named <out>.partial
        raise SystemExit(str(err)) from None
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
