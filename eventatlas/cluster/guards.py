"""Memory ceiling for dense (N x N) clustering paths.

A dense distance/affinity matrix for N points needs ``N*N*bytes_per_entry`` bytes
(118k MAVEN mentions in float64: ~111 GB), which kills a 24 GB machine before any
Python error can be raised. Dense paths call :func:`check_dense_budget` *before*
allocating and get a clear :class:`DenseBudgetError` naming the scalable
alternative instead.

The ceiling defaults to 8 GiB and is configurable with the environment variable
``EVENTATLAS_MAX_DENSE_BYTES`` (plain bytes or with a K/M/G/T suffix, binary units).

Documented ceilings at the default 8 GiB:
- affinity propagation (sklearn keeps S, R, A and temporaries: ~4 float64 N x N
  arrays, i.e. 32 bytes per entry): N <= ~16,000;
- dense agglomerative / manifold on a condensed float64 matrix (scipy/fastcluster
  copy it: ~16 bytes per pair, N*(N-1)/2 pairs): N <= ~32,000.
"""
from __future__ import annotations

import math
import os

ENV_VAR = "EVENTATLAS_MAX_DENSE_BYTES"
DEFAULT_MAX_DENSE_BYTES = 8 * 1024**3

_SUFFIX = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}

# What to suggest instead, per dense path (keys match the `what` argument loosely).
ALTERNATIVES = {
    "affinity": (
        "use algorithm='agglomerative' (exact average linkage via eventatlas.cluster.nnchain, O(N*d) memory), "
        "algorithm='manifold' with k < N (eventatlas.cluster.sparse_manifold), or two-step clustering "
        "(eventatlas.cluster.twostep)"
    ),
    "agglomerative": "use eventatlas.cluster.nnchain.average_linkage (exact, O(N*d) memory)",
    "manifold": "use eventatlas.cluster.sparse_manifold with k < N (sparse kNN weights)",
}


class DenseBudgetError(MemoryError):
    """Raised instead of allocating a dense matrix above the configured ceiling."""


def parse_bytes(text: str) -> int:
    s = str(text).strip().upper().removesuffix("IB").removesuffix("B")
    num, suf = s, ""
    if s and s[-1] in _SUFFIX:
        num, suf = s[:-1], s[-1]
    try:
        val = float(num)
    except ValueError:
        raise ValueError(f"{ENV_VAR}={text!r}: expected a byte count like 8000000000, 512M or 8G") from None
    if not math.isfinite(val) or val <= 0:
        raise ValueError(f"{ENV_VAR}={text!r}: must be a positive byte count")
    return int(val * _SUFFIX[suf])


def max_dense_bytes() -> int:
    """The configured ceiling in bytes (env ``EVENTATLAS_MAX_DENSE_BYTES``, default 8 GiB)."""
    raw = os.environ.get(ENV_VAR)
    return DEFAULT_MAX_DENSE_BYTES if raw in (None, "") else parse_bytes(raw)


def dense_bytes(n: int, bytes_per_entry: float) -> int:
    return int(math.ceil(float(n) * float(n) * float(bytes_per_entry)))


def max_dense_n(bytes_per_entry: float) -> int:
    """Largest N whose N*N*bytes_per_entry fits the ceiling."""
    return int(math.isqrt(int(max_dense_bytes() / float(bytes_per_entry))))


def check_dense_budget(n: int, bytes_per_entry: float, what: str) -> None:
    """Refuse (DenseBudgetError) an N x N allocation above the ceiling, before it happens.

    ``bytes_per_entry`` is the *total* cost per matrix entry of the dense path
    (e.g. 32 for sklearn affinity propagation, 8 for one float64 matrix,
    8 for a condensed float64 matrix copied once = 16 per pair / 2 entries per pair).
    """
    need = dense_bytes(n, bytes_per_entry)
    limit = max_dense_bytes()
    if need <= limit:
        return
    alt = next((v for k, v in ALTERNATIVES.items() if k in what.lower()), "use a sparse/scalable path")
    raise DenseBudgetError(
        f"{what}: N={n:,} needs a dense N x N matrix of ~{need / 1024**3:.1f} GiB "
        f"({bytes_per_entry:g} bytes per entry), above the ceiling of {limit / 1024**3:.1f} GiB "
        f"(largest N here: {max_dense_n(bytes_per_entry):,}; raise it with {ENV_VAR}, e.g. {ENV_VAR}=32G). "
        f"Instead: {alt}."
    )
