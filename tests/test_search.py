import numpy as np
import pytest

from boolcl.retrieval.search import normalize, search, torch_search


def test_faiss_and_torch_agree_and_are_exact():
    rng = np.random.default_rng(0)
    p, q = rng.normal(size=(500, 16)).astype("float32"), rng.normal(size=(20, 16)).astype("float32")
    s_f, i_f = search(q, p, 7, backend="faiss")
    s_t, i_t = torch_search(q, p, 7, chunk=64)  # several chunks: exercises the merge
    exact = np.argsort(-(q @ p.T), axis=1)[:, :7]
    assert (i_f == exact).all() and (i_t == exact).all()
    np.testing.assert_allclose(s_f, s_t, rtol=1e-5)


def test_k_larger_than_corpus_and_cosine():
    p = np.array([[3.0, 0.0], [0.0, 1.0]], dtype="float32")
    q = np.array([[1.0, 1.1]], dtype="float32")
    scores, idx = search(q, p, 10)
    assert idx.shape == (1, 2) and idx[0, 0] == 0  # dot product favours the long vector
    _, idx = search(normalize(q), normalize(p), 10)
    assert idx[0, 0] == 1  # cosine does not


def test_faiss_backend_missing_is_an_error(monkeypatch):
    import boolcl.retrieval.search as s

    monkeypatch.setattr(s, "_faiss", lambda: None)  # simulate an install without faiss
    with pytest.raises(ImportError, match="faiss-cpu"):
        search(np.zeros((1, 2), "float32"), np.zeros((2, 2), "float32"), 1, backend="faiss")
    _, idx = search(np.ones((1, 2), "float32"), np.eye(2, dtype="float32"), 1)  # auto falls back to torch
    assert idx.shape == (1, 1)
