"""AdaCos loss of frame_dml (Zhang et al. 2019), written here because pytorch-metric-learning has none.

Logits ``s·cos θ_j`` with θ_j the angle between the L2-normalised embedding and class weight j; no
margin. The scale starts at ``√2·log(C − 1)`` and is updated on every training batch (before its
loss, without gradient) to ``log(B_avg) / cos(min(π/4, θ_med))``, where ``B_avg`` is the batch mean
of Σ over non-target classes of exp(s·cos θ_j) under the current scale and ``θ_med`` the median
target angle. The scale is a buffer, so checkpoints keep it. Computed in fp32 even inside the
trainer's bf16 autocast (:func:`~eventatlas.modeling.device.without_autocast`): bf16 cosines rounded the scale and the logits.
"""
from __future__ import annotations

import math

import torch

from ...modeling.device import without_autocast


class AdaCosHead(torch.nn.Module):
    def __init__(self, n_classes: int, dim: int):
        super().__init__()
        if n_classes < 2:
            raise ValueError(f"AdaCos needs >= 2 classes, got {n_classes}")
        self.W = torch.nn.Parameter(torch.empty(n_classes, dim))
        torch.nn.init.xavier_uniform_(self.W)
        self.register_buffer("scale", torch.tensor(math.sqrt(2.0) * math.log(n_classes - 1)))

    def cosines(self, embeddings: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.normalize(embeddings.float(), dim=1)
        w = torch.nn.functional.normalize(self.W, dim=1)
        return (x @ w.T).clamp(-1.0, 1.0)

    @torch.no_grad()
    def update_scale(self, cos: torch.Tensor, labels: torch.Tensor) -> None:
        onehot = torch.nn.functional.one_hot(labels, cos.shape[1]).bool()
        b_avg = torch.where(onehot, torch.zeros_like(cos), torch.exp(self.scale * cos)).sum(1).mean()
        theta_med = torch.median(torch.acos(cos[onehot]))
        self.scale.copy_(torch.log(b_avg) / torch.cos(torch.clamp(theta_med, max=math.pi / 4)))

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with without_autocast(embeddings):
            cos = self.cosines(embeddings)
            if self.training:
                self.update_scale(cos.detach(), labels)
            return torch.nn.functional.cross_entropy(self.scale * cos, labels)
