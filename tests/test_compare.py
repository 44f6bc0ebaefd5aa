"""`boolcl compare`: paired tests against scipy, and the comparison end to end on real results.json files."""
from __future__ import annotations

import io
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from scipy import stats

from boolcl.config import compose
from boolcl.errors import ConfigError
from boolcl.evaluate.command import run_evaluate
from boolcl.evaluate.compare import run_compare
from boolcl.evaluate.comparison import check_same_data
from boolcl.evaluate.runs import CompareError, load_runs
from boolcl.evaluate.significance import bootstrap_test, paired_test, randomization_test
from boolcl.evaluate.tables import fmt_p
from boolcl.scoring import metrics
from boolcl.scoring.report import results_dict
from boolcl.scoring.runner import EvalResult

# ---------------------------------------------------------------- significance


def scipy_sign_flip(a, b, n_resamples):
    res = stats.permutation_test((np.asarray(b), np.asarray(a)), lambda x, y, axis: np.mean(x - y, axis=axis),
                                 permutation_type="samples", alternative="two-sided", n_resamples=n_resamples,
                                 random_state=0)
    return res.pvalue


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_randomization_is_exact_and_equals_scipy_when_all_sign_patterns_fit(seed):
    rng = np.random.default_rng(seed)
    a = rng.random(11)
    b = a + rng.normal(0.15, 0.25, 11)
    b[3] = a[3]  # a zero difference: the same under either sign
    p, patterns, exact = randomization_test(a, b, samples=10000, seed=seed)
    assert exact and patterns == 2 ** 10
    assert p == pytest.approx(scipy_sign_flip(a, b, 10000), abs=1e-12)


def test_randomization_on_metric_values_with_ties_equals_scipy():
    """MRR-like values (1/rank): many equal partial sums, where tie handling matters."""
    rng = np.random.default_rng(7)
    a = 1 / rng.integers(1, 4, 12)
    b = 1 / rng.integers(1, 4, 12)
    p, _, exact = randomization_test(a, b, samples=1 << 12)
    assert exact
    assert p == pytest.approx(scipy_sign_flip(a, b, 1 << 12), abs=1e-12)


def test_randomization_known_exact_p_value():
    # three positive differences: of the 8 sign patterns only +++ and --- reach |sum| = 6
    p, patterns, exact = randomization_test([0, 0, 0], [1, 2, 3], samples=8)
    assert (p, patterns, exact) == (0.25, 8, True)


def test_randomization_monte_carlo_agrees_with_scipy():
    rng = np.random.default_rng(3)
    a = rng.random(60)
    b = a + rng.normal(0.04, 0.2, 60)
    p, samples, exact = randomization_test(a, b, samples=40000, seed=1)
    assert not exact and samples == 40000
    assert p == pytest.approx(scipy_sign_flip(a, b, 40000), abs=0.015)
    assert p == randomization_test(a, b, samples=40000, seed=1)[0]  # seeded
    assert p >= 1 / 40001  # never 0


def test_bootstrap_agrees_with_normal_theory_and_scipy_interval():
    rng = np.random.default_rng(4)
    a = rng.random(400)
    b = a + rng.normal(0.02, 0.25, 400)
    p, (low, high) = bootstrap_test(a, b, samples=40000, seed=0)
    d = b - a
    z = d.mean() / (d.std() / math.sqrt(d.size))
    assert p == pytest.approx(2 * stats.norm.sf(abs(z)), abs=0.015)
    ref = stats.bootstrap((d,), np.mean, method="percentile", n_resamples=40000, random_state=0).confidence_interval
    assert low == pytest.approx(ref.low, abs=2e-3) and high == pytest.approx(ref.high, abs=2e-3)
    assert p == bootstrap_test(a, b, samples=40000, seed=0)[0]


