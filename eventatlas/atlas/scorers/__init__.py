"""Scorers of type pairs between two inventories: one small module per scorer, one call.

``score(method, A, B, **kw) -> Scores`` where ``A`` and ``B`` are :class:`TypeSet` (types, their
names, and the L2-normalised vectors of their mentions). ``Scores.matrix[i, j]`` scores type ``i`` of
``A`` against type ``j`` of ``B`` (higher = more alike; ``nan`` = no evidence, e.g. a type without
mentions). ``Scores.evidence`` maps a pair to the mention ids that support it where the scorer has a
natural witness (the mention vote's retrieved pairs); :func:`pair_evidence` gives the generic one.

Scorers (``SCORERS``):

* ``centroid`` (:mod:`.centroid`): cosine of the types' mean mention vectors.
* ``mnn`` (:mod:`.mnn`): mutual nearest neighbours of those centroids, ``1 / max(rank of j in i's
  row, rank of i in j's column)``: 1 for a mutual nearest pair.
* ``vote`` (:mod:`.vote`): each mention of ``i`` retrieves its ``k`` nearest mentions of ``B`` (faiss);
  the share of those retrievals that land in ``j``.
* ``name`` (:mod:`.name`): normalised-name match (1), else a string similarity below it. It reads
  only names: the evidence scorers never do.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from . import centroid, mnn, name, vote

if TYPE_CHECKING:
    from .base import Scores, TypeSet


def _registry() -> dict[str, Callable[..., Scores]]:
    return {"centroid": centroid.score, "mnn": mnn.score, "vote": vote.score, "name": name.score}


SCORERS = ("centroid", "mnn", "vote", "name")
EVIDENCE_SCORERS = ("centroid", "mnn", "vote")  # never read a name


def score(method: str, A: TypeSet, B: TypeSet, **kw: Any) -> Scores:
    if method not in SCORERS:
        raise ValueError(f"unknown atlas scorer {method!r}; known: {', '.join(SCORERS)}")
    return _registry()[method](A, B, **kw)
