"""Exact average linkage on cosine distance in O(N*d) memory (no N x N matrix).

For L2-normalised rows the average pairwise cosine *similarity* between clusters
A and B is ``mean_A . mean_B`` (bilinearity), so the average-linkage distance is
``1 - S_A . S_B / (|A| |B|)`` with ``S`` the per-cluster sum of vectors. The
merge criterion therefore needs only the cluster sums (float64) and sizes.

Algorithm (reducible linkage, batched reciprocal-nearest-neighbour merging):
average linkage is reducible (d(A+B, C) >= min(d(A, C), d(B, C))), so every
pair of reciprocal nearest neighbours (RNN) can be merged in any order and the
resulting set of merges is the one the greedy algorithm (and SciPy/fastcluster's
NN-chain) produces. Each round merges *all* current RNN pairs; only the new
clusters and the clusters whose nearest neighbour was just merged need a new
nearest neighbour (by reducibility nobody else's can change).

Nearest-neighbour searches are blocked BLAS-3 products ``M_R @ M_active.T`` of
float32 cluster means (CUDA when available) with a top-K; candidates within a
rigorous float32 error bound of the best are re-checked exactly in float64, so
the neighbour is exact. Each cluster keeps its K best candidates and a lower
bound on the distance to every unlisted cluster; by reducibility that bound
stays valid as clusters merge (for a new cluster A+B the size-weighted mean of
the parts' bounds), so most re-searches are answered from the K-list (exact
float64 dots) and only misses scan all active clusters. Memory O(N*d + N*K +
one block). Merges are then sorted by height (stable) and relabelled with
SciPy's union-find convention, exactly as scipy's own ``nn_chain`` does, giving
a SciPy-compatible linkage matrix usable with
``scipy.cluster.hierarchy.fcluster``/``dendrogram`` or :func:`cut`.

Exactness: heights are computed directly in float64 (they differ from SciPy's
Lance-Williams-updated values by rounding, ~1e-15). The merge order equals
SciPy's except among merges whose heights tie within rounding. Ties: among
equidistant candidates the lowest current index wins (argmin first occurrence);
if rounding ever leaves no RNN pair, the globally closest cached pair is merged,
which is always a valid greedy step. A merge's height is clamped to be >= its
children's heights (a rounding-level correction) so the sorted linkage stays a
valid tree. With exact ties (e.g. duplicate points) any tie order gives the
same heights and cophenetic distances but possibly a different tree shape.
"""
from __future__ import annotations

import contextlib
import logging
import math
import time

import numpy as np
import torch

from .dense import relabel_first_seen
from .knn import check_embeddings

log = logging.getLogger(__name__)

__all__ = ["average_linkage", "label_linkage", "cut", "default_device"]


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def label_linkage(merges: np.ndarray, n: int) -> np.ndarray:
    """Relabel merges given by member-point representatives into a SciPy linkage.

    ``merges`` rows are (point_in_A, point_in_B, height, size) in height order;
    output rows are (cluster_id_A, cluster_id_B, height, size) with cluster ids
    following SciPy (points 0..n-1, the i-th merge is n+i, smaller id first).
    Mirrors scipy.cluster._hierarchy.label (union-find).
    """
    Z = np.array(merges, dtype=np.float64, copy=True)
    parent = np.arange(2 * n - 1, dtype=np.int64)
    label = np.arange(n, dtype=np.int64)  # root point -> cluster id

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for i in range(Z.shape[0]):
        ra, rb = find(int(Z[i, 0])), find(int(Z[i, 1]))
        if ra == rb:
            raise ValueError(f"linkage row {i}: both sides already in one cluster (invalid merge sequence)")
        la, lb = label[ra], label[rb]
        Z[i, 0], Z[i, 1] = min(la, lb), max(la, lb)
        parent[rb] = ra
        label[ra] = n + i
    return Z


