"""The decomposed-query Boolean baseline: grammar, set algebra, offline rules, end to end."""
from __future__ import annotations

import json
import math

import pytest
from llm_server import LLMServer
from omegaconf import OmegaConf

from boolcl.baselines.combine import (
    Hits,
    hard_and,
    hard_not,
    hard_or,
    merge_hard,
    merge_soft,
    rank_scores,
    soft_and,
    soft_not,
    soft_or,
    soft_score,
)
from boolcl.config import compose
from boolcl.config.schema import DecomposeCfg
from boolcl.errors import ConfigError
from boolcl.logic.grammar import (
    And,
    GrammarError,
    Not,
    Or,
    Term,
    parse,
    parse_infix,
    terms,
    to_infix,
    to_json,
)
from boolcl.logic.rules import OFFLINE_NAME, rule_decompose

# --- grammar -----------------------------------------------------------------------------------

def test_json_and_infix_forms_agree():
    j = parse('{"op": "not", "args": [{"op": "and", "args": ["a?", "b?"]}, {"op": "or", "args": ["c?", "d?"]}]}')
    i = parse('("a?" AND "b?") AND NOT ("c?" OR "d?")')
    assert j == i == Not(And((Term("a?"), Term("b?"))), Or((Term("c?"), Term("d?"))))
    assert parse(json.dumps(to_json(j))) == j and parse_infix(to_infix(j)) == j
    assert parse('"a" AND "b" AND NOT "c"') == Not(And((Term("a"), Term("b"))), Term("c"))
    assert parse('"a" OR "b" AND "c"') == Or((Term("a"), And((Term("b"), Term("c")))))  # AND binds tighter
    assert parse('{"op": "and", "args": [{"op": "and", "args": ["a", "b"]}, "c"]}') == And((Term("a"), Term("b"), Term("c")))
    assert parse('{"q": "only  one\\nquestion"}') == Term("only one question")
    assert terms(j) == ["a?", "b?", "c?", "d?"]


@pytest.mark.parametrize("text", [
    '```json\n{"op": "not", "args": ["Which cats?", "Which cats have stripes?"]}\n```',
    'Sure! Here is the decomposition:\n{"op": "not", "args": ["Which cats?", "Which cats have stripes?"]}\nHope this helps.',
    '{"expression": {"op": "NOT", "args": ["Which cats?", "Which cats have stripes?"]}}',
    'Expression: "Which cats?" AND NOT "Which cats have stripes?".',
    '```\n"Which cats?" NOT "Which cats have stripes?"\n```',
])
def test_what_llms_really_return_is_normalised(text):
    assert parse(text) == Not(Term("Which cats?"), Term("Which cats have stripes?"))


@pytest.mark.parametrize("text, fragment", [
    (None, "no text"),
    ("", "empty"),
    ("I cannot help with that.", "no JSON object and no quoted questions"),
    ('{"op": "xor", "args": ["a", "b"]}', "not one of and, or, not"),
    ('{"op": "not", "args": ["a"]}', "exactly 2 args"),
    ('{"op": "and", "args": ["a"]}', "2 or more args"),
    ('{"op": "or", "args": ["a", 3]}', "got int"),
    ('{"op": "and", "args": ["a", ""]}', "empty question"),
    ('{"op": "and", "args": ["a", "b"], "note": "x"}', "unexpected keys"),
    ('{"op": "and", "args": ["a", "b"', "not a Boolean expression"),
    ('NOT "a"', "NOT needs a left side"),
    ('"a" AND', "expected a question"),
    ('("a" OR "b"', "expected ')'"),
    ('"a" "b"', "unexpected"),
    ('"a" AND b', "double-quoted"),
    ('{"op": "or", "args": ["q%d"]}' % 0, "2 or more"),
    (json.dumps({"op": "or", "args": [f"q{i}" for i in range(9)]}), "at most 8"),
])
def test_malformed_output_is_rejected_with_a_reason(text, fragment):
    with pytest.raises(GrammarError, match=None) as err:
        parse(text)
    assert fragment in str(err.value)


