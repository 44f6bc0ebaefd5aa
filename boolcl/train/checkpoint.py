"""What a run leaves behind, and how it picks up again.

`checkpoint-<step>/` holds a SentenceTransformer folder, Accelerate's full state (model,
optimiser, scheduler, RNG of every process) in `state/`, and `trainer_state.json` (the
position in the data). It is written under a temporary name and renamed when complete,
so a run killed while saving never leaves a half checkpoint that resume would trust.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections import Counter
from pathlib import Path

from omegaconf import OmegaConf

from boolcl.data.loaders import SAMPLE_DIR, load_training_pool
from boolcl.errors import ConfigError
from boolcl.files import atomic_write_text
from boolcl.retrieval.card import flat, write_train_card
from boolcl.retrieval.models import load_eval_model, set_encoder

STATE_FILE = "trainer_state.json"


def file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def base_model_info(cfg) -> dict:
    """The starting model's spec and fingerprint, as `boolcl evaluate` would report it (results.json
    `model.fingerprint`), so a card names exactly which weights the run continued from."""
    info = {"spec": str(cfg.model)}
    try:
        model, described = load_eval_model(str(cfg.model), cfg)
        info |= {"origin": described["origin"], "fingerprint": described["fingerprint"]}
        del model
    except Exception as err:  # noqa: BLE001 - the run itself loaded it; the card says why it has no hash
        info["fingerprint_error"] = f"{type(err).__name__}: {err}"
    return info


def manifest(cfg, mix: dict) -> dict:
    """Which files the run read, with hashes and questions per type, and the starting model's
    fingerprint, so a result can be traced to its data and weights (the model card shows it)."""
    files, per_operator = {}, {}
    for spec in (cfg.train.boolean, cfg.train.original):
        if spec == "sample":
            paths = [SAMPLE_DIR / "train.jsonl", SAMPLE_DIR / "corpus.jsonl"]
        elif spec in ("msmarco", "none"):
            continue
        else:
            paths = [Path(spec)]
            if Path(spec).with_name("corpus.jsonl").is_file():
                paths.append(Path(spec).with_name("corpus.jsonl"))
        for p in paths:
            files[str(p)] = {"sha256": file_hash(p), "bytes": p.stat().st_size}
        if str(spec) not in per_operator:
            per_operator[str(spec)] = dict(Counter(e.question_type for e in load_training_pool(spec)[0]))
    return {"mix": mix, "files": files, "per_operator": per_operator, "base_model": base_model_info(cfg)}


def flat_config(cfg) -> dict:
    """Scalars only, dotted keys: what trackers such as TensorBoard accept as hyper-parameters."""
    return {k: "None" if v is None else v for k, v in flat(OmegaConf.to_container(cfg, resolve=True)).items()}


class TrainLog:
    """Training curves as JSONL, one object per logged step.

    On resume, records past the checkpoint's step (written before the kill) are dropped,
    so the log reads as one uninterrupted run.
    """

    def __init__(self, path: Path, enabled: bool, after_step: int = 0):
        self.path, self.enabled = path, enabled
        if enabled and path.is_file():
            keep = [line for line in path.read_text().splitlines()
                    if line.strip() and json.loads(line)["step"] <= after_step]
            atomic_write_text(path, "".join(line + "\n" for line in keep))

    def write(self, record: dict) -> None:
        if self.enabled:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")


def checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    found = [p for p in run_dir.glob("checkpoint-*") if (p / STATE_FILE).is_file() and p.name.split("-")[1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def find_resume(resume, run_dir: Path) -> Path | None:
    """`train.resume`: false, true (the latest checkpoint of `out=`), or a checkpoint folder."""
    if resume in (False, None, "false", "False"):
        return None
    if resume in (True, "true", "True"):
        found = checkpoints(run_dir) if run_dir.is_dir() else []
        if not found:
            raise ConfigError(f"train.resume=true but {run_dir} has no complete checkpoint-N folder; "
                              f"set out= to the run to continue (and train.save_every>0 when it ran)")
        return found[-1]
    path = Path(str(resume))
    if not (path / STATE_FILE).is_file():
        raise ConfigError(f"train.resume={resume}: not a complete checkpoint (no {STATE_FILE} in it)")
    return path


def plain(model):
    """The model as a plain SentenceTransformer: LoRA adapters merged into a copy of the weights."""
    import copy

    if not hasattr(model[0].auto_model, "merge_and_unload"):
        return model

    merged = copy.deepcopy(model)
    set_encoder(merged, merged[0].auto_model.merge_and_unload())
    return merged


def save_model(accelerator, model, folder: Path, run_dir: Path | None = None, step: int | None = None) -> None:
    """A plain SentenceTransformer folder (loads without peft), written by rank 0, with a model
    card that describes this run (retrieval/card.py), not the base model's card copied over.
    `run_dir` (default `folder`) holds config.yaml and data_manifest.json."""
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        out = plain(accelerator.unwrap_model(model))
        out.save(str(folder), create_model_card=False)
        run_dir = Path(run_dir or folder)
        if (run_dir / "config.yaml").is_file():
            write_train_card(out, Path(folder), run_dir, precision=str(accelerator.mixed_precision),
                             processes=accelerator.num_processes, step=step)
        else:
            print(f"boolcl: {run_dir} has no config.yaml; {folder} is saved without a model card", file=sys.stderr)
    accelerator.wait_for_everyone()


def save_checkpoint(accelerator, model, run_dir: Path, progress: dict, keep_last: int) -> Path:
    """Model folder + full training state + data position, made visible atomically."""
    final = run_dir / f"checkpoint-{progress['step']}"
    tmp = run_dir / f".tmp-checkpoint-{progress['step']}"
    if accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    save_model(accelerator, model, tmp, run_dir=run_dir, step=progress["step"])
    accelerator.save_state(str(tmp / "state"))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        atomic_write_text(tmp / STATE_FILE, json.dumps(progress) + "\n")
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        for stale in checkpoints(run_dir)[:-keep_last]:
            shutil.rmtree(stale)
    accelerator.wait_for_everyone()
    return final
