"""``atlas``: build the atlas incrementally, land it in the warehouse, and publish the gold scores of the pairs
scored now (:func:`eventatlas.pipelines.atlas.atlas`, its steps as tasks)."""
from __future__ import annotations

from typing import Any

from prefect import flow

from eventatlas.pipelines import atlas as pipeline
from tasks.atlas import atlas_build_task, atlas_publish_task
from tasks.engine import prefect_engine


@flow(name="atlas")
def atlas(datasets: list[str] | None = None, runs: list[str] | None = None, pairs: list[list[str]] | None = None,
          encoders: list[str | None] | None = None, config: dict[str, Any] | None = None, full: bool = False,
          prune: bool = True, warehouse_path: str | None = None) -> dict[str, Any]:
    """See :func:`eventatlas.pipelines.atlas.atlas`."""
    engine = prefect_engine(warehouse_path=warehouse_path, atlas_build=atlas_build_task, atlas_land=atlas_publish_task)
    return pipeline.atlas(datasets, runs, pairs, encoders, config, full, prune, warehouse_path, engine=engine)