@pytest.mark.parametrize("test", ["randomization", "bootstrap"])
def test_identical_runs_give_p_one(test):
    values = {f"q{i}": v for i, v in enumerate(np.random.default_rng(0).random(500))}
    t = paired_test(values, dict(values), test=test, samples=2000)
    assert t.p_value == 1.0 and t.delta == 0.0 and t.n == 500


def test_paired_test_uses_the_intersection_and_counts_the_rest():
    a = {"q1": 1.0, "q2": 0.5, "q3": 0.0, "q4": None, "q5": 1.0}
    b = {"q2": 1.0, "q3": 1.0, "q4": 1.0, "q5": 1.0, "q6": 0.0}
    t = paired_test(a, b, samples=100)
    assert (t.n, t.only_a, t.only_b) == (3, 1, 2)  # q2, q3, q5; q1 only in a; q4 (None in a) and q6 only in b
    assert t.mean_a == pytest.approx(0.5) and t.mean_b == pytest.approx(1.0) and t.delta == pytest.approx(0.5)
    assert t.exact and t.p_value == pytest.approx(0.5)  # two non-zero diffs (0.5, 1): 2 of 4 patterns reach 1.5
    restricted = paired_test(a, b, samples=100, qids=["q2", "q5"])
    assert restricted.n == 2 and restricted.only_a == 0


def test_no_values_gives_no_test_not_an_error():
    t = paired_test({"q1": None}, {}, test="bootstrap")
    assert t.n == 0 and t.p_value is None and t.delta is None
    with pytest.raises(ValueError, match="unknown test"):
        paired_test({}, {}, test="wilcoxon")


def test_large_query_sets_stay_vectorised_and_chunked():
    rng = np.random.default_rng(5)
    a = rng.random(20000)
    b = a + 0.01
    p, _, _ = randomization_test(a, b, samples=1000)
    assert p == pytest.approx(1 / 1001)


# ---------------------------------------------------------------- real results.json files, written by evaluate

TYPES = {f"q{i:02d}": ("and", "or", "not")[i % 3] for i in range(60)}
K = 10


def write_run(folder: Path, mrr: dict, negr: dict, *, data: str = "set", types: dict | None = None,
              passages: int = 6, model: dict | None = None, k: int = K) -> Path:
    """A results.json written by the real report.results_dict from an EvalResult."""
    types = types or TYPES
    per_query = {f"MRR@{k}": dict(mrr), f"NegRecall@{k}": {q: v for q, v in negr.items() if v is not None},
                 f"Recall@{k}": {q: float(v > 0) for q, v in mrr.items()}, f"nDCG@{k}": dict(mrr)}
    result = EvalResult(metrics.aggregate(per_query, types), per_query, {}, {"k": k}, {}, dict(types))
    payload = results_dict(result, model=model or {"spec": folder.name, "fingerprint": folder.name},
                           data={"name": data, "source": "test", "questions": len(types), "passages": passages},
                           k=k)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(payload))
    return folder / "results.json"


def base_values(seed: int = 0):
    rng = np.random.default_rng(seed)
    mrr = {q: float(1 / rng.integers(1, 6)) for q in TYPES}
    negr = {q: 1.0 for q, t in TYPES.items() if t == "not"} | {q: float(rng.integers(0, 2)) / 2
                                                               for q, t in TYPES.items() if t != "not"}
    return mrr, negr


def better_on_not(mrr, negr):
    """The same run, but every NOT question's explicit negative has left the top 10."""
    return dict(mrr), {q: (0.0 if TYPES[q] == "not" else v) for q, v in negr.items()}


def cfg_for(data: str = "sample", *more: str):
    return compose([f"data={data}", *more])


def compare(inputs, cfg, out, **kw):
    buf = io.StringIO()
    payload = run_compare([str(i) for i in inputs], cfg, str(out), console=Console(file=buf, width=200), **kw)
    return payload, buf.getvalue()


