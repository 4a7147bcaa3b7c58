"""Manifold (UMAP-weight) clustering at scale: sparse kNN weights + sparse average linkage.

Weights. Per point i over its k nearest neighbours (umap's ``n_neighbors``: self
counted, so k - 1 others; paper: k = N on ACE, 3000 on MAVEN): rho_i, sigma_i and
w_ij = exp(-max(0, d_ij - rho_i) / sigma_i) exactly as the dense
:mod:`eventatlas.cluster.manifold` (it reuses that module's rho/sigma block
functions on compact (rows x (k-1)) blocks, so the formulas cannot drift), but
stored as CSR (N*(k-1) entries instead of N^2). Distances are the dense path's:
float64 dot of unit rows, 1 - dot clipped to [0, 2], stored float32, neighbours
chosen by the same ``np.argpartition`` call (so even exact ties at the k-th
neighbour resolve identically) - for N <= 20,000. Above that, where no dense
reference can run, float32 products are used (distance error ~1e-7), or faiss's
exact search with ``backend="faiss"`` (:mod:`eventatlas.cluster.knn`). A precomputed
(indices, distances) pair can be passed instead.

Linkage. Average linkage on D = 1 - W where absent entries mean w = 0 (d = 1),
computed by merging sparse rows (:mod:`eventatlas.cluster.sparse_linkage`): a numba port of
fastcluster's NN-chain (``NN_chain_core``) that stores only the present entries. Faithful ``manifold``
uses w_ij for i < j only (sklearn reads the upper triangle of the precomputed
matrix); ``manifold_sym`` uses the fuzzy union u + l - u*l (float32 like umap
and the dense path). Chain start, tie preferences (previous chain element, then lowest
index), the Lance-Williams update ``s*d_i,a + t*d_i,b`` with s, t the size
fractions, the stable sort by height and SciPy labelling are fastcluster's, so
for the same D the linkage matrix is bitwise identical to the dense path's,
with one documented exception:

Ties at distance 1. Between two clusters with no edge at all the dense matrix
holds ``s*1 + t*1``, which rounds to 1 +- 1 ulp depending on the merge
history; here such pairs are exactly 1. So merges *at height ~1* (joining
clusters with no weight between them, the top of the tree when the kNN graph is
not connected or weights underflowed) may come in a different, still
deterministic, order: heights agree to 1e-15 and every cut with a threshold
below 1 - 1e-12, or with at least as many clusters as there are merges at
height ~1 + 1, gives the identical partition. Everything below is identical.

Memory: CSR weights 8 bytes per kNN entry; the linkage row pool 16 bytes per
stored (symmetric) entry plus 25% room for rows that grow (stale entries are
dropped in place, and the pool is compacted when full; live entries never
increase). 118k x k=3000 faithful: ~10 GB peak. Never N x N (except k = N,
which the dispatcher leaves to the dense path and its ceiling).
"""
from __future__ import annotations

import logging
import math

import numpy as np
import scipy.sparse as sp
from tqdm.auto import tqdm

from . import manifold as _dense
from .knn import knn as _knn
from .nnchain import cut
from .sparse_linkage import linkage_from_pool, pool_from_weights

log = logging.getLogger(__name__)

__all__ = [
    "knn_distances",
    "umap_weights",
    "manifold_linkage",
    "manifold_cluster",
]


def _unit_rows64(X) -> np.ndarray:
    Xf = np.array(X, dtype=np.float64)
    if Xf.ndim != 2:
        raise ValueError(f"expected a 2-D array of embeddings, got shape {Xf.shape}")
    if not np.all(np.isfinite(Xf)):
        bad = int(np.argwhere(~np.isfinite(Xf))[0, 0])
        raise ValueError(f"embedding row {bad} has a non-finite value")
    norms = np.sqrt(np.einsum("ij,ij->i", Xf, Xf))
    norms[norms == 0.0] = 1.0  # dense path's convention: zero rows stay zero (distance 1)
    Xf /= norms[:, None]
    return Xf


