"""Affinity propagation on cosine similarity (dense; picks its own number of clusters).

sklearn's ``AffinityPropagation(affinity="precomputed")`` keeps about four N×N float64
matrices (S, responsibilities, availabilities, a temporary): 32·N² bytes, 3.2 GB at
N = 10,000, 12.8 GB at 20,000. Hence its own, lower ceiling (default 10,000;
``EVENTATLAS_MAX_AFFINITY_N`` or ``max_n=``); above it we refuse and point to
agglomerative/manifold clustering.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
from sklearn.cluster import AffinityPropagation
from sklearn.exceptions import ConvergenceWarning

from .dense import DenseSizeError, _unit_rows, as_points, as_square, relabel_first_seen

DEFAULT_MAX_AFFINITY_N = 10_000
MAX_AFFINITY_N_ENV = "EVENTATLAS_MAX_AFFINITY_N"


def max_affinity_n(override: int | None = None) -> int:
    if override is not None:
        return int(override)
    raw = os.environ.get(MAX_AFFINITY_N_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_AFFINITY_N
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{MAX_AFFINITY_N_ENV}={raw!r} is not an integer") from None


def similarity_matrix(X, metric: str = "cosine") -> np.ndarray:
    """float64 similarity S: cosine similarity of rows, or −D for a precomputed distance matrix
    (AP only compares differences of S, so −D and 1 − D give the same result)."""
    if metric == "precomputed":
        return -np.asarray(as_square(X), dtype=np.float64)
    if metric != "cosine":
        raise ValueError(f"affinity: metric must be 'cosine' or 'precomputed', got {metric!r}")
    Y = _unit_rows(as_points(X))
    return Y @ Y.T


def affinity(
    X,
    *,
    metric: str = "cosine",
    damping: float = 0.5,
    preference: float | None = None,
    max_iter: int = 200,
    convergence_iter: int = 15,
    seed: int = 0,
    max_n: int | None = None,
) -> np.ndarray:
    """Affinity propagation labels (0..K-1 by first member). ``preference`` defaults to the
    median of S (sklearn's default); ``damping`` must lie in [0.5, 1)."""
    n = np.shape(X)[0]
    limit = max_affinity_n(max_n)
    if n > limit:
        raise DenseSizeError(
            f"affinity propagation: N={n:,} exceeds its ceiling of {limit:,} points "
            f"(needs ~{32 * n * n / 2**30:,.1f} GiB). Use algorithm='agglomerative' or 'manifold' "
            f"(or the scalable paths), or raise the ceiling with max_n=... / {MAX_AFFINITY_N_ENV}."
        )
    if not 0.5 <= damping < 1.0:
        raise ValueError(f"damping must be in [0.5, 1), got {damping}")
    S = similarity_matrix(X, metric)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    ap = AffinityPropagation(
        affinity="precomputed",
        damping=damping,
        preference=preference,
        max_iter=max_iter,
        convergence_iter=convergence_iter,
        random_state=seed,
        copy=False,  # S is ours; saves one N×N copy
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        labels = ap.fit_predict(S)
    for w in caught:  # pass every warning on unchanged (a non-converged run that still found
        # exemplars keeps sklearn's ConvergenceWarning; one without exemplars is an error below)
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if (labels < 0).any():
        raise RuntimeError(
            f"affinity propagation did not converge in {max_iter} iterations (damping={damping}); "
            "raise damping (e.g. 0.9) or max_iter"
        )
    return relabel_first_seen(labels)
