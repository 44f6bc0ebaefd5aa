"""Passage groups that share a topic, so composed questions stay coherent.

- `cluster`: MS MARCO-style. Dense embeddings (optionally of a random sample),
  reduced with TruncatedSVD, grouped with AgglomerativeClustering (Ward linkage;
  above a few thousand passages restricted to a k-nearest-neighbour graph so memory
  stays linear).
- `page`: NQ/Wikipedia-style. Successive passages with the same title form a group,
  cut into runs of at most `page_size`.
- `prefix`: the docid up to its last '/' names the group (the bundled sample).

Groups of fewer than two passages are dropped: no question can be composed from one.
`make_groups` applies the chosen strategy to a run's passages under `generate.*`.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from boolcl.data.spec import parse_data_spec
from boolcl.errors import DataError
from boolcl.generate.corpus import Passages

FULL_WARD_LIMIT = 5000  # above this many points, cluster on a kNN connectivity graph


@dataclass
class Group:
    gid: str
    members: list[int]  # indices into the passage list, in corpus order


def choose_strategy(grouping: str, corpus_spec: str, titles: list[str | None]) -> str:
    """`auto`: the sample's docid prefixes; pages where successive passages share a title (NQ); else clusters."""
    if grouping != "auto":
        return grouping
    spec = parse_data_spec(corpus_spec, files=True)
    if spec.kind == "sample":
        return "prefix"
    if spec.name == "boolquestions-msmarco":
        return "cluster"
    if any(a and a == b for a, b in zip(titles, titles[1:])):
        return "page"
    return "cluster"


def sample_indices(n: int, sample_size: int | None, seed: int) -> list[int]:
    if sample_size is None or sample_size >= n:
        return list(range(n))
    return sorted(random.Random(f"{seed}:sample").sample(range(n), sample_size))


def by_prefix(ids: list[str], indices: list[int]) -> list[Group]:
    groups: dict[str, list[int]] = {}
    for i in indices:
        prefix, sep, _ = ids[i].rpartition("/")
        groups.setdefault(prefix if sep else ids[i], []).append(i)
    return [Group(g, m) for g, m in groups.items() if len(m) >= 2]


def by_page(titles: list[str | None], indices: list[int], page_size: int) -> list[Group]:
    """Runs of successive passages with one title, cut into chunks of at most page_size."""
    groups: list[Group] = []
    run: list[int] = []

    def flush():
        for lo in range(0, len(run), page_size):
            chunk = run[lo:lo + page_size]
            if len(chunk) == 1 and groups and lo > 0:  # a lone tail joins the previous chunk of its page
                groups[-1].members.extend(chunk)
            elif len(chunk) >= 2:
                groups.append(Group(f"page{len(groups)}:{titles[chunk[0]]}", chunk))

    prev = object()
    for i in indices:
        t = titles[i]
        if t is None or not str(t).strip():
            flush()
            run, prev = [], object()
            continue
        if t != prev or (run and i != run[-1] + 1):
            flush()
            run = []
        run.append(i)
        prev = t
    flush()
    return groups


def by_clustering(emb: np.ndarray, indices: list[int], *, cluster_size: int, svd_dim: int, seed: int,
                  full_ward_limit: int = FULL_WARD_LIMIT) -> list[Group]:
    """Agglomerative clustering of SVD-reduced, unit-length embeddings of `indices`."""
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.decomposition import TruncatedSVD
    from sklearn.neighbors import kneighbors_graph

    x = np.asarray(emb[indices], dtype=np.float64)
    n = x.shape[0]
    if n < 2:
        return []
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    dim = min(svd_dim, x.shape[1] - 1, n - 1)
    if dim >= 2:
        x = TruncatedSVD(n_components=dim, random_state=seed).fit_transform(x)
    n_clusters = max(1, min(n, n // max(2, cluster_size)))
    connectivity = None
    if n > full_ward_limit:
        connectivity = kneighbors_graph(x, n_neighbors=min(15, n - 1), include_self=False)
    labels = AgglomerativeClustering(n_clusters=n_clusters, linkage="ward",
                                     connectivity=connectivity).fit_predict(x)
    members: dict[int, list[int]] = {}
    for row, label in enumerate(labels):
        members.setdefault(int(label), []).append(indices[row])
    groups = [m for m in members.values() if len(m) >= 2]
    groups.sort(key=lambda m: m[0])  # stable ids, independent of label numbering
    return [Group(f"cluster{k}", m) for k, m in enumerate(groups)]


def make_groups(cfg, passages: Passages, strategy: str, encoder, seed: int):
    """(groups, pool, pool embeddings) for one run; pool: the passages the groups were drawn from, sorted.

    `cluster` embeds a sample of `generate.sample_size` passages and returns those embeddings with
    their row numbers (mining reuses them); `page` / `prefix` sample whole groups instead and return
    None there. No group at all stops the run: nothing could be composed.
    """
    g = cfg.generate
    n = len(passages)
    if strategy == "cluster":
        pool = sample_indices(n, g.sample_size, seed)
        emb = encoder.encode([passages.text(i) for i in pool], "passages")
        row_of = {i: row for row, i in enumerate(pool)}
        groups = by_clustering(emb, list(range(len(pool))), cluster_size=int(g.cluster_size),
                               svd_dim=int(g.svd_dim), seed=seed)
        groups = [Group(x.gid, [pool[m] for m in x.members]) for x in groups]
        pool_emb = (emb, row_of)
    else:
        if strategy == "page":
            groups = by_page([d.title for d in passages.docs], list(range(n)), int(g.page_size))
        else:
            groups = by_prefix(passages.ids, list(range(n)))
        if g.sample_size is not None and n > g.sample_size:
            rng = random.Random(f"{seed}:sample")
            rng.shuffle(groups)
            chosen, total = [], 0
            for x in groups:
                if total >= g.sample_size:
                    break
                chosen.append(x)
                total += len(x.members)
            groups = sorted(chosen, key=lambda x: x.members[0])
        pool = sorted(i for x in groups for i in x.members)
        pool_emb = None
    if not groups:
        raise DataError(passages.source, None, f"no group of two or more passages (grouping={strategy}): "
                        f"{len(passages)} usable passages; try generate.grouping=cluster or a larger corpus")
    return groups, pool, pool_emb
