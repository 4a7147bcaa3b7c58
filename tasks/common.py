"""Helpers shared by tasks and flows: which datasets exist, their fingerprints, run records."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eventatlas import config
from eventatlas.data import Manifest
from eventatlas.data import ingested as ingested_manifests
from eventatlas.io import atomic_write_json


def ingested(datasets_dir: Path | None = None) -> dict[str, Path]:
    """name -> directory of every dataset whose manifest landed (no manifest = absent)."""
    return {name: m.path for name, m in ingested_manifests(datasets_dir or config.datasets_dir()).items()}


def labelled_datasets(datasets_dir: Path | None = None) -> list[str]:
    return [name for name, m in ingested_manifests(datasets_dir or config.datasets_dir()).items() if m.has_labels()]


def data_fingerprint(dataset_dir: Path) -> str:
    """What a run records about its data (``Manifest.data_fingerprint``)."""
    return Manifest.read(dataset_dir).data_fingerprint()


def write_record(run_dir: Path, record: dict[str, Any]) -> Path:
    path = Path(run_dir) / "run.json"
    atomic_write_json(path, record)
    return path


def read_record(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))
