"""Dense clustering paths against sklearn / umap-learn / scipy and hand-worked linkages."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from scipy.cluster.hierarchy import linkage as scipy_linkage
from scipy.spatial.distance import pdist
from sklearn.cluster import AffinityPropagation, AgglomerativeClustering
from sklearn.metrics import normalized_mutual_info_score
from sklearn.metrics.pairwise import cosine_distances, cosine_similarity

from conftest import shared_path
from eventatlas.cluster import (
    ALGORITHMS,
    DenseSizeError,
    average_linkage,
    cluster,
    cut_by_k,
    cut_by_threshold,
    manifold_weights,
    relabel_first_seen,
)
from eventatlas.cluster.manifold import (
    _condensed_inplace,
    _square_buffer,
    condensed_from_weights,
    fuzzy_union_inplace,
)

umap_ = pytest.importorskip("umap.umap_")


def blobs(n_per=30, n_clusters=6, dim=24, spread=1.3, seed=0):
    """Overlapping Gaussian blobs (centres ~N(0, 1.5²)): clusters touch, so merge orders matter."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1.5, (n_clusters, dim))
    X = np.concatenate([rng.normal(c, spread, (n_per, dim)) for c in centres])
    y = np.repeat(np.arange(n_clusters), n_per)
    return X, y


def same_partition(a, b) -> bool:
    return np.array_equal(relabel_first_seen(a), relabel_first_seen(b))


def umap_W(D, k, **kw):
    """umap-learn's unsymmetrised membership matrix (exact kNN from the precomputed matrix)."""
    W, sig, rho = umap_.fuzzy_simplicial_set(D, k, 0, "precomputed", apply_set_operations=False, **kw)
    return W.toarray(), sig, rho


# ------------------------------------------------------------------ hand-worked linkage
def test_linkage_and_cuts_hand():
    # 1-D points 0, 1, 5, 6, 20 (euclidean). Average linkage merges:
    #   {0,1} at 1, {5,6} at 1, {0,1}+{5,6} at (5+6+4+5)/4 = 5, + {20} at (20+19+15+14)/4 = 17
    X = np.array([[0.0], [1.0], [5.0], [6.0], [20.0]])
    Z = average_linkage(X, "euclidean")
    assert np.allclose(Z[:, 2], [1, 1, 5, 17])
    assert cut_by_k(Z, 1).tolist() == [0, 0, 0, 0, 0]
    assert cut_by_k(Z, 2).tolist() == [0, 0, 0, 0, 1]
    assert cut_by_k(Z, 3).tolist() == [0, 0, 1, 1, 2]
    assert cut_by_k(Z, 5).tolist() == [0, 1, 2, 3, 4]
    # threshold: merges with height < t (sklearn's rule)
    assert cut_by_threshold(Z, 5.0).tolist() == [0, 0, 1, 1, 2]
    assert cut_by_threshold(Z, 5.0001).tolist() == [0, 0, 0, 0, 1]
    assert cut_by_threshold(Z, 0.5).tolist() == [0, 1, 2, 3, 4]
    # labels follow first appearance, whatever the input order
    Zr = average_linkage(X[::-1], "euclidean")
    assert cut_by_k(Zr, 3).tolist() == [0, 1, 1, 2, 2]
    with pytest.raises(ValueError, match="n_clusters"):
        cut_by_k(Z, 6)


def test_average_linkage_equals_scipy():
    X, _ = blobs(seed=1)
    Z = average_linkage(X, "cosine")
    Zs = scipy_linkage(pdist(X, "cosine"), "average")
    assert np.allclose(Z[:, 2], Zs[:, 2], atol=1e-12)
    assert same_partition(cut_by_k(Z, 6), cut_by_k(Zs, 6))


