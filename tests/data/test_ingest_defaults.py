"""The no-path ingest of framenet_jsonl (the `ingest/framenet_jsonl` deployment): train only, into the
dataset name the README's train-only numbers use, and a log line that names the real source."""
from __future__ import annotations

import logging
import shutil

import pyarrow.parquet as pq
import pytest

from eventatlas import config
from eventatlas.data.registry import dataset_entry


def test_registry_default_is_the_train_file():
    e = dataset_entry("framenet_jsonl")
    assert e["dataset"] == "framenet_fulltext" and e["path"].endswith("fulltext_opensesame_train.jsonl")


class _Keep(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_deployment_ingest_without_path_is_train_only(tmp_path, monkeypatch, eventatlas_env):
    """A shared-data layout with train and dev: the flow with no path ingests train only and logs
    the file it read (not "(download)")."""
    shared = tmp_path / "shared"
    (shared / "framenet17").mkdir(parents=True)
    for split in ("train", "dev"):
        shutil.copy(config.samples_dir() / "framenet_jsonl" / f"fulltext_sample_{split}.jsonl",
                    shared / "framenet17" / f"fulltext_opensesame_{split}.jsonl")
    monkeypatch.setenv("EVENTATLAS_SHARED_DATA", str(shared))
    from flows.ingest import ingest

    keep = _Keep()
    runs_logger = logging.getLogger("prefect.task_runs")  # the run logger's records, whatever the console shows
    runs_logger.addHandler(keep)
    try:
        man = ingest("framenet_jsonl")
    finally:
        runs_logger.removeHandler(keep)
    assert man["dataset"] == "framenet_fulltext"
    splits = set(pq.read_table(config.datasets_dir() / "framenet_fulltext" / "mentions.parquet")["split"].to_pylist())
    assert splits == {"train"}
    lines = [m for m in keep.messages if m.startswith("ingested framenet_fulltext")]
    src = shared / "framenet17" / "fulltext_opensesame_train.jsonl"
    assert lines and all(f"from {src}" in m for m in lines), lines
    assert not any("(download)" in m for m in keep.messages)
