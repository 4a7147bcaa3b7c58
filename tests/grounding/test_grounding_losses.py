"""The grounding losses against hand-computed cases."""
from __future__ import annotations

import math

import pytest
import torch

from eventatlas.grounding.losses.hierarchy import ComplExHierarchy, hierarchy_bce
from eventatlas.grounding.losses.multilabel import batch_candidates, multilabel_bce
from eventatlas.grounding.losses.multisoftmax import multipositive_softmax
from eventatlas.grounding.losses.softmax import batch_targets, softmax_ce


def _bce(s, y):  # -[y log sigma(s) + (1 - y) log(1 - sigma(s))], written out
    return math.log(1 + math.exp(-s)) if y else math.log(1 + math.exp(s))


def test_multilabel_bce_shares_duplicate_golds():
    # mentions 0 and 1 share the parent event 5, mentions 0 and 2 the atomic event 0
    cands, y = batch_candidates([[0, 5], [1, 5], [0]])
    assert cands == [0, 5, 1]  # each distinct gold once, first-seen order
    assert y.tolist() == [[1, 1, 0], [0, 1, 1], [1, 0, 0]]  # event 5 is a positive for both mentions 0 and 1
    s = [[2.0, 0.0, -1.0], [0.0, 1.0, 3.0], [1.0, -2.0, 0.0]]
    want = sum(_bce(s[i][j], y[i, j].item()) for i in range(3) for j in range(3)) / 9
    assert multilabel_bce(torch.tensor(s), y).item() == pytest.approx(want, rel=1e-6)
    with pytest.raises(ValueError, match="differ"):
        multilabel_bce(torch.zeros(2, 3), y)


def test_softmax_ce_one_gold_with_shared_column():
    cands, t = batch_targets([3, 7, 3])
    assert cands == [3, 7] and t.tolist() == [0, 1, 0]
    s = [[1.0, 0.0], [0.0, 2.0], [0.5, 0.5]]

    def nll(row, k):
        return -(row[k] - math.log(sum(math.exp(v) for v in row)))

    want = (nll(s[0], 0) + nll(s[1], 1) + nll(s[2], 0)) / 3
    assert softmax_ce(torch.tensor(s), t).item() == pytest.approx(want, rel=1e-6)


def test_multipositive_softmax_each_gold_against_the_negatives_only():
    # the batch of test_multilabel_bce_shares_duplicate_golds plus one pool negative (column 3)
    _, y = batch_candidates([[0, 5], [1, 5], [0]])
    y = torch.cat([y, torch.zeros(3, 1)], dim=1)
    s = [[2.0, 0.0, -1.0, 1.0], [0.0, 1.0, 3.0, -1.0], [1.0, -2.0, 0.0, 0.5]]

    def nll(p, negs):  # -log(e^p / (e^p + sum e^n)), written out
        return -math.log(math.exp(p) / (math.exp(p) + sum(math.exp(n) for n in negs)))

    want = ((nll(2.0, [-1.0, 1.0]) + nll(0.0, [-1.0, 1.0])) / 2  # mention 0: golds 0 and 5 never compete
            + (nll(1.0, [0.0, -1.0]) + nll(3.0, [0.0, -1.0])) / 2
            + nll(1.0, [-2.0, 0.0, 0.5])) / 3
    got = multipositive_softmax(torch.tensor(s), y)
    assert got.item() == pytest.approx(want, rel=1e-6)
    # one gold per row: exactly BLINK's softmax cross-entropy
    one = torch.zeros(3, 4)
    one[[0, 1, 2], [0, 2, 3]] = 1
    assert multipositive_softmax(torch.tensor(s), one).item() == pytest.approx(
        softmax_ce(torch.tensor(s), torch.tensor([0, 2, 3])).item(), rel=1e-6)
    # shift-invariant per row (so no bias), unlike the BCE
    shifted = torch.tensor(s) + torch.tensor([[5.0], [-3.0], [10.0]])
    assert multipositive_softmax(shifted, y).item() == pytest.approx(want, rel=1e-5)
    assert multilabel_bce(shifted, y).item() != pytest.approx(multilabel_bce(torch.tensor(s), y).item())
    # a row of golds only costs 0 and gives finite (zero) gradients
    x = torch.tensor([[1.0, 2.0], [0.0, 1.0]], requires_grad=True)
    loss = multipositive_softmax(x, torch.tensor([[1.0, 1.0], [1.0, 0.0]]))
    loss.backward()
    assert loss.item() == pytest.approx(math.log(1 + math.exp(1.0)) / 2, rel=1e-6)
    assert torch.isfinite(x.grad).all() and x.grad[0].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="no positive"):
        multipositive_softmax(torch.zeros(2, 2), torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="differ"):
        multipositive_softmax(torch.zeros(2, 3), y)


def _toy_complex():
    m = ComplExHierarchy(2)
    with torch.no_grad():
        m.re.weight.copy_(torch.eye(2))
        m.im.weight.copy_(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))  # Im swaps the coordinates
        m.re.bias.zero_()
        m.im.bias.zero_()
        m.r_im.copy_(torch.tensor([1.0, 2.0]))
    return m


def test_complex_score_hand_computed_and_asymmetric():
    m = _toy_complex()
    p, c = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, -1.0]])
    # Re(p)=[1,2] Im(p)=[2,1] Re(c)=[3,-1] Im(c)=[-1,3] Im(r)=[1,2]
    # s(p,c) = [2,1].[3,-2] - [1,2].[-1,6] = 4 - 11 = -7 ; s(c,p) = [-1,3].[1,4] - [3,-1].[2,2] = 11 - 4 = 7
    assert m.score(p, c).item() == pytest.approx(-7.0)
    assert m.score(c, p).item() == pytest.approx(7.0)
    assert m.score_matrix(torch.cat([p, c]), torch.cat([p, c])).flatten().tolist() == pytest.approx([0.0, -7.0, 7.0, 0.0])
    with torch.no_grad():
        m.re.bias.fill_(0.5)  # biases keep the asymmetry (s(c, p) = -s(p, c) for any W, b, r)
    assert m.score(p, c).item() == pytest.approx(-m.score(c, p).item()) and m.score(p, c).item() != 0


def test_hierarchy_bce_in_batch_negatives():
    m = _toy_complex()
    emb = torch.tensor([[1.0, 2.0], [3.0, -1.0]])  # event 0 is the parent of event 1
    loss = hierarchy_bce(m, emb, torch.tensor([0]), torch.tensor([[0.0, 1.0]]))
    assert loss.item() == pytest.approx((_bce(0.0, 0) + _bce(-7.0, 1)) / 2, rel=1e-6)
    loss.backward()
    assert m.r_im.grad is not None and m.r_im.grad.abs().sum() > 0
