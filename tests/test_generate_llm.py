"""The LLM layer through the real `openai` client against a real local HTTP server."""
from __future__ import annotations

import asyncio
import time

import pytest
from llm_server import LLMServer
from omegaconf import OmegaConf

from boolcl.config.schema import LLMCfg
from boolcl.errors import LLMError
from boolcl.llm.cache import AnswerCache
from boolcl.llm.client import LLM, LLMStats, OpenAIBackend

KEY_ENV = "BOOLCL_TEST_LLM_KEY"
KEY = "sk-test-9f3c1e77-unit"


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)  # the environment, not the code under test
    return KEY


def cfg(base_url, **kw):
    base = dict(backend="openai", base_url=base_url, model="test-model", api_key_env=KEY_ENV, concurrency=4,
                timeout=5.0, max_retries=4, backoff=0.01, max_backoff=0.05)
    base.update(kw)
    return OmegaConf.structured(LLMCfg(**base))


def msgs(i: int | str = 0):
    return [{"role": "system", "content": "s"}, {"role": "user", "content": f"Say something about item {i}."}]


def run(c, prompts, cache=None):
    """Ask every prompt concurrently through a fresh LLM; return (answers or exception, stats)."""
    async def main():
        stats = LLMStats()
        backend = OpenAIBackend(c, stats)
        llm = LLM(backend, stats, identity={"backend": "openai", "base_url": c.base_url, "model": c.model,
                                            "temperature": c.temperature, "max_tokens": c.max_tokens},
                  concurrency=c.concurrency, cache=cache)
        try:
            return await asyncio.gather(*(llm.ask(m) for m in prompts)), stats
        finally:
            await llm.close()
    return asyncio.run(main())


def echo(messages):
    return "echo: " + messages[-1]["content"]


def test_answers_concurrency_and_key_header(key):
    with LLMServer(echo, latency=0.1, require_key=key) as srv:
        answers, stats = run(cfg(srv.base_url, concurrency=4), [msgs(i) for i in range(12)])
        assert [a.text for a in answers] == [f"echo: Say something about item {i}." for i in range(12)]
        assert srv.max_in_flight == 4  # concurrent, and never more than llm.concurrency
        assert srv.requests == 12 and stats.requests == 12
        assert all(a.prompt_tokens > 0 and a.completion_tokens > 0 for a in answers)


def test_identical_prompts_in_flight_cost_one_request(key):
    with LLMServer(echo, latency=0.1) as srv:
        answers, stats = run(cfg(srv.base_url), [msgs("same")] * 10)
        assert srv.requests == 1 and stats.shared == 9 and len({a.text for a in answers}) == 1


def test_retries_honour_retry_after_and_count(key):
    with LLMServer(echo) as srv:
        srv.script({"status": 429, "retry_after": 0.6}, times=1)
        srv.script({"status": 500}, times=1)
        srv.script({"status": 503}, times=1)
        t = time.perf_counter()
        answers, stats = run(cfg(srv.base_url, concurrency=1), [msgs(1)])
        assert time.perf_counter() - t >= 0.6  # waited as told, not the 10 ms back-off
        assert answers[0].text.startswith("echo")
        assert srv.statuses() == [429, 500, 503, 200]
        assert dict(stats.retries) == {"429": 1, "500": 1, "503": 1}


def test_timeouts_are_retried(key):
    with LLMServer(echo) as srv:
        srv.script({"delay": 1.5}, times=1)
        answers, stats = run(cfg(srv.base_url, timeout=0.4, concurrency=1), [msgs(1)])
        assert answers[0].text.startswith("echo") and stats.retries["timeout"] == 1


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_is_immediate_and_clear(key, status):
    with LLMServer(echo, latency=0.05) as srv:
        srv.script({"status": status, "message": "Incorrect API key provided"}, times=None)
        t = time.perf_counter()
        with pytest.raises(LLMError) as err:
            run(cfg(srv.base_url, concurrency=8, max_retries=5), [msgs(i) for i in range(40)])
        assert time.perf_counter() - t < 3
        assert srv.requests == 1  # no retry, no storm: the others never left
        text = str(err.value)
        assert f"HTTP {status}" in text and KEY_ENV in text and "llm.api_key_env" in text
        assert KEY not in text


def test_wrong_model_is_a_clear_error(key):
    with LLMServer(echo) as srv:
        srv.script({"status": 404, "message": "model 'nope' not found"}, times=None)
        with pytest.raises(LLMError, match=r"404 for model 'nope'.*llm.model"):
            run(cfg(srv.base_url, model="nope"), [msgs()])
        assert srv.requests == 1


def test_giving_up_after_retries_says_how_to_resume(key):
    with LLMServer(echo) as srv:
        srv.script({"status": 500}, times=None)
        with pytest.raises(LLMError, match=r"kept failing \(500\) after 2 retries.*resumes"):
            run(cfg(srv.base_url, max_retries=2), [msgs()])
        assert srv.requests == 3


def test_malformed_bodies_are_retried_then_reported(key):
    with LLMServer(echo) as srv:
        srv.script({"body": "<html>502 bad gateway</html>", "ctype": "text/html"}, times=1)
        answers, stats = run(cfg(srv.base_url), [msgs()])
        assert answers[0].text.startswith("echo") and stats.malformed == 1
        srv.script({"body": '{"choices": []}'}, times=None)
        answers, stats = run(cfg(srv.base_url), [msgs("x")])
        assert answers[0].text is None and answers[0].finish_reason == "malformed" and stats.malformed == 3


def test_missing_key_for_the_default_endpoint(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(LLMError, match=f"API key in the environment variable {KEY_ENV}"):
        OpenAIBackend(cfg(None), LLMStats())


def test_local_server_without_key_works(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with LLMServer(echo) as srv:
        answers, _ = run(cfg(srv.base_url), [msgs()])
        assert answers[0].text.startswith("echo")


def test_cache_makes_reruns_free_and_never_holds_the_key(key, tmp_path):
    cache = AnswerCache(tmp_path / "llm")
    with LLMServer(echo) as srv:
        first, _ = run(cfg(srv.base_url), [msgs(i) for i in range(5)], cache)
        n = srv.requests
        again, stats = run(cfg(srv.base_url), [msgs(i) for i in range(5)], cache)
        assert srv.requests == n == 5 and stats.cache_hits == 5 and stats.requests == 0
        assert [a.text for a in again] == [a.text for a in first]
        # a different temperature is a different answer: asked again
        run(cfg(srv.base_url, temperature=0.5), [msgs(0)], cache)
        assert srv.requests == 6
    files = list((tmp_path / "llm").rglob("*"))
    assert len([f for f in files if f.is_file()]) == 6
    assert not any(KEY in f.read_text() for f in files if f.is_file())