def _exact_rows(Y: np.ndarray, k: int, progress: bool, fast: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN lists computed exactly like the dense path (bitwise-equal distances).

    Row blocks of float64 ``Y @ Y.T`` (same block height as the dense path), 1 - dot
    clipped to [0, 2], float32; self excluded; the k - 1 nearest chosen with the same
    ``np.argpartition`` call (row-independent, so ties resolve identically). O(N^2 d)
    time, O(block * N) memory. ``fast``: float32 products in bigger blocks (the
    large-N path: exact neighbours up to float32 rounding, ~2x less BLAS time;
    the selection is a linear-time partition, not faiss's k-heap, which at
    k = 3000 spends most of its time in the heap).
    """
    n = Y.shape[0]
    nb = np.empty((n, k - 1), dtype=np.int32)
    D = np.empty((n, k - 1), dtype=np.float32)
    if fast:
        Y = Y.astype(np.float32)
        step = max(1, (32 << 20) // max(n, 1))
    else:
        step = max(1, (8 << 20) // max(n, 1))
    for r0 in tqdm(range(0, n, step), desc="kNN rows", unit="block", disable=not progress):
        G = Y[r0 : r0 + step] @ Y.T
        np.subtract(1.0, G, out=G)
        np.clip(G, 0.0, 2.0, out=G)
        blk = G.astype(np.float32, copy=False)
        rows = np.arange(blk.shape[0])
        blk[rows, r0 + rows] = np.inf  # self never selected
        if k < n:
            keep = np.argpartition(blk, k - 2, axis=1)[:, : k - 1]
            keep.sort(axis=1)
        else:
            keep = np.broadcast_to(np.arange(n), blk.shape)
            keep = keep[keep != (r0 + rows)[:, None]].reshape(blk.shape[0], n - 1)
        nb[r0 : r0 + step] = keep
        D[r0 : r0 + step] = np.take_along_axis(blk, keep, axis=1)
    return nb, D


def knn_distances(
    X,
    k: int,
    *,
    knn_result=None,
    backend: str = "auto",
    block: int | None = None,
    progress: bool = False,
    exact_distances: bool | None = None,
):
    """(indices (N, k-1) int64 sorted ascending per row, distances (N, k-1) float32), self excluded.

    ``exact_distances`` (default: N <= 20,000, where a dense reference can run):
    lists and distances computed exactly like the dense path (float64 row blocks,
    O(N^2 d) BLAS time, bitwise-equal weights). Otherwise float32 row blocks with a
    linear-time partition (``backend="auto"``), or faiss / torch top-k
    (:func:`eventatlas.cluster.knn.knn`, ``backend="faiss"|"torch"``), used as they
    are (distance error ~1e-7; neighbours tied at that level may swap). ``knn_result`` = precomputed
    (indices, distances) with self in column 0: distances are recomputed in
    float64 for those pairs.
    """
    Y = _unit_rows64(X)
    n = Y.shape[0]
    if not 2 <= k <= n:
        raise ValueError(f"k (n_neighbours, self included) must be in [2, N={n}], got {k}")
    if exact_distances is None:
        exact_distances = n <= 20_000
    if knn_result is None and exact_distances:
        return _exact_rows(Y, k, progress)
    if knn_result is None and backend == "auto":
        return _exact_rows(Y, k, progress, fast=True)
    if knn_result is None:
        I, Dk = _knn(Y.astype(np.float32), k, backend=backend, normalize=False, progress=progress)
        nb = np.ascontiguousarray(I[:, 1:k], dtype=np.int32)
        D = np.clip(Dk[:, 1:k], 0.0, 2.0)
        del I, Dk
        for b0 in range(0, n, 4096):  # index order per row (the dense path's), in blocks
            srt = np.argsort(nb[b0 : b0 + 4096], axis=1, kind="stable")
            nb[b0 : b0 + 4096] = np.take_along_axis(nb[b0 : b0 + 4096], srt, axis=1)
            D[b0 : b0 + 4096] = np.take_along_axis(D[b0 : b0 + 4096], srt, axis=1)
        return nb, D
    I = np.asarray(knn_result[0])
    if I.ndim != 2 or I.shape[0] != n or I.shape[1] < k:
        raise ValueError(f"precomputed kNN indices have shape {I.shape}, expected ({n}, >= {k})")
    rows = np.arange(n)
    if not np.array_equal(I[:, 0], rows):
        bad = int(np.nonzero(I[:, 0] != rows)[0][0])
        raise ValueError(f"kNN row {bad}: column 0 must be the point itself (got {I[bad, 0]})")
    if np.any(I < 0) or np.any(I >= n):
        raise ValueError(f"kNN indices must be in [0, {n})")
    nb_all = I[:, 1:k]  # precomputed lists: the first k columns count
    m = nb_all.shape[1]
    if block is None:  # the gathered (block, m, d) float64 neighbours stay ~128 MB
        block = max(1, min(1024, (128 << 20) // max(1, m * Y.shape[1] * 8)))
    nb = np.empty((n, k - 1), dtype=np.int32)
    D = np.empty((n, k - 1), dtype=np.float32)
    for s in tqdm(range(0, n, block), desc="kNN distances (float64)", unit="block", disable=not progress):
        cand = nb_all[s : s + block]
        G = np.einsum("id,ijd->ij", Y[s : s + block], Y[cand])
        np.subtract(1.0, G, out=G)
        np.clip(G, 0.0, 2.0, out=G)
        srt = np.argsort(cand, axis=1, kind="stable")  # the dense path's row (index) order
        nb[s : s + block] = np.take_along_axis(cand, srt, axis=1)
        D[s : s + block] = np.take_along_axis(G.astype(np.float32), srt, axis=1)
    del knn_result, I, nb_all
    if k > 2 and np.any(nb[:, 1:] == nb[:, :-1]):
        bad = int(np.nonzero((nb[:, 1:] == nb[:, :-1]).any(axis=1))[0][0])
        raise ValueError(f"kNN row {bad} lists a neighbour twice")
    return nb, D


def umap_weights(
    indices: np.ndarray,
    distances: np.ndarray,
    *,
    local_connectivity: float = 1.0,
    bandwidth: float = 1.0,
    n_iter: int = 64,
    block: int = 512,
    progress: bool = False,
    return_params: bool = False,
):
    """Unsymmetrised UMAP membership CSR matrix (float32) from self-excluded kNN lists.

    ``indices``/``distances``: (N, k-1) as returned by :func:`knn_distances`.
    Equals the dense ``manifold_weights`` restricted to the stored entries.
    """
    n, km1 = indices.shape
    k = km1 + 1
    target = math.log2(k) * bandwidth
    # umap floor for rows with rho = 0 uses the mean over all lists (self 0 included).
    mean_all = float(distances.sum(dtype=np.float64)) / (n * k)
    data = np.empty((n, km1), dtype=np.float32)
    sigmas = np.empty(n, dtype=np.float32)
    rhos = np.empty(n, dtype=np.float32)
    for s in tqdm(range(0, n, block), desc="manifold weights (sparse)", unit="block", disable=not progress):
        blk = distances[s : s + block].copy()
        rho = _dense._rho_block(blk, local_connectivity)
        row_mean = blk.sum(axis=1, dtype=np.float64) / k
        blk -= rho[:, None]
        np.maximum(blk, 0.0, out=blk)
        sig = _dense._sigma_block(blk, target, n_iter)
        floor = np.where(
            rho > 0.0, _dense.MIN_K_DIST_SCALE * row_mean, _dense.MIN_K_DIST_SCALE * mean_all
        ).astype(np.float32)
        sig = np.maximum(sig, floor)
        np.divide(blk, sig[:, None], out=blk)
        np.negative(blk, out=blk)
        np.exp(blk, out=blk)
        data[s : s + block] = blk
        sigmas[s : s + block] = sig
        rhos[s : s + block] = rho
    # int32 index arrays where they fit: scipy would otherwise upcast (copy) the indices
    idx_t = np.int32 if n * km1 < 2**31 - 1 else np.int64
    indptr = np.arange(0, n * km1 + 1, km1, dtype=idx_t)
    W = sp.csr_matrix((data.ravel(), indices.ravel().astype(idx_t, copy=False), indptr), shape=(n, n), copy=False)
    return (W, sigmas, rhos) if return_params else W


def manifold_linkage(
    X,
    k: int | None = None,
    *,
    symmetrize: bool = False,
    knn_result=None,
    backend: str = "auto",
    progress: bool = False,
    **weight_kw,
) -> np.ndarray:
    """Linkage matrix of (sparse) manifold clustering; ``k`` defaults to N."""
    n = np.shape(X)[0]
    k = n if k is None else int(min(k, n))
    nb, dist = knn_distances(X, k, knn_result=knn_result, backend=backend, progress=progress)
    W = umap_weights(nb, dist, progress=progress, **weight_kw)
    del nb, dist
    pool, n = pool_from_weights(W, symmetrize)
    del W  # the row pool replaces the weights: never both at peak
    return linkage_from_pool(pool, n)


def manifold_cluster(
    X,
    n_clusters: int | None = None,
    *,
    distance_threshold: float | None = None,
    k: int | None = None,
    symmetrize: bool = False,
    knn_result=None,
    backend: str = "auto",
    progress: bool = False,
    **weight_kw,
) -> np.ndarray:
    """Labels of sparse manifold clustering (same contract as the dense ``manifold_cluster``)."""
    if (n_clusters is None) == (distance_threshold is None):
        raise ValueError("manifold: give exactly one of n_clusters or distance_threshold")
    n = np.shape(X)[0]
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    Z = manifold_linkage(X, k, symmetrize=symmetrize, knn_result=knn_result, backend=backend, progress=progress, **weight_kw)
    return cut(Z, n_clusters=n_clusters, distance_threshold=distance_threshold)


# ------------------------------------------------------------------ dispatcher hook

_SPARSE_KW = {"local_connectivity", "bandwidth", "n_iter", "max_n"}


def maybe_cluster(X, n_clusters=None, *, distance_threshold=None, k=None, metric="cosine", symmetrize=False, **kw):
    """Labels from the sparse manifold path when it applies, else None (use the dense path).

    Applies to cosine features when k < N (at k = N the work is N x N in any storage,
    so the dense path and its ceiling apply). Results equal the dense path's
    (bitwise-identical linkage; see the module docstring for exact ties at distance 1).
    """
    from . import dense

    if metric != "cosine" or set(kw) - _SPARSE_KW:
        return None
    P = dense.as_points(X)
    n = P.shape[0]
    kk = n if k is None else k
    if int(kk) != kk or kk < 2:
        return None  # the dense path raises its own message
    kk = int(min(kk, n))
    if n < 3 or kk >= n:
        return None  # k = N is N x N work in any storage: the dense path (and its ceiling) applies
    if (n_clusters is None) == (distance_threshold is None):
        raise ValueError("manifold: give exactly one of n_clusters or distance_threshold")
    if n_clusters is not None and not 1 <= n_clusters <= n:
        raise ValueError(f"n_clusters must be in [1, N={n}], got {n_clusters!r}")
    wkw = {key: kw[key] for key in ("local_connectivity", "bandwidth", "n_iter") if key in kw}
    Z = manifold_linkage(P, kk, symmetrize=symmetrize, progress=n >= 50_000, **wkw)
    return dense.cut(Z, n_clusters, distance_threshold)
