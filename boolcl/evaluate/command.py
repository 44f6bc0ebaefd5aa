"""`boolcl evaluate`: score a model or checkpoint and write results.json + run.trec."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from ..data.loaders import RetrievalSet, load_retrieval_set
from ..models import fingerprint, load_model
from .report import write_results
from .runner import EvalResult, evaluate_model


def evaluate_spec(model_spec: str, rset: RetrievalSet, cfg: DictConfig, *, similarity: str | None = None,
                  show_progress: bool = True) -> tuple[EvalResult, dict]:
    """Load `model_spec`, evaluate it on `rset`; return the result and the model's description."""
    model = load_model(model_spec, similarity=similarity, max_length=cfg.eval.max_length)
    result = evaluate_model(model, rset, k=cfg.eval.k, batch_size=cfg.eval.batch_size,
                            query_prompt=cfg.eval.query_prompt, passage_prompt=cfg.eval.passage_prompt,
                            show_progress=show_progress)
    info = {"spec": model_spec, "origin": model.boolcl_origin, "fingerprint": fingerprint(model),
            "similarity": model.similarity_fn_name}
    return result, info


def data_info(rset: RetrievalSet) -> dict:
    return {"name": rset.name, "source": rset.source, "questions": len(rset.questions),
            "passages": len(rset.corpus)}


def run_evaluate(model_spec: str, cfg: DictConfig, out: str | None) -> tuple[EvalResult, dict, Path]:
    rset = load_retrieval_set(cfg.data)
    # A checkpoint folder knows its similarity; only a hub/packaged base takes it from the config.
    similarity = None if Path(model_spec).is_dir() else cfg.similarity
    result, info = evaluate_spec(model_spec, rset, cfg, similarity=similarity)
    out_dir = Path(out) if out else (Path(model_spec) / "eval" / rset.name if Path(model_spec).is_dir()
                                     else Path("results") / f"{Path(model_spec).name}-{rset.name}")
    payload = write_results(out_dir, result, model=info, data=data_info(rset), k=cfg.eval.k,
                            tag=Path(model_spec).name)
    return result, payload, out_dir
