"""Vector checks shared by the evaluators (not public API)."""
from __future__ import annotations

import numpy as np


def unit_rows(x, name: str, *, dtype=np.float32) -> np.ndarray:
    """Finite 2-D (N, d) array with every row L2-normalised; a zero row is an error, since its
    cosine to anything is undefined (no silent 0 or NaN)."""
    a = np.asarray(x, dtype=dtype)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (N, d) array, got shape {a.shape}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {a.shape})")
    if not np.isfinite(a).all():
        row = int(np.flatnonzero(~np.isfinite(a).all(axis=1))[0])
        raise ValueError(f"{name} has a non-finite value in row {row}")
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    if (norms == 0).any():
        row = int(np.flatnonzero(norms.ravel() == 0)[0])
        raise ValueError(f"{name} row {row} is all zeros: its cosine is undefined")
    return np.ascontiguousarray(a / norms, dtype=dtype)