def table_rows(text: str) -> dict[str, list[list[str]]]:
    """`{run: [values, Δ, p]}` from the printed table (sub-rows start with Δ / p / ±)."""
    rows: dict[str, list[list[str]]] = {}
    current = None
    for line in text.splitlines():
        cells = line.split()
        if not cells or cells[0] in ("Run", "MRR", "Δ:") or line.startswith(("note", "written")):
            continue
        if cells[0] in ("Δ", "p", "±") and current:
            rows[current].append(cells[1:] if cells[0] != "±" else cells[2:])
        elif len(cells) >= 9 and all(re.fullmatch(r"[-+]?\d+\.\d\d|—", c) for c in cells[-8:]):
            current = " ".join(cells[:-8])
            rows[current] = [cells[-8:]]
    return rows


ORDER = [f"{m}@{K}/{g}" for m in ("MRR", "NegRecall") for g in ("ALL", "AND", "OR", "NOT")]


# ---------------------------------------------------------------- compare


def test_table_json_markdown_and_plot(tmp_path):
    mrr, negr = base_values()
    base = write_run(tmp_path / "base", mrr, negr)
    not_run = write_run(tmp_path / "not", *better_on_not(mrr, negr))
    rng = np.random.default_rng(9)
    noisy = write_run(tmp_path / "noisy", {q: float(1 / rng.integers(1, 6)) for q in TYPES}, negr)
    payload, text = compare([base.parent, not_run, noisy.parent], cfg_for(), tmp_path / "out")

    # the table: every value is results.json's headline, Δ the difference, p the paired test's
    rows = table_rows(text)
    assert list(rows) == ["base", "not", "noisy"], text
    heads = {name: json.loads(p.read_text())["headline"] for name, p in
             (("base", base), ("not", not_run), ("noisy", noisy))}
    for name, head in heads.items():
        assert rows[name][0] == [f"{head[key]:.2f}" for key in ORDER], name
        if name != "base":
            assert rows[name][1] == [f"{head[key] - heads['base'][key]:+.2f}" for key in ORDER], name
            cells = payload["cells"][name]
            ps = [cells[m][g]["p"] for m in (f"MRR@{K}", f"NegRecall@{K}") for g in ("ALL", "AND", "OR", "NOT")]
            assert [c.rstrip("*") for c in rows[name][2]] == [fmt_p(p) for p in ps]
    assert len(rows["base"]) == 1  # the baseline has no Δ / p rows

    # NOT's negatives all gone: a large, significant drop; MRR and the other types unchanged (p = 1)
    cell = payload["cells"]["not"][f"NegRecall@{K}"]["NOT"]
    assert cell["delta"] == pytest.approx(-100.0) and cell["p"] < 0.001 and cell["significant"] and cell["better"]
    assert rows["not"][2][7] == "<0.001*"
    for g in ("ALL", "AND", "OR", "NOT"):
        assert payload["cells"]["not"][f"MRR@{K}"][g]["p"] == 1.0
        assert payload["cells"]["not"][f"MRR@{K}"][g]["delta"] == 0.0
    assert payload["cells"]["not"][f"NegRecall@{K}"]["AND"]["p"] == 1.0
    assert payload["cells"]["noisy"][f"NegRecall@{K}"]["ALL"]["p"] == 1.0  # same NegRecall values

    # compare.json: what was printed, plus counts and settings
    saved = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert saved["baseline"] == "base" and saved["test"] == "randomization" and saved["samples"] == 10000
    assert saved["group_sizes"] == {"ALL": 60, "AND": 20, "OR": 20, "NOT": 20}
    assert saved["cells"]["not"][f"NegRecall@{K}"]["NOT"]["n_paired"] == 20
    assert [r["name"] for r in saved["runs"]] == ["base", "not", "noisy"]
    assert saved["cells"] == json.loads(json.dumps(payload["cells"]))

    # compare.md: a pasteable table with the same figures
    md = (tmp_path / "out" / "compare.md").read_text()
    lines = md.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| Run"))
    assert lines[header].count("|") == 10 and lines[header + 1].startswith("| --- |")
    not_line = next(line for line in lines if line.startswith("| not |"))
    negr_not = heads["not"][f"NegRecall@{K}/NOT"]
    assert f"| {negr_not:.2f} (-100.00, p<0.001)† |" in not_line
    assert f"| {heads['base'][f'MRR@{K}/ALL']:.2f} |" in next(line for line in lines if line.startswith("| base |"))
    assert "| *n* | 60 | 20 | 20 | 20 | 60 | 20 | 20 | 20 |" in md

    # compare.png: a real PNG of a sane size
    from PIL import Image

    png = tmp_path / "out" / "compare.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    with Image.open(png) as im:
        assert 800 <= im.size[0] <= 4000 and 400 <= im.size[1] <= 3000


