"""The ``eventatlas`` command line. :mod:`.base` holds the app, its error and exit-code contract and the
printing helpers; each command module (``data``, ``train``, ``models``, ``results``, ``tools``, ``atlas``,
``experiment``) builds on it and registers its commands on the app when imported here."""
from __future__ import annotations

from . import atlas, data, experiment, models, results, tools, train  # noqa: F401 - each registers its commands
from .base import app, main  # the console entry points (pyproject: eventatlas.cli:app)

__all__ = ["app", "main"]
