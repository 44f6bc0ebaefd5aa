"""QUEST: the release format (examples + documents.jsonl), templates -> operators, derived NOT
negatives, scoring TREC runs and QUEST predictions, and full-corpus search with a tiny model."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import dump_jsonl

from boolcl.config import compose
from boolcl.data.quest import (
    TEMPLATE_OPERATORS,
    categories_of,
    doc_id,
    load_quest,
    operator_of,
    read_documents,
    subsample,
)
from boolcl.data.spec import parse_data_spec as parse_spec
from boolcl.errors import DataError
from boolcl.evaluate.benchmarks import evaluate_benchmark

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

OCEANIA = ["Great spotted kiwi", "Kakapo", "Emu", "Southern cassowary"]
FLIGHTLESS = ["Great spotted kiwi", "Kakapo", "Emu", "Common ostrich", "Emperor penguin"]
AFRICA = ["Common ostrich", "Shoebill"]
PARROTS = ["Kakapo", "Kea"]
FILLER = [f"Filler page {i}" for i in range(60)]


def example(query, docs, template, original=None, domain="animals"):
    """A row as in QUEST's test.jsonl (ratings trimmed to what a row may carry)."""
    return {"query": query, "docs": docs, "original_query": original, "scores": None,
            "metadata": {"template": template, "domain": domain, "fluency": [True], "meaning": [True],
                         "naturalness": [True], "relevance_ratings": None, "evidence_ratings": None,
                         "attributions": None}}


TEST = [
    example("birds of oceania", OCEANIA, "_", "<mark>Birds of Oceania</mark>"),
    example("Oceanian birds that can fly", ["Southern cassowary"], "_ that are not _",
            "<mark>Birds of Oceania</mark> that are not <mark>Flightless birds</mark>"),
    example("African birds or parrots", AFRICA + PARROTS, "_ or _", "<mark>Birds of Africa</mark> or <mark>Parrots</mark>"),
    example("flightless parrots", ["Kakapo"], "_ that are also _",
            "<mark>Flightless birds</mark> that are also <mark>Parrots</mark>"),
    example("flightless birds from Oceania, but no parrots", ["Great spotted kiwi", "Emu"], "_ that are also _ but not _",
            "<mark>Flightless birds</mark> that are also <mark>Birds of Oceania</mark> but not <mark>Parrots</mark>"),
    example("parrots not found in Africa", PARROTS, "_ that are not _",
            "<mark>Parrots</mark> that are not <mark>Birds of Africa</mark>"),
]
VAL = [
    example("flightless birds", FLIGHTLESS, "_", "<mark>Flightless birds</mark>"),
    example("parrots", PARROTS, "_", "<mark>Parrots</mark>"),
]


def documents():
    titles = list(dict.fromkeys(OCEANIA + FLIGHTLESS + AFRICA + PARROTS)) + FILLER
    return [{"title": t, "text": f"{t} is a page of the fixture about {'birds' if 'Filler' not in t else 'nothing'}."}
            for t in titles]


@pytest.fixture
def release(tmp_path) -> Path:
    root = tmp_path / "quest"
    dump_jsonl(root / "test.jsonl", TEST)
    dump_jsonl(root / "val.jsonl", VAL)
    dump_jsonl(root / "documents.jsonl", documents())
    return root


def cfg(*overrides):
    return compose(list(overrides))


# ----------------------------------------------------------------------------- templates

@pytest.mark.parametrize("template, operator", [
    ("_", "simple"), ("_ or _", "or"), ("_ or _ or _", "or"), ("_ that are also _", "and"),
    ("_ that are also both _ and _", "and"), ("_ that are not _", "not"), ("_ that are also _ but not _", "and+not"),
    ("_ or _ but not _", "or+not"), ("_  that are   not _", "not"),
])
def test_templates_map_to_operators(template, operator):
    assert operator_of(template) == operator


def test_every_release_template_is_in_the_table_and_garbage_is_refused():
    assert set(TEMPLATE_OPERATORS.values()) == {"simple", "or", "and", "not", "and+not"} and len(TEMPLATE_OPERATORS) == 7
    with pytest.raises(ValueError, match="is not a QUEST template"):
        operator_of("films")
    with pytest.raises(ValueError, match="names no operator"):
        operator_of("_ like _")
    assert categories_of("<mark>A b</mark> that are not <mark> C\n d </mark>") == ["A b", "C d"]
    assert doc_id("Great spotted kiwi") == "Great_spotted_kiwi"


