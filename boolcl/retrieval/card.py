"""The model card (README.md) of a run folder: what the run is, in the form the hub reads.

sentence-transformers renders the usual card (architecture, usage, framework versions,
hyper-parameters) from `model.model_card_data`; boolcl adds what only it knows: the base
model and its fingerprint, the recipe and the overrides, the training data with hashes,
the loss terms, steps, precision, and the results once a run is scored. The same facts go
into the YAML front matter (`base_model`, `tags`, a `boolcl:` block, `model-index` for the
metrics), so a card pushed to the hub describes this checkpoint, not the model it came from.

Training writes the card; `boolcl evaluate` and `boolcl demo` refresh its results part. The
results live between two HTML comments, so a refresh replaces them and leaves the rest.

A card is written to be published: it names files by name and sha256, and a setting whose value
is an absolute path on the machine that trained (a local model folder, `out=`, a data file)
by that path's last part (`public`), so no card carries the trainer's folders.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard
from omegaconf import OmegaConf

from boolcl.config import available_recipes, compose
from boolcl.files import atomic_write_text
from boolcl.retrieval.models import PACKAGED_HUB_ID, resolve

CARD = "README.md"
START, END = "<!-- boolcl:results -->", "<!-- /boolcl:results -->"
TASK = "retrieval"
TAGS = ["boolcl", "boolean-retrieval", "negation", "dense-retrieval"]
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)


def flat(node, prefix: str = "") -> dict:
    """Nested dicts as dotted scalar keys (the API-key *name* left out: it is no hyper-parameter)."""
    out = {}
    for key, value in node.items():
        if isinstance(value, dict):
            out |= flat(value, f"{prefix}{key}.")
        elif key != "api_key_env":
            out[f"{prefix}{key}"] = value if isinstance(value, (int, float, str, bool)) or value is None else str(value)
    return out


def _absolute(text: str) -> bool:
    """A path of this machine: absolute, and not the `//host` of a URL's rest (`http://...`)."""
    return os.path.isabs(text) and not text.startswith("//")


def public(value):
    """A value as a published card shows it: an absolute path becomes its last part, also after a
    `data=`-style prefix (`nevir:/home/me/nevir` -> `nevir:nevir`); lists and dicts value by value.
    Relative paths, hub ids and URLs are kept as written."""
    if isinstance(value, str):
        prefix, sep, rest = value.partition(":")
        if sep and len(prefix) > 1 and re.fullmatch(r"[A-Za-z][\w.-]*", prefix) and _absolute(rest):
            return f"{prefix}:{Path(rest).name or rest}"
        return (Path(value).name or value) if _absolute(value) else value
    if isinstance(value, list):
        return [public(v) for v in value]
    if isinstance(value, dict):
        return {k: public(v) for k, v in value.items()}
    return value


def short_names(paths) -> dict[str, str]:
    """Each path by its file name, or by as many of its last parts as tell it apart from the others
    (the bundled sample's and a pool's `train.jsonl` become `sample/train.jsonl` and `pool/train.jsonl`)."""
    paths = list(dict.fromkeys(str(p) for p in paths))
    parts = {p: Path(p).parts or (p,) for p in paths}
    out = {}
    for p in paths:
        for n in range(1, len(parts[p]) + 1):
            name = "/".join(parts[p][-n:])
            if sum("/".join(parts[q][-n:]) == name for q in paths) == 1:
                break
        out[p] = name.lstrip("/") or p
    return out


def hub_base_model(spec: str) -> str | None:
    """The hub id the card's `base_model` may name: the packaged MiniLM is all-MiniLM-L6-v2; a local
    folder has none (the hub rejects paths there; the path and fingerprint are in the boolcl block)."""
    try:
        origin = resolve(spec).origin
    except Exception:  # noqa: BLE001 - a model moved since training: the card still gets written
        return None
    if origin == "packaged":
        return PACKAGED_HUB_ID
    return spec if origin == "hub" else None


