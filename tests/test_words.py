"""The held-out wordings share no marker with any wording list boolcl reads or trains on, and
scripts/reproduce/unseen_wordings.py rewords the sample's NOT questions with them."""
import json
import re

from conftest import load_script

from boolcl import words
from boolcl.data.loaders import SAMPLE_DIR
from boolcl.logic.rules import negation_span


def _markers(template: str) -> str:
    return " ".join(template.replace("{keep}", " ").replace("{keep_lc}", " ").replace("{drop}", " ")
                    .strip(" ,?").split())


def _known(marker: str) -> list[str]:
    """The exclusion lists' markers found in `marker`."""
    found = [m for m in words.EXCLUSION_INFIX if re.search(rf"\b{re.escape(m)}\b", marker)]
    return found + [m.group(0) for m in [words.OFFLINE_NOT_MARKERS.search(marker)] if m]


def test_unseen_wordings_are_unseen():
    for wording in words.UNSEEN_WORDINGS:
        marker = _markers(wording)
        assert marker and not _known(marker), wording
        assert not words.EXCLUSION_PREFIX.match(wording.format(keep="which x", keep_lc="which x", drop="y")), wording
        assert negation_span(wording.format(keep="Which string instruments are there", drop="the cello")) is None


def test_a_known_wording_would_be_caught():
    """The checks above can fail: wordings the rules or the offline generator know are flagged."""
    assert _known(_markers("{keep}, excluding {drop}?"))
    assert _known(_markers("{keep}, leaving out whatever answers {drop}?"))  # the offline generator's
    assert negation_span("Which string instruments are there, other than the cello?") is not None


def test_unseen_wordings_script_rewords_every_splittable_held_out_not_question(tmp_path):
    script = load_script("scripts/reproduce/unseen_wordings")
    written, skipped = script.build(tmp_path / "u")
    rows = [json.loads(x) for x in (tmp_path / "u" / "eval.jsonl").read_text().splitlines()]
    original = [json.loads(x) for x in (SAMPLE_DIR / "eval.jsonl").read_text().splitlines()
                if json.loads(x)["question_type"] == "not"]
    splittable = [r for r in original if negation_span(r["question"]) is not None]
    assert written == len(rows) == len(splittable) > 100 and skipped == len(original) - len(splittable)
    assert [r["qid"] for r in rows] == [r["qid"] for r in splittable]  # labels and passages kept
    assert all(r["positive_ctxs"] == o["positive_ctxs"] and r["negative_ctxs"] == o["negative_ctxs"]
               and r["question"] != o["question"] for r, o in zip(rows, splittable))
    patterns = [re.compile(re.escape(w).replace(r"\{keep\}", ".+").replace(r"\{drop\}", ".+") + "$")
                for w in words.UNSEEN_WORDINGS]
    assert all(any(p.match(r["question"]) for p in patterns) for r in rows)  # each through an unseen wording
    assert (tmp_path / "u" / "corpus.jsonl").read_bytes() == (SAMPLE_DIR / "corpus.jsonl").read_bytes()


def test_composed_questions_use_only_markers_the_rules_split():
    """The trainer's composed questions join parts with the rules' own markers, so none of the
    held-out wordings is ever trained on and every composed question splits back."""
    assert set(words.COMPOSE_INFIX) <= set(words.EXCLUSION_INFIX)
    for marker in words.COMPOSE_PREFIX:
        assert words.EXCLUSION_PREFIX.match(f"{marker} the cello, which string instruments are there?"), marker
    for marker in [*words.COMPOSE_INFIX, *words.COMPOSE_PREFIX]:
        assert not any(_markers(w) in marker or marker in _markers(w) for w in words.UNSEEN_WORDINGS), marker
    assert "other than" in words.COMPOSE_INFIX and "is not" not in words.COMPOSE_INFIX
