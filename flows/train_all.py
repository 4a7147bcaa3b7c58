"""``train-all``: every method x every dataset it applies to x every seed, published to the warehouse."""
from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.context import FlowRunContext

from eventatlas import config
from eventatlas.data import ingested
from eventatlas.modeling.device import resolve_device
from eventatlas.methods import get_spec, validate_params
from eventatlas.run.scaleout import RunnerSpec, parse_runner
from tasks.publish import publish_task, summarize_task
from tasks.report import report_task
from tasks.runners import gpu_capacity, gpu_placement, task_runner
from tasks.train import evaluate_task, train_task

# a cell whose worker died is run again elsewhere (Dask reschedules it; these retries cover a crash
# the task engine sees); its run directory is reused, and only the flow publishes, so nothing doubles
CELL_RETRIES = 2


def plan(methods: list[str], datasets: list[str] | None) -> list[tuple[str, str]]:
    """(method, dataset) cells: the named datasets, else every ingested dataset whose kinds the
    method's spec applies to."""
    available = ingested()
    if datasets:
        missing = [d for d in datasets if d not in available]
        if missing:
            raise ValueError(f"not ingested: {missing} (have {sorted(available)} under {config.datasets_dir()}); "
                             f"run `eventatlas ingest <name> --path ...` first")
        return [(m, d) for m in methods for d in datasets]
    cells = [(m, name) for m in methods for name, man in available.items() if get_spec(m).applies(man.kinds())]
    if not cells:
        raise ValueError(f"no dataset under {config.datasets_dir()} that {methods} apply to: run "
                         f"`eventatlas ingest-samples` or `eventatlas ingest <name> --path ...` first")
    return cells


class _Collect:
    """Publishes each run record as it is handed in (the flow's process is the only warehouse writer)."""

    def __init__(self) -> None:
        self.records: list[str] = []
        self.failed: list[str] = []
        self.skipped: list[str] = []
        self.queued: list[str] = []
        self.out: dict[str, Any] = {"warehouse": None}

    def add(self, rec: str) -> None:
        """A busy warehouse queues the run on disk (``queued``) instead of failing the flow."""
        self.out = publish_task([rec])
        self.records.append(rec)
        self.failed += self.out["failed"]
        self.skipped += self.out["skipped"]
        self.queued = [q for q in self.queued if q not in self.out.get("from_queue", ())] + [
            q for q in self.out.get("queued", ()) if q not in self.queued]


