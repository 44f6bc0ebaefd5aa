"""Unit tests of the generator's parts: parsing, prompts, composition labels, filter, cache keys, grouping."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from conftest import dump_jsonl

from boolcl.errors import DataError
from boolcl.generate import offline, parse, prompts
from boolcl.generate.cluster import (
    Group,
    by_clustering,
    by_page,
    by_prefix,
    choose_strategy,
    sample_indices,
)
from boolcl.generate.compose import Draw, draw_stream, split_counts
from boolcl.generate.corpus import load_passages
from boolcl.generate.filter import decide
from boolcl.generate.negatives import mine
from boolcl.llm.cache import AnswerCache, cache_key, request_identity

# --- parsing what LLMs really return ----------------------------------------------------------


@pytest.mark.parametrize("raw, expected, note", [
    ("What is the capital of France?", "What is the capital of France?", None),
    ('"What is the capital of France?"', "What is the capital of France?", "quotes or markup"),
    ("1. What causes tides?", "What causes tides?", "numbering or label"),
    ("**Question:** Which river flows past Vienna?", "Which river flows past Vienna?", "numbering or label"),
    ("Sure! Here is a question:\n\nWhich planet has the most moons?", "Which planet has the most moons?", "preamble"),
    ("Which bird is fastest? Which bird is largest?", "Which bird is fastest?", "several questions: kept the first"),
    ("1. Which is A?\n2. Which is B?\n3. Which is C?", "Which is A?", "several questions: kept the first"),
    ("<think>the passage is about cats</think>\nWhich cat is the fastest?", "Which cat is the fastest?",
     "reasoning block removed"),
    ("which planet has rings", "Which planet has rings?", "question mark added"),
    ("```\nWhat melts at 0 degrees?\n```", "What melts at 0 degrees?", None),
    ("\u201cWhich metal is liquid at room temperature?\u201d", "Which metal is liquid at room temperature?",
     "quotes or markup"),
])
def test_question_normalised(raw, expected, note):
    p = parse.question(raw)
    assert p.value == expected and p.reason is None
    if note:
        assert note in p.notes


@pytest.mark.parametrize("raw, reason", [
    (None, "empty answer"),
    ("", "empty answer"),
    ("   \n ", "empty answer"),
    ("<think>hmm</think>", "empty answer"),
    ("I'm sorry, but I can't help with that request.", "refusal"),
    ("As an AI language model, I cannot write questions.", "refusal"),
    ("Cannot answer", "says it cannot"),
    ("The passage does not contain enough information.", "says it cannot"),
    ("N/A", "says it cannot"),
    ("The lion is a big cat.", "not a question"),
    ("What " + "very " * 80 + "long question?", "too long"),
    ("Why?", "too short"),
    ("What does the passage say about volcanoes?", "refers to the passage"),
])
def test_question_dropped_with_reason(raw, reason):
    p = parse.question(raw)
    assert p.value is None and p.reason == reason


def test_cut_off_answer_is_dropped():
    assert parse.question("Which river flows through", finish_reason="length").reason == "cut off (max_tokens)"
    assert parse.question("Which river is longest?", finish_reason="length").ok


@pytest.mark.parametrize("raw, value, reason", [
    ("Barn swallow", "Barn swallow", None),
    ('**Name:** "Barn swallow".', "Barn swallow", None),
    ("Topic: birds that migrate in winter\nThese passages describe birds.", "birds that migrate in winter", None),
    ("Sure, here it is: migratory birds", "migratory birds", None),
    ("<think>they all fly south</think>\nMigratory birds", "Migratory birds", None),
    ("", None, "empty answer"),
    ("I'm sorry, I cannot name it.", None, "refusal"),
    ("Which birds migrate?", None, "a question, not a name"),
    ("a very long name that goes on and on well past what any heading would say", None, "too long"),
    ("The passage about swallows", None, "refers to the passage"),
])
def test_a_name_is_one_short_line_or_a_reason(raw, value, reason):
    p = parse.phrase(raw)
    assert (p.value, p.reason) == (value, reason)
    assert parse.phrase("Barn swal", finish_reason="length").reason == "cut off (max_tokens)"


def test_offline_names_come_from_the_sample_or_the_passage():
    swallow = offline.respond(prompts.name(prompts.Passage(None, "Swallows are small birds that feed in flight.")))
    assert swallow == "Swallows are small"
    assert offline.respond(prompts.name(prompts.Passage("Barn swallow", "A bird."))) == "Barn swallow"
    shared = offline.respond(prompts.topic([prompts.Passage(None, "Swallows migrate south."),
                                            prompts.Passage(None, "Storks migrate south too.")]))
    assert shared == "migrate and south"


@pytest.mark.parametrize("raw, verdict", [
    ("CANNOT ANSWER", parse.CANNOT), ("Cannot answer.", parse.CANNOT), ("cannot answer", parse.CANNOT),
    ("The passage doesn't say.", parse.CANNOT), ("It does not mention the liver.", parse.CANNOT),
    ("This cannot be answered from the text.", parse.CANNOT), ("Not mentioned in the passage.", parse.CANNOT),
    ("The Nile.", parse.ANSWERED), ("The Sahara does not include rain forests.", parse.ANSWERED),
    ("", parse.UNUSABLE), (None, parse.UNUSABLE), ("I'm sorry, I can't do that.", parse.UNUSABLE),
])
def test_verdicts(raw, verdict):
    assert parse.verdict(raw)[0] == verdict


def test_operator_checks():
    assert parse.check_operator("not", "Which cats are not lions?") is None
    assert parse.check_operator("not", "Which big cats live in Africa?") == "negation lost"
    assert parse.check_operator("not", "Which big cats are there besides the lion?") is None
    assert parse.check_operator("or", "Which river is longest, or which one is widest?") is None
    assert parse.check_operator("or", "Which river is longest and widest?") == "disjunction lost"
    assert parse.check_operator("and", "What are big cats?", "What are big cats?") == "no constraint added"


# --- prompts ------------------------------------------------------------------------------------


def test_prompts_round_trip():
    a, b = prompts.Passage("Lion", "Lions live in prides."), prompts.Passage(None, "Tigers hunt alone at night.")
    msgs = prompts.conjunction("Which big cats exist?", [a, b], 1)
    f = prompts.fields_of(msgs)
    assert f.kind == "and" and f.target == 1 and f.questions["broad"] == "Which big cats exist?"
    assert [(p.title, p.text) for p in f.passages] == [("Lion", "Lions live in prides."),
                                                         (None, "Tigers hunt alone at night.")]
    f = prompts.fields_of(prompts.negation("Which big cats exist?", "Which cat lives in prides?"))
    assert f.kind == "not" and f.questions == {"broad": "Which big cats exist?", "excluded": "Which cat lives in prides?"}
    f = prompts.fields_of(prompts.disjunction("Which is A?", "Which is B?"))
    assert f.kind == "or" and f.questions == {"a": "Which is A?", "b": "Which is B?"}
    f = prompts.fields_of(prompts.answer("Which cat hunts alone?", b))
    assert f.kind == "answer" and f.questions["question"] == "Which cat hunts alone?" and f.passages[0].title is None
    assert prompts.kind_of([{"role": "user", "content": "hello"}]) is None
    f = prompts.fields_of(prompts.topic([a, b]))
    assert f.kind == "topic" and [p.text for p in f.passages] == [a.text, b.text]
    f = prompts.fields_of(prompts.name(b))
    assert f.kind == "name" and f.passages[0].title is None and f.passages[0].text == b.text


def test_passages_are_cut_in_prompts():
    long = prompts.Passage("T", "word " * 1000)
    body = prompts.simple(long, limit=200)[1]["content"]
    assert len(body) < 1000 and body.endswith("...")


def test_no_prompt_mentions_a_key_or_changes_silently():
    # the version string must change with the wording: pin a hash of all prompt text beside it
    text = json.dumps([prompts.SYSTEM, prompts.HEADS, prompts.RULES], sort_keys=True)
    pinned = (prompts.PROMPT_VERSION, hashlib.sha256(text.encode()).hexdigest()[:16])
    assert pinned == ("boolcl-gen-v2", "82748257d4387812"), "prompts changed: bump PROMPT_VERSION, then this pin"
    assert "sk-" not in text


# --- composition and labels ----------------------------------------------------------------


def test_labels_per_operator():
    assert Draw("and", 0, "g", (10, 11, 12), (1,)).labels() == ([11], [10, 12])
    assert Draw("or", 0, "g", (10, 11, 12), (0, 2)).labels() == ([10, 12], [11])
    assert Draw("not", 0, "g", (10, 11, 12), (2,)).labels() == ([10, 11], [12])
    assert Draw("or", 0, "g", (10, 11), (0, 1)).labels() == ([10, 11], [])


def test_draw_stream_is_seeded_unique_and_sized():
    groups = [Group(f"g{k}", list(range(k * 5, k * 5 + 5))) for k in range(4)] + [Group("small", [100, 101])]
    a = list(draw_stream(groups, "not", seed=1))
    b = list(draw_stream(groups, "not", seed=1))
    assert a == b and a != list(draw_stream(groups, "not", seed=2))
    keys = [(d.group, d.candidates, d.target) for d in a]
    assert len(keys) == len(set(keys))
    # every distinct (group, 2-3 candidates, excluded one) draw is made exactly once, then the stream ends
    assert len(a) == 4 * (10 * 2 + 10 * 3) + 2
    assert all(2 <= len(d.candidates) <= 3 for d in a) and [d.index for d in a] == list(range(len(a)))
    ors = list(draw_stream(groups, "or", seed=1))
    assert all(len(d.target) == 2 for d in ors)


def test_split_counts():
    assert split_counts(2000, ["not"]) == {"not": 2000}
    assert split_counts(10, ["and", "or", "not"]) == {"and": 4, "or": 3, "not": 3}


# --- the cyclic filter ---------------------------------------------------------------------------

A, C, U = parse.ANSWERED, parse.CANNOT, parse.UNUSABLE


def test_filter_rules():
    # NOT: positives answer, the excluded passage does not
    d = decide("not", [A, A], [C], "strict")
    assert d.keep and d.pass_positives and d.pass_strict
    d = decide("not", [A, A], [A], "strict")
    assert not d.keep and d.pass_positives and not d.pass_strict and d.reason == "a negative passage answers"
    assert decide("not", [A, A], [A], "positives").keep
    d = decide("and", [C], [C], "strict")
    assert not d.keep and d.reason == "a positive passage does not answer"
    assert decide("or", [A, A], [A], "strict").keep  # OR negatives are not part of the strict rule
    d = decide("not", [A, U], [C], "strict")
    assert not d.keep and d.reason == "unusable check answer"
    assert decide("not", [A], [U], "positives").keep
    assert decide("not", [C], [A], "off").keep


# --- cache keys -------------------------------------------------------------------------------------


def _ident(**kw):
    base = dict(backend="openai", base_url="http://h/v1", model="m", temperature=0.0, max_tokens=64,
                messages=[{"role": "user", "content": "q"}])
    base.update(kw)
    return request_identity(**base)


def test_cache_key_covers_what_shapes_the_answer():
    k = cache_key(_ident())
    assert k == cache_key(_ident(base_url="http://h/v1/"))  # same endpoint
    for change in (dict(model="m2"), dict(temperature=0.7), dict(max_tokens=65), dict(base_url="http://other/v1"),
                   dict(backend="offline"), dict(messages=[{"role": "user", "content": "q2"}])):
        assert cache_key(_ident(**change)) != k, change
    assert "key" not in json.dumps(_ident()).lower().replace("max_tokens", "")


def test_cache_round_trip_and_bad_entries(tmp_path):
    cache = AnswerCache(tmp_path)
    ident = _ident()
    key = cache_key(ident)
    assert cache.get(key) is None
    cache.put_sync(key, ident, {"text": "hi"})
    assert cache.get(key) == {"text": "hi"} and len(cache) == 1
    assert not list(tmp_path.rglob("*.tmp"))
    cache.path(key).write_text("{half a file")  # never happens with atomic writes; still only a miss
    assert cache.get(key) is None


# --- grouping -----------------------------------------------------------------------------------


def test_prefix_and_page_grouping():
    ids = ["a/1", "a/2", "b/1", "c/1", "c/2", "c/3"]
    assert [(g.gid, g.members) for g in by_prefix(ids, list(range(6)))] == [("a", [0, 1]), ("c", [3, 4, 5])]
    titles = ["X", "X", "X", "X", "X", "Y", "Z", "Z", None, "Z", "Z"]
    groups = by_page(titles, list(range(len(titles))), page_size=2)
    assert [g.members for g in groups] == [[0, 1], [2, 3, 4], [6, 7], [9, 10]]


def test_agglomerative_clustering_recovers_topics():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(6, 48)) * 4
    emb = np.concatenate([c + rng.normal(size=(8, 48)) for c in centers]).astype(np.float32)
    truth = np.repeat(np.arange(6), 8)
    groups = by_clustering(emb, list(range(len(emb))), cluster_size=8, svd_dim=16, seed=0)
    assert len(groups) == 6
    for g in groups:
        assert len(set(truth[g.members])) == 1, "a cluster mixes topics"
    # the connectivity-graph path (used for large corpora) separates the topics too
    groups = by_clustering(emb, list(range(len(emb))), cluster_size=8, svd_dim=16, seed=0, full_ward_limit=10)
    assert all(len(set(truth[g.members])) == 1 for g in groups)
    assert groups and all(len(g.members) >= 2 for g in groups)


def test_strategy_and_sampling():
    assert choose_strategy("auto", "sample", ["A", "B"]) == "prefix"
    assert choose_strategy("auto", "boolquestions-nq:/x", ["A", "A", "B"]) == "page"
    assert choose_strategy("auto", "my.jsonl", ["A", "B", "C"]) == "cluster"  # titles, but no pages
    assert choose_strategy("auto", "boolquestions-msmarco", [None, None]) == "cluster"
    assert choose_strategy("cluster", "sample", ["A"]) == "cluster"
    s = sample_indices(100, 10, seed=3)
    assert len(s) == 10 and s == sample_indices(100, 10, seed=3) and s == sorted(s)
    assert sample_indices(5, None, 0) == [0, 1, 2, 3, 4]


# --- hard negatives ------------------------------------------------------------------------------


def test_mining_skips_positives_and_group():
    p = np.eye(6, dtype=np.float32)
    q = np.array([[1, 0.9, 0.8, 0.7, 0.6, 0.5]], dtype=np.float32)
    assert mine(q, p, skip=[{0, 2}], k=2, depth=5) == [[1, 3]]
    assert mine(q, p, skip=[set()], k=0, depth=5) == [[]]


# --- corpus input --------------------------------------------------------------------------------


def test_bad_corpus_inputs(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(DataError, match="corpus is empty"):
        load_passages(str(empty), min_chars=10)
    dup = dump_jsonl(tmp_path / "dup.jsonl", [{"docid": "a", "doc": "x" * 50}, {"docid": "b", "doc": "y" * 50},
                                             {"docid": "a", "doc": "z" * 50}])
    with pytest.raises(DataError, match=r"'a' appears twice \(rows 1 and 3\)"):
        load_passages(str(dup), min_chars=10)
    short = dump_jsonl(tmp_path / "short" / "corpus.jsonl", [{"docid": "a", "doc": "tiny"}, {"docid": "b", "doc": "x" * 80},
                                                             {"docid": "c", "doc": "also tiny"}])
    with pytest.raises(DataError, match="only 1 usable passage.*2 shorter than 40 characters"):
        load_passages(str(short.parent), min_chars=40)
    ok = load_passages(str(short), min_chars=4)
    assert ok.ids == ["a", "b", "c"] and not ok.skipped
    with pytest.raises(DataError, match="corpus not found"):
        load_passages(str(tmp_path / "nope.jsonl"), min_chars=4)
    bad = dump_jsonl(tmp_path / "bad.jsonl", [{"docid": "a", "doc": ""}])
    with pytest.raises(DataError, match=r"bad.jsonl:1: field 'doc'"):
        load_passages(str(bad), min_chars=4)


def test_exclusion_leaves_out_eval_passages():
    from boolcl.data.loaders import load_retrieval_set

    p = load_passages("sample", min_chars=40, exclude="sample")
    labelled = {c.passage_id for q in load_retrieval_set("sample").questions for c in q.positive_ctxs + q.negative_ctxs}
    assert p.ids and not set(p.ids) & labelled
    assert sum(p.skipped.values()) + len(p) == p.total


# --- the offline stand-in -------------------------------------------------------------------------


def test_offline_answers_our_prompts_sensibly():
    from boolcl.data.loaders import SAMPLE_DIR

    train = [json.loads(line) for line in (SAMPLE_DIR / "train.jsonl").read_text().splitlines() if line.strip()]
    simple = next(r for r in train if r["question_type"] == "simple")
    pid = simple["positive_ctxs"][0]["passage_id"]
    docs = {r["docid"]: r for r in map(json.loads, (SAMPLE_DIR / "corpus.jsonl").read_text().splitlines())}
    me = prompts.Passage(docs[pid].get("title"), docs[pid]["doc"])
    sibling_id = next(d for d in docs if d.rsplit("/", 1)[0] == pid.rsplit("/", 1)[0] and d != pid)
    sib = prompts.Passage(docs[sibling_id].get("title"), docs[sibling_id]["doc"])
    assert offline.respond(prompts.simple(me)) == simple["question"]
    broad = offline.respond(prompts.disjunctive([me, sib]))
    assert parse.question(broad).ok
    q = offline.respond(prompts.negation(broad, simple["question"]))
    assert parse.question(q).ok and parse.check_operator("not", q) is None
    assert offline.respond(prompts.answer(q, me)) == prompts.CANNOT  # the excluded passage
    assert parse.verdict(offline.respond(prompts.answer(simple["question"], me)))[0] == parse.ANSWERED
    q_or = offline.respond(prompts.disjunction(simple["question"], "Which planet has rings?"))
    assert parse.check_operator("or", q_or) is None
    assert offline.respond([{"role": "user", "content": "hi"}])  # anything else: still an answer, no crash
