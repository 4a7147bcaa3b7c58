"""The supervised contrastive loss of the retrieval-tuned encoder (one loss per module): every other
mention of the same type in the batch is a positive, every mention of another type an in-batch negative.

For anchor i with positives P(i) (same label, not i) and A(i) = every other item of the batch:
``L_i = -1/|P(i)| · Σ_{p∈P(i)} log( exp(s_ip/τ) / Σ_{a∈A(i)} exp(s_ia/τ) )``, s = cosine; the loss is the
mean over the anchors that have a positive (Khosla et al. 2020, the "L_out" form). pytorch-metric-learning's
``SupConLoss`` computes exactly this (its cosine distance normalises the embeddings), so it is used as is;
this module fixes its temperature and reducer and names the call.
"""
from __future__ import annotations

import torch
from pytorch_metric_learning.losses import SupConLoss


class SupervisedContrastiveLoss(torch.nn.Module):
    """``forward(embeddings (B, d), labels (B,) int) -> scalar``; τ = ``temperature``."""

    def __init__(self, temperature: float = 0.1):
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)
        self.pml = SupConLoss(temperature=self.temperature)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.pml(embeddings.float(), labels)
