"""The LLM layer: an async OpenAI-compatible client with retries, a concurrency cap and a cache.

`OpenAIBackend.complete` makes one chat-completions request through the real `openai`
package (its own retries are off: back-off is done here so that Retry-After is
honoured and every retry is counted). `LLM.ask` puts the cache, a single-flight table
(two identical prompts in flight cost one request) and the concurrency limit in
front of any backend. Until the first request succeeds, requests go one at a time,
so a bad key costs one request and a clear error, not a storm of 401s.

Back-off (429, 5xx, timeouts, dropped connections) is for a server that is there but
busy. Nothing listening at the endpoint (connection refused, unknown or unreachable
host) is a wrong `llm.base_url` or a server that is down: it is tried
UNREACHABLE_RETRIES more times, quickly, then the run stops with the endpoint named.
Endpoints are always named through boolcl.llm.url, which drops a `user:password@`.

The API key is read from the environment variable named by `llm.api_key_env` when
the backend is built and is handed to the client only; it never enters a cache
entry, a log line, the report or the output.
"""
from __future__ import annotations

import asyncio
import email.utils
import errno
import os
import random
import socket
import time
from collections import Counter
from dataclasses import dataclass, field

from boolcl.errors import LLMError
from boolcl.llm.cache import (
    AnswerCache,
    cache_key,
    normalise_base_url,
    request_identity,
)
from boolcl.llm.url import scrub

MAX_RETRY_AFTER = 600.0
MALFORMED_RETRIES = 2
UNREACHABLE_RETRIES = 2  # quick retries when nothing listens at the endpoint
UNREACHABLE_DELAY = 0.25  # seconds before the first of them, doubled for the next
UNREACHABLE_ERRNOS = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL}


@dataclass
class Completion:
    text: str | None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False  # token counts guessed from lengths (offline backend)

    def to_dict(self) -> dict:
        return {"text": self.text, "finish_reason": self.finish_reason, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "estimated": self.estimated}

    @classmethod
    def from_dict(cls, d: dict) -> "Completion":
        return cls(d.get("text"), d.get("finish_reason"), int(d.get("prompt_tokens") or 0),
                   int(d.get("completion_tokens") or 0), bool(d.get("estimated", False)))


@dataclass
class LLMStats:
    requests: int = 0  # HTTP requests sent (retries included)
    answers: int = 0  # answers received from the backend in this run
    cache_hits: int = 0
    shared: int = 0  # identical prompts answered by a request already in flight
    retries: Counter = field(default_factory=Counter)  # reason -> count
    malformed: int = 0
    prompt_tokens: int = 0  # this run's requests
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # what the cached answers cost when they were made
    cached_completion_tokens: int = 0
    estimated_tokens: bool = False
    busy_s: float = 0.0  # wall time with at least one request in flight

    def to_dict(self) -> dict:
        return {"requests": self.requests, "answers": self.answers, "cache_hits": self.cache_hits,
                "shared_in_flight": self.shared, "retries": dict(sorted(self.retries.items())),
                "malformed_responses": self.malformed}


def _retry_after(response) -> float | None:
    """Seconds from a Retry-After / retry-after-ms header (number or HTTP date)."""
    if response is None:
        return None
    headers = response.headers
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _unreachable(err: BaseException) -> str | None:
    """Why nothing answers at all (refused, unknown host, unreachable), from the error's causes; else None."""
    seen = 0
    x: BaseException | None = err
    while x is not None and seen < 20:
        if isinstance(x, ConnectionRefusedError):
            return "connection refused"
        if isinstance(x, socket.gaierror):
            return "host name not found"
        if isinstance(x, OSError) and x.errno in UNREACHABLE_ERRNOS:
            return os.strerror(x.errno).lower()
        x, seen = x.__cause__ or x.__context__, seen + 1
    return None


