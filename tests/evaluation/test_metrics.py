"""Metrics against hand-computed cases (arithmetic in the comments) and naive re-implementations."""
from __future__ import annotations

import json
import math
from collections import Counter, defaultdict

import numpy as np
import pytest
from sklearn import metrics as skm

from conftest import shared_path
from eventatlas.evaluation import metrics as M
from eventatlas.metric_specs import is_fraction

# Example A: gold a a a b b c / predicted 0 0 1 1 1 2
# contingency (rows a,b,c; cols 0,1,2): a=[2,1,0] b=[0,2,0] c=[0,0,1]; |pred| = 2,3,1; |gold| = 3,2,1; N = 6
A_TRUE = ["a", "a", "a", "b", "b", "c"]
A_PRED = [0, 0, 1, 1, 1, 2]
# Example B: gold a a a a b b c c / predicted 0 0 0 0 0 0 1 1
# contingency: a=[4,0] b=[2,0] c=[0,2]; |pred| = 6,2; |gold| = 4,2,2; N = 8
B_TRUE = ["a"] * 4 + ["b"] * 2 + ["c"] * 2
B_PRED = [0] * 6 + [1] * 2


def test_bcubed_hand():
    # A: P = (1/6)(2²/2 + (1²+2²)/3 + 1²/1) = (1/6)(2 + 5/3 + 1) = 7/9
    #    R = (1/6)((2²+1²)/3 + 2²/2 + 1²/1) = (1/6)(5/3 + 2 + 1) = 7/9, F = 7/9
    p, r, f = M.bcubed(A_TRUE, A_PRED)
    assert (p, r, f) == pytest.approx((7 / 9, 7 / 9, 7 / 9))
    # B: P = (1/8)((4²+2²)/6 + 2²/2) = (1/8)(20/6 + 2) = 2/3; R = (1/8)(4²/4 + 2²/2 + 2²/2) = 1
    #    F = 2·(2/3)·1/(2/3 + 1) = 4/5
    assert M.bcubed(B_TRUE, B_PRED) == pytest.approx((2 / 3, 1.0, 0.8))


def test_purity_family_hand():
    # A: purity = (2+2+1)/6 = 5/6; inverse = (max a=2 + max b=2 + max c=1)/6 = 5/6
    assert M.purity(A_TRUE, A_PRED) == pytest.approx(5 / 6)
    assert M.inverse_purity(A_TRUE, A_PRED) == pytest.approx(5 / 6)
    # B: purity = (4+2)/8 = 3/4; inverse = (4+2+2)/8 = 1; purity_f = 2·.75·1/1.75 = 6/7
    assert M.purity(B_TRUE, B_PRED) == pytest.approx(3 / 4)
    assert M.inverse_purity(B_TRUE, B_PRED) == pytest.approx(1.0)
    assert M.purity_f(B_TRUE, B_PRED) == pytest.approx(6 / 7)


def test_acp_and_type_representation_hand():
    # A: ACP = mean(2/2, 2/3, 1/1) = 8/9; majorities a, b, c -> 3/3
    assert M.avg_cluster_purity(A_TRUE, A_PRED) == pytest.approx(8 / 9)
    assert M.type_representation(A_TRUE, A_PRED) == pytest.approx(1.0)
    # B: ACP = mean(4/6, 2/2) = 5/6; majorities a (cluster 0), c (cluster 1); b never -> 2/3
    assert M.avg_cluster_purity(B_TRUE, B_PRED) == pytest.approx(5 / 6)
    assert M.type_representation(B_TRUE, B_PRED) == pytest.approx(2 / 3)
    # tie: one cluster holding one a and one b credits both types -> 2/2; ACP = 1/2
    assert M.type_representation(["a", "b"], [7, 7]) == 1.0
    assert M.avg_cluster_purity(["a", "b"], [7, 7]) == 0.5
    # ACP is unweighted: a 1-item pure cluster weighs as much as a 9-item one with purity 5/9
    # gold x×5 y×4 z / pred 0×9 1 -> ACP = (5/9 + 1)/2 = 7/9 while purity = (5+1)/10 = 3/5
    yt = ["x"] * 5 + ["y"] * 4 + ["z"]
    yp = [0] * 9 + [1]
    assert M.avg_cluster_purity(yt, yp) == pytest.approx(7 / 9)
    assert M.purity(yt, yp) == pytest.approx(3 / 5)


