"""Helpers shared by tasks and flows: which datasets exist, their fingerprints, run records."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eventatlas import config
from eventatlas.io import atomic_write_json, fingerprint_paths
from eventatlas.methods.base import has_labels


def ingested(datasets_dir: Path | None = None) -> dict[str, Path]:
    """name -> directory of every dataset whose manifest landed (no manifest = absent)."""
    ddir = Path(datasets_dir or config.datasets_dir())
    if not ddir.exists():
        return {}
    return {p.parent.name: p.parent for p in sorted(ddir.glob("*/manifest.json"))}


def labelled_datasets(datasets_dir: Path | None = None) -> list[str]:
    return [name for name, d in ingested(datasets_dir).items() if has_labels(d)]


def data_fingerprint(dataset_dir: Path) -> str:
    """The manifest's input fingerprint when it has one, else a content hash of the mentions."""
    man = json.loads((Path(dataset_dir) / "manifest.json").read_text(encoding="utf-8"))
    for key in ("fingerprint", "input_fingerprint", "source_fingerprint"):
        if isinstance(man.get(key), str):
            return man[key]
    return fingerprint_paths([Path(dataset_dir) / "mentions.parquet"])


def write_record(run_dir: Path, record: dict[str, Any]) -> Path:
    path = Path(run_dir) / "run.json"
    atomic_write_json(path, record)
    return path


def read_record(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))
