"""Weakly supervised multi-positive InfoNCE (SWCC, Gao et al. 2022, eq. 1-3).

All inputs are L2-normalised (B, d) views: ``q`` the query view of each event, ``k1``/``k2`` two more
dropout views of the same events, ``p`` one co-occurring event per row (weak positive).

* self-supervised term: ``0.5 * (CE(q k1^T / tau, diag) + CE(q k2^T / tau, diag))`` (in-batch negatives);
* weak term: ``mean_i w_i * -log(e^{q_i.p_i/tau} / (e^{q_i.p_i/tau} + sum_{j != i} e^{q_i.k1_j/tau}))``
  with ``w_i`` the (min-max normalised) co-occurrence weight of the pair (q_i, p_i);
* ``L_cl = self + weak``.

Written by hand (on ``torch.nn.functional.cross_entropy`` / ``logsumexp``): pytorch-metric-learning's
NTXentLoss has neither per-row positive weights nor a positive whose negatives come from another view.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

TAU = 0.3

__all__ = ["TAU", "self_supervised_infonce", "weak_infonce", "swcc_infonce"]


def _check(*xs: torch.Tensor) -> None:
    shapes = {tuple(x.shape) for x in xs}
    if len(shapes) != 1 or xs[0].dim() != 2:
        raise ValueError(f"views must be (B, d) tensors of one shape, got {sorted(shapes)}")


def self_supervised_infonce(q: torch.Tensor, views: list[torch.Tensor], tau: float = TAU) -> torch.Tensor:
    """Mean over ``views`` of CE(q v^T / tau, diag): row i's positive is view i of the same event."""
    _check(q, *views)
    target = torch.arange(q.shape[0], device=q.device)
    return torch.stack([F.cross_entropy(q @ v.T / tau, target) for v in views]).mean()


def weak_infonce(q: torch.Tensor, p: torch.Tensor, k1: torch.Tensor, w: torch.Tensor, tau: float = TAU) -> torch.Tensor:
    """``mean_i w_i * -log softmax([q_i.p_i, q_i.k1_j (j != i)] / tau)[0]`` (see the module doc)."""
    _check(q, p, k1)
    if w.shape != (q.shape[0],):
        raise ValueError(f"weights must be ({q.shape[0]},), got {tuple(w.shape)}")
    pos = (q * p).sum(-1) / tau
    neg = (q @ k1.T / tau).masked_fill(torch.eye(q.shape[0], dtype=torch.bool, device=q.device), float("-inf"))
    logits = torch.cat([pos[:, None], neg], dim=1)
    nll = torch.logsumexp(logits, dim=1) - pos
    return (w.to(nll.dtype) * nll).mean()


def swcc_infonce(q, k1, k2, p, w, tau: float = TAU, *, weak: bool = True, second_view: bool = True
                 ) -> tuple[torch.Tensor, dict[str, float]]:
    """``L_cl``: the self-supervised term over (k1, k2) (only k1 with ``second_view=False``: plain
    InfoNCE), plus the weak term when ``weak``. Returns (loss, terms)."""
    self_term = self_supervised_infonce(q, [k1, k2] if second_view else [k1], tau)
    terms = {"cl_self": float(self_term.detach())}
    if not weak:
        return self_term, terms
    weak_term = weak_infonce(q, p, k1, w, tau)
    terms["cl_weak"] = float(weak_term.detach())
    return self_term + weak_term, terms