def overrides(cfg: dict) -> tuple[str, dict]:
    """The recipe and every setting that differs from it (the command line, in effect)."""
    from hydra.core.global_hydra import GlobalHydra

    recipe = cfg.get("name")
    args = [f"recipe={recipe}"] if recipe in available_recipes() else []
    try:
        if GlobalHydra.instance().is_initialized():  # inside train.py's @hydra.main: compose in its context
            from hydra import compose as hydra_compose

            reference = hydra_compose(config_name="config", overrides=args)
        else:
            reference = compose(args)
        base = OmegaConf.to_container(reference, resolve=True)
    except Exception as err:  # noqa: BLE001 - a recipe that no longer composes: the card says so, no diff
        print(f"boolcl: model card without overrides: recipe {recipe!r} did not compose ({err})", file=sys.stderr)
        return str(recipe), {}
    base.pop("hydra", None)
    mine, theirs = flat(cfg), flat(base)
    return str(recipe), {k: v for k, v in mine.items() if theirs.get(k, object()) != v}


def loss_terms(t: dict) -> dict:
    """The objective's terms that are on, with their weights and settings (train/objective.py)."""
    terms = {"contrastive": {"loss": t["loss"], "weight": 1.0, "scale": t.get("scale"),
                             "hard_negatives": t["hard_negatives"]}}
    extra = {"retention": ("operators",), "decomposition": ("drop", "anchor")}
    for name, keys in extra.items():
        part = t.get(name) or {}
        if part.get("weight"):
            terms[name] = {"weight": part["weight"], **{k: part[k] for k in keys if k in part}}
    return terms


def last_log(run_dir: Path) -> dict:
    path = run_dir / "train_log.jsonl"
    if not path.is_file():
        return {}
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else {}


def describe_run(run_dir: Path, *, precision: str, processes: int, step: int | None = None) -> dict:
    """The `boolcl:` block of the card, from what the run wrote next to the model."""
    cfg = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=True)
    manifest_path = run_dir / "data_manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    recipe, changed = overrides(cfg)
    shown = flat(public(cfg))  # the same settings, this machine's paths cut to their last part
    t, log = cfg["train"], last_log(run_dir)
    base = manifest.get("base_model") or {"spec": cfg["model"]}
    files, per_operator = manifest.get("files", {}), manifest.get("per_operator", {})
    file_names, source_names = short_names(files), short_names(per_operator)
    return {
        "run": run_dir.name, "recipe": recipe, "overrides": {k: shown.get(k, v) for k, v in changed.items()},
        "base_model": {**public(base), "hub_id": hub_base_model(str(cfg["model"]))},
        "similarity": cfg.get("similarity"),
        "data": {"mix": public(manifest.get("mix", {})),
                 "files": {file_names[p]: f for p, f in files.items()},
                 "per_operator": {source_names[s]: c for s, c in per_operator.items()}},
        "objective": loss_terms(t),
        "training": {"steps": step if step is not None else log.get("step"), "epochs_planned": t["epochs"],
                     "max_steps": t["max_steps"], "global_batch": t["batch_size"], "grad_accum": t["grad_accum"],
                     "lr": t["lr"], "warmup_ratio": t["warmup_ratio"], "max_length": t["max_length"],
                     "precision": precision, "processes": processes, "lora": bool(t["lora"]["enabled"]),
                     "seed": cfg.get("seed"), "final_loss": log.get("loss"), "seconds": log.get("elapsed_s")},
    }


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join("" if v is None else str(v) for v in r) + " |" for r in rows])