# ----------------------------------------------------------------------------- loading

def test_release_folder_loads_with_operators_and_derived_not_negatives(release):
    qs = load_quest(str(release))
    assert qs.name == "quest" and [ex.qid for ex in qs.examples] == ["0", "1", "2", "3", "4", "5"]
    assert qs.groups() == {"0": "simple", "1": "not", "2": "or", "3": "and", "4": "and+not", "5": "not"}
    assert qs.qrels()["1"] == {"Southern_cassowary": 1}
    # "A not B": A ∩ B minus the gold; "A and B not C": A ∩ B ∩ C minus the gold; no atomic "Birds of Africa": none
    assert qs.negatives == {"1": ["Emu", "Great_spotted_kiwi", "Kakapo"], "4": ["Kakapo"]}
    assert len(qs.corpus) == 8 + 60 and "Great_spotted_kiwi" in qs.corpus.ids
    assert qs.corpus.texts[0].startswith("Great spotted kiwi [SEP] Great spotted kiwi is a page")
    info = qs.describe()
    assert info["operators"] == {"simple": 1, "not": 2, "or": 1, "and": 1, "and+not": 1}
    assert info["templates"]["_ that are not _"] == {"operator": "not", "queries": 2}
    assert info["negrecall"]["queries"] == 2 and "2 of 3 NOT queries" in info["negrecall"]["note"]
    assert info["missing_gold_documents"] == 0 and info["query_templates"]["4"] == "_ that are also _ but not _"


def test_without_atomic_queries_negrecall_is_not_available(tmp_path):
    dump_jsonl(tmp_path / "q" / "test.jsonl", TEST[1:])  # no atomic queries anywhere
    dump_jsonl(tmp_path / "q" / "documents.jsonl", documents())
    qs = load_quest(str(tmp_path / "q"))
    assert qs.negatives == {} and qs.negrecall_note().startswith("NegRecall not available")
    with pytest.warns(UserWarning, match="4 of 5 queries have no ranking"):
        result, data = evaluate_benchmark(f"quest:{tmp_path / 'q'}", None,
                                          cfg(f"run={write_run(tmp_path, {'0': ['Kea']})}"))
    assert result.metrics["NegRecall@10"]["NOT"] == {"value": None, "n": 0}
    assert data["negrecall"]["note"].startswith("NegRecall not available")


@pytest.mark.parametrize("row, message", [
    ("{not json", r"test\.jsonl:2: invalid JSON"),
    (json.dumps({"docs": ["Kea"], "metadata": {"template": "_"}}), r"test\.jsonl:2: field 'query': is missing"),
    (json.dumps({"query": "q", "docs": [], "metadata": {"template": "_"}}), r"test\.jsonl:2: field 'docs': is empty"),
    (json.dumps({"query": "q", "docs": "Kea", "metadata": {"template": "_"}}), r"field 'docs': must be a list of titles"),
    (json.dumps({"query": "q", "docs": ["Kea", 3], "metadata": {"template": "_"}}), r"field 'docs\[1\]': must be a non-empty title"),
    (json.dumps({"query": "q", "docs": ["Kea"]}), r"test\.jsonl:2: field 'metadata': is missing"),
    (json.dumps({"query": "q", "docs": ["Kea"], "metadata": {"domain": "x"}}), r"field 'metadata\.template': is missing"),
    (json.dumps({"query": "q", "docs": ["Kea"], "metadata": {"template": "films"}}),
     r"test\.jsonl:2: field 'metadata\.template': 'films' is not a QUEST template"),
    (json.dumps({"query": "q", "docs": ["Kea"], "original_query": 5, "metadata": {"template": "_"}}),
     r"field 'original_query': must be a string or null"),
])
def test_malformed_examples_name_file_line_and_field(tmp_path, row, message):
    (tmp_path / "test.jsonl").write_text(json.dumps(TEST[0]) + "\n" + row + "\n")
    dump_jsonl(tmp_path / "documents.jsonl", documents())
    with pytest.raises(DataError, match=message) as err:
        load_quest(str(tmp_path))
    assert err.value.path.endswith("test.jsonl") and err.value.line == 2


