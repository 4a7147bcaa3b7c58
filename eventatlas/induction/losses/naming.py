"""Naming loss of batch_attention's auxiliary head (Edwards & Ji 2023): the head maps a seen mention's
features F_hat_i towards B_t, the untuned encoder's embedding of its type's name:
``L = mean over the seen mentions of (1 - cos(head(F_hat_i), B_t_i))`` (0 when the batch has none)."""
from __future__ import annotations

import torch
import torch.nn.functional as Fn


def naming_loss(pred: torch.Tensor, target: torch.Tensor, seen_mask: torch.Tensor) -> torch.Tensor:
    """1 - cos(head(F_hat_i), B_t_i) averaged over the seen mentions of the batch (0 when none)."""
    if not bool(seen_mask.any()):
        return pred.sum() * 0.0
    cos = Fn.cosine_similarity(pred[seen_mask].float(), target[seen_mask].float(), dim=1)
    return (1.0 - cos).mean()
