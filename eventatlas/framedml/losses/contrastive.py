"""Contrastive (Siamese) loss of frame_dml: ``L = ½[y·d² + (1 − y)·max(0, m − d)²]`` per pair,
d = Euclidean distance of the L2-normalised embeddings, averaged over the pairs.

Built on pytorch-metric-learning's ``ContrastiveLoss`` (pairs given as an ``indices_tuple``, its
``LpDistance`` normalising the embeddings); its per-pair terms are ``relu(d − m_pos)`` and
``relu(m_neg − d)`` without squares and it averages positive and negative pairs separately, so the
two terms are squared here and the per-pair losses (``DoNothingReducer``) averaged over all pairs.
"""
from __future__ import annotations

import torch
from pytorch_metric_learning.distances import LpDistance
from pytorch_metric_learning.losses import ContrastiveLoss
from pytorch_metric_learning.reducers import DoNothingReducer


class _SquaredContrastive(ContrastiveLoss):
    def pos_calc(self, pos_pair, margin):
        return torch.nn.functional.relu(pos_pair - margin) ** 2

    def neg_calc(self, neg_pair, margin):
        return torch.nn.functional.relu(margin - neg_pair) ** 2


class PairContrastiveLoss(torch.nn.Module):
    """``forward(anchors (B, d), partners (B, d), same (B,) bool) -> scalar``: one pair per anchor."""

    def __init__(self, margin: float = 0.5):
        super().__init__()
        self.margin = float(margin)
        self.pml = _SquaredContrastive(pos_margin=0.0, neg_margin=self.margin,
                                       distance=LpDistance(normalize_embeddings=True, p=2, power=1),
                                       reducer=DoNothingReducer())

    def forward(self, anchors: torch.Tensor, partners: torch.Tensor, same: torch.Tensor) -> torch.Tensor:
        b = anchors.shape[0]
        emb = torch.cat([anchors, partners]).float()
        ar = torch.arange(b, device=emb.device)
        same = same.to(torch.bool).to(emb.device)
        a1, p = ar[same], ar[same] + b
        a2, n = ar[~same], ar[~same] + b
        labels = torch.zeros(2 * b, dtype=torch.long, device=emb.device)  # unused: pairs are explicit
        out = self.pml(emb, labels, indices_tuple=(a1, p, a2, n))
        total = emb.new_zeros(())
        for part in ("pos_loss", "neg_loss"):
            losses = out[part]["losses"]
            if isinstance(losses, torch.Tensor) and losses.numel():
                total = total + losses.sum()
        return 0.5 * total / b