@pytest.mark.parametrize("rows, message", [
    ([{"title": "Kea", "text": "a"}, {"text": "no title"}], r"documents\.jsonl:2: field 'title': is missing"),
    ([{"title": "Kea", "text": None}], r"documents\.jsonl:1: field 'text': is missing"),
    ([{"title": "Kea", "text": 3}], r"documents\.jsonl:1: field 'text': must be a string, got int"),
    ([{"title": "Kea", "text": "a"}, {"title": "Kea", "text": "b"}], r"field 'title': 'Kea' appears twice"),
    ([{"title": "Great kea", "text": "a"}, {"title": "Great_kea", "text": "b"}], r"share the id 'Great_kea'"),
])
def test_malformed_documents(tmp_path, rows, message):
    dump_jsonl(tmp_path / "documents.jsonl", rows)
    with pytest.raises(DataError, match=message):
        read_documents(tmp_path / "documents.jsonl")


def test_gold_titles_missing_from_the_documents_are_counted(tmp_path):
    dump_jsonl(tmp_path / "q" / "test.jsonl", TEST)
    dump_jsonl(tmp_path / "q" / "documents.jsonl", [d for d in documents() if d["title"] != "Kea"])
    with pytest.warns(UserWarning, match="2 gold titles of test.jsonl are not in"):
        qs = load_quest(str(tmp_path / "q"))
    assert qs.missing_gold == 2 and qs.qrels()["2"]["Kea"] == 1  # kept: recall stays honest


def test_missing_documents_and_offline_hub_fail_clearly(tmp_path):
    dump_jsonl(tmp_path / "only" / "test.jsonl", TEST)
    with pytest.raises(DataError, match=r"documents\.jsonl\) are needed to encode.*documents\.zip"):
        load_quest(str(tmp_path / "only"))
    assert load_quest(str(tmp_path / "only"), need_corpus=False).corpus is None  # enough to score a run
    with pytest.raises(DataError, match=r"cmalaviya/quest: could not download test\.jsonl .*data=quest:/path/to/folder"):
        load_quest(None, need_corpus=False)
    dump_jsonl(tmp_path / "docs" / "documents.jsonl", documents())  # queries would come from the hub
    with pytest.raises(DataError, match=r"could not download test\.jsonl"):
        load_quest(str(tmp_path / "docs"))
    with pytest.raises(DataError, match="no such file or folder"):
        load_quest(str(tmp_path / "nowhere"))


def test_specs():
    assert parse_spec("quest").split == "test" and parse_spec("quest").path is None
    with pytest.raises(DataError, match="unknown QUEST split 'dev'"):
        parse_spec("quest-dev")
    assert parse_spec("quest-val:/data/quest").__dict__ == {"spec": "quest-val:/data/quest",
        "kind": "quest", "name": "quest-val", "split": "val", "task": None, "path": "/data/quest"}


# ----------------------------------------------------------------------------- scoring ranking files

def write_run(tmp_path: Path, run: dict[str, list[str]], name="run.trec") -> Path:
    lines = [f"{q} Q0 {d} {r} {100 - r} test" for q, docs in run.items() for r, d in enumerate(docs, 1)]
    (tmp_path / name).write_text("\n".join(lines) + "\n")
    return tmp_path / name


RUN = {
    "0": ["Kakapo", "Emu", "Southern_cassowary", "Great_spotted_kiwi"],
    "1": ["Kakapo", "Southern_cassowary"] + [f"Filler_page_{i}" for i in range(8)] + ["Emu"],
    # the first gold at rank 15, the second at rank 50: Recall@10 = 0, @20 = 1/4, @100 = 2/4
    "2": [f"Filler_page_{i}" for i in range(14)] + ["Kea"] + [f"Filler_page_{i}" for i in range(14, 49)] + ["Shoebill"],
    "4": ["Kakapo", "Emu"],
}


def test_trec_run_metrics_per_operator(release, tmp_path):
    with pytest.warns(UserWarning, match="quest: 2 of 6 queries have no ranking and score 0"):
        result, data = evaluate_benchmark(f"quest:{release}", None, cfg(f"run={write_run(tmp_path, RUN)}"))
    pq = result.per_query
    assert pq["MRR@10"] == {"0": 1.0, "1": 0.5, "2": 0.0, "3": 0.0, "4": 0.5, "5": 0.0}
    assert (pq["Recall@10"]["2"], pq["Recall@20"]["2"], pq["Recall@100"]["2"]) == (0.0, 0.25, 0.5)
    assert pq["NegRecall@10"] == {"1": pytest.approx(1 / 3), "4": 1.0}  # Emu at rank 11 is out of the top 10
    assert result.metrics["NegRecall@10"]["NOT"] == {"value": pytest.approx(1 / 3), "n": 1}
    assert result.metrics["NegRecall@10"]["AND+NOT"] == {"value": 1.0, "n": 1}
    assert set(result.metrics["nDCG@10"]) == {"ALL", "SIMPLE", "NOT", "OR", "AND", "AND+NOT"}
    assert result.metrics["MRR@10"]["NOT"] == {"value": 0.25, "n": 2}
    assert result.question_types["4"] == "and+not" and data["queries_without_ranking"] == 2
    assert result.settings["run"]["format"] == "trec"