# --- set algebra on hand-made lists --------------------------------------------------------------

A = Hits({"a": 0.9, "b": 0.8, "c": 0.5}, 0.5)
B = Hits({"b": 0.7, "d": 0.6, "a": 0.4}, 0.4)


def close(x: dict, y: dict):
    assert x.keys() == y.keys() and all(math.isclose(x[k], y[k]) for k in x), (x, y)


def test_hard_merges_are_the_papers_set_operations():
    close(hard_and([A, B]).scores, {"a": 1.3, "b": 1.5})  # intersection, added
    close(hard_or([A, B]).scores, {"a": 0.9, "b": 0.8, "c": 0.5, "d": 0.6})  # union, max
    close(hard_not(A, B).scores, {"c": 0.1})  # difference; minus the neg list's floor
    leaf = {"x": A, "y": B, "z": Hits({"c": 0.3, "e": 0.2}, 0.2)}
    close(merge_hard(parse('("x" OR "y") AND NOT "z"'), leaf).scores, {"a": 0.7, "b": 0.6, "d": 0.4})
    close(merge_hard(parse('"x" AND "y" AND "z"'), leaf).scores, {})
    assert merge_hard(Term("x"), leaf) is A


def test_soft_merges_keep_what_the_hard_ones_drop():
    close(soft_and([A, B]).scores, {"a": 1.3, "b": 1.5, "c": 0.9, "d": 1.1})  # missing -> the list's floor
    close(soft_or([A, B]).scores, {"a": 0.9, "b": 0.8, "c": 0.5, "d": 0.6})
    close(soft_not(A, B, 1.0).scores, {"a": 0.5, "b": 0.1, "c": 0.1})  # a and b survive, penalised
    close(soft_not(A, B, 0.0).scores, A.scores)
    leaf = {"x": A, "y": B}
    close(merge_soft(parse('"x" AND NOT "y"'), leaf, 0.5).scores, {"a": 0.7, "b": 0.45, "c": 0.3})
    anchored = soft_score(parse('"x" AND NOT "y"'), leaf, Hits({"c": 1.0}, 0.0), lam=1.0, anchor=0.5)
    close(anchored.scores, {"a": 0.5, "b": 0.1, "c": 0.6})
    r = rank_scores(A, rrf_k=1)
    close(r.scores, {"a": 1 / 2, "b": 1 / 3, "c": 1 / 4})
    assert math.isclose(r.floor, 1 / 5)
    with pytest.raises(ValueError, match="soft rule"):
        soft_score(Term("x"), leaf, None, lam=1.0, rule="nope")


# --- offline rules ------------------------------------------------------------------------------

@pytest.mark.parametrize("question, expected", [
    ("What causes pain in the upper abdomen other than stones in the gallbladder?",
     Not(Term("What causes pain in the upper abdomen?"), Term("Stones in the gallbladder?"))),
    ("Besides the one Chadwick discovered, what subatomic particles are studied in physics?",
     Not(Term("What subatomic particles are studied in physics?"), Term("The one Chadwick discovered?"))),
    ("Which mammals live in the sea and don't graze on seagrass?",
     Not(Term("Which mammals live in the sea?"), Term("Graze on seagrass?"))),
    ("Which vaccines guard against serious diseases besides the measles, mumps and rubella shot?",
     Not(Term("Which vaccines guard against serious diseases?"), Term("The measles, mumps and rubella shot?"))),
    ("Which vaccine prevents cervical cancer, and which one protects against tuberculosis?",
     Or((Term("Which vaccine prevents cervical cancer?"), Term("Which vaccine protects against tuberculosis?")))),
    ("What upper abdominal pain is linked either to heavy alcohol use or to heavy lifting?",
     Or((Term("What upper abdominal pain is linked to heavy alcohol use?"),
         Term("What upper abdominal pain is linked to heavy lifting?")))),
    ("What can cause upper abdominal pain and also make the skin and eyes turn yellow?",
     And((Term("What can cause upper abdominal pain?"), Term("What can make the skin and eyes turn yellow?")))),
    ("Which big cat species lives in Africa and has males with a thick mane?",
     And((Term("Which big cat species lives in Africa?"), Term("Which big cat species has males with a thick mane?")))),
    ("Which major desert is in South America, lying along the Pacific coast?",
     Term("Which major desert is in South America, lying along the Pacific coast?")),
])
def test_offline_rules_on_sample_wordings(question, expected):
    assert rule_decompose(question) == expected


