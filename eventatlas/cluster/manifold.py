"""Dense UMAP-style manifold weights and the "seed-000" manifold clustering.

Per point i, over its neighbour list (umap convention: ``k`` = ``n_neighbors`` counts
the point itself, so i has k − 1 non-self neighbours; the default k = N means *all*
other points):

* ρ_i = distance to the nearest neighbour at a distance > 0 (``local_connectivity`` = 1;
  fractional/larger values interpolate between sorted non-zero distances as umap does);
* σ_i by umap's bisection (``smooth_knn_dist``: float32 lo/mid/hi, start mid = 1, double
  while no upper bound, stop when |Σ_j exp(−max(0, d_ij − ρ_i)/σ_i) − log2(k)·bandwidth|
  < 1e-5, at most 64 steps), then floored at 1e-3 × the mean distance of i's list
  (self included) — or of all lists when ρ_i = 0;
* w_ij = exp(−max(0, d_ij − ρ_i)/σ_i) for j in i's list, 0 elsewhere and on the diagonal.

This equals ``umap.umap_.fuzzy_simplicial_set(..., apply_set_operations=False)`` given the
same exact kNN lists (tests check it to 1e-5). Neighbour ties at the k-th place are broken
by ``np.argpartition`` (umap's own kNN breaks them arbitrarily too).

Differences from the original seed-000 script (Edwards & Ji 2023, ``clustering_test.py``):
it searched σ with target log2(N − 1), tolerance 5e-4 and ρ = min distance *including*
zeros; the contract here follows umap-learn exactly (target log2(k), tolerance 1e-5,
ρ over non-zero distances, 1e-3 mean-distance floor).

Clustering: average linkage on D = 1 − W.
* ``manifold`` (faithful): W is *not* symmetrised. The original passed 1 − W to
  ``sklearn AgglomerativeClustering(affinity="precomputed", linkage="average")``, which reads
  only the upper triangle D[i, j], i < j; we build exactly that condensed vector, so the
  partition equals sklearn's (tested).
* ``manifold_sym``: fuzzy union W + Wᵀ − W∘Wᵀ (umap's ``set_op_mix_ratio=1``), then 1 − that.

Memory: one float32 N×N buffer (distances, overwritten in place by W) plus the float64
condensed vector fastcluster needs: 12·N² bytes, ≈ 4.5 GiB at N = 20,000 before the guard
in ``dense.check_dense_n`` refuses larger inputs.
"""
from __future__ import annotations

import math

import numpy as np
from tqdm.auto import tqdm

from .dense import (
    as_points,
    as_square,
    check_dense_n,
    condensed_offsets,
    cut,
    linkage_from_condensed,
    _unit_rows,
)

SMOOTH_K_TOLERANCE = 1e-5  # umap.umap_.SMOOTH_K_TOLERANCE
MIN_K_DIST_SCALE = 1e-3  # umap.umap_.MIN_K_DIST_SCALE
_FLOATMAX = np.float32(np.finfo(np.float32).max)
_BLOCK_ELEMS = 1 << 22  # ~16 MB of float32 per working block


