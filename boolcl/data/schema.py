"""The BoolQuestions row formats, and the training example that extends them.

Rows are validated field by field on the way in, so a bad file fails at the row
that is wrong rather than deep inside training. `from_dict` raises `RowError`
naming the field; the JSONL reader adds the file and line.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

QUESTION_TYPES = ("and", "or", "not")
BEIR_HINT = "this looks like a BEIR corpus: use data=beir:PATH"  # rows with `_id`/`text` instead of `docid`/`doc`
# 'simple' marks original (non-Boolean) training queries: MS MARCO or the sample's atomic questions.
TRAIN_TYPES = QUESTION_TYPES + ("simple",)


class RowError(ValueError):
    """A row that does not match its schema; `field` names the offending field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"field {field!r}: {message}")
        self.field = field


_SPACE_NAMES = {" ": "a space", "\t": "a tab", "\n": "a newline", "\r": "a carriage return"}


def id_problem(value: str) -> str | None:
    """Why `value` cannot be an id, or None. Ids are written into whitespace-separated TREC
    run files (`qid Q0 docid rank score tag`), so any whitespace would split a column."""
    for i, ch in enumerate(value):
        if ch.isspace():
            name = _SPACE_NAMES.get(ch, f"whitespace U+{ord(ch):04X}")
            return (f"{value!r} contains {name} at position {i}; ids may not contain whitespace "
                    "(they are columns of run.trec)")
    return None


def check_id(value: str, key: str) -> str:
    """`value` if it is a usable id; else RowError naming `key`. The one id check of every reader."""
    problem = id_problem(value)
    if problem:
        raise RowError(key, problem)
    return value


