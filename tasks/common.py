"""Helpers shared by tasks and flows: which datasets exist, their fingerprints, run records."""
from __future__ import annotations

from pathlib import Path

from eventatlas import config
from eventatlas.methods.base import has_labels
# run records live in the core so core code (e.g. induction.posthoc) writes them without tasks/
from eventatlas.records import data_fingerprint, read_record, write_record  # noqa: F401 (re-exported)


def ingested(datasets_dir: Path | None = None) -> dict[str, Path]:
    """name -> directory of every dataset whose manifest landed (no manifest = absent)."""
    ddir = Path(datasets_dir or config.datasets_dir())
    if not ddir.exists():
        return {}
    return {p.parent.name: p.parent for p in sorted(ddir.glob("*/manifest.json"))}


def labelled_datasets(datasets_dir: Path | None = None) -> list[str]:
    return [name for name, d in ingested(datasets_dir).items() if has_labels(d)]
