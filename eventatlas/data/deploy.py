"""The ``ingest/<name>`` Prefect deployments, generated from ``datasets/registry.yaml``: one per entry with a
``deployment:`` (its cron, and optional description, extra tags and parameters), in prefect.yaml's form (its
work pool, its pull step, an inactive UTC schedule). Nothing about a dataset is copied into prefect.yaml.

Also the prefect-file helpers the experiment deployments share (:mod:`eventatlas.experiments.deploy`
writes both sets into one file for ``prefect deploy --all --prefect-file``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from .. import config
from .registry import load_registry

INGEST_ENTRYPOINT = "flows/ingest.py:ingest"
INGEST_TAGS = ["eventatlas", "ingest"]

__all__ = ["INGEST_ENTRYPOINT", "ingest_deployments", "prefect_base", "prefect_file", "write_prefect_file"]


def prefect_base() -> dict[str, Any]:
    """The repository's prefect.yaml: the shared parts (name, version, pull step, work pool) and the
    deployments declared there by hand."""
    return yaml.safe_load((config.REPO_ROOT / "prefect.yaml").read_text(encoding="utf-8"))


def default_description(name: str, entry: dict[str, Any]) -> str:
    """What an entry's deployment says unless it gives ``deployment.description``."""
    if entry.get("path"):
        hint = ""
    elif entry.get("download"):
        hint = " (give --param path=... or --param download=true)"
    else:
        hint = " (give --param path=...)"
    return f"Ingest {name} ({entry.get('ontology') or 'event data'}) into the common schema{hint}."


def ingest_deployments(registry: dict[str, dict[str, Any]] | None = None,
                       base: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One ``ingest/<name>`` deployment per registry entry that declares a ``deployment``, in registry order."""
    reg = load_registry() if registry is None else registry
    pool = (base or prefect_base())["definitions"]["work_pool"]
    out = []
    for name, entry in reg.items():
        dep = entry.get("deployment")
        if dep is None:
            continue
        if not isinstance(dep, dict) or set(dep) - {"cron", "description", "tags", "parameters"}:
            raise ValueError(f"dataset {name!r}: `deployment` takes cron, description, tags and parameters; "
                             f"got {dep!r}")
        cron = dep.get("cron")
        out.append({"name": name, "entrypoint": INGEST_ENTRYPOINT,
                    "description": dep.get("description") or default_description(name, entry),
                    "tags": INGEST_TAGS + list(dep.get("tags") or []),
                    "parameters": {"name": name, **(dep.get("parameters") or {})},
                    "work_pool": pool,
                    "schedules": [{"cron": cron, "timezone": "UTC", "active": False}] if cron else []})
    return out


def prefect_file(deployments: list[dict[str, Any]], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A prefect file holding ``deployments``, with prefect.yaml's name, version and pull step."""
    base = base or prefect_base()
    return {"name": base["name"], "prefect-version": base["prefect-version"], "build": None, "push": None,
            "pull": base["pull"], "deployments": deployments}


def write_prefect_file(path: str | os.PathLike, doc: dict[str, Any], source: str) -> Path:
    """Write prefect file ``doc`` to ``path``, headed by where it was generated from (``source``)."""
    from ..io import atomic_write_text

    atomic_write_text(path, f"# generated from {source}; do not edit\n"
                            + yaml.safe_dump(doc, sort_keys=False, width=120))
    return Path(path)
