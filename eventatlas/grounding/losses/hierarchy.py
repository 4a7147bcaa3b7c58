"""The ComplEx hierarchy score and loss (Ou et al. 2023, sec. 3.2; Trouillon et al. 2016).

On candidate (event) embeddings e: Re(e) = W_Re e + b_Re, Im(e) = W_Im e + b_Im (d x d each) and a
learnable relation r; only its imaginary part enters the asymmetric term the paper keeps:

    s(p, c) = Im(e_p) . (Re(e_c) * Im(r)) - Re(e_p) . (Im(e_c) * Im(r))

so s(c, p) = -s(p, c): the score tells the parent from the child. The loss is the BCE of s over N_h
sampled parents of a batch against every in-batch event, the children of p present in the batch being
the positives (in-batch negatives). Written here: no library has this ComplEx variant.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ComplExHierarchy(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.re = nn.Linear(dim, dim)
        self.im = nn.Linear(dim, dim)
        self.r_im = nn.Parameter(torch.empty(dim).normal_(0.0, dim ** -0.5))

    def score_matrix(self, parents: torch.Tensor, children: torch.Tensor) -> torch.Tensor:
        """(P, d) parents x (C, d) children -> (P, C) scores s(p, c)."""
        re_p, im_p = self.re(parents), self.im(parents)
        re_c, im_c = self.re(children), self.im(children)
        return im_p @ (re_c * self.r_im).T - re_p @ (im_c * self.r_im).T

    def score(self, parent: torch.Tensor, child: torch.Tensor) -> torch.Tensor:
        """Row-wise s(p_i, c_i) of two (N, d) batches."""
        re_p, im_p = self.re(parent), self.im(parent)
        re_c, im_c = self.re(child), self.im(child)
        return (im_p * re_c * self.r_im).sum(-1) - (re_p * im_c * self.r_im).sum(-1)


def hierarchy_bce(model: ComplExHierarchy, embeddings: torch.Tensor, parents: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    """BCE of s(p, c) for the sampled ``parents`` (indices into the (U, d) in-batch ``embeddings``)
    against every in-batch event; ``positives`` (P, U) is 1 where c is a child of p."""
    s = model.score_matrix(embeddings[parents], embeddings)
    return F.binary_cross_entropy_with_logits(s, positives.to(s.dtype))
