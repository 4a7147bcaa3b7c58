"""``atlas``: build the atlas incrementally (only what a new dataset, run or encoder changes), land it
in the warehouse, and publish the gold scores of the pairs scored now (task ``atlas``)."""
from __future__ import annotations

from typing import Any

from prefect import flow

from tasks.atlas import atlas_build_task, atlas_publish_task
from tasks.publish import publish_task


@flow(name="atlas")
def atlas(datasets: list[str] | None = None, runs: list[str] | None = None, pairs: list[list[str]] | None = None,
          encoders: list[str | None] | None = None, config: dict[str, Any] | None = None, full: bool = False,
          prune: bool = True, warehouse_path: str | None = None) -> dict[str, Any]:
    """``datasets`` / ``runs``: the inventories (default: every ingested dataset with event types and every
    run with clusterings); ``pairs``: ``[[source, target], ...]`` (default: every non-FrameNet inventory ->
    every FrameNet one); ``encoders``: HF ids, paths or ``run:<id>`` (default: the frozen MiniLM);
    ``config``: :class:`eventatlas.atlas.link.LinkConfig` fields; ``full``: rebuild every part."""
    built = atlas_build_task(datasets, runs, pairs, encoders, config, None, full, prune)
    landed = atlas_publish_task(built["root"], warehouse_path)
    published = publish_task([built["record"]], warehouse_path) if built["record"] else None
    return {"build": built, "landed": landed, "published": published}