def run_section(meta: dict) -> str:
    """The card's own part in Markdown: what sentence-transformers' template has no place for."""
    b, tr, data = meta["base_model"], meta["training"], meta["data"]
    base = f"[{b['hub_id']}](https://huggingface.co/{b['hub_id']})" if b.get("hub_id") else f"`{b['spec']}`"
    out = ["## boolcl training run", "",
           (f"Continued from {base} (weights fingerprint `{b.get('fingerprint') or 'unknown'}`) with boolcl "
            f"recipe `{meta['recipe']}`, run `{meta['run']}`."), ""]
    if meta["overrides"]:
        out += ["Settings that differ from the recipe:", "",
                _table(["key", "value"], [[f"`{k}`", f"`{v}`"] for k, v in meta["overrides"].items()]), ""]
    else:
        out += ["The recipe's settings, unchanged.", ""]
    mix = data["mix"]
    out += ["### Training data", ""]
    for part in ("boolean", "original"):
        if part in mix:
            m = mix[part]
            ops = f", operators {', '.join(m['operators'])}" if m.get("operators") else ""
            out.append(f"- {part}: `{m.get('source')}`{ops}: {m.get('examples')} examples used")
    if "named" in mix:
        n = mix["named"]
        out.append(f"- passages questions name, from `{Path(n['file']).name}` ({n['groups']} groups): "
                   f"{n['topic_negatives']} topic negatives, {n['or_questions']} named OR questions")
    for source, counts in data["per_operator"].items():
        out.append(f"- questions per type in `{source}` (before sampling): " +
                   ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if data["files"]:
        out += ["", _table(["file", "sha256", "bytes"],
                           [[f"`{p}`", f"`{f['sha256']}`", f["bytes"]] for p, f in data["files"].items()])]
    out += ["", "### Objective", "",
            _table(["term", "weight", "settings"],
                   [[name, term["weight"], ", ".join(f"{k}={v}" for k, v in term.items() if k != "weight")]
                    for name, term in meta["objective"].items()]),
            "", "### Steps and precision", "",
            f"{tr['steps']} optimiser steps (global batch {tr['global_batch']}, lr {tr['lr']}, texts cut to "
            f"{tr['max_length']} tokens in training; saved with the model's own max_seq_length), precision `{tr['precision']}` on {tr['processes']} process(es)"
            + (f", final loss {tr['final_loss']:.4f}" if isinstance(tr.get("final_loss"), (int, float)) else "")
            + (f", {tr['seconds']:.0f} s" if isinstance(tr.get("seconds"), (int, float)) else "") + ".", ""]
    return "\n".join(out)


def redact(text: str) -> str:
    """No secret from the environment ever reaches a card: values of *KEY*/*TOKEN*/*SECRET* variables."""
    for name, value in os.environ.items():
        if SECRET_NAME.search(name) and len(value) >= 8 and value in text:
            print(f"boolcl: the model card contained the value of ${name}; it was removed", file=sys.stderr)
            text = text.replace(value, "<redacted>")
    return text


def _st_card(model, folder: Path, meta: dict, hyperparameters: dict) -> str:
    """sentence-transformers' own card for the trained model, its data filled by boolcl."""
    try:  # sentence-transformers >= 6
        from sentence_transformers.base.model_card import generate_model_card
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.model_card import generate_model_card

    data = model.model_card_data
    data.local_files_only = True  # no hub look-ups while saving (offline clusters, tests)
    data.generate_widget_examples = False  # never encode with the model mid-training
    data.base_model, data.base_model_revision = meta["base_model"]["hub_id"], None
    data.model_name = f"boolcl {meta['recipe']}: {meta['run']}"
    data.add_tags(TAGS + [f"boolcl-recipe-{meta['recipe']}"])
    data.all_hyperparameters = hyperparameters
    data.non_default_hyperparameters = meta["overrides"]
    data.save_dir = str(folder)
    try:
        return generate_model_card(model)
    except Exception as err:  # noqa: BLE001 - the template is theirs; boolcl's part is written anyway
        print(f"boolcl: sentence-transformers could not render its model card ({type(err).__name__}: {err})",
              file=sys.stderr)
        return f"---\nlibrary_name: sentence-transformers\n---\n\n# {data.model_name}\n"


def write_train_card(model, folder: Path, run_dir: Path, *, precision: str, processes: int,
                     step: int | None = None) -> Path:
    """README.md of a freshly saved model folder (`folder`; `run_dir` holds config and manifest)."""
    folder, run_dir = Path(folder), Path(run_dir)
    meta = describe_run(run_dir, precision=precision, processes=processes, step=step)
    every = flat(public(OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=True)))
    card = ModelCard(_st_card(model, folder, meta, every))
    card.data.model_name = model.model_card_data.model_name
    card.data.base_model = meta["base_model"]["hub_id"]
    card.data.library_name = "sentence-transformers"
    card.data.boolcl = meta
    body = card.text
    section = run_section(meta) + "\n" + START + "\n" + END + "\n"
    at = body.find("\n## Model Details")
    card.text = body[:at + 1] + section + body[at:] if at >= 0 else body + "\n" + section
    path = folder / CARD
    atomic_write_text(path, redact(str(card)))
    return path


