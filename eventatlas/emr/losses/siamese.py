"""The Siamese EMR loss (one loss per module): ``y·max(1 − S, 0)² + (1 − y)·S²`` over pairs.

``S`` is the cosine of the two branch outputs, ``y`` = 1 for a same-class pair, 0 otherwise: a
same-class pair is pulled to S = 1, any other pair to S = 0 (orthogonal, also from below).
Written by hand: pytorch-metric-learning's ``ContrastiveLoss`` takes labelled embeddings and forms
all pairs, and its negative term is a hinge ``max(S − margin, 0)`` that leaves negative cosines
unpenalised; here the pairs are given explicitly (query shots x unlabelled outside mentions).
"""
from __future__ import annotations

import torch


def siamese_loss(S: torch.Tensor, y: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Per-pair ``y·relu(1 − S)² + (1 − y)·S²``; ``reduction``: ``mean`` over the last dimension
    (one mean per leading index, e.g. per query network), ``sum`` likewise, or ``none``."""
    y = y.to(S.dtype)
    per = y * torch.clamp(1.0 - S, min=0.0) ** 2 + (1.0 - y) * S ** 2
    if reduction == "none":
        return per
    if reduction == "mean":
        return per.mean(dim=-1)
    if reduction == "sum":
        return per.sum(dim=-1)
    raise ValueError(f"reduction must be mean, sum or none, got {reduction!r}")
