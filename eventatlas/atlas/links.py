"""The atlas's link rows (one schema for declared and learned links)."""
from __future__ import annotations

from typing import Any, Sequence


from ..schema import LINKS  # (defined there: the warehouse's discovered_links view reads the same schema)

# learned relation per scorer: never a name a declared relation uses
RELATIONS = {"centroid": "learned:centroid_similarity", "mnn": "learned:mutual_nn", "vote": "learned:mention_vote",
             "name": "learned:name_match", "combined": "learned:combined"}


def link_row(source: str, target: str, relation: str, *, kind: str, method: str, score: float | None = None,
             raw_score: float | None = None, rank: int | None = None, calibration: str | None = None,
             encoder: str | None = None, run_id: str | None = None, provenance: str | None = None,
             evidence: Sequence[str] = ()) -> dict[str, Any]:
    if kind not in ("declared", "learned"):
        raise ValueError(f"kind must be declared or learned, got {kind!r}")
    if kind == "declared" and (score is not None or raw_score is not None):
        raise ValueError("a declared link has no score")
    if kind == "learned" and not relation.startswith("learned:"):
        raise ValueError(f"a learned link's relation must be learned:..., got {relation!r}")
    if kind == "declared" and relation.startswith("learned:"):
        raise ValueError(f"a declared link cannot use a learned relation ({relation!r})")
    return {"source": source, "target": target, "relation": relation, "kind": kind, "score": score,
            "raw_score": raw_score, "rank": rank, "method": method, "calibration": calibration, "encoder": encoder,
            "run_id": run_id, "provenance": provenance, "evidence_mention_ids": list(evidence)}
