"""What a method returns, and helpers every method needs (labelled mentions, manifests)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

METRIC_KEYS = ("dataset", "split", "method", "representation", "clustering", "metric", "value", "seed")


class NotApplicable(ValueError):
    """The method cannot run on this dataset (e.g. fewer than two unseen types to cluster).

    ``train-all`` records such a run as ``skipped`` with the reason instead of failing."""


@dataclass
class MethodResult:
    """Long-form metric rows (keys METRIC_KEYS), artifacts (kind, path, rows, sha256) and the
    effective parameters (after dataset defaults and subsampling) for the run record."""

    metrics: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"metrics": self.metrics, "artifacts": self.artifacts, "params": self.params}


def read_manifest(dataset_dir: str | Path) -> dict[str, Any]:
    p = Path(dataset_dir) / "manifest.json"
    if not p.exists():
        raise FileNotFoundError(f"{dataset_dir}: no manifest.json (dataset absent or ingest unfinished)")
    return json.loads(p.read_text(encoding="utf-8"))


def dataset_kind(manifest: dict[str, Any]) -> str | None:
    """The reader/format that produced a dataset (manifests name it under one of these keys)."""
    for key in ("reader", "format", "source_format", "name"):
        v = manifest.get(key)
        if isinstance(v, str):
            return v
    return None


def has_labels(dataset_dir: str | Path) -> bool:
    """True when the dataset has at least one mention with a non-empty label list."""
    p = Path(dataset_dir) / "mentions.parquet"
    if not p.exists():
        return False
    pf = pq.ParquetFile(p)
    for batch in pf.iter_batches(columns=["labels"], batch_size=65_536):
        for labels in batch.column(0).to_pylist():
            if labels:
                return True
    return False
