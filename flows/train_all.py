"""``train-all``: every method x every dataset it applies to x every seed, published to the warehouse
(:func:`eventatlas.pipelines.train_grid.train_all`, its cells as task runs)."""
from __future__ import annotations

from typing import Any

from prefect import flow

from eventatlas.pipelines import train_grid
from tasks.engine import prefect_engine
from tasks.publish import summarize_task
from tasks.report import report_task


@flow(name="train-all", log_prints=True)
def train_all(
    datasets: list[str] | None = None,
    methods: list[str] | None = None,
    seeds: list[int] | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    device: str = "auto",
    resume: bool = False,
    report: bool = False,
    runner: str = "local",
    threads: int | None = None,
) -> dict[str, Any]:
    """Run each method on each dataset it applies to (or ``datasets``) for each seed; see
    :func:`eventatlas.pipelines.train_grid.train_all`.

    ``runner`` (``eventatlas.run.scaleout``): ``local`` runs the cells here one by one; ``process[:N]``,
    ``dask[:N]``, ``dask:tcp://host:port`` and ``ray[...]`` submit every cell as a task run on that task
    runner (a ``train-grid`` subflow), each pinned to ``threads`` threads (default 1); cells of a
    ``gpu="required"`` method only go to workers with the resource ``GPU=1``. Workers return record paths;
    the records are published here in plan order, so results equal a local run.
    """
    engine = prefect_engine(runner, threads, summarize=summarize_task, report=report_task)
    return train_grid.train_all(datasets, methods, seeds, params, device, resume, report, runner, engine=engine)


if __name__ == "__main__":
    train_all()
