"""What a run leaves behind, and how it picks up again.

`checkpoint-<step>/` holds a SentenceTransformer folder, the training state in `state/`
and `trainer_state.json` (the position in the data). It is written under a temporary name
and renamed when complete, so a run killed while saving never leaves a half checkpoint
that resume would trust. The final model is staged the same way in `<run>/.final-tmp/` and
its files moved into the run folder with `modules.json` last: a folder without
`modules.json` is not a model, one with it is a whole one. Each staging folder is made with
boolcl's mark (files.make_temp_folder), so a folder of the user's by that name is never removed.

`own_run` says whether an existing `out=` is this run's: the same settings saved in its
config.yaml (the same command, run again to finish), or the checkpoint `train.resume` continues.

Nothing in `state/` is unpickled on resume: the weights are safetensors, the optimiser's
tensors are read with `torch.load(weights_only=True)` (tensors, numbers, lists, dicts only),
and the scheduler, the gradient scaler, Accelerate's step counter and every process's RNG
states are JSON. A checkpoint someone shared can give wrong numbers, never run code.
"""
from __future__ import annotations

import contextlib
import copy
import errno
import json
import os
import random
import shutil
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from safetensors.torch import load_model as load_safetensors
from safetensors.torch import save_model as save_safetensors

from boolcl.config import resume_flag
from boolcl.data.loaders import SAMPLE_DIR, load_training_pool
from boolcl.errors import ConfigError, TrainingError
from boolcl.files import TEMP_MARK, atomic_write_text, file_digest, make_temp_folder, move_entries
from boolcl.retrieval.card import flat, write_train_card
from boolcl.retrieval.models import load_eval_model, set_encoder
from boolcl.versions import library_versions

