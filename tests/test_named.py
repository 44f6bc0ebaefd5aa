"""train.named: topic negatives and named OR questions, built from a pool's own groups (the
sample's clusters.jsonl, or the groups file `boolcl generate` writes)."""
import json
import shutil

import pytest
from conftest import dump_jsonl

from boolcl.config import compose
from boolcl.data.loaders import SAMPLE_DIR
from boolcl.data.schema import Context, TrainingExample
from boolcl.data.sets import Corpus
from boolcl.errors import ConfigError, DataError
from boolcl.train.mixing import build_mix
from boolcl.generate.pipeline import run_generate
from boolcl.train.named import Group, add_topic_negatives, named_or_questions, read_groups

NAMED_OFF = ["train.named.topics=false", "train.named.or_questions=0"]


def _example(qid, qtype, pos, neg, group="g"):
    return TrainingExample(qid=qid, question=f"question {qid}", question_type=qtype,
                           positive_ctxs=[Context(p) for p in pos], negative_ctxs=[Context(n) for n in neg],
                           provenance={"cluster": group})


def test_only_training_groups_are_read_and_a_bad_row_names_its_line(tmp_path):
    path = dump_jsonl(tmp_path / "clusters.jsonl", [
        {"cluster": "a", "topic": "kinds of tea", "docids": ["a/1", "a/2"], "split": "train"},
        {"cluster": "held", "topic": "held-out topic", "docids": ["h/1", "h/2"], "split": "eval"},
        {"cluster": "b", "docids": ["b/1", "b/2"]}])
    groups, texts = read_groups(path)
    assert groups == [Group("a", "kinds of tea", ("a/1", "a/2")), Group("b", None, ("b/1", "b/2"))] and texts == {}
    dump_jsonl(path, [{"cluster": "a", "docids": ["a/1"]}, {"cluster": "b", "docids": "b/1"}])
    with pytest.raises(DataError, match=r"clusters.jsonl:2: field 'docids': must list"):
        read_groups(path)


def test_a_generated_groups_file_carries_names_and_texts_and_a_bad_row_names_its_field(tmp_path):
    path = dump_jsonl(tmp_path / "gen.groups.jsonl", [
        {"cluster": "c1", "topic": "hot drinks", "passages": [{"docid": "d1", "name": "Tea", "text": "Tea is..."},
                                                             {"docid": "d2", "text": "Coffee is..."}]}])
    groups, texts = read_groups(path)
    assert groups == [Group("c1", "hot drinks", ("d1", "d2"))] and groups[0].names == {"d1": "Tea"}
    assert texts == {"d1": "Tea is...", "d2": "Coffee is..."}
    dump_jsonl(path, [{"cluster": "c1", "passages": [{"docid": "d1", "name": "", "text": "x"}]}])
    with pytest.raises(DataError, match=r"gen.groups.jsonl:1: field 'name': must be a non-empty string"):
        read_groups(path)
    dump_jsonl(path, [{"cluster": "c1", "passages": [{"docid": "d1"}]}])
    with pytest.raises(DataError, match=r"gen.groups.jsonl:1: field 'passages': must list objects with a 'docid' "
                       r"and a 'text'"):
        read_groups(path)


def test_a_topic_is_a_negative_after_the_exclusion_and_before_the_other_negatives():
    corpus = Corpus(["g/1", "g/2", "g/3"], ["one", "two", "three"])
    examples = [_example("n", "not", ["g/1", "g/2"], ["g/3"]), _example("a", "and", ["g/1"], ["g/2", "g/3"]),
                _example("s", "simple", ["g/1"], []), _example("o", "or", ["x/1"], ["x/2"], group="other")]
    out, grown = add_topic_negatives(examples, corpus, [Group("g", "kinds of tea", ("g/1", "g/2", "g/3"))], "pool")
    assert [c.passage_id for c in out[0].negative_ctxs] == ["g/3", "g/topic"]
    assert [c.passage_id for c in out[1].negative_ctxs] == ["g/topic", "g/2", "g/3"]
    assert out[2].negative_ctxs == [] and out[3] is examples[3]  # plain questions and other groups as they were
    assert examples[0].negative_ctxs == [Context("g/3")]  # the input is not changed
    assert grown.ids[-1] == "g/topic" and grown.texts[-1] == "kinds of tea [SEP] Kinds of tea."
    with pytest.raises(DataError, match="already holds a passage 'g/topic'"):
        add_topic_negatives(examples, grown, [Group("g", "kinds of tea", ())], "pool")
    with pytest.raises(DataError, match="needs group topics"):
        add_topic_negatives(examples, corpus, [Group("g", None, ())], "pool")