def test_offline_rules_find_the_operator_of_most_sample_questions(sample):
    hits = {t: 0 for t in ("and", "or", "not")}
    count = {t: 0 for t in ("and", "or", "not")}
    kind = {Not: "not", Or: "or", And: "and"}
    for q in sample.questions:
        count[q.question_type] += 1
        hits[q.question_type] += kind.get(type(rule_decompose(q.question))) == q.question_type
    assert hits["not"] / count["not"] > 0.95 and hits["or"] / count["or"] > 0.9
    assert hits["and"] > 0  # AND wordings are mostly single clauses on the sample


# --- end to end ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sample():
    from boolcl.data.loaders import load_retrieval_set

    return load_retrieval_set("sample")


@pytest.fixture(scope="module")
def minilm():
    from boolcl.retrieval.models import load_model

    return load_model("offline-default", similarity="cosine", max_length=128)


@pytest.fixture(scope="module")
def emb_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("embeddings")  # the corpus is encoded once, then read back


def make_cfg(out, emb_cache, **decompose):
    cfg = compose(["recipe=tiny", f"out={out}"])
    OmegaConf.set_struct(cfg, False)
    cfg.eval.cache_dir = str(emb_cache)
    return OmegaConf.merge(cfg, {"decompose": OmegaConf.merge(OmegaConf.structured(DecomposeCfg), decompose)})


def read(path):
    return json.loads(path.read_text())


def test_end_to_end_offline_rules(tmp_path, sample, minilm, emb_cache):
    from boolcl.scoring.runner import evaluate_model, headline

    cfg = make_cfg(tmp_path / "out", emb_cache)
    res = run_decompose_quiet(cfg, minilm, sample)
    base = headline(evaluate_model(minilm, sample, k=10, show_progress=False, cache_dir=emb_cache), 10)
    hard, soft = res["headline"]["hard"], res["headline"]["soft"]
    assert res["headline"]["base"] == pytest.approx(base)  # the same ranking as `boolcl evaluate`
    assert base["NegRecall@10/NOT"] > 80
    assert hard["NegRecall@10/NOT"] < base["NegRecall@10/NOT"] / 3  # the hard difference removes negatives
    assert soft["MRR@10/ALL"] > hard["MRR@10/ALL"]
    assert soft["NegRecall@10/NOT"] < base["NegRecall@10/NOT"]

    p = res["paths"]
    for name in ("hard", "soft"):
        r = read(p[name])
        assert r["model"]["variant"] == name and r["model"]["decomposer"] == OFFLINE_NAME
        assert r["model"]["offline_decomposer"] is True and r["data"]["name"] == "sample"
        assert r["headline"] == pytest.approx(res["headline"][name])
        assert p[f"{name}_run"].read_text().split("\n", 1)[0].endswith(f"decompose-{name}")
    rep = read(p["report"])
    n = len(sample.questions)
    assert rep["decomposer"] == OFFLINE_NAME and rep["offline"] is True and rep["questions"] == n
    assert rep["rules"] == n and rep["parsed"] == rep["retried"] == rep["fell_back"] == 0
    assert sum(rep["top_operator"].values()) == n
    assert sum(sum(c.values()) for c in rep["by_question_type"].values()) == n
    assert rep["top_operator"]["term"] == rep["single_term"]
    assert len(p["decompositions"].read_text().splitlines()) == n


