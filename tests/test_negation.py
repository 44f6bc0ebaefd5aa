"""Negated statements (train/negation.py): the rules that flip a sentence, and the pairs built from a pool."""
import json

import pytest
from conftest import ROOT

from boolcl.config import compose
from boolcl.errors import ConfigError
from boolcl.train.mixing import build_mix
from boolcl.train.negation import QUESTION_TYPE, negate, question_pair, statement_pairs

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
        compose(["recipe=not_plus_tiny", "train.negation.pairs=-1"])
