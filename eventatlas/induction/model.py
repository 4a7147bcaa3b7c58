"""Batch-attention clusterer of Edwards & Ji (EACL 2023) on top of a fine-tuned HF encoder.

F  = L2-normalised mention representation (mean pool over the sentence, or over the trigger pieces)
Q, K = MLP_q(F), MLP_k(F), each Linear(d,d) -> ReLU -> Dropout -> Linear(d,d) -> ReLU -> LayerNorm
       -> Dropout -> Linear(d,d)
S  = Q K^T / sqrt(d)  (over the minibatch),  F_hat = softmax(S, dim=1) F

The published code applies *one* LayerNorm module to both Q and K (its ``lnq`` is never used);
``share_layernorm=True`` reproduces that, the default keeps them separate as the paper describes.
"""
from __future__ import annotations

import math
import torch
from torch import nn
import torch.nn.functional as Fn

REPRESENTATIONS = ("sentence", "trigger")


class ProjectionMLP(nn.Module):
    """Linear(d,d) -> ReLU -> Dropout -> Linear(d,d) -> ReLU -> LayerNorm -> Dropout -> Linear(d,d)."""

    def __init__(self, d: int, dropout: float = 0.1, layernorm: nn.LayerNorm | None = None):
        super().__init__()
        self.fc1 = nn.Linear(d, d)
        self.fc2 = nn.Linear(d, d)
        self.fc3 = nn.Linear(d, d)
        self.drop = nn.Dropout(dropout)
        self.ln = layernorm if layernorm is not None else nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(Fn.relu(self.fc1(x)))
        h = self.ln(Fn.relu(self.fc2(h)))
        return self.fc3(self.drop(h))


class Clusterer(nn.Module):
    """Q/K MLPs, scaled dot-product scores S and the attention-pooled features F_hat."""

    def __init__(self, d: int, dropout: float = 0.1, share_layernorm: bool = False):
        super().__init__()
        self.d = d
        shared = nn.LayerNorm(d) if share_layernorm else None
        self.query = ProjectionMLP(d, dropout, shared)
        self.key = ProjectionMLP(d, dropout, shared)
        self.share_layernorm = share_layernorm

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return q @ k.transpose(0, 1) / math.sqrt(self.d)

    def forward(self, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return ``(S, F_hat, Q, K)`` for a batch ``f`` of shape (n, d)."""
        q, k = self.query(f), self.key(f)
        s = self.scores(q, k)
        # softmax in float32 even under bf16 autocast: rows must sum to 1 (convex combinations)
        attn = torch.softmax(s.float(), dim=1)
        f_hat = attn @ f.float()
        return s, f_hat, q, k


class NamingHead(nn.Module):
    """1-hidden-layer MLP on F_hat predicting the type-name (or frame-definition) embedding."""

    def __init__(self, d_in: int, d_out: int, hidden: int | None = None):
        super().__init__()
        hidden = hidden or d_in
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class InductionModel(nn.Module):
    """The shared mention encoder (:class:`eventatlas.modeling.MentionEncoder`) + clusterer + optional
    naming head. F = L2-normalised pooled mention representation (trigger pieces or the sentence)."""

    def __init__(self, encoder: nn.Module, *, dropout: float = 0.1, share_layernorm: bool = False,
                 name_dim: int | None = None):
        super().__init__()
        self.encoder = encoder
        self.dim = int(encoder.hidden_size)
        self.clusterer = Clusterer(self.dim, dropout=dropout, share_layernorm=share_layernorm)
        self.head = NamingHead(self.dim, name_dim) if name_dim else None

    def features(self, batch: dict[str, torch.Tensor], representation: str) -> torch.Tensor:
        return Fn.normalize(self.encoder.encode_batch(batch, representation).float(), p=2, dim=1)

    def forward(self, batch: dict[str, torch.Tensor], representation: str) -> dict[str, torch.Tensor]:
        f = self.features(batch, representation)
        s, f_hat, q, k = self.clusterer(f)
        out = {"F": f, "S": s, "F_hat": f_hat, "Q": q, "K": k}
        if self.head is not None:
            out["name"] = self.head(f_hat)
        return out