def test_quest_predictions_file_scores_like_its_trec_run(release, tmp_path):
    titles = {doc_id(d["title"]): d["title"] for d in documents()}
    rows = [{"query": TEST[int(q)]["query"], "docs": [titles[d] for d in docs], "scores": None,
             "original_query": None, "metadata": None} for q, docs in RUN.items()]
    dump_jsonl(tmp_path / "predictions.jsonl", rows)
    with pytest.warns(UserWarning, match="no ranking"):
        via_trec, _ = evaluate_benchmark(f"quest:{release}", None, cfg(f"run={write_run(tmp_path, RUN)}"))
    with pytest.warns(UserWarning, match="no ranking"):
        via_pred, _ = evaluate_benchmark(f"quest:{release}", None, cfg(f"run={tmp_path / 'predictions.jsonl'}"))
    assert via_pred.per_query == via_trec.per_query and via_pred.settings["run"]["format"] == "quest-predictions"
    dump_jsonl(tmp_path / "other.jsonl", [{"query": "a query of another split", "docs": ["Kea"]}])
    with pytest.raises(DataError, match=r"other\.jsonl:1: field 'query': 'a query of another split' is not a query"):
        evaluate_benchmark(f"quest:{release}", None, cfg(f"run={tmp_path / 'other.jsonl'}"))


def test_trec_run_ids_are_checked(release, tmp_path):
    with pytest.raises(DataError, match=r"query '17' is not in quest \(QUEST query ids are the 0-based positions"):
        evaluate_benchmark(f"quest:{release}", None, cfg(f"run={write_run(tmp_path, {'17': ['Kea']})}"))
    (tmp_path / "titles.trec").write_text("0 Q0 Great_spotted_kiwi 1 2.0 x\n0 Q0 Southern_Cassowary 2 1.0 x\n")
    with pytest.raises(DataError, match=r"document 'Southern_Cassowary' \(query '0'\) is not in the documents file"):
        evaluate_benchmark(f"quest:{release}", None, cfg(f"run={tmp_path / 'titles.trec'}"))
    (tmp_path / "spaces.trec").write_text("0 Q0 Great spotted kiwi 1 1.0 x\n")  # a title, not an id
    with pytest.raises(DataError, match=r"spaces\.trec:1: a TREC run line has 6 columns"):
        evaluate_benchmark(f"quest:{release}", None, cfg(f"run={tmp_path / 'spaces.trec'}"))


def test_tiny_model_full_corpus_search(release, tiny_model_dir, tmp_path):
    from boolcl.scoring.report import write_results

    result, data = evaluate_benchmark(f"quest:{release}", str(tiny_model_dir), cfg("eval.max_corpus=20", "seed=3"))
    assert result.settings["passages"] == 20 and data["passages"] == 20  # 7 labelled + 13 sampled
    assert result.settings["model"]["spec"] == str(tiny_model_dir) and result.settings["protocol"] == "full-corpus search"
    assert all(len(lst) == 20 for lst in result.run.values())  # every passage ranked: the corpus is below the depth
    for measure in ("MRR@10", "nDCG@10", "Recall@10", "Recall@20", "Recall@100"):
        assert set(result.per_query[measure]) == {"0", "1", "2", "3", "4", "5"}
    assert all(v == 1.0 for v in result.per_query["Recall@20"].values())  # 20 passages, all gold among them
    assert set(result.per_query["NegRecall@10"]) == {"1", "4"}
    payload = write_results(tmp_path / "out", result, model=result.settings["model"], data=data, k=10, tag="tiny")
    assert payload["question_types"]["1"] == "not" and "MRR@10/NOT" in payload["headline"]
    full = load_quest(str(release))
    kept = subsample(full, 20, 3).corpus.ids
    assert set(kept) >= {d for rel in full.qrels().values() for d in rel} | {"Emu", "Kakapo", "Great_spotted_kiwi"}
