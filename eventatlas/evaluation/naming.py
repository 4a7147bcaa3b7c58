"""Type naming and FrameNet linking of induced clusters (Edwards & Ji 2023, section 5).

Each predicted cluster takes its majority gold type as ground truth (ties -> smallest type id).
Naming: the candidate type names (the unseen types) are ranked by cosine to the cluster
centroid; the cluster's rank is that of its majority type. Linking: all FrameNet frames are
ranked by cosine between their definition embedding and the centroid; the cluster's rank is the
best rank of any *valid* frame = the frames mapped to its majority type plus all their
Inheritance descendants. Ranks are 1-based; metrics via :mod:`eventatlas.evaluation.metrics`.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Hashable, Iterable, Mapping, Sequence

import numpy as np

NAMING_KS = (1, 3, 5, 10, 15)
LINKING_KS = (1, 5, 10, 50, 100)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def cluster_centroids(x: np.ndarray, y_pred: Sequence[Hashable]) -> tuple[list[Hashable], np.ndarray]:
    """(cluster ids in sorted order, unit-normalised mean of each cluster's rows)."""
    y = np.asarray(y_pred)
    ids = sorted(set(y.tolist()))
    xu = _unit(x)
    cents = np.stack([xu[y == c].mean(axis=0) for c in ids])
    return ids, _unit(cents)


def majority_types(y_true: Sequence[Hashable], y_pred: Sequence[Hashable]) -> dict[Hashable, tuple[str, float]]:
    """cluster id -> (majority gold type, purity of the cluster)."""
    groups: dict[Hashable, Counter] = defaultdict(Counter)
    for t, p in zip(y_true, y_pred):
        groups[p][t] += 1
    out = {}
    for c, cnt in groups.items():
        best = max(cnt.values())
        maj = min(t for t, v in cnt.items() if v == best)
        out[c] = (maj, best / sum(cnt.values()))
    return out


def best_rank(scores: np.ndarray, valid: Iterable[int]) -> float:
    """1-based rank (ties count against: rank = 1 + #strictly better) of the best valid item."""
    valid = list(valid)
    if not valid:
        return float("inf")
    s = np.asarray(scores, dtype=np.float64)
    top = s[valid].max()
    return float(1 + int((s > top).sum()))


def _rank_metrics(ranks: list[float], ks: Sequence[int], prefix: str) -> dict[str, float]:
    from .metrics import hits_at_k, mean_rank, mrr

    out = {f"{prefix}_hits@{k}": hits_at_k(ranks, k) for k in ks}
    out[f"{prefix}_mean_rank"] = mean_rank(ranks)
    out[f"{prefix}_mrr"] = mrr(ranks)
    out[f"{prefix}_n_clusters"] = float(len(ranks))
    return out


def type_naming(x: np.ndarray, y_true: Sequence[str], y_pred: Sequence[Hashable], candidates: Sequence[str],
                candidate_emb: np.ndarray) -> tuple[dict[str, float], list[dict]]:
    """Naming metrics and one row per cluster (cluster, majority, purity, rank, top name)."""
    from .metrics import avg_cluster_purity, type_representation

    ids, cents = cluster_centroids(x, y_pred)
    sims = cents @ _unit(candidate_emb).T
    maj = majority_types(y_true, y_pred)
    pos = {c: i for i, c in enumerate(candidates)}
    rows, ranks = [], []
    for i, c in enumerate(ids):
        t, pur = maj[c]
        if t not in pos:
            raise ValueError(f"majority type {t!r} of cluster {c} is not among the naming candidates")
        r = best_rank(sims[i], [pos[t]])
        ranks.append(r)
        rows.append({"cluster": c, "majority": t, "purity": pur, "rank": r,
                     "predicted": candidates[int(np.argmax(sims[i]))]})
    m = _rank_metrics(ranks, NAMING_KS, "naming")
    m["avg_cluster_purity"] = avg_cluster_purity(list(y_true), list(y_pred))
    m["type_representation"] = type_representation(list(y_true), list(y_pred))
    return m, rows


def inheritance_descendants(edges: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """parent -> all transitive children, from (child, parent) Inheritance edges."""
    children: dict[str, set[str]] = defaultdict(set)
    for child, parent in edges:
        children[parent].add(child)
    memo: dict[str, set[str]] = {}

    def walk(f: str) -> set[str]:
        if f in memo:
            return memo[f]
        memo[f] = set()  # cycle guard
        out: set[str] = set()
        for c in children.get(f, ()):
            out.add(c)
            out |= walk(c)
        memo[f] = out
        return out

    return {f: walk(f) for f in list(children)}


def valid_frames(type_to_frames: Mapping[str, Sequence[str]], descendants: Mapping[str, set[str]]) -> dict[str, set[str]]:
    return {t: set(fs).union(*[descendants.get(f, set()) for f in fs]) for t, fs in type_to_frames.items()}


def framenet_linking(x: np.ndarray, y_true: Sequence[str], y_pred: Sequence[Hashable], frame_ids: Sequence[str],
                     frame_emb: np.ndarray, valid: Mapping[str, set[str]]) -> tuple[dict[str, float], list[dict]]:
    """Linking metrics over the clusters whose majority type has a mapped frame."""
    ids, cents = cluster_centroids(x, y_pred)
    sims = cents @ _unit(frame_emb).T
    maj = majority_types(y_true, y_pred)
    pos = {f: i for i, f in enumerate(frame_ids)}
    rows, ranks, unmapped = [], [], 0
    for i, c in enumerate(ids):
        t, pur = maj[c]
        fr = [pos[f] for f in valid.get(t, ()) if f in pos]
        if not fr:
            unmapped += 1
            continue
        r = best_rank(sims[i], fr)
        ranks.append(r)
        rows.append({"cluster": c, "majority": t, "purity": pur, "rank": r,
                     "predicted": frame_ids[int(np.argmax(sims[i]))]})
    if not ranks:
        return {"linking_n_clusters": 0.0, "linking_unmapped_clusters": float(unmapped)}, rows
    m = _rank_metrics(ranks, LINKING_KS, "linking")
    m["linking_unmapped_clusters"] = float(unmapped)
    return m, rows


def read_mapping(path: str | Path) -> dict[str, list[str]]:
    """TSV ``type<TAB>frame|frame...<TAB>provenance`` (``#`` comments, header line ``type``)."""
    out: dict[str, list[str]] = {}
    for ln, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if parts[0] == "type":
            continue
        if len(parts) < 2 or not parts[1].strip():
            from ..errors import InputError

            raise InputError(path, f"line {ln}", f"expected type<TAB>frames, got {line!r}")
        out[parts[0]] = [f for f in parts[1].split("|") if f]
    return out
