"""Batching of retrieval.encode: what the CPU token cap forms, and that it changes no vector."""
from __future__ import annotations

import numpy as np
import torch

from boolcl.retrieval.encode import CPU_BATCH_VALUES, cpu_batches, encode, hidden_width, token_lengths
from boolcl.retrieval.models import load_model


def test_cpu_batches_cap_rows_and_padded_tokens_by_hand():
    # longest first (ties in input order): 1 and 3 (100 each) fill 200 tokens; 2, 0, 4 are 3 rows of at most 30
    assert cpu_batches([5, 100, 30, 100, 2], batch_size=3, max_tokens=200) == [[1, 3], [2, 0, 4]]
    assert cpu_batches([5, 100, 30, 100, 2], batch_size=2, max_tokens=10_000) == [[1, 3], [2, 0], [4]]
    assert cpu_batches([500, 10, 10], batch_size=8, max_tokens=100) == [[0], [1, 2]]  # too long: alone
    assert cpu_batches([], batch_size=8, max_tokens=100) == []


def test_token_lengths_are_the_truncated_tokenised_lengths(tiny_model_dir):
    model = load_model(str(tiny_model_dir))
    texts = ["a", "a b c d e f g h i j k l m n o p q r s t u v w x y z", "a b"]
    expected = [len(model.tokenizer(["q: " + t], truncation=True, max_length=8)["input_ids"][0]) for t in texts]
    assert token_lengths(model.tokenizer, texts, "q: ", 8, chunk=2) == expected
    assert max(expected) == 8 and min(expected) < 8


def test_capped_cpu_batches_give_each_text_its_own_vector(tiny_model_dir):
    """Batches of a few padded tokens, and of the default cap, both give every text the vector it
    gets encoded alone, in the order of the texts."""
    model = load_model(str(tiny_model_dir)).eval()
    words = "the river bank holds a small boat and some old rope near the water".split()
    texts = [" ".join(words[: 1 + (7 * i) % len(words)]) for i in range(11)]
    with torch.no_grad():
        alone = np.stack([model(dict(model.tokenizer([t], return_tensors="pt")))["sentence_embedding"][0].numpy()
                          for t in texts])
    capped = encode(model, texts, batch_size=4, show_progress=False, cpu_max_tokens=12)
    default = encode(model, texts, batch_size=64, show_progress=False)
    np.testing.assert_allclose(capped, alone, atol=1e-5)
    np.testing.assert_allclose(default, alone, atol=1e-5)
    assert hidden_width(model) == 32 and CPU_BATCH_VALUES // 32 > 64 * 16  # its default cap: one batch of 11
