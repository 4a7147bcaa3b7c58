"""Batch-attention training on the shared training core.

:class:`InductionTask` is the :class:`eventatlas.training.TrainTask` of the method: two views of
each batch (a second dropout view, word-piece dropout that keeps the trigger, or a back-translation),
the 4-term masked contrastive loss over minibatch attention scores, plus the naming loss.
:class:`SilhouetteSelection` is its unsupervised model selection: after every epoch the unseen
mentions are embedded (F, Q, K saved per epoch) and scored by the cosine silhouette of F under
agglomerative clusterings of 1 - S; after training the epoch is chosen by the paper's or the
published code's rule over a sliding window (no unseen label is used).
"""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..io import atomic_path
from ..modeling.inputs import ModelInput
from ..training import Callback
from .augment import token_perturb, word_dropout
from .losses.masked_contrastive import augmented_loss
from .losses.naming import naming_loss
from .stopping import choose_epoch, epoch_silhouettes

log = logging.getLogger(__name__)


class InductionTask:
    def __init__(self, model, items: Sequence[ModelInput], seen_index: np.ndarray, representation: str, *,
                 augmentation: str, perturb_p: float = 0.1, name_targets: torch.Tensor | None = None,
                 naming_weight: float = 1.0, margin: float = 0.5, sentences: Sequence[str] | None = None,
                 triggers: Sequence[str] | None = None, backtranslations: dict | None = None,
                 pseudo_neighbours: dict[int, list[int]] | None = None):
        self.enc = model.encoder
        self.items, self.rep = list(items), representation
        self.seen_index = torch.as_tensor(seen_index)
        self.augmentation, self.perturb_p, self.margin = augmentation, perturb_p, margin
        self.name_targets, self.naming_weight = name_targets, naming_weight
        self.special = set(self.enc.tokenizer.all_special_ids)
        self.sentences, self.triggers, self.bt = sentences, triggers, backtranslations
        # pseudo-labels: training index -> confident unseen neighbours (mutual_neighbours)
        self.pseudo = {int(i): [int(j) for j in js] for i, js in (pseudo_neighbours or {}).items() if js}

    def lengths(self) -> list[int]:
        return [len(it.ids) for it in self.items]

    def _perturbed(self, it: ModelInput, rng: np.random.Generator) -> ModelInput:
        # special tokens and the trigger's pieces always survive (the trigger defines the mention)
        protect = {j for j, t in enumerate(it.ids) if t in self.special} | set(it.target)
        if self.augmentation == "word_dropout":
            keep = word_dropout(self.enc.tokenizer.convert_ids_to_tokens(list(it.ids)), protect, rng, self.perturb_p)
        else:
            keep = token_perturb(it.ids, protect, rng, self.perturb_p)
        pos = {j: k for k, j in enumerate(keep)}
        return ModelInput([it.ids[j] for j in keep], [pos[j] for j in it.target if j in pos], [])

    def _backtranslated(self, i: int, rng: np.random.Generator) -> ModelInput:
        from .augment import BT_LANGUAGES

        lang = BT_LANGUAGES[int(rng.integers(0, len(BT_LANGUAGES)))]
        text = self.bt[(self.sentences[i], lang)]
        trig = self.triggers[i]
        lo = text.lower().find(trig.lower()) if trig else -1
        # the translation rarely keeps the trigger word: then pool over the whole sentence
        a, b = (lo, lo + len(trig)) if lo >= 0 else (0, len(text))
        return self.enc.prepare([text], [a], [b], "trigger")[0]

    def _with_neighbours(self, idx: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, torch.Tensor | None]:
        """The batch plus one sampled pseudo-neighbour of each of its unseen mentions that has one
        (so pseudo-positive pairs occur in batches at all), and the (n, n) pseudo-positive matrix."""
        if not self.pseudo:
            return idx, None
        members = [int(i) for i in idx]
        have = set(members)
        for i in list(members):
            nb = self.pseudo.get(i)
            if nb:
                j = nb[int(rng.integers(0, len(nb)))]
                if j not in have:
                    members.append(j)
                    have.add(j)
        pos = {m: a for a, m in enumerate(members)}
        mat = torch.zeros(len(members), len(members), dtype=torch.bool)
        for i in members:
            for j in self.pseudo.get(i, ()):
                if j in pos:
                    mat[pos[i], pos[j]] = mat[pos[j], pos[i]] = True
        return np.asarray(members, dtype=np.int64), mat

    def make_batch(self, idx: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        idx, pseudo = self._with_neighbours(np.asarray(idx), rng)
        batch = {"view1": self.enc.collate([self.items[i] for i in idx], self.rep), "labels": self.seen_index[idx]}
        if pseudo is not None:
            batch["pseudo"] = pseudo
        if self.augmentation in ("token_perturb", "word_dropout"):
            batch["view2"] = self.enc.collate([self._perturbed(self.items[i], rng) for i in idx], self.rep)
        elif self.augmentation == "backtranslation":
            rep = "trigger" if self.rep == "trigger" else "sentence"
            batch["view2"] = self.enc.collate([self._backtranslated(int(i), rng) for i in idx], rep)
        return batch

    def loss(self, model, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        lab = batch["labels"]
        o1 = model(batch["view1"], self.rep)
        o2 = model(batch.get("view2", batch["view1"]), self.rep)  # dropout_view: same tokens, new dropout
        loss, parts = augmented_loss(o1["Q"].float(), o1["K"].float(), o2["Q"].float(), o2["K"].float(), lab,
                                     self.margin, batch.get("pseudo"))
        if self.name_targets is not None:
            seen = lab >= 0
            tgt = self.name_targets.to(lab.device)[lab.clamp(min=0)]
            ln = 0.5 * (naming_loss(o1["name"], tgt, seen) + naming_loss(o2["name"], tgt, seen))
            loss = loss + self.naming_weight * ln
            parts["naming"] = float(ln.detach())
        return loss, parts


def mutual_neighbours(f: np.ndarray, index: Sequence[int], k: int, min_cos: float = 0.0) -> dict[int, list[int]]:
    """Confident pseudo-positive pairs among unlabelled mentions: ``f`` (n, d) features of the mentions
    ``index`` (training indices); i and j are paired when each is among the other's ``k`` nearest
    neighbours (cosine) and their cosine is >= ``min_cos``. Returns training index -> its partners."""
    from sklearn.neighbors import NearestNeighbors

    index = np.asarray(index, dtype=np.int64)
    n = len(index)
    if n < 2 or k < 1:
        return {}
    kk = min(k, n - 1)
    x = np.asarray(f, np.float32)
    x = x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)
    dist, nn = NearestNeighbors(n_neighbors=kk + 1, metric="cosine", algorithm="brute").fit(x).kneighbors(x)
    near = [set(int(j) for j, d in zip(row, drow) if j != a and 1.0 - d >= min_cos)
            for a, (row, drow) in enumerate(zip(nn, dist))]
    near = [set(sorted(s, key=lambda j: -float(x[a] @ x[j]))[:kk]) for a, s in enumerate(near)]
    out: dict[int, list[int]] = {}
    for a in range(n):
        mutual = sorted(j for j in near[a] if a in near[j])
        if mutual:
            out[int(index[a])] = [int(index[j]) for j in mutual]
    return out


@torch.no_grad()
def embed_fqk(model, items: Sequence[ModelInput], representation: str, *, device: str, precision: str,
              batch_size: int = 64, progress: str | None = None) -> dict[str, np.ndarray]:
    """Eval-mode F, Q, K of prepared inputs (length-sorted batches, input order kept). ``progress``: the
    description of a progress bar (terminal only) and rate log lines, for long one-off passes (applying a
    saved model); None for the per-epoch passes inside training."""
    from contextlib import nullcontext

    from ..modeling.device import autocast
    from ..modeling.encode import EmbedProgress

    was = model.training
    model.eval()
    order = np.argsort([-len(it.ids) for it in items], kind="stable")
    out = {k: np.zeros((len(items), model.dim), np.float32) for k in ("F", "Q", "K")}
    bar = EmbedProgress(len(items), progress) if progress else nullcontext()
    try:
        with autocast(device, precision), bar:
            for b0 in range(0, len(items), batch_size):
                idx = order[b0:b0 + batch_size]
                b = {k: v.to(device) for k, v in model.encoder.collate([items[i] for i in idx], representation).items()}
                f = model.features(b, representation)
                out["F"][idx] = f.float().cpu().numpy()
                out["Q"][idx] = model.clusterer.query(f).float().cpu().numpy()
                out["K"][idx] = model.clusterer.key(f).float().cpu().numpy()
                if progress:
                    bar.update(len(idx))
    finally:
        model.train(was)
    return out


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    return path


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


class SilhouetteSelection(Callback):
    """Per-epoch unsupervised score of the unseen mentions; chooses the epoch after training."""

    def __init__(self, items: Sequence[ModelInput], representation: str, out_dir: Path, counts: Sequence[int], *,
                 stop_key: int | None = None, eval_batch_size: int = 64, keep_models: str = "chosen"):
        self.items, self.rep, self.out = list(items), representation, Path(out_dir)
        self.counts, self.stop_key, self.bs, self.keep_models = list(counts), stop_key, eval_batch_size, keep_models
        self.epoch_files: list[str] = []
        self.scores: list[float] = []
        self.silhouettes: list[dict[str, float]] = []

    def _embed(self, trainer) -> dict[str, np.ndarray]:
        return embed_fqk(trainer.unwrapped, self.items, self.rep, device=str(trainer.accelerator.device),
                         precision=trainer.precision, batch_size=self.bs)

    def on_train_begin(self, trainer) -> None:
        untuned = self.out / "epochs" / "untuned.npz"
        if not untuned.exists():  # a resumed run keeps the one computed before any training step
            save_npz(untuned, self._embed(trainer))

    def on_epoch_end(self, trainer, epoch: int) -> dict[str, float]:
        emb = self._embed(trainer)
        self.epoch_files.append(str(save_npz(self.out / "epochs" / f"epoch_{epoch:02d}.npz", emb)))
        if self.keep_models != "none" and trainer.is_main:
            p = self.out / "models" / f"epoch_{epoch:02d}.pt"
            p.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(p) as tmp:
                torch.save(trainer.unwrapped.state_dict(), tmp)
        s = emb["Q"] @ emb["K"].T / math.sqrt(emb["Q"].shape[1])
        sil = epoch_silhouettes(emb["F"], s, self.counts)
        score = sil[self.stop_key] if self.stop_key in sil else float(np.mean(list(sil.values())))
        self.scores.append(float(score))
        self.silhouettes.append({str(k): float(v) for k, v in sil.items()})
        return {"stop_score": score, **{f"silhouette@{k}": v for k, v in sil.items()}}

    def choose(self, window: int) -> dict[str, int]:
        return {rule: choose_epoch(self.scores, window, rule) for rule in ("paper", "code")}

    def prune_models(self, keep_epoch: int, is_main: bool = True) -> None:
        """Delete the saved models other than ``keep_epoch``'s. Only the main process, which saved them:
        under a data-parallel launch every process calls this, and two deleting the same files race
        (the slower one's unlink failed with FileNotFoundError)."""
        if self.keep_models != "chosen" or not is_main:
            return
        for p in (self.out / "models").glob("epoch_*.pt"):
            if p.name != f"epoch_{keep_epoch:02d}.pt":
                p.unlink()

    def state_dict(self) -> dict[str, Any]:
        return {"epoch_files": self.epoch_files, "scores": self.scores, "silhouettes": self.silhouettes}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch_files = list(state.get("epoch_files", []))
        self.scores = list(state.get("scores", []))
        self.silhouettes = list(state.get("silhouettes", []))
