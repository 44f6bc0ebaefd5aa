"""Teaching the scope-pooling head (../pooling.py) where a question's exclusion lies.

Labels come from the decomposer's rules (`negation_span`): in a NOT question, the marker
words ("other than", "that aren't") are MARKER and the excluded part is EXCLUDED. Every other
query and every passage is ORDINARY throughout, so the head learns to reweight questions
that exclude something and to leave everything else a plain mean. A NOT question that the
rules cannot split teaches nothing (its tokens are ignored) rather than something wrong.

`warm_up` fits the head alone before the first step, on the training questions and practice
sentences (`ScopeSentences`): wordings the training questions lack, with exact spans from their
templates.
"""
from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from boolcl.errors import ConfigError
from boolcl.logic.rules import negation_span
from boolcl.pooling import EXCLUDED, MARKER, ORDINARY

IGNORE = -100
Span = tuple[tuple[int, int], tuple[int, int]]  # (marker, excluded part), in characters
UNKNOWN = "unknown"  # a NOT question the rules cannot split: its row teaches nothing
FIT_VERSION = 1  # raise it when fit_head's arithmetic changes: the cached heads (scope_cache.py) key on it


def row_spans(texts: Sequence[str], is_not: Sequence[bool]) -> list[Span | None | str]:
    """The rules' span for each NOT question, None (all ordinary) for the other rows."""
    out: list[Span | None | str] = []
    for text, negated in zip(texts, is_not):
        span = negation_span(text) if negated else None
        out.append(UNKNOWN if negated and span is None else span)
    return out


def token_labels(spans: Sequence[Span | None | str], offsets: torch.Tensor, attention_mask: torch.Tensor,
                 prompt_length: int = 0) -> torch.Tensor:
    """(rows, tokens) class labels of tokenised rows; padding and UNKNOWN rows are IGNORE.

    offsets: the tokenizer's offset_mapping, in characters of prompt + text; spans are in
    characters of the text alone."""
    labels = torch.full(attention_mask.shape, IGNORE, dtype=torch.long)
    labels[attention_mask.bool()] = ORDINARY
    for i, span in enumerate(spans):
        if span is None:
            continue
        if span == UNKNOWN:
            labels[i] = IGNORE
            continue
        (m0, m1), (x0, x1) = ((a + prompt_length, b + prompt_length) for a, b in span)
        for j, (a, b) in enumerate(offsets[i].tolist()):
            if a == b or not attention_mask[i, j]:  # special tokens, padding
                continue
            if a >= x0 and b <= x1:
                labels[i, j] = EXCLUDED
            elif a < m1 and b > m0:
                labels[i, j] = MARKER
    return labels


_FIELD = re.compile(r"\{(keep|keep_lc|drop)\}")


def _words(literal: str) -> tuple[int, int]:
    """Where a template literal's words are, without the spaces, commas and '?' around them."""
    core = literal.strip(" ,?")
    start = literal.find(core) if core else 0
    return start, start + len(core)


def practice_sentence(template: str, keep: str, drop: str) -> tuple[str, Span]:
    """A template sentence and its exact span. The marker is the template's words just before
    {drop} ("other than"), or just after it when {drop} comes first ("{drop} aside, ...")."""
    values = {"keep": keep, "keep_lc": keep[:1].lower() + keep[1:], "drop": drop}
    text, at, before = "", 0, None
    for m in _FIELD.finditer(template):
        literal = template[at:m.start()]
        if m.group(1) == "drop":
            w0, w1 = _words(literal)
            before = (len(text) + w0, len(text) + w1)
            dropped = (len(text) + len(literal), len(text) + len(literal) + len(drop))
        text += literal + values[m.group(1)]
        at = m.end()
    text += template[at:]
    marker = before
    if marker[0] == marker[1]:
        after = text[dropped[1]:].split(",")[0]
        w0, w1 = _words(after)
        marker = (dropped[1] + w0, dropped[1] + w1)
    return text, (marker, dropped)


