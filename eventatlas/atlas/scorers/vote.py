"""Mention-level vote: each mention of ``A``'s type ``i`` retrieves its ``k`` nearest mentions of ``B``
(inner product on L2-normalised vectors = cosine; faiss ``IndexFlatIP``, exact).

``score[i, j]`` = the share of type ``i``'s ``n_i * k`` retrievals that are mentions of ``B``'s type ``j``
(a row sums to 1 over ``B``'s types). ``k`` is capped at ``B``'s number of mentions. The evidence of a
pair is its most similar retrieved (mention of ``i``, mention of ``j``) pairs.
"""
from __future__ import annotations

import numpy as np

from .base import Scores, TypeSet

N_EVIDENCE = 2


def score(A: TypeSet, B: TypeSet, k: int = 10) -> Scores:
    import faiss

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    out = np.full((len(A.types), len(B.types)), np.nan)
    if not len(A.X) or not len(B.X):
        return Scores(out)
    k = min(k, len(B.X))
    index = faiss.IndexFlatIP(B.X.shape[1])
    index.add(np.ascontiguousarray(B.X, dtype=np.float32))
    sims, nn = index.search(np.ascontiguousarray(A.X, dtype=np.float32), k)
    votes = np.zeros((len(A.types), len(B.types)))
    np.add.at(votes, (np.repeat(A.owner, k), B.owner[nn.reshape(-1)]), 1.0)
    n = A.counts()
    has = n > 0
    out[has] = votes[has] / (n[has, None] * k)
    best: dict[tuple[int, int], list[tuple[float, str, str]]] = {}
    for r in range(len(A.X)):
        for s, c in zip(sims[r], nn[r]):
            key = (int(A.owner[r]), int(B.owner[c]))
            best.setdefault(key, []).append((-float(s), A.mention_ids[r], B.mention_ids[c]))
    evidence = {}
    for key, lst in best.items():
        lst.sort()
        evidence[key] = list(dict.fromkeys(m for _, a, b in lst[:N_EVIDENCE] for m in (a, b)))
    return Scores(out, evidence)
