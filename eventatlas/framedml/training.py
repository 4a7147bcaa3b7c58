"""The frame_dml model and its :class:`eventatlas.training.TrainTask`.

:class:`DMLModel` = the shared :class:`~eventatlas.modeling.MentionEncoder` (attribute ``encoder``,
trained at ``lr``) plus the loss module; a classification loss's class weights (softmax, ArcFace,
AdaCos) are the only other parameters, so the training core's default groups put them in their own
optimiser group at ``head_lr``.

:class:`DMLTask` batches the training instances (length-bucketed by the core). For the pair losses
each batch draws its partners with the checkpointed task RNG (:class:`.sampling.PartnerSampler`),
so they are resampled every epoch: contrastive = per anchor a positive or a negative with
probability ½ (a negative when the frame has no other instance); triplet = one positive and one
negative per anchor (anchors without a positive are left out of that batch). Anchors and partners
go through the encoder as length-sorted sub-batches (each padded to its own longest input).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from ..modeling.inputs import ModelInput
from . import LOSSES
from .sampling import PartnerSampler


class DMLModel(torch.nn.Module):
    def __init__(self, encoder, loss: str, *, n_classes: int, margin: float, scale: float = 64.0):
        super().__init__()
        if loss not in LOSSES:
            raise ValueError(f"unknown loss {loss!r}; one of {LOSSES}")
        self.encoder, self.loss_name = encoder, loss
        dim = encoder.hidden_size
        if loss == "contrastive":
            from .losses.contrastive import PairContrastiveLoss

            self.criterion = PairContrastiveLoss(margin)
        elif loss == "triplet":
            from .losses.triplet import TripletLoss

            self.criterion = TripletLoss(margin)
        elif loss == "softmax":
            from .losses.softmax import SoftmaxHead

            self.criterion = SoftmaxHead(n_classes, dim)
        elif loss == "arcface":
            from .losses.arcface import ArcFaceHead

            self.criterion = ArcFaceHead(n_classes, dim, margin=margin, scale=scale)
        else:
            from .losses.adacos import AdaCosHead

            self.criterion = AdaCosHead(n_classes, dim)


class DMLTask:
    def __init__(self, model: DMLModel, items: Sequence[ModelInput], labels: np.ndarray, *,
                 representation: str = "trigger", p_positive: float = 0.5):
        self.enc, self.loss_name = model.encoder, model.loss_name
        self.items, self.rep, self.p_positive = list(items), representation, float(p_positive)
        self.labels = np.asarray(labels, dtype=np.int64)
        self.sampler = PartnerSampler(self.labels) if self.loss_name in ("contrastive", "triplet") else None

    def lengths(self) -> list[int]:
        return [len(it.ids) for it in self.items]

    def _collate(self, idx) -> dict[str, torch.Tensor]:
        return self.enc.collate([self.items[int(i)] for i in idx], self.rep)

    def _collate_sorted(self, idx: np.ndarray, chunks: int) -> dict[str, Any]:
        """Anchors + partners as ``chunks`` length-sorted sub-batches, each padded to its own longest
        input (random partners in one padded batch left ~60% padding); ``inv`` restores the order."""
        order = np.argsort([len(self.items[int(i)].ids) for i in idx], kind="stable")
        inv = np.empty(len(idx), dtype=np.int64)
        inv[order] = np.arange(len(idx))
        x = {f"x{k}": self._collate(idx[part]) for k, part in enumerate(np.array_split(order, chunks)) if len(part)}
        return {"x": x, "inv": torch.from_numpy(inv)}

    def _embed_sorted(self, model: DMLModel, batch: dict[str, Any]) -> torch.Tensor:
        parts = [model.encoder(c["input_ids"], c["attention_mask"], c["pool"], self.rep) for c in batch["x"].values()]
        return torch.cat(parts)[batch["inv"].to(parts[0].device)]

    def make_batch(self, idx: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        idx = np.asarray(idx, dtype=np.int64)
        if self.loss_name == "contrastive":
            pos, neg = self.sampler.positives(idx, rng), self.sampler.negatives(idx, rng)
            same = (rng.random(len(idx)) < self.p_positive) & (pos >= 0)
            partner = np.where(same, pos, neg)
            return {**self._collate_sorted(np.concatenate([idx, partner]), 2), "same": torch.from_numpy(same),
                    "n": len(idx)}
        if self.loss_name == "triplet":
            pos = self.sampler.positives(idx, rng)
            anchors, idx, pos = idx, idx[pos >= 0], pos[pos >= 0]
            neg = self.sampler.negatives(idx, rng)
            if not len(idx):
                return {"x": {"x0": self._collate(anchors[:1])}, "inv": torch.zeros(1, dtype=torch.long), "n": 0}
            return {**self._collate_sorted(np.concatenate([idx, pos, neg]), 3), "n": len(idx)}
        return {"x": self._collate(idx), "labels": torch.from_numpy(self.labels[idx])}

    def loss(self, model: DMLModel, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        if self.loss_name in ("contrastive", "triplet"):
            emb = self._embed_sorted(model, batch)
        else:
            x = batch["x"]
            emb = model.encoder(x["input_ids"], x["attention_mask"], x["pool"], self.rep)
        if self.loss_name == "contrastive":
            n = batch["n"]
            loss = model.criterion(emb[:n], emb[n:], batch["same"])
            return loss, {"positive_share": float(batch["same"].float().mean())}
        if self.loss_name == "triplet":
            n = batch["n"]
            if n == 0:  # every anchor of the batch lacked a positive
                return emb.sum() * 0.0, {"anchors": 0.0}
            return model.criterion(emb[:n], emb[n:2 * n], emb[2 * n:]), {"anchors": float(n)}
        loss = model.criterion(emb, batch["labels"])
        terms = {}
        if self.loss_name == "adacos":
            terms["scale"] = float(model.criterion.scale)
        return loss, terms
