"""Registry entry ``textee_ace05``: TextEE's ACE 2005 output (``processed_data/ace05-en/splitN``), with the
protocol of datasets/registry.yaml; see :mod:`eventatlas.readers.textee` for the format."""
from __future__ import annotations

from .textee import reader_for

DEFAULT_DATASET = "textee_ace05"
read = reader_for("ace05-en")
__all__ = ["read", "DEFAULT_DATASET"]