def test_baseline_by_name_or_path_and_unknown_baseline(tmp_path):
    mrr, negr = base_values()
    a = write_run(tmp_path / "a", mrr, negr)
    b = write_run(tmp_path / "b", *better_on_not(mrr, negr))
    payload, _ = compare([a, b], cfg_for("sample", "compare.baseline=b"), tmp_path / "o1")
    assert payload["baseline"] == "b" and list(payload["cells"]) == ["b", "a"]
    assert payload["cells"]["a"][f"NegRecall@{K}"]["NOT"]["delta"] == pytest.approx(100.0)
    assert not payload["cells"]["a"][f"NegRecall@{K}"]["NOT"]["better"]
    payload, _ = compare([a, b], cfg_for("sample", f"compare.baseline={b.parent}"), tmp_path / "o2")
    assert payload["baseline"] == "b"
    with pytest.raises(CompareError, match="baseline 'c' is none of the runs: a, b"):
        compare([a, b], cfg_for("sample", "compare.baseline=c"), tmp_path / "o3")
    assert issubclass(CompareError, ConfigError)  # the CLI reports it as a plain message


def test_bootstrap_test_reports_an_interval(tmp_path):
    mrr, negr = base_values()
    a = write_run(tmp_path / "a", mrr, negr)
    b = write_run(tmp_path / "b", *better_on_not(mrr, negr))
    payload, text = compare([a, b], cfg_for("sample", "compare.test=bootstrap", "compare.samples=2000"),
                            tmp_path / "o")
    cell = payload["cells"]["b"][f"NegRecall@{K}"]["NOT"]
    assert cell["p"] == pytest.approx(1 / 2001) and cell["ci"] == [pytest.approx(-100.0)] * 2
    assert "bootstrap" in text and "2,000 samples" in text


def test_runs_on_several_data_sets_are_compared_per_data_set(tmp_path):
    mrr, negr = base_values()
    a = write_run(tmp_path / "a", mrr, negr, data="boolquestions-msmarco")
    b = write_run(tmp_path / "b", mrr, negr, data="boolquestions-nq")
    with pytest.raises(CompareError, match=r"different data \(a: boolquestions-msmarco; b: boolquestions-nq\)"):
        check_same_data(load_runs([str(a), str(b)], cfg_for()))  # one table never mixes data sets
    a2 = write_run(tmp_path / "a2", *better_on_not(mrr, negr), data="boolquestions-msmarco")
    b2 = write_run(tmp_path / "b2", *better_on_not(mrr, negr), data="boolquestions-nq")
    out = tmp_path / "multi"
    index = run_compare([str(a), str(b), str(a2), str(b2)], cfg_for(), out, console=Console(width=200, file=io.StringIO()))
    assert set(index["datasets"]) == {"boolquestions-msmarco", "boolquestions-nq"}
    for name, payload in index["datasets"].items():
        assert [r["name"] for r in payload["runs"]] == (["a", "a2"] if name.endswith("msmarco") else ["b", "b2"])
        assert (out / name / "compare.png").is_file()
    md = (out / "compare.md").read_text()
    assert "### boolquestions-msmarco" in md and "### boolquestions-nq" in md


