"""Helpers shared by tasks and flows: which ingested datasets have labels."""
from __future__ import annotations

from pathlib import Path

from eventatlas import config
from eventatlas.data import ingested as ingested_manifests


def labelled_datasets(datasets_dir: Path | None = None) -> list[str]:
    return [name for name, m in ingested_manifests(datasets_dir or config.datasets_dir()).items() if m.has_labels()]