@flow(name="train-grid")
def train_grid(jobs: list[dict[str, Any]], gpu: list[bool], runner: str, threads: int | None = None) -> dict[str, Any]:
    """The cells of a train-all grid as task runs on the runner this subflow is bound to; their records
    are published here, in the flow's process, in plan order (so a run equals a local one)."""
    logger = get_run_logger()
    spec = parse_runner(runner)
    if any(gpu):
        have = gpu_capacity(FlowRunContext.get().task_runner)
        if have == 0:
            how = "`ray start ... --num-gpus=1`" if spec.kind == "ray" else "`dask worker ... --resources GPU=1`"
            raise RuntimeError(f"{sum(gpu)} cells need a GPU but no worker of the {spec.kind} cluster at {runner!r} "
                               f"declares one: start one with {how}")
    futures = []
    for job, needs_gpu in zip(jobs, gpu):
        task = _task_of(job).with_options(retries=CELL_RETRIES, retry_delay_seconds=1)
        with gpu_placement(spec, needs_gpu):
            futures.append(task.submit(**job, threads=threads, reuse_unfinished=True))
    col, lost = _Collect(), []
    for job, fut in zip(jobs, futures):
        try:
            rec = fut.result()
        except Exception as e:  # the cell never wrote a record (e.g. it outlived every retry)
            logger.error("cell %s on %s seed %s lost: %s", job["method"], job["dataset"], job["seed"], e)
            lost.append(f"{job['method']}/{job['dataset']}/seed{job['seed']}: {type(e).__name__}: {e}")
            continue
        col.add(rec)
    return {"records": col.records, "failed": col.failed + lost, "skipped": col.skipped,
            "warehouse": col.out["warehouse"], "queued": col.queued}


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
    """Run each method on each dataset it applies to (or ``datasets``) for each seed.

    ``params`` maps a method name to its typed config (``eventatlas.methods.SPECS[name].config``),
    validated before any task runs, e.g. ``{"untuned": {"representations": ["trigger"]}}``.
    ``device`` (auto | cpu | cuda | cuda:N) applies to every method that does not set its own;
    an unavailable device is refused here. ``resume`` continues killed runs from their checkpoints.
    Each run is published as soon as it finishes (the publish task is the only warehouse writer;
    a warehouse another process holds is waited for, bounded, then the run is queued on disk:
    ``queued`` in the result, landed by ``eventatlas publish --pending`` or the next flow's publish);
    the flow fails at the end if any run failed, after publishing it. Runs a method declares not
    applicable are published as ``skipped`` with the reason and do not fail the flow.
    ``report`` refreshes the results page ``<data>/report.html`` at the end (failed runs included).

    ``runner`` (``eventatlas.run.scaleout``): ``local`` runs the cells here one by one; ``process[:N]``,
    ``dask[:N]`` and ``dask:tcp://host:port`` submit every (method, dataset, seed) cell as a task run
    on that task runner (a ``train-grid`` subflow), each cell pinned to ``threads`` threads (default 1);
    cells of a ``gpu="required"`` method only go to Dask workers with the resource ``GPU=1``. Workers
    return record paths; the records are published here in plan order, so results equal a local run.
    """
    logger = get_run_logger()
    spec = parse_runner(runner)
    methods = list(methods or ["untuned"])
    validate_params(params, methods)
    resolve_device(device)
    seeds = [int(s) for s in (seeds or [0])]
    params = dict(params or {})
    cells = plan(methods, datasets)
    available = ingested()
    logger.info("train-all: %d cells (%s) x seeds %s on %s, runner %s", len(cells), cells, seeds, device, runner)
    jobs = [{"method": method, "dataset": name, "seed": seed, "params": params.get(method, {}),
             "dataset_dir": str(available[name].path), "device": device, "resume": resume}
            for method, name in cells for seed in seeds]
    grid = run_jobs(jobs, runner, threads)
    records, failed, skipped, warehouse = grid["records"], grid["failed"], grid["skipped"], grid["warehouse"]
    queued = grid.get("queued", [])
    summarize_task(records)
    summary = {"runs": len(records), "records": records, "failed": failed, "skipped": skipped,
               "warehouse": warehouse, "runner": runner, "queued": queued}
    if queued:
        logger.warning("%d run(s) queued, the warehouse %s was busy: `eventatlas publish --pending` lands them",
                       len(queued), warehouse)
    if report:
        summary["report"] = report_task()
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(jobs)} runs failed (published with status 'failed'): {failed}")
    return summary


def _task_of(job: dict[str, Any]):
    """A job naming a saved ``model`` applies it (the evaluate task); any other trains."""
    return evaluate_task if "model" in job else train_task


def run_jobs(jobs: list[dict[str, Any]], runner: str = "local", threads: int | None = None,
             reuse_unfinished: bool = False) -> dict[str, Any]:
    """Run train / evaluate jobs (``train_task`` / ``evaluate_task`` keyword arguments) on ``runner``,
    publishing each run record as it comes: here one by one (``local``), else as task runs of a
    ``train-grid`` subflow on that runner. ``{"records", "failed", "skipped", "warehouse", "queued"}``;
    what train-all and the experiment flow both run their cells with."""
    spec = parse_runner(runner)
    if spec.distributed:
        return _grid_on(spec)(jobs, [get_spec(j["method"]).gpu == "required" for j in jobs], runner, threads or 1)
    col = _Collect()
    for job in jobs:
        col.add(_task_of(job)(**job, threads=threads, **({"reuse_unfinished": True} if reuse_unfinished else {})))
    return {"records": col.records, "failed": col.failed, "skipped": col.skipped, "warehouse": col.out["warehouse"],
            "queued": col.queued}


def _grid_on(spec: RunnerSpec):
    return train_grid.with_options(task_runner=task_runner(spec))


if __name__ == "__main__":
    train_all()
