"""Thin Prefect tasks of the atlas pipeline (:mod:`eventatlas.pipelines.atlas`)."""
from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task

from eventatlas.pipelines.atlas import build_step, land_step


@task(name="atlas-build")
def atlas_build_task(datasets: list[str] | None = None, runs: list[str] | None = None,
                     pairs: list[list[str]] | None = None, encoders: list[str | None] | None = None,
                     config: dict[str, Any] | None = None, root: str | None = None, full: bool = False,
                     prune: bool = True) -> dict[str, Any]:
    """Build only the parts whose inputs changed; the scores' run record (``record``) or None."""
    return build_step(datasets, runs, pairs, encoders, config, root, full, prune)


@task(name="atlas-publish")
def atlas_publish_task(root: str, warehouse_path: str | None = None) -> dict[str, Any]:
    """Land the changed parts in the warehouse."""
    return land_step(root, warehouse_path, warn=get_run_logger().warning)
