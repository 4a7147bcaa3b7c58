"""An encoder fine-tuned for retrieval on the training types (EMR model ``contrastive``).

The per-query Siamese and meta networks learn on top of frozen vectors; this model changes the encoder
itself, so a mention's vector moves towards the other mentions of its type whatever their word. Training
batches are P types x K mentions of the training types (drawn afresh from the training loop's checkpointed
RNG, so every batch holds positives), encoded through the shared :class:`~eventatlas.modeling.MentionEncoder`
with the retrieval representation (``trigger`` by default; the pool's sentences already carry the trigger
markers when the run asks for them), and scored by the supervised contrastive loss
(:mod:`.losses.supcon`: every same-type mention a positive, the rest of the batch in-batch negatives).
With ``keys`` (each mention's trigger lemma) a type's K mentions are drawn one per lemma, round robin over its
lemmas in a random order, so the positives a batch pulls together are other words for the event where the
type has them, never the same word twice before every word of the type is in (a random draw repeats a word
as often as the type's commonest word dominates its mentions).

The epoch is chosen on the development types (never trained on, never evaluated): after every epoch the
dev episode's items are embedded with the current weights and ranked, and the best dev score's weights
are restored (:class:`eventatlas.training.callbacks.EarlyStopping`). The shared training core runs it
(AdamW, warm-up, clipping, declared precision, step logs, learning curve).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from .losses.supcon import SupervisedContrastiveLoss


class ContrastiveTask:
    """P x K batches of training-type mentions as a :class:`eventatlas.training.TrainTask`. An epoch is
    ``steps`` batches; the loop's indices only set how many batches there are (each batch is drawn by type)."""

    def __init__(self, encoder: Any, items: Sequence[Any], labels: Sequence[str], *, types_per_batch: int,
                 per_type: int, steps: int, representation: str, temperature: float,
                 keys: Sequence[str] | None = None):
        self.enc, self.items, self.rep = encoder, list(items), representation
        by: dict[str, list[int]] = {}
        for i, lab in enumerate(labels):
            by.setdefault(lab, []).append(i)
        self.by_type = {t: np.asarray(v, np.int64) for t, v in sorted(by.items()) if len(v) >= 2}
        self.by_key: dict[str, list[np.ndarray]] | None = None
        if keys is not None:
            if len(keys) != len(self.items):
                raise ValueError(f"{len(keys)} lemma keys for {len(self.items)} training mentions")
            self.by_key = {}
            for t, members in self.by_type.items():
                groups: dict[str, list[int]] = {}
                for i in members.tolist():
                    groups.setdefault(str(keys[i]), []).append(i)
                self.by_key[t] = [np.asarray(groups[k], np.int64) for k in sorted(groups)]
        if len(self.by_type) < 2:
            raise ValueError(f"retrieval fine-tuning needs 2 training types with 2+ mentions, got {len(self.by_type)}")
        self.types = list(self.by_type)
        self.P, self.K = min(int(types_per_batch), len(self.types)), int(per_type)
        self.steps = int(steps)
        self.criterion = SupervisedContrastiveLoss(temperature)

    def lengths(self) -> list[int]:
        return [1] * self.steps

    def make_batch(self, idx: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        chosen = rng.choice(len(self.types), size=self.P, replace=False)
        rows, labels = [], []
        for j in chosen:
            take = self._draw(self.types[int(j)], rng)
            rows += take
            labels += [int(j)] * len(take)
        order = np.argsort([len(self.items[r].ids) for r in rows], kind="stable")  # less padding per batch
        rows, labels = [rows[i] for i in order], [labels[i] for i in order]
        return {"x": self.enc.collate([self.items[r] for r in rows], self.rep), "labels": torch.as_tensor(labels)}

    def _draw(self, t: str, rng: np.random.Generator) -> list[int]:
        """K distinct mentions of type ``t``: at random, or (with keys) one per lemma before any lemma repeats."""
        members = self.by_type[t]
        k = min(self.K, len(members))
        if self.by_key is None:
            return rng.choice(members, size=k, replace=False).tolist()
        groups = [rng.permutation(self.by_key[t][g]) for g in rng.permutation(len(self.by_key[t]))]
        out: list[int] = []
        for depth in range(max(len(g) for g in groups)):
            out += [int(g[depth]) for g in groups if depth < len(g)][:k - len(out)]
            if len(out) == k:
                break
        return out

    def loss(self, model: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        x = batch["x"]
        emb = model(x["input_ids"], x["attention_mask"], x["pool"], self.rep)
        return self.criterion(emb, batch["labels"].to(emb.device)), {}


def encode_inputs(module: Any, items: Sequence[Any], representation: str, *, device: str,
                  batch_size: int = 64) -> np.ndarray:
    """Vectors of prepared inputs with the encoder as it is now (fp32; the dev score after an epoch)."""
    from ..modeling.encode import Encoder

    enc = Encoder(module=module, device=device, precision="fp32", batch_size=batch_size, progress=False)
    return enc.run(list(items), representation)


def train_retrieval_encoder(encoder: Any, items: Sequence[Any], labels: Sequence[str], args: Any, *,
                            types_per_batch: int, per_type: int, steps: int, representation: str,
                            temperature: float, out_dir, seed: int, callbacks: tuple = (),
                            keys: Sequence[str] | None = None) -> Any:
    """Fine-tune ``encoder`` (a MentionEncoder, trained in place) on ``items`` (prepared inputs) of the
    training ``labels`` (``keys``: their trigger lemmas, for positives drawn one per lemma); returns the
    trainer's ``TrainResult``."""
    from ..training import Trainer

    task = ContrastiveTask(encoder, items, labels, types_per_batch=types_per_batch, per_type=per_type, steps=steps,
                           representation=representation, temperature=temperature, keys=keys)
    args = args.model_copy(update={"batch_size": 1, "bucket": False})  # one index = one P x K batch
    return Trainer(encoder, task, args, out_dir, seed=seed, phase="contrastive", callbacks=list(callbacks)).fit()
