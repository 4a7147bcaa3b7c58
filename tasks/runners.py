"""Prefect task runners for a ``runner`` string (``eventatlas.run.scaleout.parse_runner``).

``process[:N]`` is Prefect's ``ProcessPoolTaskRunner``; ``dask[:N]`` a temporary local Dask cluster of
N single-threaded worker processes and ``dask:tcp://host:port`` an existing cluster, both through
``prefect_dask.DaskTaskRunner``; ``ray[:N]`` / ``ray:ADDRESS`` ``prefect_ray.RayTaskRunner`` (optional extra
``[ray]``). ``gpu_placement(spec, True)`` is the context a GPU cell is submitted in: on Dask it annotates
the task with the worker resource ``{"GPU": 1}``, so only workers started with ``--resources GPU=1`` run
it; on Ray it asks for ``num_gpus=1``.
"""
from __future__ import annotations

import contextlib
from typing import Any

from eventatlas.run.scaleout import RunnerSpec


def task_runner(spec: RunnerSpec) -> Any:
    if spec.kind == "process":
        from prefect.task_runners import ProcessPoolTaskRunner

        return ProcessPoolTaskRunner(max_workers=spec.n_workers())
    if spec.kind == "dask":
        from prefect_dask import DaskTaskRunner

        if spec.address:
            return DaskTaskRunner(address=spec.address)
        from eventatlas.modeling.device import cuda_count

        kwargs: dict[str, Any] = {"n_workers": spec.n_workers(), "threads_per_worker": 1, "processes": True,
                                  "dashboard_address": None}
        if cuda_count():  # local workers share this machine's GPU(s)
            kwargs["resources"] = {"GPU": 1}
        return DaskTaskRunner(cluster_kwargs=kwargs)
    if spec.kind == "ray":
        try:
            from prefect_ray import RayTaskRunner
        except ImportError:
            raise RuntimeError("runner 'ray' needs prefect-ray and ray: pip install -e '.[ray]' "
                               "(the optional extra; see README 'Scale out')") from None
        if spec.address:
            return RayTaskRunner(address=spec.address)
        from eventatlas.modeling.device import cuda_count

        init: dict[str, Any] = {"num_cpus": spec.n_workers(), "include_dashboard": False}
        if cuda_count():
            init["num_gpus"] = cuda_count()
        return RayTaskRunner(init_kwargs=init)
    raise ValueError(f"runner {spec.kind!r} has no task runner (the local runner calls tasks in the flow)")


def gpu_placement(spec: RunnerSpec, needs_gpu: bool):
    """The context to submit a cell in: Dask resource annotation / Ray ``num_gpus=1`` for GPU cells, else
    nothing."""
    if needs_gpu and spec.kind == "dask":
        import dask

        return dask.annotate(resources={"GPU": 1})
    if needs_gpu and spec.kind == "ray":
        from prefect_ray.context import remote_options

        return remote_options(num_gpus=1)
    return contextlib.nullcontext()


def gpu_capacity(runner: Any) -> int | None:
    """GPUs a started task runner can give cells: Dask workers declaring ``GPU``, the Ray cluster's
    ``GPU`` resource; None when not known (other runners)."""
    if type(runner).__name__ == "RayTaskRunner":
        import ray

        return int(ray.cluster_resources().get("GPU", 0)) if ray.is_initialized() else None
    return dask_gpu_workers(runner)


def dask_gpu_workers(runner: Any) -> int | None:
    """Workers of a started ``DaskTaskRunner``'s cluster that declare a GPU resource (None: not Dask)."""
    import inspect

    client = getattr(runner, "client", None) if type(runner).__name__ == "DaskTaskRunner" else None
    if client is None:
        return None
    every = {"n_workers": -1} if "n_workers" in inspect.signature(client.scheduler_info).parameters else {}
    workers = client.scheduler_info(**every).get("workers", {})
    return sum(1 for w in workers.values() if (w.get("resources") or {}).get("GPU", 0) >= 1)
