"""Average linkage on D = 1 - W for sparse weights W, without densifying: a numba port of
fastcluster's NN-chain (``NN_chain_core``) over a pool of sparse rows that stores only the present
entries (absent = weight 0, distance 1). The faithful form reads W[i, j] for i < j (as sklearn reads a
precomputed matrix); ``symmetrize`` uses the fuzzy union u + l - u*l. Chain start, tie preferences,
the Lance-Williams update, the stable sort by height and SciPy labelling are fastcluster's, so the
linkage equals the dense path's (the tie-at-distance-1 caveat and the memory figures are in
:mod:`eventatlas.cluster.sparse_manifold`, which builds W from a kNN graph and calls this).
"""
from __future__ import annotations

import logging
import math
import time

import numba
import numpy as np
import scipy.sparse as sp

from .nnchain import label_linkage

log = logging.getLogger(__name__)

__all__ = ["sparse_average_linkage", "pool_from_weights", "linkage_from_pool"]


# --------------------------------------------------------------------------- numba core


@numba.njit(cache=True)
def _row_scan(pool_s, pool_v, pool_g, start, length, b, active, ver, prev):
    """Min over live entries of row b: (min value, lowest slot at min, value of slot prev or 1.0)."""
    m = math.inf
    arg = -1
    dprev = 1.0
    p0 = start[b]
    for q in range(p0, p0 + length[b]):
        s = pool_s[q]
        if active[s] and pool_g[q] == ver[s]:
            v = pool_v[q]
            if v < m or (v == m and s < arg):
                m = v
                arg = s
            if s == prev:
                dprev = v
    return m, arg, dprev


@numba.njit(cache=True)
def _copy_live(pool_s, pool_v, pool_g, src, n, dst, active, ver):
    """Copy the live entries of pool[src:src+n] (active slot, current generation) to pool[dst:];
    dst <= src, so the copy is safe in place. Returns the end of the copied run."""
    w = dst
    for q in range(src, src + n):
        s = pool_s[q]
        if active[s] and pool_g[q] == ver[s]:
            pool_s[w] = s
            pool_v[w] = pool_v[q]
            pool_g[w] = pool_g[q]
            w += 1
    return w


@numba.njit(cache=True)
def _append(pool_s, pool_v, pool_g, start, length, cap, row, slot, val, gen, top, active, ver):
    """Append (slot, val, gen) to a row; compact or move the row when full. Returns new pool top (-1: pool full)."""
    if length[row] == cap[row]:
        # drop stale entries first
        p0 = start[row]
        w = _copy_live(pool_s, pool_v, pool_g, p0, length[row], p0, active, ver)
        length[row] = w - p0
        if length[row] >= cap[row] or length[row] * 4 > cap[row] * 3:
            newcap = max(4, 2 * cap[row])
            if top + newcap > pool_s.shape[0]:
                return -1
            for q in range(length[row]):
                pool_s[top + q] = pool_s[p0 + q]
                pool_v[top + q] = pool_v[p0 + q]
                pool_g[top + q] = pool_g[p0 + q]
            start[row] = top
            cap[row] = newcap
            top += newcap
    q = start[row] + length[row]
    pool_s[q] = slot
    pool_v[q] = val
    pool_g[q] = gen
    length[row] += 1
    return top


