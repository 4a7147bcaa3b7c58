"""Thin Prefect tasks of the wikievents build; the work is in ``eventatlas.wiki``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task


def make_backend(backend: str, dumps: dict | None, api: dict | None, languages: list[str] | None = None):
    """``backend="dumps"`` takes the dump layout dict; ``"api"`` the live-API backend's keyword options."""
    if backend == "dumps":
        from eventatlas.wiki.dumps import DumpBackend

        if not dumps or not dumps.get("wikidata"):
            raise ValueError("backend='dumps' needs dumps={'wikidata': ..., 'wikipedia': {lang: {'xml', 'index'}}, ...}")
        return DumpBackend(dumps)
    if backend == "api":
        from eventatlas.wiki.api_backend import ApiBackend

        opts = dict(api or {})
        opts.setdefault("languages", languages or ["en"])
        return ApiBackend(**opts)
    raise ValueError(f"unknown backend {backend!r} (dumps | api)")


@task(name="wiki-shard", task_run_name="{fn.__name__}")
def shard_task(fn, *args) -> Any:
    """One shard of a sharded step (``wikidata.scan_shard`` or ``dumps.harvest_shard``): runs where the
    flow's task runner puts it (a worker process with the default ProcessPoolTaskRunner)."""
    return fn(*args)


class PrefectShardMap:
    """An ``executor`` for the core build whose ``map`` submits every shard as a Prefect task."""

    def map(self, fn, *iterables):
        futures = [shard_task.submit(fn, *args) for args in zip(*iterables)]
        return [f.result() for f in futures]


@task(name="record-wikievents")
def record_task(manifest: dict, out_dir: str) -> str:
    """Record the build in the warehouse through the publish path: ``"queued"`` (not a failure) when the
    warehouse stays busy, so a read-only session left open never fails a finished build."""
    from prefect import get_run_logger

    from eventatlas.store.publishing import publish_build

    return publish_build(Path(out_dir) / "builds" / manifest["build_id"], warn=get_run_logger().warning)
