"""What a run is: which LLM answers it, a hash of everything that decides its draws, its small state file.

The LLM's identity (backend, URL, model, sampling) keys the answer cache and the run hash.
The state file, named by the run hash, records how many draws each operator needed, so
an identical rerun stops launching draws exactly there and makes no request at all.
What the outputs say about the LLM (`llm_info`) never carries a user:password from the URL.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from boolcl.files import atomic_write_text
from boolcl.generate import prompts
from boolcl.generate.cluster import Group
from boolcl.generate.corpus import Passages
from boolcl.generate.offline import OFFLINE_MODEL, OfflineBackend
from boolcl.llm.client import LLMStats, OpenAIBackend
from boolcl.llm.url import redact_url


def llm_backend(cfg, stats: LLMStats):
    """(the backend that answers prompts, its identity) for `llm.backend`."""
    if cfg.llm.backend == "offline":
        return OfflineBackend(), {"backend": "offline", "base_url": "offline", "model": OFFLINE_MODEL,
                                  "temperature": 0.0, "max_tokens": 0}
    b = OpenAIBackend(cfg.llm, stats)
    return b, {"backend": "openai", "base_url": cfg.llm.base_url, "model": str(cfg.llm.model),
               "temperature": float(cfg.llm.temperature), "max_tokens": int(cfg.llm.max_tokens)}


def public_url(url: str | None) -> str | None:
    """The base URL without any user:password part (boolcl.llm.url.redact_url)."""
    return redact_url(url)


def llm_info(cfg, identity: dict) -> dict:
    """The LLM as the examples' provenance and the report name it."""
    info = {"backend": identity["backend"], "model": identity["model"]}
    if cfg.llm.backend != "offline":
        info["base_url"] = public_url(cfg.llm.base_url) or "https://api.openai.com/v1"
    return info


def run_identity(identity: dict, cfg, targets: dict, passages: Passages, groups: list[Group]) -> str:
    """A hash of everything that decides which draws a run makes and what they yield."""
    g = cfg.generate
    h = hashlib.sha256()
    h.update(json.dumps({"llm": identity, "prompts": prompts.PROMPT_VERSION, "seed": int(cfg.seed),
                         "targets": targets, "filter": str(g.filter), "min_c": int(g.min_candidates),
                         "max_c": int(g.max_candidates), "limit": int(g.max_passage_chars),
                         "budget": float(g.max_draws_per_example)}, sort_keys=True).encode())
    for x in groups:
        h.update(x.gid.encode() + b"\x1e")
        for i in x.members:
            d = passages.docs[i]
            h.update(f"{d.docid}\x1f{d.title or ''}\x1f{d.doc}\x1e".encode())
    return h.hexdigest()[:32]


def state_path(cache_dir: Path, run_id: str) -> Path:
    return cache_dir / "runs" / f"{run_id}.json"


def read_hint(state: Path | None) -> dict[str, int]:
    """Draws per operator that a finished identical run needed; {} when there is none or it is unreadable."""
    if state is None or not state.is_file():
        return {}
    try:
        return {op: int(n) for op, n in json.loads(state.read_text())["walked"].items()}
    except (ValueError, KeyError, TypeError):
        return {}


def save_walked(state: Path, walked: dict[str, int]) -> None:
    atomic_write_text(state, json.dumps({"walked": walked}))
