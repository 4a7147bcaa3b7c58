"""frame_dml clustering with dev-transferred cuts, and frame-induction scores, on hand-made cases."""
from __future__ import annotations

import math

import numpy as np
import pytest

from eventatlas.cluster.frames import (
    gold_pair_fraction, height_for_k, linkage, one_step, pair_fraction_cut, pseudo_lus, tune_group_threshold,
    two_step,
)
from eventatlas.evaluation.frames import frame_cluster_scores, ranking_recall


def _deg(*angles):
    return np.array([[math.cos(math.radians(a)), math.sin(math.radians(a))] for a in angles])


def test_one_step_threshold_transfer():
    # dev: two tight pairs far apart -> gold 2 frames; the cut height lies between 2° and 80° merges
    dev = _deg(0, 2, 80, 82)
    Z = linkage(dev)
    t = height_for_k(Z, 2)
    d2, d80 = 1 - math.cos(math.radians(2)), 1 - math.cos(math.radians(80))
    assert d2 < t < 1 - math.cos(math.radians(81))
    assert one_step(dev, t).tolist() == [0, 0, 1, 1]
    # t is the midpoint of the 2° and ~80° merge heights (~0.41); on test the same height keeps
    # 1°-apart points together and splits 70°-apart groups (distance ~0.66)
    assert t == pytest.approx((Z[1, 2] + Z[2, 2]) / 2)
    test = _deg(0, 1, 70, 71, 140, 141)
    assert one_step(test, t).tolist() == [0, 0, 1, 1, 2, 2]
    assert d2 < d80  # sanity of the hand numbers
    assert height_for_k(Z, 4) == pytest.approx(Z[0, 2]) and one_step(dev, height_for_k(Z, 4)).max() == 3
    assert one_step(dev, height_for_k(Z, 1)).max() == 0


def test_two_step_hand_made():
    # verb "a": instances at 0°, 1° (frame F) and 90°, 91° (frame G) -> 2 pseudo-LUs;
    # verb "b": 2°, 3° (F); verb "c": 92° (G)  -> dev verb-frame pairs: (a,F) (a,G) (b,F) (c,G) = 4
    X = _deg(0, 1, 90, 91, 2, 3, 92)
    verbs = ["a", "a", "a", "a", "b", "b", "c"]
    frames = ["F", "F", "G", "G", "F", "F", "G"]
    tau = tune_group_threshold(X, verbs, target=4)
    assert pseudo_lus(X, verbs, tau).tolist() == [0, 0, 1, 1, 2, 2, 3]
    # pairs of verb-frame pairs sharing a frame: (aF,bF), (aG,cG) of C(4,2) = 6
    frac = gold_pair_fraction(verbs, frames)
    assert frac == pytest.approx(2 / 6)
    labels, info = two_step(X, verbs, tau, frac)
    assert labels.tolist() == [0, 0, 1, 1, 0, 0, 1]
    assert (info.n_pseudo_lus, info.n_clusters) == (4, 2)


def test_pair_fraction_cut_counts_pairs():
    # 4 points on a line: merges (0,1) h=1, (2,3) h=2, then all. Pairs: 1 of 6, 2 of 6, 6 of 6
    Z = np.array([[0, 1, 1.0, 2], [2, 3, 2.0, 2], [4, 5, 3.0, 4]])
    assert pair_fraction_cut(Z, 0.1).tolist() == [0, 0, 1, 2]
    assert pair_fraction_cut(Z, 2 / 6).tolist() == [0, 0, 1, 1]
    assert pair_fraction_cut(Z, 0.5).tolist() == [0, 0, 0, 0]
    assert pair_fraction_cut(Z, 0.0).tolist() == [0, 1, 2, 3]


def test_frame_cluster_scores_hand_computed():
    s = frame_cluster_scores(["F", "F", "G", "G"], [0, 0, 0, 1])
    # B-cubed P: (2/3·3 + 1)/4... items 0,1: 2/3 ; item 2: 1/3 ; item 3: 1 -> (2/3+2/3+1/3+1)/4
    assert s["bcubed_p"] == pytest.approx((2 / 3 + 2 / 3 + 1 / 3 + 1) / 4)
    assert s["bcubed_r"] == pytest.approx((1 + 1 + 0.5 + 0.5) / 4)
    assert s["purity"] == pytest.approx(3 / 4) and s["inverse_purity"] == pytest.approx(3 / 4)
    assert (s["n_clusters"], s["n_frames"]) == (2, 2)


def test_ranking_recall_hand_computed():
    # frames F: 0°, 10°, 100° ; G: 95°, 5°. verbs: x = {0°, 95°}, y = {10°, 100°, 5°}
    X = _deg(0, 10, 100, 95, 5)
    frames = ["F", "F", "F", "G", "G"]
    verbs = ["x", "y", "y", "x", "y"]
    r = ranking_recall(X, frames, verbs)
    # ALL: q0 (F, rel 2): nearest 5°(G),10°(F) -> 1/2 ; q1 (rel 2): 5°(G),0°(F) -> 1/2 ;
    # q2 (rel 2): 95°(G),10°(F) -> 1/2 ; q3 (G, rel 1): 100°(F) -> 0 ; q4 (rel 1): 0° or 10° (F) -> 0
    assert r["recall_all"] == pytest.approx((0.5 + 0.5 + 0.5 + 0 + 0) / 5)
    # SAME verb: x: q0 rel 0 (95° is G), q3 rel 0 ; y: q1 (F, rel {100°}): nearest in y = 5° -> 0 ;
    # q2 (rel {10°}): nearest 10° -> 1 ; q4 (G) rel 0 -> queries q1, q2
    assert r["recall_same"] == pytest.approx((0 + 1) / 2)
    # DIFF verb: q0 (F; space y: 10°,100°,5°; rel {10°,100°}): top2 = 5°,10° -> 1/2 ;
    # q3 (G; space y; rel {5°}): top1 = 100° -> 0 ; q1 (F; space x: 0°, 95°; rel {0°}) -> 0° -> 1 ;
    # q2 (F; rel {0°}): top1 = 95° -> 0 ; q4 (G; rel {95°}): top1 = 0° -> 0
    assert r["recall_diff"] == pytest.approx((0.5 + 0 + 1 + 0 + 0) / 5)