def test_clustering_scores_hand_B():
    s = M.clustering_scores(B_TRUE, B_PRED)
    # pairs: Σ C(n_ij,2) = C(4,2)+C(2,2)+C(2,2) = 6+1+1 = 8; rows 6+1+1 = 8; cols C(6,2)+C(2,2) = 16; C(8,2) = 28
    # ARI = (8 − 8·16/28) / ((8+16)/2 − 8·16/28) = (24/7)/(52/7) = 6/13; FMI = 8/√(8·16) = 1/√2
    assert s["ari"] == pytest.approx(6 / 13)
    assert s["fmi"] == pytest.approx(1 / math.sqrt(2))
    # entropies (bits): H(gold) = ½·1 + ¼·2 + ¼·2 = 1.5; H(pred) = −(¾log₂¾ + ¼log₂¼) = 0.811278
    # pred is a function of gold, so MI = H(pred); homogeneity = 0.811278/1.5, completeness = 1
    hp = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    h = hp / 1.5
    assert s["homogeneity"] == pytest.approx(h)
    assert s["completeness"] == pytest.approx(1.0)
    assert s["v_measure"] == pytest.approx(2 * h / (h + 1))
    assert s["nmi"] == pytest.approx(hp / math.sqrt(1.5 * hp))  # geometric
    assert s["nmi_arithmetic"] == pytest.approx(hp / ((1.5 + hp) / 2))
    assert s["bcubed_p"] == pytest.approx(2 / 3) and s["bcubed_f"] == pytest.approx(0.8)
    assert s["purity_f"] == pytest.approx(6 / 7)
    assert s["avg_cluster_purity"] == pytest.approx(5 / 6)
    assert s["type_representation"] == pytest.approx(2 / 3)
    assert s["n_clusters"] == 2
    # A: ARI = (2 − 4·4/15)/(4 − 16/15) = 7/22 (Σ C(n_ij,2) = 2, rows 3+1 = 4, cols 1+3 = 4, C(6,2) = 15)
    a = M.clustering_scores(A_TRUE, A_PRED)
    assert a["ari"] == pytest.approx(7 / 22) and a["fmi"] == pytest.approx(2 / math.sqrt(4 * 4))


def test_label_names_do_not_matter():
    s1 = M.clustering_scores(B_TRUE, B_PRED)
    s2 = M.clustering_scores([{"a": 9, "b": 3, "c": 5}[t] for t in B_TRUE], ["q" if p == 0 else "p" for p in B_PRED])
    assert s1 == pytest.approx(s2)


def test_edge_single_cluster_and_singletons():
    # one cluster, mixed gold a a b c: P = (2²+1+1)/4 /4 = 3/8, R = 1, purity 2/4, inverse 1, ACP 1/2, rep 1/3
    s = M.clustering_scores(["a", "a", "b", "c"], [0, 0, 0, 0])
    assert (s["bcubed_p"], s["bcubed_r"]) == pytest.approx((3 / 8, 1.0))
    assert (s["purity"], s["inverse_purity"], s["avg_cluster_purity"]) == pytest.approx((0.5, 1.0, 0.5))
    assert s["type_representation"] == pytest.approx(1 / 3)
    assert s["homogeneity"] == pytest.approx(0.0) and s["completeness"] == pytest.approx(1.0)
    assert s["ari"] == pytest.approx(0.0) and s["n_clusters"] == 1
    # all singletons, one gold type: P = 1, R = 4·(1/4)/4 = 1/4, purity 1, inverse 1/4, ACP 1, rep 1
    s = M.clustering_scores(["a"] * 4, [0, 1, 2, 3])
    assert (s["bcubed_p"], s["bcubed_r"]) == pytest.approx((1.0, 0.25))
    assert (s["purity"], s["inverse_purity"], s["avg_cluster_purity"]) == pytest.approx((1.0, 0.25, 1.0))
    assert s["homogeneity"] == pytest.approx(1.0) and s["completeness"] == pytest.approx(0.0)
    assert s["n_clusters"] == 4
    # perfect clustering: every fraction is 1
    s = M.clustering_scores(["x", "y", "y", "z"], [5, 1, 1, 0])
    assert all(s[key] == pytest.approx(1.0) for key in s if key != "n_clusters")


