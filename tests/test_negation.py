"""Negated statements (train/negation.py): minimal pairs read in NevIR's layout (the bundled
written ones among them)."""
import json
import os
import re
from pathlib import Path

import pytest
from conftest import ROOT, dump_jsonl

from boolcl.config import compose
from boolcl.errors import ConfigError, DataError
from boolcl.train.negation import (
    QUESTION_TYPE,
    WRITTEN,
    within_length,
    written_pairs,
)

def test_negation_config_error_names_the_key():
    with pytest.raises(ConfigError, match=r"train\.negation\.pairs"):
        compose(["recipe=not_plus_tiny", "train.negation.pairs=-2", "train.negation.source=written"])
    # the pairs always come from a source: the bundled ones unless another is named
    assert compose(["recipe=tiny", "train.negation.pairs=4"]).train.negation.source == "written"
    with pytest.raises(ConfigError, match=r"train\.negation\.source: expected a string"):
        compose(["recipe=not_plus_tiny", "train.negation.source=null"])
    with pytest.raises(ConfigError, match=r"train\.negation\.source is empty"):
        compose(["recipe=not_plus_tiny", "train.negation.source=''"])
    assert compose(["recipe=not_plus_tiny", "train.negation.pairs=0", "train.negation.source=''"])  # off: unread
    for removed in ("questions=false", "head=ignore"):
        with pytest.raises(ConfigError, match=r"unknown config key 'train\.negation\."):
            compose(["recipe=not_plus_tiny", f"train.negation.{removed}"])
    with pytest.raises(ConfigError, match=r"test split is the benchmark"):
        written_pairs("orionweller/NevIR", 4, seed=1, split="test")


PAIRS = [{"id": f"p{i}", "q1": f"Which river did flood in year {i}?", "doc1": f"The river flooded in year {i}.",
          "q2": f"Which river did not flood in year {i}?", "doc2": f"The river did not flood in year {i}."}
         for i in range(6)]


def test_written_pairs_give_each_question_its_passage_and_the_other_as_hard_negative(tmp_path):
    path = dump_jsonl(tmp_path / "pairs.jsonl", PAIRS)
    items, source = written_pairs(str(path), 4, seed=1)
    assert source == str(path) and len(items) == 8
    by_id = {p["id"]: p for p in PAIRS}
    for first, second in zip(items[::2], items[1::2]):
        p = by_id[first.group.removeprefix("negation/")]
        assert (first.query, first.positives, first.negatives) == (p["q1"], [p["doc1"]], [p["doc2"]])
        assert (second.query, second.positives, second.negatives) == (p["q2"], [p["doc2"]], [p["doc1"]])
        assert first.positive_ids == second.negative_ids and first.negative_ids == second.positive_ids
        assert first.question_type == second.question_type == QUESTION_TYPE and first.n_explicit == 1
        assert first.group == second.group  # one cluster: group_by_cluster puts both in one batch
    assert written_pairs(str(path), 4, seed=1)[0] == items  # fixed by the seed: a resumed run reads the same
    assert [it.query for it in written_pairs(str(path), 4, seed=2)[0]] != [it.query for it in items]
    assert len(written_pairs(str(path), -1, seed=1)[0]) == 12  # -1: all of them
    # a folder holding NevIR's training split in the authors' file name (NevIR_train.json, a JSON list)
    folder = tmp_path / "nevir"
    folder.mkdir()
    (folder / "NevIR_train.json").write_text(json.dumps(PAIRS))
    read, source = written_pairs(str(folder), -1, seed=1)
    assert source == str(folder / "NevIR_train.json") and len(read) == 12
    with pytest.raises(DataError, match=r"NevIR_dev\.json"):
        written_pairs(str(folder), -1, seed=1, split="dev")
    # the benchmark's own file, under the authors' name, is refused as training material
    (folder / "NevIR_test.json").write_text(json.dumps(PAIRS))
    with pytest.raises(ConfigError, match=r"NevIR_test\.json is NevIR's test split"):
        written_pairs(str(folder / "NevIR_test.json"), -1, seed=1)
    # a bad row stops the read, naming the file, the row and the field
    bad = dump_jsonl(tmp_path / "bad.jsonl", PAIRS[:2] + [{**PAIRS[2], "doc2": ""}])
    with pytest.raises(DataError, match=r"bad\.jsonl.*row 3.*doc2"):
        written_pairs(str(bad), 2, seed=1)


