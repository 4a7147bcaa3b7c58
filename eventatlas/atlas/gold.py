"""Scoring type -> frame links against the hand-made mappings (``datasets/mappings/*.tsv``).

The mappings are gold only: no scorer reads them. A dev part (a seeded share of the gold source
types) may fit a calibration or choose a weight; every figure is reported on the other part (``test``)
unless it needs no fitting.

Queries are the source types that have mentions and at least one gold frame among the target
inventory's types with mentions (others cannot be ranked by evidence; they are counted, not scored).
A query's rank is the best rank of any of its gold frames (ties: the pessimistic rank, so a flat row
earns nothing). Hits@k and MRR are :mod:`eventatlas.evaluation.metrics`'s.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from .. import config
from ..evaluation.metrics import hits_at_k, mrr
from .scorers.name import keys

# the ontology of a source inventory -> its mapping file (FrameNet targets)
MAPPINGS = {"ACE": "ace_framenet.tsv", "MAVEN": "maven_framenet.tsv", "OntoEvent": "ontoevent_framenet.tsv"}
KS = (1, 5)


def mappings_dir() -> Path:
    return config.resource_dir("datasets") / "mappings"


def mapping_path(ontology: str | None) -> Path | None:
    name = MAPPINGS.get(ontology or "")
    return mappings_dir() / name if name else None


def _norm(s: str) -> str:
    return s.strip().lower().replace("-", "_").replace(" ", "_")


def gold_for(types: Sequence[str], mapping: Mapping[str, list[str]]) -> dict[int, set[str]]:
    """Type index -> gold frame names. A type matches a mapping row by its id, else by its normalised
    id, else by the normalised last ``.`` part of its id (ACE ``Conflict.Attack`` -> mapping row ``Attack``)."""
    norm: dict[str, list[str]] = {}
    for t, frames in mapping.items():
        norm.setdefault(_norm(t), frames)
    out = {}
    for i, t in enumerate(types):
        frames = mapping.get(t) or norm.get(_norm(t)) or norm.get(_norm(t.rsplit(".", 1)[-1]))
        if frames:
            out[i] = set(frames)
    return out


def gold_columns(gold: Mapping[int, set[str]], targets: Sequence[str], has_mentions: np.ndarray | None = None) -> dict[int, set[int]]:
    """Gold as target column indices (frames absent from the target inventory, or without mentions, dropped)."""
    pos = {t: j for j, t in enumerate(targets)}
    out = {}
    for i, frames in gold.items():
        cols = {pos[f] for f in frames if f in pos and (has_mentions is None or has_mentions[pos[f]])}
        if cols:
            out[i] = cols
    return out


def split_queries(queries: Iterable[int], seed: int, dev_fraction: float) -> tuple[list[int], list[int]]:
    """(dev, test): a seeded shuffle of the sorted queries, the first ``round(dev_fraction * n)`` dev."""
    qs = sorted(queries)
    random.Random(seed).shuffle(qs)
    n_dev = int(round(dev_fraction * len(qs)))
    return sorted(qs[:n_dev]), sorted(qs[n_dev:])


def rank_of_gold(row: np.ndarray, gold: set[int]) -> int:
    """1-based rank of the best gold column in ``row`` (higher = better; ``nan`` = last; ties pessimistic)."""
    filled = np.where(np.isnan(row), -np.inf, row)
    best = max(filled[j] for j in gold)
    return int((filled >= best).sum() - sum(1 for j in gold if filled[j] >= best) + 1)


def link_metrics(S: np.ndarray, gold_cols: Mapping[int, set[int]], queries: Iterable[int]) -> dict[str, float]:
    ranks = [rank_of_gold(S[i], gold_cols[i]) for i in queries]
    if not ranks:
        return {"n_queries": 0.0}
    out = {f"hits@{k}": hits_at_k(ranks, k) for k in KS}
    out["mrr"] = mrr(ranks)
    out["n_queries"] = float(len(ranks))
    return out


def renamed(types: Sequence[str], names: Sequence[str], gold: Mapping[int, set[str]]) -> set[int]:
    """Source types none of whose gold frames has the type's normalised name (where names cannot help)."""
    out = set()
    for i, frames in gold.items():
        mine = keys(types[i], names[i])
        if not any(keys(f, None) & mine for f in frames):
            out.add(i)
    return out


def choose_weight(names: Mapping[str, np.ndarray], evidence: Mapping[str, np.ndarray], gold_cols: Mapping[int, set[int]],
                  dev: Sequence[int], grid: Sequence[float] = tuple(np.round(np.arange(0, 1.01, 0.1), 2))
                  ) -> tuple[float, str, str, float]:
    """(weight, name variant, evidence scorer, dev MRR) maximising dev MRR of ``w * name + (1 - w) *
    evidence`` over the name variants (e.g. the name score, or its exact matches only), the evidence
    scorers (rank-normalised) and the weight grid; ties: the smaller weight, then the names' order."""
    best = (-1.0, 0.0, "", "")
    for nm, N in sorted(names.items()):
        for ev_name, E in sorted(evidence.items()):
            for w in grid:
                m = link_metrics(combine(N, E, w), gold_cols, dev).get("mrr", 0.0)
                if m > best[0] + 1e-12 or (abs(m - best[0]) <= 1e-12 and w < best[1]):
                    best = (m, float(w), nm, ev_name)
    return best[1], best[2], best[3], best[0]


def exact_only(name: np.ndarray) -> np.ndarray:
    """The name scorer's exact matches alone (1) and nothing for a near name (0)."""
    return (np.nan_to_num(name, nan=0.0) >= 1.0).astype(np.float64)


def combine(name: np.ndarray, evidence_ranked: np.ndarray, w: float) -> np.ndarray:
    """``w * name + (1 - w) * evidence`` with a missing evidence score counting 0."""
    return w * np.nan_to_num(name, nan=0.0) + (1 - w) * np.nan_to_num(evidence_ranked, nan=0.0)


def cluster_frame_share(S: np.ndarray, majority: Sequence[str | None], targets: Sequence[str],
                        mapping: Mapping[str, list[str]]) -> tuple[float, int]:
    """Share of clusters whose top-linked target is a frame of their majority gold type (clusters whose
    majority type has no gold frame are left out); returns (share, clusters scored)."""
    gold = gold_for([m or "" for m in majority], mapping)
    hits, n = 0, 0
    for i, frames in gold.items():
        row = S[i]
        if np.all(np.isnan(row)):
            n += 1
            continue
        n += 1
        hits += targets[int(np.nanargmax(row))] in frames
    return (hits / n if n else float("nan")), n
