"""Training data: mix Boolean examples with original data, and collate them into batches.

One training item = (query, one positive, n negatives) with passage ids kept, so the
loss can mask a passage that is a labelled positive of another query in the batch.
Labelled negatives (for NOT: the excluded passage) are always chosen before mined ones.
A NOT item also carries its plain (disjunctive) question, for the query-pair loss, and its
kept and dropped parts, for decomposition distillation.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Sequence

import torch

from boolcl.data.hub import load_hf_split
from boolcl.data.loaders import load_training_pool
from boolcl.data.schema import Context, TrainingExample
from boolcl.data.sets import Corpus
from boolcl.errors import ConfigError, DataError
from boolcl.train.decomposition import not_parts, partner_question
from boolcl.train.scope import row_spans, token_labels

MSMARCO_TRIPLETS = ("sentence-transformers/msmarco-msmarco-distilbert-base-tas-b", "triplet")


@dataclass
class Item:
    query: str
    positive_ids: list[str]
    positives: list[str]
    negative_ids: list[str]
    negatives: list[str]
    question_type: str
    positive_scores: list[float | None] | None = None  # teacher scores, for MarginMSE
    negative_scores: list[float | None] | None = None
    n_explicit: int = 0  # the first n_explicit negatives are labelled (negative_ctxs), the rest mined
    partner: str | None = None  # NOT: the question without its exclusion (provenance)
    original: bool = False  # from the original training data, not the Boolean set
    group: str | None = None  # the passage group (cluster) the question was written over
    not_parts: tuple[str, str, str] | None = None  # NOT: (kept question, dropped part, source)
    target: torch.Tensor | None = None  # NOT: the decomposition target (decomposition.py), when switched on


def passage_group(ex: TrainingExample) -> str | None:
    """`cluster` in the sample, `group` from `boolcl generate`."""
    prov = ex.provenance or {}
    group = prov.get("cluster") or prov.get("group")
    return str(group) if group is not None else None


def _text_id(text: str) -> str:
    return "t" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _texts(ctxs: Sequence[Context], lookup: dict[str, str], where: str) -> list[str]:
    out = []
    for c in ctxs:
        text = c.text if c.text else lookup.get(c.passage_id)
        if text is None:
            raise DataError(where, None, f"passage {c.passage_id!r} has no text and is not in the corpus",
                            field="positive_ctxs")
        out.append(text)
    return out


def to_items(examples: Sequence[TrainingExample], corpus: Corpus | None, where: str) -> list[Item]:
    lookup = dict(zip(corpus.ids, corpus.texts)) if corpus else {}
    items = []
    for ex in examples:
        negs = ex.all_negatives
        labelled = {c.passage_id for c in ex.negative_ctxs}
        items.append(Item(ex.question, [c.passage_id for c in ex.positive_ctxs],
                          _texts(ex.positive_ctxs, lookup, where),
                          [c.passage_id for c in negs], _texts(negs, lookup, where), ex.question_type,
                          [c.score for c in ex.positive_ctxs], [c.score for c in negs],
                          n_explicit=sum(c.passage_id in labelled for c in negs), partner=partner_question(ex),
                          group=passage_group(ex), not_parts=not_parts(ex)))
    return items


def load_msmarco_triplets(limit: int | None, seed: int) -> list[Item]:
    """The original MS MARCO training data with mined hard negatives, from the hub."""

    ds = load_hf_split(*MSMARCO_TRIPLETS, "train")
    if limit is not None and limit < len(ds):
        ds = ds.shuffle(seed=seed).select(range(limit))
    return [Item(r["query"], [_text_id(r["positive"])], [r["positive"]], [_text_id(r["negative"])],
                 [r["negative"]], "simple") for r in ds]


def build_mix(cfg) -> tuple[list[Item], dict]:
    """The training items for a config, and a summary of where they came from."""
    t = cfg.train
    rng = random.Random(cfg.seed)
    examples, corpus = load_training_pool(t.boolean) if t.boolean != "none" else ([], None)
    where = "sample training pool" if t.boolean == "sample" else t.boolean
    boolean = [e for e in examples if e.question_type in set(t.operators)]
    if not boolean and t.boolean != "none":
        raise DataError(where, None, f"no training examples of type {list(t.operators)}", field="question_type")
    rng.shuffle(boolean)
    boolean = boolean[: t.num_examples]
    items = to_items(boolean, corpus, where)
    if t.original == "sample":
        pool, pool_corpus = (examples, corpus) if t.boolean == "sample" else load_training_pool("sample")
        original = to_items([e for e in pool if e.question_type == "simple"], pool_corpus, "sample training pool")
    elif t.original == "msmarco":
        original = load_msmarco_triplets(t.original_size, cfg.seed)
    elif t.original == "none":
        original = []
    else:
        pool, pool_corpus = load_training_pool(t.original)
        original = to_items(pool, pool_corpus, t.original)
    for it in original:  # whatever the source: retention distils on these queries
        it.original = True
    rng.shuffle(original)
    if t.original_size is not None:
        original = original[: t.original_size]
    if t.loss == "margin_mse":
        unscored = [it.query for it in items + original
                    if it.positive_scores is None or None in it.positive_scores or not it.negatives
                    or None in (it.negative_scores or [None])]
        if unscored:
            raise DataError(where, None, f"train.loss=margin_mse needs a teacher 'score' on every positive and "
                            f"negative context; {len(unscored)} examples lack one (first: {unscored[0]!r})",
                            field="score")
    summary = {"boolean": {"source": t.boolean, "operators": list(t.operators), "examples": len(items)},
               "original": {"source": t.original, "examples": len(original)}}
    return items + original, summary


class EpochShuffle(torch.utils.data.Sampler):
    """A fresh permutation per epoch from (seed, epoch) alone: a resumed run sees the same order.

    With `lengths`, items are sorted by length within windows of 50 batches and the full
    batches are then shuffled: batches of similar length pad less, and their order stays random.

    With `groups` (one key or None per item), the items of a group follow each other in a
    random order and the groups come in a random order, so questions over the same passages
    share a batch; items without a group are groups of one.
    """

    WINDOW = 50

    def __init__(self, n: int, seed: int, lengths: Sequence[int] | None = None, batch_size: int = 1,
                 groups: Sequence[str | None] | None = None):
        if lengths is not None and groups is not None:
            raise ValueError("group by length or by passage group, not both")
        self.n, self.seed, self.epoch = n, seed, 0
        self.lengths, self.batch_size, self.groups = lengths, batch_size, groups

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        perm = torch.randperm(self.n, generator=g).tolist()
        if self.groups is not None:
            members: dict = {}
            for i in perm:
                members.setdefault(self.groups[i] if self.groups[i] is not None else ("item", i), []).append(i)
            keys = list(members)
            order = torch.randperm(len(keys), generator=g).tolist()
            return iter([i for k in order for i in members[keys[k]]])
        if self.lengths is None:
            return iter(perm)
        bs = self.batch_size
        window = bs * self.WINDOW
        ordered = [i for lo in range(0, self.n, window)
                   for i in sorted(perm[lo:lo + window], key=lambda i: -self.lengths[i])]
        full = self.n // bs * bs
        batches = [ordered[lo:lo + bs] for lo in range(0, full, bs)]
        order = torch.randperm(len(batches), generator=g).tolist()
        return iter([i for b in order for i in batches[b]] + ordered[full:])  # a partial batch stays last


class ItemDataset(torch.utils.data.Dataset):
    """Picks, per epoch, which positive and which negatives each item uses (deterministic)."""

    def __init__(self, items: list[Item], n_negatives: int, synthetic: Sequence[tuple[str, torch.Tensor]] = (),
                 synthetic_per_item: int = 0, scope_sentences=None):
        self.items, self.n_negatives, self.epoch = items, n_negatives, 0
        self.scope_sentences = scope_sentences  # scope.ScopeSentences: (epoch, i) -> practice sentences
        self.synthetic, self.synthetic_per_item = list(synthetic), synthetic_per_item if synthetic else 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        it = self.items[i]
        p = (self.epoch + i) % len(it.positives)
        negs, explicit = [], 0
        if it.negatives and self.n_negatives:
            scores = it.negative_scores if it.negative_scores is not None else [None] * len(it.negatives)
            slots = list(zip(it.negative_ids, it.negatives, scores))
            k, n = it.n_explicit, self.n_negatives
            explicit = min(k, n)
            # labelled negatives first, then mined ones; each epoch moves on to the next ones of each
            negs = (_rotate(slots[:k], self.epoch * explicit) + _rotate(slots[k:], self.epoch * (n - explicit)))[:n]
        per, m = self.synthetic_per_item, len(self.synthetic)
        start = (self.epoch * len(self.items) + i) * per  # each epoch moves on through the synthetic wordings
        synthetic = [self.synthetic[(start + j) % m] for j in range(per)]
        return {"query": it.query, "positive": it.positives[p], "positive_id": it.positive_ids[p],
                "positive_ids": it.positive_ids, "negatives": negs, "n_explicit": explicit,
                "question_type": it.question_type, "partner": it.partner, "original": it.original,
                "target": it.target, "synthetic": synthetic,
                "scope_sentences": self.scope_sentences(self.epoch, i) if self.scope_sentences else [],
                "positive_score": it.positive_scores[p] if it.positive_scores else None}


def _rotate(xs: list, shift: int) -> list:
    if not xs:
        return xs
    shift %= len(xs)
    return xs[shift:] + xs[:shift]


PLACEHOLDER = -2  # passage key of a filler negative; -1 pads positive_keys


def passage_key(passage_id: str) -> int:
    """A stable 63-bit integer for a passage id, so masks can be built on device and across processes."""
    return int.from_bytes(hashlib.blake2b(passage_id.encode(), digest_size=8).digest(), "little") >> 1


class Collator:
    """Tokenise queries and passages, each padded to the longest of its kind in the batch.

    Queries are short and passages long, so they are padded (and encoded) separately:
    padding queries to passage length would waste about a third of the compute. The
    passages are each item's positive, then the negatives. Every item contributes exactly
    `n_negatives` passages (short lists are topped up by repeating; an item without any
    gets empty placeholders the loss ignores), so batches have a fixed shape. Passage ids travel as integer keys: `passage_keys[j]` for passage j and
    `positive_keys[i]` (padded with -1) for all labelled positives of query i, from which
    the loss masks false negatives, also across processes.

    With `pairs=True`, each NOT item's plain question is appended after the B queries (one
    forward for all) with the item's first labelled negative, the excluded passage, as its
    target: `pair_rows[k]` is the item, `pair_targets[k]` the passage index.

    With `scope=True`, each item's scope practice sentences come last (no passages, no
    target), and `scope_labels` holds every query row's token classes for the scope head
    (scope.py): NOT questions from the rules' span, practice sentences from their own,
    all other rows ORDINARY.

    With `decomposition=True`, each item's synthetic NOT wordings are appended after those
    (they have no passages), and `distill_rows` lists the query rows that carry a decomposition
    target (batch items and synthetic wordings), `distill_targets` their targets.
    """

    def __init__(self, tokenizer, max_length: int, n_negatives: int,
                 query_prompt: str | None = None, passage_prompt: str | None = None, pairs: bool = False,
                 exclusion_operators: Sequence[str] = ("not",), decomposition: bool = False, scope: bool = False):
        self.tokenizer, self.max_length, self.n_negatives = tokenizer, max_length, n_negatives
        self.query_prompt, self.passage_prompt = query_prompt or "", passage_prompt or ""
        self.pairs, self.exclusion_operators = pairs, set(exclusion_operators)
        self.decomposition, self.scope = decomposition, scope
        if scope and not getattr(tokenizer, "is_fast", False):
            raise ConfigError("train.scope needs a fast tokenizer (token offsets); this model's is not")

    def _tokenize(self, texts: list[str], offsets: bool = False) -> dict:
        return dict(self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                                   return_tensors="pt", return_offsets_mapping=offsets))

    def __call__(self, batch: list[dict]) -> dict:
        b_n, n = len(batch), self.n_negatives
        passages, ids = [b["positive"] for b in batch], [b["positive_id"] for b in batch]
        margins = []  # teacher's score(positive) - score(negative), when the data has scores
        labelled = torch.zeros((b_n, n), dtype=torch.bool)  # slot j of item i holds a labelled negative
        for i, b in enumerate(batch):
            negs = b["negatives"] or []
            labelled[i, : min(b.get("n_explicit", 0), n)] = True
            for j in range(n):
                # no negative at all: an empty placeholder that the loss leaves out of every softmax
                neg = negs[j % len(negs)] if negs else (None, "", None)
                ids.append(neg[0])
                passages.append(neg[1])
                pos_score, neg_score = b.get("positive_score"), (neg[2] if len(neg) > 2 else None)
                margins.append(None if pos_score is None or neg_score is None else pos_score - neg_score)
        width = max(len(b["positive_ids"]) for b in batch)
        positive_keys = torch.full((b_n, width), -1, dtype=torch.long)
        for i, b in enumerate(batch):
            positive_keys[i, : len(b["positive_ids"])] = torch.tensor([passage_key(x) for x in b["positive_ids"]])
        pair_rows = [i for i, b in enumerate(batch)
                     if b.get("partner") and n and labelled[i, 0]] if self.pairs else []
        synthetic = [x for b in batch for x in b.get("synthetic", ())] if self.decomposition else []
        practice = [x for b in batch for x in b.get("scope_sentences", ())] if self.scope else []
        texts = ([b["query"] for b in batch] + [batch[i]["partner"] for i in pair_rows]
                 + [text for text, _ in synthetic] + [text for text, _ in practice])
        queries = self._tokenize([self.query_prompt + x for x in texts], offsets=self.scope)
        if self.scope:
            spans = (row_spans([b["query"] for b in batch], [b.get("question_type") == "not" for b in batch])
                     + [None] * len(pair_rows) + row_spans([t for t, _ in synthetic], [True] * len(synthetic))
                     + [span for _, span in practice])
            scope_labels = token_labels(spans, queries.pop("offset_mapping"), queries["attention_mask"],
                                        len(self.query_prompt))
        passages = self._tokenize([self.passage_prompt + p for p in passages])
        out = {"query_features": queries, "passage_features": passages, "n_queries": b_n,
               "n_tokens": int(queries["attention_mask"].sum() + passages["attention_mask"].sum()),
               "passage_keys": torch.tensor([PLACEHOLDER if x is None else passage_key(x) for x in ids],
                                            dtype=torch.long),
               "positive_keys": positive_keys,
               # the exclusion margin's negatives: labelled ones of items of the chosen operators
               "excluded": labelled & torch.tensor([b.get("question_type") in self.exclusion_operators
                                                    for b in batch], dtype=torch.bool)[:, None],
               "is_original": torch.tensor([bool(b.get("original")) for b in batch], dtype=torch.bool),
               "teacher_margins": (torch.tensor(margins, dtype=torch.float).view(b_n, n)
                                   if margins and None not in margins else None)}
        if self.pairs:
            # the plain question's positives: the NOT question's positives and the excluded passage
            keys = torch.full((len(pair_rows), width + 1), -1, dtype=torch.long)
            for k, i in enumerate(pair_rows):
                keys[k, :width] = positive_keys[i]
                keys[k, width] = passage_key(batch[i]["negatives"][0][0])
            out |= {"pair_rows": torch.tensor(pair_rows, dtype=torch.long),
                    "pair_targets": torch.tensor([b_n + i * n for i in pair_rows], dtype=torch.long),
                    "pair_positive_keys": keys}
        if self.scope:
            out["scope_labels"] = scope_labels
        if self.decomposition:
            rows = [i for i, b in enumerate(batch) if b.get("target") is not None]
            targets = [batch[i]["target"] for i in rows] + [v for _, v in synthetic]
            first = b_n + len(pair_rows)
            out |= {"distill_rows": torch.tensor(rows + list(range(first, first + len(synthetic))), dtype=torch.long),
                    "distill_targets": torch.stack(targets) if targets else torch.zeros((0, 0))}
        return out