def test_pairs_whose_difference_lies_past_the_cut_are_left_out(tiny_model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    tokenizer = SentenceTransformer(str(tiny_model_dir), device="cpu").tokenizer
    long = " ".join(["The valley was green and the river ran wide."] * 4)
    near = {"id": "near", "q1": "Did it rain?", "doc1": "It rained. " + long, "q2": "Did it stay dry?",
            "doc2": "It did not rain. " + long}
    far = {"id": "far", "q1": "Did it rain?", "doc1": long + " It rained.", "q2": "Did it stay dry?",
           "doc2": long + " It did not rain."}
    items, _ = written_pairs(str(dump_jsonl(tmp_path / "p.jsonl", [near, far])), -1, seed=1)
    kept = within_length(items, tokenizer, 24)
    assert {it.group for it in kept} == {"negation/near"} and len(kept) == 2
    assert len(within_length(items, tokenizer, 64)) == 4  # long enough to see both differences


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def test_bundled_pairs_are_minimal_pairs_and_not_nevirs():
    """The written pairs: valid in NevIR's layout, two versions of one passage that differ by a
    short edit, questions that do not quote the passage or use exclusion words, and nothing
    shared with NevIR's test pairs (no 8-word run of any of its passages or questions)."""
    from boolcl.data.nevir import load_nevir

    pairs = load_nevir(str(WRITTEN)).pairs
    assert len(pairs) >= 400
    for p in pairs:
        a, b = _words(p.doc1), _words(p.doc2)
        head = next(i for i, (x, y) in enumerate(zip(a + [None], b + [None])) if x != y)
        tail = next(i for i, (x, y) in enumerate(zip(a[::-1] + [None], b[::-1] + [None])) if x != y)
        assert max(len(a), len(b)) - head - tail <= 24, p.id  # one edit, or two clauses apart; the rest word for word
        assert p.q1 != p.q2, p.id
        for q in (p.q1, p.q2):
            assert not re.search(r"\b(other than|except|excluding|besides|apart from)\b", q, re.I), p.id
    nevir = Path(os.environ.get("BOOLCL_NEVIR") or ROOT.parent / "shared" / "nevir")
    if not (nevir / "NevIR_test.json").is_file():
        pytest.skip(f"NevIR's test split is not at {nevir}: the overlap check needs it")
    grams = lambda text: {tuple(w[i:i + 8]) for w in [_words(text)] for i in range(len(w) - 7)}  # noqa: E731
    theirs = set().union(*(grams(t) for p in load_nevir(str(nevir)).pairs for t in (p.q1, p.q2, p.doc1, p.doc2)))
    ours = set().union(*(grams(t) for p in pairs for t in (p.q1, p.q2, p.doc1, p.doc2)))
    assert not ours & theirs


def test_the_scope_head_learns_the_pairs_questions_as_ordinary(tiny_model_dir):
    from sentence_transformers import SentenceTransformer

    from boolcl.train.collate import Collator, ItemDataset
    from boolcl.train.mixing import Item
    from boolcl.train.scope import EXCLUDED, IGNORE, ORDINARY

    tok = SentenceTransformer(str(tiny_model_dir), device="cpu").tokenizer
    ds = ItemDataset([Item("Which rivers flood other than the Nile?", ["a"], ["A"], ["n"], ["N"], "not"),
                      Item("Which river did not flood?", ["b"], ["B"], ["a"], ["A"], QUESTION_TYPE)], n_negatives=1)
    labels = Collator(tok, 32, 1, scope=True)([ds[0], ds[1]]).scope_labels
    real = labels[1][labels[1] != IGNORE]
    assert len(real) and bool((real == ORDINARY).all())
    assert bool((labels[0] == EXCLUDED).any())  # beside it, the NOT question's exclusion
