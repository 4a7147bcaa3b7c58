"""The BLINK bi-encoder baseline loss (Wu et al. 2020): in-batch softmax cross-entropy, one gold.

Each mention has a single gold (its atomic event, ``labels[0]``); the batch's candidates are the
distinct atomic golds, so two mentions of one event share its column instead of treating each other's
copy as a negative. The ancestors are not used: that is what the baseline lacks.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F


def batch_targets(atomic: Sequence[int]) -> tuple[list[int], torch.Tensor]:
    """Distinct candidate ids (first-seen order) and each mention's column."""
    order: dict[int, int] = {}
    for c in atomic:
        order.setdefault(int(c), len(order))
    return list(order), torch.tensor([order[int(c)] for c in atomic], dtype=torch.long)


def softmax_ce(scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of (B, U) logits against each mention's gold column."""
    return F.cross_entropy(scores, target)