STATE_FILE = "trainer_state.json"
STATE_DIR = "state"
STATE_FORMAT = 2  # 1: Accelerate's save_state (pickles); 2: safetensors + weights-only tensors + JSON
RESUME_FILE = "resume.json"  # format, Accelerate's step, scheduler and scaler states
MODEL_STATE = "model.safetensors"  # the training model as it is (LoRA adapters unmerged)
OPTIMIZER_STATE = "optimizer.pt"
FINAL_TMP = ".final-tmp"
BEST_DIR = "best"  # train.keep_best: the best-scoring model so far, a whole model folder
BEST_TMP = ".best-tmp"
BEST_FILE = "best.json"  # in best/: the measure, its value and the step it was reached at
MODULES_FILE = "modules.json"  # moved into the run folder last: its presence means a whole model
CARD_SLACK = 16 << 20  # tokenizer, configs and card next to the weights, generously


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
    fingerprint and the library versions, so a result can be traced to its data, weights and
    software (the model card shows the data and weights)."""
    paths, per_operator = [], {}
    for spec in (cfg.train.boolean, cfg.train.original):
        if spec == "sample":
            paths += [SAMPLE_DIR / "train.jsonl", SAMPLE_DIR / "corpus.jsonl"]
        elif spec in ("msmarco", "none"):
            continue
        else:
            paths.append(Path(spec))
            if Path(spec).with_name("corpus.jsonl").is_file():
                paths.append(Path(spec).with_name("corpus.jsonl"))
        if str(spec) not in per_operator:
            per_operator[str(spec)] = dict(Counter(e.question_type for e in load_training_pool(spec)[0]))
    if "named" in mix:  # the groups file train.named read
        paths.append(Path(mix["named"]["file"]))
    files = {str(p): {"sha256": file_digest(p), "bytes": p.stat().st_size} for p in paths}
    return {"mix": mix, "files": files, "per_operator": per_operator, "base_model": base_model_info(cfg),
            "versions": library_versions()}


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
    flag = resume_flag(resume)
    if flag is False:
        return None
    if flag:
        found = checkpoints(run_dir) if run_dir.is_dir() else []
        if not found:
            raise ConfigError(f"train.resume=true but {run_dir} has no complete checkpoint-N folder; "
                              f"set out= to the run to continue (and train.save_every>0 when it ran)")
        return found[-1]
    path = Path(str(resume))
    if not (path / STATE_FILE).is_file():
        raise ConfigError(f"train.resume={resume}: not a complete checkpoint (no {STATE_FILE} in it)")
    return path


NOT_SETTINGS = ("out", "overwrite", "hydra")  # where and how a run writes, not what it trains


def settings(cfg) -> dict:
    """What a run trains, as plain data: the config without `NOT_SETTINGS` and with `train.resume`
    false (a run resumed, or started again to finish, is the same run)."""
    c = OmegaConf.to_container(cfg, resolve=True)
    for key in NOT_SETTINGS:
        c.pop(key, None)
    c["train"]["resume"] = False
    return c


def same_settings(saved: Path, cfg) -> bool:
    """Whether the run config `saved` (a run folder's config.yaml) trains what `cfg` does; an
    unreadable or foreign file does not."""
    try:
        return settings(OmegaConf.load(saved)) == settings(cfg)
    except Exception:  # noqa: BLE001 - a user's config.yaml of another layout is simply not this run's
        return False


def own_run(folder: Path, cfg) -> bool:
    """Whether the existing run folder `folder` is this run's: it holds a run with the same settings
    (the same command, run again to finish it), or `train.resume` continues a checkpoint in it."""
    if (folder / "config.yaml").is_file() and same_settings(folder / "config.yaml", cfg):
        return True
    flag = resume_flag(cfg.train.resume)
    if flag is True:
        return bool(checkpoints(folder))
    if flag is None:
        return Path(str(cfg.train.resume)).resolve().parent == folder.resolve()
    return False


def plain(model):
    """The model as a plain SentenceTransformer: LoRA adapters merged into a copy of the weights."""
    if not hasattr(model[0].auto_model, "merge_and_unload"):
        return model

    merged = copy.deepcopy(model)
    set_encoder(merged, merged[0].auto_model.merge_and_unload())
    return merged


@contextlib.contextmanager
def published_length(model):
    """The model's own max_seq_length while it is saved: training may cut texts shorter
    (train.max_length), but whoever loads the checkpoint should embed as the base model did.
    The training length is in the model card and config.yaml."""
    own = getattr(model, "boolcl_own_length", None)
    if own is None:
        yield
        return
    training, model.max_seq_length = model.max_seq_length, own
    try:
        yield
    finally:
        model.max_seq_length = training


def model_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def checkpoint_bytes(model) -> int:
    """About what one checkpoint takes on disk: the model folder and the training state's copy
    of the weights, AdamW's two moments per trainable weight, and room for tokenizer and configs."""
    moments = sum(2 * p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return 2 * model_bytes(model) + moments + CARD_SLACK


def disk_full(err: OSError) -> bool:
    return err.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def last_good(run_dir: Path) -> str:
    found = checkpoints(run_dir)
    if not found:
        return f"no complete checkpoint in {run_dir} yet"
    return f"the last complete checkpoint is {found[-1]} (resume it with out={run_dir} train.resume=true)"


@contextmanager
def removed_if_disk_full(partial: Path, run_dir: Path | None, writing: str, note: str = ""):
    """A save into `partial` that runs out of disk leaves nothing half-written behind and says
    which complete checkpoint of `run_dir` to resume from (`note` alone without one); any other
    error passes through unchanged."""
    try:
        yield
    except OSError as err:
        if not disk_full(err):
            raise
        shutil.rmtree(partial, ignore_errors=True)
        where = last_good(run_dir) if run_dir is not None else ""
        raise TrainingError(f"disk full while {writing} ({err.strerror}); {note}{where}") from None


def save_model(accelerator, model, folder: Path, run_dir: Path | None = None, step: int | None = None) -> None:
    """A plain SentenceTransformer folder (loads without peft), written by rank 0 straight into
    `folder`, with a model card that describes this run (retrieval/card.py), not the base model's
    card copied over. `run_dir` (default `folder`) holds config.yaml and data_manifest.json.
    Callers write into a temporary folder: see `save_checkpoint` and `save_final`."""
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        out = plain(accelerator.unwrap_model(model))
        with published_length(out):
            out.save(str(folder), create_model_card=False)
        run_dir = Path(run_dir or folder)
        if (run_dir / "config.yaml").is_file():
            write_train_card(out, Path(folder), run_dir, precision=str(accelerator.mixed_precision),
                             processes=accelerator.num_processes, step=step)
        else:
            print(f"boolcl: {run_dir} has no config.yaml; {folder} is saved without a model card", file=sys.stderr)
    accelerator.wait_for_everyone()


def publish(staged: Path, dest: Path, move=os.replace) -> None:
    """Move a complete model folder's entries from `staged` into `dest`, `modules.json` last.

    `dest` loses its old `modules.json` first, so while entries move it is not a model; once
    the last move lands it is a whole one. `move` (os.replace) is a parameter so a test can stop
    it after any entry."""
    if not (staged / MODULES_FILE).is_file():
        raise TrainingError(f"{staged} has no {MODULES_FILE}: the model was not saved completely")
    (dest / MODULES_FILE).unlink(missing_ok=True)
    move_entries(staged, dest, last=MODULES_FILE, move=move)  # a module folder of an earlier save is replaced


def save_final(accelerator, model, run_dir: Path) -> None:
    """The final model, written to `<run>/.final-tmp/` and then moved into the run folder
    (`publish`), so a run killed while saving leaves no folder that loads as a model."""
    staged = run_dir / FINAL_TMP
    with removed_if_disk_full(staged, run_dir, f"saving the final model into {run_dir}"):
        if accelerator.is_main_process:
            make_temp_folder(staged)
        save_model(accelerator, model, staged, run_dir=run_dir)
        if accelerator.is_main_process:
            publish(staged, run_dir)
    accelerator.wait_for_everyone()


def save_best(accelerator, model, run_dir: Path, record: dict) -> Path:
    """`<run>/best/` (train.keep_best): the model as it is now, staged in `<run>/.best-tmp/` with
    `best.json` (`record`) beside the weights and published like the final model, so best/ is
    either the previous best or the new one, never a mix that loads."""
    staged, dest = run_dir / BEST_TMP, run_dir / BEST_DIR
    with removed_if_disk_full(staged, run_dir, f"saving the best model so far into {dest}", "it was not kept; "):
        if accelerator.is_main_process:
            make_temp_folder(staged)
        save_model(accelerator, model, staged, run_dir=run_dir, step=record["step"])
        if accelerator.is_main_process:
            atomic_write_text(staged / BEST_FILE, json.dumps(record, indent=2) + "\n")
            dest.mkdir(exist_ok=True)
            publish(staged, dest)
    accelerator.wait_for_everyone()
    return dest


# ---------------------------------------------------------------- training state, no pickles


def _rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state().tolist()}
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state["numpy"] = [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]
    if torch.cuda.is_available():
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def _set_rng_state(state: dict) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


def rng_file(rank: int) -> str:
    return f"rng-{rank}.json"


def save_training_state(accelerator, model, optimizer, scheduler, folder: Path) -> None:
    """Everything resume needs beyond the data position, in formats that hold no code."""
    folder.mkdir(parents=True, exist_ok=True)
    if accelerator.is_main_process:
        save_safetensors(accelerator.unwrap_model(model), str(folder / MODEL_STATE))
        torch.save(optimizer.state_dict(), folder / OPTIMIZER_STATE)
        scaler = getattr(accelerator, "scaler", None)
        resume = {"format": STATE_FORMAT, "processes": accelerator.num_processes, "accelerate_step": accelerator.step,
                  "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict() if scaler is not None else None}
        try:
            text = json.dumps(resume, allow_nan=True)
        except TypeError as err:
            raise TrainingError(f"the scheduler or scaler state is not plain numbers and lists ({err}); "
                                f"boolcl saves training state as JSON only") from None
        atomic_write_text(folder / RESUME_FILE, text + "\n")
    atomic_write_text(folder / rng_file(accelerator.process_index), json.dumps(_rng_state()) + "\n")


def _unreadable(path: Path, err: Exception) -> ConfigError:
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return ConfigError(f"{path}: cannot be resumed from ({type(err).__name__}: {first[:300]}); boolcl reads "
                       f"training state as safetensors, weights-only tensors and JSON, never as a pickle")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise _unreadable(path, err) from None


def load_training_state(accelerator, model, optimizer, scheduler, folder: Path) -> None:
    """Restore what `save_training_state` wrote. Every file is checked for what it must be
    before it touches the run; an older (pickled) checkpoint is refused, not unpickled."""
    resume = folder / RESUME_FILE
    if not resume.is_file():
        pickled = sorted(p.name for p in folder.glob("*") if p.suffix in (".pkl", ".bin", ".pt")) if folder.is_dir() else []
        raise ConfigError(f"{folder.parent}: no {STATE_DIR}/{RESUME_FILE}; it was written by an older boolcl"
                          + (f" that kept the training state as pickles ({', '.join(pickled)})" if pickled else "")
                          + ", and unpickling can run code, so it cannot be resumed safely. Start the run afresh "
                            "(train.resume=false) or resume it with the boolcl version that wrote it, if you trust it")
    info = _read_json(resume)
    if not isinstance(info, dict) or info.get("format") != STATE_FORMAT:
        raise ConfigError(f"{resume}: training state format {info.get('format') if isinstance(info, dict) else info!r}, "
                          f"this boolcl reads format {STATE_FORMAT}")
    if info.get("processes") != accelerator.num_processes:
        raise ConfigError(f"{resume}: the checkpoint was written by {info.get('processes')} processes and this run has "
                          f"{accelerator.num_processes}; resume with the same number of processes")
    rng_path = folder / rng_file(accelerator.process_index)
    rng = _read_json(rng_path)
    weights = folder / MODEL_STATE
    try:
        load_safetensors(accelerator.unwrap_model(model), str(weights), strict=True)
    except Exception as err:  # noqa: BLE001 - any failure names the file
        raise _unreadable(weights, err) from None
    opt_path = folder / OPTIMIZER_STATE
    try:
        optimizer.load_state_dict(torch.load(opt_path, map_location="cpu", weights_only=True))
    except Exception as err:  # noqa: BLE001 - an UnpicklingError here is a refused pickle
        raise _unreadable(opt_path, err) from None
    try:
        scheduler.load_state_dict(info["scheduler"])
        if info.get("scaler") is not None and getattr(accelerator, "scaler", None) is not None:
            accelerator.scaler.load_state_dict(info["scaler"])
        accelerator.step = int(info["accelerate_step"])
    except (KeyError, TypeError, ValueError) as err:
        raise _unreadable(resume, err) from None
    try:
        _set_rng_state(rng)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise _unreadable(rng_path, err) from None


def save_checkpoint(accelerator, model, optimizer, scheduler, run_dir: Path, progress: dict,
                    keep_last: int) -> Path:
    """Model folder + full training state + data position, made visible atomically. A full disk
    removes the partial folder and names the last complete checkpoint."""
    final = run_dir / f"checkpoint-{progress['step']}"
    tmp = run_dir / f".tmp-checkpoint-{progress['step']}"
    with removed_if_disk_full(tmp, run_dir, f"writing {final.name} in {run_dir}", "it was not kept; "):
        if accelerator.is_main_process:
            make_temp_folder(tmp)
        save_model(accelerator, model, tmp, run_dir=run_dir, step=progress["step"])
        save_training_state(accelerator, model, optimizer, scheduler, tmp / STATE_DIR)
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            atomic_write_text(tmp / STATE_FILE, json.dumps(progress) + "\n")
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
            (final / TEMP_MARK).unlink(missing_ok=True)
            for stale in checkpoints(run_dir)[:-keep_last]:
                shutil.rmtree(stale)
    accelerator.wait_for_everyone()
    return final
