"""Query and passage prompts: the user's overrides, else what the model's own config declares."""
from __future__ import annotations


def prompts_for(model, query_prompt: str | None, passage_prompt: str | None) -> tuple[str | None, str | None]:
    """Overrides win; otherwise the prompts the model's own config declares (e5, bge, ...)."""
    declared = getattr(model, "prompts", {}) or {}
    q = query_prompt if query_prompt is not None else declared.get("query") or None
    p = passage_prompt if passage_prompt is not None else (declared.get("document") or declared.get("passage") or None)
    return q, p