def _str(row: dict, key: str, *, required: bool = True, allow_empty: bool = False, is_id: bool = False) -> str | None:
    if key not in row or row[key] is None:
        if required:
            raise RowError(key, "is missing")
        return None
    value = row[key]
    if is_id and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # ids are sometimes stored as numbers
    if not isinstance(value, str):
        raise RowError(key, f"must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise RowError(key, "is empty")
    return check_id(value, key) if is_id else value


@dataclass
class Context:
    """A passage reference inside a question row; `text` travels along when known."""

    passage_id: str
    text: str | None = None
    title: str | None = None
    score: float | None = None  # a teacher's relevance score, for MarginMSE

    @classmethod
    def from_dict(cls, row: Any, where: str) -> "Context":
        if isinstance(row, (str, int)) and not isinstance(row, bool):
            if not str(row).strip():
                raise RowError(where, "is an empty passage id")
            return cls(passage_id=check_id(str(row), where))
        if not isinstance(row, dict):
            raise RowError(where, f"each context must be an object with 'passage_id', got {type(row).__name__}")
        try:
            pid = _str(row, "passage_id", is_id=True)
            score = row.get("score")
            if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
                raise RowError("score", f"must be a number, got {type(score).__name__}")
            if score is not None:
                try:
                    score = float(score)
                except OverflowError:  # an integer too large for a float
                    score = math.inf
                if not math.isfinite(score):
                    raise RowError("score", f"must be a finite number (a teacher's relevance score), got "
                                   f"{row.get('score')!r}")
            return cls(passage_id=pid, text=_str(row, "text", required=False, allow_empty=True),
                       title=_str(row, "title", required=False, allow_empty=True),
                       score=None if score is None else float(score))
        except RowError as e:
            raise RowError(f"{where}.{e.field}", str(e).split(": ", 1)[1]) from None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _contexts(row: dict, key: str, *, required: bool) -> list[Context]:
    if key not in row or row[key] is None:
        if required:
            raise RowError(key, "is missing")
        return []
    value = row[key]
    if not isinstance(value, list):
        raise RowError(key, f"must be a list, got {type(value).__name__}")
    return [Context.from_dict(c, f"{key}[{i}]") for i, c in enumerate(value)]


@dataclass
class CorpusDoc:
    """A corpus row: `{docid, doc}`, plus `title` for Wikipedia-style corpora."""

    docid: str
    doc: str
    title: str | None = None

    @classmethod
    def from_dict(cls, row: dict) -> "CorpusDoc":
        if not isinstance(row, dict):
            raise RowError("<row>", f"must be a JSON object, got {type(row).__name__}")
        if "docid" not in row and "doc" not in row and "_id" in row and "text" in row:
            raise RowError("docid", f"is missing: {BEIR_HINT}")
        return cls(docid=_str(row, "docid", is_id=True), doc=_str(row, "doc"),
                   title=_str(row, "title", required=False, allow_empty=True))

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def text(self, sep: str = " [SEP] ") -> str:
        """What the encoder sees: NQ-style rows as `title [SEP] doc`, as the reference loader does."""
        return f"{self.title}{sep}{self.doc}" if self.title else self.doc


@dataclass
class EvalQuestion:
    """A BoolQuestions eval row."""

    qid: str
    question: str
    question_type: str
    positive_ctxs: list[Context]
    negative_ctxs: list[Context] = field(default_factory=list)

    allowed_types: ClassVar[tuple[str, ...]] = QUESTION_TYPES

    @classmethod
    def _common(cls, row: dict) -> dict:
        if not isinstance(row, dict):
            raise RowError("<row>", f"must be a JSON object, got {type(row).__name__}")
        qtype = _str(row, "question_type").lower()
        if qtype not in cls.allowed_types:
            raise RowError("question_type", f"{qtype!r} is not one of {', '.join(cls.allowed_types)}")
        positives = _contexts(row, "positive_ctxs", required=True)
        if not positives:
            raise RowError("positive_ctxs", "needs at least one positive passage")
        negatives = _contexts(row, "negative_ctxs", required=False)
        overlap = {c.passage_id for c in positives} & {c.passage_id for c in negatives}
        if overlap:
            raise RowError("negative_ctxs", f"passage(s) {sorted(overlap)} are also positives")
        return dict(qid=_str(row, "qid", is_id=True), question=_str(row, "question"), question_type=qtype,
                    positive_ctxs=positives, negative_ctxs=negatives)

    @classmethod
    def from_dict(cls, row: dict) -> "EvalQuestion":
        return cls(**cls._common(row))

    def to_dict(self) -> dict:
        return {"qid": self.qid, "question": self.question, "question_type": self.question_type,
                "positive_ctxs": [c.to_dict() for c in self.positive_ctxs],
                "negative_ctxs": [c.to_dict() for c in self.negative_ctxs]}


@dataclass
class TrainingExample(EvalQuestion):
    """An eval row plus what training needs.

    `negative_ctxs` are labelled negatives (for NOT: the excluded passage);
    `hard_negative_ctxs` are mined by a retriever. `provenance` records how the
    example was made: cluster, source passages, simple questions, operator, LLM.
    """

    hard_negative_ctxs: list[Context] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)

    allowed_types: ClassVar[tuple[str, ...]] = TRAIN_TYPES

    @classmethod
    def from_dict(cls, row: dict) -> "TrainingExample":
        common = cls._common(row)
        hard = _contexts(row, "hard_negative_ctxs", required=False)
        positives = {c.passage_id for c in common["positive_ctxs"]}
        clash = positives & {c.passage_id for c in hard}
        if clash:
            raise RowError("hard_negative_ctxs", f"passage(s) {sorted(clash)} are also positives")
        prov = row.get("provenance") or {}
        if not isinstance(prov, dict):
            raise RowError("provenance", f"must be an object, got {type(prov).__name__}")
        return cls(**common, hard_negative_ctxs=hard, provenance=prov)

    def to_dict(self) -> dict:
        out = super().to_dict()
        out["hard_negative_ctxs"] = [c.to_dict() for c in self.hard_negative_ctxs]
        out["provenance"] = self.provenance
        return out

    @property
    def group(self) -> str | None:
        """The passage group the question was written over: `cluster` in the sample, `group` from
        `boolcl generate`."""
        group = self.provenance.get("cluster") or self.provenance.get("group")
        return str(group) if group is not None else None

    @property
    def all_negatives(self) -> list[Context]:
        """Labelled negatives first (they matter most), then mined ones, without repeats."""
        seen: set[str] = set()
        out = []
        for c in self.negative_ctxs + self.hard_negative_ctxs:
            if c.passage_id not in seen:
                seen.add(c.passage_id)
                out.append(c)
        return out
