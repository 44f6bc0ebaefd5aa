"""Targets for decomposition distillation: where the frozen starting model would put a NOT question
if it could subtract.

A bi-encoder embeds "X, but not Y" close to Y, because Y's words are in it. Embedding
arithmetic with the same frozen model does read the operator: the vector

    v = anchor · T(question) + T(X) - drop · T(Y)

ranks Y's passage far lower than T(question) does (the soft decomposed-query baseline,
`boolcl decompose`, is this rule applied to scores). `train.decomposition` teaches the
encoder to produce v's direction from the whole question in one pass. The target is dense
(a whole vector, not one ranking constraint) and is defined for any Y the teacher can
embed, which is why it carries over to topics never trained on, where ranking losses on a
few hundred NOT questions learn those topics' exclusions instead.

X and Y come from the offline decomposer's rules on the question's text, else from the
example's provenance when it records them (the sample's `disjunctive` and
`excluded_question`; `boolcl generate`'s `broad_question` and the simple question of its
`target`).

The target needs no passage, so more NOT questions than the pool holds can be taught:
`compose_questions` joins the pool's kept questions to its dropped parts with the rules'
markers, for the term's warm-up (train/terms/decomposition.py). The operator is then learnt
over many pairings and wordings instead of the few hundred the pool was written with.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from boolcl.data.schema import TrainingExample
from boolcl.logic.grammar import Not, Term
from boolcl.logic.rules import rule_decompose
from boolcl.words import COMPOSE_INFIX, COMPOSE_PREFIX


def partner_question(ex: TrainingExample) -> str | None:
    """The NOT question's plain form: `disjunctive` in the sample, `broad_question` from `boolcl generate`."""
    if ex.question_type != "not":
        return None
    prov = ex.provenance or {}
    text = prov.get("disjunctive") or prov.get("broad_question")
    return text if isinstance(text, str) and text.strip() else None


def rule_parts(question: str) -> tuple[str, str] | None:
    """(kept, dropped) where the offline rules read the question as "kept but not dropped", else None."""
    expr = rule_decompose(question)
    if isinstance(expr, Not) and isinstance(expr.pos, Term) and isinstance(expr.neg, Term):
        return expr.pos.text, expr.neg.text
    return None


def not_parts(ex: TrainingExample) -> tuple[str, str, str] | None:
    """(kept question, dropped part, source) of a NOT example, or None when neither source splits it.

    The offline decomposer's rules come first: their parts are the question's own words, so
    the target is a function of the text alone and what the encoder must learn is the
    operator, not a paraphrase. Provenance covers wordings the rules miss.
    """
    if ex.question_type != "not":
        return None
    split = rule_parts(ex.question)
    if split is not None:
        return (*split, "rules")
    prov = ex.provenance or {}
    keep, drop = partner_question(ex), prov.get("excluded_question")
    if drop is None and isinstance(prov.get("simple_questions"), dict) and len(prov.get("target") or []) == 1:
        drop = prov["simple_questions"].get(prov["target"][0])
    if keep and isinstance(drop, str) and drop.strip():
        return keep, drop, "provenance"
    return None


@dataclass
class Plan:
    """What the targets are made of, known before any encoding: the NOT items whose target
    splits, and per target row its question and (kept, dropped) parts; `rows` lists every text
    the start table must hold for them."""
    chosen: list
    questions: list[str]
    parts: list[tuple[str, str]]

    @classmethod
    def of(cls, items) -> "Plan":
        chosen = [it for it in items if it.not_parts is not None]
        return cls(chosen, [it.query for it in chosen], [it.not_parts[:2] for it in chosen])

    def rows(self, prompt: str | None = None) -> list[str]:
        return target_texts(self.questions, self.parts, prompt)


def target_texts(questions: Sequence[str], parts: Sequence[tuple[str, str]], prompt: str | None) -> list[str]:
    """The texts the targets are computed from, as the model reads them: questions, kept parts, dropped parts."""
    return [(prompt or "") + x for x in (*questions, *(k for k, _ in parts), *(d for _, d in parts))]


