"""Clustering inputs x algorithms for a trained (or ensembled) model, scored on unseen mentions.

Inputs (square distance matrices over the unseen mentions):
  attn_dot      1 - S,          S = Q K^T / sqrt(d)  (asymmetric; see eventatlas.cluster for how
  attn_dot_neg  -S                                    each algorithm reads it)
  attn_cos      1 - cos(Q_i, K_j)
  ft            1 - cos(F_i, F_j)   (the fine-tuned encoder features)
Algorithms: agglomerative, manifold (faithful, unsymmetrised), manifold_sym, affinity
(which picks its own number of clusters). Average linkage, UMAP memberships (exp(-(d - rho)/sigma))
and affinity propagation's median preference are all invariant to adding a constant to every
distance, so ``attn_dot`` and ``attn_dot_neg`` must give the same partitions (the manifold methods get
the matrix shifted by its global minimum, since UMAP weights need non-negative distances): reported anyway,
as the issue asks, and the equality is a check on the pipeline.

Ensembles of N runs: S averaged over runs, features F concatenated (each run's F is unit-norm,
so the concatenation's cosine is the mean of the runs' cosines); Q/K cosine matrices averaged.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

INPUTS = ("attn_dot", "attn_dot_neg", "attn_cos", "ft")
ALGORITHMS = ("agglomerative", "manifold", "manifold_sym", "affinity")


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def scores_matrix(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return np.asarray(q, np.float64) @ np.asarray(k, np.float64).T / math.sqrt(q.shape[1])


def distance_inputs(emb: dict[str, np.ndarray], inputs: Sequence[str] = INPUTS) -> dict[str, np.ndarray]:
    """Distance matrices of one run (``emb`` has F, Q, K) or an ensemble (has S, cosQK, F)."""
    s = emb["S"] if "S" in emb else scores_matrix(emb["Q"], emb["K"])
    out: dict[str, np.ndarray] = {}
    for name in inputs:
        if name == "attn_dot":
            out[name] = 1.0 - s
        elif name == "attn_dot_neg":
            out[name] = -s
        elif name == "attn_cos":
            c = emb["cosQK"] if "cosQK" in emb else _unit(emb["Q"]) @ _unit(emb["K"]).T
            out[name] = 1.0 - c
        elif name == "ft":
            f = _unit(emb["F"])
            out[name] = 1.0 - f @ f.T
        else:
            raise ValueError(f"unknown clustering input {name!r}; known: {INPUTS}")
    return out


def ensemble(runs: Iterable[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Combine N runs over the same mentions (same row order)."""
    runs = list(runs)
    if not runs:
        raise ValueError("ensemble of zero runs")
    n = {r["F"].shape[0] for r in runs}
    if len(n) != 1:
        raise ValueError(f"ensemble runs cover different mention counts: {sorted(n)}")
    s = np.mean([scores_matrix(r["Q"], r["K"]) for r in runs], axis=0)
    cos = np.mean([_unit(r["Q"]) @ _unit(r["K"]).T for r in runs], axis=0)
    f = np.concatenate([_unit(r["F"]) for r in runs], axis=1)
    return {"S": s, "cosQK": cos, "F": f}


def cluster_all(dists: dict[str, np.ndarray], n_clusters: int, *, algorithms: Sequence[str] = ALGORITHMS,
                k_manifold: int | None = None, seed: int = 0) -> dict[tuple[str, str], np.ndarray]:
    """Labels for every (input, algorithm)."""
    from ..cluster import cluster

    out = {}
    for name, d in dists.items():
        for algo in algorithms:
            kw: dict[str, Any] = {"metric": "precomputed", "seed": seed}
            if algo in ("manifold", "manifold_sym") and k_manifold:
                kw["k"] = min(int(k_manifold), d.shape[0])
            n = None if algo == "affinity" else n_clusters
            x = d
            if algo in ("manifold", "manifold_sym") and d.min() < 0:
                # UMAP memberships need d >= 0 and depend only on d - rho_i: a global shift is exact
                x = d - d.min()
            out[(name, algo)] = cluster(np.ascontiguousarray(x), algo, n, **kw)
    return out


def score_partitions(parts: dict[tuple[str, str], np.ndarray], y_true: Sequence[str]) -> dict[tuple[str, str], dict[str, float]]:
    from ..metrics import clustering_scores

    return {key: clustering_scores(list(y_true), labels.tolist()) for key, labels in parts.items()}
