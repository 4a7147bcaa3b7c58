"""``detect``: find event mentions in a dataset's sentences with a saved detector and write them as a new
dataset (:func:`eventatlas.pipelines.detect.detect`)."""
from __future__ import annotations

from typing import Any

from prefect import flow

from eventatlas.pipelines import detect as pipeline
from tasks.engine import prefect_engine


@flow(name="detect")
def detect(dataset: str, model: str, name: str | None = None, threshold: float | None = None, device: str = "auto",
           batch_size: int = 64) -> dict[str, Any]:
    return pipeline.detect(dataset, model, name, threshold, device, batch_size, engine=prefect_engine())["manifest"]
