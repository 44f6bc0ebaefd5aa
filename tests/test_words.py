"""The held-out wordings share no marker with any wording list boolcl reads or trains on."""
import re

from boolcl import words


def _markers(template: str) -> str:
    return " ".join(template.replace("{keep}", " ").replace("{keep_lc}", " ").replace("{drop}", " ")
                    .strip(" ,?").split())


def test_unseen_wordings_are_unseen():
    trained = [_markers(t) for t in words.SCOPE_TEMPLATES]
    for wording in words.UNSEEN_WORDINGS:
        marker = _markers(wording)
        assert marker and not words.OFFLINE_NOT_MARKERS.search(marker), wording
        assert not [m for m in words.EXCLUSION_INFIX if re.search(rf"\b{re.escape(m)}\b", marker)], wording
        assert not [t for t in trained if t and (re.search(rf"\b{re.escape(marker)}\b", t)
                                                 or re.search(rf"\b{re.escape(t)}\b", marker))], wording
        assert not words.EXCLUSION_PREFIX.match(wording.format(keep="which x", keep_lc="which x", drop="y")), wording


def test_a_trained_wording_would_be_caught():
    """The check above can fail: a wording the rules know is flagged."""
    marker = _markers("{keep}, excluding {drop}?")
    assert [m for m in words.EXCLUSION_INFIX if re.search(rf"\b{re.escape(m)}\b", marker)]
