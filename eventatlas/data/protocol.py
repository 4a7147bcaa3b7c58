"""Per-dataset protocol settings, read from ``datasets/registry.yaml`` (not from code tables).

Each registry entry may carry a ``protocol`` mapping: one section per task (``induction``, ...)
shared by every method of that task, and optional sections named after a method that override
it for that method only, e.g.::

    framenet_jsonl:
      protocol:
        induction: {k_seen: 0, lu_pos: v, require_metrics: [bcubed_f, purity_f]}
        batch_attention: {k_seen: 100}

A dataset finds its entry by the reader that produced it (``manifest.reader``), else by its name
(samples are ``<dataset>_sample``). Values a user passes explicitly always win over these.
"""
from __future__ import annotations

from typing import Any

from .manifest import Manifest


def registry_entry(manifest: Manifest) -> tuple[str | None, dict[str, Any]]:
    """(registry key, entry) describing ``manifest``'s dataset, or (None, {})."""
    from .registry import load_registry

    reg = load_registry()
    if manifest.reader and manifest.reader in reg:
        return manifest.reader, reg[manifest.reader]
    name = manifest.dataset.removesuffix("_sample")
    for key, entry in reg.items():
        if name in (key, entry.get("dataset")):
            return key, entry
    return None, {}


def protocol_for(manifest: Manifest, method: str, task: str = "induction") -> dict[str, Any]:
    """The dataset's settings for ``task``, overridden by its ``method`` section."""
    _, entry = registry_entry(manifest)
    proto = entry.get("protocol") or {}
    out = dict(proto.get(task) or {})
    out.update(proto.get(method) or {})
    return out


def protocol_keys(method: str, task: str) -> set[str]:
    """Every key some dataset's registry protocol sets for ``method`` (its ``task`` section or its own): the
    settings that belong to a dataset, not to a model (a model applied to another dataset takes that
    dataset's, not its training dataset's)."""
    from .registry import load_registry

    out: set[str] = set()
    for entry in load_registry().values():
        proto = entry.get("protocol") or {}
        out.update((proto.get(task) or {}).keys(), (proto.get(method) or {}).keys())
    return out
