"""QUEST and BIRCO evaluation: score a model, or a ranking file, on each benchmark's protocol.

Specs (the `data=` value):

- `quest[:PATH]`, `quest-val[:PATH]`, `quest-train[:PATH]`: QUEST's test (default), val or
  train queries. PATH is a folder of release files (`test.jsonl` ... and `documents.jsonl`)
  or an examples `.jsonl` file; without PATH the queries come from the hub copy
  `cmalaviya/quest`, which is enough to score a ranking file (`run=`) but not to encode:
  the documents are only in QUEST's `documents.zip`. Full-corpus search (as in the QUEST
  paper); MRR@k, nDCG@k, Recall@k/@20/@100 and NegRecall@k per operator
  (simple / and / or / not / and+not).
- `birco-<task>[-dev][:PATH]` and `birco[:PATH]` (every task found): BIRCO's tasks arguana,
  clinical-trial, doris-mae, relic, wtb. PATH is the release root (`<task>/test_set.pickle`,
  as in the BIRCO repository's `datasets/`), a task folder, a `.pickle` file, or a local copy
  of an MTEB hub repository; without PATH the test split comes from the hub
  (`mteb/BIRCO-<Task>-Test`). Each query's candidate pool is ranked (no full-corpus search)
  and scored with graded nDCG@10 (+ MRR, Recall) per task; with several tasks the data
  description also holds the paper's average over tasks.
- `beir:PATH`, `beir-<split>:PATH` (split test by default, or dev / train): a BEIR folder,
  a local copy of an MTEB hub repository, or a hub id (`mteb/scifact`); see boolcl/data/beir.py.
  Full-corpus search; MRR@10, graded nDCG@10, Recall@100, and NegRecall@10 over the queries
  whose qrels hold a grade below 0.
- `nevir[:PATH]`: NevIR's test pairs, paired accuracy plus each side's; see
  boolcl/evaluate/nevir.py.

`run=FILE` scores a ranking instead of a model: a TREC run (`qid Q0 docid rank score
tag`; ties broken by docid, descending, as trec_eval does), a BIRCO rank pickle
`{qid: [cid, ...]}` best first (or a folder with one `<task>/*.pickle` per task, such as the
release's `ranks/`), or for QUEST its own predictions JSONL (`query`, `docs` best first).
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

from boolcl.data import beir as beir_data
from boolcl.data import birco as birco_data
from boolcl.data import quest as quest_data
from boolcl.data.loaders import subsample
from boolcl.data.schema import Context, EvalQuestion
from boolcl.data.sets import RetrievalSet
from boolcl.config import setting
from boolcl.data.spec import DataSpec, parse_data_spec
from boolcl.errors import DataError
from boolcl.evaluate.nevir import evaluate_nevir
from boolcl.retrieval.encode import encode
from boolcl.retrieval.models import load_eval_model
from boolcl.retrieval.prompts import prompts_for
from boolcl.retrieval.search import normalize
from boolcl.scoring import metrics
from boolcl.scoring.report import read_trec_run  # noqa: F401  (part of this module's interface)
from boolcl.scoring.runner import (
    RUN_DEPTH,
    EvalResult,
    data_info,
    evaluate_model,
    evaluate_spec,
)

QUEST_RECALL_KS = (20, 100)
BEIR_RECALL_K = 100  # BEIR's Recall@100, next to MRR@10 and nDCG@10
BIRCO_MAIN_K = 10  # the BIRCO paper's nDCG@10
SHOW_PROGRESS = True  # progress bars while encoding


def is_benchmark(spec: str) -> bool:
    return parse_data_spec(spec).is_benchmark


# ----------------------------------------------------------------------------- ranking files

def _is_pickle(path: Path) -> bool:
    if path.suffix in (".pickle", ".pkl"):
        return True
    with path.open("rb") as fh:
        return fh.read(1) == b"\x80"


def _from_ranking(cids: list[str]) -> list[tuple[str, float]]:
    """A best-first list as (docid, score) with strictly decreasing scores."""
    n = len(cids)
    return [(c, float(n - i)) for i, c in enumerate(cids)]


def _rank_pickle_in(folder: Path, task: str) -> Path:
    bases = [folder / task, folder / "ranks" / task] + ([folder] if folder.name == task else [])
    for base in bases:
        found = sorted(base.glob("*.pickle")) if base.is_dir() else []
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise DataError(base, None, f"holds several rank files ({', '.join(p.name for p in found)}); "
                            "give run= the one to score")
    raise DataError(folder, None, f"no rank file for {task} (looked for {folder / task}/*.pickle)")


# ----------------------------------------------------------------------------- model loading

def _load_model(model_spec: str, cfg):
    return load_eval_model(model_spec, cfg)


def _similarity(model) -> str:
    similarity = model.similarity_fn_name or "cosine"
    if similarity not in ("dot", "cosine"):
        raise ValueError(f"similarity {similarity!r} is not supported (use dot or cosine)")
    return similarity


# ----------------------------------------------------------------------------- BIRCO

def rank_pools(model, task: birco_data.BircoTask, *, batch_size: int = 64, query_prompt: str | None = None,
               passage_prompt: str | None = None, show_progress: bool = True) -> dict[str, list[tuple[str, float]]]:
    """Rank each query's candidate pool by the model's similarity (the BIRCO protocol)."""
    q_prompt, p_prompt = prompts_for(model, query_prompt, passage_prompt)
    cids = list(dict.fromkeys(c for pool in task.qrels.values() for c in pool))
    position = {c: i for i, c in enumerate(cids)}
    qids = list(task.qrels)
    p_emb = encode(model, [task.corpus[c] for c in cids], batch_size=batch_size, prompt=p_prompt,
                   desc=f"passages ({task.name})", show_progress=show_progress)
    q_emb = encode(model, [task.queries[q] for q in qids], batch_size=batch_size, prompt=q_prompt,
                   desc="queries", show_progress=show_progress)
    if _similarity(model) == "cosine":
        p_emb, q_emb = normalize(p_emb), normalize(q_emb)
    run = {}
    for i, qid in enumerate(qids):
        pool = task.pool(qid)
        scores = p_emb[[position[c] for c in pool]] @ q_emb[i]
        run[qid] = metrics.rank(zip(pool, (float(s) for s in scores)))
    return run


def _check_birco_run(task: birco_data.BircoTask, run: dict, where: str) -> None:
    for qid, ranked in run.items():
        if qid not in task.qrels:
            raise DataError(where, None, f"query {qid!r} is not in {task.name} ({task.source})", field="qid")
        pool = task.qrels[qid]
        for cid, _ in ranked:
            if cid not in pool:
                raise DataError(where, None, f"passage {cid!r} ranked for query {qid!r} is not in its candidate "
                                "pool (BIRCO ranks each query's pool only)", field="docid")


def _birco_file_runs(run_path: Path, tasks: list[birco_data.BircoTask], multi: bool) -> tuple[dict, dict]:
    """{task: {qid: [(cid, score)]}} from a rank pickle, a folder of them, or a TREC run."""
    runs: dict[str, dict] = {}
    files: dict[str, str] = {}
    if run_path.is_dir():
        fmt = "birco-rank-pickle"
        for t in tasks:
            p = _rank_pickle_in(run_path, t.task)
            runs[t.task] = {q: _from_ranking(c) for q, c in birco_data.load_rank_pickle(p).items()}
            files[t.task] = str(p.resolve())
    elif not run_path.is_file():
        raise DataError(run_path, None, "run: file not found")
    elif _is_pickle(run_path):
        fmt = "birco-rank-pickle"
        if multi:
            raise DataError(run_path, None, "one rank pickle holds one task; for several tasks give a folder "
                            "with <task>/*.pickle (like the release's ranks/) or a TREC run with <task>/<qid> ids")
        runs[tasks[0].task] = {q: _from_ranking(c) for q, c in birco_data.load_rank_pickle(run_path).items()}
        files[tasks[0].task] = str(run_path.resolve())
    else:
        fmt = "trec"
        trec = read_trec_run(run_path)
        by_name = {t.task: t for t in tasks}
        for qid, ranked in trec.items():
            task_name, slash, local = qid.partition("/")
            if multi or (slash and task_name in by_name):
                if not slash or task_name not in by_name:
                    raise DataError(run_path, None, f"query {qid!r}: with several tasks, query ids are "
                                    f"<task>/<qid> with a task of {', '.join(by_name)}", field="qid")
                runs.setdefault(task_name, {})[local] = ranked
            else:
                runs.setdefault(tasks[0].task, {})[qid] = ranked
        files = {t.task: str(run_path.resolve()) for t in tasks}
    for t in tasks:
        _check_birco_run(t, runs.setdefault(t.task, {}), files[t.task])
    return runs, {"path": str(run_path.resolve()), "format": fmt, "files": files}


def _evaluate_birco(bs: DataSpec, model_spec: str | None, cfg) -> tuple[EvalResult, dict]:
    k = int(setting(cfg, "eval.k", 10))
    if bs.task is not None:
        tasks = [birco_data.load_birco(bs.task, bs.path, bs.split)]
    elif bs.path is None:
        tasks = [birco_data.load_birco(t, None, bs.split) for t in birco_data.TASKS]
    else:
        names = birco_data.available_tasks(bs.path, bs.split)
        if not names:
            raise DataError(bs.path, None, f"no BIRCO {bs.split} sets here (looked for <task>/{bs.split}_set.pickle "
                            f"with a task of {', '.join(birco_data.TASKS)})")
        tasks = [birco_data.load_birco(t, bs.path, bs.split) for t in names]
    multi = bs.task is None

    run_path = setting(cfg, "run")
    timings: dict = {}
    settings: dict = {"k": k, "protocol": "rank each query's candidate pool (BIRCO); graded nDCG"}
    if run_path:
        runs, run_info = _birco_file_runs(Path(run_path), tasks, multi)
        settings["run"] = run_info
    else:
        if not model_spec:
            raise ValueError("evaluate_benchmark needs a model or run=FILE")
        model, info = _load_model(model_spec, cfg)
        q_prompt, p_prompt = prompts_for(model, setting(cfg, "eval.query_prompt"), setting(cfg, "eval.passage_prompt"))
        batch_size = int(setting(cfg, "eval.batch_size", 64))
        runs = {}
        t0 = time.perf_counter()
        for t in tasks:
            runs[t.task] = rank_pools(model, t, batch_size=batch_size, query_prompt=q_prompt,
                                      passage_prompt=p_prompt, show_progress=SHOW_PROGRESS)
        timings["rank_pools_s"] = time.perf_counter() - t0
        settings.update({"model": info, "batch_size": batch_size, "similarity": _similarity(model),
                         "query_prompt": q_prompt, "passage_prompt": p_prompt,
                         "max_seq_length": model.max_seq_length})

    def gid(task: str, qid: str) -> str:
        return f"{task}/{qid}" if multi else qid

    qrels, run, groups = {}, {}, {}
    missing: dict[str, int] = {}
    for t in tasks:
        for qid, rel in t.qrels.items():
            qrels[gid(t.task, qid)] = rel
            groups[gid(t.task, qid)] = t.task
        for qid, ranked in runs[t.task].items():
            run[gid(t.task, qid)] = ranked
        missing[t.task] = sum(1 for q in t.qrels if q not in runs[t.task])
        if missing[t.task]:
            warnings.warn(f"{t.name}: {missing[t.task]} of {len(t.qrels)} queries have no ranking and score 0",
                          stacklevel=3)
    ranked = {q: [d for d, _ in lst] for q, lst in run.items()}
    values = metrics.per_query(ranked, qrels, {}, k=k)
    if k != BIRCO_MAIN_K:
        values.update(metrics.per_query(ranked, qrels, {}, k=BIRCO_MAIN_K, measures=("MRR", "nDCG")))
    agg = metrics.aggregate(values, groups)
    settings.update({"questions": len(qrels), "passages": sum(len(t.corpus) for t in tasks)})

    data = {"name": bs.name, "source": "; ".join(t.source for t in tasks), "questions": len(qrels),
            "passages": sum(len(t.corpus) for t in tasks), "benchmark": "birco", "split": bs.split,
            "protocol": "each query's candidate pool (its qrel keys) is ranked; no full-corpus search",
            "tasks": {t.task: t.describe() for t in tasks},
            "negrecall": "not applicable: BIRCO has graded relevance, no explicit negatives",
            "queries_without_ranking": missing}
    if multi:
        data["task_average"] = {m: _mean([agg[m][t.task.upper()]["value"] for t in tasks]) for m in agg
                                if not m.startswith("NegRecall")}
    return EvalResult(agg, values, run, settings, timings, groups), data


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


# ----------------------------------------------------------------------------- QUEST

def quest_values(ranked: dict[str, list[str]], qrels: dict, negatives: dict, k: int) -> dict[str, dict[str, float]]:
    """MRR/NegRecall/Recall/nDCG @k, the same @10 when k differs, and Recall@20/@100."""
    values = metrics.per_query(ranked, qrels, negatives, k=k)
    if k != 10:
        values.update(metrics.per_query(ranked, qrels, negatives, k=10, measures=("MRR", "NegRecall", "nDCG")))
    for rk in QUEST_RECALL_KS:
        if rk != k:
            values.update(metrics.per_query(ranked, qrels, negatives, k=rk, measures=("Recall",)))
    return values


def _evaluate_quest(bs: DataSpec, model_spec: str | None, cfg) -> tuple[EvalResult, dict]:
    k = int(setting(cfg, "eval.k", 10))
    depth = max(k, RUN_DEPTH, *QUEST_RECALL_KS)
    run_path = setting(cfg, "run")
    qset = quest_data.load_quest(bs.path, bs.split, need_corpus=not run_path)
    timings: dict = {}
    if run_path:
        path = Path(run_path)
        if not path.is_file():
            raise DataError(path, None, "run: file not found")
        with path.open("rb") as fh:
            head = fh.read(4096).lstrip()
        if path.suffix in (".jsonl", ".json") or head.startswith(b"{"):
            fmt, run = "quest-predictions", quest_data.read_predictions(path, qset)
        else:
            fmt, run = "trec", read_trec_run(path)
            known = {ex.qid for ex in qset.examples}
            corpus_ids = set(qset.corpus.ids) if qset.corpus is not None else None
            for qid, lst in run.items():
                if qid not in known:
                    raise DataError(path, None, f"query {qid!r} is not in {qset.name} (QUEST query ids are the "
                                    "0-based positions of the queries in the examples file)", field="qid")
                if corpus_ids is not None:
                    bad = next((d for d, _ in lst if d not in corpus_ids), None)
                    if bad is not None:
                        raise DataError(path, None, f"document {bad!r} (query {qid!r}) is not in the documents "
                                        "file (ids are titles with spaces as '_')", field="docid")
        settings = {"k": k, "run": {"path": str(path.resolve()), "format": fmt}}
    else:
        if not model_spec:
            raise ValueError("evaluate_benchmark needs a model or run=FILE")
        qset = quest_data.subsample(qset, setting(cfg, "eval.max_corpus"), int(setting(cfg, "seed", 0)))
        model, info = _load_model(model_spec, cfg)
        negatives = qset.negatives
        questions = [EvalQuestion(ex.qid, ex.query, ex.operator,
                                  [Context(quest_data.doc_id(t)) for t in ex.docs],
                                  [Context(d) for d in negatives.get(ex.qid, [])]) for ex in qset.examples]
        rset = RetrievalSet(qset.name, questions, qset.corpus, qset.source)
        res = evaluate_model(model, rset, k=k, batch_size=int(setting(cfg, "eval.batch_size", 64)),
                             query_prompt=setting(cfg, "eval.query_prompt"),
                             passage_prompt=setting(cfg, "eval.passage_prompt"),
                             show_progress=SHOW_PROGRESS)
        run, timings = res.run, res.timings
        settings = dict(res.settings, model=info, protocol="full-corpus search")

    qrels, groups = qset.qrels(), qset.groups()
    missing = sum(1 for q in qrels if q not in run)
    if missing:
        warnings.warn(f"{qset.name}: {missing} of {len(qrels)} queries have no ranking and score 0", stacklevel=3)
    ranked = {q: [d for d, _ in lst] for q, lst in run.items()}
    values = quest_values(ranked, qrels, qset.negatives, k)
    agg = metrics.aggregate(values, groups)
    settings.setdefault("questions", len(qrels))
    data = {"name": qset.name, "source": qset.source, **qset.describe(), "queries_without_ranking": missing}
    result = EvalResult(agg, values, {q: lst[:depth] for q, lst in run.items()}, settings, timings, groups)
    return result, data


# ----------------------------------------------------------------------------- BEIR

def beir_values(ranked: dict[str, list[str]], qrels: dict, negatives: dict, k: int) -> dict[str, dict[str, float]]:
    """MRR/NegRecall/Recall/nDCG @k (graded nDCG), the same @10 when k differs, and Recall@100."""
    values = metrics.per_query(ranked, qrels, negatives, k=k)
    if k != 10:
        values.update(metrics.per_query(ranked, qrels, negatives, k=10, measures=("MRR", "NegRecall", "nDCG")))
    if k != BEIR_RECALL_K:
        values.update(metrics.per_query(ranked, qrels, negatives, k=BEIR_RECALL_K, measures=("Recall",)))
    return values


def _evaluate_beir(bs: DataSpec, model_spec: str | None, cfg) -> tuple[EvalResult, dict]:
    """Full-corpus search on a BEIR split, scored with its graded qrels.

    As BEIR's own evaluation does, a passage whose id equals the query's id is dropped from
    that query's ranking (sets such as ArguAna and Quora hold the query itself in the corpus).
    """
    k = int(setting(cfg, "eval.k", 10))
    depth = max(k, RUN_DEPTH, BEIR_RECALL_K)
    bset = beir_data.load_beir(bs.path, bs.split or "test", bs.name)
    rset, sampling, timings = bset.rset, None, {}
    run_path = setting(cfg, "run")
    if run_path:
        path = Path(run_path)
        run = read_trec_run(path)
        unknown = sorted(set(run) - set(bset.qrels))
        if unknown:
            raise DataError(path, None, f"query {unknown[0]!r} is not among the {len(bset.qrels)} judged queries "
                            f"of {bs.name} ({len(unknown)} such)", field="qid")
        settings = {"k": k, "run": {"path": str(path.resolve()), "format": "trec"}}
    else:
        if not model_spec:
            raise ValueError("evaluate_benchmark needs a model or run=FILE")
        max_corpus = setting(cfg, "eval.max_corpus")
        if max_corpus and max_corpus < len(rset.corpus):
            rset, sampling = subsample(rset, int(max_corpus), int(setting(cfg, "seed", 0)))
        res, info = evaluate_spec(model_spec, rset, cfg, show_progress=SHOW_PROGRESS)
        run, timings = res.run, res.timings
        settings = dict(res.settings, model=info, protocol="full-corpus search")
    run = {q: [(d, s) for d, s in lst if d != q] for q, lst in run.items()}
    missing = sum(1 for q in bset.qrels if q not in run)
    if missing:
        warnings.warn(f"{bs.name}: {missing} of {len(bset.qrels)} queries have no ranking and score 0", stacklevel=3)
    ranked = {q: [d for d, _ in lst] for q, lst in run.items()}
    values = beir_values(ranked, bset.qrels, bset.negatives, k)
    groups = {q.qid: q.question_type for q in rset.questions}
    settings.update({"ignore_identical_ids": True, "questions": len(bset.qrels), "passages": len(rset.corpus)})
    data = {**data_info(rset), **bset.describe(), "queries_without_ranking": missing,
            "negrecall": "over the queries whose qrels hold a grade below 0 (explicit negatives)"
                         if bset.counts["with_explicit_negatives"] else "not applicable: no grade below 0 in the qrels"}
    if sampling:
        data["corpus_sample"] = sampling
    result = EvalResult(metrics.aggregate(values, groups), values, {q: lst[:depth] for q, lst in run.items()},
                        settings, timings, groups)
    return result, data


# ----------------------------------------------------------------------------- entry point

def evaluate_benchmark(spec: str, model_spec: str | None, cfg) -> tuple[EvalResult, dict]:
    """Evaluate `model_spec`, or the ranking file `cfg.run` when set, on a QUEST/BIRCO/BEIR/NevIR spec.

    Returns the EvalResult (metrics per group: operator for QUEST, task for BIRCO; values
    are fractions) and a description of the data for results.json. With a model, the
    model's description (spec, origin, fingerprint, similarity) is in `settings["model"]`;
    with a ranking file, its path and format are in `settings["run"]`.
    """
    bs = parse_data_spec(spec)
    if not bs.is_benchmark:
        raise DataError(spec, None, "not a benchmark spec; use quest[-val|-train][:PATH], "
                        "birco-<task>[-dev][:PATH], birco[:PATH], beir[-<split>]:PATH or nevir[:PATH]")
    if bs.kind == "quest":
        return _evaluate_quest(bs, model_spec, cfg)
    if bs.kind == "beir":
        return _evaluate_beir(bs, model_spec, cfg)
    if bs.kind == "nevir":
        return evaluate_nevir(bs, model_spec, cfg, show_progress=SHOW_PROGRESS)
    return _evaluate_birco(bs, model_spec, cfg)
