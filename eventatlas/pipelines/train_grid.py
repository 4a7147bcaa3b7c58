"""``train-all``: every method x every dataset it applies to (or the named ones) x every seed, each run
published as soon as it finishes; the grid's cells run through the engine (here, Dask, Prefect task runs)."""
from __future__ import annotations

from typing import Any

from .engine import Engine, Job


def plan(methods: list[str], datasets: list[str] | None,
         available: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(method, dataset) cells: the named datasets, else every ingested dataset whose kinds the method's
    spec applies to (``available``: the ingested manifests, when the caller has read them already)."""
    from .. import config
    from ..data import ingested
    from ..methods import get_spec

    available = ingested() if available is None else available
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


def check(methods: list[str], params: dict[str, dict[str, Any]] | None, device: str) -> None:
    """What must hold before any cell runs: every method's params typed (``ParamError``) and the device
    available (``DeviceUnavailable``); the one place a grid checks its device."""
    from ..methods import validate_params
    from ..modeling.device import resolve_device

    validate_params(params, methods)
    resolve_device(device)


def jobs_of(methods: list[str], datasets: list[str] | None, seeds: list[int],
            params: dict[str, dict[str, Any]] | None, device: str, resume: bool) -> list[Job]:
    from ..data import ingested

    available = ingested()
    return [{"method": method, "dataset": name, "seed": seed, "params": (params or {}).get(method, {}),
             "dataset_dir": str(available[name].path), "device": device, "resume": resume}
            for method, name in plan(methods, datasets, available) for seed in seeds]


def train_all(datasets: list[str] | None = None, methods: list[str] | None = None, seeds: list[int] | None = None,
              params: dict[str, dict[str, Any]] | None = None, device: str = "auto", resume: bool = False,
              report: bool = False, runner: str = "local", *, engine: Engine) -> dict[str, Any]:
    """Run each method on each dataset it applies to (or ``datasets``) for each seed.

    ``params`` maps a method name to its typed config (``eventatlas.methods.SPECS[name].config``), checked
    before any cell runs, as is ``device`` (auto | cpu | cuda | cuda:N; methods that set their own keep it).
    ``resume`` continues killed runs from their checkpoints. Each run is published as it finishes (a
    warehouse another process holds is waited for, bounded, then the run is queued on disk: ``queued``);
    runs a method declares not applicable are published as ``skipped``. ``report`` refreshes the results
    page. Raises ``RuntimeError`` at the end when a run failed, after publishing it.
    """
    methods = list(methods or ["untuned"])
    check(methods, params, device)
    seeds = [int(s) for s in (seeds or [0])]
    jobs = jobs_of(methods, datasets, seeds, params, device, resume)
    engine.say(f"train-all: {len(jobs) // len(seeds)} cells x seeds {seeds} on {device}, runner {runner}")
    grid = engine.grid(jobs)
    engine.step("summarize", lambda recs: None)(grid.records)
    summary = {"runs": len(grid.records), "records": grid.records, "failed": grid.failed, "skipped": grid.skipped,
               "warehouse": grid.warehouse, "runner": runner, "queued": grid.queued}
    if grid.queued:
        engine.warn(f"{len(grid.queued)} run(s) queued, the warehouse {grid.warehouse} was busy: "
                    "`eventatlas publish --pending` lands them")
    if report:
        summary["report"] = engine.step("report", report_step)()
    if grid.failed:
        raise RuntimeError(f"{len(grid.failed)} of {len(jobs)} runs failed (published with status 'failed'): "
                           f"{grid.failed}")
    return summary


def report_step(out: str | None = None) -> str:
    """Refresh the results page (default ``<data>/report.html``); its path."""
    from .. import config
    from ..results.report import write_report

    return str(write_report(out or config.data_root() / "report.html"))
