"""Each cache entry carries the key it was written under and is read only under that key.

An entry's files copied over another entry's same-named files (another model's, another
setting's) are a miss with a warning; the entry is rebuilt in place and the result is what a
run without the cache gives. Two evaluations at once on one cache folder both give the
uncached run.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT
from safetensors.numpy import load as load_arrays
from safetensors.numpy import save as save_arrays
from test_cache_key import _modules
from test_generate_llm import cfg as llm_cfg
from test_generate_llm import echo, msgs
from test_generate_llm import run as ask

from boolcl.cli import main
from boolcl.llm.cache import AnswerCache
from boolcl.retrieval.cache import encode_cached, pack, unpack
from boolcl.retrieval.encode import encode
from boolcl.retrieval.identity import embedding_identity, encoder_state
from boolcl.retrieval.models import load_model
from boolcl.train.collate import Collator
from boolcl.train.mixing import Item
from boolcl.train.start_table import StartTable, StartView, retention_rows


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def _cls_copy(model_dir: Path, out: Path) -> Path:
    """The same weights with CLS pooling instead of the mean."""
    _, Pooling, _ = _modules()
    model = load_model(str(model_dir))
    config = model[1].get_config_dict()
    model._modules["1"] = Pooling(config.get("embedding_dimension") or config["word_embedding_dimension"], "cls")
    model.save(str(out))
    return out


def _vectors(path: Path) -> np.ndarray:
    return load_arrays(path.read_bytes())["embeddings"]


def _copy_over(src: Path, dst: Path, pattern: str) -> list[str]:
    """Copy `src`'s files matching `pattern` over `dst`'s same-named ones; their names."""
    names = sorted(f.name for f in src.glob(pattern))
    assert names and all((dst / n).is_file() for n in names)
    for name in names:
        shutil.copyfile(src / name, dst / name)
    return names


def test_an_entry_is_trusted_only_whole_and_under_its_own_key():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    data = pack(save_arrays, {"embeddings": array}, {"key": "k1", "shard": "0"})
    assert unpack(data, "k1") == ({"key": "k1", "shard": "0"}, None)
    assert "was written under key k1, not k2" in unpack(data, "k2")[1]
    size = int.from_bytes(data[:8], "little")
    renamed = data.replace(b'"k1"', b'"k2"')  # the key edited in place: the checksum covers it
    flipped = data[:-1] + bytes([data[-1] ^ 1])
    for bad, why in [(renamed, "does not match its checksum"), (flipped, "does not match its checksum"),
                     (data[:size + 10], "does not match its checksum"), (data[:size], "not a readable cache entry"),
                     (b"", "not a readable cache entry"), (b"\xff" * 64, "not a readable cache entry"),
                     (save_arrays({"embeddings": array}), "has no checksum or key"),
                     (save_arrays({"embeddings": array}, metadata={"key": "k1"}), "has no checksum or key")]:
        header, found = unpack(bad, "k1")
        assert header is None and why in found, (bad[:40], found)


@pytest.mark.parametrize("other", ["model", "setting"])
def test_shards_of_another_entry_are_encoded_again(other, tiny_model_dir, small_set, tmp_path):
    model = str(tiny_model_dir)
    args = [f"data={small_set}", f"eval.cache_dir={tmp_path / 'emb'}", "eval.shard_size=2"]
    theirs = [str(_cls_copy(tiny_model_dir, tmp_path / "cls"))] if other == "model" else [model, "eval.max_length=8"]
    assert main(["evaluate", model, *args, "eval.cache=false", f"out={tmp_path / 'fresh'}"]) == 0
    assert main(["evaluate", model, *args, f"out={tmp_path / 'mine'}"]) == 0
    assert main(["evaluate", *theirs, *args, f"out={tmp_path / 'theirs'}"]) == 0
    mine, foreign = (Path(_results(tmp_path / x)["settings"]["embedding_cache"]["dir"]) for x in ("mine", "theirs"))
    assert mine != foreign
    names = sorted(f.name for f in mine.glob("shard-*.safetensors"))
    before = {n: _vectors(mine / n) for n in names}
    names = _copy_over(foreign, mine, "shard-*.safetensors")
    assert len(names) == 3  # the copies hold other vectors: read as they are, they would rank otherwise
    assert any(not np.allclose(_vectors(mine / n), before[n], atol=1e-4) for n in names)

    with pytest.warns(UserWarning, match=r"embedding cache: .*shard-0000\d\.safetensors was written under key") as got:
        assert main(["evaluate", model, *args, f"out={tmp_path / 'again'}"]) == 0
    assert sorted(Path(str(w.message).split()[2]).name for w in got if "embedding cache" in str(w.message)) == names
    assert _results(tmp_path / "again")["settings"]["embedding_cache"]["encoded_here"] == 3
    assert (tmp_path / "again" / "run.trec").read_text() == (tmp_path / "fresh" / "run.trec").read_text()
    assert all(unpack((mine / n).read_bytes(), mine.name)[0] is not None for n in names)  # rebuilt under its key
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["evaluate", model, *args, f"out={tmp_path / 'third'}"]) == 0
    assert _results(tmp_path / "third")["settings"]["embedding_cache"]["encoded_here"] == 0
    assert (tmp_path / "third" / "run.trec").read_text() == (tmp_path / "fresh" / "run.trec").read_text()


def test_a_shard_swapped_with_another_of_its_entry_is_encoded_again(tiny_model_dir, tmp_path):
    model = load_model(str(tiny_model_dir))
    texts = [f"passage {i} on topic {i % 2}" for i in range(7)]
    fresh, _ = encode_cached(lambda ts: encode(model, ts, show_progress=False), texts, tmp_path / "c", shard_size=3)
    first, second = tmp_path / "c" / "shard-00000.safetensors", tmp_path / "c" / "shard-00001.safetensors"
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)  # same key, same rows, the other shard's texts
    with pytest.warns(UserWarning, match=r"was written as shard \d of texts \w+, not as shard \d") as got:
        again, info = encode_cached(lambda ts: encode(model, ts, show_progress=False), texts, tmp_path / "c",
                                    shard_size=3)
    assert sum("another shard's file" in str(w.message) for w in got) == 2
    assert info["encoded_here"] == 2 and np.array_equal(again, fresh)


def _start_table(model, rows, collator, cache):
    identity = embedding_identity(model, prompt=None, state=encoder_state(model, with_tokenizer=False))
    return StartTable(StartView(model, identity), rows, collator, batch_size=2, cache_dir=cache, identity=identity,
                      settings={"precision": "none", "device": "cpu", "packed": False})


@pytest.mark.parametrize("other", ["model", "setting"])
def test_a_start_table_of_another_entry_is_encoded_again(other, tiny_model_dir, tmp_path):
    model = load_model(str(tiny_model_dir))
    items = [Item("what is a cello?", ["c"], ["The cello is played seated."], ["v"], ["The violin has four strings."],
                 "simple", retain=True),
             Item("which instruments are plucked?", ["h"], ["The harp is plucked."], ["c"],
                  ["The cello is played seated."], "simple", retain=True)]
    collator = Collator(model.tokenizer, 32, 1)
    rows = retention_rows(items, collator)
    if other == "model":  # the same weights, pooled by CLS: other vectors for the same rows
        theirs_model, theirs_rows = load_model(str(_cls_copy(tiny_model_dir, tmp_path / "cls"))), rows
        theirs_collator = collator
    else:  # a query prompt: other rows, so other vectors, in as many of them
        theirs_model, theirs_collator = model, Collator(model.tokenizer, 32, 1, query_prompt="query: ")
        theirs_rows = retention_rows(items, theirs_collator)
    plain = StartTable(StartView(model), rows, collator, batch_size=2)
    mine = _start_table(model, rows, collator, tmp_path / "emb")
    theirs = _start_table(theirs_model, theirs_rows, theirs_collator, tmp_path / "emb")
    assert torch.equal(mine.table, plain.table) and not torch.allclose(theirs.table, mine.table, atol=1e-4)
    mine_dir, theirs_dir = Path(mine.cache["dir"]), Path(theirs.cache["dir"])
    assert mine_dir != theirs_dir
    _copy_over(theirs_dir, mine_dir, "shard-*.safetensors")
    with pytest.warns(UserWarning, match=r"embedding cache: .*shard-00000\.safetensors was written under key"):
        again = _start_table(model, rows, collator, tmp_path / "emb")
    assert again.cache["encoded_here"] == 1 and torch.equal(again.table, plain.table)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = _start_table(model, rows, collator, tmp_path / "emb")
    assert third.cache["encoded_here"] == 0 and torch.equal(third.table, plain.table)


@pytest.mark.parametrize("theirs", [{"model": "other-model"}, {"temperature": 0.7}])
def test_an_llm_answer_of_another_request_is_asked_again(theirs, tmp_path, monkeypatch):
    from llm_server import LLMServer

    monkeypatch.delenv("BOOLCL_TEST_LLM_KEY", raising=False)
    cache = AnswerCache(tmp_path / "llm")
    with LLMServer(echo) as srv:
        (mine_answer,), _ = ask(llm_cfg(srv.base_url), [msgs(0)], cache)
        ask(llm_cfg(srv.base_url, **theirs), [msgs(1)], cache)  # another model or setting, another answer
        files = {f.read_text(): f for f in (tmp_path / "llm").rglob("*.json")}
        assert len(files) == 2
        mine_file = next(f for text, f in files.items() if msgs(0)[-1]["content"] in text)
        theirs_file = next(f for text, f in files.items() if msgs(1)[-1]["content"] in text)
        shutil.copyfile(theirs_file, mine_file)
        asked = srv.requests
        with pytest.warns(UserWarning, match=r"LLM answer cache: .* was written for another request"):
            (again,), stats = ask(llm_cfg(srv.base_url), [msgs(0)], cache)
        assert srv.requests == asked + 1 and stats.cache_hits == 0
        assert again.text == mine_answer.text == echo(msgs(0))
        with warnings.catch_warnings():  # written over: read back without a word
            warnings.simplefilter("error")
            (third,), stats = ask(llm_cfg(srv.base_url), [msgs(0)], cache)
        assert srv.requests == asked + 1 and stats.cache_hits == 1 and third.text == mine_answer.text


def test_two_evaluations_at_once_on_one_cache_folder(tiny_model_dir, small_set, tmp_path):
    args = [str(tiny_model_dir), f"data={small_set}", f"eval.cache_dir={tmp_path / 'emb'}", "eval.shard_size=1"]
    assert main(["evaluate", *args, "eval.cache=false", f"out={tmp_path / 'fresh'}"]) == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "boolcl.cli", "evaluate", *args, f"out={tmp_path / name}"],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("one", "two")]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outs):
        assert proc.returncode == 0, err[-3000:]
        assert "embedding cache:" not in err, err[-3000:]  # neither read a half-written or mixed shard
    fresh = (tmp_path / "fresh" / "run.trec").read_text()
    assert all((tmp_path / name / "run.trec").read_text() == fresh for name in ("one", "two"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["evaluate", *args, f"out={tmp_path / 'after'}"]) == 0
    assert _results(tmp_path / "after")["settings"]["embedding_cache"]["encoded_here"] == 0
    assert (tmp_path / "after" / "run.trec").read_text() == fresh
    assert not list((tmp_path / "emb").rglob("*.tmp"))
