"""What every scorer shares: the two sides of a comparison (:class:`TypeSet`), the result (:class:`Scores`)
and the generic evidence of a pair (:func:`pair_evidence`). The scorer modules build on this; the package
module (``score``) builds on them."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class TypeSet:
    """One inventory's side of a comparison. ``X[r]`` is a mention of type ``types[owner[r]]`` (a
    mention with two labels appears twice); rows are L2-normalised."""

    types: list[str]
    names: list[str]
    X: np.ndarray
    owner: np.ndarray
    mention_ids: list[str]

    def __post_init__(self) -> None:
        self.X = np.asarray(self.X, dtype=np.float32)
        if self.X.ndim != 2:
            self.X = self.X.reshape(len(self.mention_ids), -1)
        self.owner = np.asarray(self.owner, dtype=np.int64).reshape(-1)
        if len(self.names) != len(self.types):
            raise ValueError(f"{len(self.types)} types but {len(self.names)} names")
        if not (len(self.X) == len(self.owner) == len(self.mention_ids)):
            raise ValueError(f"{len(self.X)} vectors, {len(self.owner)} owners, {len(self.mention_ids)} mention ids")
        if len(self.owner) and (self.owner.min() < 0 or self.owner.max() >= len(self.types)):
            raise ValueError("owner index outside the types")

    def counts(self) -> np.ndarray:
        return np.bincount(self.owner, minlength=len(self.types))

    def centroids(self) -> np.ndarray:
        """L2-normalised mean vector per type; ``nan`` rows for types without mentions (computed once)."""
        if getattr(self, "_centroids", None) is None:
            self._centroids = self._compute_centroids()
        return self._centroids

    def _compute_centroids(self) -> np.ndarray:
        d = self.X.shape[1] if self.X.ndim == 2 and self.X.shape[1] else 1
        C = np.zeros((len(self.types), d), dtype=np.float64)
        np.add.at(C, self.owner, self.X.astype(np.float64))
        n = np.linalg.norm(C, axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            C = C / n
        C[self.counts() == 0] = np.nan
        return C


@dataclass
class Scores:
    matrix: np.ndarray
    evidence: dict[tuple[int, int], list[str]] = field(default_factory=dict)


def pair_evidence(A: TypeSet, B: TypeSet, i: int, j: int, n: int = 2) -> list[str]:
    """The ``n`` mentions of ``A``'s type ``i`` nearest ``B``'s type ``j`` centroid, then the ``n`` of
    ``j`` nearest ``i``'s: what makes the two alike, from both sides."""
    out: list[str] = []
    for S, T, a, b in ((A, B, i, j), (B, A, j, i)):
        rows = np.flatnonzero(S.owner == a)
        c = T.centroids()[b]
        if not len(rows) or np.isnan(c).any():
            continue
        sims = S.X[rows] @ c.astype(np.float32)
        out += [S.mention_ids[r] for r in rows[np.argsort(-sims, kind="stable")[:n]]]
    return list(dict.fromkeys(out))
