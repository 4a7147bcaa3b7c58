"""Known or new: each discovered type's strongest link to the inventories it was linked to, and the verdict.

A discovered type is **new** when even its strongest link is weak: the best raw score of the novelty scorer
(``centroid``: the cosine of the type's mean trigger vector to a known type's; ``vote``: the share of its
mentions' nearest known mentions that fall in one known type; ``mnn``: the share of mutual nearest
neighbours) over every target of every linked inventory is under the threshold. Raw scores, not the
calibrated ones: a cluster inventory has no gold to calibrate with, and the rank normalisation gives every
type's top target 1.0, which says nothing about how close it is. The default scorer and threshold are the ones
the ``discover_maven`` experiment chose on its dev sentences (hidden MAVEN types; see its page).
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa

NOVELTY_SCORERS = ("centroid", "vote", "mnn")


def best_links(links: pa.Table | None, scorer: str) -> dict[str, tuple[str, float]]:
    """Source node id -> (target node id, raw score) of its best ``scorer`` link (ties: the first target by
    id, so the verdict does not depend on row order)."""
    if scorer not in NOVELTY_SCORERS:
        raise ValueError(f"novelty scorer {scorer!r}: one of {', '.join(NOVELTY_SCORERS)}")
    best: dict[str, tuple[str, float]] = {}
    if links is None:
        return best
    for r in links.select(["source", "target", "method", "raw_score"]).to_pylist():
        if r["method"] != scorer or r["raw_score"] is None:
            continue
        cur = best.get(r["source"])
        cand = (r["target"], float(r["raw_score"]))
        if cur is None or cand[1] > cur[1] or (cand[1] == cur[1] and cand[0] < cur[0]):
            best[r["source"]] = cand
    return best


def mark_new(cards: list[dict[str, Any]], inventory: str, links: pa.Table | None, scorer: str,
             below: float) -> list[dict[str, Any]]:
    """Each card with ``best_link``, ``best_score`` and ``new`` (None for all three without links)."""
    from ..atlas.inventory import node_id

    best = best_links(links, scorer)
    for c in cards:
        hit = best.get(node_id(inventory, c["type_id"]))
        c["best_link"], c["best_score"] = (hit if hit else (None, None))
        c["new"] = None if hit is None else bool(hit[1] < below)
    return cards
