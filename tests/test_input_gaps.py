"""Bad input is refused at read, with the file, line and field: bytes that are not UTF-8,
over-long lines, empty files, ids that would break run.trec, non-finite teacher scores,
and an LLM endpoint that is not there (fast, and without its password in the message)."""
from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT, dump_jsonl
from omegaconf import OmegaConf

from boolcl.config.schema import LLMCfg
from boolcl.data import jsonl as jsonl_mod
from boolcl.data.beir import load_beir
from boolcl.data.jsonl import MAX_LINE_BYTES, iter_lines, read_jsonl
from boolcl.data.loaders import load_folder
from boolcl.data.nevir import load_nevir
from boolcl.data.schema import CorpusDoc, EvalQuestion, TrainingExample
from boolcl.errors import DataError, LLMError
from boolcl.generate.identity import llm_info
from boolcl.llm.cache import request_identity
from boolcl.llm.client import LLMStats, OpenAIBackend
from boolcl.llm.url import redact_url, scrub
from boolcl.scoring.report import read_trec_run, write_trec_run

Q = {"qid": "q1", "question": "Which passages are not about X?", "question_type": "not",
     "positive_ctxs": [{"passage_id": "a"}], "negative_ctxs": [{"passage_id": "b"}]}
DOCS = [{"docid": "a", "doc": "alpha"}, {"docid": "b", "doc": "beta"}]


def _folder(tmp_path, questions, docs=DOCS):
    dump_jsonl(tmp_path / "eval.jsonl", questions)
    dump_jsonl(tmp_path / "corpus.jsonl", docs)
    return tmp_path


# --- bytes that are not UTF-8 --------------------------------------------------------------

def test_non_utf8_jsonl_names_file_and_line(tmp_path):
    good = json.dumps(Q).encode()
    bad = json.dumps({**Q, "qid": "q2", "question": "caf\u00e9?"}, ensure_ascii=False).encode("utf-8").replace(b"\xc3\xa9", b"\xe9")
    (tmp_path / "eval.jsonl").write_bytes(good + b"\n\n" + bad + b"\n")
    dump_jsonl(tmp_path / "corpus.jsonl", DOCS)
    with pytest.raises(DataError, match=r"eval\.jsonl:3: not valid UTF-8 \(byte 0xe9 at byte column \d+\)") as e:
        load_folder(tmp_path)
    assert e.value.line == 3 and e.value.path.endswith("eval.jsonl")


