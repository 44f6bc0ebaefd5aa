"""`boolcl evaluate`: score a model or checkpoint and write results.json + run.trec."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..config import ConfigError
from ..data.loaders import RetrievalSet, load_retrieval_set, subsample
from ..models import fingerprint, load_model
from ..distributed import process_state
from .report import results_dict, write_results
from .runner import EvalResult, evaluate_model


def load_eval_model(model_spec: str, cfg) -> tuple:
    """The model to evaluate and its description for results.json.

    A checkpoint folder knows its own similarity; a hub id or the packaged base takes
    `similarity` from the config. One rule for evaluate, the benchmarks and the baselines.
    """
    similarity = None if Path(model_spec).is_dir() else OmegaConf.select(cfg, "similarity")
    model = load_model(model_spec, similarity=similarity, max_length=OmegaConf.select(cfg, "eval.max_length"))
    info = {"spec": model_spec, "origin": model.boolcl_origin, "fingerprint": fingerprint(model),
            "similarity": model.similarity_fn_name}
    return model, info


def evaluate_spec(model_spec: str, rset: RetrievalSet, cfg: DictConfig, *,
                  show_progress: bool = True) -> tuple[EvalResult, dict]:
    """Load `model_spec`, evaluate it on `rset`; return the result and the model's description."""
    from .cache import default_dir

    model, info = load_eval_model(model_spec, cfg)
    cache_dir = (Path(cfg.eval.cache_dir) if cfg.eval.cache_dir else default_dir()) if cfg.eval.cache else None
    result = evaluate_model(model, rset, k=cfg.eval.k, batch_size=cfg.eval.batch_size,
                            query_prompt=cfg.eval.query_prompt, passage_prompt=cfg.eval.passage_prompt,
                            show_progress=show_progress, cache_dir=cache_dir, model_fp=info["fingerprint"],
                            shard_size=cfg.eval.shard_size)
    return result, info


def data_info(rset: RetrievalSet) -> dict:
    return {"name": rset.name, "source": rset.source, "questions": len(rset.questions),
            "passages": len(rset.corpus), "corpus_fingerprint": rset.corpus_fingerprint(),
            "questions_fingerprint": rset.questions_fingerprint()}


def default_out(model_spec: str | None, cfg: DictConfig, data_name: str) -> Path:
    if cfg.out:
        return Path(cfg.out)
    if model_spec and Path(model_spec).is_dir():
        return Path(model_spec) / "eval" / data_name
    label = Path(cfg.run).stem if cfg.run else Path(str(model_spec)).name
    return Path("results") / f"{label}-{data_name}"


def run_evaluate(model_spec: str | None, cfg: DictConfig, out: str | None = None) -> tuple[EvalResult, dict, Path]:
    """Evaluate a model, or score the ranking file `run`, on `data=`; write results.json + run.trec.

    `data` may be a BoolQuestions-format set (sample, boolquestions-*, a folder) or a
    benchmark (quest..., birco-...); `out` defaults to CHECKPOINT/eval/<data> or
    results/<model>-<data>.
    """
    from .benchmarks import evaluate_benchmark, is_benchmark
    from .report import read_trec_run
    from .runner import score_run

    if cfg.run and model_spec and model_spec != cfg.model:
        raise ConfigError("give either a model to evaluate or run=FILE to score, not both")
    if is_benchmark(cfg.data):
        result, data = evaluate_benchmark(cfg.data, None if cfg.run else model_spec, cfg)
        info = result.settings.get("model") or {"run": cfg.run}
    else:
        rset = load_retrieval_set(cfg.data)
        sampling = None
        if cfg.eval.max_corpus and cfg.eval.max_corpus < len(rset.corpus):
            rset, sampling = subsample(rset, cfg.eval.max_corpus, cfg.seed)
        data = data_info(rset) | ({"corpus_sample": sampling} if sampling else {})
        if cfg.run:
            result, info = score_run(rset, read_trec_run(cfg.run), k=cfg.eval.k), {"run": cfg.run}
        else:
            result, info = evaluate_spec(model_spec, rset, cfg)
    out_dir = Path(out) if out else default_out(model_spec, cfg, data["name"])
    tag = Path(cfg.run).stem if cfg.run else Path(str(model_spec)).name
    if process_state().is_main_process:  # under `accelerate launch` every process encoded its shards
        payload = write_results(out_dir, result, model=info, data=data, k=cfg.eval.k, tag=tag)
    else:
        payload = results_dict(result, model=info, data=data, k=cfg.eval.k)
    return result, payload, out_dir
