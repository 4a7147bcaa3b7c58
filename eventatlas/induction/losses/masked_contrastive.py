"""Masked semi-supervised contrastive loss (Edwards & Ji 2023, eq. for L(Q, K)).

P = sigmoid(S), S = Q K^T / sqrt(d)
O = one-hot of the seen type of each mention (zero row for an unseen mention)
Y = (O O^T) OR I                         positives: same seen type, and every mention with itself
M = NOT(unseen_i AND unseen_j) OR I      pairs of two unseen mentions carry no label -> masked out
pseudo (optional): unseen-unseen pairs marked as confident neighbours (mutual nearest
       neighbours of the untuned encoder) become positives: Y_ij = M_ij = 1 for them
margin: a negative (Y = 0) whose P is already < m contributes nothing
L = sum_ij M_ij * BCE(P_ij, Y_ij) / n^2  (mean over all n^2 entries, as the published code does,
                                          not over the unmasked ones)
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as Fn


def label_matrices(seen_labels: torch.Tensor, pseudo: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``seen_labels`` (n,) int: seen-type index, or -1 for an unseen mention -> (Y, M) as bool.

    ``pseudo`` (n, n) bool: pseudo-positive pairs; only those between two unseen mentions are used
    (a seen mention's pairs are already labelled)."""
    n = seen_labels.shape[0]
    eye = torch.eye(n, dtype=torch.bool, device=seen_labels.device)
    seen = seen_labels >= 0
    same = (seen_labels[:, None] == seen_labels[None, :]) & seen[:, None] & seen[None, :]
    y = same | eye
    m = ~((~seen)[:, None] & (~seen)[None, :]) | eye
    if pseudo is not None:
        p = pseudo.to(torch.bool) & (~seen)[:, None] & (~seen)[None, :]
        y, m = y | p, m | p
    return y, m


def masked_contrastive_loss(s: torch.Tensor, seen_labels: torch.Tensor, margin: float = 0.5,
                            pseudo: torch.Tensor | None = None) -> torch.Tensor:
    """L(Q, K) for a score matrix ``s`` (n, n) (logits, before the sigmoid)."""
    s = s.float()
    y, m = label_matrices(seen_labels, pseudo)
    yf = y.float()
    # BCE on logits is the numerically stable form of BCE(sigmoid(s), y); torch's BCELoss clamps
    # log at -100, which only matters for |s| > 100 (never reached with LayerNorm'd Q/K).
    bce = Fn.binary_cross_entropy_with_logits(s, yf, reduction="none")
    p = torch.sigmoid(s)
    keep = m & ~(~y & (p < margin))
    return (bce * keep.float()).sum() / (s.shape[0] * s.shape[1])


def augmented_loss(q: torch.Tensor, k: torch.Tensor, q2: torch.Tensor, k2: torch.Tensor,
                   seen_labels: torch.Tensor, margin: float = 0.5,
                   pseudo: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """L(Q,K) + L(Q',K') + L(Q,K') + L(Q',K); ' is the augmented copy of the same batch."""
    scale = 1.0 / math.sqrt(q.shape[1])
    parts = {
        "qk": masked_contrastive_loss(q @ k.T * scale, seen_labels, margin, pseudo),
        "q2k2": masked_contrastive_loss(q2 @ k2.T * scale, seen_labels, margin, pseudo),
        "qk2": masked_contrastive_loss(q @ k2.T * scale, seen_labels, margin, pseudo),
        "q2k": masked_contrastive_loss(q2 @ k.T * scale, seen_labels, margin, pseudo),
    }
    total = parts["qk"] + parts["q2k2"] + parts["qk2"] + parts["q2k"]
    return total, {k_: float(v.detach()) for k_, v in parts.items()}