def test_refuses_different_data(tmp_path):
    mrr, negr = base_values()
    a = write_run(tmp_path / "a", mrr, negr, data="boolquestions-msmarco")
    other = {f"x{i}": t for i, t in enumerate(TYPES.values())}  # same name, other questions
    c = write_run(tmp_path / "c", {f"x{i}": v for i, v in enumerate(mrr.values())}, {}, data="boolquestions-msmarco",
                  types=other)
    with pytest.raises(CompareError, match="different question sets"):
        compare([a, c], cfg_for(), tmp_path / "o")
    d = write_run(tmp_path / "d", mrr, negr, data="boolquestions-msmarco", passages=1000)
    with pytest.raises(CompareError, match="corpora of different sizes"):
        compare([a, d], cfg_for(), tmp_path / "o")
    flipped = dict(TYPES, q00="or")
    e = write_run(tmp_path / "e", mrr, negr, data="boolquestions-msmarco", types=flipped)
    with pytest.raises(CompareError, match="question 'q00' is 'and' in a but 'or' in e"):
        compare([a, e], cfg_for(), tmp_path / "o")
    f = write_run(tmp_path / "f", mrr, negr, data="boolquestions-msmarco", k=20)
    with pytest.raises(CompareError, match="different eval.k"):
        compare([a, f], cfg_for(), tmp_path / "o")
    assert not (tmp_path / "o").exists()  # refused before writing anything


def test_a_few_missing_questions_compare_on_the_common_ones(tmp_path):
    mrr, negr = base_values()
    a = write_run(tmp_path / "a", mrr, negr)
    keep = {q: t for q, t in TYPES.items() if q not in ("q00", "q01", "q02")}
    b = write_run(tmp_path / "b", {q: mrr[q] for q in keep}, {q: v for q, v in negr.items() if q in keep},
                  types=keep)
    payload, text = compare([a, b], cfg_for(), tmp_path / "o")
    assert "compared on the 57 questions all runs have (a: 60; b: 57)" in text
    common = [q for q in keep]
    expected = 100 * np.mean([mrr[q] for q in common])
    assert payload["cells"]["a"][f"MRR@{K}"]["ALL"]["value"] == pytest.approx(expected)
    assert payload["cells"]["b"][f"MRR@{K}"]["ALL"]["delta"] == pytest.approx(0.0)
    assert payload["group_sizes"]["ALL"] == 57


def test_groups_without_negatives_and_arbitrary_groups(tmp_path):
    """BIRCO-like tasks: no explicit negatives, so NegRecall has no values and is left out."""
    types = {f"t{i}": ("doris-mae", "arguana", "clinical-trial")[i % 3] for i in range(30)}
    rng = np.random.default_rng(2)
    a = write_run(tmp_path / "a", {q: float(1 / rng.integers(1, 4)) for q in types}, {}, types=types, data="birco")
    b = write_run(tmp_path / "b", {q: float(1 / rng.integers(1, 4)) for q in types}, {}, types=types, data="birco")
    payload, text = compare([a, b], cfg_for(), tmp_path / "o")
    assert payload["groups"] == ["ALL", "ARGUANA", "CLINICAL-TRIAL", "DORIS-MAE"]
    assert payload["measures_without_values"] == [f"NegRecall@{K}"]
    assert payload["cells"]["b"][f"NegRecall@{K}"]["ALL"]["p"] is None
    assert payload["cells"]["b"][f"MRR@{K}"]["ARGUANA"]["n_paired"] == 10
    assert "NegR ↓" not in text and "no values for NegRecall@10" in text
    md = (tmp_path / "o" / "compare.md").read_text()
    assert "NegRecall" not in md.split("\n\n")[1] and "MRR@10 DORIS-MAE ↑" in md
    assert (tmp_path / "o" / "compare.png").stat().st_size > 10_000


