"""Dataset readers. A reader is a module ``eventatlas.readers.<module>`` exposing
``read(path, *, dataset=<default>, rejects, **opts)`` and ``DEFAULT_DATASET``, plus its entry in
``datasets/registry.yaml``: the entry's ``reader:`` names the module (default: the entry's name).

``REGISTRY[name]`` is the module path of entry ``name``, derived from the registry on first use (a read-only
mapping: ``name in REGISTRY``, iteration, lookups); importing this package reads nothing. The registry's
other fields are read by :mod:`eventatlas.data.registry`, a layer above.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType, ModuleType

from .. import config

__all__ = ["REGISTRY", "get_reader", "reader_modules"]


def _registry_file() -> Path:
    return config.resource_dir("datasets") / "registry.yaml"


@lru_cache(maxsize=None)
def _reader_table(path: str) -> Mapping[str, str]:
    import yaml  # here, not at import: the CLI imports this package before it knows it needs the table

    with open(path, encoding="utf-8") as f:
        doc = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    entries = doc.get("datasets") if isinstance(doc, dict) else None
    if not isinstance(entries, dict) or not all(isinstance(e, dict) for e in entries.values()):
        raise ValueError(f"{path}: expected a top-level 'datasets:' mapping of name -> entry mapping")
    table = {}
    for name, entry in entries.items():
        module = entry.get("reader") or name
        if not isinstance(module, str) or not module.isidentifier() or module.startswith("_"):
            raise ValueError(f"{path}: dataset {name!r}: reader {module!r} is not a module name under "
                             f"eventatlas/readers/")
        table[name] = f"{__name__}.{module}"
    return MappingProxyType(table)  # cached: nobody may change the shared copy


def reader_modules(path: str | Path | None = None) -> Mapping[str, str]:
    """{entry name: reader module path} of ``datasets/registry.yaml`` (or ``path``), read once per file."""
    return _reader_table(str(path or _registry_file()))


class _Registry(Mapping[str, str]):
    """The shipped registry's reader table, read when first asked."""

    def __getitem__(self, name: str) -> str:
        return reader_modules()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(reader_modules())

    def __len__(self) -> int:
        return len(reader_modules())

    def __repr__(self) -> str:
        return f"REGISTRY({dict(reader_modules())!r})"


REGISTRY: Mapping[str, str] = _Registry()


def get_reader(name: str, registry: Mapping[str, str] | None = None) -> ModuleType:
    """The reader module of entry ``name`` of ``registry`` (default :data:`REGISTRY`); clear errors for an
    unknown name and for an entry whose reader module does not exist."""
    table = REGISTRY if registry is None else registry
    try:
        module = table[name]
    except KeyError:
        raise KeyError(f"unknown reader {name!r}; known: {', '.join(sorted(table))}") from None
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:  # the reader exists but one of its own imports is missing: that error, unchanged
            raise
        raise ModuleNotFoundError(
            f"dataset {name!r} of the registry (datasets/registry.yaml) names reader module {module}, which does "
            f"not exist: add eventatlas/readers/{module.rsplit('.', 1)[-1]}.py or correct the entry's `reader:`",
            name=module) from None