def cut(Z: np.ndarray, n_clusters: int | None = None, distance_threshold: float | None = None) -> np.ndarray:
    """Flat labels from a linkage matrix.

    ``n_clusters``: apply the first n-k merges in linkage order (sklearn's
    ``_hc_cut`` semantics, well defined even when heights tie, unlike
    ``fcluster(maxclust)``). ``distance_threshold``: apply merges with height
    < threshold (sklearn's semantics). Labels are 0..k-1 numbered by first point.
    """
    if (n_clusters is None) == (distance_threshold is None):
        raise ValueError("give exactly one of n_clusters or distance_threshold")
    Z = np.asarray(Z, dtype=np.float64)
    n = Z.shape[0] + 1
    if n_clusters is not None:
        if not 1 <= n_clusters <= n:
            raise ValueError(f"n_clusters={n_clusters} must be in [1, {n}]")
        m = n - int(n_clusters)
    else:
        m = int(np.searchsorted(Z[:, 2], distance_threshold, side="left"))
    # Union-find over cluster ids; each applied merge points both children at its node.
    parent = np.arange(2 * n - 1, dtype=np.int64)
    for i in range(m):
        parent[int(Z[i, 0])] = n + i
        parent[int(Z[i, 1])] = n + i
    roots = np.arange(n, dtype=np.int64)
    # Follow pointers in bulk: at most m hops, usually log-ish; vectorised.
    while True:
        nxt = parent[roots]
        if np.array_equal(nxt, roots):
            break
        roots = nxt
    # Renumber by first occurrence so labels are deterministic and readable.
    return relabel_first_seen(roots)


def _normalise(X: np.ndarray) -> np.ndarray:
    Xd = check_embeddings(X).astype(np.float64, copy=True)
    norms = np.linalg.norm(Xd, axis=1)
    # sklearn's / the dense path's convention: an all-zero row stays zero, i.e. it has
    # cosine similarity 0 (distance 1) to everything; the cluster-sum algebra still holds.
    norms[norms == 0] = 1.0
    Xd /= norms[:, None]
    return Xd


def average_linkage(
    X: np.ndarray,
    *,
    normalize: bool = True,
    device: str | torch.device | None = None,
    block_bytes: int = 256 * 1024**2,
    progress: bool = False,
    sizes: np.ndarray | None = None,
    n_candidates: int = 16,
) -> np.ndarray:
    """Exact average-linkage (cosine distance) linkage matrix of the rows of ``X``.

    Memory is O(N*d) plus one ``block_bytes`` working block. Returns the SciPy
    linkage matrix (n-1, 4): equals ``scipy.cluster.hierarchy.linkage(X,
    'average', metric='cosine')`` up to rounding-level ties (see module doc).

    ``sizes``: start from pre-formed clusters instead of points: row i of ``X``
    is then the *sum* of the unit vectors of cluster i and ``sizes[i]`` its
    member count (used by two-step clustering); column 3 of the result counts
    members, as SciPy would for the underlying points.
    ``n_candidates``: K, the per-cluster candidate list length (speed only).
    """
    if sizes is None:
        Xd = _normalise(X) if normalize else check_embeddings(X).astype(np.float64)
    else:
        Xd = check_embeddings(X).astype(np.float64)
        sizes = np.asarray(sizes, dtype=np.float64)
        if sizes.shape != (Xd.shape[0],) or not np.all(sizes >= 1):  # NaN fails >= 1 too
            raise ValueError(f"sizes must be ({Xd.shape[0]},) positive counts, got shape {sizes.shape}")
    n = Xd.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 points for a linkage, got {n}")
    dev = torch.device(device) if device is not None else default_device()
    t0 = time.perf_counter()
    n_threads = torch.get_num_threads()
    with _threads(dev, 1):
        return _average_linkage(Xd, sizes, n, dev, block_bytes, progress, n_candidates, n_threads, t0)


@contextlib.contextmanager
def _threads(dev: torch.device, k: int):
    """Run a section with k intra-op CPU threads.

    Many small per-round tensor ops (gathers of a few thousand rows) pay an OpenMP
    team wake-up each; on a busy 2-core machine that costs ~10 ms per op (measured:
    a 1600-row gather 13.7 ms with 2 threads vs 0.34 ms with 1). So the bookkeeping
    runs single-threaded and only the block matmul/top-k use all threads.
    """
    if dev.type != "cpu":
        yield
        return
    old = torch.get_num_threads()
    if old != k:
        torch.set_num_threads(k)
    try:
        yield
    finally:
        if old != k:
            torch.set_num_threads(old)


