"""Registry entry ``textee_wikievents``: TextEE's WikiEvents output (``processed_data/wikievents/splitN``), with the
protocol of datasets/registry.yaml; see :mod:`eventatlas.readers.textee` for the format."""
from __future__ import annotations

from .textee import reader_for

DEFAULT_DATASET = "textee_wikievents"
read = reader_for("wikievents")
__all__ = ["read", "DEFAULT_DATASET"]
