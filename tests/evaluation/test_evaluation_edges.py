"""Edges of the evaluation layer (metrics, induction clustering, retrieval): the boundaries and bad inputs
the hand-computed cases of tests/evaluation/test_metrics.py and tests/evaluation/test_evaluation.py do not reach. Every value
is worked out by hand in the comments or taken from an independent implementation (scikit-learn,
scipy); error messages are matched whole, since they are what a user reads."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from eventatlas.cluster import ALGORITHMS
from eventatlas.cluster.guards import DenseBudgetError
from eventatlas.evaluation import RowKey
from eventatlas.evaluation import clustering as C
from eventatlas.evaluation import metrics as M
from eventatlas.evaluation import retrieval as R


def whole(msg: str) -> str:
    """A pattern matching exactly ``msg``."""
    return "^" + re.escape(msg) + "$"


def by_metric(rows):
    return {r["metric"]: r["value"] for r in rows}


# ------------------------------------------------------------------ harmonic means below one
def test_harmonic_means_when_precision_plus_recall_is_at_most_one():
    # gold a a a b b b c c c / pred 0 1 2 0 1 2 0 1 2: every n_ij = 1, |C_j| = |G_i| = 3
    # B³ P = (1/9) Σ_j (1+1+1)/3 = 3/9 = 1/3, R = 1/3, F = 2(1/9)/(2/3) = 1/3
    yt = ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    yp = [0, 1, 2] * 3
    assert M.bcubed(yt, yp) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    # purity = (1+1+1)/9 = 1/3, inverse purity = 1/3 -> purity_f = 1/3
    assert M.purity_f(yt, yp) == pytest.approx(1 / 3)
    s = M.clustering_scores(yt, yp)
    assert (s["bcubed_f"], s["purity_f"]) == pytest.approx((1 / 3, 1 / 3))
    # gold a a b b / pred 0 1 0 1: P = R = (1/4)(2/2 + 2/2) = 1/2, P + R = 1 exactly -> F = 1/2
    assert M.bcubed(["a", "a", "b", "b"], [0, 1, 0, 1]) == pytest.approx((0.5, 0.5, 0.5))
    # one example, predicted {a, b, c} for gold {a, d, e}: overlap 1 -> P = R = F = 1/3 (micro and macro)
    assert M.prf_micro([{"a", "b", "c"}], [{"a", "d", "e"}]) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert M.prf_macro([{"a", "b", "c"}], [{"a", "d", "e"}]) == pytest.approx((1 / 3, 1 / 3, 1 / 3))


def test_prf_macro_with_empty_predictions_or_gold():
    # no example has a prediction: P averages over nothing -> 0; R = (0 + 0)/2 = 0; F = 0 (not 0/0)
    assert M.prf_macro([set(), set()], [{"a"}, {"b"}]) == (0.0, 0.0, 0.0)
    # no example has gold labels: R averages over nothing -> 0; P = (0 + 0)/2 = 0
    assert M.prf_macro([{"a"}, {"b"}], [set(), set()]) == (0.0, 0.0, 0.0)
    # P over the non-empty predictions: (1/1 + 0/1)/2 = 1/2; R over the non-empty gold set: 1/1
    # F = 2(1/2)(1)/(3/2) = 2/3
    assert M.prf_macro([{"a"}, {"b"}], [{"a"}, set()]) == pytest.approx((0.5, 1.0, 2 / 3))
    # micro with nothing predicted and nothing gold: 0/0 shares are 0
    assert M.prf_micro([set()], [set()]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match=whole("multi-label metrics need at least one example, got none")):
        M.prf_macro([], [])


# ------------------------------------------------------------------ ranking edges
def test_rank_inputs():
    # a generator is read once; a float array and an int list give the same numbers
    assert M.hits_at_k((r for r in [1, 2]), 1) == 0.5
    assert M.mrr(np.array([1.0, 4.0])) == pytest.approx((1 + 1 / 4) / 2)
    assert M.mean_rank([2, 4]) == 3.0
    with pytest.raises(ValueError, match=whole("ranks contain NaN; use np.inf for 'not retrieved'")):
        M.mrr([1, np.nan])
    with pytest.raises(ValueError, match=whole("ranks contain NaN; use np.inf for 'not retrieved'")):
        M.mean_rank([1, None])  # a missing rank reads as NaN, not as a type error
    with pytest.raises(ValueError, match=whole("ranks are 1-based, got 0.5")):
        M.mrr([1, 0.5])
    with pytest.raises(ValueError, match=whole("ranks are 1-based, got -inf")):
        M.hits_at_k([2, -np.inf], 1)
    with pytest.raises(ValueError, match=whole("ranks must be whole numbers (or np.inf for 'not retrieved')")):
        M.mrr([1, 2.5])
    with pytest.raises(ValueError, match=whole("ranking metrics need at least one rank, got none")):
        M.mrr([])


@pytest.mark.parametrize("k", [np.inf, np.nan, None, "2", 2.5, 0, -1])
def test_k_must_be_a_positive_integer(k):
    with pytest.raises(ValueError, match=whole(f"k must be a positive integer, got {k!r}")):
        M.hits_at_k([1, 2], k)
    with pytest.raises(ValueError, match=whole(f"k must be a positive integer, got {k!r}")):
        M.precision_at_k([1, 0], k)


def test_k_given_as_a_whole_float():
    # 2.0 is the cut-off 2: P@2 of [1, 0, 1] = 1/2, hits@2 of ranks [1, 3] = 1/2
    assert M.precision_at_k([1, 0, 1], 2.0) == 0.5
    assert M.hits_at_k([1, 3], 2.0) == 0.5
    assert M.recall_at_k(["a", "b", "c"], {"b", "c"}, 2.0) == 0.5


def test_no_relevant_item_exists():
    # R = 0: nothing could be found, AP and R-precision are 0 (explicit n_relevant=0 or an all-0 list)
    assert M.average_precision([0, 0], n_relevant=0) == 0.0
    assert M.r_precision([0, 0], n_relevant=0) == 0.0
    assert M.average_precision([], n_relevant=0) == 0.0
    assert M.r_precision([]) == 0.0
    with pytest.raises(ValueError, match=whole("n_relevant=0 is smaller than the 1 relevant items in the list")):
        M.average_precision([0, 1], n_relevant=0)
    for bad in (-1, np.inf, np.nan, 1.5):
        with pytest.raises(ValueError, match=whole(f"n_relevant must be a non-negative integer, got {bad!r}")):
            M.r_precision([1, 0], n_relevant=bad)
    # n_relevant = 2.0 is R = 2: R-precision of [1, 0, 1] = 1/2, AP = (1/1)/2 = 1/2
    assert M.r_precision([1, 0, 1], n_relevant=2.0) == 0.5
    assert M.average_precision([1, 0, 0], n_relevant=2.0) == 0.5


def test_relevance_flags_inputs():
    # a generator and a bool array read like the list: AP of 0 1 1 = (1/2 + 2/3)/2 = 7/12
    assert M.average_precision(iter([0, 1, 1])) == pytest.approx(7 / 12)
    assert M.average_precision(np.array([False, True, True])) == pytest.approx(7 / 12)
    assert M.average_precision([0.0, 1.0, 1.0]) == pytest.approx(7 / 12)
    assert M.average_precision([0, 1, 1]) == pytest.approx(skm.average_precision_score([0, 1, 1], [3, 2, 1]))
    with pytest.raises(ValueError, match=whole("ranked_relevance must hold 0/1 (or bool) flags")):
        M.average_precision([1, 2])
    with pytest.raises(ValueError, match=whole("ranked_relevance must be 1-D, got shape (1, 2)")):
        M.r_precision([[1, 0]])


def test_map_with_relevant_counts():
    # AP([1, 0], R=2) = (1/1)/2 = 1/2; AP([0, 1], R=1) = (1/2)/1 = 1/2 -> MAP 1/2
    # (without the counts: AP 1 and 1/2 -> MAP 3/4)
    assert M.mean_average_precision([[1, 0], [0, 1]], n_relevant=[2, 1]) == pytest.approx(0.5)
    assert M.mean_average_precision([[1, 0], [0, 1]]) == pytest.approx(0.75)
    with pytest.raises(ValueError, match=whole("2 queries but 1 n_relevant values")):
        M.mean_average_precision([[1, 0], [0, 1]], n_relevant=[2])
    with pytest.raises(ValueError, match=whole("mean_average_precision needs at least one query")):
        M.mean_average_precision(iter([]))


def test_recall_edges():
    # a repeated id counts once: the top 2 of a a b hold {a} -> 1/2 of gold {a, b}
    assert M.recall_at_k(["a", "a", "b"], {"a", "b"}, 2) == 0.5
    # recall@min with k = |gold| = 2 over a generator of gold ids
    assert M.recall_at_min(["b", "x", "a"], (g for g in ["a", "b"])) == 0.5
    for f, args in [(M.recall_at_k, (["a"], [], 1)), (M.recall_at_min, (["a"], set()))]:
        with pytest.raises(ValueError, match=whole("recall needs a non-empty gold set")):
            f(*args)


# ------------------------------------------------------------------ spearman edges
def test_spearman_two_pairs_and_ties():
    # two pairs are the least that defines a correlation: ±1, as scipy says
    assert M.spearman([1, 2], [3, 4]) == pytest.approx(1.0)
    assert M.spearman([1, 2], [4, 3]) == pytest.approx(-1.0)
    x, y = [3, 1, 4, 1, 5], [9, 2, 6, 5, 3]
    assert M.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)
    assert M.spearman(np.array(x), tuple(y)) == pytest.approx(stats.spearmanr(x, y).statistic)


@pytest.mark.parametrize("x,y", [([1, np.nan, 3], [1, 2, 3]), ([1, 2, 3], [1, 2, np.inf]),
                                 ([-np.inf, 2, 3], [1, 2, 3]), ([1, 2, 3], [np.nan] * 3),
                                 ([1, None, 3], [1, 2, 3]), ([1, 2, 3], [None, 2, 3])])
def test_spearman_refuses_nan_and_inf(x, y):
    with pytest.raises(ValueError, match=whole("spearman: inputs contain NaN or inf")):
        M.spearman(x, y)


@pytest.mark.parametrize("x,y", [([1, 2, 3], [5, 5, 5]), ([2, 2], [1, 3]), ([0, 0, 0], [7, 7, 7])])
def test_spearman_refuses_a_constant_input(x, y):
    with pytest.raises(ValueError, match=whole("spearman is undefined when one input is constant")):
        M.spearman(x, y)


def test_spearman_size_errors():
    with pytest.raises(ValueError, match=whole("spearman needs at least 2 pairs, got 1")):
        M.spearman([1], [2])
    with pytest.raises(ValueError, match=whole("spearman needs at least 2 pairs, got 0")):
        M.spearman([], [])
    with pytest.raises(ValueError, match=whole("spearman: x has 2 values but y has 3")):
        M.spearman([1, 2], [1, 2, 3])


# ------------------------------------------------------------------ cluster labels
def test_labels_of_mixed_types_stay_distinct():
    # cluster 1 and cluster "1" are two clusters: gold a b / pred 1 "1" is a perfect clustering
    # (before, both became the string "1": one cluster, purity 1/2)
    assert M.purity(["a", "b"], [1, "1"]) == 1.0
    s = M.clustering_scores(["a", "a", "b"], [1, 1, "1"])
    ref = skm.adjusted_rand_score(["a", "a", "b"], ["int 1", "int 1", "str 1"])
    assert s["n_clusters"] == 2 and s["ari"] == pytest.approx(ref) == 1.0
    # None is a label like any other: gold x x y / pred None None 0 is perfect too
    assert M.clustering_scores(["x", "x", "y"], [None, None, 0])["bcubed_f"] == 1.0


def test_label_arrays():
    # numpy arrays of numbers, strings and objects: the same contingency (rows a/b, cols 0/1)
    # gold a a b / pred 0 1 1 -> a = [1, 1], b = [0, 1]
    for yt, yp in [(["a", "a", "b"], [0, 1, 1]), (np.array(["a", "a", "b"]), np.array([0, 1, 1])),
                   (np.array(["a", "a", "b"], dtype=object), np.array([0.0, 1.0, 1.0]))]:
        c = M.contingency(yt, yp)
        assert c.dtype == np.int64
        assert c.toarray().tolist() == [[1, 1], [0, 1]]
    with pytest.raises(ValueError, match=whole("labels must be 1-D sequences, got shape (1, 2)")):
        M.purity(np.array([[1, 2]]), [1])
    with pytest.raises(ValueError, match=whole("labels must be 1-D sequences of hashable values, got shape (2, 2)")):
        M.purity([0, 1], [[1, 2], [3, 4]])
    with pytest.raises(ValueError, match=whole("labels must be 1-D sequences of hashable values, got shape (1, 2)")):
        M.purity(np.array([[1, 2]], dtype=object), [1])
    with pytest.raises(ValueError, match=whole("clustering metrics need at least one item, got empty y_true/y_pred")):
        M.bcubed(np.array([], dtype=int), [])
    with pytest.raises(ValueError, match=whole("y_true has 2 items but y_pred has 3")):
        M.purity(["a", "b"], np.array([0, 1, 2]))


def test_clustering_scores_against_sklearn_on_a_random_partition():
    rng = np.random.default_rng(3)
    yt, yp = rng.integers(0, 4, 60), rng.integers(0, 6, 60)
    s = M.clustering_scores(yt.tolist(), [f"c{v}" for v in yp])
    assert s["nmi_arithmetic"] == pytest.approx(skm.normalized_mutual_info_score(yt, yp, average_method="arithmetic"))
    assert s["nmi"] == pytest.approx(skm.normalized_mutual_info_score(yt, yp, average_method="geometric"))
    assert s["fmi"] == pytest.approx(skm.fowlkes_mallows_score(yt, yp))
    assert s["v_measure"] == pytest.approx(skm.v_measure_score(yt, yp))
    assert s["n_clusters"] == len(set(yp.tolist()))
    assert s["purity"] == pytest.approx(sum(np.bincount(yt[yp == c]).max() for c in set(yp.tolist())) / 60)
    assert math.isfinite(s["ari"])


# ------------------------------------------------------------------ induction clustering
X6 = np.array([[1, 0.02], [1, -0.02], [1, 0], [0.02, 1], [-0.02, 1], [0, 1]])
Y6 = ["a", "a", "a", "b", "b", "b"]


class Recorder:
    """Stands in for eventatlas.cluster.cluster: records each call, labels 0 1 0 1 ... (int32);
    ``fail`` maps an algorithm to the error it raises."""

    def __init__(self, fail=None):
        self.calls, self.fail = [], fail or {}

    def __call__(self, data, algorithm, n_clusters=None, **kw):
        self.calls.append({"data": np.array(data), "algorithm": algorithm, "n_clusters": n_clusters, **kw})
        if algorithm in self.fail:
            raise self.fail[algorithm]
        return np.arange(len(data), dtype=np.int32) % 2


def test_cluster_partitions_passes_its_settings_to_each_algorithm(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(C, "cluster", rec)
    parts = C.cluster_partitions(X6, 3)
    # defaults: cosine, seed 0, no neighbour count (the algorithm's default N); affinity picks its own k
    assert [(c["algorithm"], c["n_clusters"], c["metric"], c["seed"], c.get("k")) for c in rec.calls] == [
        ("agglomerative", 3, "cosine", 0, None), ("manifold", 3, "cosine", 0, None),
        ("manifold_sym", 3, "cosine", 0, None), ("affinity", None, "cosine", 0, None)]
    assert list(parts) == [(None, a) for a in ALGORITHMS]
    for labels in parts.values():
        assert labels.dtype == np.int64 and labels.tolist() == [0, 1, 0, 1, 0, 1]
    for c in rec.calls:
        np.testing.assert_array_equal(c["data"], X6)
    # k_manifold reaches the manifold algorithms only, capped at N = 6; the seed reaches all
    rec.calls.clear()
    C.cluster_partitions({"v": X6}, 2, algorithms=("agglomerative", "manifold", "manifold_sym"), k_manifold=100,
                         seed=7, metric="euclidean")
    assert [(c["algorithm"], c.get("k"), c["seed"], c["metric"]) for c in rec.calls] == [
        ("agglomerative", None, 7, "euclidean"), ("manifold", 6, 7, "euclidean"), ("manifold_sym", 6, 7, "euclidean")]
    rec.calls.clear()
    C.cluster_partitions(X6, 2, algorithms=("manifold",), k_manifold=4)
    assert rec.calls[0]["k"] == 4


def test_precomputed_distances_are_shifted_for_the_manifold_algorithms_only(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(C, "cluster", rec)
    D = np.array([[0.5, 0.9, 1.5], [0.9, 0.5, 1.2], [1.5, 1.2, 0.5]])
    C.cluster_partitions(D, 2, algorithms=("agglomerative", "manifold"), metric="precomputed")
    for c in rec.calls:  # minimum 0.5 >= 0: nothing to shift
        np.testing.assert_array_equal(c["data"], D)
    rec.calls.clear()
    C.cluster_partitions(D - 1, 2, algorithms=("agglomerative", "manifold"), metric="precomputed")
    np.testing.assert_array_equal(rec.calls[0]["data"], D - 1)  # agglomerative: as given
    np.testing.assert_array_equal(rec.calls[1]["data"], D - 0.5)  # manifold: minus the minimum -0.5


def test_k_manifold_zero_is_refused_not_read_as_the_default():
    # 0 neighbours is no neighbour count; it used to fall back silently to N
    with pytest.raises(ValueError, match=whole("k (n_neighbours, self included) must be an integer >= 2, got 0")):
        C.cluster_partitions(X6, 2, algorithms=("manifold",), k_manifold=0)


def test_a_skipped_algorithm_is_logged_and_the_rest_still_run(monkeypatch, caplog):
    rec = Recorder(fail={"affinity": DenseBudgetError("over the budget")})
    monkeypatch.setattr(C, "cluster", rec)
    skipped = {}
    with caplog.at_level("WARNING", logger=C.log.name):
        parts = C.cluster_partitions({"v": X6}, 2, algorithms=("affinity", "agglomerative"), skipped=skipped)
    assert list(parts) == [("v", "agglomerative")] and skipped == {("v", "affinity"): "over the budget"}
    assert [r.getMessage() for r in caplog.records] == ["clustering v/affinity skipped: over the budget"]
    # skipped=None: nothing recorded, still skipped
    assert list(C.cluster_partitions(X6, 2, algorithms=("affinity", "agglomerative"))) == [(None, "agglomerative")]


def test_clustering_seconds_are_rounded_to_milliseconds(monkeypatch):
    from types import SimpleNamespace

    ticks = iter([100.0, 100.12345, 200.0, 202.5])
    monkeypatch.setattr(C, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    monkeypatch.setattr(C, "cluster", Recorder())
    seconds = {}
    C.cluster_partitions(X6, 2, algorithms=("agglomerative", "manifold"), seconds=seconds)
    assert seconds == {(None, "agglomerative"): 0.123, (None, "manifold"): 2.5}


def test_cluster_and_score_passes_everything_through(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(C, "cluster", rec)
    res = C.cluster_and_score({"v": X6}, Y6, n_clusters=3, algorithms=("agglomerative", "manifold"),
                              metric="euclidean", k_manifold=4,
                              key=RowKey("ds", "me", 5, split="sp", setting="se", representation="re"), only=["purity"])
    assert [(c["n_clusters"], c["metric"], c["seed"], c.get("k")) for c in rec.calls] == [
        (3, "euclidean", 5, None), (3, "euclidean", 5, 4)]
    # labels 0 1 0 1 0 1 against a a a b b b: cluster 0 = {a, a, b}, cluster 1 = {a, b, b} -> purity (2+2)/6
    assert res.rows == [
        {"task": "induction", "dataset": "ds", "split": "sp", "setting": "se", "method": "me",
         "representation": "re", "clustering": a, "variant": "v", "metric": "purity", "value": pytest.approx(2 / 3),
         "seed": 5} for a in ("agglomerative", "manifold")]
    assert set(res.seconds) == set(res.partitions) and res.skipped == {}
    # n_clusters defaults to the number of gold types (2), seed to 0
    rec.calls.clear()
    C.cluster_and_score(X6, Y6, algorithms=("agglomerative",), key=RowKey("d", "m", 0))
    assert (rec.calls[0]["n_clusters"], rec.calls[0]["seed"], rec.calls[0]["metric"]) == (2, 0, "cosine")


def test_clustering_input_errors(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(C, "cluster", rec)
    msg = f"unknown clustering algorithm(s) ['kmeans']; choose from {ALGORITHMS}"
    with pytest.raises(ValueError, match=whole(msg)):
        C.cluster_partitions(X6, 2, algorithms=("agglomerative", "kmeans"))
    assert rec.calls == []  # refused before anything is clustered
    for f in (lambda: C.cluster_partitions({}, 2), lambda: C.cluster_and_score({}, Y6, key=RowKey("d", "m", 0))):
        with pytest.raises(ValueError, match=whole("no clustering inputs")):
            f()
    with pytest.raises(ValueError, match=whole("input 'v' has 6 rows but y_true has 5 labels")):
        C.cluster_and_score({"v": X6}, Y6[:5], key=RowKey("d", "m", 0))


def test_evaluate_partitions_edges():
    kw = {"key": RowKey("ds", "me", 3)}
    assert C.evaluate_partitions({}, Y6, **kw) == []
    for part in ("ab", ("a", "b", "c"), ("a",)):
        with pytest.raises(ValueError, match=whole(f"partition keys are (variant, algorithm) pairs, got {part!r}")):
            C.evaluate_partitions({part: [0] * 6}, Y6, **kw)
    with pytest.raises(ValueError, match=whole("partition ('v', 'a') labels 5 items but y_true has 6")):
        C.evaluate_partitions({("v", "a"): np.zeros(5)}, Y6, **kw)
    # every metric of clustering_scores when `only` is not given; a generator of gold labels is read once
    rows = C.evaluate_partitions({("v", "a"): np.array([0, 0, 0, 1, 1, 1])}, (t for t in Y6), **kw)
    assert {r["metric"] for r in rows} == set(M.clustering_scores(Y6, Y6))
    assert all(r["value"] == 1.0 for r in rows if r["metric"] != "n_clusters")
    assert {(r["dataset"], r["method"], r["seed"], r["split"], r["setting"], r["representation"]) for r in rows} == {
        ("ds", "me", 3, None, None, None)}


# ------------------------------------------------------------------ retrieval
def _ap(order, relevant):
    """Average precision of a ranking (list of ids) by the textbook loop, R = |relevant|."""
    hits, total = 0, 0.0
    for i, item in enumerate(order, start=1):
        if item in relevant:
            hits += 1
            total += hits / i
    return total / len(relevant)


def _stable_order(scores):
    """Ids by descending score, ties by id (Python's sort, independent of numpy's)."""
    return sorted(range(len(scores)), key=lambda j: (-scores[j], j))


def test_rank_batches_by_the_byte_budget():
    rng = np.random.default_rng(1)
    Q, X = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)
    whole_ids = next(R.rank(Q, X))[1]
    # full ranking: 4 items x 24 bytes = 96 bytes a query -> 192 bytes hold 2 queries
    batches = list(R.rank(Q, X, max_batch_bytes=192))
    assert [b[0] for b in batches] == [slice(0, 2), slice(2, 4), slice(4, 5)]
    np.testing.assert_array_equal(np.vstack([b[1] for b in batches]), whole_ids)
    assert [b[0] for b in R.rank(Q, X)] == [slice(0, 5)]
    assert [b[0] for b in R.rank(Q, X, max_batch_bytes=1)] == [slice(i, i + 1) for i in range(5)]
    # top-2: 2 x 12 bytes = 24 bytes a query -> 48 bytes hold 2
    top = list(R.rank(Q, X, k=2, max_batch_bytes=48))
    assert [b[0] for b in top] == [slice(0, 2), slice(2, 4), slice(4, 5)]
    np.testing.assert_array_equal(np.vstack([b[1] for b in top]), whole_ids[:, :2])
    assert [b[0] for b in R.rank(Q, X, k=2)] == [slice(0, 5)]
    # k above N is the full ranking
    np.testing.assert_array_equal(next(R.rank(Q, X, k=10))[1], whole_ids)


def test_score_function_batches_by_the_byte_budget():
    S = np.arange(20, dtype=float).reshape(5, 4)
    calls = []

    def score_fn(idx):
        calls.append(idx.tolist())
        return S[idx]

    # 4 items x 16 bytes = 64 bytes a query -> 128 bytes hold 2
    R.evaluate_scores(score_fn, [[0]] * 5, n_corpus=4, ks=(1,), key=RowKey("d", "m", 0), max_batch_bytes=128)
    assert calls == [[0, 1], [2, 3], [4]]
    calls.clear()
    R.evaluate_scores(score_fn, [[0]] * 5, n_corpus=4, ks=(1,), key=RowKey("d", "m", 0))
    assert calls == [[0, 1, 2, 3, 4]]


def test_top_k_ties_are_ordered_by_corpus_index():
    # x0 = (0, 1), x1 = x2 = x3 = (1, 0), x4 = (-1, 0); faiss returns tied items in no set order
    X = np.array([[0, 1], [1, 0], [1, 0], [1, 0], [-1, 0]], dtype=np.float32)
    # q0 = (1, 0): cosines 0, 1, 1, 1, -1; q1 = (.6, .8): .8, .6, .6, .6, -.6
    Q = np.array([[1, 0], [0.6, 0.8]], dtype=np.float32)
    [(_, ids, scores)] = list(R.rank(Q, X, k=4))
    assert ids.tolist() == [[1, 2, 3, 0], [0, 1, 2, 3]]
    np.testing.assert_allclose(scores, [[1, 1, 1, 0], [0.8, 0.6, 0.6, 0.6]], atol=1e-6)
    # a row that is all ties
    assert next(R.rank(Q[:1], X, k=3))[1].tolist() == [[1, 2, 3]]
    # each row on its own
    assert next(R.rank(Q, X, k=4, max_batch_bytes=1))[1].tolist() == [[1, 2, 3, 0]]


def test_full_ranking_ties_are_ordered_by_corpus_index():
    # 200 items, each (1, 0), (0, 1) or (-1, 0): cosines with the queries are exactly 1, 0 or -1
    rng = np.random.default_rng(2)
    pick = rng.integers(0, 3, 200)
    X = np.array([[1, 0], [0, 1], [-1, 0]], dtype=np.float32)[pick]
    Q = np.array([[1, 0], [0, 1]], dtype=np.float32)
    [(_, ids, _)] = list(R.rank(Q, X))
    for q in range(2):
        assert ids[q].tolist() == _stable_order((X @ Q[q]).tolist())
    # the same through a score matrix: the AP of the ranking with ties by index, relevant = odd ids
    S = (X @ Q.T).T.astype(np.float64)
    relevant = [list(range(1, 200, 2))] * 2
    per = []
    R.evaluate_scores(S, relevant, ks=(1,), key=RowKey("d", "m", 0), per_query=per)
    for q in range(2):
        assert per[q]["map"] == pytest.approx(_ap(_stable_order(S[q].tolist()), set(relevant[q])))


def test_rank_raw_dot_products():
    # normalize=False: raw dots. q0 = (1, 2): 1, 2, 6 -> 2 1 0; q1 = (3, -1): 3, -1, 4 -> 2 0 1
    Q, X = [[1, 2], [3, -1]], [[1, 0], [0, 1], [2, 2]]
    [(sl, ids, scores)] = list(R.rank(Q, X, normalize=False))
    assert sl == slice(0, 2) and ids.tolist() == [[2, 1, 0], [2, 0, 1]]
    assert scores.dtype == np.float32 and scores.tolist() == [[6, 2, 1], [4, 3, -1]]
    [(_, ids, scores)] = list(R.rank(Q, X, k=1, normalize=False))
    assert ids.tolist() == [[2], [2]] and scores.tolist() == [[6], [4]]
    with pytest.raises(ValueError, match=whole("normalize=False takes (Q, d) queries and an (N, d) corpus, "
                                               "got (2,) and (3, 2)")):
        next(R.rank([1, 2], X, normalize=False))
    with pytest.raises(ValueError, match=whole("normalize=False takes (Q, d) queries and an (N, d) corpus, "
                                               "got (2, 2) and (2,)")):
        next(R.rank(Q, [1, 2], normalize=False))
    with pytest.raises(ValueError, match=whole("queries have dimension 2 but the corpus has 3")):
        next(R.rank(Q, np.ones((2, 3)), normalize=False))


def test_query_vectors_edges():
    # one query (3, 4) -> (.6, .8); a 2-shot query (1, 0), (0, 1) -> their mean (.5, .5)
    got = R.query_vectors([[3, 4], [[1, 0], [0, 1]]])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [[0.6, 0.8], [0.5, 0.5]], atol=1e-7)
    np.testing.assert_allclose(R.query_vectors(np.array([[[1, 0], [0, 2]]])), [[0.5, 0.5]], atol=1e-7)
    cases = [
        (np.zeros((2, 0, 3)), "queries have zero shot vectors each"),
        ([], "no queries"),
        ([np.ones((1, 2)), np.zeros((0, 2))], "query 1 must be a (d,) vector or a non-empty (S, d) array of shots, "
                                              "got shape (0, 2)"),
        ([np.ones(2), np.ones((1, 1, 2))], "query 1 must be a (d,) vector or a non-empty (S, d) array of shots, "
                                           "got shape (1, 1, 2)"),
        ([np.ones(2), np.ones(3)], "queries have different dimensions: [2, 3]"),
        (np.array([[1, 0], [0, 0]]), "queries row 1 is all zeros: its cosine is undefined"),
        (np.array([[[1, 0], [0, 0]]]), "query shot vectors row 1 is all zeros: its cosine is undefined"),
        ([np.array([[1, 0], [0, 0]])], "query shot vectors row 1 is all zeros: its cosine is undefined"),
    ]
    for queries, msg in cases:
        with pytest.raises(ValueError, match=whole(msg)):
            R.query_vectors(queries)
    with pytest.raises(ValueError, match=whole("corpus row 0 is all zeros: its cosine is undefined")):
        next(R.rank([[1, 0]], np.zeros((2, 2))))


def test_relevance_from_labels_with_longer_and_non_string_labels():
    # labels are whole values, not strings to split: "AB" is one label, 7 another
    rel = R.relevance_from_labels(["AB", 7, "Z"], ["AB", 7, "A", ("AB", 7), frozenset({7})])
    assert [r.tolist() for r in rel] == [[0, 3], [1, 3, 4], []]
    assert all(r.dtype == np.int64 for r in rel)


def _ranking(ids, start=0):
    ids = np.atleast_2d(np.asarray(ids))
    return [(slice(start, start + ids.shape[0]), ids, None)]


def test_retrieval_scores_edges():
    # a ranking cut at 2 of 4 items (3, 0) with relevant {0, 2}: item 2 is missed, so R stays 2:
    # AP = (1/2)/2 = 1/4; R-precision = |{3, 0} ∩ {0, 2}|/2 = 1/2; P@1 = 0, P@2 = 1/2;
    # P@3 = 1/3 (padded); recall@1 = 0, recall@2 = recall@3 = 1/2
    got = R.retrieval_scores(_ranking([[3, 0]]), [{0, 2}], 4, ks=(3, 1, 2, 1))
    assert list(got) == ["map", "r_precision", "p@1", "p@2", "p@3", "recall@1", "recall@2", "recall@3"]
    assert got == pytest.approx({"map": 1 / 4, "r_precision": 1 / 2, "p@1": 0, "p@2": 1 / 2, "p@3": 1 / 3,
                                 "recall@1": 0, "recall@2": 1 / 2, "recall@3": 1 / 2})
    # relevance and exclusions as lists, sets or arrays; excluding item 3 leaves ranking 0 1 2, relevant {0, 2}:
    # AP = (1 + 2/3)/2 = 5/6
    for rel, ex in [([[0, 2]], [[3]]), ([{0, 2}], [{3}]), ([np.array([2, 0, 2])], [np.array([3])])]:
        got = R.retrieval_scores(_ranking([[3, 0, 1, 2]]), rel, 4, ks=(1,), exclude=ex)
        assert got["map"] == pytest.approx(5 / 6) and got["p@1"] == 1.0
    cases = [
        ((_ranking([[0]]), [], 1), {}, "no queries: the relevance list is empty"),
        ((_ranking([[0]]), [[0]], 1), {"ks": ()}, "ks is empty: give at least one cut-off"),
        ((_ranking([[0], [0]]), [[0], [0]], 1), {"exclude": [[]]}, "2 queries but 1 exclude sets"),
        ((_ranking([[0], [0], [0]]), [[0], [0]], 1), {}, "ranking has query 2 but relevance covers 2 queries"),
        ((_ranking([[0]]), [[0], [0]], 1), {}, "ranking covers 1 of 2 queries"),
        ((_ranking([[0, 1]]), [[-1, 1]], 2), {}, "query 0: relevant index out of range [0, 2)"),
        ((_ranking([[0, 1, 2]]), [[0, 1, 9]], 3), {}, "query 0: relevant index out of range [0, 3)"),
        ((_ranking([[0, 1]]), [[2]], 2), {}, "query 0: relevant index out of range [0, 2)"),
        ((_ranking([[0, 1]]), [[1]], 2), {"exclude": [{1}]},
         "query 0 has no relevant corpus item (after exclusions): its scores are undefined"),
    ]
    for args, kw, msg in cases:
        with pytest.raises(ValueError, match=whole(msg)):
            R.retrieval_scores(*args, **kw)


def test_evaluate_scores_inputs():
    kw = {"key": RowKey("d", "m", 0), "ks": (1,)}
    # 0/1 scores (a yes/no scorer): ranking 0 2 1 (ties by index), relevant {0} -> AP 1
    assert by_metric(R.evaluate_scores(np.array([[True, False, True]]), [[0]], **kw))["map"] == 1.0
    # a corpus of one item
    assert by_metric(R.evaluate_scores(np.array([[0.3], [0.1]]), [[0], [0]], **kw))["map"] == 1.0
    assert by_metric(R.evaluate_scores(np.array([[0.3], [0.1]]), [[0], [0]], n_corpus=1, **kw))["map"] == 1.0
    assert by_metric(R.evaluate_scores(lambda idx: np.ones((len(idx), 1)), [[0]], n_corpus=1, **kw))["map"] == 1.0
    cases = [
        ((np.ones(2), [[0], [0]]), {}, "scores must be a (2, N) array with N >= 1, got shape (2,)"),
        ((np.ones((3, 5)), [[0], [0]]), {}, "scores must be a (2, N) array with N >= 1, got shape (3, 5)"),
        ((np.ones((2, 0)), [[0], [0]]), {}, "scores must be a (2, N) array with N >= 1, got shape (2, 0)"),
        ((np.ones((2, 5)), [[0], [0]]), {"n_corpus": 4}, "n_corpus=4 but scores have 5 columns"),
        ((lambda idx: None, [[0]]), {}, "a score function needs n_corpus (a positive corpus size), got None"),
        ((lambda idx: None, [[0]]), {"n_corpus": 0}, "a score function needs n_corpus (a positive corpus size), got 0"),
    ]
    for args, extra, msg in cases:
        with pytest.raises(ValueError, match=whole(msg)):
            R.evaluate_scores(*args, **extra, **kw)
    # a score function that goes wrong in the second batch (queries 2..2; 4 x 16 bytes a query, 128 = 2 a batch)
    wrong_shape = lambda idx: np.ones((len(idx), 4 if idx[0] == 0 else 3))  # noqa: E731
    with pytest.raises(ValueError, match=whole("scores for queries 2..2 have shape (1, 3), expected (1, 4)")):
        R.evaluate_scores(wrong_shape, [[0]] * 3, n_corpus=4, max_batch_bytes=128, **kw)
    nan_later = lambda idx: np.full((len(idx), 4), np.nan if idx[0] else 1.0)  # noqa: E731
    with pytest.raises(ValueError, match=whole("scores for queries 2..2 contain NaN or inf")):
        R.evaluate_scores(nan_later, [[0]] * 3, n_corpus=4, max_batch_bytes=128, **kw)


def test_evaluators_pass_their_options_through(monkeypatch):
    row = {"task": "retrieval", "dataset": "ds", "split": "sp", "setting": "se", "method": "me",
           "representation": "re", "clustering": None, "variant": "va", "seed": 4}
    names = {"key": RowKey("ds", "me", 4, split="sp", setting="se", representation="re", variant="va")}
    # scores 1 0 2 for one query: ranking 2 0 1; excluding item 2 leaves 0 1, relevant {0, 2} -> {0}: AP 1
    per = []
    rows = R.evaluate_scores(np.array([[1.0, 0.0, 2.0]]), [[0, 2]], ks=(1,), exclude=[{2}], per_query=per, **names)
    assert rows == [{**row, "metric": m, "value": 1.0} for m in ("map", "r_precision", "p@1", "recall@1")]
    assert per == [{"query": 0, "map": 1.0, "r_precision": 1.0, "p@1": 1.0, "recall@1": 1.0}]
    seen = []
    real_rank = R.rank

    def spy(*a, **k):
        seen.append(k.get("max_batch_bytes"))
        return real_rank(*a, **k)

    monkeypatch.setattr(R, "rank", spy)
    rows = R.evaluate_retrieval([[1, 0]], [[1, 0], [0, 1]], [[0]], ks=(1,), max_batch_bytes=1234, **names)
    assert seen == [1234]
    assert rows == [{**row, "metric": m, "value": 1.0} for m in ("map", "r_precision", "p@1", "recall@1")]
