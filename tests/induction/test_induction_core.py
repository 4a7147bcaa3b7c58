"""Loss (hand-computed 4x4), clusterer structure, stopping rule, naming/linking ranks."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from eventatlas.induction.losses.masked_contrastive import augmented_loss, label_matrices, masked_contrastive_loss
from eventatlas.induction.losses.naming import naming_loss
from eventatlas.induction.model import Clusterer, ProjectionMLP
from eventatlas.evaluation.naming import (best_rank, framenet_linking, inheritance_descendants, majority_types,
                                         type_naming, valid_frames)
from eventatlas.induction.stopping import choose_epoch, epoch_silhouettes, smooth

L3 = math.log(3.0)  # sigmoid(ln 3) = 0.75, sigmoid(0) = 0.5, sigmoid(-ln 3) = 0.25
S44 = torch.tensor([[L3, 0.0, L3, -L3],
                    [0.0, L3, 0.0, L3],
                    [-L3, L3, 0.0, L3],
                    [L3, -L3, 0.0, -L3]])
LAB = torch.tensor([0, 0, -1, -1])  # mentions 0,1: seen type 0; mentions 2,3: unseen


def test_label_and_mask_matrices():
    y, m = label_matrices(LAB)
    assert y.int().tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    # only the unseen-unseen off-diagonal pairs are masked
    assert m.int().tolist() == [[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 1]]


def test_loss_hand_computed_4x4():
    # Per entry (P = sigmoid(S), Y, mask M, margin m = 0.5):
    # row 0: (0,0) Y=1 P=.75 -> ln(4/3); (0,1) Y=1 P=.5 -> ln2; (0,2) Y=0 P=.75 -> ln4;
    #        (0,3) Y=0 P=.25 < m -> 0 (margin)
    # row 1: (1,0) ln2; (1,1) ln(4/3); (1,2) Y=0 P=.5 (not < m) -> ln2; (1,3) Y=0 P=.75 -> ln4
    # row 2: (2,0) Y=0 P=.25 -> 0 (margin); (2,1) ln4; (2,2) diagonal Y=1 P=.5 -> ln2;
    #        (2,3) both unseen -> masked, 0 although P=.75
    # row 3: (3,0) ln4; (3,1) P=.25 -> 0; (3,2) masked; (3,3) diagonal Y=1 P=.25 -> ln4
    # sum = 2 ln(4/3) + 4 ln2 + 5 ln4 = 18 ln2 - 2 ln3; mean over all 16 entries
    expected = (18 * math.log(2) - 2 * math.log(3)) / 16
    assert expected == pytest.approx(0.6424640, abs=1e-6)
    got = masked_contrastive_loss(S44, LAB, margin=0.5)
    assert float(got) == pytest.approx(expected, abs=1e-6)


def test_loss_masked_entries_have_no_effect_and_no_gradient():
    s = S44.clone().requires_grad_(True)
    masked_contrastive_loss(s, LAB).backward()
    g = s.grad
    assert g[2, 3] == 0 and g[3, 2] == 0  # unseen-unseen pairs
    assert g[0, 3] == 0 and g[2, 0] == 0  # negatives below the margin
    assert g[0, 0] != 0 and g[2, 2] != 0 and g[1, 2] != 0
    s2 = S44.clone()
    s2[2, 3], s2[3, 2] = 7.0, -9.0
    assert float(masked_contrastive_loss(s2, LAB)) == pytest.approx(float(masked_contrastive_loss(S44, LAB)))


def test_loss_matches_published_formulation():
    # the reference formulation: BCE on probabilities, margin zeroing, mask, mean over n^2
    torch.manual_seed(0)
    s = torch.randn(7, 7) * 2
    lab = torch.tensor([0, 1, 0, -1, 2, -1, 1])
    p = torch.sigmoid(s)
    onehot = torch.zeros(7, 3)
    for i, v in enumerate(lab.tolist()):
        if v >= 0:
            onehot[i, v] = 1
    seen = lab >= 0
    y = torch.logical_or(onehot @ onehot.T > 0, torch.eye(7, dtype=torch.bool)).float()
    mask = torch.logical_or(~((~seen)[:, None] & (~seen)[None, :]), torch.eye(7, dtype=torch.bool))
    ref = torch.nn.functional.binary_cross_entropy(p, y, reduction="none")
    ref[(p < 0.5) & (y == 0)] = 0
    ref = (ref * mask).mean()
    assert float(masked_contrastive_loss(s, lab)) == pytest.approx(float(ref), rel=1e-5)


def test_augmented_loss_four_terms():
    torch.manual_seed(1)
    q, k, q2, k2 = (torch.randn(4, 8) for _ in range(4))
    total, parts = augmented_loss(q, k, q2, k2, LAB)
    sc = 1 / math.sqrt(8)
    exp = sum(float(masked_contrastive_loss(a @ b.T * sc, LAB)) for a, b in ((q, k), (q2, k2), (q, k2), (q2, k)))
    assert float(total) == pytest.approx(exp, rel=1e-6)
    assert set(parts) == {"qk", "q2k2", "qk2", "q2k"}
    # identical views -> four times the plain loss
    t2, _ = augmented_loss(q, k, q, k, LAB)
    assert float(t2) == pytest.approx(4 * float(masked_contrastive_loss(q @ k.T * sc, LAB)), rel=1e-6)


def test_naming_loss_seen_only():
    pred = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    tgt = torch.tensor([[1.0, 0.0], [1.0, 0.0], [5.0, 5.0]])
    seen = torch.tensor([True, True, False])
    # cos = 1 and 0 -> mean(1 - cos) = (0 + 1) / 2
    assert float(naming_loss(pred, tgt, seen)) == pytest.approx(0.5)


def test_clusterer_structure_and_shapes():
    torch.manual_seed(0)
    c = Clusterer(16, dropout=0.1)
    mods = [type(m).__name__ for m in (c.query.fc1, c.query.fc2, c.query.ln, c.query.fc3)]
    assert mods == ["Linear", "Linear", "LayerNorm", "Linear"]
    assert c.query.ln is not c.key.ln
    shared = Clusterer(16, share_layernorm=True)
    assert shared.query.ln is shared.key.ln
    n_sep = sum(p.numel() for p in c.parameters())
    n_sh = sum(p.numel() for p in shared.parameters())
    assert n_sep - n_sh == 2 * 16  # one LayerNorm (weight + bias) fewer
    f = torch.nn.functional.normalize(torch.randn(10, 16), dim=1)
    c.eval()
    s, f_hat, q, k = c(f)
    assert s.shape == (10, 10) and f_hat.shape == (10, 16) and q.shape == k.shape == (10, 16)
    assert torch.allclose(s, q @ k.T / 4.0, atol=1e-5)


def test_fhat_rows_are_convex_combinations():
    torch.manual_seed(3)
    c = Clusterer(8).eval()
    f = torch.randn(6, 8)
    s, f_hat, _, _ = c(f)
    a = torch.linalg.lstsq(f.T, f_hat.T).solution.T  # weights recovering F_hat from F
    assert torch.allclose(a, torch.softmax(s, dim=1), atol=1e-4)
    assert (a > -1e-5).all() and torch.allclose(a.sum(1), torch.ones(6), atol=1e-4)
    # each coordinate of every F_hat row lies within the range of that coordinate in F
    assert (f_hat <= f.max(0).values + 1e-5).all() and (f_hat >= f.min(0).values - 1e-5).all()


def test_projection_mlp_order():
    m = ProjectionMLP(4, dropout=0.0)
    x = torch.randn(3, 4)
    h = torch.relu(m.fc1(x))
    h = m.ln(torch.relu(m.fc2(h)))
    assert torch.allclose(m(x), m.fc3(h), atol=1e-6)


# ------------------------------------------------------------------ stopping
CURVE = [0.1, 0.2, 0.5, 0.3, 0.35, 0.32, 0.1, 0.05]


def test_smoothing_truncated_centred_window():
    sm = smooth(CURVE, 5)
    assert sm[0] == pytest.approx((0.1 + 0.2 + 0.5) / 3)
    assert sm[3] == pytest.approx((0.2 + 0.5 + 0.3 + 0.35 + 0.32) / 5)
    assert sm[7] == pytest.approx((0.32 + 0.1 + 0.05) / 3)


def test_stopping_rules_on_synthetic_curve():
    # smoothed: .267 .275 .29 .334 .314 .224 .205 .157 -> best window centred on epoch 3
    assert choose_epoch(CURVE, 5, "code") == 3
    # paper: best epoch inside window [1, 5] is epoch 2 (0.5)
    assert choose_epoch(CURVE, 5, "paper") == 2
    # a lone early spike is not picked by the smoothed rule. smoothed (truncated at the ends):
    # e0 (.9+.1+.1)/3=.367, e6 (.5+.6+.55+.5+.5)/5=.53, e7 (.6+.55+.5+.5)/4=.5375, e8 .517
    # -> code: centre 7; paper: best epoch in window [5, 8] = epoch 5 (.6)
    spike = [0.9, 0.1, 0.1, 0.1, 0.5, 0.6, 0.55, 0.5, 0.5]
    assert choose_epoch(spike, 5, "code") == 7 and choose_epoch(spike, 5, "paper") == 5
    with pytest.raises(ValueError):
        choose_epoch(CURVE, 5, "other")


def test_epoch_silhouettes_prefers_true_cluster_count():
    rng = np.random.default_rng(0)
    centres = np.eye(8)[:4] * 3
    f = np.concatenate([c + 0.1 * rng.standard_normal((15, 8)) for c in centres])
    f /= np.linalg.norm(f, axis=1, keepdims=True)
    s = f @ f.T  # an attention matrix that agrees with the features
    sil = epoch_silhouettes(f, s, [2, 4, 8])
    assert max(sil, key=sil.get) == 4 and sil[4] > 0.8


# ------------------------------------------------------------------ naming / linking toy world
def _toy():
    # three unseen types with orthogonal name embeddings; mentions lie near their type's name
    names = np.eye(3)
    y = ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    x = np.concatenate([np.tile(names[i], (4, 1)) for i in range(3)]) + 0.01
    return names, y, x


def test_type_naming_ranks_toy_world():
    names, y, x = _toy()
    m, rows = type_naming(x, y, y, ["a", "b", "c"], names)  # perfect clusters
    assert m["naming_hits@1"] == 1.0 and m["naming_mrr"] == 1.0 and m["naming_mean_rank"] == 1.0
    # swap the name embeddings of b and c: clusters b and c get rank 2, a rank 1
    m, rows = type_naming(x, y, y, ["a", "b", "c"], names[[0, 2, 1]])
    assert sorted(r["rank"] for r in rows) == [1, 2, 2]
    assert m["naming_hits@1"] == pytest.approx(1 / 3) and m["naming_mrr"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert m["naming_mean_rank"] == pytest.approx(5 / 3)
    # a cluster mixing 3 a + 1 b has majority a and purity 3/4
    pred = [0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2]
    assert majority_types(y, pred)[0] == ("a", 1.0)
    assert majority_types(y, pred)[1] == ("b", 0.8)
    m, _ = type_naming(x, y, pred, ["a", "b", "c"], names)
    assert m["avg_cluster_purity"] == pytest.approx((1 + 0.8 + 1) / 3)


def test_best_rank_ties_and_missing():
    assert best_rank(np.array([0.1, 0.9, 0.5]), [2]) == 2
    assert best_rank(np.array([0.1, 0.9, 0.5]), [0, 2]) == 2
    assert best_rank(np.array([0.5, 0.5, 0.1]), [1]) == 1  # ties do not push the gold down
    assert best_rank(np.array([0.5]), []) == float("inf")


def test_inheritance_descendants_and_linking_toy_world():
    # Event <- Attack <- Suicide_attack ; Event <- Death ; Other unrelated   (child, parent)
    edges = [("Attack", "Event"), ("Suicide_attack", "Attack"), ("Death", "Event")]
    desc = inheritance_descendants(edges)
    assert desc["Event"] == {"Attack", "Suicide_attack", "Death"} and desc["Attack"] == {"Suicide_attack"}
    valid = valid_frames({"a": ["Attack"], "b": ["Death"]}, desc)
    assert valid == {"a": {"Attack", "Suicide_attack"}, "b": {"Death"}}
    frames = ["Event", "Attack", "Suicide_attack", "Death", "Other"]
    fe = np.array([[1, 1, 1, 0], [0.2, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]], dtype=float)
    y = ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    x = np.array([[1, 0, 0, 0]] * 3 + [[0, 1, 0, 0]] * 3 + [[0, 0, 1, 0]] * 3, dtype=float)
    m, rows = framenet_linking(x, y, y, frames, fe, valid)
    # cluster a (centroid e1): Suicide_attack 1.0 > Event .577 > Attack .196; Suicide_attack is a
    # descendant of the mapped Attack -> rank 1. cluster b (e2): Death 1.0 > Event .577 -> rank 1.
    # cluster c's majority type has no mapping -> counted as unmapped
    r = {row["majority"]: row["rank"] for row in rows}
    assert r == {"a": 1, "b": 1}
    assert m["linking_unmapped_clusters"] == 1.0 and m["linking_n_clusters"] == 2.0
    # without the inheritance closure cluster a's best valid frame (Attack, cos .196) ranks 3rd
    m2, rows2 = framenet_linking(x, y, y, frames, fe, {"a": {"Attack"}, "b": {"Death"}})
    assert {row["majority"]: row["rank"] for row in rows2}["a"] == 3
    assert m2["linking_mrr"] == pytest.approx((1 / 3 + 1) / 2)


def test_epoch_silhouettes_with_negative_attention_distances():
    # S is unbounded: 1 - S < 0 happens after training; the tree must equal the one on 1 - S + c
    rng = np.random.default_rng(1)
    f = np.concatenate([c + 0.1 * rng.standard_normal((10, 6)) for c in np.eye(6)[:3] * 2])
    f /= np.linalg.norm(f, axis=1, keepdims=True)
    s = 5.0 * f @ f.T  # 1 - S down to -4
    assert (1 - s).min() < 0
    sil = epoch_silhouettes(f, s, [3, 6])
    assert sil == epoch_silhouettes(f, s - 2.0, [3, 6])  # shift invariance of average linkage
    assert sil[3] > sil[6]
