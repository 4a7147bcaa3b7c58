"""Softmax classification loss of frame_dml: a linear head over the training frames + cross-entropy.

Plain ``torch.nn.Linear`` + ``cross_entropy`` (no library needed); the head is trained in its own
optimiser group (``TrainingArgs.head_lr``); computed in fp32 even inside the trainer's bf16 autocast
(:func:`~eventatlas.modeling.device.without_autocast`).
"""
from __future__ import annotations

import torch

from ...modeling.device import without_autocast


class SoftmaxHead(torch.nn.Module):
    def __init__(self, n_classes: int, dim: int):
        super().__init__()
        self.linear = torch.nn.Linear(dim, n_classes)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with without_autocast(embeddings):
            return torch.nn.functional.cross_entropy(self.linear(embeddings.float()), labels)
