"""Clustering of event-mention embeddings (dense paths; scalable paths live beside).

``cluster(X, algorithm, n_clusters=None, *, distance_threshold=None, k=None, metric="cosine",
seed=0, **kw) -> np.ndarray[int]`` returns labels 0..K-1 numbered by each cluster's first
(lowest-index) member, so equal partitions give equal label vectors.

Algorithms (``ALGORITHMS``):
* ``agglomerative`` — average linkage on cosine (or euclidean) distance; equals sklearn's
  ``AgglomerativeClustering(metric=..., linkage="average")``. ``metric="precomputed"``:
  X is a square distance matrix, symmetrised by averaging (D + Dᵀ)/2.
* ``manifold`` — seed-000 manifold clustering: UMAP membership weights over each point's
  ``k`` nearest neighbours (umap ``n_neighbors`` convention, default N = all points),
  average linkage on 1 − W read from the upper triangle only, like sklearn on the
  unsymmetrised matrix. ``manifold_sym`` uses the fuzzy union W + Wᵀ − W∘Wᵀ instead.
  With ``metric="precomputed"`` row i of the (possibly asymmetric) matrix is i's view.
* ``affinity`` — affinity propagation on cosine similarity; it chooses its own number of
  clusters, so ``n_clusters``/``distance_threshold`` are ignored. ``seed`` is its
  ``random_state``; kw: ``damping`` (0.5–1), ``preference`` (default median), ``max_iter``.

Exactly one of ``n_clusters`` / ``distance_threshold`` is required for the linkage algorithms,
which are deterministic (``seed`` is accepted for a uniform call signature).

All dense paths are O(N²) in memory and refuse N above ``EVENTATLAS_MAX_DENSE_N``
(default 20,000; affinity: ``EVENTATLAS_MAX_AFFINITY_N``, default 10,000) with
:class:`DenseSizeError`. Measured peak RSS of the whole process at N = 20,000, d = 384
(``/usr/bin/time -v``): agglomerative 1.8 GiB, manifold 1.9 GiB, manifold_sym 1.9 GiB.
"""
from __future__ import annotations

import numpy as np

from .affinity import affinity, max_affinity_n
from .dense import (
    DenseSizeError,
    agglomerative,
    average_linkage,
    condensed_distances,
    cut,
    cut_by_k,
    cut_by_threshold,
    max_dense_n,
    relabel_first_seen,
)
from .manifold import manifold_cluster, manifold_weights

ALGORITHMS = ("agglomerative", "manifold", "manifold_sym", "affinity")

__all__ = [
    "ALGORITHMS",
    "cluster",
    "DenseSizeError",
    "affinity",
    "agglomerative",
    "average_linkage",
    "condensed_distances",
    "cut",
    "cut_by_k",
    "cut_by_threshold",
    "manifold_cluster",
    "manifold_weights",
    "max_affinity_n",
    "max_dense_n",
    "relabel_first_seen",
]


def cluster(
    X,
    algorithm: str,
    n_clusters: int | None = None,
    *,
    distance_threshold: float | None = None,
    k: int | None = None,
    metric: str = "cosine",
    seed: int = 0,
    **kw,
) -> np.ndarray:
    """Dispatch to one clustering algorithm (see module docstring). Returns int64 labels."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown clustering algorithm {algorithm!r}; choose one of {ALGORITHMS}")
    if k is not None and algorithm not in ("manifold", "manifold_sym"):
        raise ValueError(f"k (neighbours) only applies to the manifold algorithms, not {algorithm!r}")
    # Scalable paths: exact O(N*d) NN-chain above EVENTATLAS_SCALABLE_MIN_N or the
    # dense ceiling; sparse manifold when k < N or N is above the ceiling. Same results.
    if algorithm == "agglomerative":
        from .nnchain import maybe_agglomerative

        labels = maybe_agglomerative(X, n_clusters, distance_threshold=distance_threshold, metric=metric, **kw)
        if labels is not None:
            return labels
        return agglomerative(X, n_clusters, distance_threshold=distance_threshold, metric=metric, **kw)
    if algorithm in ("manifold", "manifold_sym"):
        from .sparse_manifold import maybe_cluster

        labels = maybe_cluster(
            X, n_clusters, distance_threshold=distance_threshold, k=k, metric=metric,
            symmetrize=(algorithm == "manifold_sym"), **kw,
        )
        if labels is not None:
            return labels
        return manifold_cluster(
            X,
            n_clusters,
            distance_threshold=distance_threshold,
            k=k,
            metric=metric,
            symmetrize=(algorithm == "manifold_sym"),
            **kw,
        )
    from .guards import check_dense_budget  # ~4 float64 N x N arrays in sklearn: 32 bytes per entry

    check_dense_budget(int(np.shape(X)[0]), 32, "affinity propagation")
    return affinity(X, metric=metric, seed=seed, **kw)
