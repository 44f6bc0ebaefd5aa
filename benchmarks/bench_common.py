"""Shared pieces of the benchmarks: a DistilBERT-base bi-encoder and synthetic text, no hub needed."""
from __future__ import annotations

import atexit
import json
import random
import shutil
import tempfile
from pathlib import Path


def scratch(prefix: str) -> Path:
    """A temporary folder removed when the process ends: a benchmark writes models of a few hundred MB."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def tokenizer_dir(explicit: str | None) -> str:
    if explicit:
        return explicit
    from boolcl.retrieval.models import packaged_model_dir

    return str(packaged_model_dir())  # bert-base-uncased's vocabulary, as DistilBERT's


def distilbert_folder(root: Path, tokenizer: str) -> Path:
    """DistilBERT-base (66M parameters, random weights) saved as a SentenceTransformer folder, mean pooling."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertModel

    out = root / "distilbert-st"
    if (out / "modules.json").is_file():
        return out
    torch.manual_seed(0)
    hf = root / "distilbert-hf"
    DistilBertModel(DistilBertConfig()).save_pretrained(hf)
    AutoTokenizer.from_pretrained(tokenizer).save_pretrained(hf)
    model = SentenceTransformer(str(hf), device="cpu")
    model.max_seq_length = 256
    model.similarity_fn_name = "dot"
    model.save(str(out))
    return out


def model_spec(spec: str, tokenizer: str | None = None) -> str:
    """A model argument of the bench scripts: `distilbert-random` becomes a fresh random
    DistilBERT-base folder (distilbert_folder), anything else is passed on as it is."""
    if spec != "distilbert-random":
        return spec
    return str(distilbert_folder(scratch("bench-model-"), tokenizer_dir(tokenizer)))


def words(tokenizer: str, seed: int = 0) -> list[str]:
    from transformers import AutoTokenizer

    vocab = AutoTokenizer.from_pretrained(tokenizer).get_vocab()
    return sorted(w for w in vocab if w.isalpha() and len(w) > 3)


def sentence(rng: random.Random, vocab: list[str], n_words: int) -> str:
    return " ".join(rng.choice(vocab) for _ in range(n_words))


MIXED = ((4, 24), (16, 240))  # words per query and per passage, drawn uniformly, with --lengths mixed


def triples(n: int, vocab: list[str], seed: int = 0, q_words: int = 13, p_words: int = 61,
            mixed: bool = False) -> list[tuple[str, str, str]]:
    """(query, positive, negative); whole-word tokens, so about 15- and 63-token sequences with [CLS]/[SEP],
    or with `mixed` lengths drawn from MIXED (real data's spread, where padded batches waste work)."""
    rng = random.Random(seed)

    def length(fixed, span):
        return rng.randint(*span) if mixed else fixed
    return [(sentence(rng, vocab, length(q_words, MIXED[0])), sentence(rng, vocab, length(p_words, MIXED[1])),
             sentence(rng, vocab, length(p_words, MIXED[1]))) for _ in range(n)]


def write_pool(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    """The triples as boolcl training examples (texts inline)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for i, (q, p, n) in enumerate(rows):
            fh.write(json.dumps({"qid": f"q{i}", "question": q, "question_type": "simple",
                                 "positive_ctxs": [{"passage_id": f"p{i}", "text": p}],
                                 "hard_negative_ctxs": [{"passage_id": f"n{i}", "text": n}]}) + "\n")
    return path