@numba.njit(cache=True)
def _compact_pool(pool_s, pool_v, pool_g, start, length, cap, active, ver, n):
    """Slide every live row down to the pool front (cap = live + 1/8). Returns new top."""
    order = np.argsort(start)
    size = pool_s.shape[0]
    top = 0
    for oi in range(n):
        row = order[oi]
        # slack may not reach the next row's *old* start (it is not copied yet)
        limit = start[order[oi + 1]] if oi + 1 < n else size
        if not active[row]:
            length[row] = 0
            cap[row] = 0
            start[row] = top
            continue
        w = _copy_live(pool_s, pool_v, pool_g, start[row], length[row], top, active, ver)
        start[row] = top
        length[row] = w - top
        cap[row] = min(length[row] + length[row] // 8 + 2, max(limit - top, length[row]))
        top += cap[row]
    return top


@numba.njit(cache=True)
def _lookup(indptr, indices, row, col):
    """Position of ``col`` in CSR row ``row`` (sorted indices), -1 if absent."""
    lo = indptr[row]
    hi = indptr[row + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < col:
            lo = mid + 1
        else:
            hi = mid
    if lo < indptr[row + 1] and indices[lo] == col:
        return lo
    return -1


@numba.njit(cache=True)
def _pair_weight(indptr, indices, data, i, q, sym):
    """(lo, hi, w) for CSR entry q of row i, or lo = -1 if this entry does not own a pair.

    Faithful: pair (i, j) for j > i owns w = W[i, j]. Symmetric: the pair {i, j}
    is owned by the row-i entry when j > i, or by the row-i entry with j < i
    only if W[j, i] is absent; w = u + l - u*l in float32.
    """
    j = indices[q]
    w = data[q]
    if j == i or w == 0:
        return -1, -1, np.float32(0.0)
    if not sym:
        if j > i:
            return i, j, w
        return -1, -1, np.float32(0.0)
    p = _lookup(indptr, indices, j, i)
    if j > i:
        l = data[p] if p >= 0 else np.float32(0.0)
        return i, j, np.float32(np.float32(w + l) - np.float32(w * l))
    if p >= 0:
        return -1, -1, np.float32(0.0)  # counted from row j
    return j, i, w


@numba.njit(cache=True)
def _build_pool(indptr, indices, data, n, sym, extra):
    """Symmetric adjacency of D = 1 - w (absent = 1) laid out as the row pool."""
    deg = np.zeros(n, dtype=np.int64)
    for i in range(n):
        for q in range(indptr[i], indptr[i + 1]):
            lo, hi, w = _pair_weight(indptr, indices, data, i, q, sym)
            if lo >= 0 and w != 0:
                deg[lo] += 1
                deg[hi] += 1
    nnz = 0
    for i in range(n):
        nnz += deg[i]
    size = nnz + nnz // 4 + 4 * n + extra
    pool_s = np.empty(size, dtype=np.int32)
    pool_v = np.empty(size, dtype=np.float64)
    pool_g = np.zeros(size, dtype=np.int32)
    start = np.empty(n, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    cap = np.empty(n, dtype=np.int64)
    top = 0
    for i in range(n):
        start[i] = top
        cap[i] = deg[i]
        top += deg[i]
    for i in range(n):
        for q in range(indptr[i], indptr[i + 1]):
            lo, hi, w = _pair_weight(indptr, indices, data, i, q, sym)
            if lo >= 0 and w != 0:
                v = 1.0 - np.float64(w)
                p = start[lo] + length[lo]
                pool_s[p] = hi
                pool_v[p] = v
                length[lo] += 1
                p = start[hi] + length[hi]
                pool_s[p] = lo
                pool_v[p] = v
                length[hi] += 1
    return pool_s, pool_v, pool_g, start, length, cap, top, nnz


@numba.njit(cache=True)
def _nn_chain_sparse(pool_s, pool_v, pool_g, start, length, cap, top, n, out, state):
    """fastcluster NN_chain_core (average) on a symmetric sparse D (absent = 1.0).

    ``out``: (n-1, 3) float64 rows (node1, node2, dist) in creation order.
    ``state``: int64[3] (merges done, pool compactions, status: 1 = pool exhausted).
    """
    active = np.ones(n, dtype=np.bool_)
    ver = np.zeros(n, dtype=np.int32)
    members = np.ones(n, dtype=np.float64)
    succ = np.empty(n + 1, dtype=np.int64)
    pred = np.empty(n + 1, dtype=np.int64)
    for i in range(n + 1):
        succ[i] = i + 1
        pred[i] = i - 1
    lstart = 0
    chain = np.empty(n, dtype=np.int64)
    tip = 0
    val1 = np.ones(n, dtype=np.float64)
    val2 = np.ones(n, dtype=np.float64)
    mark = np.zeros(n, dtype=np.bool_)
    touched = np.empty(n, dtype=np.int64)
    idx1 = 0
    idx2 = 0
    mn = 0.0
    for j in range(n - 1):
        if tip <= 3:
            idx1 = lstart
            chain[0] = idx1
            tip = 1
            m, arg, dummy = _row_scan(pool_s, pool_v, pool_g, start, length, idx1, active, ver, -1)
            if m < 1.0:
                idx2 = arg
                mn = m
            else:  # everything at 1: the first active index after start
                idx2 = succ[idx1]
                mn = 1.0
        else:
            tip -= 3
            idx1 = chain[tip - 1]
            idx2 = chain[tip]
            m, arg, mn = _row_scan(pool_s, pool_v, pool_g, start, length, idx2, active, ver, idx1)
        while True:
            chain[tip] = idx2
            m, arg, dummy = _row_scan(pool_s, pool_v, pool_g, start, length, idx2, active, ver, -1)
            if m < mn:
                mn = m
                idx1 = arg
            idx2 = idx1
            idx1 = chain[tip]
            tip += 1
            if idx2 == chain[tip - 2]:
                break
        out[j, 0] = idx1
        out[j, 1] = idx2
        out[j, 2] = mn
        if idx1 > idx2:
            t_ = idx1
            idx1 = idx2
            idx2 = t_
        size1 = members[idx1]
        size2 = members[idx2]
        members[idx2] += members[idx1]
        s_ = size1 / (size1 + size2)
        t_f = size2 / (size1 + size2)
        # remove idx1 from the active list
        if idx1 == lstart:
            lstart = succ[idx1]
        else:
            succ[pred[idx1]] = succ[idx1]
            pred[succ[idx1]] = pred[idx1]
        active[idx1] = False
        # union of the two rows (live entries), Lance-Williams: s*d(i,idx1) + t*d(i,idx2)
        nt = 0
        for rr in range(2):
            row = idx1 if rr == 0 else idx2
            p0 = start[row]
            for q in range(p0, p0 + length[row]):
                s = pool_s[q]
                if s == idx2 or s == idx1 or not active[s] or pool_g[q] != ver[s]:
                    continue
                if rr == 0:
                    val1[s] = pool_v[q]
                else:
                    val2[s] = pool_v[q]
                if not mark[s]:
                    mark[s] = True
                    touched[nt] = s
                    nt += 1
        ver[idx2] += 1
        g = ver[idx2]
        # new row for idx2 at the pool end (old rows of idx1/idx2 become garbage)
        if top + nt + 4 > pool_s.shape[0]:
            top = _compact_pool(pool_s, pool_v, pool_g, start, length, cap, active, ver, n)
            state[1] += 1
            if top + nt + 4 > pool_s.shape[0]:
                state[2] = 1
                return
        start[idx2] = top
        length[idx2] = nt
        cap[idx2] = nt + 4
        for q in range(nt):
            s = touched[q]
            v = s_ * val1[s] + t_f * val2[s]
            pool_s[top + q] = s
            pool_v[top + q] = v
            pool_g[top + q] = ver[s]
        top += nt + 4
        length[idx1] = 0
        for q in range(nt):
            s = touched[q]
            v = pool_v[start[idx2] + q]
            r = _append(pool_s, pool_v, pool_g, start, length, cap, s, idx2, v, g, top, active, ver)
            if r < 0:
                top = _compact_pool(pool_s, pool_v, pool_g, start, length, cap, active, ver, n)
                state[1] += 1
                r = _append(pool_s, pool_v, pool_g, start, length, cap, s, idx2, v, g, top, active, ver)
                if r < 0:
                    state[2] = 1
                    return
            top = r
            val1[s] = 1.0
            val2[s] = 1.0
            mark[s] = False
        state[0] = j + 1


def pool_from_weights(W: sp.spmatrix, symmetrize: bool):
    """The NN-chain's row pool of ``W`` (and n), checked: square, >= 2 points, weights in [0, 1]. A caller
    that holds nothing else can drop ``W`` before :func:`linkage_from_pool`, so the two never peak together."""
    W = sp.csr_matrix(W)
    n = W.shape[0]
    if W.shape != (n, n):
        raise ValueError(f"weights must be square, got {W.shape}")
    if n < 2:
        raise ValueError(f"need at least 2 points for a linkage, got {n}")
    W.sum_duplicates()
    W.sort_indices()
    data = W.data.astype(np.float32, copy=False)
    if data.size and (not np.all(np.isfinite(data)) or data.min() < 0 or data.max() > 1):
        raise ValueError("manifold weights must be finite and within [0, 1]")
    return _build_pool(
        W.indptr.astype(np.int64), W.indices.astype(np.int32, copy=False), data, n, bool(symmetrize), 1024
    ), n


def linkage_from_pool(pool, n: int) -> np.ndarray:
    """The SciPy linkage matrix of a row pool (:func:`pool_from_weights`)."""
    pool_s, pool_v, pool_g, start, length, cap, top, nnz = pool
    t0 = time.perf_counter()
    out = np.zeros((n - 1, 3), dtype=np.float64)
    state = np.zeros(3, dtype=np.int64)
    _nn_chain_sparse(pool_s, pool_v, pool_g, start, length, cap, top, n, out, state)
    if state[2] != 0:
        raise MemoryError(f"sparse linkage: row pool of {pool_s.size:,} entries exhausted (n={n}, nnz={nnz})")
    log.info("sparse average linkage n=%d nnz=%d: %.2fs, %d pool compactions", n, nnz, time.perf_counter() - t0, state[1])
    rows = np.zeros((n - 1, 4))
    rows[:, :3] = out
    order = np.argsort(out[:, 2], kind="mergesort")
    Z = label_linkage(rows[order], n)
    cnt = np.ones(2 * n - 1)
    for i in range(n - 1):  # cluster sizes bottom-up (column 3)
        cnt[n + i] = cnt[int(Z[i, 0])] + cnt[int(Z[i, 1])]
    Z[:, 3] = cnt[n:]
    return Z


def sparse_average_linkage(W: sp.spmatrix, *, symmetrize: bool = False) -> np.ndarray:
    """Average linkage on D = 1 - W (absent = 0 weight) without densifying.

    Faithful (``symmetrize=False``): d_ij = 1 - W[i, j] for i < j (upper triangle,
    as sklearn reads a precomputed matrix). ``symmetrize=True``: 1 - fuzzy union.
    Returns the SciPy linkage matrix; equals fastcluster on the dense matrix
    (see the module docstring for the tie-at-1 caveat).
    """
    pool, n = pool_from_weights(W, symmetrize)
    return linkage_from_pool(pool, n)
