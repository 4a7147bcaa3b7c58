"""Triplet loss of frame_dml: ``max(0, d²(a, p) − d²(a, n) + m)`` per anchor, d = Euclidean
distance of the L2-normalised embeddings, averaged over the anchors (zero terms included).

pytorch-metric-learning's ``TripletMarginLoss`` with ``LpDistance(power=2)`` (squared distances)
and the explicit (anchor, positive, negative) triplets the sampler drew; ``MeanReducer`` instead of
the library's default average over non-zero terms, so the loss is the plain mean of the formula.
"""
from __future__ import annotations

import torch
from pytorch_metric_learning.distances import LpDistance
from pytorch_metric_learning.losses import TripletMarginLoss
from pytorch_metric_learning.reducers import MeanReducer


class TripletLoss(torch.nn.Module):
    """``forward(anchors, positives, negatives)`` (each (B, d)) -> scalar."""

    def __init__(self, margin: float = 0.5):
        super().__init__()
        self.margin = float(margin)
        self.pml = TripletMarginLoss(margin=self.margin, distance=LpDistance(normalize_embeddings=True, p=2, power=2),
                                     reducer=MeanReducer(), swap=False, smooth_loss=False)

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        b = anchors.shape[0]
        emb = torch.cat([anchors, positives, negatives]).float()
        ar = torch.arange(b, device=emb.device)
        labels = torch.zeros(3 * b, dtype=torch.long, device=emb.device)  # unused: triplets are explicit
        return self.pml(emb, labels, indices_tuple=(ar, ar + b, ar + 2 * b))
