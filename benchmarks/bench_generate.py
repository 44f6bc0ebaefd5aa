"""Benchmark `boolcl generate` against a local OpenAI-compatible server with added latency.

    python benchmarks/bench_generate.py                 # 2000 NOT examples, 300 ms per call, concurrency 32

Starts tests/llm_server.py in its own process (so it does not share the client's
GIL), writes a synthetic corpus (the bundled sample is too small for 2000 distinct
NOT questions), runs the generator once with an empty cache and prints calls/s
against the ideal concurrency / latency (target: at least 80%), then reruns it in a
fresh process and prints the cached rerun's wall time (target: under 10 s).
Mining is off by default: it is encoder-bound, not LLM-bound (`--mine` turns it on).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SYLLABLES = ["ka", "lor", "vem", "tis", "dra", "quo", "mel", "zan", "ther", "pul", "gri", "sov", "nak", "bel",
             "cor", "fyn", "osk", "rha", "ult", "wen"]
KINDS = ["mountain", "river", "festival", "instrument", "grain", "mineral", "bird", "bridge", "dance", "textile"]
TRAITS = ["copper roofs", "night markets", "salt caves", "glass towers", "amber resin", "blue lichen", "iron bells",
          "reed boats", "cedar groves", "silver foxes", "hot springs", "basalt columns", "tea terraces",
          "marble quarries", "wind mills", "cave paintings", "coral reefs", "saffron fields", "jade carvings",
          "stone circles"]


def name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()


def synthetic_corpus(path: Path, groups: int, members: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    rows = []
    for g in range(groups):
        kind = KINDS[g % len(KINDS)]
        region = name(rng)
        for m in range(members):
            title = f"{name(rng)} {kind}"
            a, b = rng.sample(TRAITS, 2)
            doc = (f"The {title} is a well known {kind} of the {region} region. It is famous for its {a} and "
                   f"for the {b} that visitors travel to see. Local records describe the {title} in detail, "
                   f"and it appears in many stories told about {region}.")
            rows.append({"docid": f"g{g:04d}/m{m}", "title": title, "doc": doc})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


RUN = """
import json, sys, time
t = time.perf_counter()
from boolcl.config import compose
from boolcl.generate.pipeline import run_generate
from boolcl.generate.report import report_path
out = run_generate(compose(sys.argv[1:]), show_progress={progress})
print("RESULT " + json.dumps({{"wall": time.perf_counter() - t, "report": str(report_path(out))}}))
"""


def run_once(overrides: list[str], progress: bool) -> tuple[float, dict]:
    proc = subprocess.run([sys.executable, "-c", RUN.format(progress=progress), *overrides], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "BENCH_KEY": "sk-bench"})
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"generator failed (exit {proc.returncode})")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    res = json.loads(line[len("RESULT "):])
    return res["wall"], json.loads(Path(res["report"]).read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=2000)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--groups", type=int, default=400)
    ap.add_argument("--mine", action="store_true", help="also mine hard negatives (encodes the corpus)")
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args()

    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "llm_server.py"), "--latency", str(args.latency)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ready = server.stdout.readline().strip()
        if not ready.startswith("READY "):
            raise SystemExit(f"server did not start: {ready!r}")
        base_url = ready.split(" ", 1)[1]
        with tempfile.TemporaryDirectory(prefix="bench-generate-") as tmp:
            tmp = Path(tmp)
            synthetic_corpus(tmp / "corpus.jsonl", args.groups, 6)
            overrides = ["recipe=not", f"generate.corpus={tmp / 'corpus.jsonl'}", "generate.grouping=prefix",
                         f"generate.num_examples={args.examples}", "generate.operators=[not]",
                         f"generate.hard_negatives={4 if args.mine else 0}", "model=offline-default",
                         f"generate.cache_dir={tmp / 'cache'}", f"out={tmp / 'out' / 'bench.jsonl'}",
                         "llm.backend=openai", f"llm.base_url={base_url}", "llm.api_key_env=BENCH_KEY",
                         f"llm.concurrency={args.concurrency}", "llm.timeout=30"]
            print(f"server {base_url}, latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}, "
                  f"{args.examples} NOT examples from {args.groups * 6} synthetic passages")
            wall1, rep1 = run_once(overrides, args.progress)
            c = rep1["calls"]
            llm_s = rep1["elapsed_s"]["llm"]
            rate = c["requests"] / llm_s
            ideal = args.concurrency / args.latency
            print(f"first run: {rep1['final_examples']} examples, {c['requests']} requests "
                  f"({c['cache_hits']} cache hits, {c['shared_in_flight']} shared in flight) in {llm_s:.1f} s of "
                  f"LLM phase; whole run {wall1:.1f} s")
            print(f"  throughput {rate:.1f} calls/s vs ideal {ideal:.1f} calls/s = {rate / ideal:.0%} "
                  f"(target >= 80%)")
            wall2, rep2 = run_once(overrides, False)
            print(f"cached rerun: {wall2:.2f} s in a fresh process (imports included), "
                  f"{rep2['calls']['requests']} requests, {rep2['calls']['cache_hits']} cache hits "
                  f"(target < 10 s, 0 requests)")
            ok = rate / ideal >= 0.8 and wall2 < 10 and rep2["calls"]["requests"] == 0
            print("PASS" if ok else "MISS")
            return 0 if ok else 1
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
