"""``experiment``: one declared experiment (experiments/<name>.yaml): its datasets, then its cells on the
engine's grid (finished ones reused), everything published through the one writer, the report refreshed."""
from __future__ import annotations

from typing import Any

from .engine import Engine
from .train_grid import report_step


def experiment(exp: Any, seeds: list[int] | None = None, device: str = "auto", rerun: bool = False,
               params: dict[str, dict[str, Any]] | None = None, report: bool = False, *, engine: Engine,
               raise_on_failure: bool = True) -> dict[str, Any]:
    """Run (or reuse) every cell x seed of ``exp`` (an :class:`~eventatlas.experiments.Experiment`, or its
    name: the full form) and publish them; ``{"ran", "reused", "failed", "cells", ...}``. With
    ``raise_on_failure`` a failed cell raises ``RuntimeError`` at the end, after publishing it (a flow's
    state must say so); the CLI prints the cells first and fails then."""
    from ..experiments import load
    from ..experiments.run import run_experiment
    from ..modeling.device import resolve_device

    exp = load(exp) if isinstance(exp, str) else exp
    resolve_device(device)
    out = run_experiment(exp, execute=lambda jobs: engine.grid(jobs).by_job, publish=engine.publish, seeds=seeds,
                         device=device, rerun=rerun, params=params, say=engine.say)
    summary = out.as_dict()
    page = experiment_page(exp)
    summary["verdict"] = page["verdict"]
    engine.step("experiment-page", lambda name, markdown: None)(exp.name, page["markdown"])
    if report:
        summary["report"] = engine.step("report", report_step)()
    if out.failed and raise_on_failure:
        raise RuntimeError(f"experiment {exp.name}: {len(out.failed)} cell(s) failed: {out.failed}")
    return summary


def experiment_page(exp: Any) -> dict[str, Any]:
    """The experiment's generated page (its table, goal and verdict) as the warehouse has it now:
    ``{"markdown", "verdict"}``; the Prefect flow makes it the run's artifact."""
    from ..results.experiments import load as pages
    from ..results.experiments import markdown
    from ..store.warehouse import Warehouse

    e = next((x for x in pages(Warehouse(), exp.mode) if x["experiment"] == exp.name), None)
    if e is None:
        return {"markdown": f"experiment {exp.name} ({exp.mode}): no published cell yet", "verdict": "not judged"}
    return {"markdown": markdown(e), "verdict": e["verdict"][0]}
