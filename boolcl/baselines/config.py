"""Settings of `boolcl decompose`, the section `decompose` of the project config."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class DecomposeCfg:
    backend: str = "offline"  # offline (rule-based decomposer, labelled offline-rules) | llm (the `llm` section's endpoint)
    depth_factor: int = 2  # each simple question retrieves depth_factor * eval.k passages (the paper: 2k)
    soft_lambda: float = 1.0  # soft NOT: score(keep) - soft_lambda * score(drop)
    soft_rule: str = "linear"  # linear (similarity scores) | rank (reciprocal-rank scores 1/(rrf_k + rank))
    soft_anchor: float = 0.5  # soft: add this times the original question's score; 0 for the pure decomposition
    rrf_k: float = 60.0  # constant of soft_rule=rank
    cache_dir: Optional[str] = ".boolcl_cache/decompose"  # LLM answers (null: no cache)


def check(d) -> None:
    from ..config import ConfigError

    if str(d.backend) not in ("offline", "llm"):
        raise ConfigError(f"decompose.backend: {d.backend!r} is not one of offline, llm")
    if str(d.soft_rule) not in ("linear", "rank"):
        raise ConfigError(f"decompose.soft_rule: {d.soft_rule!r} is not one of linear, rank")
    if int(d.depth_factor) < 1:
        raise ConfigError(f"decompose.depth_factor must be >= 1, got {d.depth_factor}")
    if float(d.soft_lambda) < 0 or float(d.soft_anchor) < 0:
        raise ConfigError("decompose.soft_lambda and decompose.soft_anchor must be >= 0")
    if float(d.rrf_k) <= 0:
        raise ConfigError(f"decompose.rrf_k must be > 0, got {d.rrf_k}")
