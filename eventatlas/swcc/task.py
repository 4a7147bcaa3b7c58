"""The SWCC :class:`eventatlas.training.TrainTask`: one step = a batch of events.

``make_batch`` (CPU, seeded by the checkpointed ``rng``): for every event ``q`` one co-occurring
partner ``p`` (drawn by co-occurrence count, :meth:`.data.Events.sample_partner`) with its weight, and
the masked copy ``m`` (:func:`.losses.mlm.mask_one_token`). ``loss`` runs the encoder once over the
stacked views ``[q; q; q; p]`` (dropout gives q, k1, k2 different masks; views an ablation does not use
are not encoded) and once over ``m`` for the MLM head, then

``L = L_cl + beta * L_proto + gamma * L_mlm`` (:mod:`.losses.infonce`, :mod:`.losses.prototype`,
:mod:`.losses.mlm`; the ``margin`` variant replaces ``L_cl`` by :func:`.losses.margin.margin_loss`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .losses.infonce import swcc_infonce
from .losses.margin import margin_loss
from .losses.mlm import IGNORE, mask_one_token, mlm_loss
from .losses.prototype import prototype_loss

VARIANTS = ("swcc", "no_prototypes", "no_weak", "no_mlm", "infonce", "margin")

__all__ = ["Switches", "SWCCTask", "VARIANTS", "switches"]


@dataclass(frozen=True)
class Switches:
    weak: bool = True
    second_view: bool = True
    prototypes: bool = True
    mlm: bool = True
    margin: bool = False


def switches(variant: str) -> Switches:
    """The loss terms of each ablation (SWCC Table 5): plain InfoNCE = dropout views only (one view)."""
    table = {
        "swcc": Switches(),
        "no_prototypes": Switches(prototypes=False),
        "no_weak": Switches(weak=False),
        "no_mlm": Switches(mlm=False),
        "infonce": Switches(weak=False, second_view=False, prototypes=False, mlm=False),
        "margin": Switches(weak=False, second_view=False, prototypes=False, mlm=False, margin=True),
    }
    try:
        return table[variant]
    except KeyError:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}") from None


def _pad(rows: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.long)
    return out


class SWCCTask:
    def __init__(self, model, items, events, *, pooling_rep: str = "cls", sw: Switches = Switches(), tau: float = 0.3,
                 beta: float = 0.1, gamma: float = 1.0, sinkhorn_eps: float = 0.05, sinkhorn_iters: int = 3,
                 entropy_weight: float = 0.0, margin: float = 0.5):
        if len(items) != len(events):
            raise ValueError(f"{len(items)} token inputs for {len(events)} events")
        self.model, self.items, self.events = model, items, events
        self.rep, self.sw = pooling_rep, sw
        self.tau, self.beta, self.gamma = tau, beta, gamma
        self.sk_eps, self.sk_iters, self.entropy_weight, self.margin = sinkhorn_eps, sinkhorn_iters, entropy_weight, margin
        tok = model.encoder.tokenizer
        self.special = set(tok.all_special_ids)
        self.mask_id = model.encoder.mask.id
        self.pad_id = model.encoder.pad_id
        if sw.mlm and self.mask_id is None:
            raise ValueError(f"{model.encoder.model_path}: the tokenizer has no mask (or unk) token for the MLM view")

    def lengths(self) -> list[int]:
        return [len(it.ids) for it in self.items]

    def make_batch(self, indices: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        idx = [int(i) for i in indices]
        q = [self.items[i] for i in idx]
        batch: dict[str, Any] = {}
        views = [q] * (1 + 1 + int(self.sw.second_view))  # q, k1 (, k2)
        if self.sw.weak:
            drawn = [self.events.sample_partner(i, rng) for i in idx]
            views.append([self.items[j] for j, _ in drawn])
            batch["w"] = torch.tensor([w for _, w in drawn], dtype=torch.float32)
        stacked = [it for v in views for it in v]
        batch["views"] = self.model.encoder.collate(stacked, self.rep)
        if self.sw.mlm:
            ids, labels = mask_one_token([it.ids for it in q], self.special, self.mask_id, rng)
            m_ids = _pad(ids, self.pad_id)
            batch["m"] = {"input_ids": m_ids, "attention_mask": (_pad([[1] * len(r) for r in ids], 0)),
                          "labels": _pad(labels, IGNORE)}
        return batch

    def loss(self, model, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        v = batch["views"]
        z = F.normalize(model.encoder(v["input_ids"], v["attention_mask"], v["pool"], self.rep), dim=1)
        parts = list(torch.chunk(z, 2 + int(self.sw.second_view) + int(self.sw.weak)))
        q, k1 = parts[0], parts[1]
        k2 = parts[2] if self.sw.second_view else None
        terms: dict[str, float] = {}
        if self.sw.margin:
            loss = margin_loss(q, k1, self.margin)
            terms["margin"] = float(loss.detach())
        else:
            p = parts[-1] if self.sw.weak else None
            loss, t = swcc_infonce(q, k1, k2 if k2 is not None else k1, p if p is not None else k1,
                                   batch.get("w", torch.zeros(q.shape[0])), self.tau, weak=self.sw.weak,
                                   second_view=self.sw.second_view)
            terms.update(t)
        if self.sw.prototypes:
            lp, t, _ = prototype_loss(k1, k2 if k2 is not None else q, model.prototypes, tau=self.tau,
                                      eps=self.sk_eps, iters=self.sk_iters, entropy_weight=self.entropy_weight)
            terms.update(t)
            loss = loss + self.beta * lp
        if self.sw.mlm:
            m = batch["m"]
            at = m["labels"] != IGNORE  # the head runs on the masked positions only (1 per event, not B x T x V)
            h = model.token_states(m["input_ids"], m["attention_mask"])[at]
            lm = mlm_loss(model.mlm_head(h)[None], m["labels"][at][None])
            terms["mlm"] = float(lm.detach())
            loss = loss + self.gamma * lm
        return loss, terms