# ------------------------------------------------------------------ agglomerative
@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_agglomerative_equals_sklearn(metric):
    X, _ = blobs(seed=2)
    for k in (2, 6, 17):
        ours = cluster(X, "agglomerative", k, metric=metric)
        ref = AgglomerativeClustering(n_clusters=k, metric=metric, linkage="average").fit_predict(X)
        assert ours.dtype == np.int64 and ours[0] == 0
        assert np.array_equal(ours, relabel_first_seen(ref)), k
    t = 0.35 if metric == "cosine" else 9.0
    ours = cluster(X, "agglomerative", distance_threshold=t, metric=metric)
    ref = AgglomerativeClustering(n_clusters=None, distance_threshold=t, metric=metric,
                                  linkage="average").fit_predict(X)
    assert 1 < ours.max() + 1 < len(X)
    assert same_partition(ours, ref)


def test_agglomerative_precomputed_asymmetric_is_averaged():
    X, _ = blobs(seed=3)
    rng = np.random.default_rng(3)
    D = cosine_distances(X) + rng.uniform(0, 0.2, (len(X), len(X)))  # asymmetric noise
    ours = cluster(D, "agglomerative", 6, metric="precomputed")
    ref = AgglomerativeClustering(6, metric="precomputed", linkage="average").fit_predict((D + D.T) / 2)
    assert same_partition(ours, ref)
    # the averaging matters: sklearn's upper-triangle read of D gives another partition here
    upper = AgglomerativeClustering(6, metric="precomputed", linkage="average").fit_predict(D)
    assert not same_partition(ours, upper)


def test_permutation_invariance_and_determinism():
    X, _ = blobs(seed=4)
    perm = np.random.default_rng(4).permutation(len(X))
    a = cluster(X, "agglomerative", 6)
    b = cluster(X[perm], "agglomerative", 6)
    assert same_partition(a[perm], b)
    assert np.array_equal(a, cluster(X, "agglomerative", 6))


# ------------------------------------------------------------------ manifold weights vs umap
@pytest.mark.parametrize("k", [None, 7, 30])
def test_manifold_weights_equal_umap(k):
    X, _ = blobs(n_per=20, seed=5)
    D = cosine_distances(X)
    n = len(X)
    W, sig, rho = manifold_weights(X, k, return_params=True)
    Wu, sigu, rhou = umap_W(D, n if k is None else k)
    assert W.dtype == np.float32 and np.all(np.diag(W) == 0)
    assert np.allclose(rho, rhou, atol=1e-6)
    assert np.allclose(sig, sigu, rtol=1e-4, atol=1e-7)
    assert np.abs(W - Wu).max() < 1e-4
    if k is not None:  # exactly k − 1 non-self neighbours per row
        assert np.all((W > 0).sum(axis=1) == k - 1)


def test_manifold_weights_duplicates_and_umap_options():
    """Zero distances (duplicates) must not define ρ; local_connectivity/bandwidth as umap."""
    X, _ = blobs(n_per=15, seed=6)
    X = np.concatenate([X, X[:10]])  # 10 exact duplicates
    D = cosine_distances(X)
    np.fill_diagonal(D, 0.0)
    for kw in ({}, {"local_connectivity": 1.5}, {"local_connectivity": 2.0}):
        W, sig, rho = manifold_weights(D, metric="precomputed", return_params=True, **kw)
        Wu, sigu, rhou = umap_W(D, len(X), **kw)
        assert np.all(rho > 0)
        assert np.allclose(rho, rhou, atol=1e-6), kw
        assert np.abs(W - Wu).max() < 1e-4, kw
    # bandwidth only enters the target: sum of weights of each row = log2(k)·bandwidth
    W = manifold_weights(X, bandwidth=1.5)
    assert np.allclose(W.sum(axis=1), np.log2(len(X)) * 1.5, atol=2e-4)


def test_manifold_weights_precomputed_asymmetric_rows():
    X, _ = blobs(n_per=15, seed=7)
    rng = np.random.default_rng(7)
    D = cosine_distances(X) + rng.uniform(0, 0.3, (len(X), len(X)))
    np.fill_diagonal(D, 0.0)
    W = manifold_weights(D, metric="precomputed")
    Wu, _, _ = umap_W(D, len(X))
    assert np.abs(W - Wu).max() < 1e-4
    with pytest.raises(ValueError, match="non-negative"):
        manifold_weights(D - 1.0, metric="precomputed")


