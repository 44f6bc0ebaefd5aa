"""`run_generate` end to end on the bundled sample: offline, and through the real client to a local server."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, dump_jsonl
from llm_server import LLMServer

from boolcl.config import compose
from boolcl.data.loaders import SAMPLE_DIR, load_retrieval_set, load_training_pool
from boolcl.errors import ConfigError, DataError, LLMError
from boolcl.generate import offline
from boolcl.generate.pipeline import run_generate
from boolcl.generate.report import report_path
from boolcl.train.mixing import build_mix

KEY_ENV = "BOOLCL_TEST_GEN_KEY"
KEY = "sk-live-7d41b2a0c9e8-never-written"


def overrides(tmp_path: Path, *extra: str, cache: Path | None = None) -> list[str]:
    return ["recipe=tiny", f"out={tmp_path / 'out' / 'gen.jsonl'}", f"generate.cache_dir={cache or tmp_path / 'cache'}",
            "generate.exclude=sample", "generate.num_examples=12", "generate.hard_negatives=0", *extra]


def server_args(srv: LLMServer, concurrency: int = 8) -> list[str]:
    return ["llm.backend=openai", f"llm.base_url={srv.base_url}", f"llm.api_key_env={KEY_ENV}",
            "llm.model=test-model", f"llm.concurrency={concurrency}", "llm.backoff=0.01", "llm.max_backoff=0.05"]


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def core(rs: list[dict]) -> list[tuple]:
    """What must not depend on the backend: questions and labels."""
    return [(r["qid"], r["question"], r["question_type"], [c["passage_id"] for c in r["positive_ctxs"]],
             [c["passage_id"] for c in r["negative_ctxs"]]) for r in rs]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


def test_offline_end_to_end_on_the_sample(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # default output: generated/<name>.jsonl under the working directory
    cfg = compose(["recipe=tiny", "generate.exclude=sample", "generate.num_examples=30", "generate.hard_negatives=0",
                   "generate.operators=[and,or,not]", f"generate.cache_dir={tmp_path / 'cache'}"])
    out = run_generate(cfg, show_progress=False)
    assert out == Path("generated") / "tiny.jsonl" and out.is_file()
    examples, _ = load_training_pool(str(out))  # the project's own validating reader
    assert len(examples) == 30 and len({e.qid for e in examples}) == 30
    assert {t: sum(e.question_type == t for e in examples) for t in ("and", "or", "not")} == {"and": 10, "or": 10, "not": 10}
    labelled_eval = {c.passage_id for q in load_retrieval_set("sample").questions
                     for c in q.positive_ctxs + q.negative_ctxs}
    for e in examples:
        p = e.provenance
        pos = {c.passage_id for c in e.positive_ctxs}
        neg = {c.passage_id for c in e.negative_ctxs}
        assert p["operator"] == e.question_type and p["offline"] is True and "offline" in p["quality"]
        assert p["llm"] == {"backend": "offline", "model": offline.OFFLINE_MODEL} and p["prompt_version"]
        assert set(p["passages"]) <= pos | neg and not (pos | neg) & labelled_eval
        assert all(c.text for c in e.positive_ctxs + e.negative_ctxs)
        assert all(pid.rsplit("/", 1)[0] == p["group"] for pid in pos | neg)
        if e.question_type == "not":
            assert neg == set(p["target"]) and pos and p["broad_question"]
        elif e.question_type == "and":
            assert pos == set(p["target"]) and p["broad_question"]
        else:
            assert set(p["target"]) <= pos and len(p["target"]) == 2
        assert p["simple_questions"].keys() == set(p["passages"])
    report = json.loads(report_path(out).read_text())
    assert report["offline"] is True and report["quality_note"]
    assert report["per_operator"] == {"and": 10, "or": 10, "not": 10} and not report["shortfall"]
    assert report["calls"]["requests"] == 0 and report["calls"]["answers"] > 0
    assert report["tokens"]["estimated"] is True and report["cost_usd"]["this_run"] > 0
    for op, f in report["operators"].items():
        assert f["final"] == 10 and f["drawn"] >= f["kept"] >= 10
        assert f["filter"]["pass_strict_rule"] <= f["filter"]["pass_positives_rule"] <= f["filter"]["checked"]
    # boolcl's trainer takes the file as it is
    items, _ = build_mix(compose(["recipe=tiny", f"train.boolean={out.resolve()}", "train.operators=[and,or,not]",
                                  "train.original=none"]))
    assert len(items) == 30 and all(it.positives and it.query for it in items)
    # beside the examples: each of their groups with the sample's topic and its passages' titles
    groups = rows(out.with_name("tiny.groups.jsonl"))
    assert {g["cluster"] for g in groups} == {e.provenance["group"] for e in examples}
    assert report["named"] == {"groups": len(groups), "with_topic": len(groups), "passages": report["named"]["passages"],
                               "named": report["named"]["passages"], "from_titles": report["named"]["passages"]}
    corpus = {r["docid"]: r for r in rows(SAMPLE_DIR / "corpus.jsonl")}
    topics = {r["cluster"]: r["topic"] for r in rows(SAMPLE_DIR / "clusters.jsonl")}
    for g in groups:
        assert g["topic"] == topics[g["cluster"]]
        assert all(p["name"] == corpus[p["docid"]]["title"] for p in g["passages"])


def test_server_backend_matches_offline_and_rerun_is_free(tmp_path, key):
    offline_out = run_generate(compose(overrides(tmp_path / "off")), show_progress=False)
    with LLMServer(latency=0.005, require_key=KEY) as srv:
        args = overrides(tmp_path, *server_args(srv))
        out = run_generate(compose(args), show_progress=False)
        first = srv.requests
        assert first > 0 and all(e["auth"] == f"Bearer {KEY}" for e in srv.log)
        assert core(rows(out)) == core(rows(offline_out))  # same answers, same examples
        report = json.loads(report_path(out).read_text())
        assert report["offline"] is False and report["llm"]["base_url"] == srv.base_url
        assert report["tokens"]["prompt"] > 0 and report["cost_usd"]["this_run"] > 0
        assert report["calls"]["requests"] == first
        text = out.read_text()
        run_generate(compose(args), show_progress=False)
        assert srv.requests == first  # zero calls on an unchanged rerun
        again = json.loads(report_path(out).read_text())
        assert again["calls"]["requests"] == 0 and again["calls"]["cache_hits"] > 0
        assert again["cost_usd"]["this_run"] == 0 < again["cost_usd"]["whole_set"] <= report["cost_usd"]["whole_set"]
        assert out.read_text() == text
    p = rows(out)[0]["provenance"]
    assert p["llm"]["model"] == "test-model" and p["offline"] is False and "quality" not in p
    written = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert len(written) > 10
    assert not [f for f in written if KEY.encode() in f.read_bytes()], "the API key was written to disk"


RUNNER = """
import sys
from boolcl.config import compose
from boolcl.generate.pipeline import run_generate
run_generate(compose(sys.argv[1:]), show_progress=False)
"""


def test_killed_run_resumes_to_the_same_output(tmp_path, key):
    with LLMServer(latency=0.06, require_key=KEY) as srv:
        base = ["generate.num_examples=16", *server_args(srv, concurrency=2)]
        reference = run_generate(compose(overrides(tmp_path / "ref", *base)), show_progress=False)
        full = srv.requests

        args = overrides(tmp_path, *base)
        cache = tmp_path / "cache" / "llm"
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, *args], cwd=ROOT, env={**os.environ},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if cache.is_dir() and len(list(cache.glob("*/*.json"))) >= full // 3:
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()!r}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        out = tmp_path / "out" / "gen.jsonl"
        assert not out.exists()  # nothing half-written
        done = list(cache.glob("*/*.json"))
        assert full // 3 <= len(done) < full
        for f in done:  # every cache entry on disk is whole
            assert json.loads(f.read_text())["response"]
        before = srv.requests
        run_generate(compose(args), show_progress=False)
        resumed = srv.requests - before
    assert 0 < resumed <= full - full // 3 + 2 * 8  # only what was missing (and draws cut off in flight)
    assert out.read_text() == Path(reference).read_text()  # no lost, no duplicated examples
    report = json.loads(report_path(out).read_text())
    assert report["calls"]["cache_hits"] >= full // 3


def test_bad_key_fails_fast_with_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-wrong")
    with LLMServer(require_key="sk-right") as srv:
        t = time.perf_counter()
        with pytest.raises(LLMError) as err:
            run_generate(compose(overrides(tmp_path, *server_args(srv, concurrency=16))), show_progress=False)
        assert time.perf_counter() - t < 10
        assert srv.requests == 1
    msg = str(err.value)
    assert "HTTP 401" in msg and KEY_ENV in msg and "sk-wrong" not in msg
    assert not (tmp_path / "out" / "gen.jsonl").exists()


def test_garbage_answers_are_counted_never_fatal(tmp_path, key):
    with LLMServer() as srv:
        srv.script({"content": "I'm sorry, but I can't help with that."}, times=3, when="not")
        srv.script({"content": ""}, times=2, when="not")
        srv.script({"content": "Here are two options:\n1. \"Which rivers are not in Asia?\"\n2. Which one else?"},
                   times=2, when="not")
        srv.script({"content": None}, times=2, when="answer")
        srv.script({"content": "What " + "really " * 100 + "?"}, times=1, when="simple")
        srv.script({"body": "this is not json"}, times=1, when="disjunctive")
        out = run_generate(compose(overrides(tmp_path, *server_args(srv))), show_progress=False)
    report = json.loads(report_path(out).read_text())
    # scripted answers land on whichever draws are in flight: count them wherever they went
    compose_drops = report["operators"]["not"]["dropped"]["compose"]["reasons"]
    assert compose_drops["refusal"] >= 1 and compose_drops["empty answer"] >= 1
    parsed = report["llm_answers"]
    assert parsed["not"]["dropped"]["refusal"] >= 1
    assert parsed["not"]["normalised"]["several questions: kept the first"] >= 1
    assert parsed["simple"]["dropped"] == {"too long": 1}  # one simple question per passage, parsed once
    assert report["operators"]["not"]["dropped"]["atomic"]["reasons"]["simple question: too long"] >= 1
    assert report["checks"]["check"]["unusable: empty answer"] >= 1
    assert report["calls"]["malformed_responses"] == 1 and report["calls"]["retries"]["malformed"] == 1
    assert report["final_examples"] == 12


def test_untitled_passages_are_named_by_the_llm_and_bad_names_are_counted(tmp_path, key):
    untitled = dump_jsonl(tmp_path / "untitled" / "corpus.jsonl",
                          [{"docid": r["docid"], "doc": r["doc"]} for r in rows(SAMPLE_DIR / "corpus.jsonl")])
    with LLMServer() as srv:
        srv.script({"content": '**Name:** "Oak"'}, times=1, when="name")
        srv.script({"content": "Which passage is this?"}, times=1, when="name")
        srv.script({"content": "I'm sorry, I can't help with that."}, times=1, when="topic")
        out = run_generate(compose(overrides(tmp_path, *server_args(srv), f"generate.corpus={untitled}",
                                             "generate.grouping=prefix")), show_progress=False)
        named_requests = sum(e["kind"] in ("name", "topic") for e in srv.log)
    report = json.loads(report_path(out).read_text())
    groups = rows(out.with_name("gen.groups.jsonl"))
    listed = [p for g in groups for p in g["passages"]]
    assert named_requests == len(groups) + len(listed)  # one topic per group, one name per untitled passage
    answers = report["llm_answers"]
    assert answers["topic"] == {"ok": len(groups) - 1, "dropped": {"refusal": 1}, "normalised": {}}
    assert answers["name"]["dropped"] == {"a question, not a name": 1}
    assert answers["name"]["normalised"] == {"label removed": 1}
    assert sum("topic" not in g for g in groups) == 1 and sum("name" not in p for p in listed) == 1
    assert sum(p.get("name") == "Oak" for p in listed) == 1
    assert report["named"]["from_titles"] == 0 and report["named"]["named"] == len(listed) - 1


def test_a_pool_made_without_groups_gets_them_from_a_rerun_that_asks_only_for_names(tmp_path, key):
    with LLMServer() as srv:
        args = overrides(tmp_path, *server_args(srv))
        out = run_generate(compose([*args, "generate.named=false"]), show_progress=False)
        examples, before = out.read_text(), srv.requests
        cfg = compose(["recipe=not_plus_tiny", f"train.boolean={out}", "train.original=none"])
        with pytest.raises(DataError, match="run boolcl generate again with the settings that made it and overwrite"):
            build_mix(cfg)
        run_generate(compose([*args, "overwrite=true"]), show_progress=False)
        asked = [e["kind"] for e in srv.log[before:]]
    assert out.read_text() == examples  # the same examples, from the cache
    assert asked and set(asked) <= {"topic", "name"} and "name" not in asked  # the sample's passages have titles
    items, mix = build_mix(cfg)
    assert mix["named"]["or_questions"] == 3 * mix["named"]["groups"] > 0


def test_without_naming_no_groups_file_is_left_beside_the_examples(tmp_path):
    out = run_generate(compose(overrides(tmp_path)), show_progress=False)
    assert out.with_name("gen.groups.jsonl").is_file()
    again = run_generate(compose(overrides(tmp_path, "generate.named=false", "overwrite=true")), show_progress=False)
    assert again == out and not out.with_name("gen.groups.jsonl").exists()  # it described the replaced examples
    assert json.loads(report_path(out).read_text())["named"] is None


def yes_man(messages):
    """Answers like the offline backend, except that every passage 'answers' every check."""
    from boolcl.generate import prompts

    return "Yes, it does." if prompts.kind_of(messages) == "answer" else offline.respond(messages)


def test_filter_strictness_decides_and_both_counts_are_reported(tmp_path, key):
    with LLMServer(yes_man) as srv:
        # naming off: only the lax run keeps examples, whose groups would cost requests of their own
        common = ["generate.num_examples=6", "generate.max_draws_per_example=100", "generate.named=false",
                  *server_args(srv)]
        shared = tmp_path / "cache"
        strict = run_generate(compose(overrides(tmp_path / "s", *common, "generate.filter=strict", cache=shared)),
                              show_progress=False)
        n = srv.requests
        lax = run_generate(compose(overrides(tmp_path / "l", *common, "generate.filter=positives", cache=shared)),
                           show_progress=False)
        assert srv.requests == n  # same questions, same checks: all from the cache
    rs = json.loads(report_path(strict).read_text())
    f = rs["operators"]["not"]
    # nothing survives, so it stops after 100 draws instead of spending the whole draw budget
    assert rs["final_examples"] == 0 and re.search(r"not: 0 of 6 \(none of the first 1\d\d draws survived",
                                                   rs["shortfall"])
    assert 100 <= f["drawn"] < 200  # not the 600 the budget allows
    assert f["filter"]["pass_positives_rule"] == f["filter"]["checked"] > 0 and f["filter"]["pass_strict_rule"] == 0
    assert f["dropped"]["filter"]["reasons"] == {"a negative passage answers": f["filter"]["checked"]}
    rl = json.loads(report_path(lax).read_text())
    assert rl["final_examples"] == 6 and rl["operators"]["not"]["filter"]["pass_strict_rule"] == 0
    assert all(r["provenance"]["filter"] == {"mode": "positives", "pass_positives": True, "pass_strict": False}
               for r in rows(lax))


def test_cluster_grouping_and_mined_negatives(tmp_path, tiny_model_dir):
    args = overrides(tmp_path, "generate.grouping=cluster", f"generate.encoder={tiny_model_dir}",
                     "generate.cluster_size=6", "generate.hard_negatives=3", "generate.num_examples=8",
                     "generate.filter=off", "generate.operators=[or]")
    out = run_generate(compose(args), show_progress=False)
    report = json.loads(report_path(out).read_text())
    assert report["corpus"]["grouping"] == "cluster" and report["corpus"]["groups"] >= 10
    assert report["negatives"]["mined"] > 0 and report["negatives"]["texts_encoded"] > 0
    for r in rows(out):
        pos = {c["passage_id"] for c in r["positive_ctxs"]}
        hard = [c["passage_id"] for c in r["hard_negative_ctxs"]]
        assert len(hard) == 3 and not pos & set(hard) and all(c["text"] for c in r["hard_negative_ctxs"])
        assert r["provenance"]["group"].startswith("cluster")
    text = out.read_text()
    run_generate(compose(args), show_progress=False)
    assert json.loads(report_path(out).read_text())["negatives"]["texts_encoded"] == 0  # embeddings cached
    assert out.read_text() == text


def test_bad_inputs_fail_before_any_call(tmp_path):
    dup = dump_jsonl(tmp_path / "dup" / "corpus.jsonl", [{"docid": "x/1", "doc": "a" * 80}, {"docid": "x/1", "doc": "b" * 80}])
    with pytest.raises(DataError, match=r"'x/1' appears twice"):
        run_generate(compose(overrides(tmp_path, f"generate.corpus={dup}")), show_progress=False)
    with pytest.raises(DataError, match="only 0 usable passage"):
        run_generate(compose(overrides(tmp_path, "generate.min_passage_chars=100000")), show_progress=False)
    lonely = dump_jsonl(tmp_path / "lonely.jsonl", [{"docid": f"g{i}/a", "doc": "text " * 20} for i in range(4)])
    with pytest.raises(DataError, match="no group of two or more passages"):
        run_generate(compose(overrides(tmp_path, f"generate.corpus={lonely}", "generate.exclude=null",
                                       "generate.grouping=prefix")), show_progress=False)
    with pytest.raises(ConfigError, match=r"llm.concurrency=0 must be >= 1"):
        run_generate(compose(overrides(tmp_path, "llm.concurrency=0")), show_progress=False)
    with pytest.raises(ConfigError, match="generate.filter"):
        compose(overrides(tmp_path, "generate.filter=sometimes"))
    with pytest.raises(ConfigError, match="generate.min_candidates"):
        run_generate(compose(overrides(tmp_path, "generate.min_candidates=1")), show_progress=False)


NQ_README = """---
configs:
- config_name: NaturalQuestions-corpus
  data_files:
  - split: corpus
    path: NaturalQuestions/corpus.jsonl
