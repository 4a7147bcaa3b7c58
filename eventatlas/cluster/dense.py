"""Dense (O(N²) memory) average-linkage clustering, cut helpers and the size guard.

The pairwise distances are written straight into scipy's *condensed* layout
(upper triangle, row-major, float64) block by block with BLAS, so the only N²
allocation is the one fastcluster needs: 8·N(N-1)/2 bytes (1.5 GiB at N = 20,000).
fastcluster's C routine then runs in place on that buffer (its Python wrapper would copy it).

Results equal ``sklearn.cluster.AgglomerativeClustering(metric=..., linkage="average")``
as partitions (sklearn reads the same upper triangle and calls scipy's linkage);
only labels are renumbered: cluster ids are 0..K-1 in order of each cluster's
first (lowest-index) member, which makes them deterministic.

``metric="precomputed"`` takes a square distance matrix. It may be asymmetric
(e.g. 1 − attention scores): it is symmetrised by averaging, D' = (D + Dᵀ)/2, so
both directions count equally (sklearn would silently read only D[i, j] for i < j).
The diagonal is ignored. Negative entries are allowed (average linkage only needs an
order), e.g. −S for raw similarity scores.
"""
from __future__ import annotations

import os

import fastcluster
import numpy as np
from tqdm.auto import tqdm

DEFAULT_MAX_DENSE_N = 20_000
MAX_DENSE_N_ENV = "EVENTATLAS_MAX_DENSE_N"
DISTANCE_METRICS = ("cosine", "euclidean", "precomputed")
_BLOCK_BYTES = 64 << 20  # temporary per-block buffer; keeps BLAS efficient without N² extras


class DenseSizeError(ValueError):
    """Raised instead of allocating an N×N matrix larger than the configured ceiling."""


def max_dense_n(override: int | None = None) -> int:
    """Largest N the dense paths accept: ``override``, else ``$EVENTATLAS_MAX_DENSE_N``, else 20,000."""
    if override is not None:
        return int(override)
    raw = os.environ.get(MAX_DENSE_N_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_MAX_DENSE_N
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{MAX_DENSE_N_ENV}={raw!r} is not an integer") from None


def check_dense_n(n: int, what: str, *, max_n: int | None = None, bytes_per_pair: float = 4.0) -> None:
    """Refuse an O(N²) computation above the ceiling, with the memory it would need."""
    limit = max_dense_n(max_n)
    if n > limit:
        gib = bytes_per_pair * n * n / 2**30
        raise DenseSizeError(
            f"{what}: N={n:,} points exceeds the dense ceiling of {limit:,} "
            f"(~{gib:,.1f} GiB of N² buffers). Use the scalable paths in eventatlas.cluster "
            f"(nnchain / knn / sparse_manifold / twostep), or raise the ceiling with "
            f"max_n=... or {MAX_DENSE_N_ENV} if the machine has the memory."
        )


def _nonempty_finite_float(a: np.ndarray, name: str) -> np.ndarray:
    if a.shape[0] == 0:
        raise ValueError(f"{name} is empty: nothing to cluster")
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    if not np.isfinite(a).all():
        bad = np.argwhere(~np.isfinite(a))[0]
        raise ValueError(f"{name} has a non-finite value at row {bad[0]}, column {bad[1]}")
    return a


def as_points(X, *, name: str = "X") -> np.ndarray:
    """Validate an (N, d) finite feature matrix; returns it as float64 or float32."""
    a = np.asarray(X)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (N, d) array, got shape {a.shape}")
    return _nonempty_finite_float(a, name)


def as_square(D, *, name: str = "D") -> np.ndarray:
    """Validate a square finite distance matrix (kept in its float dtype)."""
    a = np.asarray(D)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"metric='precomputed' needs a square (N, N) distance matrix, got shape {a.shape}")
    return _nonempty_finite_float(a, name)


def condensed_offsets(n: int) -> np.ndarray:
    """Start of row i's entries (j = i+1..n-1) in scipy's condensed vector."""
    i = np.arange(n, dtype=np.int64)
    return i * (2 * n - i - 1) // 2


