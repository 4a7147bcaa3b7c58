"""Train task: one (method, dataset, seed) -> a run record on disk (never the warehouse).

The work is :func:`eventatlas.run.runner.run_method`; the record path (``runs/<run_id>/run.json``) is
what the publish task loads, which keeps frames out of Prefect's result store.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task

from eventatlas import config
from eventatlas.results.records import read_record
from eventatlas.run.runner import evaluate_model, run_method
from eventatlas.run.scaleout import pinned_threads


@task(name="train", task_run_name="train-{method}-{dataset}-seed{seed}")
def train_task(method: str, dataset: str, seed: int = 0, params: dict[str, Any] | None = None,
               dataset_dir: str | None = None, flow: str = "train-all", device: str = "auto",
               resume: bool = False, threads: int | None = None, reuse_unfinished: bool = False) -> str:
    """``threads`` pins the cell's torch/OpenMP/BLAS threads (pooled workers); ``reuse_unfinished``
    makes a retried cell write into the run directory its dead attempt left (``run_method``)."""
    logger = get_run_logger()
    ddir = Path(dataset_dir) if dataset_dir else config.datasets_dir() / dataset
    with pinned_threads(threads):
        path = run_method(method, ddir, seed=seed, params=params, device=device, resume=resume, flow=flow,
                          reuse_unfinished=reuse_unfinished)
    run = read_record(path)["run"]
    logger.info("%s on %s (seed %d): %s%s", method, dataset, seed, run["status"],
                f" ({run['error']})" if run.get("error") else "")
    return str(path)


@task(name="evaluate", task_run_name="evaluate-{model}-on-{dataset}-seed{seed}")
def evaluate_task(model: str, dataset: str, seed: int = 0, params: dict[str, Any] | None = None,
                  dataset_dir: str | None = None, flow: str = "evaluate", device: str = "auto",
                  threads: int | None = None, reuse_unfinished: bool = False, method: str | None = None) -> str:
    """Apply saved model ``model`` (``run:<run_id>``) to a dataset: a run record on disk, as ``train_task``
    (``method``: the model's, for the grid's log lines only)."""
    logger = get_run_logger()
    ddir = Path(dataset_dir) if dataset_dir else config.datasets_dir() / dataset
    with pinned_threads(threads):
        path = evaluate_model(model, ddir, seed=seed, params=params, device=device, flow=flow,
                              reuse_unfinished=reuse_unfinished)
    run = read_record(path)["run"]
    logger.info("%s on %s (seed %d): %s%s", model, dataset, seed, run["status"],
                f" ({run['error']})" if run.get("error") else "")
    return str(path)