def test_seeds_become_one_row_with_mean_and_std(tmp_path):
    mrr, negr = base_values()
    base = write_run(tmp_path / "base", mrr, negr)
    seeds = []
    for s in (1, 2, 3):
        rng = np.random.default_rng(s)
        m = {q: float(1 / rng.integers(1, 4)) for q in TYPES}
        n = {q: (float(rng.integers(0, 2)) if TYPES[q] == "not" else v) for q, v in negr.items()}
        seeds.append((write_run(tmp_path / f"not-s{s}", m, n), m, n))
    inputs = [base] + [p for p, _, _ in seeds]
    payload, text = compare(inputs, cfg_for(), tmp_path / "o", seeds=True)
    assert list(payload["cells"]) == ["base", "not (3 seeds)"]
    cell = payload["cells"]["not (3 seeds)"][f"MRR@{K}"]["NOT"]
    per_seed = [100 * np.mean([m[q] for q in TYPES if TYPES[q] == "not"]) for _, m, _ in seeds]
    assert cell["value"] == pytest.approx(np.mean(per_seed)) and cell["std"] == pytest.approx(np.std(per_seed, ddof=1))
    means = {q: np.mean([m[q] for _, m, _ in seeds]) for q in TYPES}  # p on per-query means over seeds
    ref = paired_test({q: mrr[q] for q in TYPES if TYPES[q] == "not"}, means, samples=10000, seed=42,
                      qids=[q for q in TYPES if TYPES[q] == "not"])
    assert cell["p"] == pytest.approx(ref.p_value) and cell["delta"] == pytest.approx(100 * ref.delta)
    assert f"{cell['value']:.2f}±{cell['std']:.2f}" in (tmp_path / "o" / "compare.md").read_text()
    assert "mean ± std over seeds 1, 2, 3 (not-s1, not-s2, not-s3)" in text
    assert f"±{cell['std']:.2f}" in text
    # without the option every seed is a row of its own, and the baseline may name a seed group
    payload, _ = compare(inputs, cfg_for(), tmp_path / "o2")
    assert list(payload["cells"]) == ["base", "not-s1", "not-s2", "not-s3"]
    payload, _ = compare(inputs, cfg_for("sample", "compare.baseline=not-s2"), tmp_path / "o3", seeds=True)
    assert payload["baseline"] == "not (3 seeds)"


def test_embedded_base_of_a_demo_run_becomes_the_first_row(tmp_path):
    mrr, negr = base_values()
    run_a = write_run(tmp_path / "tiny-a", *better_on_not(mrr, negr), model={"spec": "x", "fingerprint": "A"})
    run_b = write_run(tmp_path / "tiny-b", *better_on_not(mrr, negr), model={"spec": "y", "fingerprint": "B"})
    base = json.loads(write_run(tmp_path / "scratch", mrr, negr,
                                model={"spec": "offline-default", "fingerprint": "BASE"}).read_text())
    for run in (run_a, run_b):  # as `boolcl demo` writes it: the checkpoint's results + "base"
        payload = json.loads(run.read_text())
        payload["base"] = base
        run.write_text(json.dumps(payload))
    payload, _ = compare([run_a.parent, run_b.parent], cfg_for(), tmp_path / "o")
    assert list(payload["cells"]) == ["offline-default", "tiny-a", "tiny-b"]  # once, before its run
    assert payload["baseline"] == "offline-default"
    assert payload["cells"]["tiny-a"][f"NegRecall@{K}"]["NOT"]["delta"] == pytest.approx(-100.0)
    payload, _ = compare([run_a.parent], cfg_for(), tmp_path / "o2", embedded_base=False)
    assert list(payload["cells"]) == ["tiny-a"]


# ---------------------------------------------------------------- with a real (tiny) model


