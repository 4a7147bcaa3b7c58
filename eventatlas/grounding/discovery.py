"""Zero-shot hierarchy discovery from retrieval (Ou et al. 2023, sec. 5.4).

For events e_i, e_j with M_i, M_j the sets of mentions that retrieve them in their top-``k`` (4),

    h(e_i, e_j) = |M_i ∩ M_j| / |M_i|

(how often a mention of e_i also brings e_j). Each non-root event's candidate parents are ranked by h
(ties by candidate index); Recall@k = share of non-root events whose gold parent is in the top k. An
event no mention retrieves has no ranking and counts as a miss. Co-occurrences are counted sparsely
(O(mentions x k²)), never as an events x events matrix.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from ..evaluation import metrics as M


def retrieved_sets(topk: np.ndarray, k: int = 4) -> dict[int, set[int]]:
    """event -> the mentions (row numbers) that have it in their top ``k``."""
    out: dict[int, set[int]] = defaultdict(set)
    for m, row in enumerate(np.asarray(topk)[:, :k]):
        for e in row:
            if e >= 0:
                out[int(e)].add(m)
    return dict(out)


def h_scores(sets: dict[int, set[int]]) -> dict[int, dict[int, float]]:
    """h(e_i, e_j) for every pair with |M_i ∩ M_j| > 0 (i != j)."""
    co: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    by_mention: dict[int, list[int]] = defaultdict(list)
    for e, ms in sets.items():
        for m in ms:
            by_mention[m].append(e)
    for es in by_mention.values():
        for a in es:
            for b in es:
                if a != b:
                    co[a][b] += 1
    return {a: {b: n / len(sets[a]) for b, n in row.items()} for a, row in co.items()}


def rank_parents(h: dict[int, dict[int, float]], event: int) -> list[int]:
    row = h.get(event, {})
    return [b for b, _ in sorted(row.items(), key=lambda x: (-x[1], x[0]))]


def discovery_scores(topk: np.ndarray, parent: np.ndarray, events: Sequence[int], *, k_retrieve: int = 4,
                     ks: Sequence[int] = (1, 4, 8, 16)) -> dict[str, float]:
    """Recall@k of the gold parent of each non-root event in ``events`` (the split's events)."""
    h = h_scores(retrieved_sets(topk, k_retrieve))
    targets = [e for e in events if parent[e] >= 0]
    if not targets:
        raise ValueError("no non-root event to discover a parent for")
    out = {f"discovery_recall@{k}": float(np.mean([M.recall_at_k(rank_parents(h, e), {int(parent[e])}, k) for e in targets]))
           for k in ks}
    out["discovery_events"] = float(len(targets))
    out["discovery_linked"] = float(np.mean([e in h for e in targets]))
    return out
