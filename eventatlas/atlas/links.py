"""The atlas's link rows (one schema for declared and learned links)."""
from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

LINKS = pa.schema([
    pa.field("source", pa.string(), nullable=False),    # node ids (<inventory>::<type_id>)
    pa.field("target", pa.string(), nullable=False),
    pa.field("relation", pa.string(), nullable=False),  # declared: the source's name; learned: RELATIONS
    pa.field("kind", pa.string(), nullable=False),      # declared | learned
    pa.field("score", pa.float64()),                    # calibrated (learned only)
    pa.field("raw_score", pa.float64()),                # the scorer's own value (learned only)
    pa.field("rank", pa.int32()),                       # the target's rank for this source (learned only)
    pa.field("method", pa.string()),                    # scorer, or where a declared link comes from
    pa.field("calibration", pa.string()),               # rank | isotonic:... (learned only)
    pa.field("encoder", pa.string()),
    pa.field("run_id", pa.string()),                    # the clustering run of a cluster node, if any
    pa.field("provenance", pa.string()),
    pa.field("evidence_mention_ids", pa.list_(pa.string())),
])

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
