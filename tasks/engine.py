"""The Prefect engine of the pipelines (:mod:`eventatlas.pipelines.engine`): a grid's cells as task runs (here one
by one, or on a ``train-grid`` subflow bound to the runner's task runner), records landed by the publish task,
steps as tasks, lines to the run logger."""
from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.context import FlowRunContext

from eventatlas.pipelines.engine import Engine, GridResult, Job, Results, call_pinned, in_order, run_grid
from eventatlas.run.scaleout import parse_runner
from tasks.publish import publish_task
from tasks.runners import gpu_capacity, gpu_placement, task_runner
from tasks.train import task_of

# a cell whose worker died is run again elsewhere (Dask reschedules it; these retries cover a crash the task
# engine sees); its run directory is reused, and only the flow publishes, so nothing doubles
CELL_RETRIES = 2


def _tasks_here(threads: int | None):
    def execute(jobs: list[Job]) -> Results:
        for job in jobs:
            yield job, task_of(job)(**job, threads=threads)
    return execute


def _submitted(runner: str, threads: int | None):
    spec = parse_runner(runner)

    def execute(jobs: list[Job]) -> Results:
        from eventatlas.methods import get_spec

        gpu = [bool(j.get("method")) and get_spec(j["method"]).gpu == "required" for j in jobs]
        if any(gpu) and gpu_capacity(FlowRunContext.get().task_runner) == 0:
            how = "`ray start ... --num-gpus=1`" if spec.kind == "ray" else "`dask worker ... --resources GPU=1`"
            raise RuntimeError(f"{sum(gpu)} cells need a GPU but no worker of the {spec.kind} cluster at {runner!r} "
                               f"declares one: start one with {how}")
        futures = []
        for job, needs_gpu in zip(jobs, gpu):
            task = task_of(job).with_options(retries=CELL_RETRIES, retry_delay_seconds=1)
            with gpu_placement(spec, needs_gpu):
                futures.append(task.submit(**{**job, "threads": threads, "reuse_unfinished": True}))
        for job, fut in zip(jobs, futures):
            try:
                yield job, fut.result()
            except Exception as e:  # noqa: BLE001 - the cell never wrote a record (it outlived every retry)
                get_run_logger().error("cell %s on %s seed %s lost: %s", job.get("method"), job.get("dataset"),
                                       job.get("seed"), e)
                yield job, e
    return execute


def _publish(warehouse_path: str | None = None):
    return lambda records: publish_task(list(records), warehouse_path)


@flow(name="train-grid")
def train_grid(jobs: list[dict[str, Any]], runner: str, threads: int | None = None) -> dict[str, Any]:
    """The cells of a grid as task runs on the runner this subflow is bound to; their records are published
    here, in the flow's process, in plan order (so a run equals a local one)."""
    logger = get_run_logger()
    return run_grid(jobs, _submitted(runner, threads), _publish(), logger.warning).as_dict()


@task(name="job")
def job_task(fn_ref: str, job: dict[str, Any], threads: int | None = None) -> Any:
    return call_pinned(fn_ref, job, threads)


@flow(name="map-jobs")
def map_jobs(fn_ref: str, jobs: list[dict[str, Any]], threads: int | None = None) -> list[Any]:
    """An engine's ``map`` as task runs on the runner this subflow is bound to (a dead worker's job is retried);
    the results in job order."""
    name = fn_ref.rpartition(":")[2]
    futures = [job_task.with_options(task_run_name=f"{name}-{i}", retries=CELL_RETRIES, retry_delay_seconds=1)
               .submit(fn_ref, job, threads) for i, job in enumerate(jobs)]
    return [f.result() for f in futures]


def prefect_engine(runner: str = "local", threads: int | None = None, warehouse_path: str | None = None,
                   **steps: Any) -> Engine:
    """The engine a flow passes to its pipeline: ``local`` runs each cell as a task run of the flow, any
    other runner on a ``train-grid`` subflow bound to its task runner; ``steps``: tasks by step name."""
    logger = get_run_logger()
    spec = parse_runner(runner)
    publish = _publish(warehouse_path)
    mapper = in_order
    if spec.distributed:
        sub = train_grid.with_options(task_runner=task_runner(spec))

        def grid(jobs: list[Job]) -> GridResult:
            return GridResult(**sub(jobs, runner, threads or 1))

        def on_runner(fn_ref: str, jobs: list[Job]) -> list[Any]:
            return map_jobs.with_options(task_runner=task_runner(spec))(fn_ref, jobs, threads or 1)
        mapper = on_runner
    else:
        def grid(jobs: list[Job]) -> GridResult:
            return run_grid(jobs, _tasks_here(threads), publish, logger.warning)
    return Engine(grid=grid, publish=publish, say=logger.info, warn=logger.warning,
                  steps={k.replace("_", "-"): v for k, v in steps.items()}, map=mapper)