def run_decompose_quiet(cfg, model, rset):
    import io

    from rich.console import Console

    from boolcl.baselines.run import run_decompose

    buf = io.StringIO()
    res = run_decompose(cfg, model=model, rset=rset, show_progress=False, console=Console(file=buf, width=140))
    text = buf.getvalue()
    assert "hard" in text and "soft" in text and "offline rules" in text or "llm:" in text
    return res


def test_config_is_checked(tmp_path, emb_cache):
    from boolcl.baselines.run import run_decompose

    with pytest.raises(ConfigError, match="soft_rule"):
        run_decompose(make_cfg(tmp_path, emb_cache, soft_rule="magic"))
    with pytest.raises(ConfigError, match="llm.backend=openai"):
        run_decompose(make_cfg(tmp_path, emb_cache, backend="llm"), rset=object(), model=object())


def _question(messages):
    user = messages[1]["content"]
    return user.rsplit("Question: ", 1)[1].strip()


def scripted(messages):
    """A well-behaved model: the offline rules' decomposition as JSON (fenced now and then)."""
    q = _question(messages)
    answer = json.dumps(to_json(rule_decompose(q)))
    return f"```json\n{answer}\n```" if len(q) % 3 == 0 else answer


def test_end_to_end_against_a_local_openai_compatible_server(tmp_path, sample, minilm, emb_cache):
    qs = sample.questions
    broken, fixed = qs[6].question, qs[7].question  # two NOT questions
    first_try = lambda q: lambda m: len(m) == 2 and _question(m) == q  # noqa: E731
    any_try = lambda q: lambda m: _question(m) == q  # noqa: E731
    with LLMServer(scripted) as srv:
        srv.script({"content": "I would split it into two questions, roughly."}, times=2, when=any_try(broken))
        srv.script({"content": '{"op": "not", "args": ["only one"]}'}, times=1, when=first_try(fixed))
        cfg = make_cfg(tmp_path / "out", emb_cache, backend="llm", cache_dir=str(tmp_path / "cache"))
        cfg.llm.backend = "openai"
        cfg.llm.base_url = srv.base_url
        cfg.llm.model = "test-model"
        cfg.llm.api_key_env = "BOOLCL_DECOMPOSE_TEST_NO_KEY"
        cfg.llm.concurrency = 8
        cfg.llm.backoff = 0.01
        res = run_decompose_quiet(cfg, minilm, sample)
        n = len(qs)
        assert srv.requests == n + 2  # one per question, plus one retry each for the two bad answers
        assert all(e["status"] == 200 for e in srv.log)

        rep = res["report"]
        assert rep["decomposer"] == "llm:test-model" and rep["offline"] is False
        assert rep["questions"] == n and rep["retried"] == 2 and rep["retry_parsed"] == 1 and rep["fell_back"] == 1
        assert rep["parsed"] + rep["retry_parsed"] + rep["fell_back"] == n and rep["rules"] == 0
        assert rep["llm"]["requests"] == n + 2 and rep["llm"]["cache_hits"] == 0
        assert sum(rep["top_operator"].values()) == n
        rows = {json.loads(line)["qid"]: json.loads(line) for line in res["paths"]["decompositions"].open()}
        fb = rows[qs[6].qid]
        assert fb["status"] == "fallback" and fb["expression"] == broken and len(fb["errors"]) == 2
        assert rows[qs[7].qid]["status"] == "retried"
        assert rows[qs[7].qid]["expression"] == to_json(rule_decompose(fixed))
        hard = res["headline"]["hard"]
        assert hard["NegRecall@10/NOT"] < 30 and read(res["paths"]["hard"])["model"]["decomposer"] == "llm:test-model"

        # an unchanged rerun is answered from the cache: no request at all
        before = srv.requests
        again = run_decompose_quiet(cfg, minilm, sample)
        assert srv.requests == before and again["report"]["llm"]["cache_hits"] == n + 2
        for name in ("base", "hard", "soft"):
            assert again["headline"][name] == pytest.approx(res["headline"][name])
