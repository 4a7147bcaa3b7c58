"""Unsupervised early stopping (no unseen labels are used).

After each epoch the unseen mentions are clustered by average-linkage agglomerative clustering on
the attention distance 1 - S at several cluster counts, and the cosine silhouette of the encoder
features F under those clusterings is the epoch's score. The curve is smoothed with a sliding
window (5 epochs, centred, truncated at the ends as in the published ``get_stopping_point.py``).

rule="paper": take the best window, then the best epoch inside it.
rule="code":  take the centre of the best window (what the published code does).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.cluster.hierarchy import cut_tree, linkage
from sklearn.metrics import silhouette_score

RULES = ("paper", "code")


def attention_linkage(s: np.ndarray) -> np.ndarray:
    """Average-linkage tree on 1 - S. S is not symmetric: like sklearn with a precomputed matrix,
    only the upper triangle (i < j) is read. S is unbounded, so 1 - S can be negative; average
    linkage commutes with adding a constant to every distance, so the distances are shifted to
    start at 0 (same tree, and scipy rejects negative merge heights)."""
    n = s.shape[0]
    iu = np.triu_indices(n, k=1)
    d = (1.0 - s.astype(np.float64))[iu]
    if d.size and d.min() < 0:
        d = d - d.min()
    return linkage(d, method="average")


def epoch_silhouettes(f: np.ndarray, s: np.ndarray, n_clusters: Sequence[int]) -> dict[int, float]:
    """Cosine silhouette of ``f`` for the agglomerative clustering of 1 - ``s`` at each count."""
    n = f.shape[0]
    counts = [int(c) for c in n_clusters if 2 <= int(c) <= n - 1]
    if not counts:
        raise ValueError(f"no usable cluster count in {list(n_clusters)} for {n} mentions")
    z = attention_linkage(s)
    cuts = cut_tree(z, n_clusters=counts)
    out: dict[int, float] = {}
    for col, c in enumerate(counts):
        out[c] = float(silhouette_score(f, cuts[:, col], metric="cosine"))
    return out


def smooth(scores: Sequence[float], window: int = 5) -> np.ndarray:
    """Centred moving average, truncated at the ends (mean of the epochs that exist)."""
    x = np.asarray(scores, dtype=float)
    h = window // 2
    return np.array([x[max(0, i - h): i + h + 1].mean() for i in range(len(x))])


def choose_epoch(scores: Sequence[float], window: int = 5, rule: str = "paper") -> int:
    """Index of the chosen epoch (0-based) from per-epoch silhouette scores; ties -> earliest."""
    if rule not in RULES:
        raise ValueError(f"unknown stopping rule {rule!r}; known: {RULES}")
    if len(scores) == 0:
        raise ValueError("no epoch scores to choose from")
    sm = smooth(scores, window)
    centre = int(np.argmax(sm))
    if rule == "code":
        return centre
    h = window // 2
    lo, hi = max(0, centre - h), min(len(scores), centre + h + 1)
    return lo + int(np.argmax(np.asarray(scores[lo:hi], dtype=float)))