def _observed(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()


class OpenAIBackend:
    """One chat-completions request at a time per call; concurrency is the caller's business."""

    name = "openai"

    def __init__(self, llm_cfg, stats: LLMStats):
        import openai

        self.cfg = llm_cfg
        self.stats = stats
        self.model = str(llm_cfg.model)
        self.base_url = llm_cfg.base_url
        env = str(llm_cfg.api_key_env)
        key = os.environ.get(env, "")
        if not key:
            if self.base_url is None:
                raise LLMError(f"llm.backend=openai needs an API key in the environment variable {env} "
                               f"(llm.api_key_env names the variable), or llm.base_url=... for a local "
                               f"server that needs none, or llm.backend=offline")
            key = "no-key"  # local servers (vLLM, llama.cpp) usually accept anything
        self.key_env = env
        self._openai = openai
        self._client = openai.AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0,
                                          timeout=float(llm_cfg.timeout))
        del key

    @property
    def where(self) -> str:
        return normalise_base_url(self.base_url)

    async def close(self) -> None:
        await self._client.close()

    def _backoff(self, attempt: int) -> float:
        base = float(self.cfg.backoff) * (2 ** attempt)
        return min(float(self.cfg.max_backoff), base) * (0.5 + random.random() / 2)

    def _fatal(self, err) -> LLMError:
        o = self._openai
        status = getattr(err, "status_code", None)
        detail = scrub(getattr(err, "message", None) or str(err), self.base_url)
        if isinstance(err, (o.AuthenticationError, o.PermissionDeniedError)):
            return LLMError(f"the endpoint {self.where} refused the credentials (HTTP {status}): check the key in "
                            f"the environment variable {self.key_env} (llm.api_key_env) and its access to model "
                            f"{self.model!r}; nothing was retried. Server said: {detail}")
        if isinstance(err, o.NotFoundError):
            return LLMError(f"the endpoint {self.where} answered 404 for model {self.model!r}: check llm.model "
                            f"and llm.base_url (it usually ends in /v1). Server said: {detail}")
        return LLMError(f"the endpoint {self.where} rejected the request (HTTP {status}) for model "
                        f"{self.model!r}: check llm.model, llm.max_tokens and llm.temperature. Server said: {detail}")

    async def complete(self, messages: list[dict]) -> Completion:
        o = self._openai
        attempt = 0
        malformed = 0
        unreachable = 0
        while True:
            self.stats.requests += 1
            reason, wait = None, None
            try:
                resp = await self._client.chat.completions.create(
                    model=self.model, messages=messages, temperature=float(self.cfg.temperature),
                    max_tokens=int(self.cfg.max_tokens))
            except o.APIStatusError as err:
                status = err.status_code
                if status in (408, 409, 425, 429) or status >= 500:
                    reason, wait = str(status), _retry_after(err.response)
                else:
                    raise self._fatal(err) from None
            except o.APITimeoutError:
                reason = "timeout"
            except o.APIConnectionError as err:
                why = _unreachable(err)
                if why is not None:
                    if unreachable >= min(UNREACHABLE_RETRIES, int(self.cfg.max_retries)):
                        raise LLMError(f"nothing answers at the endpoint {self.where} ({why}, {unreachable + 1} "
                                       f"tries): check llm.base_url and that the server is running") from None
                    self.stats.retries["unreachable"] += 1
                    await asyncio.sleep(UNREACHABLE_DELAY * (2 ** unreachable))
                    unreachable += 1
                    continue
                reason = "connection"
            except (o.APIResponseValidationError, ValueError, TypeError):  # a body that is not a chat completion
                resp, reason = None, "malformed"
            else:
                comp = self._extract(resp)
                if comp is not None:
                    return comp
                reason = "malformed"
            if reason == "malformed":
                self.stats.malformed += 1
                malformed += 1
                if malformed > MALFORMED_RETRIES:
                    return Completion(None, "malformed")
            if attempt >= int(self.cfg.max_retries):
                raise LLMError(f"the endpoint {self.where} kept failing ({reason}) after {attempt} retries; "
                               f"answers received so far are cached, so rerunning the same command resumes. "
                               f"Raise llm.max_retries or lower llm.concurrency if the server is overloaded")
            self.stats.retries[reason] += 1
            delay = min(wait, MAX_RETRY_AFTER) if wait is not None else self._backoff(attempt)
            attempt += 1
            await asyncio.sleep(delay)

    @staticmethod
    def _extract(resp) -> Completion | None:
        """The text of a normal response; None when the body is not a chat completion."""
        try:
            choice = resp.choices[0]
            text = choice.message.content
            if text is not None and not isinstance(text, str):
                return None
            usage = getattr(resp, "usage", None)
            return Completion(text, getattr(choice, "finish_reason", None),
                              int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0,
                              int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0)
        except (AttributeError, IndexError, TypeError, KeyError, ValueError):
            return None


