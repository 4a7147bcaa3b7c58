"""frame_dml losses, each against a tiny hand-computed batch, and the per-anchor partner sampler."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from eventatlas.framedml.losses.adacos import AdaCosHead
from eventatlas.framedml.losses.arcface import ArcFaceHead
from eventatlas.framedml.losses.contrastive import PairContrastiveLoss
from eventatlas.framedml.sampling import PartnerSampler
from eventatlas.framedml.losses.softmax import SoftmaxHead
from eventatlas.framedml.losses.triplet import TripletLoss

# unit vectors at 0°, 90°, 180°, 60° (inputs are scaled: the losses normalise them)
E0, E90, E180, E60 = [3.0, 0.0], [0.0, 2.0], [-1.0, 0.0], [0.5, math.sqrt(3) / 2]


def test_contrastive_hand_computed():
    # pair 1 positive, d(0°, 90°) = √2 -> ½·2 = 1; pair 2 negative, d(0°, 60°) = 1, m = 1.5 -> ½·0.25;
    # pair 3 negative, d(0°, 180°) = 2 > m -> 0. Mean over 3 pairs.
    loss = PairContrastiveLoss(margin=1.5)
    a = torch.tensor([E0, E0, E0])
    p = torch.tensor([E90, E60, E180])
    out = loss(a, p, torch.tensor([True, False, False]))
    assert out.item() == pytest.approx((1.0 + 0.125 + 0.0) / 3, abs=1e-6)


def test_triplet_hand_computed():
    # anchor 0°, positive 60° (d² = 1), negative 90° (d² = 2): max(0, 1 - 2 + 1.5) = 0.5;
    # anchor 0°, positive 90° (d² = 2), negative 60° (d² = 1): 2 - 1 + 1.5 = 2.5
    loss = TripletLoss(margin=1.5)
    out = loss(torch.tensor([E0, E0]), torch.tensor([E60, E90]), torch.tensor([E90, E60]))
    assert out.item() == pytest.approx((0.5 + 2.5) / 2, abs=1e-5)
    # zero terms count in the mean (not the library's average over non-zero terms)
    out = TripletLoss(margin=0.5)(torch.tensor([E0, E0]), torch.tensor([E60, E60]), torch.tensor([E180, E90]))
    assert out.item() == pytest.approx((0.0 + 0.0) / 2, abs=1e-6)
    out = TripletLoss(margin=0.5)(torch.tensor([E0, E0]), torch.tensor([E60, E90]), torch.tensor([E180, E60]))
    assert out.item() == pytest.approx((0.0 + 1.5) / 2, abs=1e-5)


def _ce(logits, target):
    logits = np.asarray(logits, dtype=np.float64)
    return float(np.log(np.exp(logits).sum()) - logits[target])


def test_arcface_hand_computed_margin_is_radians():
    head = ArcFaceHead(n_classes=2, dim=2, margin=0.1, scale=64.0)
    with torch.no_grad():  # class 0 at 0°, class 1 at 90° (W is (dim, classes) in the library)
        head.pml.W.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    x = torch.tensor([E60])  # 60° from class 0, 30° from class 1
    out = head(x, torch.tensor([0]))
    expected = _ce([64 * math.cos(math.pi / 3 + 0.1), 64 * math.cos(math.pi / 6)], 0)
    assert out.item() == pytest.approx(expected, rel=1e-4)


def test_softmax_hand_computed():
    head = SoftmaxHead(n_classes=2, dim=2)
    with torch.no_grad():
        head.linear.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
        head.linear.bias.zero_()
    out = head(torch.tensor([[2.0, 1.0], [0.0, 3.0]]), torch.tensor([0, 0]))
    assert out.item() == pytest.approx((_ce([2, 1], 0) + _ce([0, 3], 0)) / 2, rel=1e-6)


def test_adacos_scale_update_and_loss_hand_computed():
    head = AdaCosHead(n_classes=3, dim=2)
    assert head.scale.item() == pytest.approx(math.sqrt(2) * math.log(2), rel=1e-6)
    with torch.no_grad():  # classes at 0°, 90°, 180°
        head.W.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]))
    x = torch.tensor([E60, E90])  # targets: class 0 (60° away), class 1 (0° away)
    y = torch.tensor([0, 1])
    s0 = math.sqrt(2) * math.log(2)
    cos = np.array([[0.5, math.sqrt(3) / 2, -0.5], [0.0, 1.0, 0.0]])
    b_avg = (math.exp(s0 * cos[0, 1]) + math.exp(s0 * cos[0, 2]) + math.exp(s0 * cos[1, 0]) +
             math.exp(s0 * cos[1, 2])) / 2
    theta_med = 0.0  # torch.median of (60°, 0°) is the lower middle value
    s1 = math.log(b_avg) / math.cos(min(math.pi / 4, theta_med))
    head.train()
    out = head(x, y)
    assert head.scale.item() == pytest.approx(s1, rel=1e-5)
    expected = (_ce(s1 * cos[0], 0) + _ce(s1 * cos[1], 1)) / 2
    assert out.item() == pytest.approx(expected, rel=1e-5)
    head.eval()  # no update outside training
    head(x, y)
    assert head.scale.item() == pytest.approx(s1, rel=1e-6)


def test_partner_sampler():
    labels = np.array([0, 1, 0, 2, 1, 0, 3])  # frames 2 and 3 have one instance each: no positive
    s = PartnerSampler(labels)
    rng = np.random.default_rng(0)
    anchors = np.repeat(np.arange(7), 200)
    pos, neg = s.positives(anchors, rng), s.negatives(anchors, rng)
    ok = pos >= 0
    lone = np.isin(anchors, [3, 6])
    assert (pos[lone] == -1).all() and ok[~lone].all()
    assert (labels[pos[ok]] == labels[anchors[ok]]).all() and (pos[ok] != anchors[ok]).all()
    assert (labels[neg] != labels[anchors]).all()
    # uniform over the candidates: anchor 0's positives are 2 and 5, its negatives the 4 others
    assert set(pos[anchors == 0]) == {2, 5} and set(neg[anchors == 0]) == {1, 3, 4, 6}
    # resampled per call (= per batch, so per epoch)
    assert not np.array_equal(s.negatives(anchors, rng), neg)


@pytest.mark.parametrize("make", [lambda: AdaCosHead(50, 384), lambda: ArcFaceHead(50, 384, margin=0.05),
                                  lambda: SoftmaxHead(50, 384)], ids=["adacos", "arcface", "softmax"])
def test_heads_stay_fp32_under_bf16_autocast(make):
    """The trainer's bf16 autocast must not reach the heads (it rounded cosines: ArcFace's loss moved ~2%,
    AdaCos's scale was rounded to bf16)."""
    g = torch.Generator().manual_seed(0)
    e, y = torch.randn(32, 384, generator=g), torch.randint(0, 50, (32,), generator=g)
    out = []
    for autocast in (False, True):
        torch.manual_seed(1)
        head = make()
        head.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = head(e, y)
        out.append((loss.item(), float(getattr(head, "scale", 0.0))))
    assert out[1][0] == pytest.approx(out[0][0], rel=1e-6, abs=1e-6)
    assert out[1][1] == pytest.approx(out[0][1], rel=1e-6)
