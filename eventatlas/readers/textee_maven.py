"""Registry entry ``textee_maven``: TextEE's MAVEN output (``processed_data/maven/splitN``), with the
protocol of datasets/registry.yaml; see :mod:`eventatlas.readers.textee` for the format."""
from __future__ import annotations

from .textee import reader_for

DEFAULT_DATASET = "textee_maven"
read = reader_for("maven")
__all__ = ["read", "DEFAULT_DATASET"]
