"""Two-step clustering (frame-induction scheme): X-means per group, then average linkage.

Step 1: within each group (e.g. all mentions of one verb / lexical unit) X-means
(Pelleg & Moore 2000) picks the number of sub-clusters by BIC: start from
``k_init`` k-means clusters and keep splitting each cluster in two (2-means)
while the split improves the BIC of that cluster's points under the identical
spherical Gaussian model; stop at ``k_max`` or when nothing improves.
Step 2: the step-1 clusters of all groups are merged by *group-average*
linkage over their instances on cosine distance - exactly average linkage
between sets of mentions, computed from the step-1 cluster sums with
:func:`eventatlas.cluster.nnchain.average_linkage` (no N x N matrix) - and cut
to ``n_clusters`` or at ``distance_threshold``.

Seeds: every k-means call gets ``seed`` (plus a fixed per-call offset), so a run
is reproducible; the seed is part of the returned info.
"""
from __future__ import annotations

import math

import numpy as np
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from .knn import normalise_rows
from .nnchain import average_linkage, cut

__all__ = ["bic_spherical", "xmeans", "two_step"]


def bic_spherical(X: np.ndarray, labels: np.ndarray, centers: np.ndarray) -> float:
    """Pelleg & Moore's BIC of a K-cluster identical spherical Gaussian model (higher is better)."""
    R, d = X.shape
    K = centers.shape[0]
    if R <= K:
        return -math.inf
    sse = float(((X - centers[labels]) ** 2).sum())
    var = sse / (d * (R - K))  # per-dimension variance, MLE with K centres estimated
    if var <= 0.0:
        var = 1e-300  # all points on their centres: likelihood maximal, not undefined
    counts = np.bincount(labels, minlength=K).astype(np.float64)
    counts = counts[counts > 0]
    loglik = float(
        np.sum(counts * np.log(counts))
        - R * math.log(R)
        - R * d / 2.0 * math.log(2.0 * math.pi * var)
        - d * (R - K) / 2.0
    )
    n_params = (K - 1) + K * d + 1
    return loglik - n_params / 2.0 * math.log(R)


def _kmeans(X: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    # Per-group k-means runs are tiny: an OpenMP team per call costs more than it
    # saves (badly so on a busy machine), so they run single-threaded.
    with threadpool_limits(1):
        km = KMeans(n_clusters=k, n_init=3, random_state=seed).fit(X)
    return km.labels_.astype(np.int64), km.cluster_centers_


def xmeans(X: np.ndarray, *, k_init: int = 1, k_max: int | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """X-means labels (0..K-1) and centres of the rows of X (Euclidean; pass unit rows for cosine)."""
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    if n == 0:
        raise ValueError("xmeans: no points")
    k_max = n if k_max is None else max(1, min(int(k_max), n))
    k_init = max(1, min(int(k_init), k_max))
    if n == 1 or k_max == 1:
        return np.zeros(n, dtype=np.int64), X.mean(axis=0, keepdims=True)
    labels, centers = _kmeans(X, k_init, seed) if k_init > 1 else (np.zeros(n, dtype=np.int64), X.mean(0, keepdims=True))
    calls = 0
    while True:
        K = centers.shape[0]
        new_labels = labels.copy()
        new_centers: list[np.ndarray] = []
        split_any = False
        for c in range(K):
            idx = np.nonzero(labels == c)[0]
            pts = X[idx]
            if (
                len(idx) >= 4
                and K + len(new_centers) - c < k_max  # a split keeps the total within k_max
                and np.ptp(pts, axis=0).max() > 0
            ):
                calls += 1
                sub, sub_c = _kmeans(pts, 2, seed + 7919 * calls)
                parent = bic_spherical(pts, np.zeros(len(idx), dtype=np.int64), pts.mean(0, keepdims=True))
                child = bic_spherical(pts, sub, sub_c)
                if child > parent and np.bincount(sub, minlength=2).min() > 0:
                    base = len(new_centers)
                    new_labels[idx] = base + sub
                    new_centers.extend([sub_c[0], sub_c[1]])
                    split_any = True
                    continue
            new_labels[idx] = len(new_centers)
            new_centers.append(pts.mean(axis=0))
        labels, centers = new_labels, np.vstack(new_centers)
        if not split_any or centers.shape[0] >= k_max:
            break
        # Refine all centres jointly (the "improve params" step of X-means).
        with threadpool_limits(1):
            km = KMeans(n_clusters=centers.shape[0], init=centers, n_init=1, random_state=seed).fit(X)
        labels, centers = km.labels_.astype(np.int64), km.cluster_centers_
        used = np.unique(labels)
        if used.size < centers.shape[0]:  # drop empty clusters
            remap = np.full(centers.shape[0], -1)
            remap[used] = np.arange(used.size)
            labels, centers = remap[labels], centers[used]
    return labels, centers


def two_step(
    X: np.ndarray,
    groups,
    n_clusters: int | None = None,
    *,
    distance_threshold: float | None = None,
    k_max: int | None = None,
    seed: int = 0,
    return_info: bool = False,
):
    """Two-step clustering labels (0..K-1 by first member) of the rows of X.

    ``groups``: one hashable key per row (e.g. the trigger lemma); X-means runs per group.
    """
    Xn = normalise_rows(X).astype(np.float64)
    groups = np.asarray(groups)
    n = Xn.shape[0]
    if groups.shape[0] != n:
        raise ValueError(f"groups has {groups.shape[0]} entries for {n} rows")
    keys, ginv = np.unique(groups, return_inverse=True)
    sub = np.empty(n, dtype=np.int64)
    sums: list[np.ndarray] = []
    sizes: list[int] = []
    for g in range(keys.size):
        idx = np.nonzero(ginv == g)[0]
        lab, _ = xmeans(Xn[idx], k_max=k_max, seed=seed)
        for c in range(lab.max() + 1):
            members = idx[lab == c]
            sub[members] = len(sizes)
            sums.append(Xn[members].sum(axis=0))
            sizes.append(members.size)
    m = len(sizes)
    if m == 1:
        labels = np.zeros(n, dtype=np.int64)
    else:
        Z = average_linkage(np.vstack(sums), sizes=np.asarray(sizes))
        if n_clusters is not None:
            n_clusters = min(int(n_clusters), m)
        top = cut(Z, n_clusters=n_clusters, distance_threshold=distance_threshold)
        labels = top[sub]
    # renumber by first member
    _, first = np.unique(labels, return_index=True)
    order = np.argsort(first)
    remap = np.empty(order.size, dtype=np.int64)
    remap[order] = np.arange(order.size)
    labels = remap[np.searchsorted(np.unique(labels), labels)]
    if return_info:
        return labels, {"n_groups": int(keys.size), "n_step1_clusters": m, "seed": seed}
    return labels
