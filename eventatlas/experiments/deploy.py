"""The generated Prefect deployments: ``experiment/<name>``, one per declared experiment (``experiments/``),
and ``ingest/<name>``, one per registry entry with a deployment (:mod:`eventatlas.data.deploy`), in
prefect.yaml's form: the same pull step and work pool, inactive schedules. ``write_prefect_file`` writes both
into one prefect file for ``prefect deploy --all --prefect-file``, so nothing is copied by hand into
prefect.yaml."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..data import deploy as data_deploy
from .spec import load_all

ENTRYPOINT = "flows/experiment.py:experiment"


def deployments(directory: str | Path | None = None, base: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One deployment entry per experiment YAML (prefect.yaml's work pool; schedule inactive)."""
    pool = (base or data_deploy.prefect_base())["definitions"]["work_pool"]
    out = []
    for i, exp in enumerate(load_all(directory)):
        methods = ", ".join(exp.methods)
        out.append({"name": exp.name, "entrypoint": ENTRYPOINT,
                    "description": f"{exp.title} (experiments/{exp.name}.yaml; {methods}; seeds "
                                   f"{', '.join(map(str, exp.seeds))}). Goal: {' '.join(exp.goal.text.split())}",
                    "tags": ["eventatlas", "experiment"],
                    "parameters": {"name": exp.name, "runner": "local", "report": True},
                    "work_pool": pool,
                    "schedules": [{"cron": f"{i % 60} 7 * * 0", "timezone": "UTC", "active": False}]})
    return out


def prefect_file(directory: str | Path | None = None,
                 registry: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A prefect file holding every generated deployment: the experiments' then the registry's ingests
    (prefect.yaml's name, version and pull)."""
    base = data_deploy.prefect_base()
    return data_deploy.prefect_file(deployments(directory, base) + data_deploy.ingest_deployments(registry, base),
                                    base)


def write_prefect_file(path: str | os.PathLike, directory: str | Path | None = None) -> Path:
    return data_deploy.write_prefect_file(
        path, prefect_file(directory),
        "experiments/ and datasets/registry.yaml by `python -m flows.experiment --prefect-file`")
