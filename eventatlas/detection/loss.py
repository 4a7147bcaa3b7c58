"""The detector's loss: identification and typing, both token-level cross-entropies.

``identification``: mean cross-entropy of the O/B/I label over every word (the unannotated words of a fully
annotated sentence are the negatives); ``typing``: mean cross-entropy of the type over the words inside gold
triggers whose type is in the inventory. Loss = identification + ``type_weight`` x typing (a batch without
a typed trigger word adds 0). Written out because it is two ``torch.nn.functional.cross_entropy`` calls with
ignore indices; no metric-learning library has a token-tagging loss.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .words import IGNORE


class DetectionLoss(torch.nn.Module):
    def __init__(self, type_weight: float = 1.0):
        super().__init__()
        self.type_weight = float(type_weight)

    def forward(self, ident_logits: torch.Tensor, type_logits: torch.Tensor, bio: torch.Tensor,
                types: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        """``ident_logits`` (B, W, 3), ``type_logits`` (B, W, T); ``bio`` / ``types`` (B, W) with ``IGNORE``
        on padding (and, for ``types``, outside triggers)."""
        ident = F.cross_entropy(ident_logits.reshape(-1, ident_logits.shape[-1]), bio.reshape(-1), ignore_index=IGNORE)
        typed = types.reshape(-1) != IGNORE
        if bool(typed.any()):
            typing = F.cross_entropy(type_logits.reshape(-1, type_logits.shape[-1])[typed], types.reshape(-1)[typed])
        else:
            typing = type_logits.sum() * 0.0  # keeps the graph (and DDP) whole
        return ident + self.type_weight * typing, {"identification": float(ident.detach()), "typing": float(typing.detach())}
