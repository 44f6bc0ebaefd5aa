"""A retrieval set in memory: questions plus a corpus, as every reader returns it."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from boolcl.data.schema import CorpusDoc, EvalQuestion


@dataclass
class Corpus:
    """Passages as parallel columns: cheap for millions of rows, easy to shard."""

    ids: list[str]
    texts: list[str]

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def from_docs(cls, docs: list[CorpusDoc]) -> "Corpus":
        return cls([d.docid for d in docs], [d.text() for d in docs])


@dataclass
class RetrievalSet:
    name: str
    questions: list[EvalQuestion]
    corpus: Corpus
    source: str  # where it was read from, for results.json

    def corpus_fingerprint(self) -> str:
        """A hash of every passage id and text (computed once): the embedding cache key and results.json."""
        if getattr(self, "_corpus_fp", None) is None:
            h = hashlib.blake2b(digest_size=16)
            for pid, text in zip(self.corpus.ids, self.corpus.texts):
                h.update(pid.encode() + b"\0" + text.encode() + b"\1")
            self._corpus_fp = h.hexdigest()
        return self._corpus_fp

    def questions_fingerprint(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        for q in self.questions:
            h.update(json.dumps(q.to_dict(), sort_keys=True).encode())
        return h.hexdigest()
