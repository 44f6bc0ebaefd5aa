"""Paired significance tests over queries: is run B's mean really different from run A's?

Both tests take two runs' per-query values of one measure and test the difference of means
(H0: the runs are exchangeable per query, i.e. the mean paired difference is zero), two-sided:

- `randomization_test`: the paired randomization (sign-flip) test of Fisher / Smucker et al.
  (CIKM 2007). Each query's difference keeps or flips its sign at random; the p-value is the
  share of sign patterns whose |mean| reaches the observed |mean|. When every pattern of the
  non-zero differences fits in `samples` (2**m <= samples) the test is exact; otherwise it is
  Monte Carlo with the usual +1 correction, p = (1 + hits) / (1 + samples), so p is never 0.
  It equals `scipy.stats.permutation_test(..., permutation_type='samples')` on the same data
  (exactly when both enumerate, within Monte Carlo error otherwise).
- `bootstrap_test`: the paired bootstrap test (Efron & Tibshirani 1993, 16.4; Sakai, SIGIR
  2006): resample the differences shifted to mean zero, p = (1 + hits) / (1 + samples) with
  hits = #{|mean*| >= |observed mean|}; the same resamples, unshifted, give a percentile
  confidence interval for the difference.

Queries present in only one run are left out (the test is over the intersection) and counted,
and a measure with no values (NegRecall for a type without explicit negatives) gives no test
(p = None) rather than an error. Identical runs give p = 1. Everything is seeded and
vectorised with numpy, in chunks that keep memory flat for large query sets.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np

TESTS = ("randomization", "bootstrap")
_CHUNK_ELEMENTS = 1 << 22  # resamples x queries per chunk (~32 MB of float64)


@dataclass
class PairedTest:
    """One paired comparison of run B against run A (a baseline) on one measure and group."""

    test: str
    n: int  # queries with a value in both runs (the test is over these)
    only_a: int  # queries with a value in A only (left out)
    only_b: int  # queries with a value in B only (left out)
    mean_a: float | None  # means over the n paired queries
    mean_b: float | None
    delta: float | None  # mean_b - mean_a
    p_value: float | None  # two-sided; None when n == 0
    samples: int  # resamples drawn (or sign patterns enumerated when exact)
    exact: bool = False
    ci_low: float | None = None  # bootstrap percentile interval of delta (bootstrap test only)
    ci_high: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _chunks(total: int, n: int):
    step = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, total, step):
        yield min(step, total - start)


def _as_diffs(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired values need two 1-d arrays of equal length, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("paired values must be finite numbers")
    return b - a


def randomization_test(a, b, *, samples: int = 10000, seed: int = 0) -> tuple[float, int, bool]:
    """Two-sided paired sign-flip test of mean(b - a) = 0; returns (p, patterns used, exact)."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    d = _as_diffs(a, b)
    if d.size == 0:
        raise ValueError("no paired values")
    d = d[d != 0]  # a zero difference is the same under either sign
    m = d.size
    if m == 0:
        return 1.0, 1, True
    total = float(d.sum())
    observed = abs(total)
    tol = 1e-9 * float(np.abs(d).sum())  # ties of equal real sums must count as reached
    # sum with the signs of `flip` negated: total - 2 * flip @ d
    if m <= 62 and (1 << m) <= samples:  # every sign pattern: exact
        patterns = 1 << m
        hits, step = 0, max(1, _CHUNK_ELEMENTS // m)
        for start in range(0, patterns, step):
            codes = np.arange(start, min(start + step, patterns), dtype=np.int64)[:, None]
            flip = ((codes >> np.arange(m, dtype=np.int64)) & 1).astype(np.float64)
            hits += int(np.count_nonzero(np.abs(total - 2.0 * (flip @ d)) >= observed - tol))
        return hits / patterns, patterns, True
    rng = np.random.default_rng(seed)
    hits = 0
    for size in _chunks(samples, m):
        flip = np.unpackbits(rng.integers(0, 256, size=(size, (m + 7) // 8), dtype=np.uint8),
                             axis=1, count=m).astype(np.float64)
        hits += int(np.count_nonzero(np.abs(total - 2.0 * (flip @ d)) >= observed - tol))
    return (hits + 1) / (samples + 1), samples, False


def bootstrap_test(a, b, *, samples: int = 10000, seed: int = 0,
                   confidence: float = 0.95) -> tuple[float, tuple[float, float]]:
    """Two-sided paired bootstrap test of mean(b - a) = 0; returns (p, percentile CI of the delta)."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    d = _as_diffs(a, b)
    n = d.size
    if n == 0:
        raise ValueError("no paired values")
    mean = float(d.mean())
    if not np.any(d != d[0]):  # constant differences: every resample has the same mean
        return (1.0 if mean == 0 else 1.0 / (samples + 1)), (mean, mean)
    shifted = d - mean
    tol = 1e-9 * float(np.abs(d).mean())
    rng = np.random.default_rng(seed)
    means = np.empty(samples, dtype=np.float64)
    done = 0
    for size in _chunks(samples, n):
        idx = rng.integers(0, n, size=(size, n))
        means[done:done + size] = shifted[idx].mean(axis=1)
        done += size
    hits = int(np.count_nonzero(np.abs(means) >= abs(mean) - tol))
    tail = (1 - confidence) / 2
    low, high = np.quantile(means + mean, [tail, 1 - tail])
    return (hits + 1) / (samples + 1), (float(low), float(high))


def paired_test(a: Mapping[str, float | None], b: Mapping[str, float | None], *, test: str = "randomization",
                samples: int = 10000, seed: int = 0, qids: Sequence[str] | None = None) -> PairedTest:
    """Test run B against run A on per-query values `{qid: value}` (None or absent: no value).

    Only queries with a value in both runs are paired (restricted to `qids` when given); the
    others are counted in `only_a` / `only_b`. With no paired query the result has n = 0 and
    p_value = None.
    """
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; use one of: {', '.join(TESTS)}")
    keep = None if qids is None else set(qids)
    has_a = {q for q, v in a.items() if v is not None and (keep is None or q in keep)}
    has_b = {q for q, v in b.items() if v is not None and (keep is None or q in keep)}
    both = sorted(has_a & has_b)
    base = dict(test=test, n=len(both), only_a=len(has_a - has_b), only_b=len(has_b - has_a))
    if not both:
        return PairedTest(**base, mean_a=None, mean_b=None, delta=None, p_value=None, samples=0)
    va = np.array([a[q] for q in both], dtype=np.float64)
    vb = np.array([b[q] for q in both], dtype=np.float64)
    means = dict(mean_a=float(va.mean()), mean_b=float(vb.mean()), delta=float((vb - va).mean()))
    if test == "randomization":
        p, used, exact = randomization_test(va, vb, samples=samples, seed=seed)
        return PairedTest(**base, **means, p_value=p, samples=used, exact=exact)
    p, (low, high) = bootstrap_test(va, vb, samples=samples, seed=seed)
    return PairedTest(**base, **means, p_value=p, samples=samples, ci_low=low, ci_high=high)
