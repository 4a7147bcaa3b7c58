"""Prototype clustering loss (SwAV, Caron et al. 2020, as used by SWCC): Sinkhorn-Knopp targets and
swapped prediction between two views.

``C`` (M, d) prototypes are L2-normalised on each forward; scores ``s = z C^T / tau``. Targets are the
Sinkhorn-Knopp equipartition of ``exp(z C^T / eps)`` (eps 0.05, 3 iterations, no gradient): every
row sums to 1 and every prototype receives about B/M of the batch. The swapped loss is
``-0.5 * mean_i [ q2_i . log softmax(s1_i) + q1_i . log softmax(s2_i) ]``.

The optional entropy regulariser (``entropy_weight`` = eps_H; in the authors' code at 0.05, not in the
paper, default 0 here) adds ``eps_H * mean_i H(softmax(s_i))`` over both views: the mean entropy of the
per-event prototype distributions (our reading of the code; recorded in the run's params).

Sinkhorn-Knopp is written by hand (a few tensor lines, as in the SwAV reference code): none of the
project's libraries provides it for torch tensors.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["sinkhorn", "swapped_prediction", "prototype_entropy", "prototype_loss"]


@torch.no_grad()
def sinkhorn(scores: torch.Tensor, eps: float = 0.05, iters: int = 3) -> torch.Tensor:
    """(B, M) soft assignments from (B, M) raw scores ``z C^T``: rows sum to 1, columns to ~B/M."""
    Q = torch.exp((scores - scores.max()) / eps).T  # (M, B); the max shift cancels in the normalisations
    Q /= Q.sum()
    M, B = Q.shape
    for _ in range(iters):
        Q /= Q.sum(dim=1, keepdim=True)
        Q /= M
        Q /= Q.sum(dim=0, keepdim=True)
        Q /= B
    return (Q * B).T


def swapped_prediction(s1: torch.Tensor, s2: torch.Tensor, q1: torch.Tensor, q2: torch.Tensor) -> torch.Tensor:
    """``-0.5 * mean_i [q2_i . log softmax(s1_i) + q1_i . log softmax(s2_i)]``."""
    return -0.5 * ((q2 * F.log_softmax(s1, dim=1)).sum(1).mean() + (q1 * F.log_softmax(s2, dim=1)).sum(1).mean())


def prototype_entropy(*scores: torch.Tensor) -> torch.Tensor:
    """Mean entropy of softmax(s_i) over the rows of every score matrix given."""
    ents = [-(F.softmax(s, 1) * F.log_softmax(s, 1)).sum(1).mean() for s in scores]
    return torch.stack(ents).mean()


def prototype_loss(z1: torch.Tensor, z2: torch.Tensor, prototypes: torch.Tensor, *, tau: float = 0.3,
                   eps: float = 0.05, iters: int = 3, entropy_weight: float = 0.0
                   ) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:
    """Swapped prediction of two views' prototype assignments (+ the optional entropy term).
    Returns (loss, terms, assignment of view 1 = argmax of its scores)."""
    C = F.normalize(prototypes, dim=1)
    r1, r2 = z1 @ C.T, z2 @ C.T
    q1, q2 = sinkhorn(r1.detach(), eps, iters), sinkhorn(r2.detach(), eps, iters)
    s1, s2 = r1 / tau, r2 / tau
    loss = swapped_prediction(s1, s2, q1, q2)
    terms = {"proto_swap": float(loss.detach())}
    if entropy_weight:
        h = prototype_entropy(s1, s2)
        terms["proto_entropy"] = float(h.detach())
        loss = loss + entropy_weight * h
    return loss, terms, r1.detach().argmax(1)