def test_non_utf8_in_every_other_reader(tmp_path):
    # TREC run
    (tmp_path / "run.trec").write_bytes(b"q1 Q0 a 1 1.0 t\nq1 Q0 \xff 2 0.5 t\n")
    with pytest.raises(DataError, match=r"run\.trec:2: not valid UTF-8 \(byte 0xff"):
        read_trec_run(tmp_path / "run.trec")
    # BEIR qrels
    beir = tmp_path / "beir"
    dump_jsonl(beir / "corpus.jsonl", [{"_id": "d1", "text": "x"}])
    dump_jsonl(beir / "queries.jsonl", [{"_id": "q1", "text": "y"}])
    (beir / "qrels").mkdir()
    (beir / "qrels" / "test.tsv").write_bytes(b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td\xfe\t1\n")
    with pytest.raises(DataError, match=r"test\.tsv:3: not valid UTF-8 \(byte 0xfe"):
        load_beir(str(beir))
    # NevIR: a JSON list (whole file) and a JSONL file
    pair = {"id": "1", "q1": "a?", "doc1": "x", "q2": "b?", "doc2": "y"}
    (tmp_path / "nevir.json").write_bytes(b"[\n" + json.dumps(pair).encode() + b",\n\x80\n]")
    with pytest.raises(DataError, match=r"nevir\.json:3: not valid UTF-8 \(byte 0x80 at byte column 1\)"):
        load_nevir(str(tmp_path / "nevir.json"))
    (tmp_path / "nevir.jsonl").write_bytes(json.dumps(pair).encode() + b"\n\xc0\n")
    with pytest.raises(DataError, match=r"nevir\.jsonl:2: not valid UTF-8"):
        load_nevir(str(tmp_path / "nevir.jsonl"))


def test_a_byte_order_mark_is_not_an_error(tmp_path):
    (tmp_path / "x.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps(DOCS[0]).encode() + b"\r\n")
    assert read_jsonl(tmp_path / "x.jsonl", CorpusDoc.from_dict) == [CorpusDoc("a", "alpha")]


# --- over-long lines -------------------------------------------------------------------------

def test_over_long_line_is_refused_with_its_length(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_mod, "MAX_LINE_BYTES", 100)  # the same code path as 1 MB, without the megabyte
    ok = json.dumps({"docid": "a", "doc": "x" * 60})  # under the limit
    long = json.dumps({"docid": "b", "doc": "y" * 300})
    (tmp_path / "corpus.jsonl").write_text(ok + "\n" + long + "\n" + ok.replace('"a"', '"c"') + "\n")
    with pytest.raises(DataError, match=rf"corpus\.jsonl:2: line is {len(long):,} bytes long; the limit is 100"):
        read_jsonl(tmp_path / "corpus.jsonl", CorpusDoc.from_dict)
    # the last line without a newline, exactly at the limit: accepted
    edge = json.dumps({"docid": "e", "doc": ""}).replace('""', '"' + "z" * (100 - len('{"docid": "e", "doc": ""}')) + '"')
    assert len(edge) == 100
    (tmp_path / "edge.jsonl").write_text(edge)
    assert [d.docid for d in read_jsonl(tmp_path / "edge.jsonl", CorpusDoc.from_dict)] == ["e"]


def test_the_real_limit_is_one_megabyte(tmp_path):
    assert MAX_LINE_BYTES == 1_000_000
    path = tmp_path / "huge.trec"
    with path.open("wb") as fh:  # 20 MB without a newline
        for _ in range(20):
            fh.write(b"x" * 1_000_000)
    with pytest.raises(DataError, match=r"huge\.trec:1: line is 20,000,000 bytes long; the limit is 1,000,000"):
        read_trec_run(path)
    lines = list(iter_lines(_write(tmp_path / "ok.txt", b"a" * MAX_LINE_BYTES + b"\nb")))
    assert [(n, len(t)) for n, t in lines] == [(1, MAX_LINE_BYTES), (2, 1)]


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


# --- empty files -----------------------------------------------------------------------------

def test_empty_eval_file_is_an_error_naming_it(tmp_path):
    folder = _folder(tmp_path, [])
    (folder / "eval.jsonl").write_text("\n  \n")
    with pytest.raises(DataError, match=r"eval\.jsonl: holds no questions"):
        load_folder(folder)


def test_empty_corpus_is_an_error_naming_it(tmp_path):
    folder = _folder(tmp_path, [Q], docs=[])
    with pytest.raises(DataError, match=r"corpus\.jsonl: holds no passages"):
        load_folder(folder)


def test_empty_beir_corpus_is_an_error(tmp_path):
    (tmp_path / "corpus.jsonl").write_text("\n")
    dump_jsonl(tmp_path / "queries.jsonl", [{"_id": "q1", "text": "y"}])
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    with pytest.raises(DataError, match=r"corpus\.jsonl: holds no rows"):
        load_beir(str(tmp_path))


def test_cli_evaluate_on_an_empty_eval_file_exits_2_before_loading_a_model(tmp_path):
    folder = _folder(tmp_path / "d", [])
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "boolcl.cli", "evaluate", "offline-default", f"data={folder}",
                           f"out={out}"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "eval.jsonl: holds no questions" in proc.stderr + proc.stdout
    assert not (out / "results.json").exists()


# --- ids with whitespace ---------------------------------------------------------------------

@pytest.mark.parametrize("bad,name", [("q 1", "a space"), ("q\t1", "a tab"), ("q\n1", "a newline"),
                                      (" q1", "a space"), ("q1\u00a0", "whitespace U+00A0")])
def test_whitespace_in_a_qid_is_refused_with_file_line_and_field(tmp_path, bad, name):
    _folder(tmp_path, [Q, {**Q, "qid": bad}])
    with pytest.raises(DataError, match=rf"eval\.jsonl:2: field 'qid': .* contains {re.escape(name)} at position \d+") as e:
        load_folder(tmp_path)
    assert e.value.field == "qid"


@pytest.mark.parametrize("row,field", [
    ({**Q, "positive_ctxs": [{"passage_id": "a b"}]}, "positive_ctxs[0].passage_id"),
    ({**Q, "negative_ctxs": ["b\tc"]}, "negative_ctxs[0]"),  # a bare id
    ({**Q, "hard_negative_ctxs": [{"passage_id": "c\n"}]}, "hard_negative_ctxs[0].passage_id"),
])
def test_whitespace_in_a_passage_id_is_refused(tmp_path, row, field):
    dump_jsonl(tmp_path / "train.jsonl", [row])
    with pytest.raises(DataError, match=r"train\.jsonl:1: field '" + field.replace("[", r"\[").replace("]", r"\]")
                       + "': .* contains") as e:
        read_jsonl(tmp_path / "train.jsonl", TrainingExample.from_dict)
    assert e.value.field == field


def test_whitespace_in_a_docid_is_refused(tmp_path):
    _folder(tmp_path, [Q], docs=[*DOCS, {"docid": "c d", "doc": "gamma"}])
    with pytest.raises(DataError, match=r"corpus\.jsonl:3: field 'docid': 'c d' contains a space at position 1"):
        load_folder(tmp_path)


def test_whitespace_ids_in_beir_and_nevir_are_refused(tmp_path):
    dump_jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "text": "x"}, {"_id": "d 2", "text": "x"}])
    dump_jsonl(tmp_path / "queries.jsonl", [{"_id": "q1", "text": "y"}])
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: field '_id': 'd 2' contains a space"):
        load_beir(str(tmp_path))
    dump_jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "text": "x"}])
    (tmp_path / "qrels" / "test.tsv").write_text("q1\td1\t1\nq1\td\u20031\t1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.tsv:2: field 'corpus-id': .* contains whitespace U\+2003"):
        load_beir(str(tmp_path))
    pair = {"id": "p 1", "q1": "a?", "doc1": "x", "q2": "b?", "doc2": "y"}
    dump_jsonl(tmp_path / "nevir.jsonl", [pair])
    with pytest.raises(DataError, match=r"field 'id': 'p 1' contains a space"):
        load_nevir(str(tmp_path / "nevir.jsonl"))


