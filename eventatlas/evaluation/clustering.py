"""Type induction by clustering (task ``induction``): partitions scored against gold types.

* :func:`evaluate_partitions` scores given partitions, keyed ``(variant, algorithm)``
  (``variant`` = the clustering input such as ``attn_dot`` / ``ft``, or ``None`` for the plain
  method), with :func:`eventatlas.evaluation.metrics.clustering_scores`.
* :func:`cluster_partitions` clusters one input or several (feature matrices, or square distance
  matrices with ``metric="precomputed"``) by each algorithm of :data:`eventatlas.cluster.ALGORITHMS`.
  An algorithm that would go over a dense-memory ceiling (``DenseBudgetError``, ``DenseSizeError``;
  affinity propagation first) is skipped with its reason instead of sinking the others.
* :func:`cluster_and_score` does both and returns partitions, rows, skips and timings.

Covers the two callers: the untuned baseline (one embedding matrix per representation, cosine)
and batch-attention induction (several distance matrices per model, ``k_manifold``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

from ..cluster import ALGORITHMS, cluster
from ..cluster.dense import DenseSizeError
from ..cluster.guards import DenseBudgetError
from .metrics import clustering_scores
from .base import RowKey, metric_rows

log = logging.getLogger(__name__)

MANIFOLD = ("manifold", "manifold_sym")
SKIP_ERRORS: tuple[type[BaseException], ...] = (DenseBudgetError, DenseSizeError)

__all__ = ["ClusterEvaluation", "cluster_and_score", "cluster_partitions", "evaluate_partitions", "SKIP_ERRORS"]

Key = tuple[str | None, str]  # (variant, algorithm)


def evaluate_partitions(
    partitions: Mapping[Key, Sequence[Hashable]],
    y_true: Sequence[Hashable],
    *,
    key: RowKey,
    only: Iterable[str] | None = None,
) -> list[dict[str, Any]]:
    """Rows (task ``induction``, ``key`` with ``clustering`` = the algorithm and ``variant`` = the partition
    key's variant) of :func:`~eventatlas.evaluation.metrics.clustering_scores` for every partition; ``only``
    keeps those metrics."""
    y = list(y_true)
    only = list(only) if only is not None else None
    rows: list[dict[str, Any]] = []
    for part, labels in partitions.items():
        if not (isinstance(part, tuple) and len(part) == 2):
            raise ValueError(f"partition keys are (variant, algorithm) pairs, got {part!r}")
        variant, algorithm = part
        labels = labels.tolist() if isinstance(labels, np.ndarray) else list(labels)
        if len(labels) != len(y):
            raise ValueError(f"partition {part!r} labels {len(labels)} items but y_true has {len(y)}")
        rows += metric_rows(clustering_scores(y, labels), task="induction",
                            key=key.replace(clustering=algorithm, variant=variant), only=only)
    return rows


def _inputs(inputs) -> dict[str | None, np.ndarray]:
    if isinstance(inputs, Mapping):
        if not inputs:
            raise ValueError("no clustering inputs")
        return dict(inputs)
    return {None: inputs}


def cluster_partitions(
    inputs: np.ndarray | Mapping[str | None, np.ndarray],
    n_clusters: int,
    *,
    algorithms: Sequence[str] = ALGORITHMS,
    metric: str = "cosine",
    k_manifold: int | None = None,
    seed: int = 0,
    skip: tuple[type[BaseException], ...] = SKIP_ERRORS,
    skipped: dict[Key, str] | None = None,
    seconds: dict[Key, float] | None = None,
) -> dict[Key, np.ndarray]:
    """Labels for every (variant, algorithm); a bare array is the single variant ``None``.

    ``n_clusters`` applies to the linkage algorithms (affinity picks its own number). ``k_manifold``
    is the manifold algorithms' neighbour count (capped at N; default N). With
    ``metric="precomputed"`` a distance matrix with negative entries is shifted by its minimum for
    the manifold algorithms: UMAP memberships need d >= 0 and depend only on d - rho_i, so a
    global shift changes nothing else. Errors of a type in ``skip`` leave that pair out and are
    recorded in ``skipped`` (key -> message); ``seconds`` gets each pair's clustering time.
    """
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise ValueError(f"unknown clustering algorithm(s) {unknown}; choose from {ALGORITHMS}")
    out: dict[Key, np.ndarray] = {}
    for variant, x in _inputs(inputs).items():
        for algorithm in algorithms:
            kw: dict[str, Any] = {"metric": metric, "seed": seed}
            data = x
            if algorithm in MANIFOLD:
                if k_manifold is not None:  # 0 or less is refused by the algorithm, not read as "default"
                    kw["k"] = min(int(k_manifold), int(np.shape(x)[0]))
                if metric == "precomputed":
                    m = float(np.min(x))
                    if m < 0:
                        data = np.ascontiguousarray(np.asarray(x) - m)
            t0 = time.perf_counter()
            try:
                labels = cluster(data, algorithm, None if algorithm == "affinity" else n_clusters, **kw)
            except skip as e:
                log.warning("clustering %s/%s skipped: %s", variant, algorithm, e)
                if skipped is not None:
                    skipped[(variant, algorithm)] = str(e)
                continue
            out[(variant, algorithm)] = np.asarray(labels, dtype=np.int64)
            if seconds is not None:
                seconds[(variant, algorithm)] = round(time.perf_counter() - t0, 3)
    return out


@dataclass
class ClusterEvaluation:
    """What :func:`cluster_and_score` found: partitions by (variant, algorithm), metric rows,
    skipped pairs (with the reason) and clustering seconds per pair."""

    partitions: dict[Key, np.ndarray] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[Key, str] = field(default_factory=dict)
    seconds: dict[Key, float] = field(default_factory=dict)


def cluster_and_score(
    inputs: np.ndarray | Mapping[str | None, np.ndarray],
    y_true: Sequence[Hashable],
    *,
    n_clusters: int | None = None,
    algorithms: Sequence[str] = ALGORITHMS,
    metric: str = "cosine",
    k_manifold: int | None = None,
    key: RowKey,
    only: Iterable[str] | None = None,
    skip: tuple[type[BaseException], ...] = SKIP_ERRORS,
) -> ClusterEvaluation:
    """Cluster ``inputs`` (see :func:`cluster_partitions`; seeded with ``key.seed``) into ``n_clusters``
    (default: the number of gold types) and score every partition (:func:`evaluate_partitions`)."""
    y = list(y_true)
    for variant, x in _inputs(inputs).items():
        if int(np.shape(x)[0]) != len(y):
            raise ValueError(f"input {variant!r} has {np.shape(x)[0]} rows but y_true has {len(y)} labels")
    k = int(n_clusters) if n_clusters is not None else len(set(y))
    res = ClusterEvaluation()
    res.partitions = cluster_partitions(inputs, k, algorithms=algorithms, metric=metric, k_manifold=k_manifold,
                                        seed=key.seed, skip=skip, skipped=res.skipped, seconds=res.seconds)
    res.rows = evaluate_partitions(res.partitions, y, key=key, only=only)
    return res
