import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from safetensors.numpy import load as load_arrays
from safetensors.numpy import save as save_arrays

from boolcl.cli import main
from boolcl.retrieval.cache import encode_cached
from boolcl.retrieval.encode import encode
from boolcl.retrieval.models import load_model


def _results(out):
    return json.loads((out / "results.json").read_text())


def test_second_evaluation_reads_the_cache_and_a_lost_shard_is_redone(tiny_model_dir, small_set, tmp_path):
    args = ["evaluate", str(tiny_model_dir), f"data={small_set}", f"eval.cache_dir={tmp_path / 'emb'}",
            "eval.shard_size=2"]
    assert main([*args, f"out={tmp_path / 'a'}"]) == 0
    first = _results(tmp_path / "a")
    assert first["settings"]["embedding_cache"]["encoded_here"] == 3  # 6 passages, shards of 2
    assert main([*args, f"out={tmp_path / 'b'}"]) == 0
    second = _results(tmp_path / "b")
    assert second["settings"]["embedding_cache"]["encoded_here"] == 0 and second["headline"] == first["headline"]
    folder = next((tmp_path / "emb").iterdir())
    (folder / "shard-00001.safetensors").unlink()  # as if killed during that shard
    assert main([*args, f"out={tmp_path / 'c'}"]) == 0
    assert _results(tmp_path / "c")["settings"]["embedding_cache"]["encoded_here"] == 1
    assert _results(tmp_path / "c")["headline"] == first["headline"]


def test_settings_that_change_embeddings_get_their_own_entry(tiny_model_dir, small_set, tmp_path):
    base = ["evaluate", str(tiny_model_dir), f"data={small_set}", f"eval.cache_dir={tmp_path / 'emb'}"]
    assert main([*base, f"out={tmp_path / 'a'}"]) == 0
    assert main([*base, "eval.max_length=16", f"out={tmp_path / 'b'}"]) == 0
    assert main([*base, "eval.passage_prompt=passage: ", f"out={tmp_path / 'c'}"]) == 0
    assert main([*base, "eval.cache=false", f"out={tmp_path / 'd'}"]) == 0
    assert len(list((tmp_path / "emb").iterdir())) == 3  # max length and prompt change the key
    assert all(_results(tmp_path / x)["settings"]["embedding_cache"]["encoded_here"] == 1 for x in "abc")
    assert _results(tmp_path / "d")["settings"]["embedding_cache"] is None
    assert _results(tmp_path / "d")["headline"] == _results(tmp_path / "a")["headline"]


def test_cached_embeddings_equal_fresh_ones(tiny_model_dir, tmp_path):
    model = load_model(str(tiny_model_dir))
    texts = [f"text {i}" for i in range(7)]
    fresh = encode(model, texts, show_progress=False)
    cached, info = encode_cached(lambda ts: encode(model, ts, show_progress=False), texts, tmp_path / "c", shard_size=3)
    again, info2 = encode_cached(lambda ts: 1 / 0, texts, tmp_path / "c", shard_size=3)  # never called: all shards exist
    np.testing.assert_allclose(cached, fresh, atol=1e-6)
    assert (info["shards"], info["encoded_here"], info2["encoded_here"]) == (3, 3, 0) and (again == cached).all()


def test_two_processes_split_the_shards(tiny_model_dir, tmp_path):
    from test_train import _free_port

    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
           str(_free_port()), str(ROOT / "tests" / "cache_probe.py"), str(tiny_model_dir), str(tmp_path / "c"),
           str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [dict(kv.split("=") for kv in (tmp_path / f"rank{r}.txt").read_text().split()) for r in (0, 1)]
    assert sorted(int(x["encoded"]) for x in lines) == [2, 2]  # 4 shards of 3, 2 per process
    assert len({x["digest"] for x in lines}) == 1  # both read back the same embeddings
    assert len(list((tmp_path / "c").glob("shard-*.safetensors"))) == 4


def test_a_corrupted_shard_is_named_and_encoded_again(tiny_model_dir, small_set, tmp_path):
    args = ["evaluate", str(tiny_model_dir), f"data={small_set}", f"eval.cache_dir={tmp_path / 'emb'}",
            "eval.shard_size=2"]
    assert main([*args, "eval.cache=false", f"out={tmp_path / 'fresh'}"]) == 0
    assert main([*args, f"out={tmp_path / 'a'}"]) == 0
    fresh = _results(tmp_path / "fresh")
    folder = next((tmp_path / "emb").iterdir())
    shard = folder / "shard-00001.safetensors"
    good = shard.read_bytes()
    damaged = {"one byte flipped": good[:-3] + bytes([good[-3] ^ 0x01]) + good[-2:],
               "truncated": good[:len(good) - 20]}
    for name, data in damaged.items():
        shard.write_bytes(data)
        with pytest.warns(UserWarning, match=r"shard-00001\.safetensors does not match its checksum") as caught:
            assert main([*args, f"out={tmp_path / 'b'}"]) == 0
        assert sum("embedding cache" in str(w.message) for w in caught) == 1, name  # only that shard
        res = _results(tmp_path / "b")
        assert res["settings"]["embedding_cache"]["encoded_here"] == 1, name
        assert res["headline"] == fresh["headline"], name
        assert (tmp_path / "b" / "run.trec").read_text() == (tmp_path / "fresh" / "run.trec").read_text(), name
        assert (load_arrays(shard.read_bytes())["embeddings"] == load_arrays(good)["embeddings"]).all(), name
    with warnings.catch_warnings():  # repaired: read again without a word
        warnings.simplefilter("error")
        assert main([*args, f"out={tmp_path / 'c'}"]) == 0
    assert _results(tmp_path / "c")["settings"]["embedding_cache"]["encoded_here"] == 0


def test_a_shard_without_key_or_checksum_is_encoded_again(tiny_model_dir, tmp_path):
    """Shards from an older boolcl (no key or checksum in their metadata, or .npy files) are not trusted."""
    model = load_model(str(tiny_model_dir))
    texts = [f"text {i}" for i in range(7)]
    fresh, _ = encode_cached(lambda ts: encode(model, ts, show_progress=False), texts, tmp_path / "c", shard_size=3)
    zeros = np.zeros((3, fresh.shape[1]), np.float32)  # wrong vectors, the right shape
    (tmp_path / "c" / "shard-00000.safetensors").write_bytes(save_arrays({"embeddings": zeros}))
    (tmp_path / "c" / "shard-00002.safetensors").write_bytes(
        save_arrays({"embeddings": zeros[:1]}, metadata={"key": "c", "shard": "2"}))
    np.save(tmp_path / "c" / "shard-00001.npy", zeros)  # the older layout: never read
    with pytest.warns(UserWarning, match=r"has no checksum or key") as caught:
        again, info = encode_cached(lambda ts: encode(model, ts, show_progress=False), texts, tmp_path / "c",
                                    shard_size=3)
    named = sorted(Path(str(w.message).split()[2]).name for w in caught if "embedding cache" in str(w.message))
    assert named == ["shard-00000.safetensors", "shard-00002.safetensors"]
    assert info["encoded_here"] == 2 and (again == fresh).all()
    _, info = encode_cached(lambda ts: 1 / 0, texts, tmp_path / "c", shard_size=3)  # rewritten: all read
    assert info["encoded_here"] == 0
