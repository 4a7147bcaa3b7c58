"""Train / evaluate tasks: one cell -> a run record on disk (never the warehouse).

The work is :func:`eventatlas.pipelines.engine.run_job`; the record path (``runs/<run_id>/run.json``) is what the
publish task loads, which keeps frames out of Prefect's result store.
"""
from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task

from eventatlas.pipelines.engine import run_job
from eventatlas.tracking.records import read_record


def _log(what: str, dataset: str, seed: int, path: str) -> None:
    run = read_record(path)["run"]
    get_run_logger().info("%s on %s (seed %d): %s%s", what, dataset, seed, run["status"],
                          f" ({run['error']})" if run.get("error") else "")


@task(name="train", task_run_name="train-{method}-{dataset}-seed{seed}")
def train_task(method: str, dataset: str, seed: int = 0, params: dict[str, Any] | None = None,
               dataset_dir: str | None = None, flow: str = "train-all", device: str = "auto",
               resume: bool = False, threads: int | None = None, reuse_unfinished: bool = False) -> str:
    """``threads`` pins the cell's torch/OpenMP/BLAS threads (pooled workers); ``reuse_unfinished``
    makes a retried cell write into the run directory its dead attempt left (``run_method``)."""
    path = run_job(method=method, dataset=dataset, seed=seed, params=params, dataset_dir=dataset_dir, flow=flow,
                   device=device, resume=resume, threads=threads, reuse_unfinished=reuse_unfinished)
    _log(method, dataset, seed, path)
    return path


@task(name="evaluate", task_run_name="evaluate-{model}-on-{dataset}-seed{seed}")
def evaluate_task(model: str, dataset: str, seed: int = 0, params: dict[str, Any] | None = None,
                  dataset_dir: str | None = None, flow: str = "evaluate", device: str = "auto",
                  threads: int | None = None, reuse_unfinished: bool = False, method: str | None = None) -> str:
    """Apply saved model ``model`` (``run:<run_id>``) to a dataset: a run record on disk, as ``train_task``
    (``method``: the model's, for the grid's log lines only)."""
    path = run_job(model=model, dataset=dataset, seed=seed, params=params, dataset_dir=dataset_dir, flow=flow,
                   device=device, threads=threads, reuse_unfinished=reuse_unfinished)
    _log(model, dataset, seed, path)
    return path


def task_of(job: dict[str, Any]):
    """A job naming a saved ``model`` applies it (the evaluate task); any other trains."""
    return evaluate_task if job.get("model") else train_task
