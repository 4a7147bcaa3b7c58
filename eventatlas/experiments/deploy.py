"""The Prefect deployments of the declared experiments, generated from ``experiments/`` (one
``experiment/<name>`` per YAML), in prefect.yaml's form: the same pull step and work pool, an inactive
weekly schedule. ``write_prefect_file`` writes them as a prefect file for ``prefect deploy --all
--prefect-file``, so nothing is copied by hand into prefect.yaml."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from .. import config
from .spec import load_all

ENTRYPOINT = "flows/experiment.py:experiment"


def deployments(directory: str | Path | None = None) -> list[dict[str, Any]]:
    """One deployment entry per experiment YAML (prefect.yaml's work pool; schedule inactive)."""
    base = yaml.safe_load((config.REPO_ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    pool = base["definitions"]["work_pool"]
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


def prefect_file(directory: str | Path | None = None) -> dict[str, Any]:
    """A prefect file holding only the experiments' deployments (prefect.yaml's name, version and pull)."""
    base = yaml.safe_load((config.REPO_ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    return {"name": base["name"], "prefect-version": base["prefect-version"], "build": None, "push": None,
            "pull": base["pull"], "deployments": deployments(directory)}


def write_prefect_file(path: str | os.PathLike, directory: str | Path | None = None) -> Path:
    from ..io import atomic_write_text

    atomic_write_text(path, "# generated from experiments/ by `python -m flows.experiment --prefect-file`; "
                            "do not edit\n" + yaml.safe_dump(prefect_file(directory), sort_keys=False, width=120))
    return Path(path)
