"""The one check for a user-given name that becomes a path component (a dataset, a kept version, a run
id or run prefix, a download folder): without it ``--dataset ../../x`` writes outside the data root.

A name is 1-100 characters of letters, digits, ``.``, ``_``, ``-``, ``=``, ``+``; it starts with a letter
or digit (no leading dot: hidden and ``..``) and holds no ``..``. Every core function that joins a name
onto a directory calls :func:`check_name` (or :func:`under`), so the CLI, the flows and the Python API are
all covered; the refusal is an :class:`~eventatlas.errors.InputError` (exit 2, one line naming the option).
"""
from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any, Iterable

from .errors import InputError

MAX_LEN = 100
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]*")


class BadName(InputError):
    """A name that may not become a path component; the message names the option and the value."""

    def __init__(self, option: str, value: Any, why: str):
        self.source, self.location = option, repr(value)
        ValueError.__init__(self, f"{option} {value!r}: {why}; a name is 1-{MAX_LEN} letters, digits, '.', '_', '-', "
                                  "'=' or '+', starting with a letter or digit")


def why_bad(value: Any) -> str | None:
    """Why ``value`` is not a valid name, or None."""
    if not isinstance(value, str) or not value:
        return "not a non-empty string"
    if len(value) > MAX_LEN:
        return f"longer than {MAX_LEN} characters"
    if "/" in value or "\\" in value or (os.sep in value) or (os.altsep and os.altsep in value):
        return "holds a path separator"
    if ".." in value:
        return "holds '..'"
    if value.startswith("."):
        return "starts with a dot"
    if not _NAME.fullmatch(value):
        bad = sorted({c for c in value if not re.fullmatch(r"[A-Za-z0-9._=+-]", c)})
        return f"holds {''.join(bad)!r}" if bad else "does not start with a letter or digit"
    return None


def check_name(value: Any, option: str = "name") -> str:
    """``value`` when it is a valid name, else :class:`BadName` naming ``option`` (e.g. ``--dataset``)."""
    why = why_bad(value)
    if why:
        raise BadName(option, value, why)
    return value


def is_name(value: Any) -> bool:
    return why_bad(value) is None


def under(root: str | os.PathLike, value: Any, option: str = "name") -> Path:
    """``root / value`` for a checked name (the path cannot leave ``root``)."""
    return Path(root) / check_name(value, option)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or ``""`` (every "unknown name" refusal says it)."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
