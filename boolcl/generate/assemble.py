"""Kept outcomes -> training examples: labels, passage text inline, and where each came from.

The passage text travels with every example so `train.boolean=<file>` works on any
machine; the provenance records the draw, the atomic questions, the Boolean form, the
filter's verdicts and the LLM, so a dataset can be audited or regenerated.
"""
from __future__ import annotations

from pathlib import Path

from boolcl.data.schema import Context, TrainingExample
from boolcl.generate import prompts
from boolcl.generate.corpus import Passages
from boolcl.generate.offline import QUALITY_NOTE
from boolcl.generate.process import Outcome


def output_path(cfg) -> Path:
    """`out=` as given when it names a .jsonl file, else `<out or generated>/<name>.jsonl`."""
    if cfg.out is None:
        return Path("generated") / f"{cfg.name}.jsonl"
    out = Path(str(cfg.out))
    return out if out.suffix == ".jsonl" else out / f"{cfg.name}.jsonl"


def build_examples(outcomes: list[Outcome], mined: list[list[int]], labels: dict[str, tuple[set, set]],
                   passages: Passages, *, strategy: str, mode: str, llm_info: dict, seed: int,
                   offline: bool) -> list[TrainingExample]:
    """One example per outcome, with its (possibly merged) labels and its mined hard negatives."""
    def ctx(i: int) -> Context:
        return Context(passages.ids[i], text=passages.text(i))

    examples = []
    for o, hard in zip(outcomes, mined):
        d = o.draw
        pos, neg = labels[d.qid]
        prov = {"generator": "boolcl generate", "operator": d.op, "group": d.group, "grouping": strategy,
                "corpus": passages.source, "passages": [passages.ids[i] for i in d.candidates],
                "simple_questions": {passages.ids[i]: q for i, q in zip(d.candidates, o.simple)},
                "broad_question": o.broad, "target": [passages.ids[d.candidates[t]] for t in d.target],
                "expression": prompts.expression(d.op, o.broad, [o.simple[t] for t in d.target]),
                "filter": {"mode": mode, "pass_positives": o.pass_positives, "pass_strict": o.pass_strict},
                "llm": llm_info, "prompt_version": prompts.PROMPT_VERSION, "draw": d.index, "seed": seed,
                "offline": offline}
        if o.merged:
            prov["merged_draws"] = o.merged
        if offline:
            prov["quality"] = QUALITY_NOTE
        row = TrainingExample(qid=d.qid, question=o.question, question_type=d.op,
                              positive_ctxs=[ctx(i) for i in sorted(pos)], negative_ctxs=[ctx(i) for i in sorted(neg)],
                              hard_negative_ctxs=[ctx(i) for i in hard], provenance=prov)
        examples.append(TrainingExample.from_dict(row.to_dict()))  # validated like any reader would
    return examples
