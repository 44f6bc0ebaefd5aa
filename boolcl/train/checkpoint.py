"""What a run leaves behind: SentenceTransformer folders, the data manifest, the training log."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from ..data.loaders import SAMPLE_DIR


def file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest(cfg, mix: dict) -> dict:
    """Which files the run read, with hashes, so a result can be traced to its data."""
    files = {}
    for spec in (cfg.train.boolean, cfg.train.original):
        if spec == "sample":
            paths = [SAMPLE_DIR / "train.jsonl", SAMPLE_DIR / "corpus.jsonl"]
        elif spec in ("msmarco", "none"):
            continue
        else:
            paths = [Path(spec)]
        for p in paths:
            files[str(p)] = {"sha256": file_hash(p), "bytes": p.stat().st_size}
    return {"mix": mix, "files": files}


class TrainLog:
    """Training curves as JSONL (one object per logged step), appended as they come."""

    def __init__(self, path: Path, enabled: bool):
        self.path, self.enabled = path, enabled

    def write(self, record: dict) -> None:
        if self.enabled:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")


def save_model(accelerator, model, folder: Path, keep_last: int | None = None) -> None:
    """Save a SentenceTransformer folder from rank 0; prune old `checkpoint-N` siblings."""
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).save(str(folder))
        if keep_last:
            old = sorted(folder.parent.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
            for stale in old[:-keep_last]:
                shutil.rmtree(stale)
    accelerator.wait_for_everyone()
