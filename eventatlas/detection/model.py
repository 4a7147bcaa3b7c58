"""The detector: the shared mention encoder plus two linear heads over each word's first piece, and its
:class:`eventatlas.training.TrainTask`.

``identification`` scores O / B / I (type-agnostic trigger spans, multi-word triggers as B I...), ``typing``
scores the training inventory's types. The encoder trains at ``lr``, the heads (randomly initialised) at
``head_lr`` through the training core's default groups.
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np
import torch

from .loss import DetectionLoss
from .words import IGNORE, Encoded


class Detector(torch.nn.Module):
    def __init__(self, encoder: Any, n_types: int, *, dropout: float = 0.1):
        super().__init__()
        self.encoder = encoder
        h = encoder.hidden_size
        self.dropout = torch.nn.Dropout(dropout)
        self.identification = torch.nn.Linear(h, 3)
        self.typing = torch.nn.Linear(h, max(1, n_types))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                first: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``first`` (B, W): each word's first piece (padding words point at piece 0 and are ignored)."""
        h = self.encoder.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.float()
        words = torch.gather(h, 1, first.unsqueeze(-1).expand(-1, -1, h.shape[-1]))
        words = self.dropout(words)
        return self.identification(words), self.typing(words)


def collate(items: Sequence[Encoded], pad_id: int, *, labels: bool = True) -> dict[str, torch.Tensor]:
    """Dynamic padding of pieces and words; labels ``IGNORE`` on padding words."""
    width = max(len(it.ids) for it in items)
    n_words = max(1, max(len(it.first) for it in items))
    ids = np.full((len(items), width), pad_id, dtype=np.int64)
    att = np.zeros((len(items), width), dtype=np.int64)
    first = np.zeros((len(items), n_words), dtype=np.int64)
    for r, it in enumerate(items):
        ids[r, : len(it.ids)] = it.ids
        att[r, : len(it.ids)] = 1
        first[r, : len(it.first)] = it.first
    out = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(att), "first": torch.from_numpy(first)}
    if labels:
        bio = np.full((len(items), n_words), IGNORE, dtype=np.int64)
        typ = np.full((len(items), n_words), IGNORE, dtype=np.int64)
        for r, it in enumerate(items):
            bio[r, : len(it.bio)] = it.bio
            typ[r, : len(it.types)] = it.types
        out.update(bio=torch.from_numpy(bio), types=torch.from_numpy(typ))
    return out


class DetectionTask:
    """Batches of encoded sentences (length-bucketed by the core) and the :class:`DetectionLoss`."""

    def __init__(self, items: Sequence[Encoded], pad_id: int, *, type_weight: float = 1.0):
        self.items, self.pad_id = list(items), pad_id
        self.criterion = DetectionLoss(type_weight)

    def lengths(self) -> list[int]:
        return [len(it.ids) for it in self.items]

    def make_batch(self, idx: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        return collate([self.items[int(i)] for i in idx], self.pad_id)

    def loss(self, model: Detector, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        ident, typ = model(batch["input_ids"], batch["attention_mask"], batch["first"])
        return self.criterion(ident, typ, batch["bio"], batch["types"])


@torch.inference_mode()
def scored_batches(model: Detector, items: Sequence[Encoded], *, device: str = "cpu", batch_size: int = 64,
                   precision: str = "fp32", hidden: bool = False) -> Iterator[tuple[list[int], np.ndarray,
                                                                                  np.ndarray, Any]]:
    """Per length-sorted batch (each padded to its own longest sentence): its rows of ``items``, the
    identification and type probabilities (padded to the batch's words), and, when ``hidden``, the encoder's
    last hidden states (float32), caught by a forward hook so the detector's forward stays the one definition
    of its scores (detection keeps them as the mentions' vectors)."""
    order = np.argsort([len(it.ids) for it in items], kind="stable")
    caught: list[Any] = []
    hook = (model.encoder.model.register_forward_hook(lambda m, a, o: caught.append(o.last_hidden_state))
            if hidden else None)
    autocast = torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, enabled=precision == "bf16")
    was = model.training
    model.eval()
    try:
        for lo in range(0, len(order), batch_size):
            rows = order[lo: lo + batch_size]
            batch = collate([items[int(i)] for i in rows], model.encoder.pad_id, labels=False)
            batch = {k: v.to(device) for k, v in batch.items()}
            with torch.inference_mode(), autocast:
                ident, typ = model(batch["input_ids"], batch["attention_mask"], batch["first"])
                pi = torch.softmax(ident.float(), -1).cpu().numpy()
                pt = torch.softmax(typ.float(), -1).cpu().numpy()
            yield [int(i) for i in rows], pi, pt, (caught.pop().float() if hidden else None)
    finally:
        model.train(was)
        if hook is not None:
            hook.remove()


def word_scores(model: Detector, items: Sequence[Encoded], *, device: str = "cpu", batch_size: int = 64,
                precision: str = "fp32", progress: Any = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per sentence: identification probabilities (W, 3) and type probabilities (W, T), in input order
    (:func:`scored_batches`, each sentence cut to its own words)."""
    out: list[Any] = [None] * len(items)
    for rows, pi, pt, _ in scored_batches(model, items, device=device, batch_size=batch_size, precision=precision):
        for r, i in enumerate(rows):
            n = len(items[i].first)
            out[i] = (pi[r, :n], pt[r, :n])
        if progress is not None:
            progress(len(rows))
    return out