class ScopeSentences:
    """Label-free practice for the scope head's warm-up: template sentences joining a training
    question (kept) to the excluded part of another training NOT question, with exact spans.

    Their meaning does not matter, only where the exclusion lies; so a few topics' questions
    make many sentences in every wording the templates know. With `contrast` templates, half
    the sentences join the same parts with a word that does not exclude ("and also", "or") and
    are ordinary throughout (span None), so the head keys on the marker word itself. Row `i`
    always gets the same sentence, drawn from (seed, i) alone."""

    def __init__(self, items, templates: Sequence[str], seed: int, contrast: Sequence[str] = ()):
        self.templates, self.seed, self.contrast = list(templates), seed, list(contrast)
        self.keeps = sorted({it.query.strip().rstrip("?.").strip() for it in items if it.question_type != "not"})
        queries = [it.query for it in items]
        spans = row_spans(queries, [it.question_type == "not" for it in items])
        drops = {q[s[1][0]:s[1][1]].strip(" ,") for q, s in zip(queries, spans) if isinstance(s, tuple)}
        self.drops = sorted(d for d in drops if d)
        if not self.keeps or not self.drops:
            raise ConfigError("train.scope.warmup_practice needs training questions that are not NOT questions and "
                              "NOT questions the rules can split; this training mix lacks one of them (set "
                              "train.scope.warmup_practice=false for a warm-up on the training questions alone)")

    def __call__(self, i: int) -> tuple[str, Span | None]:
        rng = random.Random(f"{self.seed}/-1/{i}")  # the key of row i's draws: every warm-up's rows depend on it
        contrast = bool(self.contrast) and rng.random() < 0.5  # without contrast templates nothing is drawn here
        template = rng.choice(self.contrast if contrast else self.templates)
        text, span = practice_sentence(template, rng.choice(self.keeps), rng.choice(self.drops))
        return text, None if contrast else span


