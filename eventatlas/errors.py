"""The error for bad input, at the bottom of the package: :mod:`.names` (the name check) and :mod:`.io`
(the dataset writer, which checks names) both build on it, so neither imports the other's layer."""
from __future__ import annotations

import os
from typing import Any


class InputError(ValueError):
    """Bad input that stops an ingest: the message names file and line/record."""

    def __init__(self, source: str | os.PathLike, location: Any, message: str):
        self.source, self.location = str(source), location
        super().__init__(f"{source}:{location}: {message}")
