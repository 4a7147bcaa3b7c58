"""``discover``: a dataset's event types, induced, described and linked (:func:`eventatlas.pipelines.discover.discover`)."""
from __future__ import annotations

from typing import Any

from prefect import flow

from eventatlas.pipelines import discover as pipeline
from tasks.engine import prefect_engine


@flow(name="discover", flow_run_name="discover-{dataset}")
def discover(dataset: str, k: int | None = None, link_to: list[str] | None = None, detector: str | None = None,
             algorithm: str = "agglomerative", encoder: str | None = None, seed: int = 0, device: str = "auto",
             threshold: float | None = None, runner: str = "local") -> dict[str, Any]:
    """``runner``: where a detection's shards run (``detector`` given)."""
    return pipeline.discover(dataset, k, link_to, detector, algorithm, encoder, seed, device, threshold,
                             engine=prefect_engine(runner))
