"""scripts/arguana_sides.py: what ranks above ArguAna's counterpoint, counted by hand on a tiny release."""
import pickle

import pytest
from conftest import load_script

DEBATE1 = "test-economy-deb1"
Q1, Q2 = f"{DEBATE1}-pro01a", "training-free-speech-debate-deb2-con02a"  # a category with hyphens
RELEVANT = {Q1: f"{DEBATE1}-pro01b", Q2: "training-free-speech-debate-deb2-con02b"}
RANKED = {  # best first
    Q1: [f"{DEBATE1}-pro02a",            # own side, point
         "test-health-deb9-con01a",      # other debate
         f"{DEBATE1}-con01b",            # other side, counterpoint
         RELEVANT[Q1], f"{DEBATE1}-con01a"],
    Q2: [RELEVANT[Q2], f"{DEBATE1}-pro02a"],
}


@pytest.fixture
def script():
    return load_script("arguana_sides")


@pytest.fixture
def birco(tmp_path):
    corpus = {p: f"text of {p}" for ranked in RANKED.values() for p in ranked}
    qrel = {q: {p: int(p == RELEVANT[q]) for p in ranked} for q, ranked in RANKED.items()}
    data = {"query": {q: f"the argument {q}" for q in RANKED}, "corpus": corpus, "qrel": qrel}
    path = tmp_path / "birco" / "arguana" / "test_set.pickle"
    path.parent.mkdir(parents=True)
    path.write_bytes(pickle.dumps(data, protocol=4))
    return path.parent.parent


def write_run(folder, ranked):
    folder.mkdir(parents=True)
    lines = [f"arguana/{q} Q0 {p} {i + 1} {1.0 - i / 10:.2f} m" for q, ps in ranked.items() for i, p in enumerate(ps)]
    (folder / "run.trec").write_text("\n".join(lines) + "\n")
    return folder


def test_kinds_come_from_the_ids(script):
    assert script.kind(Q1, f"{DEBATE1}-pro03a") == "own side, point"
    assert script.kind(Q1, f"{DEBATE1}-con03b") == "other side, counterpoint"
    assert script.kind(Q2, "training-free-speech-debate-deb2-pro01a") == "other side, point"
    assert script.kind(Q1, "test-economy-deb2-pro01a") == "other debate"
    assert script.kind(Q1, "not-an-argument-id") == "other debate"


def test_counts_above_the_counterpoint_match_a_hand_count(script, birco, tmp_path, capsys, monkeypatch):
    m1 = write_run(tmp_path / "runs" / "m-s1", RANKED)
    swapped = {Q1: [RELEVANT[Q1]] + [p for p in RANKED[Q1] if p != RELEVANT[Q1]], Q2: RANKED[Q2][::-1]}
    m2 = write_run(tmp_path / "runs" / "m-s2", swapped)  # seed 2: Q1 first, Q2 under one own-side point of debate 1
    assert script.main([str(m1), str(m2), "--birco", str(birco)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| m |"))
    # 4 questions over both seeds; above the counterpoint: seed 1 Q1 one own-side point, one other
    # debate, one other-side counterpoint; seed 2 Q2 one passage of another debate (debate 1)
    assert [c.strip() for c in row.strip("|").split("|")] == ["m", "2", "0.25", "0.00", "0.00", "0.25", "0.50", "50.0%"]

    monkeypatch.setenv("BOOLCL_BIRCO", str(birco))  # where BIRCO is when --birco is not given
    assert script.main([str(m1 / "run.trec"), "--k", "2"]) == 0  # only the top 2 count
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| m |"))  # the folder's name
    assert [c.strip() for c in row.strip("|").split("|")][1:] == ["1", "0.50", "0.00", "0.00", "0.00", "0.50", "50.0%"]


def test_a_run_of_another_set_is_refused_by_name(script, birco, tmp_path):
    bad = write_run(tmp_path / "runs" / "x", {"test-economy-deb7-pro01a": ["a"]})
    with pytest.raises(SystemExit, match=r"question test-economy-deb7-pro01a is not in BIRCO's ArguAna test set"):
        script.main([str(bad), "--birco", str(birco)])
    (bad / "run.trec").write_text("arguana/q only three\n")
    with pytest.raises(SystemExit, match=r"run\.trec:1: a TREC run line has 6 columns"):
        script.main([str(bad), "--birco", str(birco)])
