"""``build-wikievents``: the hierarchical multilingual event-grounding dataset.

The core build runs in the flow; with ``params["workers"] > 1`` its sharded steps (Wikidata
dump shards, Wikipedia multistream link-harvest shards) are submitted as Prefect task runs
on a task runner: the flow's own ``ProcessPoolTaskRunner`` (2 processes) by default, or the one
the ``runner`` parameter names at run time, with the strings of ``train-all --runner``
(``process[:N]``, ``dask[:N]``, ``dask:tcp://host:8786``; ``eventatlas.run.scaleout``); the build then
runs in a ``wikievents-core`` subflow bound to it. ``flow_with_runner("dask" | "ray", workers)``
binds the flow itself (Ray through ``prefect-ray`` when that is installed).
"""
from __future__ import annotations

from typing import Any

from prefect import flow

from eventatlas import config
from eventatlas.run.scaleout import parse_runner
from eventatlas.wiki.build import DEFAULT_PARAMS, XLEL_LANGUAGES, build
from tasks.wiki import PrefectShardMap, make_backend, record_task


def _task_runner(runner: str, workers: int = 2):
    """A Prefect task runner for ``ray``, a bare ``process``/``dask`` (``workers`` of them) or any
    ``train-all`` runner string (``process:N``, ``dask:N``, ``dask:tcp://...``)."""
    if runner == "ray":
        from prefect_ray import RayTaskRunner  # optional integration

        return RayTaskRunner()
    from tasks.runners import task_runner

    spec = parse_runner(runner)
    if spec.kind == "local":
        raise ValueError("runner 'local' has no task runner: the build then maps its shards in-process")
    if spec.workers is None and spec.address is None:
        spec = parse_runner(f"{spec.kind}:{workers}")
    return task_runner(spec)


@flow(name="wikievents-core")
def _core(backend: str, dumps: dict | None, api: dict | None, out: str, langs: list[str], p: dict[str, Any],
          build_id: str | None, wikinews_languages: list[str] | None, sharded: bool) -> dict:
    return build(make_backend(backend, dumps, api, langs), out, languages=langs, params=p, build_id=build_id,
                 wikinews_languages=wikinews_languages, executor=PrefectShardMap() if sharded else None)


@flow(name="build-wikievents", task_runner=_task_runner("process", 2))
def build_wikievents(backend: str = "dumps", dumps: dict | None = None, api: dict | None = None, out_dir: str | None = None,
                     languages: list[str] | None = None, wikinews_languages: list[str] | None = None,
                     params: dict[str, Any] | None = None, build_id: str | None = None, record: bool = True,
                     runner: str | None = None) -> dict:
    """Build one versioned wikievents dataset; dump dates are part of ``dumps["dates"]`` and recorded.

    ``runner`` (``process[:N]`` | ``dask[:N]`` | ``dask:tcp://host:8786`` | ``local``) picks where the
    shards run at run time (default: this flow's process pool); ``local`` leaves them to the core build
    (its own process pool of ``params["workers"]``, no task runs)."""
    spec = parse_runner(runner) if runner is not None else None  # a bad string fails before any work
    # dataset "wikigrounding", not "wikievents": that name is the KAIROS WikiEvents reader's
    out = out_dir or str(config.datasets_dir() / "wikigrounding")
    p = {**DEFAULT_PARAMS, **(params or {})}
    # the build runs in the flow; its shard maps (Wikidata scan, link harvest) become task runs
    langs = list(languages or XLEL_LANGUAGES)
    sharded = p.get("workers", 1) > 1 and (spec is None or spec.distributed)
    args = (backend, dumps, api, out, langs, p, build_id, wikinews_languages, sharded)
    # default: shards on this flow's own process pool; a named runner: a subflow bound to it
    man = _core.fn(*args) if spec is None or not spec.distributed else \
        _core.with_options(task_runner=_task_runner(runner))(*args)
    if record:
        record_task(man, out)
    return man


def flow_with_runner(runner: str = "process", workers: int = 2):
    """The flow bound to a task runner (process pool by default; ``dask``, ``dask:tcp://...``, ``ray``)."""
    return build_wikievents.with_options(task_runner=_task_runner(runner, workers))


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(flow_with_runner()(dumps=json.loads(open(sys.argv[1]).read())), default=str)[:2000])
