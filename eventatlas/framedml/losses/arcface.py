"""ArcFace loss of frame_dml (scale 64, additive angular margin m on the target logit).

pytorch-metric-learning's ``ArcFaceLoss`` (its class-weight matrix ``W`` is the head trained in its
own optimiser group). Its ``margin`` is in *degrees*; the paper's margins (0.01 ... 0.1) are radians,
so ``margin`` here is radians and converted. Computed in fp32 even inside the trainer's bf16
autocast (:func:`~eventatlas.modeling.device.without_autocast`): at scale 64 bf16 cosines moved the loss by ~2%.
"""
from __future__ import annotations

import math

import torch
from pytorch_metric_learning.losses import ArcFaceLoss

from ...modeling.device import without_autocast


class ArcFaceHead(torch.nn.Module):
    """``forward(embeddings (B, d), labels (B,)) -> scalar``; ``margin`` in radians."""

    def __init__(self, n_classes: int, dim: int, margin: float = 0.05, scale: float = 64.0):
        super().__init__()
        self.margin, self.scale = float(margin), float(scale)
        self.pml = ArcFaceLoss(num_classes=n_classes, embedding_size=dim, margin=math.degrees(self.margin),
                               scale=self.scale)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with without_autocast(embeddings):
            return self.pml(embeddings.float(), labels)
