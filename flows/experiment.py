"""``experiment``: one declared experiment (experiments/<name>.yaml) - its cells on train-all's runners,
finished cells reused, everything published through the one writer, the report refreshed.

Deployments ``experiment/<name>``, one per YAML, are generated from the folder
(:func:`eventatlas.experiments.deploy.prefect_file`), not copied into prefect.yaml: ``make serve`` registers
them with ``python -m flows.experiment --prefect-file PATH`` then ``prefect deploy --all --prefect-file PATH``.
"""
from __future__ import annotations

import sys
from typing import Any

from prefect import flow, get_run_logger

from eventatlas.modeling.device import resolve_device
from eventatlas.experiments import load
from eventatlas.experiments.run import run_experiment
from eventatlas.run.scaleout import parse_runner
from flows.train_all import run_jobs
from tasks.publish import publish_task
from tasks.report import report_task


@flow(name="experiment", log_prints=True, flow_run_name="experiment-{name}")
def experiment(name: str, quick: bool = False, runner: str = "local", seeds: list[int] | None = None,
               device: str = "auto", rerun: bool = False, params: dict[str, dict[str, Any]] | None = None,
               report: bool = False, threads: int | None = None) -> dict[str, Any]:
    """Run experiment ``name`` (``quick``: its shipped-samples form). Cells whose runs already finished with
    the same method, config, data and code version are reused (``rerun`` runs them again); a killed cell is
    taken over by the next attempt. Fails at the end if a cell failed (after publishing it)."""
    logger = get_run_logger()
    exp = load(name, quick=quick)
    resolve_device(device)
    parse_runner(runner)

    def execute(jobs: list[dict[str, Any]]) -> list[str]:
        return run_jobs(jobs, runner, threads, reuse_unfinished=True)["records"]

    out = run_experiment(exp, execute=execute, publish=lambda recs: publish_task(recs), seeds=seeds, device=device,
                         rerun=rerun, params=params, say=logger.info)
    summary = out.as_dict()
    if report:
        summary["report"] = report_task()
    if out.failed:
        raise RuntimeError(f"experiment {name}: {len(out.failed)} cell(s) failed: {out.failed}")
    return summary


if __name__ == "__main__":
    if sys.argv[1:2] == ["--prefect-file"] and len(sys.argv) == 3:
        from eventatlas.experiments.deploy import write_prefect_file

        print(write_prefect_file(sys.argv[2]))
    else:
        print("usage: python -m flows.experiment --prefect-file PATH  (writes the experiment/<name> deployments)",
              file=sys.stderr)
        sys.exit(2)