def _average_linkage(Xd, sizes, n, dev, block_bytes, progress, n_candidates, n_threads, t0):

    S = torch.from_numpy(Xd).to(dev)  # float64 cluster sums, compacted to the active clusters
    size = (
        torch.ones(n, dtype=torch.float64, device=dev)
        if sizes is None
        else torch.from_numpy(sizes.copy()).to(dev)
    )
    M32 = (S / size[:, None]).to(torch.float32)  # float32 cluster means: BLAS candidate search
    rep = torch.arange(n, dtype=torch.int64, device=dev)  # a member point of each cluster
    hmax = torch.zeros(n, dtype=torch.float64, device=dev)  # height of the merge that made it
    nn = torch.empty(n, dtype=torch.int64, device=dev)
    nnd = torch.empty(n, dtype=torch.float64, device=dev)
    d = Xd.shape[1]
    # Rigorous float32 error bound on a dot of two vectors of norm <= 1 (means of unit
    # vectors), any summation order, plus rounding the means to float32; doubled because
    # both the best candidate and the true best carry it. Every true nearest neighbour is
    # among the float32 candidates within eps of the float32 best; those get re-checked
    # exactly in float64.
    eps = 2.0 * (d + 4) * 2.0**-24 * 1.01

    K = max(2, int(n_candidates))
    cand = torch.empty((n, K), dtype=torch.int64, device=dev)  # K nearest at the last full search
    bound = torch.empty(n, dtype=torch.float64, device=dev)  # lower bound on every unlisted distance

    def exact_dist(r: torch.Tensor, cj: torch.Tensor) -> torch.Tensor:
        """Exact float64 distances of rows r to candidates cj (nr x c); self = inf."""
        out = torch.empty(cj.shape, dtype=torch.float64, device=dev)
        # chunked: the gathered (rows, c, d) float64 block stays ~32 MB
        step = max(1, (32 << 20) // (8 * S.shape[1] * max(1, cj.shape[1])))
        for s0 in range(0, r.numel(), step):
            rr, cc = r[s0 : s0 + step], cj[s0 : s0 + step]
            gi = rr[:, None].expand_as(cc)
            dist = 1.0 - torch.einsum("rcd,rd->rc", S[cc], S[rr]) / (size[gi] * size[cc])
            out[s0 : s0 + step] = torch.where(cc != gi, dist, torch.full_like(dist, math.inf))
        return out

    def exact_best(r: torch.Tensor, cj: torch.Tensor):
        """Exact float64 min distance (lowest index on ties) of rows r over candidates cj."""
        dist = exact_dist(r, cj)
        best = dist.min(dim=1).values
        j = torch.where(dist == best[:, None], cj, torch.full_like(cj, 1 << 62)).min(dim=1).values
        return best, j, dist

    def refresh(rows: torch.Tensor) -> None:
        """Exact nearest active neighbour (lowest index on ties) of ``rows``, plus the K-list."""
        m = M32.shape[0]
        kk = min(K, m - 1)
        step = max(1, int(block_bytes // (4 * 2 * max(m, 1))))
        for s in range(0, rows.numel(), step):
            r = rows[s : s + step]
            nr = r.numel()
            ar = torch.arange(nr, device=dev)
            with _threads(dev, n_threads):  # only the big block ops are worth a thread team
                G = M32[r] @ M32.T  # similarity of means; nearest = largest
                G[ar, r] = -math.inf
                tv, ti = torch.topk(G, kk, dim=1, largest=True, sorted=True)
            gmax = tv[:, 0]
            # Every true nearest neighbour has a float32 similarity >= gmax - eps; if all
            # K listed ones are that close the list may miss it: search the full row.
            amb = tv[:, -1] >= gmax - eps
            # float64 re-check only for listed candidates within eps of the float32 best
            ci, cc = torch.nonzero(tv >= (gmax - eps)[:, None], as_tuple=True)
            cj = ti[ci, cc]
            gi = r[ci]
            dist = 1.0 - (S[gi] * S[cj]).sum(1) / (size[gi] * size[cj])
            best = torch.full((nr,), math.inf, dtype=torch.float64, device=dev)
            best.scatter_reduce_(0, ci, dist, reduce="amin")
            at = dist == best[ci]
            j = torch.full((nr,), m, dtype=torch.int64, device=dev)
            j.scatter_reduce_(0, ci[at], cj[at], reduce="amin")
            if bool(amb.any()):
                ra = torch.nonzero(amb).flatten()
                ci, cj = torch.nonzero(G[ra] >= (gmax[ra] - eps)[:, None], as_tuple=True)
                gi = r[ra][ci]
                dist = 1.0 - (S[gi] * S[cj]).sum(1) / (size[gi] * size[cj])
                b2 = torch.full((ra.numel(),), math.inf, dtype=torch.float64, device=dev)
                b2.scatter_reduce_(0, ci, dist, reduce="amin")
                at = dist == b2[ci]
                j2 = torch.full((ra.numel(),), m, dtype=torch.int64, device=dev)
                j2.scatter_reduce_(0, ci[at], cj[at], reduce="amin")
                best[ra], j[ra] = b2, j2
            del G
            nnd[r] = best
            nn[r] = j
            if kk < K:  # fewer clusters than list slots: pad with the best one
                ti = torch.cat([ti, ti[:, :1].expand(nr, K - kk)], dim=1)
            cand[r] = ti
            # unlisted clusters have float32 similarity <= tv[:, -1], i.e. true distance
            # >= 1 - tv[:, -1] - eps/2; with every other cluster listed there is no bound.
            if kk >= m - 1:
                bound[r] = math.inf
            else:
                bound[r] = 1.0 - tv[:, -1].double() - eps

    out = np.empty((n - 1, 4), dtype=np.float64)
    k = 0
    refresh(torch.arange(n, device=dev))
    rounds = fallbacks = full = cheap = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n - 1, desc="average linkage (exact)", unit="merge")
    while k < n - 1:
        m = S.shape[0]
        rounds += 1
        idx = torch.arange(m, device=dev)
        a = idx[(nn[nn] == idx) & (idx < nn)]
        if a.numel() == 0:
            # Rounding broke every reciprocity: merge the globally closest cached pair (always valid).
            fallbacks += 1
            a = torch.argmin(nnd).reshape(1)
            a, b = torch.minimum(a, nn[a]), torch.maximum(a, nn[a])
        else:
            b = nn[a]
        h = torch.maximum(torch.minimum(nnd[a], nnd[b]), torch.maximum(hmax[a], hmax[b]))
        hmax[a] = h
        new_size = size[a] + size[b]
        cnt = a.numel()
        rows = torch.stack([rep[a].double(), rep[b].double(), h, new_size], dim=1)
        out[k : k + cnt] = rows.cpu().numpy()
        k += cnt
        if bar is not None:
            bar.update(cnt)
        if k >= n - 1:
            break
        # lists and bounds of the two parts, for the new cluster's cheap search
        ua, ub, ba, bb, na, nb_ = cand[a], cand[b], bound[a], bound[b], size[a], size[b]
        S[a] += S[b]
        size[a] = new_size
        M32[a] = (S[a] / new_size[:, None]).to(torch.float32)
        alive = torch.ones(m, dtype=torch.bool, device=dev)
        alive[b] = False
        merged = torch.zeros(m, dtype=torch.bool, device=dev)
        merged[a] = True
        merged[b] = True
        is_new = torch.zeros(m, dtype=torch.bool, device=dev)
        is_new[a] = True
        stale = merged[nn] & alive & ~is_new
        # b lives on inside a: candidate lists follow it.
        fwd = idx.clone()
        fwd[b] = a
        # Compact to the active clusters so later products skip dead rows.
        newpos = torch.cumsum(alive, 0) - 1
        S, M32 = S[alive], M32[alive]
        size, rep, hmax = size[alive], rep[alive], hmax[alive]
        nn, nnd = newpos[fwd[nn[alive]]], nnd[alive]
        cand, bound = newpos[fwd[cand[alive]]], bound[alive]
        need = torch.zeros(S.shape[0], dtype=torch.bool, device=dev)
        st = torch.nonzero(stale[alive]).flatten()
        if st.numel():
            # By reducibility every unlisted cluster is still >= bound away: the best listed
            # one (exact float64) is the nearest neighbour when it is strictly below the bound.
            best, j, _ = exact_best(st, cand[st])
            ok = best < bound[st]
            nnd[st[ok]], nn[st[ok]] = best[ok], j[ok]
            need[st[~ok]] = True
            cheap += int(ok.sum())
        # New cluster c = a + b: d(c, y) = (na d(a, y) + nb d(b, y)) / (na + nb), so a
        # cluster unlisted by both parts is at least the size-weighted mean of their bounds
        # away; candidates are the union of both lists.
        pa = newpos[a]
        U = newpos[fwd[torch.cat([ua, ub], dim=1)]]
        best, j, dist = exact_best(pa, U)
        bc = (na * ba + nb_ * bb) / (na + nb_)
        order = torch.sort(dist, dim=1, stable=True)
        keep_i = torch.gather(U, 1, order.indices[:, :K])
        dropped = order.values[:, K]
        bnew = torch.minimum(bc, dropped)
        ok = best < bnew
        nnd[pa[ok]], nn[pa[ok]] = best[ok], j[ok]
        cand[pa[ok]], bound[pa[ok]] = keep_i[ok], bnew[ok]
        need[pa[~ok]] = True
        cheap += int(ok.sum())
        rr = torch.nonzero(need).flatten()
        full += rr.numel()
        refresh(rr)
    if bar is not None:
        bar.close()
    order = np.argsort(out[:, 2], kind="mergesort")
    Z = label_linkage(out[order], n)
    log.info(
        "average linkage n=%d: %d rounds, %d row searches, %d cached-list hits, %d fallbacks, %.2fs",
        n, rounds, full, cheap, fallbacks, time.perf_counter() - t0,
    )
    return Z


# ------------------------------------------------------------------ dispatcher hook

SCALABLE_MIN_N_ENV = "EVENTATLAS_SCALABLE_MIN_N"
DEFAULT_SCALABLE_MIN_N = 20_000  # above this the exact O(N*d) path is used (and always above the dense ceiling)


def scalable_min_n() -> int:
    import os

    raw = os.environ.get(SCALABLE_MIN_N_ENV, "").strip()
    if not raw:
        return DEFAULT_SCALABLE_MIN_N
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{SCALABLE_MIN_N_ENV}={raw!r} is not an integer") from None


def maybe_agglomerative(X, n_clusters=None, *, distance_threshold=None, metric="cosine", **kw):
    """Labels from the exact NN-chain path when it applies, else None (use the dense path).

    Applies to cosine agglomerative clustering with N above ``EVENTATLAS_SCALABLE_MIN_N``
    (default 20,000) or above the dense ceiling (``dense.max_dense_n``). Same labels as the
    dense path (same cut and first-member numbering) up to exact distance ties.
    """
    from . import dense

    if metric != "cosine" or set(kw) - {"max_n"}:
        return None
    P = dense.as_points(X)
    n = P.shape[0]
    if n < 2 or not (n > scalable_min_n() or n > dense.max_dense_n(kw.get("max_n"))):
        return None
    if (n_clusters is None) == (distance_threshold is None):
        raise ValueError("agglomerative: give exactly one of n_clusters or distance_threshold")
    if n_clusters is not None and not 1 <= n_clusters <= n:
        raise ValueError(f"n_clusters must be in [1, N={n}], got {n_clusters!r}")
    groups, first_of, sizes = _duplicates(P)
    if len(sizes) == n:
        Z = average_linkage(P, progress=n >= 50_000)
        return dense.cut(Z, n_clusters, distance_threshold)
    # identical rows are at distance 0: average linkage merges them first, whatever else is there, so the
    # tree over one weighted point per distinct row is the same tree without its zero-height merges (a
    # corpus that repeats sentences would otherwise make the chain rescan every duplicate)
    if len(sizes) < 2:
        return np.zeros(n, dtype=np.int64)
    U = _normalise(P[first_of]) * sizes[:, None]
    Z = average_linkage(U, sizes=sizes, progress=len(sizes) >= 50_000)
    k = None if n_clusters is None else min(n_clusters, len(sizes))  # identical mentions cannot be told apart
    return dense.cut(Z, k, distance_threshold)[groups]


def _duplicates(P: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each row's group, the first row of each group, each group's size), groups numbered by their first
    row, so labels mapped back through them keep the first-member numbering."""
    _, first, inverse, counts = np.unique(np.ascontiguousarray(P), axis=0, return_index=True, return_inverse=True,
                                          return_counts=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse.ravel()], first[order], counts[order].astype(np.float64)
