"""Registry entry ``hard_similarity``: see :mod:`eventatlas.readers.event_similarity` for the format."""
from __future__ import annotations

from .event_similarity import read_hard as read

DEFAULT_DATASET = "hard_similarity"
EXPECTED_TABLES = ("event_pairs",)  # ingest refuses a run that yields none
__all__ = ["read", "DEFAULT_DATASET"]