def test_named_or_questions_join_two_names_of_a_group_the_same_for_every_run():
    titles = {"g/1": "Green tea", "g/2": "Black tea", "g/3": "Oolong", "g/4": "Matcha", "g/5": "Rooibos",
              "h/1": "Espresso", "h/2": "Latte"}
    groups = [Group("g", None, ("g/1", "g/2", "g/3", "g/4", "g/5"), titles),
              Group("h", None, ("h/1", "h/2"), titles), Group("u", None, ("u/1", "u/2"), {"u/1": "Cocoa"})]
    made = named_or_questions(groups, 2, "corpus")
    assert made == named_or_questions(groups, 2, "corpus")
    assert [q.qid for q in made] == ["g/named-or-0", "g/named-or-1", "h/named-or-0", "h/named-or-1"]
    for q in made:
        a, b = (c.passage_id for c in q.positive_ctxs)
        assert q.question_type == "or" and a != b and titles[a] in q.question and titles[b] in q.question
        assert " or " in q.question
        negs = [c.passage_id for c in q.negative_ctxs]
        group = q.qid.split("/")[0]
        assert len(negs) == min(3, len(next(g for g in groups if g.name == group).docids) - 2)
        assert all(n.startswith(group + "/") and n not in (a, b) for n in negs)
    # a group with one named passage gets none; a pool without any such group is an error
    with pytest.raises(DataError, match="no group has two passages with a name"):
        named_or_questions(groups[2:], 1, "corpus")


def test_the_sample_gains_topics_of_its_training_clusters_only():
    base, _ = build_mix(compose(["recipe=not_plus_tiny", *NAMED_OFF]))
    items, mix = build_mix(compose(["recipe=not_plus_tiny", "train.named.topics=true", "train.named.or_questions=3"]))
    clusters = [json.loads(line) for line in (SAMPLE_DIR / "clusters.jsonl").open()]
    held = {c["cluster"] for c in clusters if c["split"] != "train"}
    n_train = sum(c["split"] == "train" for c in clusters)
    assert mix["boolean"]["examples"] == 340 + 3 * n_train and len(items) == len(base) + 3 * n_train
    topics = {pid for it in items for pid in it.negative_ids if pid.endswith("/topic")}
    assert len(topics) == n_train and not {t.rsplit("/", 1)[0] for t in topics} & held
    boolean = [it for it in items if it.question_type in ("and", "or", "not")]
    assert sum(it.question_type == "or" for it in boolean) == 102 + 3 * n_train
    assert not {it.group for it in boolean} & held
    nots = [it for it in boolean if it.question_type == "not"]
    assert all(it.negative_ids[-1] == f"{it.group}/topic" for it in nots)


def test_a_pool_without_groups_says_what_it_lacks(tmp_path):
    pool = tmp_path / "pool"
    pool.mkdir()
    shutil.copy(SAMPLE_DIR / "train.jsonl", pool / "train.jsonl")
    shutil.copy(SAMPLE_DIR / "corpus.jsonl", pool / "corpus.jsonl")
    cfg = compose(["recipe=not_plus_tiny", f"train.boolean={pool / 'train.jsonl'}", "train.named.or_questions=1"])
    with pytest.raises(DataError, match="needs train.groups.jsonl beside the pool .* or clusters.jsonl and corpus.jsonl"):
        build_mix(cfg)


def test_a_generated_pool_trains_on_its_named_groups(tmp_path):
    out = run_generate(compose(["recipe=tiny", f"out={tmp_path / 'gen'}", f"generate.cache_dir={tmp_path / 'cache'}",
                                "generate.exclude=sample", "generate.num_examples=24", "generate.hard_negatives=0",
                                "generate.operators=[and,or,not]"]), show_progress=False)
    groups = [json.loads(line) for line in out.with_name(f"{out.stem}.groups.jsonl").open()]
    examples = [json.loads(line) for line in out.open()]
    assert {r["cluster"] for r in groups} == {e["provenance"]["group"] for e in examples}
    train = ["recipe=tiny", f"train.boolean={out}", "train.operators=[and,or,not]", "train.original=none"]
    plain, _ = build_mix(compose(train))
    items, _ = build_mix(compose([*train, "train.named.topics=true", "train.named.or_questions=2"]))
    named = [it for it in items if it.query not in {p.query for p in plain}]
    assert len(named) == 2 * len(groups) and len(items) == len(plain) + len(named)
    capped, _ = build_mix(compose([*train, "train.num_examples=10", "train.named.or_questions=2"]))
    assert len(capped) == 10 + len(named)  # named questions come on top of the pool's examples asked for
    texts = {p["docid"]: p["text"] for r in groups for p in r["passages"]}
    for it in named:
        assert it.question_type == "or" and " or " in it.query
        assert it.positives == [texts[i] for i in it.positive_ids]  # texts from the groups file
    topics = {r["cluster"]: r["topic"] for r in groups}
    for it in items:
        if it.group in topics and it.query in {p.query for p in plain}:
            where = -1 if it.question_type == "not" else 0
            assert it.negative_ids[where] == f"{it.group}/topic" and topics[it.group] in it.negatives[where]


def test_a_negative_count_of_named_questions_is_refused():
    with pytest.raises(ConfigError, match="train.named.or_questions"):
        compose(["recipe=not_plus_tiny", "train.named.or_questions=-1"])
