"""How a pipeline's steps run, injected by its caller.

- ``grid(jobs) -> GridResult``: runs train/evaluate jobs (keyword arguments of :func:`run_job`) and lands each
  run record as it comes, in plan order (so a distributed grid publishes what a local one does);
- ``map(fn_ref, jobs) -> list``: runs ``fn_ref`` (``"eventatlas.module:function"``, importable on every worker)
  once per job (keyword arguments), on the runner (here one by one, on Dask, on Prefect's task runners), and
  returns the results in job order; a job that fails fails the map, naming it;
- ``publish(records) -> dict``: lands run records (:func:`eventatlas.store.publishing.publish_records`
  or the Prefect publish task around it; the only warehouse writer);
- ``steps``: named steps a caller runs its own way (``ingest``: with Prefect's retries; ``atlas-build``,
  ``atlas-land``, ``summarize``, ``report``: as Prefect tasks); a step not named runs as written here;
- ``say`` / ``warn``: progress and warning lines (the console, or Prefect's run logger).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

Job = dict[str, Any]
# (job, its run record path, or the exception that lost it) in plan order, as each is known
Results = Iterator[tuple[Job, "str | BaseException"]]
Execute = Callable[[list[Job]], Results]

log = logging.getLogger("eventatlas.pipelines")


def run_job(method: str | None = None, dataset: str | None = None, seed: int = 0,
            params: dict[str, Any] | None = None, dataset_dir: str | None = None, flow: str = "train-all",
            device: str = "auto", resume: bool = False, threads: int | None = None, reuse_unfinished: bool = False,
            model: str | None = None) -> str:
    """One cell: train ``method`` on a dataset, or apply saved ``model`` (``run:<id>``) to it; the path of
    its run record (never the warehouse). ``threads`` pins torch/OpenMP/BLAS threads (pooled workers);
    ``reuse_unfinished`` writes into the run directory a killed attempt left."""
    from pathlib import Path

    from .. import config
    from ..run.runner import evaluate_model, run_method
    from ..run.scaleout import pinned_threads

    ddir = Path(dataset_dir) if dataset_dir else config.datasets_dir() / str(dataset)
    with pinned_threads(threads):
        if model is not None:
            return str(evaluate_model(model, ddir, seed=seed, params=params, device=device, flow=flow,
                                      reuse_unfinished=reuse_unfinished))
        return str(run_method(str(method), ddir, seed=seed, params=params, device=device, resume=resume, flow=flow,
                              reuse_unfinished=reuse_unfinished))


def resolve_callable(ref: str) -> Callable[..., Any]:
    """``"eventatlas.module:function"`` -> the function (only the project's own: a job names code by string so
    that it travels to any worker, and only this package's functions may run there)."""
    import importlib

    module, _, attr = ref.partition(":")
    if not (module == "eventatlas" or module.startswith("eventatlas.")) or not attr.isidentifier():
        raise ValueError(f"job function {ref!r}: expected 'eventatlas.<module>:<function>'")
    return getattr(importlib.import_module(module), attr)


def call_pinned(fn_ref: str, job: Job, threads: int | None = None) -> Any:
    """One job of a map: ``fn_ref(**job)`` under ``threads`` torch/OpenMP/BLAS threads (pooled workers)."""
    from ..run.scaleout import pinned_threads

    with pinned_threads(threads):
        return resolve_callable(fn_ref)(**job)


def in_order(fn_ref: str, jobs: list[Job]) -> list[Any]:
    """A map here, one job after another (the ``local`` runner)."""
    return [call_pinned(fn_ref, job) for job in jobs]


def describe_job(job: Job) -> str:
    what = f"apply {job['model']}" if job.get("model") else str(job.get("method"))
    return f"{what} on {job.get('dataset')} seed {job.get('seed', 0)}"


def in_process(threads: int | None = None, say: Callable[[str], None] | None = None) -> Execute:
    """The jobs one after another in this process. ``say`` gets a line as each starts and ends: a cell can
    train for an hour, and a log piped to a file shows nothing else."""
    from ..tracking.records import read_record

    def execute(jobs: list[Job]) -> Results:
        for i, job in enumerate(jobs, 1):
            what = f"[{i}/{len(jobs)}] {describe_job(job)}"
            if say:
                say(f"{what}: started {time.strftime('%H:%M:%S')}")
            t0 = time.monotonic()
            rec = run_job(**{**job, "threads": job.get("threads", threads)})
            if say:
                run = read_record(rec)["run"]
                say(f"{what}: {run['status']} in {time.monotonic() - t0:.0f} s, run {run['run_id']}")
            yield job, rec
    return execute


@dataclass
class GridResult:
    """What a grid ran: ``records`` (landed or queued, plan order), ``by_job`` (one per job: its record
    path or None when the job was lost), ``failed`` / ``skipped`` runs, runs ``queued`` on disk because the
    warehouse was busy, the ``warehouse`` written."""

    records: list[str] = field(default_factory=list)
    by_job: list[str | None] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    warehouse: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"records": self.records, "by_job": self.by_job, "failed": self.failed, "skipped": self.skipped,
                "queued": self.queued, "warehouse": self.warehouse}


