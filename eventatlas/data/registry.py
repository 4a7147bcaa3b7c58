"""The dataset registry, ``datasets/registry.yaml``: the one declaration of each dataset (key = the name
``ingest`` takes). The reader table :data:`eventatlas.readers.REGISTRY` and the ``ingest/<name>``
deployments (:mod:`eventatlas.data.deploy`) are derived from it.

Its own module so that :mod:`eventatlas.data.ingest` and :mod:`eventatlas.data.download` both read the
registry without importing each other. Entry fields are documented at the top of the YAML file
(reader, dataset, path, sample, language, ontology, labels, protocol, download, deployment).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .. import config

REGISTRY_YAML = config.resource_dir("datasets") / "registry.yaml"

__all__ = ["REGISTRY_YAML", "load_registry", "dataset_entry"]


def load_registry(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """``datasets/registry.yaml`` (or ``path``) as {name: entry}."""
    src = Path(path) if path else REGISTRY_YAML
    with open(src, encoding="utf-8") as f:
        doc = yaml.safe_load(f) or {}
    datasets = doc.get("datasets", {}) if isinstance(doc, dict) else None
    if not isinstance(datasets, dict) or not all(isinstance(e, dict) for e in datasets.values()):
        raise ValueError(f"{src}: expected a top-level 'datasets:' mapping of name -> entry mapping")
    return datasets


def dataset_entry(name: str, registry: dict[str, dict[str, Any]] | None = None, *,
                  required: bool = False) -> dict[str, Any]:
    """The registry entry of ``name`` (``registry`` defaults to :func:`load_registry`).

    A reader may exist without an entry: that gives ``{}`` unless ``required`` (then ``KeyError``).
    """
    reg = load_registry() if registry is None else registry
    entry = reg.get(name)
    if entry is None:
        if required:
            raise KeyError(f"dataset {name!r} is not in the registry; known: {', '.join(sorted(reg))}")
        return {}
    return entry
