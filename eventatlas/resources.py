"""Where the shipped, read-only files are: the dataset registry, samples and mappings (``datasets``), the SQL
migrations and views (``warehouse``) and the declared experiments (``experiments``).

A wheel carries them inside the package, under ``eventatlas/_resources/<name>/`` (setup.py copies them in
at build time); a checkout, and the editable install made from it, reads the repository's own top-level
folders, which stay the one copy that is edited. :mod:`eventatlas.config` re-exports both names.
"""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path

# the folder above the package: the checkout in development, site-packages once a wheel is installed
REPO_ROOT = Path(__file__).resolve().parent.parent
RESOURCES = ("datasets", "warehouse", "experiments")
PACKAGED = "_resources"  # the folder inside the package that a wheel's copy lives in


def resource_dir(name: str) -> Path:
    """The directory of resource ``name`` (one of :data:`RESOURCES`): the packaged copy when the
    package has one, else the checkout's top-level folder."""
    if name not in RESOURCES:
        raise ValueError(f"unknown resource {name!r}; known: {', '.join(RESOURCES)}")
    packaged = files("eventatlas") / PACKAGED / name
    # a wheel installs onto the file system, so the Traversable is a real path; the callers need one
    # (DuckDB and YAML readers open paths, and run records store them)
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    return REPO_ROOT / name