class LLM:
    """Cache + single flight + concurrency limit + first-call gate, in front of a backend."""

    def __init__(self, backend, stats: LLMStats, *, identity: dict, concurrency: int,
                 cache: AnswerCache | None):
        self.backend = backend
        self.stats = stats
        self.identity = identity  # backend, base_url, model, temperature, max_tokens
        self.cache = cache
        self._sem = asyncio.Semaphore(max(1, int(concurrency)))
        self._inflight: dict[str, asyncio.Task] = {}
        self._gate = asyncio.Lock()
        self._opened = False
        self._fatal: LLMError | None = None
        self._seen: set[str] = set()
        self._active = 0
        self._busy_since = 0.0

    async def ask(self, messages: list[dict]) -> Completion:
        request = request_identity(messages=messages, **self.identity)
        key = cache_key(request)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                comp = Completion.from_dict(hit)
                self.stats.cache_hits += 1
                if key not in self._seen:  # each distinct answer's cost counts once
                    self._seen.add(key)
                    self.stats.cached_prompt_tokens += comp.prompt_tokens
                    self.stats.cached_completion_tokens += comp.completion_tokens
                return comp
        task = self._inflight.get(key)
        if task is not None:
            self.stats.shared += 1
            return await asyncio.shield(task)
        task = asyncio.ensure_future(self._fetch(key, request, messages))
        task.add_done_callback(_observed)  # a waiter cancelled after an error must not leave it unread
        self._inflight[key] = task
        self._seen.add(key)
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._inflight.pop(key, None)
            else:  # our caller was cancelled: let the request finish for whoever else waits
                task.add_done_callback(lambda _t, k=key: self._inflight.pop(k, None))

    async def _fetch(self, key: str, request: dict, messages: list[dict]) -> Completion:
        if not self._opened:
            async with self._gate:  # one request at a time until one has succeeded
                if not self._opened:
                    comp = await self._call(messages)
                    self._opened = True
                    return await self._store(key, request, comp)
        return await self._store(key, request, await self._call(messages))

    async def _call(self, messages: list[dict]) -> Completion:
        if self._fatal is not None:
            raise self._fatal
        try:
            return await self._call_backend(messages)
        except LLMError as err:
            self._fatal = err
            raise

    async def _call_backend(self, messages: list[dict]) -> Completion:
        async with self._sem:
            if self._fatal is not None:
                raise self._fatal
            if self._active == 0:
                self._busy_since = time.perf_counter()
            self._active += 1
            try:
                comp = await self.backend.complete(messages)
            finally:
                self._active -= 1
                if self._active == 0:
                    self.stats.busy_s += time.perf_counter() - self._busy_since
        self.stats.answers += 1
        self.stats.prompt_tokens += comp.prompt_tokens
        self.stats.completion_tokens += comp.completion_tokens
        self.stats.estimated_tokens |= comp.estimated
        return comp

    async def _store(self, key: str, request: dict, comp: Completion) -> Completion:
        if self.cache is not None:
            await self.cache.put(key, request, comp.to_dict())
        return comp

    async def close(self) -> None:
        """Cancel what is still in flight (after an error) and close the backend."""
        pending = [t for t in self._inflight.values() if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        self._inflight.clear()
        close = getattr(self.backend, "close", None)
        if close is not None:
            await close()