# ------------------------------------------------------------------ manifold clustering
def test_manifold_faithful_equals_sklearn_upper_triangle():
    X, _ = blobs(seed=8)
    n = len(X)
    Wu, _, _ = umap_W(cosine_distances(X), n)
    for k_clusters in (3, 6, 12):
        ours = cluster(X, "manifold", k_clusters)
        # what the seed-000 script did: sklearn on the unsymmetrised 1 − W
        ref = AgglomerativeClustering(k_clusters, metric="precomputed", linkage="average").fit_predict(1 - Wu)
        assert same_partition(ours, ref), k_clusters
    W = manifold_weights(X)
    iu = np.triu_indices(n, 1)
    assert np.allclose(condensed_from_weights(W, symmetrize=False), 1.0 - W[iu].astype(np.float64))
    assert not np.allclose(W, W.T, atol=1e-3)  # W really is asymmetric, so the variant matters


def test_manifold_sym_equals_fuzzy_union():
    X, _ = blobs(seed=9)
    n = len(X)
    Ws, _, _ = umap_.fuzzy_simplicial_set(cosine_distances(X), n, 0, "precomputed")  # umap's union
    Ws = Ws.toarray()
    for k_clusters in (4, 6):
        ours = cluster(X, "manifold_sym", k_clusters)
        ref = AgglomerativeClustering(k_clusters, metric="precomputed", linkage="average").fit_predict(1 - Ws)
        assert same_partition(ours, ref)
    # kNN-restricted W (k = 40); a very small k makes 1 − W mostly exact 0s and 1s, whose
    # near-ties let 1e-6 float differences flip merge orders, so it would test tie-breaking
    ours = cluster(X, "manifold_sym", k=40, distance_threshold=0.9)
    Wk = umap_.fuzzy_simplicial_set(cosine_distances(X), 40, 0, "precomputed")[0].toarray()
    ref = AgglomerativeClustering(None, distance_threshold=0.9, metric="precomputed",
                                  linkage="average").fit_predict(1 - Wk)
    assert same_partition(ours, ref)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 301, 1200])
def test_inplace_condensed_and_union(n):
    """The buffer reuse (float32 N×N -> float64 condensed in the same bytes) loses nothing."""
    rng = np.random.default_rng(n)
    W0 = rng.uniform(0, 1, (n, n)).astype(np.float32)
    iu = np.triu_indices(n, 1)
    buf, W = _square_buffer(n)
    W[...] = W0
    cond = _condensed_inplace(buf, W)
    assert n < 2 or np.shares_memory(cond, buf)
    assert np.array_equal(cond, 1.0 - W0[iu].astype(np.float64))
    W = W0.copy()
    fuzzy_union_inplace(W, tile=64)  # several tiles, incl. ragged ones
    assert np.allclose(W, W0 + W0.T - W0 * W0.T, atol=1e-6)


# ------------------------------------------------------------------ affinity propagation
def test_affinity_equals_sklearn_and_ignores_n_clusters():
    X, _ = blobs(seed=10)
    S = cosine_similarity(X)
    for damping in (0.5, 0.9):
        ref = AffinityPropagation(affinity="precomputed", damping=damping, random_state=0).fit_predict(S)
        ours = cluster(X, "affinity", damping=damping, seed=0)
        assert np.array_equal(ours, relabel_first_seen(ref))
    assert np.array_equal(cluster(X, "affinity", 3), cluster(X, "affinity"))  # n_clusters ignored
    pref = cluster(X, "affinity", preference=-5.0)
    assert pref.max() < cluster(X, "affinity").max()  # lower preference -> fewer exemplars
    with pytest.raises(DenseSizeError, match="agglomerative"):
        cluster(X, "affinity", max_n=50)