def slug(key: str) -> str:
    """`MRR@10/NOT` -> `mrr_at_10_not`: a model-index metric type."""
    return re.sub(r"[^a-z0-9]+", "_", key.lower().replace("@", "_at_")).strip("_")


def results_table(headline: dict, base: dict | None = None) -> str:
    """Measures by rows, groups (ALL/AND/OR/NOT) by columns, in percent; with `base`, its row and Δ.
    A key without a group (a benchmark's single figure) goes in a `value` column."""
    def split(h):
        return {tuple((k.split("/", 1) + ["value"])[:2]): v for k, v in h.items()}

    mine, theirs = split(headline), split(base or {})
    order = ["ALL", "AND", "OR", "NOT"]
    measures = sorted({m for m, _ in mine})
    groups = sorted({g for _, g in mine}, key=lambda g: (order.index(g) if g in order else len(order), g))

    def cell(v):
        return "—" if v is None else f"{v:.2f}"

    rows = []
    for m in measures:
        if base is not None:
            rows.append([f"{m} base", *[cell(theirs.get((m, g))) for g in groups]])
        rows.append([m + (" this model" if base is not None else ""), *[cell(mine.get((m, g))) for g in groups]])
        if base is not None:
            rows.append([f"{m} Δ", *["—" if mine.get((m, g)) is None or theirs.get((m, g)) is None
                                     else f"{mine[(m, g)] - theirs[(m, g)]:+.2f}" for g in groups]])
    return _table(["measure (%)", *groups], rows)


def is_run_card(folder) -> bool:
    path = Path(folder) / CARD
    if not path.is_file():
        return False
    try:
        return ModelCard.load(path).data.get("boolcl") is not None
    except Exception:  # noqa: BLE001 - someone else's README: not ours to rewrite
        return False


def record_results(folder, payload: dict, base: dict | None = None) -> bool:
    """Put a results.json payload into the card of a run folder: model-index metrics (replacing
    those of the same data set) and a table per data set. False, and nothing written, when the
    folder's README is not a boolcl card (a hub model, someone else's folder)."""
    folder = Path(folder)
    if not is_run_card(folder):
        return False
    card = ModelCard.load(folder / CARD)
    meta = card.data.boolcl
    name = payload["data"]["name"]
    sample = payload["data"].get("corpus_sample")
    results = meta.setdefault("results", {})
    results[name] = {"headline": payload["headline"], "k": payload.get("settings", {}).get("k"),
                     "questions": payload["data"].get("questions"), "passages": payload["data"].get("passages"),
                     "corpus_sample": bool(sample), "model_fingerprint": (payload.get("model") or {}).get("fingerprint"),
                     **({"base": base["headline"]} if base else {})}
    card.data.model_name = card.data.model_name or f"boolcl {meta.get('recipe')}: {meta.get('run')}"
    kept = [r for r in (card.data.eval_results or []) if r.dataset_type != name]
    card.data.eval_results = kept + [
        EvalResult(task_type=TASK, task_name="Boolean retrieval", dataset_type=name,
                   dataset_name=name + (" (corpus sample)" if sample else ""),
                   metric_type=slug(key), metric_name=key, metric_value=value)
        for key, value in payload["headline"].items() if value is not None]
    card.data.boolcl = meta
    parts = ["## Results", ""]
    for data_name, r in results.items():
        parts += [f"### {data_name}", "",
                  f"{r['questions']} questions, {r['passages']} passages"
                  + (" (a sample of the corpus)" if r["corpus_sample"] else "") + ". NegRecall: lower is better.", "",
                  results_table(r["headline"], r.get("base")), ""]
    text = card.text
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + START + "\n" + "\n".join(parts) + "\n" + END + rest.split(END, 1)[1]
    else:
        text = text + "\n" + START + "\n" + "\n".join(parts) + "\n" + END + "\n"
    card.text = text
    atomic_write_text(folder / CARD, redact(str(card)))
    return True
