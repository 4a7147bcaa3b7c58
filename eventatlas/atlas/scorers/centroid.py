"""Centroid similarity: cosine of the two types' mean (L2-normalised) mention vectors."""
from __future__ import annotations

import numpy as np

from .base import Scores, TypeSet


def similarity(A: TypeSet, B: TypeSet) -> np.ndarray:
    """(|A|, |B|) cosines; ``nan`` where either type has no mentions."""
    return A.centroids() @ B.centroids().T


def score(A: TypeSet, B: TypeSet) -> Scores:
    return Scores(similarity(A, B))