def _distance_matrix(X, metric: str) -> np.ndarray:
    """float32 (N, N) distances with a zero diagonal (self)."""
    if metric == "precomputed":
        D = np.array(as_square(X), dtype=np.float32)  # private copy: overwritten in place later
        if D.min() < -1e-6:
            i, j = np.unravel_index(int(np.argmin(D)), D.shape)
            raise ValueError(f"manifold weights need non-negative distances; D[{i}, {j}] = {D[i, j]}")
        np.maximum(D, 0.0, out=D)
    else:
        P = as_points(X)
        n = P.shape[0]
        if metric == "cosine":
            Y = _unit_rows(P)
        elif metric == "euclidean":
            Y = np.asarray(P, dtype=np.float64)
            sq = np.einsum("ij,ij->i", Y, Y)
        else:
            raise ValueError(f"metric must be 'cosine', 'euclidean' or 'precomputed', got {metric!r}")
        D = np.empty((n, n), dtype=np.float32)
        step = max(1, (8 << 20) // max(n, 1))
        for r0 in range(0, n, step):
            G = Y[r0 : r0 + step] @ Y.T  # float64 for accuracy, stored as float32
            if metric == "cosine":
                np.subtract(1.0, G, out=G)
                np.clip(G, 0.0, 2.0, out=G)
            else:
                G *= -2.0
                G += sq[r0 : r0 + step, None]
                G += sq[None, :]
                np.maximum(G, 0.0, out=G)
                np.sqrt(G, out=G)
            D[r0 : r0 + step] = G
    np.fill_diagonal(D, 0.0)
    return D


def _restrict_to_knn(D: np.ndarray, k: int) -> None:
    """Set all but each row's k − 1 nearest non-self entries to +inf (in place)."""
    n = D.shape[0]
    if k >= n:
        return
    step = max(1, _BLOCK_ELEMS // n)
    for r0 in range(0, n, step):
        blk = D[r0 : r0 + step]
        rows = np.arange(blk.shape[0])
        blk[rows, r0 + rows] = np.inf  # keep self out of the selection
        keep = np.argpartition(blk, k - 2, axis=1)[:, : k - 1]
        vals = np.take_along_axis(blk, keep, axis=1)
        blk.fill(np.inf)
        np.put_along_axis(blk, keep, vals, axis=1)
        blk[rows, r0 + rows] = 0.0


def _rho_block(E: np.ndarray, local_connectivity: float) -> np.ndarray:
    """umap's ρ for a block of neighbour rows (inf = not a neighbour, self already excluded)."""
    nz = np.where(E > 0.0, E, np.inf)  # zero distances never define ρ
    cnt = np.count_nonzero(np.isfinite(nz), axis=1)
    index = int(math.floor(local_connectivity))
    interp = local_connectivity - index
    rho = np.zeros(E.shape[0], dtype=np.float32)
    m = nz.shape[1]
    need = [x for x in (index - 1, index) if 0 <= x < m]
    part = np.partition(nz, need, axis=1) if need else nz
    ok = cnt >= local_connectivity
    if index > 0:
        lo = part[:, index - 1]
        rho[ok] = lo[ok]
        if interp > SMOOTH_K_TOLERANCE and index < m:
            hi = part[:, index]
            sel = ok & np.isfinite(hi)
            rho[sel] += np.float32(interp) * (hi[sel] - lo[sel])
    else:
        rho[ok] = np.float32(interp) * part[ok, 0]
    short = (~ok) & (cnt > 0)
    if short.any():  # fewer non-zero neighbours than local_connectivity: use the largest
        rho[short] = np.max(np.where(np.isfinite(nz[short]), nz[short], -np.inf), axis=1)
    return rho


def _sigma_block(E: np.ndarray, target: float, n_iter: int) -> np.ndarray:
    """umap's bisection for σ on a block; ``E`` = max(0, d − ρ) with inf off the list."""
    b = E.shape[0]
    lo = np.zeros(b, dtype=np.float32)
    hi = np.full(b, _FLOATMAX, dtype=np.float32)
    mid = np.ones(b, dtype=np.float32)
    active = np.arange(b)
    tmp = np.empty_like(E)
    for _ in range(n_iter):
        if active.size == 0:
            break
        Ea = E if active.size == b else E[active]
        t = tmp[: active.size]
        np.divide(Ea, mid[active, None], out=t)
        np.negative(t, out=t)
        np.exp(t, out=t)
        psum = t.sum(axis=1, dtype=np.float64)
        done = np.abs(psum - target) < SMOOTH_K_TOLERANCE
        go = ~done
        idx = active[go]
        over = psum[go] > target
        i_over, i_under = idx[over], idx[~over]
        hi[i_over] = mid[i_over]
        mid[i_over] = (lo[i_over] + hi[i_over]) / np.float32(2.0)
        lo[i_under] = mid[i_under]
        unbounded = hi[i_under] >= _FLOATMAX
        mid[i_under[unbounded]] *= np.float32(2.0)
        b2 = i_under[~unbounded]
        mid[b2] = (lo[b2] + hi[b2]) / np.float32(2.0)
        active = idx
    return mid


def manifold_weights(
    X,
    k: int | None = None,
    *,
    metric: str = "cosine",
    local_connectivity: float = 1.0,
    bandwidth: float = 1.0,
    n_iter: int = 64,
    max_n: int | None = None,
    return_params: bool = False,
    progress: bool | None = None,
):
    """Dense unsymmetrised UMAP membership matrix W (float32, N×N, zero diagonal).

    ``X``: (N, d) features, or a square distance matrix with ``metric="precomputed"``
    (asymmetric allowed: row i is i's view). ``k``: umap's ``n_neighbors`` (self counted),
    default N. With ``return_params`` also returns (sigmas, rhos) like umap.
    """
    n = np.shape(X)[0]
    check_dense_n(n, "manifold_weights", max_n=max_n, bytes_per_pair=12.0)
    if k is None:
        k = n
    if int(k) != k or k < 2:
        raise ValueError(f"k (n_neighbours, self included) must be an integer >= 2, got {k!r}")
    k = int(min(k, n))
    if n < 2:
        raise ValueError("manifold weights need at least 2 points")
    D = _distance_matrix(X, metric)
    _restrict_to_knn(D, k)
    # umap's fallback floor for rows with ρ = 0 uses the mean over *all* kNN lists
    # (each list has k entries: the self 0 plus k − 1 neighbours).
    finite_sum = 0.0
    step = max(1, _BLOCK_ELEMS // n)
    for r0 in range(0, n, step):
        blk = D[r0 : r0 + step]
        finite_sum += float(np.where(np.isfinite(blk), blk, 0.0).sum(dtype=np.float64))
    mean_all = finite_sum / (n * k)
    target = math.log2(k) * bandwidth
    sigmas = np.empty(n, dtype=np.float32)
    rhos = np.empty(n, dtype=np.float32)
    show = (n >= 5000) if progress is None else progress
    for r0 in tqdm(range(0, n, step), desc="manifold weights", unit="block", disable=not show):
        blk = D[r0 : r0 + step]  # view: overwritten with W in place
        rows = np.arange(blk.shape[0])
        blk[rows, r0 + rows] = np.inf  # self is skipped in every sum
        rho = _rho_block(blk, local_connectivity)
        row_mean = np.where(np.isfinite(blk), blk, 0.0).sum(axis=1, dtype=np.float64) / k
        blk -= rho[:, None]
        np.maximum(blk, 0.0, out=blk)  # E = max(0, d − ρ); inf stays inf
        sig = _sigma_block(blk, target, n_iter)
        floor = np.where(rho > 0.0, MIN_K_DIST_SCALE * row_mean, MIN_K_DIST_SCALE * mean_all).astype(np.float32)
        sig = np.maximum(sig, floor)
        # σ > 0 always: the bisection starts at 1 and only halves/doubles a finite number of times
        np.divide(blk, sig[:, None], out=blk)
        np.negative(blk, out=blk)
        np.exp(blk, out=blk)  # exp(-inf) = 0 outside the kNN list
        blk[rows, r0 + rows] = 0.0
        sigmas[r0 : r0 + step] = sig
        rhos[r0 : r0 + step] = rho
    return (D, sigmas, rhos) if return_params else D


def condensed_from_weights(W: np.ndarray, *, symmetrize: bool) -> np.ndarray:
    """Condensed float64 1 − W (upper triangle as sklearn reads it) or 1 − fuzzy union."""
    n = W.shape[0]
    out = np.empty(n * (n - 1) // 2, dtype=np.float64)
    off = condensed_offsets(n)
    step = max(1, _BLOCK_ELEMS // n)
    for r0 in range(0, max(n - 1, 0), step):
        r1 = min(n - 1, r0 + step)
        U = W[r0:r1, r0:].astype(np.float64)
        if symmetrize:
            L = W[r0:, r0:r1].T.astype(np.float64)
            U = U + L - U * L
        np.subtract(1.0, U, out=U)
        for i in range(r0, r1):
            out[off[i] : off[i] + n - i - 1] = U[i - r0, i - r0 + 1 :]
    return out


def manifold_cluster(
    X,
    n_clusters: int | None = None,
    *,
    distance_threshold: float | None = None,
    k: int | None = None,
    metric: str = "cosine",
    symmetrize: bool = False,
    max_n: int | None = None,
    **weight_kw,
) -> np.ndarray:
    """Average linkage on 1 − W (``symmetrize=False``: faithful seed-000 variant)."""
    if (n_clusters is None) == (distance_threshold is None):
        raise ValueError("manifold: give exactly one of n_clusters or distance_threshold")
    X = as_square(X) if metric == "precomputed" else as_points(X)  # validate before the size checks
    n = X.shape[0]
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    if n_clusters is not None and not 1 <= n_clusters <= n:
        raise ValueError(f"n_clusters must be in [1, N={n}], got {n_clusters!r}")
    W = manifold_weights(X, k, metric=metric, max_n=max_n, **weight_kw)
    cond = condensed_from_weights(W, symmetrize=symmetrize)
    del W  # free the N×N float32 buffer before linkage
    Z = linkage_from_condensed(cond, n)
    return cut(Z, n_clusters, distance_threshold)
