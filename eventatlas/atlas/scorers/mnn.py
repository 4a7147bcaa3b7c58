"""Mutual nearest neighbours of the type centroids.

``score[i, j] = 1 / max(r_row, r_col)`` where ``r_row`` is ``j``'s rank among ``i``'s candidates in ``B``
and ``r_col`` ``i``'s rank among ``j``'s candidates in ``A`` (by centroid cosine, ties share the best
rank). A mutual nearest pair scores 1; a pair each side ranks second, 1/2. Unlike the cosine itself it
is symmetric in what it asks of both inventories: a hub frame close to everything is nobody's mutual
neighbour.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from .base import Scores, TypeSet
from .centroid import similarity


def _ranks(S: np.ndarray, axis: int) -> np.ndarray:
    filled = np.where(np.isnan(S), -np.inf, S)
    return rankdata(-filled, method="min", axis=axis)


def score(A: TypeSet, B: TypeSet) -> Scores:
    S = similarity(A, B)
    if S.size == 0:
        return Scores(S)
    r = np.maximum(_ranks(S, 1), _ranks(S, 0)).astype(np.float64)
    out = 1.0 / r
    out[np.isnan(S)] = np.nan
    return Scores(out)