def _row_block(n: int, width: int) -> int:
    return int(max(1, min(n, _BLOCK_BYTES // (8 * max(width, 1)))))


def _unit_rows(X: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm in float64; all-zero rows stay zero (sklearn's convention:
    their cosine similarity to anything is 0, i.e. distance 1)."""
    Xf = np.array(X, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", Xf, Xf))
    norms[norms == 0.0] = 1.0
    Xf /= norms[:, None]
    return Xf


def condensed_distances(X, metric: str = "cosine") -> np.ndarray:
    """Pairwise distances of the rows of X in condensed float64 form, computed blockwise with BLAS.

    cosine: 1 − cos, clipped to [0, 2] (as sklearn's ``cosine_distances``);
    euclidean: sqrt(max(0, |a|² + |b|² − 2a·b)).
    """
    X = as_points(X)
    n = X.shape[0]
    out = np.empty(n * (n - 1) // 2, dtype=np.float64)
    if n < 2:
        return out
    if metric == "cosine":
        Y = _unit_rows(X)
        sq = None
    elif metric == "euclidean":
        Y = np.asarray(X, dtype=np.float64)
        sq = np.einsum("ij,ij->i", Y, Y)
    else:
        raise ValueError(f"metric must be one of {DISTANCE_METRICS[:2]} for feature input, got {metric!r}")
    off = condensed_offsets(n)
    step = _row_block(n, n)
    for r0 in tqdm(range(0, n - 1, step), desc="pairwise distances", unit="block", disable=n < 5000):
        r1 = min(n - 1, r0 + step)
        G = Y[r0:r1] @ Y[r0:].T  # (b, n - r0): only columns j >= r0 are ever needed
        if sq is None:
            np.subtract(1.0, G, out=G)
            np.clip(G, 0.0, 2.0, out=G)
        else:
            G *= -2.0
            G += sq[r0:r1, None]
            G += sq[None, r0:]
            np.maximum(G, 0.0, out=G)
            np.sqrt(G, out=G)
        for i in range(r0, r1):
            out[off[i] : off[i] + n - i - 1] = G[i - r0, i - r0 + 1 :]
    return out


def condensed_from_square(D, *, symmetrise: str = "average") -> np.ndarray:
    """Condensed float64 vector from a square matrix.

    ``symmetrise="average"`` uses (D[i,j] + D[j,i]) / 2; ``"upper"`` reads D[i,j] for i < j only
    (what sklearn's ``AgglomerativeClustering(metric="precomputed")`` does).
    """
    D = as_square(D)
    n = D.shape[0]
    out = np.empty(n * (n - 1) // 2, dtype=np.float64)
    off = condensed_offsets(n)
    if symmetrise not in ("average", "upper"):
        raise ValueError(f"symmetrise must be 'average' or 'upper', got {symmetrise!r}")
    step = _row_block(n, n)
    for r0 in range(0, max(n - 1, 0), step):
        r1 = min(n - 1, r0 + step)
        U = np.asarray(D[r0:r1, r0:], dtype=np.float64)
        if symmetrise == "average":
            U = 0.5 * (U + np.asarray(D[r0:, r0:r1], dtype=np.float64).T)
        for i in range(r0, r1):
            out[off[i] : off[i] + n - i - 1] = U[i - r0, i - r0 + 1 :]
    return out


def linkage_from_condensed(cond: np.ndarray, n: int) -> np.ndarray:
    """Average linkage (UPGMA) with fastcluster, in place on ``cond`` (which is consumed)."""
    if n < 2:
        return np.empty((0, 4), dtype=np.float64)
    if cond.shape != (n * (n - 1) // 2,):
        raise ValueError(f"condensed vector has {cond.shape} entries, expected {n * (n - 1) // 2} for N={n}")
    wrap = getattr(fastcluster, "linkage_wrap", None)
    if wrap is None or cond.dtype != np.float64 or not cond.flags.c_contiguous or not cond.flags.writeable:
        return fastcluster.linkage(cond, method="average", preserve_input=False)
    # fastcluster.linkage() starts with ``array(X)``, which copies the input even with
    # preserve_input=False (+1.5 GiB at N = 20k); its C routine works in place on our buffer.
    Z = np.empty((n - 1, 4), dtype=np.float64)
    wrap(n, cond, Z, fastcluster.mthidx["average"])
    return Z


def average_linkage(X, metric: str = "cosine", *, max_n: int | None = None) -> np.ndarray:
    """scipy-format linkage matrix Z ((N-1) x 4) of average linkage.

    ``X`` is an (N, d) feature matrix, or with ``metric="precomputed"`` a square distance
    matrix (symmetrised by averaging, see module docstring).
    """
    if metric == "precomputed":
        D = as_square(X)
        n = D.shape[0]
        check_dense_n(n, "average_linkage", max_n=max_n)
        cond = condensed_from_square(D, symmetrise="average")
    else:
        P = as_points(X)
        n = P.shape[0]
        check_dense_n(n, "average_linkage", max_n=max_n)
        cond = condensed_distances(P, metric)
    return linkage_from_condensed(cond, n)


# --------------------------------------------------------------------------- cuts
def relabel_first_seen(labels) -> np.ndarray:
    """Renumber arbitrary cluster ids to 0..K-1 in order of first appearance."""
    lab = np.asarray(labels).ravel()
    if lab.size == 0:
        return np.zeros(0, dtype=np.int64)
    _, first, inv = np.unique(lab, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inv.ravel()]


def _check_linkage(Z) -> tuple[np.ndarray, int]:
    Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim != 2 or Z.shape[1] != 4:
        raise ValueError(f"Z must be a scipy linkage matrix of shape (N-1, 4), got {Z.shape}")
    return Z, Z.shape[0] + 1


def _labels_after_merges(Z: np.ndarray, n: int, m: int) -> np.ndarray:
    """Flat labels after applying the first ``m`` merges of Z (union via pointer jumping)."""
    parent = np.arange(2 * n - 1, dtype=np.int64)
    if m > 0:
        kids = Z[:m, :2].astype(np.int64)
        new = n + np.arange(m, dtype=np.int64)
        parent[kids[:, 0]] = new
        parent[kids[:, 1]] = new
    # pointer jumping: O(N log depth) instead of a Python loop per leaf
    while True:
        nxt = parent[parent]
        if np.array_equal(nxt, parent):
            break
        parent = nxt
    return relabel_first_seen(parent[:n])


def cut_by_k(Z, n_clusters: int) -> np.ndarray:
    """Cut a linkage into exactly ``n_clusters`` flat clusters (the first N-K merges)."""
    Z, n = _check_linkage(Z)
    if int(n_clusters) != n_clusters or not 1 <= n_clusters <= n:
        raise ValueError(f"n_clusters must be an integer in [1, N={n}], got {n_clusters!r}")
    return _labels_after_merges(Z, n, n - int(n_clusters))


def cut_by_threshold(Z, distance_threshold: float) -> np.ndarray:
    """Flat clusters from all merges with height < ``distance_threshold`` (sklearn's rule:
    K = #(heights >= threshold) + 1). Needs a monotone linkage such as average linkage."""
    Z, n = _check_linkage(Z)
    h = Z[:, 2]
    if h.size and np.any(np.diff(h) < -1e-12 * max(1.0, float(np.abs(h).max()))):
        raise ValueError("cut_by_threshold needs monotone merge heights (e.g. average linkage)")
    m = int(np.count_nonzero(h < float(distance_threshold)))
    return _labels_after_merges(Z, n, m)


def cut(Z, n_clusters: int | None = None, distance_threshold: float | None = None) -> np.ndarray:
    """Exactly one of ``n_clusters`` / ``distance_threshold`` must be given."""
    if (n_clusters is None) == (distance_threshold is None):
        raise ValueError("give exactly one of n_clusters or distance_threshold")
    if n_clusters is not None:
        return cut_by_k(Z, n_clusters)
    return cut_by_threshold(Z, distance_threshold)


def agglomerative(
    X,
    n_clusters: int | None = None,
    *,
    distance_threshold: float | None = None,
    metric: str = "cosine",
    max_n: int | None = None,
) -> np.ndarray:
    """Average-linkage agglomerative clustering (dense path). Labels 0..K-1 by first member."""
    if (n_clusters is None) == (distance_threshold is None):
        raise ValueError("agglomerative: give exactly one of n_clusters or distance_threshold")
    X = as_square(X) if metric == "precomputed" else as_points(X)  # validate before the size checks
    n = X.shape[0]
    if n_clusters is not None and not 1 <= n_clusters <= n:
        raise ValueError(f"n_clusters must be in [1, N={n}], got {n_clusters!r}")
    Z = average_linkage(X, metric, max_n=max_n)
    if Z.shape[0] == 0:  # a single point
        return np.zeros(1, dtype=np.int64)
    return cut(Z, n_clusters, distance_threshold)