# ------------------------------------------------------------------ guards and errors
def test_dense_ceiling(monkeypatch):
    X, _ = blobs(n_per=10, seed=11)  # 60 points
    monkeypatch.setenv("EVENTATLAS_MAX_DENSE_N", "59")
    for algorithm in ("manifold", "manifold_sym"):  # k = N manifold has no sparse route: refuse
        with pytest.raises(DenseSizeError, match="EVENTATLAS_MAX_DENSE_N"):
            cluster(X, algorithm, 3)
    # agglomerative above the dense ceiling takes the exact O(N·d) nearest-neighbour-chain path
    # instead of refusing: same partition as the dense path (explicit override of the ceiling)
    dense = cluster(X, "agglomerative", 3, max_n=60)
    assert dense.max() == 2
    assert np.array_equal(cluster(X, "agglomerative", 3), dense)
    monkeypatch.setenv("EVENTATLAS_MAX_AFFINITY_N", "10")
    with pytest.raises(DenseSizeError, match="EVENTATLAS_MAX_AFFINITY_N"):
        cluster(X, "affinity")


def test_bad_inputs():
    X, _ = blobs(n_per=5, seed=12)
    with pytest.raises(ValueError, match="unknown clustering algorithm"):
        cluster(X, "kmeans", 3)
    with pytest.raises(ValueError, match="exactly one"):
        cluster(X, "agglomerative")
    with pytest.raises(ValueError, match="exactly one"):
        cluster(X, "manifold", 3, distance_threshold=0.5)
    with pytest.raises(ValueError, match="n_clusters"):
        cluster(X, "agglomerative", 31)
    with pytest.raises(ValueError, match="k \\(neighbours\\)"):
        cluster(X, "agglomerative", 3, k=5)
    bad = X.copy()
    bad[4, 2] = np.nan
    with pytest.raises(ValueError, match="row 4, column 2"):
        cluster(bad, "agglomerative", 3)
    with pytest.raises(ValueError, match="square"):
        cluster(X, "agglomerative", 3, metric="precomputed")
    with pytest.raises(ValueError, match="empty"):
        cluster(np.zeros((0, 4)), "agglomerative", 1)
    for algorithm in ALGORITHMS:  # a single point is one cluster
        assert cluster(X[:1], algorithm, None if algorithm == "affinity" else 1).tolist() == [0]


# ------------------------------------------------------------------ real data
@pytest.mark.shared_data
def test_real_wikievents_mentions():
    """WikiEvents dev (345 real mentions, 41 types): TF-IDF of trigger + context; every algorithm
    agrees with its reference implementation and beats a shuffled-label baseline."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    path = shared_path("wikievents", "dev.jsonl")
    texts, types = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            toks = doc["tokens"]
            for ev in doc["event_mentions"]:
                s, e = ev["trigger"]["start"], ev["trigger"]["end"]
                trig = " ".join(toks[s:e]).lower()
                ctx = " ".join(toks[max(0, s - 4) : e + 4]).lower()
                texts.append(f"{trig} {trig} {trig} {ctx}")  # weight the trigger
                types.append(ev["event_type"])
    X = TfidfVectorizer(sublinear_tf=True).fit_transform(texts).toarray()
    keep = X.any(axis=1)
    X, y = X[keep], np.asarray(types)[keep]
    n_types = len(set(y))
    assert len(y) > 300 and n_types > 30
    agg = cluster(X, "agglomerative", n_types)
    ref = AgglomerativeClustering(n_types, metric="cosine", linkage="average").fit_predict(X)
    assert same_partition(agg, ref)
    man = cluster(X, "manifold", n_types)
    Wu, _, _ = umap_W(cosine_distances(X), len(X))
    ref = AgglomerativeClustering(n_types, metric="precomputed", linkage="average").fit_predict(1 - Wu)
    assert same_partition(man, ref)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ap = cluster(X, "affinity", damping=0.9)
    rng = np.random.default_rng(0)
    for labels in (agg, man, cluster(X, "manifold_sym", n_types), ap):
        nmi = normalized_mutual_info_score(y, labels)
        chance = max(normalized_mutual_info_score(rng.permutation(y), labels) for _ in range(5))
        assert nmi > chance + 0.1, (nmi, chance)
