"""MLM auxiliary loss: one random non-special token of each event replaced by the mask token, and
cross-entropy of the MLM head's prediction at that position (SWCC's ``m`` view).

``mask_one_token`` never picks a special token ([CLS], [SEP], padding or any id in the tokenizer's
``all_special_ids``); a row without a maskable token is left unmasked and carries no label. Labels are
-100 everywhere except the masked position (the convention of ``F.cross_entropy(ignore_index=-100)``).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import torch
import torch.nn.functional as F

IGNORE = -100

__all__ = ["IGNORE", "mask_one_token", "mlm_loss"]


def mask_one_token(ids: list[list[int]], special_ids: Iterable[int], mask_id: int, rng: np.random.Generator
                   ) -> tuple[list[list[int]], list[list[int]]]:
    """(masked ids, labels) per row; see the module doc."""
    special = set(int(x) for x in special_ids)
    out, labels = [], []
    for row in ids:
        cand = [j for j, t in enumerate(row) if int(t) not in special]
        lab = [IGNORE] * len(row)
        new = list(row)
        if cand:
            j = cand[int(rng.integers(len(cand)))]
            lab[j], new[j] = int(row[j]), int(mask_id)
        out.append(new)
        labels.append(lab)
    return out, labels


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the labelled positions of (B, T, V) logits; 0 when nothing is labelled."""
    if not bool((labels != IGNORE).any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE)
