"""Registry entry ``transitive_similarity``: see :mod:`eventatlas.readers.event_similarity` for the format."""
from __future__ import annotations

from .event_similarity import read_transitive as read

DEFAULT_DATASET = "transitive_similarity"
EXPECTED_TABLES = ("event_pairs",)  # ingest refuses a run that yields none
__all__ = ["read", "DEFAULT_DATASET"]
