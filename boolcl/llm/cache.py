"""On-disk cache of LLM answers: one small JSON file per request, written atomically.

The key is a hash of everything that shapes an answer — backend, endpoint, model,
temperature, max_tokens and the exact messages — and of nothing else: the API key
is never part of it and never stored, nor is a `user:password@` in the endpoint URL
(each entry records its request, so the endpoint goes in redacted). A file appears only once its answer is
complete (temp file + rename), so a run killed at any moment leaves whole entries
only, and the next run resumes from them.

Each entry holds its key and the request it answers, and is used only when both match the key it
is read under: a file copied from another request's entry, or one that is not an entry, is a miss
with a warning, and the request is asked again and its answer written over it.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import warnings
from pathlib import Path

from boolcl.files import atomic_write_text
from boolcl.llm.url import endpoint

CACHE_FORMAT = 1


def normalise_base_url(base_url: str | None) -> str:
    """The endpoint without credentials or a trailing slash: the same server gives the same key."""
    return endpoint(base_url)


def request_identity(*, backend: str, base_url: str | None, model: str, temperature: float, max_tokens: int,
                     messages: list[dict]) -> dict:
    """What the cache key covers. Add a field here when a new setting changes answers."""
    return {"format": CACHE_FORMAT, "backend": backend, "base_url": normalise_base_url(base_url),
            "model": model, "temperature": float(temperature), "max_tokens": int(max_tokens),
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages]}


def cache_key(identity: dict) -> str:
    blob = json.dumps(identity, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _key_of(request) -> str | None:
    """The key of a stored request (None if it is not one)."""
    try:
        return cache_key(request)
    except (TypeError, ValueError):
        return None


def _miss(path: Path, why: str) -> None:
    warnings.warn(f"LLM answer cache: {path} {why}; asking again", stacklevel=3)
    return None


class AnswerCache:
    """`get(key)` -> the stored response dict or None; `put(key, request, response)` stores one."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        path = self.path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except ValueError:  # not JSON, not UTF-8: not written by us (renames are atomic)
            return _miss(path, "is not a readable entry")
        if not (isinstance(entry, dict) and "response" in entry and "request" in entry):
            return _miss(path, "is not an entry (no request or response)")
        if entry.get("key") != key or _key_of(entry["request"]) != key:
            return _miss(path, f"was written for another request (key {entry.get('key')}), not {key}")
        return entry["response"]

    def put_sync(self, key: str, request: dict, response: dict) -> None:
        entry = {"key": key, "request": request, "response": response}
        atomic_write_text(self.path(key), json.dumps(entry, ensure_ascii=False))

    async def put(self, key: str, request: dict, response: dict) -> None:
        """Write in a worker thread: the fsync must not stall the event loop."""
        await asyncio.to_thread(self.put_sync, key, request, response)

    def __len__(self) -> int:
        return sum(1 for _ in self.folder.glob("*/*.json"))