class HiddenMarkerLoss(torch.nn.Module):
    """The head's cross-entropy on the batch's exclusion questions with their marker words
    hidden (`hidden_markers`, a `share` of them), read from the encoder's token embeddings
    as they are (detached: this teaches the head, not the encoder).

    The warm-up's hidden markers alone do not last: the steps' scope term, all on markers the
    head can read, teaches it back to key on them (on the sample, seed 1, it fired on 10% of
    the "passing over" questions after training, against 48% after the warm-up)."""

    def __init__(self, head, share: float):
        super().__init__()
        self.head, self.share = head, share

    def forward(self, query_tokens: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        tokens, labels, mask = query_tokens.detach().float(), labels.to(query_tokens.device), mask.to(query_tokens.device)
        x, y, rows = hidden_markers(tokens, labels, tokens, ordinary_positions(labels, mask), self.share)
        if not bool(rows.any()):  # zero, but through the head, so every process's backward reaches it (DDP)
            return sum(p.sum() for p in self.head.parameters()) * 0.0
        logits = self.head.scope_logits(x[rows], mask[rows])
        return F.cross_entropy(logits.flatten(0, 1), y[rows].flatten(), ignore_index=IGNORE)


class ScopeLoss(torch.nn.Module):
    """Cross-entropy of the head's token classes: on the queries against `token_labels`, and
    on the passages against ORDINARY (passages keep a plain mean), the two averaged."""

    def forward(self, query_logits: torch.Tensor, labels: torch.Tensor, passage_logits: torch.Tensor,
                passage_mask: torch.Tensor) -> torch.Tensor:
        labels = labels.to(query_logits.device)
        q = (F.cross_entropy(query_logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE)
             if bool((labels != IGNORE).any()) else query_logits.sum() * 0)
        keep = passage_mask.bool()
        p = F.cross_entropy(passage_logits.float()[keep],
                            torch.full((int(keep.sum()),), ORDINARY, device=passage_logits.device))
        return (q + p) / 2


def right_padded(mask: torch.Tensor) -> bool:
    """Whether every row's tokens come first and its padding after, so row[:length] is the row."""
    lengths = mask.sum(1)
    return bool((mask.bool() == (torch.arange(mask.shape[1])[None, :] < lengths[:, None])).all())


@torch.no_grad()
def frozen_tokens(encoder, features: dict[str, torch.Tensor], batch_size: int, device) -> torch.Tensor:
    """The encoder's token embeddings of every row, (rows, tokens, dim) in float32, zero at padding.

    Rows are encoded shortest first, each chunk padded only to its own longest row: padded to
    the longest of all rows, most of the work was padding. The head never reads padding (it packs
    the sequences), so what it learns is unchanged."""
    mask = features["attention_mask"]
    lengths = mask.sum(1)
    order = torch.argsort(lengths, stable=True)
    out = None
    cut = right_padded(mask)
    for lo in range(0, len(order), batch_size):
        rows = order[lo:lo + batch_size]
        width = int(lengths[rows].max()) if cut else mask.shape[1]
        chunk = {k: v[rows, :width].to(device) for k, v in features.items()}
        emb = encoder(chunk)["token_embeddings"].float() * chunk["attention_mask"][..., None]
        if out is None:
            out = torch.zeros((len(order), mask.shape[1], emb.shape[-1]), device=device)
        out[rows.to(device), :width] = emb
    return out


def class_recall(head, tokens: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor,
                 batches: list[tuple[int, torch.Tensor]]) -> dict:
    """Token accuracy and each class's recall over all rows (ignored tokens left out), read in
    `batches` of (width, row indices) as the warm-up forms them."""
    with torch.no_grad():
        pred = torch.cat([head.scope_logits(tokens[idx, :w], mask[idx, :w]).argmax(-1).flatten() for w, idx in batches])
    y = torch.cat([labels[idx, :w].flatten() for w, idx in batches])
    known = y != IGNORE
    out = {"token_accuracy": float((pred[known] == y[known]).float().mean()) if bool(known.any()) else None}
    for name, c in (("ordinary", ORDINARY), ("marker", MARKER), ("excluded", EXCLUDED)):
        sel = y == c
        out[f"recall_{name}"] = float((pred[sel] == c).float().mean()) if bool(sel.any()) else None
    return out


def ordinary_positions(labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(n, 2) (row, token) of every ordinary word token: not a row's first or last real token
    ([CLS], [SEP]), wherever the padding is (left or right)."""
    rank = mask.cumsum(1)  # 1 at a row's first real token, its length at its last
    inner = mask.bool() & (rank > 1) & (rank < mask.sum(1, keepdim=True)) & (labels == ORDINARY)
    return torch.nonzero(inner)


def hidden_markers(x: torch.Tensor, y: torch.Tensor, tokens: torch.Tensor, ordinary: torch.Tensor, share: float,
                   gen: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rows `x` (labels `y`) with the marker words of a `share` of the exclusion rows swapped
    for ordinary tokens drawn from `tokens` (at `ordinary`, from `ordinary_positions`), and
    those positions left unlabelled; also which rows changed.

    The head then has to find the excluded part from the question around a word it cannot
    read, not from the marker's identity alone, and that carries to exclusion words it was
    never taught (docs/method.md: "Scope pooling"). `gen` None: torch's global generator, which the
    training loop seeds per micro-batch, so a resumed run hides what the first one hid."""
    rows = (y == MARKER).any(1) & (torch.rand(len(y), generator=gen) < share).to(y.device)
    where = (y == MARKER) & rows[:, None]
    n = int(where.sum())
    if not n or not len(ordinary):
        return x, y, torch.zeros_like(rows)
    pick = ordinary[torch.randint(len(ordinary), (n,), generator=gen).to(ordinary.device)]
    x, y = x.clone(), y.clone()
    x[where] = tokens[pick[:, 0], pick[:, 1]]
    y[where] = IGNORE
    return x, y, rows


@dataclass
class WarmUpRows:
    """What the warm-up fits the head on, drawn before any fitting: the rows tokenised as the
    model reads them, their token labels, and the warm-up's generator, which goes on to draw the
    batches' order and the hidden markers. `digest` names all of it (scope_cache.py keys on it)."""

    texts: list[str]
    features: dict[str, torch.Tensor]  # input_ids, attention_mask (prompt included)
    labels: torch.Tensor
    gen: torch.Generator

    def digest(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        for x in (self.features["input_ids"], self.features["attention_mask"], self.labels):
            h.update(str(tuple(x.shape)).encode())
            h.update(x.to(torch.long).contiguous().numpy().tobytes())
        h.update(self.gen.get_state().numpy().tobytes())
        return h.hexdigest()


def warm_up_rows(model, items, practice: ScopeSentences | None, *, seed: int, prompt: str | None = None,
                 rows: int = 512) -> WarmUpRows:
    """The training questions (NOT ones with their rules' spans) filled up with practice
    sentences, at most `rows` of them, drawn by `seed`."""
    gen = torch.Generator().manual_seed(seed)
    texts = [it.query for it in items]
    spans = row_spans(texts, [it.question_type == "not" for it in items])
    if practice is not None:
        for text, span in (practice(i) for i in range(max(0, rows - len(texts)))):
            texts.append(text)
            spans.append(span)
    order = torch.randperm(len(texts), generator=gen)[:rows].tolist()
    texts, spans = [texts[i] for i in order], [spans[i] for i in order]
    prompt = prompt or ""
    features = dict(model.tokenizer([prompt + t for t in texts], padding=True, truncation=True,
                                    max_length=model.max_seq_length, return_tensors="pt", return_offsets_mapping=True))
    labels = token_labels(spans, features.pop("offset_mapping"), features["attention_mask"], len(prompt))
    return WarmUpRows(texts, features, labels, gen)


def warm_up(model, head, items, practice: ScopeSentences, *, steps: int, lr: float, seed: int,
            prompt: str | None = None, rows: int = 512, batch_size: int = 64, until: float = 0.0,
            hide_markers: float = 0.0) -> dict:
    """Fit the scope head alone on the frozen starting encoder's token embeddings, before training
    (`warm_up_rows`, then `fit_head`)."""
    drawn = warm_up_rows(model, items, practice, seed=seed, prompt=prompt, rows=rows)
    return fit_head(model, head, drawn, steps=steps, lr=lr, batch_size=batch_size, until=until,
                    hide_markers=hide_markers)


def fit_head(model, head, drawn: WarmUpRows, *, steps: int, lr: float, batch_size: int = 64, until: float = 0.0,
             hide_markers: float = 0.0) -> dict:
    """Fit the scope head alone on the frozen starting encoder's token embeddings of `drawn`.

    The head starts from zero and the recipe has few steps: without this it is still unsure
    where the exclusion lies when the run ends. The encoder runs once over the rows. A batch
    holds rows of one length only (at most `batch_size`), visited in a random order each pass:
    without padding the GRU runs unpacked, and a packed GRU's backward fills a gradient the size
    of the whole batch at every token (on the sample: the same head quality, or better, in 40%
    less time than random batches of all lengths). With `until` > 0 it stops at the end of the
    first pass after which every class's recall reaches `until`; `steps` stays the most it takes.
    With `hide_markers`, that share of the exclusion rows is read with its markers hidden
    (`hidden_markers`); the stop check counts the rows as they are.
    Returns the steps taken, the last loss and each class's recall on all the rows."""
    gen, features, labels = drawn.gen, drawn.features, drawn.labels
    device = next(head.parameters()).device
    tokens = frozen_tokens(model[0], features, batch_size, device)
    mask, labels = features["attention_mask"].to(device), labels.to(device)
    optimizer = torch.optim.Adam(head.parameters(), lr=lr, foreach=True)  # the same numbers; on the CPU 0.2 s less
    lengths, cut = features["attention_mask"].sum(1), right_padded(features["attention_mask"])
    batches = [(int(n) if cut else mask.shape[1], chunk.to(device))  # left padding: keep it, the GRU packs
               for n in lengths.unique() for chunk in torch.split(torch.nonzero(lengths == n)[:, 0], batch_size)]
    ordinary = ordinary_positions(labels, mask) if hide_markers else None
    loss, taken, recall = torch.zeros(()), 0, None
    hits, seen = torch.zeros(3), torch.zeros(3)  # per class, over this pass
    for taken in range(1, steps + 1):
        if (taken - 1) % len(batches) == 0:  # a new pass over the rows, in a new order
            visit = torch.randperm(len(batches), generator=gen).tolist()
        width, idx = batches[visit[(taken - 1) % len(batches)]]
        x, y = tokens[idx, :width], labels[idx, :width]
        hidden = None
        if hide_markers:
            x, y, hidden = hidden_markers(x, y, tokens, ordinary, hide_markers, gen)
        logits = head.scope_logits(x, mask[idx, :width])  # no padding: the GRU runs unpacked
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if until:  # the check reads the predictions this step made anyway: it costs no extra forward
            if hidden is not None:  # the stop check reads the rows as they are, markers in view
                y = y.masked_fill(hidden[:, None], IGNORE)
            y, pred = y.flatten().cpu(), logits.detach().argmax(-1).flatten().cpu()
            known = y != IGNORE
            seen += torch.bincount(y[known], minlength=3)[:3]
            hits += torch.bincount(y[known & (pred == y)], minlength=3)[:3]
            if taken % len(batches) == 0:  # a pass ends: every row was predicted once, before its step
                if bool(((hits >= until * seen) | (seen == 0)).all()):  # confirmed on the head as it is now
                    recall = class_recall(head, tokens, mask, labels, batches)
                    if all(v is None or v >= until for k, v in recall.items() if k.startswith("recall_")):
                        break
                    recall = None
                hits.zero_(), seen.zero_()
    optimizer.zero_grad(set_to_none=True)  # else the warm-up's last gradient is added to training's first step
    recall = recall or class_recall(head, tokens, mask, labels, batches)
    return {"rows": len(drawn.texts), "steps": taken, "batches_per_pass": len(batches), "loss": float(loss.detach()),
            **recall}
