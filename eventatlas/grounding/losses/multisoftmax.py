"""Multi-positive in-batch softmax: every gold a positive, each ranked against the row's negatives only.

For mention i with positives P_i and negatives N_i among the batch's candidates (the targets of
:func:`.multilabel.batch_candidates`, pool negatives included)::

    L_i = 1/|P_i| * sum_{p in P_i} -log( e^{s_ip} / (e^{s_ip} + sum_{n in N_i} e^{s_in}) )
        = 1/|P_i| * sum_{p in P_i} softplus( logsumexp_{n in N_i} s_in - s_ip )

and L = mean_i L_i. With one gold it is BLINK's softmax cross-entropy (:mod:`.softmax`); unlike the
multi-label BCE (:mod:`.multilabel`) it is invariant to a shift of a row's scores, so it needs no
bias, and its gradient on a negative is that negative's softmax weight: the negatives that outrank a gold
get most of it. Why it exists (README "grounding", diagnosis of multilabel vs softmax): with the cosine
score and its bias near -scale/2, the BCE put only 0.19-0.33 of a positive's gradient weight on each
negative that outranked a gold (the softmax: 1.19), spending the rest on negatives already ranked below
every gold. The other golds of the mention are left out of each positive's denominator, so a mention's
atomic event and its ancestors never compete. Written here because no library (torch,
pytorch-metric-learning) ships a multi-positive cross-entropy over a (B, U) logit matrix with 0/1 targets.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def multipositive_softmax(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean over mentions of the mean over their golds of -log softmax(gold vs the row's negatives), for
    (B, U) logits and (B, U) 0/1 targets. A row without a positive is an error; a row without a negative
    costs 0 (softplus(-inf))."""
    if scores.shape != targets.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and targets {tuple(targets.shape)} differ")
    pos = targets.to(torch.bool)
    n_pos = pos.sum(dim=1)
    if bool((n_pos == 0).any()):
        raise ValueError(f"row(s) {torch.nonzero(n_pos == 0).flatten().tolist()} have no positive")
    s = scores.float()
    neg_lse = torch.logsumexp(s.masked_fill(pos, float("-inf")), dim=1, keepdim=True)  # (B, 1)
    per = F.softplus(neg_lse - s).masked_fill(~pos, 0.0)  # -log(e^s_p / (e^s_p + sum_n e^s_n)) at the positives
    return (per.sum(dim=1) / n_pos).mean()
