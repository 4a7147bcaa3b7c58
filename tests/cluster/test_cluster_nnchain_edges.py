"""Edges of the exact average linkage (eventatlas/cluster/nnchain.py): too few points, bad sizes and rows,
the caller's array, hand-computed merges and cuts, and where the dispatcher switches to this path."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from scipy.cluster.hierarchy import linkage

from eventatlas.cluster import dense
from eventatlas.cluster import nnchain as nc

# x0 = (1, 0), x1 = (0, 1), x2 = (1, 1)/√2: cosine distances d01 = 1, d02 = d12 = 1 - 1/√2 ≈ 0.2929.
# x2 is equally near x0 and x1: the lowest index wins, so (0, 2) merge first at 1 - 1/√2; then
# d({0, 2}, 1) = (d01 + d21)/2 = (1 + 1 - 1/√2)/2 = 1 - 1/(2√2) ≈ 0.6464, a cluster of 3.
THREE = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
H1, H2 = 1 - 1 / math.sqrt(2), 1 - 1 / (2 * math.sqrt(2))
Z_THREE = np.array([[0, 2, H1, 2], [1, 3, H2, 3]])


def whole(msg: str) -> str:
    """A pattern matching exactly ``msg``."""
    return "^" + re.escape(msg) + "$"


def test_three_points_by_hand():
    Z = nc.average_linkage(THREE, device="cpu")
    np.testing.assert_allclose(Z, Z_THREE, atol=1e-12)
    # rows given as cluster sums with sizes: {x0, x2} as one cluster of 2 against x1 merge at H2
    unit = THREE / np.linalg.norm(THREE, axis=1, keepdims=True)
    Zs = nc.average_linkage(np.stack([unit[0] + unit[2], unit[1]]), sizes=np.array([2, 1]), device="cpu")
    np.testing.assert_allclose(Zs, [[0, 1, H2, 3]], atol=1e-12)
    # normalize=False on unit rows is the same linkage; scipy agrees
    np.testing.assert_allclose(nc.average_linkage(unit, normalize=False, device="cpu"), Z_THREE, atol=1e-12)
    np.testing.assert_allclose(linkage(THREE, "average", metric="cosine"), Z_THREE, atol=1e-12)


def test_raw_rows_are_used_as_given():
    # normalize=False: distance 1 - x·y of the rows as they are. x0 = (.5, 0), x1 = (0, .5), x2 = (0, .8):
    # d01 = d02 = 1 - 0 = 1, d12 = 1 - .4 = .6 -> (1, 2) merge at .6; d(0, {1, 2}) = 1 - (0 + 0)/2 = 1
    X = np.array([[0.5, 0], [0, 0.5], [0, 0.8]])
    np.testing.assert_allclose(nc.average_linkage(X, normalize=False, device="cpu"),
                               [[1, 2, 0.6, 2], [0, 3, 1, 3]], atol=1e-12)
    # normalised, x1 and x2 are the same direction: (1, 2) merge at 0
    np.testing.assert_allclose(nc.average_linkage(X, device="cpu"), [[1, 2, 0, 2], [0, 3, 1, 3]], atol=1e-12)


def test_more_candidates_than_clusters_and_one_candidate():
    # 5 points: the candidate list (K >= 2) is longer than the clusters left after a few merges
    X = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0, 0.8, 0.3], [0.2, 0.2, 1]], dtype=np.float64)
    ref = linkage(X, "average", metric="cosine")
    for k in (1, 2, 16):
        Z = nc.average_linkage(X, n_candidates=k, device="cpu", block_bytes=64)
        np.testing.assert_allclose(Z, ref, atol=1e-12)


def test_too_few_points():
    for X, kw in [(np.ones((1, 3)), {}), (np.ones((1, 3)), {"sizes": np.array([4])}), (np.ones((0, 3)), {}),
                  (np.ones((1, 3)), {"normalize": False})]:
        with pytest.raises(ValueError, match=whole(f"need at least 2 points for a linkage, got {X.shape[0]}")):
            nc.average_linkage(X, **kw)


@pytest.mark.parametrize("sizes", [[1, np.nan, 1], [1, 0, 1], [1, 1], [1, -2, 1], [1, 0.5, 1]])
def test_sizes_must_be_positive_counts(sizes):
    msg = f"sizes must be (3,) positive counts, got shape {np.shape(sizes)}"
    with pytest.raises(ValueError, match=whole(msg)):
        nc.average_linkage(THREE, sizes=np.array(sizes, dtype=float))


@pytest.mark.parametrize("kw", [{"sizes": np.ones(3)}, {"normalize": False}, {}])
def test_non_finite_rows_are_refused_on_every_path(kw):
    X = THREE.copy()
    X[1, 0] = np.inf
    with pytest.raises(ValueError, match=whole("embedding row 1 has a non-finite value")):
        nc.average_linkage(X, **kw)
    with pytest.raises(ValueError, match=whole("expected a 2-D array of embeddings, got shape (3,)")):
        nc.average_linkage(np.ones(3), **kw)


def test_the_callers_array_is_not_changed():
    unit = THREE / np.linalg.norm(THREE, axis=1, keepdims=True)
    for kw in ({"normalize": False}, {}, {"sizes": np.ones(3)}):
        X = unit.copy()
        nc.average_linkage(X, device="cpu", **kw)
        np.testing.assert_array_equal(X, unit)


def test_near_ties_below_float32_resolution_are_resolved_exactly():
    # 9 points on an arc, gaps of 1e-4 .. 5.2e-4 rad: cosine distances of 5e-9 .. 1e-6, below what the
    # float32 candidate search can order, so with 2 candidates a cluster the full-row re-check in float64
    # has to find the true neighbour; scipy (float64 throughout) gives the reference tree
    gaps = np.array([1.0, 1.3, 1.7, 2.2, 2.9, 3.1, 4.3, 5.2]) * 1e-4
    th = np.concatenate([[0], np.cumsum(gaps)])
    X = np.stack([np.cos(th), np.sin(th), np.zeros_like(th)], 1)
    Z, ref = nc.average_linkage(X, n_candidates=2, device="cpu"), linkage(X, "average", metric="cosine")
    np.testing.assert_array_equal(Z[:, [0, 1, 3]], ref[:, [0, 1, 3]])
    np.testing.assert_allclose(Z[:, 2], ref[:, 2], rtol=0, atol=1e-15)
    assert Z[0, 2] == pytest.approx(1 - math.cos(1e-4), rel=1e-6)  # the closest pair, 1e-4 rad apart


@pytest.fixture
def private_tqdm(monkeypatch):
    """tqdm with a thread lock and no monitor thread: its default lock is a process-shared semaphore, which
    a forked test process killed while holding it (as a mutation-testing run does) leaves locked for the rest."""
    import threading

    from tqdm import tqdm

    monkeypatch.setattr(tqdm, "_lock", threading.RLock(), raising=False)
    monkeypatch.setattr(tqdm, "monitor_interval", 0)


def test_progress_bar_and_log_line(capsys, caplog, private_tqdm):
    with caplog.at_level("INFO", logger=nc.log.name):
        nc.average_linkage(THREE, device="cpu")
    assert capsys.readouterr().err == ""  # no bar unless asked for
    # THREE: merge step 1 merges (0, 2); x1's neighbour and the new cluster's are both found in the cached
    # candidate lists (2 hits, no row search); merge step 2 merges the last pair
    [msg] = [r.getMessage() for r in caplog.records]
    m = re.fullmatch(r"average linkage n=3: 2 rounds, 0 row searches, 2 cached-list hits, 0 fallbacks, "
                     r"(\d+\.\d\d)s", msg)
    assert m and float(m.group(1)) < 60, msg
    # points at 0°, 10°, 25° and 60° on a circle (cosine distance 1 - cos of the angle between):
    # merge step 1 merges x0, x1 (10°); x2's neighbour was x1, so it is looked up again (.064 to {0, 1} against
    # .181 to x3) and so is the new cluster: 2 hits. Merge step 2 merges {0, 1} with x2; x3's neighbour was x2:
    # 2 more hits. Merge step 3 merges the last two.
    caplog.clear()
    deg = np.radians([0, 10, 25, 60])
    with caplog.at_level("INFO", logger=nc.log.name):
        Z = nc.average_linkage(np.stack([np.cos(deg), np.sin(deg)], 1), device="cpu")
    np.testing.assert_array_equal(Z[:, :2], [[0, 1], [2, 4], [3, 5]])
    [msg] = [r.getMessage() for r in caplog.records]
    assert re.fullmatch(r"average linkage n=4: 3 rounds, 0 row searches, 4 cached-list hits, 0 fallbacks, "
                        r"\d+\.\d\ds", msg), msg
    # the same with 2 candidates a point, so each list leaves one point out, with a bound on it (the 2nd
    # candidate's distance - eps): x0 lists x1, x2 (bound d02 - eps), x1 lists x0, x2 (bound d12 - eps). After
    # merge step 1 x2 is answered from its list (.064 < d02 - eps = .094 - eps), but the new cluster's best, .064 =
    # (d02 + d12)/2, is not below the mean of its parts' bounds, (d02 + d12)/2 - eps: one row search. Merge step 2:
    # x3's best over its list, d(3, {0, 1, 2}) = (.5 + .357 + .181)/3 = .346, is below its bound .357 - eps,
    # and the new cluster lists every cluster left: 2 hits.
    caplog.clear()
    with caplog.at_level("INFO", logger=nc.log.name):
        Z = nc.average_linkage(np.stack([np.cos(deg), np.sin(deg)], 1), n_candidates=2, device="cpu")
    d = lambda a: 1 - math.cos(math.radians(a))  # noqa: E731
    np.testing.assert_allclose(Z[:, 2], [d(10), (d(25) + d(15)) / 2, (d(60) + d(50) + d(35)) / 3], rtol=0, atol=1e-12)
    [msg] = [r.getMessage() for r in caplog.records]
    assert re.fullmatch(r"average linkage n=4: 3 rounds, 1 row searches, 3 cached-list hits, 0 fallbacks, "
                        r"\d+\.\d\ds", msg), msg
    # near ties with 2 candidates a cluster: some neighbours need a search of the whole row
    caplog.clear()
    with caplog.at_level("INFO", logger=nc.log.name):
        nc.average_linkage(_random_case(2, True), n_candidates=2, device="cpu")
    [msg] = [r.getMessage() for r in caplog.records]
    assert re.fullmatch(r"average linkage n=\d+: [1-9]\d* rounds, [1-9]\d* row searches, \d+ cached-list hits, "
                        r"0 fallbacks, \d+\.\d\ds", msg), msg
    # two far-apart pairs merge in one round, then the last merge: the bar counts merges, 2 then 1
    X = np.array([[1, 0, 0], [1, 0.1, 0], [0, 0, 1], [0, 0.1, 1]])
    nc.average_linkage(X, progress=True, device="cpu")
    err = capsys.readouterr().err
    assert re.search(r"(^|\r)average linkage \(exact\): ", err) and "3/3" in err and "merge/s" in err


def test_most_neighbours_come_from_the_cached_lists(caplog):
    # the point of the candidate lists and their bounds: far fewer full-row searches than cached answers
    rng = np.random.default_rng(9)
    X = rng.normal(size=(8, 16))[rng.integers(0, 8, 400)] + 0.9 * rng.normal(size=(400, 16))
    with caplog.at_level("INFO", logger=nc.log.name):
        nc.average_linkage(X, device="cpu")
    [msg] = [r.getMessage() for r in caplog.records]
    searches, hits = (int(v) for v in re.search(r"(\d+) row searches, (\d+) cached-list hits", msg).groups())
    assert hits > 4 * searches, msg


def test_small_candidate_lists_match_scipy():
    # 2 or 3 candidates a cluster: most neighbours are found by the cached lists and their bounds
    rng = np.random.default_rng(6)
    C = rng.normal(size=(5, 8))
    X = C[rng.integers(0, 5, 120)] + 0.8 * rng.normal(size=(120, 8))
    ref = linkage(X, "average", metric="cosine")
    for k in (2, 3):
        Z = nc.average_linkage(X, n_candidates=k, device="cpu")
        np.testing.assert_array_equal(Z[:, [0, 1, 3]], ref[:, [0, 1, 3]])
        np.testing.assert_allclose(Z[:, 2], ref[:, 2], rtol=0, atol=1e-12)


def _random_case(seed, near_ties):
    """Random points: blobs around 3 centres, or points on an arc spaced 0.5e-4 .. 3e-4 rad apart."""
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(6, 40)), int(rng.integers(2, 6))
    if near_ties:
        th = np.cumsum(rng.uniform(0.5, 3, n)) * 1e-4
        return np.stack([np.cos(th), np.sin(th)] + [np.zeros(n)] * (d - 2), 1)
    C = rng.normal(size=(3, d))
    return C[rng.integers(0, 3, n)] + 0.5 * rng.normal(size=(n, d))


@pytest.mark.parametrize("seed,near_ties", [(2, True), (164, False)])
def test_cached_bounds_never_hide_a_nearer_cluster(seed, near_ties):
    # with 2 candidates a cluster the bound on unlisted clusters decides most neighbours: these two cases
    # go wrong when the bound is loosened by eps or kept infinite with one cluster unlisted
    X = _random_case(seed, near_ties)
    Z, ref = nc.average_linkage(X, n_candidates=2, device="cpu"), linkage(X, "average", metric="cosine")
    np.testing.assert_array_equal(Z[:, [0, 1, 3]], ref[:, [0, 1, 3]])
    np.testing.assert_allclose(Z[:, 2], ref[:, 2], rtol=0, atol=1e-9)


def test_all_work_stays_on_the_requested_device():
    # torch's default device set elsewhere ("meta": tensors without data) must not pull any of the
    # linkage's tensors off the device it was given
    X = _random_case(164, False)
    near = _random_case(2, True)
    sums, sizes = np.stack([X[:3].sum(0), X[3:5].sum(0), X[5:].sum(0)]), np.array([3, 2, X.shape[0] - 5])
    with torch.device("meta"):
        got = [nc.average_linkage(A, n_candidates=2, device="cpu", **kw)
               for A, kw in [(X, {}), (near, {}), (sums, {"sizes": sizes})]]
    for A, Z in zip((X, near), got):
        np.testing.assert_allclose(Z, nc.average_linkage(A, n_candidates=2, device="cpu"), rtol=0, atol=0)
    np.testing.assert_array_equal(got[2], nc.average_linkage(sums, sizes=sizes, n_candidates=2, device="cpu"))


def _naive_cluster_linkage(sums, sizes):
    """Greedy average linkage of pre-formed clusters (sum vector, size), by brute force: heights and
    merged sizes in merge order."""
    clusters = [(np.asarray(s, dtype=float), float(n)) for s, n in zip(sums, sizes)]
    out = []
    while len(clusters) > 1:
        d, i, j = min((1 - a[0] @ b[0] / (a[1] * b[1]), i, j) for i, a in enumerate(clusters)
                      for j, b in enumerate(clusters) if i < j)
        merged = (clusters[i][0] + clusters[j][0], clusters[i][1] + clusters[j][1])
        clusters = [c for k, c in enumerate(clusters) if k not in (i, j)] + [merged]
        out.append((d, merged[1]))
    return np.array(out)


def test_clusters_of_unequal_size_match_brute_force():
    # 14 clusters of 1 to 9 unit vectors each (row = their sum), 2 candidates a cluster
    rng = np.random.default_rng(8)
    centres = rng.normal(size=(4, 6))
    sizes = rng.integers(1, 10, 14)
    sums = []
    for n in sizes:
        pts = centres[rng.integers(0, 4)] + 0.7 * rng.normal(size=(n, 6))
        sums.append((pts / np.linalg.norm(pts, axis=1, keepdims=True)).sum(0))
    Z = nc.average_linkage(np.array(sums), sizes=sizes, n_candidates=2, device="cpu")
    ref = _naive_cluster_linkage(sums, sizes)
    np.testing.assert_allclose(Z[:, 2], ref[:, 0], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(Z[:, 3], ref[:, 1])


def test_threads_section_restores_the_thread_count():
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with nc._threads(torch.device("cpu"), 1):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with nc._threads(torch.device("cpu"), 2):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 2
        torch.set_num_threads(1)
        with nc._threads(torch.device("cpu"), 2):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 1
        with nc._threads(torch.device("meta"), 2):  # not a CPU: left alone
            assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(old)


def test_default_device_and_an_explicit_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert nc.default_device() == torch.device("cuda")
    # an explicit device wins over the default (this machine need not have the CUDA it reports)
    np.testing.assert_allclose(nc.average_linkage(THREE, device="cpu"), Z_THREE, atol=1e-12)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert nc.default_device() == torch.device("cpu")


def test_bookkeeping_runs_on_one_thread(monkeypatch):
    # the per-round bookkeeping runs single-threaded; the block products get the caller's thread count
    seen = []

    def spy(Xd, sizes, n, dev, block_bytes, progress, n_candidates, n_threads, t0):
        seen.append((torch.get_num_threads(), n_threads))
        return np.zeros((n - 1, 4))

    old = torch.get_num_threads()
    monkeypatch.setattr(nc, "_average_linkage", spy)
    try:
        torch.set_num_threads(2)
        nc.average_linkage(THREE, device="cpu")
        assert seen == [(1, 2)] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(old)


def test_label_linkage_leaves_its_input_alone_and_returns_doubles():
    merges = np.array([[1, 0, 0.1, 2], [2, 1, 0.3, 3]])
    nc.label_linkage(merges, 3)
    np.testing.assert_array_equal(merges, [[1, 0, 0.1, 2], [2, 1, 0.3, 3]])
    # SciPy's linkage functions take float64 only
    assert nc.label_linkage(merges.astype(np.float32), 3).dtype == np.float64


def test_label_linkage_refuses_a_merge_inside_one_cluster():
    # points 0 and 1 merged, then 1 and 0 again: no longer two clusters
    with pytest.raises(ValueError, match=whole("linkage row 1: both sides already in one cluster (invalid merge sequence)")):
        nc.label_linkage(np.array([[0, 1, 0.1, 2], [1, 0, 0.2, 2]]), 3)
    # representatives become SciPy ids: the second merge joins point 2 with cluster 3 (the first merge)
    Z = nc.label_linkage(np.array([[1, 0, 0.1, 2], [2, 1, 0.3, 3]]), 3)
    np.testing.assert_array_equal(Z, [[0, 1, 0.1, 2], [2, 3, 0.3, 3]])
    # a representative two union-find hops from its root: (0, 1) -> 4, (2, 1) -> 5 (2 becomes the root
    # above 0), then (3, 1) finds 1 -> 0 -> 2, i.e. cluster 5
    Z = nc.label_linkage(np.array([[0, 1, 0.1, 2], [2, 1, 0.2, 3], [3, 1, 0.3, 4]]), 4)
    np.testing.assert_array_equal(Z, [[0, 1, 0.1, 2], [2, 4, 0.2, 3], [3, 5, 0.3, 4]])


def test_cut_by_hand():
    # Z_THREE: merges (0, 2) at H1 and (1, {0, 2}) at H2
    assert nc.cut(Z_THREE, n_clusters=3).tolist() == [0, 1, 2]
    assert nc.cut(Z_THREE, n_clusters=2).tolist() == [0, 1, 0]
    assert nc.cut(Z_THREE, n_clusters=1).tolist() == [0, 0, 0]
    # a merge applies when its height is strictly below the threshold
    assert nc.cut(Z_THREE, distance_threshold=H1).tolist() == [0, 1, 2]
    assert nc.cut(Z_THREE, distance_threshold=H1 + 1e-9).tolist() == [0, 1, 0]
    assert nc.cut(Z_THREE, distance_threshold=H2 + 1e-9).tolist() == [0, 0, 0]
    for bad in (0, 4):
        with pytest.raises(ValueError, match=whole(f"n_clusters={bad} must be in [1, 3]")):
            nc.cut(Z_THREE, n_clusters=bad)
    for kw in ({}, {"n_clusters": 2, "distance_threshold": 0.5}):
        with pytest.raises(ValueError, match=whole("give exactly one of n_clusters or distance_threshold")):
            nc.cut(Z_THREE, **kw)


# ------------------------------------------------------------------ where the dispatcher switches
def _points(n):
    rng = np.random.default_rng(4)
    return rng.normal(size=(n, 5))


def test_scalable_min_n_from_the_environment(monkeypatch):
    monkeypatch.delenv(nc.SCALABLE_MIN_N_ENV, raising=False)
    assert nc.scalable_min_n() == 20_000
    monkeypatch.setenv(nc.SCALABLE_MIN_N_ENV, "  ")
    assert nc.scalable_min_n() == 20_000
    monkeypatch.setenv(nc.SCALABLE_MIN_N_ENV, " 25 ")
    assert nc.scalable_min_n() == 25
    monkeypatch.setenv(nc.SCALABLE_MIN_N_ENV, "many")
    with pytest.raises(ValueError, match=whole("EVENTATLAS_SCALABLE_MIN_N='many' is not an integer")):
        nc.scalable_min_n()


def test_exact_path_only_strictly_above_the_thresholds(monkeypatch):
    X = _points(30)
    ref = dense.agglomerative(X, 3)
    monkeypatch.delenv(dense.MAX_DENSE_N_ENV, raising=False)
    monkeypatch.setenv(nc.SCALABLE_MIN_N_ENV, "30")  # N = 30 is not above 30: the dense path
    assert nc.maybe_agglomerative(X, 3) is None
    monkeypatch.setenv(nc.SCALABLE_MIN_N_ENV, "29")
    np.testing.assert_array_equal(nc.maybe_agglomerative(X, 3), ref)
    monkeypatch.setenv(nc.SCALABLE_MIN_N_ENV, "1000")
    monkeypatch.setenv(dense.MAX_DENSE_N_ENV, "30")  # the dense ceiling: same rule
    assert nc.maybe_agglomerative(X, 3) is None
    monkeypatch.setenv(dense.MAX_DENSE_N_ENV, "29")
    np.testing.assert_array_equal(nc.maybe_agglomerative(X, 3), ref)
    monkeypatch.delenv(dense.MAX_DENSE_N_ENV)
    np.testing.assert_array_equal(nc.maybe_agglomerative(X, 3, max_n=29), ref)  # max_n is that ceiling
    assert nc.maybe_agglomerative(X, 3, max_n=30) is None
    t = 0.9
    np.testing.assert_array_equal(nc.maybe_agglomerative(X, distance_threshold=t, max_n=29),
                                  dense.agglomerative(X, distance_threshold=t))


def test_exact_path_applies_to_cosine_only_and_checks_its_arguments(monkeypatch):
    X = _points(30)
    monkeypatch.setenv(nc.SCALABLE_MIN_N_ENV, "10")
    assert nc.maybe_agglomerative(X, 3, metric="euclidean") is None
    assert nc.maybe_agglomerative(X, 3, linkage="single") is None  # an option only the dense path has
    assert nc.maybe_agglomerative(X[:1], 1) is None  # one point: nothing to link
    both = "agglomerative: give exactly one of n_clusters or distance_threshold"
    for kw, msg in [({}, both), ({"n_clusters": 3, "distance_threshold": 0.5}, both),
                    ({"n_clusters": 0}, "n_clusters must be in [1, N=30], got 0"),
                    ({"n_clusters": 31}, "n_clusters must be in [1, N=30], got 31")]:
        with pytest.raises(ValueError, match=whole(msg)):
            nc.maybe_agglomerative(X, **kw)
    assert nc.maybe_agglomerative(X, 30).tolist() == list(range(30))
    assert nc.maybe_agglomerative(X, 1).tolist() == [0] * 30
    # two points above the threshold: linked, not handed to the dense path
    monkeypatch.setenv(nc.SCALABLE_MIN_N_ENV, "1")
    assert nc.maybe_agglomerative(X[:2], 2).tolist() == [0, 1]


def test_progress_bar_from_50000_points(monkeypatch):
    seen = []

    def fake_linkage(P, progress=False):  # a chain: point i + 1 joins the cluster of the points before it
        seen.append(progress)
        n = P.shape[0]
        i = np.arange(n - 1)
        return np.stack([np.where(i == 0, 0, n + i - 1), i + 1, i, i + 2], axis=1).astype(float)

    monkeypatch.setattr(nc, "average_linkage", fake_linkage)
    monkeypatch.setenv(nc.SCALABLE_MIN_N_ENV, "10")
    for n in (49_999, 50_000):  # distinct rows (repeated ones collapse before the linkage)
        assert nc.maybe_agglomerative(np.stack([np.arange(n), np.ones(n)], axis=1), 1).tolist() == [0] * n
    assert seen == [False, True]


def test_repeated_rows_collapse_to_weighted_points_with_the_dense_paths_labels(monkeypatch):
    """A corpus that repeats sentences repeats vectors: the scalable path clusters one weighted point per
    distinct row (identical rows merge first at distance 0 in any case) and gives the dense path's labels,
    numbering included; more clusters than distinct rows gives one cluster per distinct row."""
    from eventatlas.cluster import cluster

    rng = np.random.default_rng(0)
    base = rng.normal(size=(40, 6)).astype(np.float32)
    X = base[rng.integers(0, 40, size=300)]
    groups, first, sizes = nc._duplicates(X)
    assert len(sizes) == len(np.unique(X, axis=0)) and sizes.sum() == 300
    assert np.array_equal(X[first][groups], X) and list(first) == sorted(first)  # numbered by first occurrence
    for k in (3, 12, len(sizes)):
        monkeypatch.setenv("EVENTATLAS_SCALABLE_MIN_N", "1000")
        want = cluster(X, "agglomerative", n_clusters=k)
        monkeypatch.setenv("EVENTATLAS_SCALABLE_MIN_N", "10")
        assert np.array_equal(cluster(X, "agglomerative", n_clusters=k), want), k
    got = cluster(X, "agglomerative", n_clusters=len(sizes) + 5)
    assert len(set(got.tolist())) == len(sizes) and np.array_equal(got, cluster(X, "agglomerative",
                                                                             n_clusters=len(sizes)))
    assert (cluster(np.repeat(X[:1], 30, axis=0), "agglomerative", n_clusters=2) == 0).all()
