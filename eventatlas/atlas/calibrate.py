"""Calibrated link scores: raw scorer outputs on one comparable scale.

Raw scores are not comparable across scorers (a cosine of 0.6 and a vote share of 0.6 mean different
things) nor across inventory pairs. Two maps, both monotone within a source type's row, so they never
change which target ranks first:

* :func:`rank_normalise` (the default, needs no gold): ``1 - (rank - 1) / (n - 1)`` within the source
  type's row (ties share the best rank); 1 for the top target, 0 for the last, ``nan`` stays ``nan``.
* :class:`IsotonicMap` (when a dev part of the gold is given): ``P(gold link | raw score)``, an
  isotonic (monotone non-decreasing) regression fitted on every (dev source type, target) pair,
  positives = the gold frames. Its output reads as a probability; it is fitted on dev types only.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
from scipy.stats import rankdata


def rank_normalise(S: np.ndarray) -> np.ndarray:
    S = np.asarray(S, dtype=np.float64)
    out = np.full(S.shape, np.nan)
    for i, row in enumerate(S):
        ok = ~np.isnan(row)
        n = int(ok.sum())
        if n == 0:
            continue
        if n == 1:
            out[i, ok] = 1.0
            continue
        r = rankdata(-row[ok], method="min")
        out[i, ok] = 1.0 - (r - 1) / (n - 1)
    return out


class IsotonicMap:
    """Monotone map raw score -> probability of a gold link, fitted on labelled pairs."""

    def __init__(self, raw: Iterable[float], is_gold: Iterable[bool]):
        from sklearn.isotonic import IsotonicRegression

        x = np.asarray(list(raw), dtype=np.float64)
        y = np.asarray(list(is_gold), dtype=np.float64)
        ok = ~np.isnan(x)
        if ok.sum() < 2 or len(set(y[ok].tolist())) < 2:
            raise ValueError("an isotonic calibration needs at least one gold and one non-gold scored pair")
        self.model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        self.model.fit(x[ok], y[ok])
        self.n_pairs, self.n_gold = int(ok.sum()), int(y[ok].sum())

    def __call__(self, S: np.ndarray) -> np.ndarray:
        S = np.asarray(S, dtype=np.float64)
        out = np.full(S.shape, np.nan)
        ok = ~np.isnan(S)
        out[ok] = self.model.predict(S[ok])
        return out

    @classmethod
    def from_gold(cls, S: np.ndarray, rows: Iterable[int], gold_cols: dict[int, set[int]]) -> "IsotonicMap":
        """Fit on the rows ``rows`` of ``S`` (the dev source types); ``gold_cols[i]`` = their gold targets."""
        raw, lab = [], []
        for i in rows:
            raw += S[i].tolist()
            lab += [j in gold_cols.get(i, set()) for j in range(S.shape[1])]
        return cls(raw, lab)
