"""Margin (triplet) loss: the ablation that replaces InfoNCE (SWCC's "margin loss" row).

``mean over i, j != i of relu(margin - q_i.k_i + q_i.k_j)``: each event's dropout view must be closer
(in cosine) than every other in-batch event's by ``margin``. Written by hand because the
pytorch-metric-learning ``TripletMarginLoss`` is not a dependency of this project, and the loss is
two lines on the (B, B) similarity matrix that the InfoNCE terms already build.
"""
from __future__ import annotations

import torch

__all__ = ["margin_loss"]


def margin_loss(q: torch.Tensor, k: torch.Tensor, margin: float = 0.5) -> torch.Tensor:
    sim = q @ k.T
    pos = sim.diagonal()
    off = ~torch.eye(q.shape[0], dtype=torch.bool, device=q.device)
    return torch.relu(margin - pos[:, None] + sim)[off].mean()
