"""``experiment``: one declared experiment (experiments/<name>.yaml) - its cells on train-all's runners,
finished cells reused, everything published through the one writer, the report refreshed
(:func:`eventatlas.pipelines.experiment.experiment`).

Deployments ``experiment/<name>``, one per YAML, are generated from the folder
(:func:`eventatlas.experiments.deploy.prefect_file`), not copied into prefect.yaml: ``make serve`` registers
them with ``python -m flows.experiment --prefect-file PATH`` then ``prefect deploy --all --prefect-file PATH``.
"""
from __future__ import annotations

import sys
from typing import Any

from prefect import flow

from eventatlas.experiments import load
from eventatlas.pipelines import experiment as pipeline
from tasks.engine import prefect_engine
from tasks.report import experiment_page_task, report_task


@flow(name="experiment", log_prints=True, flow_run_name="experiment-{name}")
def experiment(name: str, quick: bool = False, runner: str = "local", seeds: list[int] | None = None,
               device: str = "auto", rerun: bool = False, params: dict[str, dict[str, Any]] | None = None,
               report: bool = False, threads: int | None = None) -> dict[str, Any]:
    """Run experiment ``name`` (``quick``: its shipped-samples form). Cells whose runs already finished with
    the same method, config, data and code version are reused (``rerun`` runs them again); a killed cell is
    taken over by the next attempt. Fails at the end if a cell failed (after publishing it)."""
    engine = prefect_engine(runner, threads, report=report_task, experiment_page=experiment_page_task)
    return pipeline.experiment(load(name, quick=quick), seeds, device, rerun, params, report, engine=engine)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--prefect-file"] and len(sys.argv) == 3:
        from eventatlas.experiments.deploy import write_prefect_file

        print(write_prefect_file(sys.argv[2]))
    else:
        print("usage: python -m flows.experiment --prefect-file PATH  (writes every generated deployment: "
              "experiment/<name> and ingest/<name>)", file=sys.stderr)
        sys.exit(2)
