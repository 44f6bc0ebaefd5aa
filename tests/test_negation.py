"""Negated statements (train/negation.py): the rules that flip a sentence, the pairs built from a
pool, and minimal pairs read in NevIR's layout (the bundled written ones among them)."""
import json
import os
import re
from pathlib import Path

import pytest
from conftest import ROOT, dump_jsonl

from boolcl.config import compose
from boolcl.errors import ConfigError, DataError
from boolcl.train.mixing import build_mix
from boolcl.train.negation import (
    QUESTION_TYPE,
    WRITTEN,
    negate,
    question_pair,
    statement_pairs,
    within_length,
    written_pairs,
)

SAMPLE = ROOT / "boolcl" / "data" / "sample"


@pytest.mark.parametrize("sentence, flipped", [
    ("Gallstones are hardened deposits of digestive fluid.", "Gallstones are not hardened deposits of digestive fluid."),
    ("When a stone blocks a duct, it can trigger pain.", "When a stone blocks a duct, it cannot trigger pain."),
    ("This has been shown twice.", "This has not been shown twice."),
    ("Einstein did not enjoy it at that age.", "Einstein did enjoy it at that age."),
    ("It has not been shown.", "It has been shown."),
    ("The patient cannot walk.", "The patient can walk."),
    ("It isn't common in children.", "It is common in children."),
    ("Was the cello tuned?", "Was not the cello tuned?"),
    ("Attacks begin after a large meal.", None),  # a main verb alone: the rules leave it
])
def test_negate_flips_the_first_auxiliary_or_takes_the_negation_out(sentence, flipped):
    assert negate(sentence) == flipped
    if flipped is not None and "n't" not in sentence:
        assert negate(flipped) == sentence  # the flip undoes itself (a contraction comes back spelt out)


@pytest.mark.parametrize("sentence, questions", [
    ("Gallstones are hardened deposits.", ("What are hardened deposits?", "What are not hardened deposits?")),
    ("When a stone blocks a duct, it can trigger pain.", ("What can trigger pain?", "What cannot trigger pain?")),
    ("He did not enjoy it at that age.", ("What did not enjoy it at that age?", "What did enjoy it at that age?")),
    ("This has been shown twice!", ("What has been shown twice?", "What has not been shown twice?")),
])
def test_question_pair_asks_from_the_auxiliary_on(sentence, questions):
    assert question_pair(sentence, negate(sentence)) == questions


def test_statement_pairs_differ_by_one_negated_sentence_and_stay_in_the_training_pool():
    items, _ = build_mix(compose(["recipe=not_plus_tiny"]))
    pairs = statement_pairs(items, 40, seed=1)
    assert len(pairs) == 80
    assert pairs == statement_pairs(items, 40, seed=1)  # fixed by the seed (a resumed run rebuilds the same)
    assert [p.query for p in pairs] != [p.query for p in statement_pairs(items, 40, seed=2)]
    train_passages = {pid for it in items for pid in it.positive_ids}
    eval_passages = {c["passage_id"] for line in (SAMPLE / "eval.jsonl").read_text().splitlines()
                     for c in json.loads(line)["positive_ctxs"]}
    statements = statement_pairs(items, 40, seed=1, questions=False)
    for plain, negated, said, unsaid in zip(pairs[::2], pairs[1::2], statements[::2], statements[1::2]):
        assert plain.question_type == negated.question_type == QUESTION_TYPE and plain.group == negated.group
        # the two versions of the passage differ by one sentence, the statement and its negation...
        assert said.query in said.positives[0] and unsaid.query in unsaid.positives[0]
        assert negate(said.query) == unsaid.query
        assert said.positives[0].replace(said.query, unsaid.query) == unsaid.positives[0]
        # ...each version is the other's hard negative...
        assert plain.negatives == negated.positives and negated.negatives == plain.positives
        assert (plain.positives, plain.negatives) == (said.positives, said.negatives)
        assert plain.n_explicit == negated.n_explicit == 1
        # ...and the questions ask the same thing but for the negation, without quoting the sentence
        assert plain.query.startswith("What ") and plain.query.endswith("?") and negate(plain.query) == negated.query
        assert plain.query not in plain.positives[0]
        assert plain.query[5:-1].split()[-1] in said.query  # the sentence's words from its auxiliary on
        assert plain.positive_ids[0] in train_passages and plain.positive_ids[0] not in eval_passages
        assert negated.positive_ids[0] not in train_passages  # the copy has an id of its own
    # asking for more than the pool has: each passage once, and nearly every one has a sentence to flip
    every = statement_pairs(items, 10_000, seed=1)
    assert len({p.positive_ids[0] for p in every[::2]}) == len(every) // 2
    assert 0.9 * len(train_passages) <= len(every) // 2 <= len(train_passages)


def test_negation_config_error_names_the_key():
    with pytest.raises(ConfigError, match=r"train\.negation\.pairs"):
        compose(["recipe=not_plus_tiny", "train.negation.pairs=-1", "train.negation.source=null"])  # "all" needs a source
    with pytest.raises(ConfigError, match=r"train\.negation\.pairs"):
        compose(["recipe=not_plus_tiny", "train.negation.pairs=-2", "train.negation.source=written"])
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


def test_the_scope_head_learns_the_pairs_questions_as_ordinary_or_not_at_all(tiny_model_dir):
    from sentence_transformers import SentenceTransformer

    from boolcl.train.collate import Collator, ItemDataset
    from boolcl.train.mixing import Item
    from boolcl.train.scope import EXCLUDED, IGNORE, ORDINARY

    tok = SentenceTransformer(str(tiny_model_dir), device="cpu").tokenizer
    ds = ItemDataset([Item("Which rivers flood other than the Nile?", ["a"], ["A"], ["n"], ["N"], "not"),
                      Item("Which river did not flood?", ["b"], ["B"], ["a"], ["A"], QUESTION_TYPE)], n_negatives=1)
    for ignores, statement in (((), ORDINARY), ((QUESTION_TYPE,), IGNORE)):
        labels = Collator(tok, 32, 1, scope=True, scope_ignores=ignores)([ds[0], ds[1]]).scope_labels
        real = labels[1][labels[1] != IGNORE] if statement == ORDINARY else labels[1]
        assert len(real) and bool((real == statement).all())
        assert bool((labels[0] == EXCLUDED).any())  # the NOT question is labelled as before
