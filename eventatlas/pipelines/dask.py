"""The Dask executor without Prefect: each job a task on a Dask cluster (a temporary local one of N
single-threaded worker processes, or an existing scheduler), results taken in plan order so records land
in the order a local run lands them."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from .engine import Execute, Job, Results, call_pinned, describe_job, run_job


@contextlib.contextmanager
def _client(spec: Any) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    if spec.address:
        with Client(spec.address) as client:
            yield client
        return
    from ..modeling.device import cuda_count

    gpu = {"resources": {"GPU": 1}} if cuda_count() else {}  # local workers share this machine's GPU(s)
    with LocalCluster(n_workers=spec.n_workers(), threads_per_worker=1, processes=True, dashboard_address=None,
                      **gpu) as cluster, Client(cluster) as client:
        yield client


def _gpu_capacity(client: Any) -> int:
    return sum(int((w.get("resources") or {}).get("GPU", 0)) for w in client.scheduler_info()["workers"].values())


def _gpu_resources(job: Job) -> dict[str, int] | None:
    from ..methods import get_spec

    return {"GPU": 1} if job.get("method") and get_spec(job["method"]).gpu == "required" else None


def dask_execute(spec: Any, threads: int = 1, say: Callable[[str], None] | None = None) -> Execute:
    """Every job submitted at once, each pinned to ``threads`` threads and allowed to take over the run
    directory a dead attempt left (a worker that dies has its task rescheduled by Dask); a GPU-requiring
    method's job goes only to workers started with ``--resources GPU=1``."""
    def execute(jobs: list[Job]) -> Results:
        with _client(spec) as client:
            need = sum(_gpu_resources(j) is not None for j in jobs)
            if need and not _gpu_capacity(client):
                raise RuntimeError(f"{need} cells need a GPU but no worker of the Dask cluster declares one: start "
                                   "one with `dask worker ... --resources GPU=1`")
            futures = [client.submit(run_job, **{**job, "threads": threads, "reuse_unfinished": True}, pure=False,
                                     resources=_gpu_resources(job), retries=2)
                       for job in jobs]
            for i, (job, fut) in enumerate(zip(jobs, futures), 1):
                try:
                    rec = fut.result()
                except Exception as e:  # noqa: BLE001 - a lost cell is counted, the grid goes on
                    yield job, e
                    continue
                if say:
                    say(f"[{i}/{len(jobs)}] {describe_job(job)}: done")
                yield job, rec
    return execute


def dask_map(spec: Any, threads: int = 1) -> Callable[[str, list[Job]], list[Any]]:
    """An engine's ``map`` on a Dask cluster: every job submitted at once (retried twice where its worker
    dies), the results in job order; a job that fails raises, naming it."""
    def map_(fn_ref: str, jobs: list[Job]) -> list[Any]:
        with _client(spec) as client:
            futures = [client.submit(call_pinned, fn_ref, job, threads, pure=False, retries=2) for job in jobs]
            out = []
            for i, fut in enumerate(futures):
                try:
                    out.append(fut.result())
                except Exception as e:
                    raise RuntimeError(f"job {i + 1}/{len(jobs)} of {fn_ref} failed on the Dask cluster: "
                                       f"{type(e).__name__}: {e}") from e
            return out
    return map_
