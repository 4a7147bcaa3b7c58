"""The detector's loss, hand-computed: identification CE over every word, typing CE over typed trigger words."""
from __future__ import annotations

import math

import pytest
import torch

from eventatlas.detection.loss import DetectionLoss
from eventatlas.detection.words import IGNORE


def test_loss_hand_computed():
    # one sentence of 3 words (+1 padding word); logits chosen so the softmaxes are easy
    ident = torch.tensor([[[0.0, 0.0, 0.0], [math.log(2), 0.0, 0.0], [0.0, math.log(3), 0.0], [5.0, 5.0, 5.0]]])
    typ = torch.tensor([[[0.0, 0.0], [0.0, 0.0], [math.log(3), 0.0], [9.0, 0.0]]])
    bio = torch.tensor([[0, 0, 1, IGNORE]])       # O, O, B, pad
    types = torch.tensor([[IGNORE, IGNORE, 0, IGNORE]])
    loss, terms = DetectionLoss(type_weight=0.5)(ident, typ, bio, types)
    # word 1: p(O) = 1/3; word 2: p(O) = 2/4; word 3: p(B) = 3/5 -> mean of -log
    ident_ce = (math.log(3) + math.log(2) + math.log(5 / 3)) / 3
    typing_ce = math.log(4 / 3)  # p(type 0) = 3/4 on the one typed word
    assert terms["identification"] == pytest.approx(ident_ce, rel=1e-6)
    assert terms["typing"] == pytest.approx(typing_ce, rel=1e-6)
    assert float(loss) == pytest.approx(ident_ce + 0.5 * typing_ce, rel=1e-6)


def test_no_typed_word_adds_nothing_and_keeps_the_graph():
    ident = torch.zeros(1, 2, 3, requires_grad=True)
    typ = torch.zeros(1, 2, 4, requires_grad=True)
    loss, terms = DetectionLoss()(ident, typ, torch.tensor([[0, 0]]), torch.full((1, 2), IGNORE))
    assert terms["typing"] == 0.0 and float(loss) == pytest.approx(math.log(3))
    loss.backward()
    assert typ.grad is not None and float(typ.grad.abs().sum()) == 0.0
