"""The engine without Prefect (what the CLI passes when no Prefect API is in use)."""
from __future__ import annotations

from typing import Callable

from .engine import Engine, in_order, in_process, log, publish_here, run_grid


def engine(runner: str = "local", *, threads: int | None = None, say: Callable[[str], None] = print,
           warn: Callable[[str], None] | None = None) -> Engine:
    """The engine without Prefect: jobs here one by one (``local``) or on a Dask cluster (``dask[:N]``,
    ``dask:tcp://...``); records published in this process as each job ends."""
    from ..run.scaleout import parse_runner

    spec = parse_runner(runner, check_installed=False)
    warn = warn or log.warning
    publish = publish_here(warn)
    mapper = in_order
    if spec.kind == "local":
        execute = in_process(threads, say)
    elif spec.kind == "dask":
        from .dask import dask_execute, dask_map

        execute, mapper = dask_execute(spec, threads or 1, say), dask_map(spec, threads or 1)
    else:
        raise ValueError(f"runner {runner!r} needs Prefect (its task runners): configure a Prefect API or set "
                         "EVENTATLAS_PREFECT=always; without Prefect use local or dask[:N]")
    return Engine(grid=lambda jobs: run_grid(jobs, execute, publish, warn), publish=publish, say=say, warn=warn,
                  map=mapper)
