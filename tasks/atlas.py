"""Thin Prefect tasks of the atlas build; the work is in ``eventatlas.atlas`` and ``eventatlas.results.publishing``."""
from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task


@task(name="atlas-build")
def atlas_build_task(datasets: list[str] | None = None, runs: list[str] | None = None,
                     pairs: list[list[str]] | None = None, encoders: list[str | None] | None = None,
                     config: dict[str, Any] | None = None, root: str | None = None, full: bool = False,
                     prune: bool = True) -> dict[str, Any]:
    """:func:`eventatlas.atlas.build.build` (only the parts whose inputs changed) + the run record of the
    pairs scored against the gold (``record``: its path, or None)."""
    from eventatlas.atlas.build import build, write_record
    from eventatlas.atlas.link import LinkConfig

    cfg = LinkConfig(**(config or {}))
    encs = encoders or [None]
    rep = build(datasets=datasets, runs=runs, pairs=[tuple(p) for p in pairs] if pairs else None, encoders=encs,
                cfg=cfg, root=root, full=full, prune=prune)
    record = write_record(rep, encoders=encs, cfg=cfg)
    get_run_logger().info("atlas: %d parts built, %d kept, %d removed in %.1fs", len(rep.built), len(rep.kept),
                          len(rep.removed), rep.seconds)
    return {**rep.as_dict(), "record": str(record) if record else None}


@task(name="atlas-publish")
def atlas_publish_task(root: str, warehouse_path: str | None = None) -> dict[str, Any]:
    """:func:`eventatlas.results.publishing.publish_atlas`: land the changed parts in the warehouse."""
    from eventatlas.results.publishing import publish_atlas

    return publish_atlas(root, warehouse_path=warehouse_path, warn=get_run_logger().warning)
