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
same exact kNN lists (tests: |ΔW| < 1e-4; measured ≤ 1e-5, from float32 summation order). Neighbour ties at the k-th place are broken
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

Memory: one 4·N²-byte buffer. It holds the float32 distances, is overwritten in place by W
(and by the fuzzy union), and then by the float64 condensed 1 − W that fastcluster consumes
in place (8·N(N−1)/2 bytes fit in 4·N²). ≈ 1.5 GiB at N = 20,000; larger N is refused by
``dense.check_dense_n`` unless the ceiling is raised.
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


def _square_buffer(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A flat float32 buffer of even length and its (N, N) view.

    4·N² bytes hold both the float32 N×N matrix and, later, the float64 condensed vector
    (8·N(N−1)/2 < 4·N² bytes), so W can be turned into fastcluster's input in place.
    """
    buf = np.empty(n * n + (n * n) % 2, dtype=np.float32)
    return buf, buf[: n * n].reshape(n, n)


def _distance_matrix(X, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(buffer, float32 (N, N) distances with a zero diagonal (self))."""
    if metric == "precomputed":
        src = as_square(X)
        buf, D = _square_buffer(src.shape[0])
        D[...] = src  # private float32 copy: overwritten in place later
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
        buf, D = _square_buffer(n)
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
    return buf, D


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


# _rho_block / _sigma_block / MIN_K_DIST_SCALE are also used by sparse_manifold: keep signatures.
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


def manifold_weights(X, k: int | None = None, *, return_params: bool = False, **kw):
    """Dense unsymmetrised UMAP membership matrix W (float32, N×N, zero diagonal).

    ``X``: (N, d) features, or a square distance matrix with ``metric="precomputed"``
    (asymmetric allowed: row i is i's view). ``k``: umap's ``n_neighbors`` (self counted),
    default N. kw: ``metric``, ``local_connectivity``, ``bandwidth``, ``n_iter``, ``max_n``,
    ``progress``. With ``return_params`` also returns (sigmas, rhos) like umap.
    """
    _, W, sigmas, rhos = _weights(X, k, **kw)
    return (W, sigmas, rhos) if return_params else W


def _weights(
    X,
    k: int | None = None,
    *,
    metric: str = "cosine",
    local_connectivity: float = 1.0,
    bandwidth: float = 1.0,
    n_iter: int = 64,
    max_n: int | None = None,
    progress: bool | None = None,
):
    """(buffer, W, sigmas, rhos); W is a view into the buffer (see ``_square_buffer``)."""
    n = np.shape(X)[0]
    check_dense_n(n, "manifold_weights", max_n=max_n, bytes_per_pair=4.0)
    if k is None:
        k = n
    if int(k) != k or k < 2:
        raise ValueError(f"k (n_neighbours, self included) must be an integer >= 2, got {k!r}")
    k = int(min(k, n))
    if n < 2:
        raise ValueError("manifold weights need at least 2 points")
    buf, D = _distance_matrix(X, metric)
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
    return buf, D, sigmas, rhos


def fuzzy_union_inplace(W: np.ndarray, tile: int = 1024) -> None:
    """W ← W + Wᵀ − W∘Wᵀ (umap's fuzzy union, set_op_mix_ratio = 1), tile by tile in place."""
    n = W.shape[0]
    for a0 in range(0, n, tile):
        a1 = min(n, a0 + tile)
        for b0 in range(a0, n, tile):
            b1 = min(n, b0 + tile)
            A = W[a0:a1, b0:b1].copy()
            B = W[b0:b1, a0:a1].T  # a view; read fully before the writes below
            U = A + B - A * B
            W[a0:a1, b0:b1] = U
            W[b0:b1, a0:a1] = U.T


def condensed_from_weights(W: np.ndarray, *, symmetrize: bool) -> np.ndarray:
    """Condensed float64 1 − W (upper triangle, as sklearn reads it) or 1 − fuzzy union (new array)."""
    W = np.array(W, dtype=np.float32)
    if symmetrize:
        fuzzy_union_inplace(W)
    n = W.shape[0]
    iu = np.triu_indices(n, 1)
    return 1.0 - W[iu].astype(np.float64)


def _condensed_inplace(buf: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Overwrite the buffer behind W with the condensed float64 vector of 1 − W[i, j], i < j.

    Rows go last to first: row i's condensed entries start at byte 8·off(i) = 4·i·(2N−i−1)
    >= 4·N·i, where W row i starts, so rows < i (still unread) are never clobbered; each block
    of rows is copied out before its bytes are reused.
    """
    n = W.shape[0]
    cond = buf.view(np.float64)[: n * (n - 1) // 2]
    off = condensed_offsets(n)
    step = max(1, _BLOCK_ELEMS // n)
    for r1 in range(n, 0, -step):
        r0 = max(0, r1 - step)
        rows = W[r0:r1].astype(np.float64)  # copy before the bytes are reused
        np.subtract(1.0, rows, out=rows)
        for i in range(r0, r1):
            cond[off[i] : off[i] + n - i - 1] = rows[i - r0, i + 1 :]
    return cond


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
    buf, W, _, _ = _weights(X, k, metric=metric, max_n=max_n, **weight_kw)
    if symmetrize:
        fuzzy_union_inplace(W)
    cond = _condensed_inplace(buf, W)  # W is dead from here on
    del W
    Z = linkage_from_condensed(cond, n)
    return cut(Z, n_clusters, distance_threshold)
