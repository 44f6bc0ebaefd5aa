import json
import subprocess
import sys

import ir_measures
import pytest

from boolcl.cli import main

SUBCOMMANDS = ["generate", "train", "evaluate", "compare", "decompose", "demo", "explain", "config"]


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help(sub, capsys):
    with pytest.raises(SystemExit) as e:
        main([sub, "--help"])
    assert e.value.code == 0
    assert "key=value" in capsys.readouterr().out


def test_console_script_is_installed():
    res = subprocess.run([sys.executable, "-m", "boolcl.cli", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and all(s in res.stdout for s in SUBCOMMANDS)


def test_config_errors_are_reported_not_raised(capsys):
    assert main(["config", "recipe=nope"]) == 2
    assert "available recipes: all, and, not, not_plus, not_plus_tiny, or, tiny" in capsys.readouterr().err
    assert main(["config", "recipe=not", "train.bach_size=2"]) == 2
    assert "did you mean train.batch_size" in capsys.readouterr().err


def test_evaluate_writes_results_and_a_rescorable_run(tiny_model_dir, small_set, tmp_path, capsys):
    out = tmp_path / "eval"
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", f"out={out}", "eval.k=3"]) == 0
    printed = capsys.readouterr().out
    res = json.loads((out / "results.json").read_text())
    data = res["data"]
    assert {k: data[k] for k in ("name", "source", "questions", "passages")} == \
        {"name": "set", "source": str(small_set), "questions": 3, "passages": 6}
    assert len(data["corpus_fingerprint"]) == len(data["questions_fingerprint"]) == 32
    assert res["model"]["origin"] == "folder" and len(res["model"]["fingerprint"]) == 32
    mrr = res["headline"]["MRR@3/ALL"]
    assert f"{mrr:.2f}" in printed
    # anyone can re-score the TREC run file with other tools and get the same figure
    qrels = [ir_measures.Qrel(q, p, 1) for q, ps in {"q-not": ["d0", "d2"], "q-and": ["d4"], "q-or": ["d5", "d3"]}.items()
             for p in ps]
    run = list(ir_measures.read_trec_run(str(out / "run.trec")))
    assert ir_measures.calc_aggregate([ir_measures.RR @ 3], qrels, run)[ir_measures.RR @ 3] * 100 == pytest.approx(mrr, abs=1e-9)


def test_bad_data_file_is_reported_with_line(tiny_model_dir, small_set, capsys):
    with (small_set / "eval.jsonl").open("a") as fh:
        fh.write('{"qid": "broken", "question": \n')
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}"]) == 2
    assert f"{small_set / 'eval.jsonl'}:4: invalid JSON" in capsys.readouterr().err


def test_evaluate_scores_a_ranking_file_and_compare_reads_both(tiny_model_dir, small_set, tmp_path, capsys):
    model_out = tmp_path / "model"
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", f"out={model_out}"]) == 0
    # the model's own run file, scored without the model, gives the same figures
    run_out = tmp_path / "run"
    assert main(["evaluate", f"data={small_set}", f"run={model_out / 'run.trec'}", f"out={run_out}"]) == 0
    a = json.loads((model_out / "results.json").read_text())
    b = json.loads((run_out / "results.json").read_text())
    assert a["headline"] == b["headline"] and b["model"] == {"run": str(model_out / "run.trec")}
    capsys.readouterr()
    cmp_out = tmp_path / "cmp"
    assert main(["compare", str(model_out / "results.json"), str(run_out / "results.json"), f"data={small_set}",
                 f"out={cmp_out}"]) == 0
    assert (cmp_out / "compare.png").stat().st_size > 1000 and (cmp_out / "compare.md").is_file()
    payload = json.loads((cmp_out / "compare.json").read_text())
    assert payload["runs"][1]["name"] != payload["runs"][0]["name"]


def test_model_and_run_together_is_an_error(tiny_model_dir, small_set, tmp_path, capsys):
    run = tmp_path / "x.trec"
    run.write_text("q-not Q0 d0 1 1.0 x\n")
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", f"run={run}"]) == 2
    assert "not both" in capsys.readouterr().err


def test_compare_puts_birco_next_to_a_boolean_set(tiny_model_dir, small_set, tmp_path, capsys):
    from conftest import ROOT

    birco = ROOT.parent / "shared" / "birco"
    if not (birco / "relic" / "test_set.pickle").is_file():
        pytest.skip(f"the real BIRCO files are not at {birco} (they are not shipped with boolcl)")
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", f"out={tmp_path / 'bool'}"]) == 0
    assert main(["evaluate", f"data=birco-relic:{birco}", f"run={birco / 'ranks'}", f"out={tmp_path / 'relic'}"]) == 0
    relic = json.loads((tmp_path / "relic" / "results.json").read_text())
    assert round(relic["headline"]["nDCG@10/ALL"], 2) == 11.25  # the published E5 ranking, as the BIRCO README says
    capsys.readouterr()
    out = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "bool" / "results.json"), str(tmp_path / "relic" / "results.json"),
                 f"out={out}"]) == 0
    printed = capsys.readouterr().out
    assert "data: set" in printed and "data: birco-relic" in printed
    assert (out / "compare.md").read_text().count("### ") == 2


def test_max_corpus_keeps_labelled_passages_and_says_so(tiny_model_dir, small_set, tmp_path):
    with (small_set / "corpus.jsonl").open("a") as fh:
        for i in range(30):
            fh.write(json.dumps({"docid": f"extra{i}", "doc": f"unrelated filler passage number {i}"}) + "\n")
    out = tmp_path / "quick"
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", "eval.max_corpus=10", f"out={out}"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["data"]["passages"] == 10
    assert res["data"]["corpus_sample"] == {"max_corpus": 10, "seed": 42, "labelled_kept": 6, "others_sampled": 4, "of": 36}


def test_table2_script_stops_offline_and_says_why():
    from conftest import ROOT

    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "table2.py")], capture_output=True, text=True,
                         env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"}, timeout=60)
    assert res.returncode == 2 and "hub is not reachable (HF_HUB_OFFLINE is set)" in res.stderr
    assert "nothing was run" in res.stderr


def test_decompose_writes_both_variants_and_compare_reads_them(tiny_model_dir, small_set, tmp_path, capsys):
    out = tmp_path / "dec"
    assert main(["decompose", f"model={tiny_model_dir}", f"data={small_set}", f"out={out}"]) == 0
    for variant in ("hard", "soft"):
        res = json.loads((out / variant / "results.json").read_text())
        assert res["data"]["name"] == "set" and (out / variant / "run.trec").is_file()
    report = json.loads((out / "decomposition_report.json").read_text())
    assert report  # counts of parsed / fallen back questions
    assert main(["evaluate", str(tiny_model_dir), f"data={small_set}", f"out={tmp_path / 'base'}"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "base"), str(out / "hard"), str(out / "soft"), f"data={small_set}",
                 f"out={tmp_path / 'cmp'}"]) == 0
    names = [r["name"] for r in json.loads((tmp_path / "cmp" / "compare.json").read_text())["runs"]]
    assert len(names) == 3 and len(set(names)) == 3