def teacher_targets(embed, questions: Sequence[str], parts: Sequence[tuple[str, str]], *, drop: float,
                    anchor: float, normalize: bool, prompt: str | None = None) -> torch.Tensor:
    """v = anchor · T(q) + T(keep) - drop · T(dropped), one row per question, in float32 on the CPU.

    `embed(texts)` gives the frozen starting model's embeddings (start_table.StartTable.embed),
    so the targets stay those of the start (also on resume). With cosine similarity
    (`normalize`) each T(·) is normalised first, as the scores the rule stands for are."""
    emb = embed(target_texts(questions, parts, prompt)).float()
    if normalize:
        emb = torch.nn.functional.normalize(emb, dim=-1)
    n = len(questions)
    q, keep, dropped = emb[:n], emb[n:2 * n], emb[2 * n:]
    return anchor * q + keep - drop * dropped


def attach_targets(embed, plan: Plan, items, *, drop: float, anchor: float, normalize: bool,
                   prompt: str | None = None) -> dict:
    """Give every NOT item that splits its target (`teacher_targets`). Returns how many split
    by the rules, by their provenance, and how many did not split."""
    counts = {"provenance": 0, "rules": 0, "unsplit": sum(it.question_type == "not" and it.not_parts is None
                                                          for it in items)}
    if not plan.questions:
        return counts
    targets = teacher_targets(embed, plan.questions, plan.parts, drop=drop, anchor=anchor,
                              normalize=normalize, prompt=prompt)
    for it, v in zip(plan.chosen, targets):
        it.target = v
        counts[it.not_parts[2]] += 1
    return counts


def _plain(text: str) -> str:
    return text.strip().rstrip("?.").strip()


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def compose_questions(items, n: int, *, same_group: float = 0.7, prefix: float = 0.2,
                      seed: int = 0) -> tuple[list[str], list[tuple[str, str]]]:
    """Up to `n` new NOT questions and their (kept, dropped) parts, from the NOT items' parts.

    Each joins one item's kept question to a dropped part, of an item over the same passages
    (`group`) with probability `same_group`, else of any item, with a marker from
    words.COMPOSE_INFIX ("X, other than Y?") or, with probability `prefix`, COMPOSE_PREFIX
    ("Other than Y, x?"). The parts kept are the rules' split of the composed text, so its
    target is computed as a pool question's is; a text the rules split anywhere but where it
    was joined is skipped.
    The same items and `seed` give the same questions, in the same order."""
    chosen = [it for it in items if it.not_parts is not None]
    keeps = sorted({(it.group or "", _plain(it.not_parts[0])) for it in chosen})
    drops = sorted({(it.group or "", _plain(it.not_parts[1])) for it in chosen})
    if not keeps or not drops:
        return [], []
    by_group: dict[str, list[str]] = {}
    for group, text in drops:
        by_group.setdefault(group, []).append(text)
    rng = random.Random(seed)
    questions, parts, seen = [], [], set()
    for _ in range(50 * n):
        if len(questions) >= n:
            break
        group, keep = rng.choice(keeps)
        near = by_group.get(group) if group else None
        dropped = rng.choice(near) if near and rng.random() < same_group else rng.choice(drops)[1]
        if rng.random() < prefix:
            marker = rng.choice(COMPOSE_PREFIX)
            text = f"{marker[:1].upper()}{marker[1:]} {_lower_first(dropped)}, {_lower_first(keep)}?"
        else:
            text = f"{keep}, {rng.choice(COMPOSE_INFIX)} {_lower_first(dropped)}?"
        split = None if text in seen else rule_parts(text)
        if split is None or (_plain(split[0]).lower(), _plain(split[1]).lower()) != (keep.lower(), dropped.lower()):
            continue  # the rules would split it elsewhere (a comma inside the dropped part, say)
        seen.add(text)
        questions.append(text)
        parts.append(split)
    return questions, parts
