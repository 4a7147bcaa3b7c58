"""Multi-label in-batch binary cross-entropy (Ou et al. 2023, eq. 1).

The candidates of a batch are the *distinct* gold events of its mentions (atomic events and their
ancestors, each once); every gold of a mention is a positive for it, every other in-batch candidate a
negative. So two mentions sharing a gold (e.g. the same parent event) both treat that one column as
positive: no mention is pushed away from its own gold because another mention brought it.
Written here because no library ships the in-batch target construction; the BCE itself is torch's.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F


def batch_candidates(golds: Sequence[Sequence[int]]) -> tuple[list[int], torch.Tensor]:
    """Distinct candidate ids of a batch (first-seen order) and the (B, U) 0/1 target matrix."""
    order: dict[int, int] = {}
    for g in golds:
        for c in g:
            order.setdefault(int(c), len(order))
    y = torch.zeros(len(golds), len(order))
    for i, g in enumerate(golds):
        for c in g:
            y[i, order[int(c)]] = 1.0
    return list(order), y


def multilabel_bce(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of (B, U) logits (mention x in-batch candidate dot products) against
    the (B, U) 0/1 targets of :func:`batch_candidates`."""
    if scores.shape != targets.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and targets {tuple(targets.shape)} differ")
    return F.binary_cross_entropy_with_logits(scores, targets.to(scores.dtype))
