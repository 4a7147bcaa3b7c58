"""Frame induction scores (Yamada et al. 2023): clustering metrics plus similarity-ranking recall.

* :func:`frame_cluster_scores`: :func:`eventatlas.evaluation.metrics.clustering_scores`' B-cubed P/R/F and
  purity / inverse purity / F plus ``n_clusters`` (predicted) and ``n_frames`` (gold).
* :func:`ranking_recall`: every instance is a query; its relevant items are the other instances of
  its frame inside a search space; the top |relevant| items of that space by cosine are taken and
  recall = the fraction of them that are relevant (R-precision), averaged over queries with at least
  one relevant item. Spaces: ``all`` (every other instance), ``same`` (other instances of the same
  verb), ``diff`` (instances of other verbs). Neighbours come from a faiss ``IndexFlatIP`` over the
  unit vectors (exact inner product = cosine), searched in batches of queries with the k each batch
  needs, so memory is O(batch x k + N x d).
"""
from __future__ import annotations

from typing import Any, Hashable, Sequence

import faiss
import numpy as np

from .metrics import clustering_scores
from ._vectors import unit_rows
from .base import RowKey, metric_rows

FRAME_METRICS = ("bcubed_p", "bcubed_r", "bcubed_f", "purity", "inverse_purity", "purity_f")
SPACES = ("all", "same", "diff")

__all__ = ["FRAME_METRICS", "SPACES", "frame_cluster_scores", "ranking_recall", "frame_rows"]


def frame_cluster_scores(frames: Sequence[Hashable], labels: Sequence[Hashable]) -> dict[str, float]:
    s = clustering_scores(list(frames), list(labels))
    out = {k: s[k] for k in FRAME_METRICS}
    out["n_clusters"] = float(len(set(labels)))
    out["n_frames"] = float(len(set(frames)))
    return out


def _codes(xs: Sequence[Hashable]) -> np.ndarray:
    return np.unique(np.asarray([str(x) for x in xs]), return_inverse=True)[1].astype(np.int64)


def ranking_recall(X: np.ndarray, frames: Sequence[Hashable], verbs: Sequence[Hashable], *,
                   spaces: Sequence[str] = SPACES, batch: int = 256) -> dict[str, float]:
    """``{"recall_all": ..., "recall_same": ..., "recall_diff": ...}`` (see the module docstring)."""
    bad = [s for s in spaces if s not in SPACES]
    if bad:
        raise ValueError(f"unknown search spaces {bad}; known: {SPACES}")
    Xu = unit_rows(np.asarray(X, dtype=np.float32), "X")
    n = Xu.shape[0]
    f, v = _codes(frames), _codes(verbs)
    fv = f * (v.max() + 1) + v
    n_frame = np.bincount(f)[f]  # instances of my frame (me included)
    n_verb = np.bincount(v)[v]
    n_fv = np.bincount(fv)[fv]
    index = faiss.IndexFlatIP(Xu.shape[1])
    index.add(Xu)
    out: dict[str, float] = {}
    for space in spaces:
        if space == "all":
            rel, excl = n_frame - 1, np.zeros(n, np.int64)  # + self
        elif space == "same":
            rel, excl = n_fv - 1, n - n_verb  # others of my verb; everything of other verbs excluded
        else:
            rel, excl = n_frame - n_fv, n_verb - 1  # my verb's other instances excluded
        q = np.flatnonzero(rel > 0)
        if not len(q):
            out[f"recall_{space}"] = float("nan")
            continue
        if space == "same":
            hits = _same_verb_hits(Xu, f, v, q, rel)
        else:
            hits = np.empty(len(q), np.float64)
            order = q[np.argsort(rel[q] + excl[q], kind="stable")]
            pos = {int(i): j for j, i in enumerate(q)}
            for b0 in range(0, len(order), batch):
                qb = order[b0:b0 + batch]
                k = int(min(n, (rel[qb] + excl[qb]).max() + 1))  # + self
                _, ids = index.search(Xu[qb], k)
                for r, i in enumerate(qb):
                    cand = ids[r][(ids[r] >= 0) & (ids[r] != i)]
                    if space == "diff":
                        cand = cand[v[cand] != v[i]]
                    top = cand[: rel[i]]
                    hits[pos[int(i)]] = float((f[top] == f[i]).sum())
        out[f"recall_{space}"] = float(np.mean(hits / rel[q]))
    return out


def _same_verb_hits(Xu: np.ndarray, f: np.ndarray, v: np.ndarray, q: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """Same-verb space: each verb's instances form a small corpus of their own (exact cosine products)."""
    hits = np.empty(len(q), np.float64)
    pos = {int(i): j for j, i in enumerate(q)}
    qset = np.zeros(len(f), bool)
    qset[q] = True
    for verb in np.unique(v[q]):
        members = np.flatnonzero(v == verb)
        S = Xu[members] @ Xu[members].T
        np.fill_diagonal(S, -np.inf)
        for r, i in enumerate(members):
            if not qset[i]:
                continue
            top = members[np.argsort(-S[r], kind="stable")[: rel[i]]]
            hits[pos[int(i)]] = float((f[top] == f[i]).sum())
    return hits


def frame_rows(scores: dict[str, float], *, key: RowKey) -> list[dict[str, Any]]:
    """Metric rows (task ``induction`` for cluster scores, ``retrieval`` for ranking recall, whose rows drop
    ``key.clustering``: the ranking uses no clustering)."""
    rec = {k: v for k, v in scores.items() if k.startswith("recall_")}
    clu = {k: v for k, v in scores.items() if not k.startswith("recall_")}
    rows = []
    if clu:
        rows += metric_rows(clu, task="induction", key=key)
    if rec:
        rows += metric_rows(rec, task="retrieval", key=key.replace(clustering=None))
    return rows
