"""Load an ingested dataset into the trainer's MentionSet (seen = the k most frequent types)."""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from .train import MentionSet, split_seen_unseen


def load_mentions(dataset_dir: str | Path, n_seen: int, *, lu_pos: str | None = None,
                  max_mentions: int | None = None, seed: int = 0) -> MentionSet:
    """Labelled mentions of ``dataset_dir/mentions.parquet`` with their primary label.

    ``lu_pos`` keeps FrameNet mentions of one LU part of speech (e.g. "v"); ``max_mentions``
    subsamples deterministically with ``seed`` (recorded by the caller).
    """
    import json

    import numpy as np

    src = Path(dataset_dir) / "mentions.parquet"
    if not src.exists():
        raise FileNotFoundError(f"{src}: no mentions table (dataset not ingested?)")
    cols = ["mention_id", "sentence", "trigger_start", "trigger_end", "labels", "extra"]
    t = pq.read_table(src, columns=cols).to_pylist()
    rows = [r for r in t if r["labels"]]
    if lu_pos is not None:
        def pos(extra):
            try:
                lu = json.loads(extra or "{}").get("lu") or ""
            except ValueError:
                return None
            return lu.rsplit(".", 1)[-1] if "." in lu else None
        rows = [r for r in rows if pos(r["extra"]) == lu_pos]
    if max_mentions and len(rows) > max_mentions:
        pick = np.sort(np.random.default_rng(seed).choice(len(rows), size=max_mentions, replace=False))
        rows = [rows[i] for i in pick]
    if not rows:
        raise ValueError(f"{src}: no labelled mentions to train on")
    labels = [r["labels"][0] for r in rows]
    seen, unseen = split_seen_unseen(labels, n_seen)
    return MentionSet([r["mention_id"] for r in rows], [r["sentence"] for r in rows],
                      [int(r["trigger_start"]) for r in rows], [int(r["trigger_end"]) for r in rows],
                      labels, seen, unseen)


def type_texts(dataset_dir: str | Path, use: str = "name") -> dict[str, str]:
    """type_id -> the text embedded as its naming target: its name (``use="name"``) or definition."""
    p = Path(dataset_dir) / "event_types.parquet"
    if not p.exists():
        return {}
    out = {}
    for r in pq.read_table(p, columns=["type_id", "name", "definition"]).to_pylist():
        text = r["definition"] if use == "definition" and r["definition"] else r["name"]
        out[r["type_id"]] = text or r["type_id"]
    return out
