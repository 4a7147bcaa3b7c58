"""``detect``: find event mentions in a dataset's sentences with a saved detector and write them as a new
dataset (:func:`eventatlas.pipelines.detect.detect`)."""
from __future__ import annotations

from typing import Any

from prefect import flow

from eventatlas.pipelines import detect as pipeline
from tasks.engine import prefect_engine


@flow(name="detect")
def detect(dataset: str, model: str, name: str | None = None, threshold: float | None = None, device: str = "auto",
           batch_size: int = 64, shards: int = 1, runner: str = "local", threads: int | None = None) -> dict[str, Any]:
    """``runner`` (``eventatlas.run.scaleout``): where the ``shards`` run, each pinned to ``threads`` threads."""
    engine = prefect_engine(runner, threads)
    return pipeline.detect(dataset, model, name, threshold, device, batch_size, shards, engine=engine)["manifest"]
