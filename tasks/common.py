"""Helpers shared by tasks and flows: which datasets exist, their fingerprints, run records."""
from __future__ import annotations

from pathlib import Path

from eventatlas import config
from eventatlas.data import ingested as ingested_manifests
# run records live in the core so core code (e.g. eventatlas.methods.ensemble) writes them without tasks/
from eventatlas.results.records import data_fingerprint, read_record, write_record  # noqa: F401 (re-exported)


def ingested(datasets_dir: Path | None = None) -> dict[str, Path]:
    """name -> directory of every dataset whose manifest landed (no manifest = absent)."""
    return {name: m.path for name, m in ingested_manifests(datasets_dir or config.datasets_dir()).items()}


def labelled_datasets(datasets_dir: Path | None = None) -> list[str]:
    return [name for name, m in ingested_manifests(datasets_dir or config.datasets_dir()).items() if m.has_labels()]
