"""`boolcl evaluate`: score a model or checkpoint and write results.json + run.trec.

An `out=` that holds anything is written into only when it holds an evaluation of the same model
(or run file) on the same data, or with `overwrite=true`.
"""
from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig

from boolcl.data.loaders import load_retrieval_set, subsample
from boolcl.distributed import process_state
from boolcl.errors import ConfigError
from boolcl.evaluate.benchmarks import evaluate_benchmark, is_benchmark
from boolcl.files import check_output_folder, check_writable
from boolcl.retrieval.card import record_results
from boolcl.scoring.report import read_trec_run, results_dict, write_results
from boolcl.scoring.runner import EvalResult, data_info, evaluate_spec, score_run


def default_out(model_spec: str | None, cfg: DictConfig, data_name: str) -> Path:
    if cfg.out:
        return Path(cfg.out)
    if model_spec and Path(model_spec).is_dir():
        return Path(model_spec) / "eval" / data_name
    label = Path(cfg.run).stem if cfg.run else Path(str(model_spec)).name
    return Path("results") / f"{label}-{data_name}"


def earlier_evaluation(model_spec: str | None, cfg: DictConfig):
    """A test for a folder: it holds results.json of this evaluation (the same model spec or run
    file, on the same `data=` where results.json records it)."""
    def own(folder: Path) -> bool:
        payload = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        model, data = payload.get("model") or {}, payload.get("data") or {}
        same = model.get("run") == cfg.run if cfg.run else model.get("spec") == str(model_spec)
        return same and data.get("spec", str(cfg.data)) == str(cfg.data)
    return own


def check_out(out_dir: Path, model_spec: str | None, cfg: DictConfig) -> None:
    check_output_folder(out_dir, overwrite=bool(cfg.get("overwrite", False)), own=earlier_evaluation(model_spec, cfg),
                        whose="this evaluation's (the same model on the same data)")


def run_evaluate(model_spec: str | None, cfg: DictConfig, out: str | None = None) -> tuple[EvalResult, dict, Path]:
    """Evaluate a model, or score the ranking file `run`, on `data=`; write results.json + run.trec.

    `data` may be a BoolQuestions-format set (sample, boolquestions-*, a folder) or a
    benchmark (quest..., birco-...); `out` defaults to CHECKPOINT/eval/<data> or
    results/<model>-<data>.
    """
    if cfg.run and model_spec and model_spec != cfg.model:
        raise ConfigError("give either a model to evaluate or run=FILE to score, not both")
    # before any data is read or encoded; without out=, the folder the default one goes in
    target = Path(out) if out else Path(cfg.out) if cfg.out else default_out(model_spec, cfg, "data").parent
    check_writable(target, what="output folder (out=)")
    chosen = bool(out or cfg.out)
    if chosen:
        check_out(target, model_spec, cfg)
    if is_benchmark(cfg.data):
        result, data = evaluate_benchmark(cfg.data, None if cfg.run else model_spec, cfg)
        info = result.settings.get("model") or {"run": cfg.run}
        out_dir = Path(out) if out else default_out(model_spec, cfg, data["name"])
        if not chosen:  # the default folder is named after the benchmark, known now
            check_out(out_dir, model_spec, cfg)
    else:
        rset = load_retrieval_set(cfg.data)
        sampling = None
        if cfg.eval.max_corpus and cfg.eval.max_corpus < len(rset.corpus):
            rset, sampling = subsample(rset, cfg.eval.max_corpus, cfg.seed)
        data = data_info(rset) | ({"corpus_sample": sampling} if sampling else {})
        out_dir = Path(out) if out else default_out(model_spec, cfg, data["name"])
        if not chosen:  # the default folder is named after the set: checked before the model is loaded
            check_out(out_dir, model_spec, cfg)
        if cfg.run:
            result, info = score_run(rset, read_trec_run(cfg.run), k=cfg.eval.k), {"run": cfg.run}
        else:
            result, info = evaluate_spec(model_spec, rset, cfg)
    data = data | {"spec": str(cfg.data)}  # what a later evaluation into the same folder is compared with
    tag = Path(cfg.run).stem if cfg.run else Path(str(model_spec)).name
    if process_state().is_main_process:  # under `accelerate launch` every process encoded its shards
        payload = write_results(out_dir, result, model=info, data=data, k=cfg.eval.k, tag=tag)
        if model_spec and not cfg.run:  # a boolcl run folder's model card gains this data set's results
            record_results(model_spec, payload)
    else:
        payload = results_dict(result, model=info, data=data, k=cfg.eval.k)
    return result, payload, out_dir
