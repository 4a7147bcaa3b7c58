"""Frame-induction clustering with cuts transferred from a development set (Yamada et al. 2023).

Distances are cosine, linkage is average (dense SciPy/fastcluster linkage up to
``EVENTATLAS_MAX_DENSE_N``, above it the exact O(N·d) :func:`.nnchain.average_linkage`), and a cut
applies the merges whose height is *below* a threshold (:func:`.nnchain.cut` semantics).

* One-step: :func:`height_for_k` gives the threshold at which a linkage has exactly ``k`` clusters
  (dev: ``k`` = dev's gold frame count); :func:`one_step` cuts another set's linkage at it.
* Two-step: (1) per group (verb) average linkage cut at one global threshold forms pseudo-LUs;
  :func:`tune_group_threshold` picks it so that dev gets as many pseudo-LUs as it has gold
  verb–frame pairs; (2) each pseudo-LU is the mean of its members' vectors, and average linkage
  over the pseudo-LU means is cut at the first merge where the fraction of pseudo-LU pairs in one
  cluster reaches ``pair_fraction`` (dev's fraction of verb–frame pairs that share a frame,
  :func:`gold_pair_fraction`): :func:`pair_fraction_cut`, :func:`two_step`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from .dense import average_linkage as dense_linkage
from .dense import max_dense_n
from .nnchain import average_linkage as chain_linkage
from .nnchain import cut

__all__ = ["linkage", "height_for_k", "one_step", "group_linkages", "tune_group_threshold", "pseudo_lus",
           "gold_pair_fraction", "pair_fraction_cut", "two_step", "TwoStepInfo"]


def _unit(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    n = np.linalg.norm(X, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return X / n


def linkage(X: np.ndarray) -> np.ndarray:
    """Average-linkage (cosine) SciPy linkage matrix of the rows of ``X`` (>= 2 rows)."""
    X = np.asarray(X)
    if X.shape[0] <= max_dense_n():
        return dense_linkage(X, metric="cosine")
    return chain_linkage(X)  # O(N*d) memory: a 25k-instance test fold never builds N x N


def height_for_k(Z: np.ndarray, k: int) -> float:
    """A threshold at which ``cut(Z, distance_threshold=t)`` gives ``k`` clusters: the midpoint
    between the last merge applied and the first left out (ties at that height give fewer merges)."""
    Z = np.asarray(Z, dtype=np.float64)
    n = Z.shape[0] + 1
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be in [1, {n}]")
    m = n - int(k)  # merges to apply
    h = Z[:, 2]
    if m == 0:
        return float(h[0]) if len(h) else 0.0
    if m == n - 1:
        return float(h[-1]) + 1e-9
    return float((h[m - 1] + h[m]) / 2.0)


def one_step(X: np.ndarray, threshold: float) -> np.ndarray:
    """Labels of the rows of ``X``: average linkage cut at ``threshold``."""
    if np.shape(X)[0] < 2:
        return np.zeros(np.shape(X)[0], dtype=np.int64)
    return cut(linkage(X), distance_threshold=threshold)


def group_linkages(X: np.ndarray, groups: Sequence[Hashable]) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """(row indices, linkage or None for a singleton) per group, groups in sorted order."""
    groups = np.asarray(groups, dtype=object)
    keys, inv = np.unique(groups.astype(str), return_inverse=True)
    out = []
    for g in range(len(keys)):
        idx = np.flatnonzero(inv == g)
        out.append((idx, linkage(X[idx]) if len(idx) > 1 else None))
    return out


def tune_group_threshold(X: np.ndarray, groups: Sequence[Hashable], target: int) -> float:
    """The global per-group threshold at which the groups' cuts give ``target`` sub-clusters in total."""
    n = np.shape(X)[0]
    heights = np.sort(np.concatenate([Z[:, 2] for _, Z in group_linkages(X, groups) if Z is not None] or
                                     [np.zeros(0)]))
    n_groups = len(set(map(str, groups)))
    target = int(min(max(target, n_groups), n))
    m = n - target  # merges below the threshold
    if m == 0:
        return float(heights[0]) if len(heights) else 0.0
    if m == len(heights):
        return float(heights[-1]) + 1e-9
    return float((heights[m - 1] + heights[m]) / 2.0)


def pseudo_lus(X: np.ndarray, groups: Sequence[Hashable], threshold: float) -> np.ndarray:
    """Global pseudo-LU id per row: each group's average linkage cut at ``threshold``."""
    out = np.empty(np.shape(X)[0], dtype=np.int64)
    nxt = 0
    for idx, Z in group_linkages(X, groups):
        lab = np.zeros(len(idx), dtype=np.int64) if Z is None else cut(Z, distance_threshold=threshold)
        out[idx] = lab + nxt
        nxt += int(lab.max()) + 1
    return out


def gold_pair_fraction(groups: Sequence[Hashable], frames: Sequence[Hashable]) -> float:
    """Among all pairs of distinct (group, frame) pairs, the fraction whose two frames are equal."""
    pairs = set(zip(map(str, groups), map(str, frames)))
    m = len(pairs)
    if m < 2:
        return 1.0
    counts = np.unique([f for _, f in pairs], return_counts=True)[1].astype(np.float64)
    return float((counts * (counts - 1) / 2).sum() / (m * (m - 1) / 2))


def pair_fraction_cut(Z: np.ndarray, fraction: float) -> np.ndarray:
    """Labels after the fewest merges (in linkage order) at which the fraction of same-cluster
    point pairs reaches ``fraction``."""
    Z = np.asarray(Z, dtype=np.float64)
    n = Z.shape[0] + 1
    size = np.ones(2 * n - 1)
    for i in range(n - 1):
        size[n + i] = size[int(Z[i, 0])] + size[int(Z[i, 1])]
    added = size[Z[:, 0].astype(int)] * size[Z[:, 1].astype(int)]  # pairs joined by each merge
    frac = np.cumsum(added) / (n * (n - 1) / 2)
    if fraction <= 0:
        return cut(Z, n_clusters=n)
    m = int(np.searchsorted(frac, fraction - 1e-12, side="left")) + 1  # merges applied
    return cut(Z, n_clusters=n - min(m, n - 1))


@dataclass
class TwoStepInfo:
    n_pseudo_lus: int
    group_threshold: float
    pair_fraction: float
    n_clusters: int


def two_step(X: np.ndarray, groups: Sequence[Hashable], group_threshold: float, pair_fraction: float,
             ) -> tuple[np.ndarray, TwoStepInfo]:
    """Instance labels of the two-step clustering (see the module docstring)."""
    X = np.asarray(X)
    sub = pseudo_lus(X, groups, group_threshold)
    k = int(sub.max()) + 1
    Xu = _unit(X)
    means = np.zeros((k, X.shape[1]))
    np.add.at(means, sub, Xu)
    means /= np.bincount(sub, minlength=k)[:, None]
    top = np.zeros(k, dtype=np.int64) if k < 2 else pair_fraction_cut(linkage(means), pair_fraction)
    labels = top[sub]
    return labels, TwoStepInfo(k, float(group_threshold), float(pair_fraction), int(len(np.unique(labels))))
