"""How many clusters when the caller names none: the dataset's gold types when its mentions carry labels,
else the count whose clustering of a seeded sample has the best cosine silhouette (detected mentions of a
user's own text have no labels, and a linkage algorithm needs a count or a threshold).

The sample (at most ``sample`` points) bounds the cost: silhouette is O(n^2) and each candidate is one
clustering of the sample with the same algorithm, so the choice costs the same at 1,000 or 1,000,000
mentions. Ties go to the smaller count.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

GRID = (2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100)


def gold_types(mentions: str | Path) -> int:
    """The number of distinct primary labels among a mentions table's rows (0: unlabelled)."""
    import pyarrow.parquet as pq

    labels = pq.read_table(mentions, columns=["labels"])["labels"].to_pylist()
    return len({lab[0] for lab in labels if lab})


SAMPLE = 4000  # points the count is chosen on


def by_silhouette(X: np.ndarray, algorithm: str, *, seed: int = 0, sample: int = SAMPLE,
                  grid: Sequence[int] = GRID) -> tuple[int, dict[int, float]]:
    """(the chosen count, the cosine silhouette of each count tried) over a seeded sample of ``X``'s rows."""
    from sklearn.metrics import silhouette_score

    from . import cluster

    X = np.asarray(X, dtype=np.float32)
    n = len(X)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(n, sample), replace=False)) if n else []
    S = X[rows]
    scores: dict[int, float] = {}
    for k in (k for k in grid if 2 <= k < len(S)):
        labels = cluster(S, algorithm, n_clusters=k, seed=seed)
        if 1 < len(set(labels.tolist())) < len(S):
            scores[k] = float(silhouette_score(S, labels, metric="cosine"))
    if not scores:
        return 1, scores
    return max(scores, key=lambda k: (scores[k], -k)), scores


def edge_note(k: int, scores: dict[int, float]) -> str:
    """A warning when the chosen count is the largest tried: the silhouette was still rising there, so the grid's
    end, not the data, chose it (pass the count to override)."""
    return "; the largest count tried, the silhouette still rising: the grid's end chose it" \
        if scores and k == max(scores) and len(scores) > 1 else ""


def chosen_by_silhouette(X: np.ndarray, algorithm: str, *, seed: int = 0) -> tuple[int, str | None]:
    """(the count :func:`by_silhouette` chooses, why in words: the silhouettes tried and a flag when the grid's
    end chose it; None when too few points to compare counts)."""
    k, scores = by_silhouette(X, algorithm, seed=seed)
    if not scores:
        return k, None
    tried = ", ".join(f"{c}: {s:.3f}" for c, s in scores.items())
    return k, (f"the count with the best cosine silhouette on {min(len(X), SAMPLE)} sampled mentions ({tried})"
               f"{edge_note(k, scores)}")


def n_clusters_for(mentions: str | Path, X: np.ndarray, algorithm: str, *, seed: int = 0) -> tuple[int, str]:
    """(the count, how it was chosen, in words) for clustering ``X``, the embeddings of ``mentions``."""
    gold = gold_types(mentions)
    if gold:
        return gold, f"{gold} clusters: the number of gold types"
    k, why = chosen_by_silhouette(X, algorithm, seed=seed)
    if why is None:
        return k, f"1 cluster: {len(X)} mention(s) are too few to compare counts"
    return k, f"{k} clusters: no labels, so {why}"