def test_bad_input_errors():
    with pytest.raises(ValueError, match="empty"):
        M.clustering_scores([], [])
    with pytest.raises(ValueError, match="3 items but y_pred has 2"):
        M.bcubed([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="1-D"):
        M.purity([[1, 2]], [[1, 2]])


def _naive(y_true, y_pred):
    """O(N²) textbook definitions, written independently of the vectorised code."""
    n = len(y_true)
    p = sum(sum(1 for j in range(n) if y_pred[j] == y_pred[i] and y_true[j] == y_true[i])
            / sum(1 for j in range(n) if y_pred[j] == y_pred[i]) for i in range(n)) / n
    r = sum(sum(1 for j in range(n) if y_pred[j] == y_pred[i] and y_true[j] == y_true[i])
            / sum(1 for j in range(n) if y_true[j] == y_true[i]) for i in range(n)) / n
    clusters = defaultdict(list)
    for t, c in zip(y_true, y_pred):
        clusters[c].append(t)
    maj = {c: Counter(ts).most_common(1)[0][1] for c, ts in clusters.items()}
    purity = sum(maj.values()) / n
    acp = float(np.mean([maj[c] / len(ts) for c, ts in clusters.items()]))
    winners = {t for c, ts in clusters.items() for t, k in Counter(ts).items() if k == maj[c]}
    return p, r, purity, acp, len(winners) / len(set(y_true))


@pytest.mark.shared_data
def test_real_wikievents_labels_against_naive():
    """Real partition pair: WikiEvents dev event types vs. their documents (345 mentions)."""
    path = shared_path("wikievents", "dev.jsonl")
    types, docs = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            for ev in d["event_mentions"]:
                types.append(ev["event_type"])
                docs.append(d["doc_id"])
    assert len(types) == 345
    s = M.clustering_scores(types, docs)
    p, r, pur, acp, rep = _naive(types, docs)
    assert (s["bcubed_p"], s["bcubed_r"], s["purity"]) == pytest.approx((p, r, pur))
    assert (s["avg_cluster_purity"], s["type_representation"]) == pytest.approx((acp, rep))
    assert s["inverse_purity"] == pytest.approx(_naive(docs, types)[2])
    assert s["ari"] == pytest.approx(skm.adjusted_rand_score(types, docs))
    for key, val in s.items():
        if is_fraction(key) and key != "ari":  # ARI is a fraction in [-1, 1]
            assert 0.0 <= val <= 1.0, key
    assert s["n_clusters"] == 20  # 20 documents


# ------------------------------------------------------------------ ranking
def test_rank_metrics_hand():
    ranks = [1, 3, 2, 10, np.inf]  # last query: gold not retrieved
    assert M.hits_at_k(ranks, 1) == pytest.approx(1 / 5)
    assert M.hits_at_k(ranks, 3) == pytest.approx(3 / 5)
    assert M.hits_at_k(ranks, 10) == pytest.approx(4 / 5)
    # MRR = (1 + 1/3 + 1/2 + 1/10 + 0)/5 = (58/30)/5 = 0.38667
    assert M.mrr(ranks) == pytest.approx((1 + 1 / 3 + 1 / 2 + 1 / 10) / 5)
    assert M.mean_rank([1, 3, 2, 10]) == pytest.approx(4.0)  # 16/4
    assert M.mean_rank(ranks) == np.inf
    with pytest.raises(ValueError, match="1-based"):
        M.mrr([0, 1])
    with pytest.raises(ValueError, match="at least one"):
        M.hits_at_k([], 1)
    with pytest.raises(ValueError, match="whole numbers"):
        M.mean_rank([1.5])
    with pytest.raises(ValueError, match="positive integer"):
        M.hits_at_k([1], 0)


def test_average_precision_hand():
    rel = [1, 0, 1, 0, 0, 1]
    # precision at the hits: 1/1, 2/3, 3/6 -> AP = (1 + 2/3 + 1/2)/3 = 13/18
    assert M.average_precision(rel) == pytest.approx(13 / 18)
    # 4 relevant items exist, one never retrieved: (1 + 2/3 + 1/2)/4 = 13/24
    assert M.average_precision(rel, n_relevant=4) == pytest.approx(13 / 24)
    # sklearn agrees when the list scores are descending ranks
    assert M.average_precision(rel) == pytest.approx(skm.average_precision_score(rel, -np.arange(6)))
    # MAP over [rel, [0, 1]] = (13/18 + 1/2)/2 = 11/18
    assert M.mean_average_precision([rel, [0, 1]]) == pytest.approx(11 / 18)
    assert M.map([rel, [0, 1]]) == pytest.approx(11 / 18)
    assert M.average_precision([0, 0]) == 0.0  # nothing relevant
    with pytest.raises(ValueError, match="smaller than"):
        M.average_precision(rel, n_relevant=2)
    with pytest.raises(ValueError, match="0/1"):
        M.average_precision([2, 0])
    with pytest.raises(ValueError, match="at least one query"):
        M.mean_average_precision([])


def test_precision_at_k_and_r_precision_hand():
    rel = [1, 0, 1, 0, 0, 1]
    assert M.precision_at_k(rel, 1) == 1.0  # 1/1
    assert M.precision_at_k(rel, 3) == pytest.approx(2 / 3)  # hits at 1, 3
    assert M.precision_at_k(rel, 6) == pytest.approx(1 / 2)  # 3/6
    assert M.precision_at_k(rel, 10) == pytest.approx(3 / 10)  # padded with misses: 3/10
    assert M.precision_at_k(np.array([True, False]), 2) == 0.5
    # R-precision, R = 3 (list count): top-3 holds 2 -> 2/3
    assert M.r_precision(rel) == pytest.approx(2 / 3)
    # R = 4 (one relevant item never retrieved): top-4 = 1,0,1,0 -> 2/4
    assert M.r_precision(rel, n_relevant=4) == pytest.approx(1 / 2)
    # R = 8 > list length: the 3 hits over 8
    assert M.r_precision(rel, n_relevant=8) == pytest.approx(3 / 8)
    assert M.r_precision([0, 0, 0]) == 0.0  # nothing relevant exists
    assert M.r_precision([1, 1, 0], 2) == 1.0
    with pytest.raises(ValueError, match="positive integer"):
        M.precision_at_k(rel, 0)
    with pytest.raises(ValueError, match="0/1"):
        M.precision_at_k([0.5, 1], 1)
    with pytest.raises(ValueError, match="smaller than"):
        M.r_precision(rel, n_relevant=2)
    with pytest.raises(ValueError, match="non-negative integer"):
        M.r_precision(rel, n_relevant=3.5)
    with pytest.raises(ValueError, match="1-D"):
        M.precision_at_k([[1, 0]], 1)


def test_recall_at_k_and_min_hand():
    ranked = ["e3", "e1", "e7", "e2", "e5"]
    gold = {"e1", "e2", "e9"}
    assert M.recall_at_k(ranked, gold, 1) == 0.0
    assert M.recall_at_k(ranked, gold, 2) == pytest.approx(1 / 3)
    assert M.recall_at_k(ranked, gold, 4) == pytest.approx(2 / 3)
    assert M.recall_at_k(ranked, gold, 100) == pytest.approx(2 / 3)
    # Recall@min: k = |gold| = 3 -> top-3 {e3, e1, e7} holds e1 only -> 1/3
    assert M.recall_at_min(ranked, gold) == pytest.approx(1 / 3)
    assert M.recall_at_min(["a", "b"], ["b", "a"]) == 1.0
    with pytest.raises(ValueError, match="non-empty gold"):
        M.recall_at_k(ranked, set(), 3)


# ------------------------------------------------------------------ multi-label
PRED = [{"a"}, {"a", "b"}, {"c"}, set()]
GOLD = [{"a"}, {"a"}, {"c", "d"}, {"e"}]


def test_strict_accuracy_hand():
    assert M.strict_accuracy(PRED, GOLD) == pytest.approx(1 / 4)  # only example 0 matches exactly
    assert M.strict_accuracy([["x", "y"]], [("y", "x")]) == 1.0  # order-free
    with pytest.raises(ValueError, match="2 predicted label sets but 1 gold"):
        M.strict_accuracy([{"a"}, {"b"}], [{"a"}])
    with pytest.raises(ValueError, match="at least one example"):
        M.strict_accuracy([], [])


def test_prf_macro_micro_hand():
    # macro P over the 3 non-empty predictions: (1 + 1/2 + 1)/3 = 5/6
    # macro R over the 4 gold sets: (1 + 1 + 1/2 + 0)/4 = 5/8; F = 2·(5/6)(5/8)/(5/6 + 5/8) = 5/7
    assert M.prf_macro(PRED, GOLD) == pytest.approx((5 / 6, 5 / 8, 5 / 7))
    # micro: overlap 1+1+1+0 = 3; Σ|pred| = 4; Σ|gold| = 5 -> P 3/4, R 3/5, F = 2·(9/20)/(27/20) = 2/3
    assert M.prf_micro(PRED, GOLD) == pytest.approx((3 / 4, 3 / 5, 2 / 3))
    assert M.prf_micro([set()], [{"a"}]) == (0.0, 0.0, 0.0)


# ------------------------------------------------------------------ correlation
def test_spearman_hand():
    # y ranks with a tie: 5→1, 6→2, 7→3.5, 8→5, 7→3.5; x ranks 1..5 (mean 3 both)
    # deviations x: −2 −1 0 1 2; y: −2 −1 .5 2 .5; cov = 4+1+0+2+1 = 8; Σdx² = 10; Σdy² = 9.5
    # ρ = 8/√95
    assert M.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(8 / math.sqrt(95))
    assert M.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="constant"):
        M.spearman([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="at least 2"):
        M.spearman([1], [2])
    with pytest.raises(ValueError, match="3 values but y has 2"):
        M.spearman([1, 2, 3], [1, 2])