def run_grid(jobs: list[Job], execute: Execute, publish: Callable[[list[str]], dict[str, Any]],
             warn: Callable[[str], None] | None = None) -> GridResult:
    """Run ``jobs`` with ``execute`` and publish each record as it comes (a busy warehouse queues it: ``queued``);
    a job that never wrote a record (it outlived every retry), or whose record the publish path rejects, is
    counted failed, and the grid goes on."""
    from ..store.publishing import PublishRejected

    out = GridResult()
    for job, rec in execute(jobs):
        if isinstance(rec, BaseException):
            (warn or log.warning)(f"cell {describe_job(job)} lost: {type(rec).__name__}: {rec}")
            out.failed.append(f"{job.get('method') or job.get('model')}/{job.get('dataset')}/seed{job.get('seed', 0)}: "
                              f"{type(rec).__name__}: {rec}")
            out.by_job.append(None)
            continue
        try:
            res = publish([rec])
        except PublishRejected as e:  # a record the warehouse cannot hold: the run counts failed, the grid goes on
            (warn or log.warning)(f"cell {describe_job(job)}: {e}")
            res = {**e.outcome.as_dict(), "failed": [f"{describe_job(job)}: not published: {e}"]}
        out.records.append(rec)
        out.by_job.append(rec)
        out.warehouse = res.get("warehouse")
        out.failed += res.get("failed", [])
        out.skipped += res.get("skipped", [])
        done = set(res.get("from_queue", ()))
        out.queued = [q for q in out.queued if q not in done] + [q for q in res.get("queued", ())
                                                                  if q not in out.queued]
    return out


def publish_here(warn: Callable[[str], None] | None = None) -> Callable[[Iterable[str]], dict[str, Any]]:
    """The in-process publisher: :func:`eventatlas.store.publishing.publish_records`, as a dict."""
    def publish(records: Iterable[str]) -> dict[str, Any]:
        from ..store.publishing import publish_records

        return publish_records(list(records), warn=warn).as_dict()
    return publish


@dataclass
class Engine:
    """See the module docstring. :func:`eventatlas.pipelines.local.engine` builds the one without Prefect."""

    grid: Callable[[list[Job]], GridResult]
    publish: Callable[[list[str]], dict[str, Any]]
    say: Callable[[str], None] = print
    warn: Callable[[str], None] = log.warning
    steps: dict[str, Callable[..., Any]] = field(default_factory=dict)
    map: Callable[[str, list[Job]], list[Any]] = in_order

    def step(self, name: str, default: Callable[..., Any]) -> Callable[..., Any]:
        """The caller's own way of running step ``name``, else ``default``."""
        return self.steps.get(name, default)