---
Local copy of ustc-zhangzm/BoolQuestions (corpus only) for tests.
"""


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_nq_corpus_from_a_local_hub_copy_groups_by_page(tmp_path):
    root = tmp_path / "BoolQuestions"
    root.mkdir()
    (root / "README.md").write_text(NQ_README)
    pages = {"Volcano": ["magma rises through the crust", "lava flows cool into basalt", "ash clouds ground planes"],
             "Glacier": ["ice sheets carve valleys", "moraines mark old ice edges", "calving makes icebergs"],
             "Coral reef": ["polyps build limestone skeletons", "bleaching follows warm water"]}
    docs = [{"docid": f"nq{len(pages) * k + j}", "title": t, "doc": f"{t}: {text}, as described on its page."}
            for j, (t, texts) in enumerate(pages.items()) for k, text in enumerate(texts)]
    dump_jsonl(root / "NaturalQuestions" / "corpus.jsonl", docs)
    out = run_generate(compose(overrides(tmp_path, f"generate.corpus=boolquestions-nq:{root}", "generate.exclude=null",
                                         "generate.filter=off", "generate.num_examples=6", "generate.page_size=2",
                                         "generate.operators=[and,not]")), show_progress=False)
    report = json.loads(report_path(out).read_text())
    assert report["corpus"]["grouping"] == "page" and report["corpus"]["groups"] == 3  # 2+1 (a lone tail joins), 2+1, 2
    title_of = {d["docid"]: d["title"] for d in docs}
    for r in rows(out):
        ids = [c["passage_id"] for c in r["positive_ctxs"] + r["negative_ctxs"]]
        assert len({title_of[i] for i in ids}) == 1  # one page per question
        assert all(" [SEP] " in c["text"] for c in r["positive_ctxs"])  # NQ passages as title [SEP] doc