def test_evaluates_what_is_missing_then_reuses_it(tiny_model_dir, small_set, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = cfg_for(str(small_set))
    evaluated = tmp_path / "ckpt-evaluated"
    missing = tmp_path / "ckpt-missing"
    shutil.copytree(tiny_model_dir, evaluated)
    shutil.copytree(tiny_model_dir, missing)
    _, written, out_dir = run_evaluate(str(evaluated), cfg, None)
    assert out_dir == evaluated / "eval" / "set"

    payload, text = compare([evaluated, missing], cfg, tmp_path / "o")
    assert "evaluating" in text and str(missing) in text
    assert (missing / "eval" / "set" / "results.json").is_file()
    assert [r["origin"] for r in payload["runs"]] == ["folder", "evaluated"]
    # the same weights on the same data: identical per-query values, Δ = 0 and p = 1 everywhere
    for measure in payload["measures"]:
        for g in payload["groups"]:
            cell = payload["cells"]["ckpt-missing"][measure][g]
            assert cell["delta"] == 0.0 and cell["p"] == 1.0, (measure, g)
    assert payload["cells"]["ckpt-evaluated"][f"MRR@{K}"]["ALL"]["value"] == pytest.approx(
        written["headline"][f"MRR@{K}/ALL"])
    assert payload["group_sizes"] == {"ALL": 3, "AND": 1, "OR": 1, "NOT": 1}

    # a second compare finds both results and evaluates nothing; default out is compare/<time>/
    stamp = (missing / "eval" / "set" / "results.json").stat().st_mtime_ns
    payload, text = run_and_capture([str(evaluated / "eval" / "set" / "results.json"), str(missing)], cfg)
    assert "evaluating" not in text
    assert (missing / "eval" / "set" / "results.json").stat().st_mtime_ns == stamp
    out = Path(payload["files"]["json"]).parent
    assert out.parent == Path("compare") and (tmp_path / out / "compare.png").is_file()
    assert [r["name"] for r in payload["runs"]] == ["ckpt-evaluated", "ckpt-missing"]


def run_and_capture(inputs, cfg):
    buf = io.StringIO()
    payload = run_compare(inputs, cfg, console=Console(file=buf, width=200))
    return payload, buf.getvalue()


def test_a_folder_without_results_that_is_no_model_is_a_clear_error(small_set, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    mrr, negr = base_values()
    a = write_run(tmp_path / "a", mrr, negr)
    with pytest.raises(CompareError, match=r"not-a-run: no results.json or eval/set/results.json in it, "
                                           r"and it cannot be evaluated as a model"):
        compare([a, empty], cfg_for(str(small_set)), tmp_path / "o")
    with pytest.raises(CompareError, match="nope.json: no such file"):
        compare([a, tmp_path / "nope.json"], cfg_for(), tmp_path / "o")


def test_seeds_recorded_in_run_config_group_timestamped_runs(tmp_path):
    mrr, negr = base_values()
    base = write_run(tmp_path / "base", mrr, negr)
    runs = []
    for day, seed in (("01", 1), ("02", 2)):
        folder = tmp_path / f"not-202501{day}-120000"
        write_run(folder, *better_on_not(mrr, negr))
        (folder / "config.yaml").write_text(f"name: not\nseed: {seed}\n")  # as train.py writes it
        runs.append(folder)
    payload, text = compare([base, *runs], cfg_for(), tmp_path / "o", seeds=True)
    assert list(payload["cells"]) == ["base", "not (2 seeds)"]
    assert [m["seed"] for m in payload["runs"][1]["seeds"]] == [1, 2]
    assert payload["cells"]["not (2 seeds)"][f"NegRecall@{K}"]["NOT"]["std"] == 0.0
    twin = tmp_path / "not-20250103-120000"  # seed 1 again: something else differs, keep the rows apart
    write_run(twin, mrr, negr)
    (twin / "config.yaml").write_text("name: not\nseed: 1\n")
    payload, text = compare([base, *runs, twin], cfg_for(), tmp_path / "o2", seeds=True)
    assert len(payload["cells"]) == 4 and "not: not averaged, runs share a seed" in text