def test_accepted_ids_survive_run_trec(tmp_path):
    """What the readers accept, run.trec writes and reads back unchanged."""
    q = EvalQuestion.from_dict({**Q, "qid": "q/1-é", "positive_ctxs": [{"passage_id": "p1-x/y_z"}],
                                "negative_ctxs": [7]})
    run = {q.qid: [(q.positive_ctxs[0].passage_id, 2.0), (q.negative_ctxs[0].passage_id, 1.0)]}
    write_trec_run(tmp_path / "run.trec", run, "t")
    assert read_trec_run(tmp_path / "run.trec") == run


# --- teacher scores --------------------------------------------------------------------------

@pytest.mark.parametrize("score", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_teacher_score_is_refused_with_file_and_line(tmp_path, score):
    ok = json.dumps({**Q, "positive_ctxs": [{"passage_id": "a", "score": 3.5}]})
    bad = json.dumps({**Q, "qid": "q2"}).replace('[{"passage_id": "a"}]', f'[{{"passage_id": "a", "score": {score}}}]')
    (tmp_path / "train.jsonl").write_text(ok + "\n" + bad + "\n")
    with pytest.raises(DataError, match=r"train\.jsonl:2: field 'positive_ctxs\[0\]\.score': must be a finite "
                                        r"number") as e:
        read_jsonl(tmp_path / "train.jsonl", TrainingExample.from_dict)
    assert e.value.field == "positive_ctxs[0].score"


def test_finite_teacher_scores_are_kept():
    ex = TrainingExample.from_dict({**Q, "positive_ctxs": [{"passage_id": "a", "score": 12}]})
    assert ex.positive_ctxs[0].score == 12.0


# --- an LLM endpoint that is not there -------------------------------------------------------

def _closed_port() -> int:
    """A port on 127.0.0.1 that was just bound and closed: connecting to it is refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _ask_once(base_url: str, **kw):
    c = OmegaConf.structured(LLMCfg(backend="openai", base_url=base_url, model="m", api_key_env="BOOLCL_NO_KEY_HERE",
                                    timeout=5.0, max_retries=8, backoff=1.0, max_backoff=60.0, **kw))

    async def main():
        stats = LLMStats()
        backend = OpenAIBackend(c, stats)
        try:
            return await backend.complete([{"role": "user", "content": "hi"}]), stats
        finally:
            await backend.close()
    return asyncio.run(main())


def test_connection_refused_fails_in_seconds_naming_the_endpoint():
    port = _closed_port()
    t = time.perf_counter()
    with pytest.raises(LLMError, match=rf"nothing answers at the endpoint http://127\.0\.0\.1:{port}/v1 "
                                       r"\(connection refused, 3 tries\): check llm\.base_url"):
        _ask_once(f"http://127.0.0.1:{port}/v1")
    assert time.perf_counter() - t < 10  # with llm.max_retries=8 and backoff=1 the busy-server path takes minutes


def test_unknown_host_fails_fast_too():
    t = time.perf_counter()
    with pytest.raises(LLMError, match=r"nothing answers at the endpoint http://no-such-host\.invalid/v1 \(host "
                                       r"name not found"):
        _ask_once("http://no-such-host.invalid/v1")
    assert time.perf_counter() - t < 10


def test_a_password_in_the_base_url_never_reaches_the_error():
    port = _closed_port()
    url = f"http://user:s3cret@127.0.0.1:{port}/v1"
    with pytest.raises(LLMError) as e:
        _ask_once(url)
    assert "s3cret" not in str(e.value) and "user:" not in str(e.value)
    assert f"127.0.0.1:{port}/v1" in str(e.value)


def test_a_password_in_the_base_url_never_reaches_cache_entries_or_the_report():
    url = "http://bob:hunter2@llm.example:8000/v1/"
    ident = request_identity(backend="openai", base_url=url, model="m", temperature=0.0, max_tokens=8,
                             messages=[{"role": "user", "content": "x"}])
    assert ident["base_url"] == "http://llm.example:8000/v1"
    cfg = OmegaConf.create({"llm": {"backend": "openai", "base_url": url}})
    assert "hunter2" not in json.dumps(llm_info(cfg, {"backend": "openai", "model": "m"}))
    # the helper itself: a password with '@' in it, percent-encoded text, messages quoting the URL
    assert redact_url("https://a:p@ss@h/v1?x=1") == "https://h/v1?x=1"
    assert redact_url("http://h:1/v1") == "http://h:1/v1" and redact_url(None) is None
    assert scrub(f"failed for url '{url}chat' (hunter2)", url) == "failed for url 'http://llm.example:8000/v1/chat' (***)"
