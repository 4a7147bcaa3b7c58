"""SWCC losses against hand-computed cases (one test block per loss module)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from eventatlas.swcc.losses.infonce import self_supervised_infonce, swcc_infonce, weak_infonce
from eventatlas.swcc.losses.margin import margin_loss
from eventatlas.swcc.losses.mlm import IGNORE, mask_one_token, mlm_loss
from eventatlas.swcc.losses.prototype import prototype_entropy, prototype_loss, sinkhorn, swapped_prediction

E1, E2 = [1.0, 0.0], [0.0, 1.0]


def t(*rows):
    return torch.tensor(rows, dtype=torch.float64)


# ------------------------------------------------------------------ weighted multi-positive InfoNCE
def test_infonce_hand_case():
    q, k1, k2 = t(E1, E2), t(E1, E2), t(E2, E1)
    # q k1^T = I: each row's CE = log(1 + e^{-1/tau}); q k2^T = [[0,1],[1,0]]: CE = log(1 + e^{1/tau})
    for tau in (1.0, 0.3):
        a, b = math.log1p(math.exp(-1 / tau)), math.log1p(math.exp(1 / tau))
        assert float(self_supervised_infonce(q, [k1], tau)) == pytest.approx(a)
        assert float(self_supervised_infonce(q, [k1, k2], tau)) == pytest.approx((a + b) / 2)
    # weak term, tau = 1: p = [e1, e1], w = [1, .5]
    # row 0: pos q0.p0 = 1, negatives q0.k1_1 = 0 -> log(e + 1) - 1 = log(1 + e^-1)
    # row 1: pos q1.p1 = 0, negatives q1.k1_0 = 0 -> log 2 ; weighted mean = (log(1+e^-1) + .5 log 2) / 2
    p, w = t(E1, E1), torch.tensor([1.0, 0.5], dtype=torch.float64)
    want = (math.log1p(math.exp(-1)) + 0.5 * math.log(2)) / 2
    assert float(weak_infonce(q, p, k1, w, tau=1.0)) == pytest.approx(want)
    # the diagonal of q k1^T is not a negative of the weak positive: changing k1_0 leaves row 0 alone
    k1b = t([0.6, 0.8], E2)
    assert float(weak_infonce(q, p, k1b, torch.tensor([1.0, 0.0], dtype=torch.float64), tau=1.0)) == pytest.approx(
        math.log1p(math.exp(-1)) / 2)
    total, terms = swcc_infonce(q, k1, k2, p, w, tau=1.0)
    self_term = (math.log1p(math.exp(-1)) + math.log1p(math.e)) / 2
    assert float(total) == pytest.approx(self_term + want) and set(terms) == {"cl_self", "cl_weak"}
    plain, terms = swcc_infonce(q, k1, k2, p, w, tau=1.0, weak=False, second_view=False)
    assert float(plain) == pytest.approx(math.log1p(math.exp(-1))) and set(terms) == {"cl_self"}
    with pytest.raises(ValueError, match="weights must be"):
        weak_infonce(q, p, k1, torch.ones(3))


# ------------------------------------------------------------------ prototypes
def test_sinkhorn_marginals():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(12, 4, generator=g, dtype=torch.float64) * 0.3
    Q = sinkhorn(scores, eps=0.05, iters=3)
    # rows: every event's assignment is a distribution (exact after the last, row-wise step)
    assert torch.allclose(Q.sum(1), torch.ones(12, dtype=torch.float64))
    # columns: equipartition B/M = 3 per prototype, reached as the iterations go on
    Q200 = sinkhorn(scores, eps=0.05, iters=200)
    assert torch.allclose(Q200.sum(0), torch.full((4,), 3.0, dtype=torch.float64), atol=1e-3)
    assert (Q.sum(0) - 3).abs().max() < (torch.softmax(scores / 0.05, 1).sum(0) - 3).abs().max()
    # equal scores -> the uniform assignment; a huge offset does not overflow
    assert torch.allclose(sinkhorn(torch.full((4, 2), 7.0, dtype=torch.float64)), torch.full((4, 2), 0.5, dtype=torch.float64))
    assert torch.isfinite(sinkhorn(scores + 1e4)).all()


def test_swapped_prediction_hand_case():
    s1, s2 = t([0.0, 0.0]), t([math.log(3), 0.0])  # softmax(s2) = [3/4, 1/4]
    q1, q2 = t([0.5, 0.5]), t([1.0, 0.0])
    want = -0.5 * (-math.log(2) + 0.5 * math.log(0.75) + 0.5 * math.log(0.25))
    assert float(swapped_prediction(s1, s2, q1, q2)) == pytest.approx(want)
    # entropy of [1/2, 1/2] = log 2, of [3/4, 1/4] = -(.75 log .75 + .25 log .25)
    h2 = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert float(prototype_entropy(s1, s2)) == pytest.approx((math.log(2) + h2) / 2)


def test_prototype_loss_composes_and_learns_prototypes():
    g = torch.Generator().manual_seed(1)
    z1 = torch.nn.functional.normalize(torch.randn(8, 5, generator=g), dim=1)
    z2 = torch.nn.functional.normalize(z1 + 0.05 * torch.randn(8, 5, generator=g), dim=1)
    C = torch.randn(3, 5, generator=g, requires_grad=True)
    loss, terms, assign = prototype_loss(z1, z2, C, tau=0.3, entropy_weight=0.0)
    Cn = torch.nn.functional.normalize(C.detach(), dim=1)
    q1, q2 = sinkhorn(z1 @ Cn.T), sinkhorn(z2 @ Cn.T)
    assert float(loss) == pytest.approx(float(swapped_prediction(z1 @ Cn.T / 0.3, z2 @ Cn.T / 0.3, q1, q2)), rel=1e-6)
    assert set(terms) == {"proto_swap"} and assign.tolist() == (z1 @ Cn.T).argmax(1).tolist()
    loss.backward()
    assert C.grad is not None and C.grad.abs().sum() > 0  # the targets carry no gradient, the scores do
    with_h, terms, _ = prototype_loss(z1, z2, C, tau=0.3, entropy_weight=0.05)
    h = prototype_entropy(z1 @ Cn.T / 0.3, z2 @ Cn.T / 0.3)
    assert float(with_h) == pytest.approx(float(loss) + 0.05 * float(h), rel=1e-6) and "proto_entropy" in terms


# ------------------------------------------------------------------ MLM
def test_mask_one_token_never_masks_a_special_token():
    special = {0, 101, 102, 103}  # pad, cls, sep, mask
    rows = [[101, 7, 8, 9, 102, 0, 0], [101, 5, 102], [101, 102, 0]]
    seen = set()
    for seed in range(200):
        ids, labels = mask_one_token(rows, special, 103, np.random.default_rng(seed))
        for row, new, lab in zip(rows, ids, labels):
            hit = [j for j, x in enumerate(lab) if x != IGNORE]
            if row == [101, 102, 0]:  # nothing maskable: unchanged, no label
                assert new == row and not hit
                continue
            assert len(hit) == 1
            j = hit[0]
            assert row[j] not in special and new[j] == 103 and lab[j] == row[j]
            assert [x for k, x in enumerate(new) if k != j] == [x for k, x in enumerate(row) if k != j]
            seen.add((len(row), j))
    assert {j for n, j in seen if n == 7} == {1, 2, 3}  # every ordinary token gets masked sometimes


def test_mlm_loss_hand_case():
    logits = torch.zeros(1, 3, 4, dtype=torch.float64)
    logits[0, 1] = torch.tensor([math.log(2), 0.0, 0.0, 0.0])  # softmax at pos 1: [2/5, 1/5, 1/5, 1/5]
    labels = torch.tensor([[IGNORE, 0, IGNORE]])
    assert float(mlm_loss(logits, labels)) == pytest.approx(-math.log(2 / 5))
    assert float(mlm_loss(logits, torch.full((1, 3), IGNORE))) == 0.0


# ------------------------------------------------------------------ margin ablation
def test_margin_loss_hand_case():
    q = t(E1, E2)
    assert float(margin_loss(q, t(E1, E2), margin=0.5)) == 0.0  # pos 1, neg 0: 0.5 - 1 + 0 < 0
    assert float(margin_loss(q, t(E2, E1), margin=0.5)) == pytest.approx(1.5)  # pos 0, neg 1: 0.5 - 0 + 1
    k = t([0.6, 0.8], E2)  # sim = [[.6, 0], [.8, 1]]: row 0 relu(.5 - .6 + 0) = 0; row 1 relu(.5 - 1 + .8) = .3
    assert float(margin_loss(q, k, margin=0.5)) == pytest.approx(0.15)
