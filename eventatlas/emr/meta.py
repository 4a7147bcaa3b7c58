"""The meta-trained EMR network: the Siamese network of :mod:`.models`, trained once on *other* types.

The per-query Siamese network learns from k shots and unlabelled outside mentions only. The
meta-trained variant learns the same network (three dense layers on the frozen representation,
S = cosine of the two outputs, loss :func:`eventatlas.emr.losses.siamese.siamese_loss`) once, from the
labelled mentions of training types (e.g. the MAVEN few-shot split's ``train`` types): each
training pair is an anchor mention of a uniformly drawn training type with, at probability
``pos_fraction``, another mention of that type (y = 1), otherwise a mention of another training
type or a no-event candidate (y = 0). It then ranks for queries of types it never saw:

* ``meta``: the frozen representation is mapped through the network once; a query's score for a
  candidate is the mean cosine of the mapped shots and the mapped candidate (the ad-hoc ranker in
  the learned space, exact with :func:`eventatlas.evaluation.retrieval.rank`);
* ``meta_adapt``: every query's network starts from the meta-trained weights and is trained on
  that query's pairs like the per-query Siamese model (:func:`.models.train_query_networks` with
  ``init``), for ``adapt_epochs``.

Training runs on the shared training core (Adam, step logs, learning curve; checkpoints as the
``TrainingArgs`` say). A trained network is saved as ``meta.pt`` + ``meta.json`` (dimensions,
encoder, representation, training types) in the run directory, so ``eventatlas search --model
meta:<run id>`` and the ``emr`` method's ``meta_run`` load it by run id (:func:`load_meta`).
"""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..io import atomic_path, atomic_write_json
from .losses.siamese import siamese_loss
from .models import QueryNetworks

META_FILES = ("meta.pt", "meta.json")


class MetaError(ValueError):
    """A meta-trained model that cannot be found or loaded (one line, naming the run)."""


class _MetaPairTask:
    """Labelled pairs of training-type mentions as a :class:`eventatlas.training.TrainTask`: an epoch is
    ``pairs`` examples, each a fresh pair drawn from the loop's checkpointed RNG (see the module docstring)."""

    def __init__(self, X: np.ndarray, labels: list[str | None], pairs: int, pos_fraction: float):
        self.X = torch.as_tensor(np.ascontiguousarray(X, dtype=np.float32))
        self.by_type: dict[str, np.ndarray] = {}
        for i, lab in enumerate(labels):
            if lab is not None:
                self.by_type.setdefault(lab, []).append(i)
        self.by_type = {t: np.asarray(v, np.int64) for t, v in self.by_type.items() if len(v) >= 2}
        if len(self.by_type) < 2:
            raise ValueError(f"meta-training needs 2 training types with at least 2 mentions, got {len(self.by_type)}")
        self.types = sorted(self.by_type)
        self.label_idx = np.asarray([self.types.index(lab) if lab in self.by_type else -1 for lab in labels])
        self.pairs, self.pos_fraction = int(pairs), float(pos_fraction)

    def lengths(self) -> list[int]:
        return [1] * self.pairs

    def make_batch(self, idx: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        n = len(idx)
        t = rng.integers(len(self.types), size=n)
        y = rng.random(n) < self.pos_fraction
        sizes = np.asarray([len(self.by_type[self.types[j]]) for j in t])
        a = rng.integers(sizes)
        b = (a + 1 + rng.integers(sizes - 1)) % sizes  # another member of the anchor's type
        left = np.asarray([self.by_type[self.types[j]][i] for j, i in zip(t, a)], np.int64)
        right = np.asarray([self.by_type[self.types[j]][i] for j, i in zip(t, b)], np.int64)
        neg = np.flatnonzero(~y)  # any item not of the anchor's type: another training type or a None item
        other = rng.integers(len(self.X), size=len(neg))
        for _ in range(100):
            clash = self.label_idx[other] == t[neg]
            if not clash.any():
                break
            other[clash] = rng.integers(len(self.X), size=int(clash.sum()))
        right[neg] = other
        pairs = torch.cat([self.X[torch.as_tensor(left)], self.X[torch.as_tensor(right)]], dim=0)
        return {"pairs": pairs, "y": torch.as_tensor(y.astype(np.float32))}

    def loss(self, net: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        n = batch["y"].shape[0]
        out = net(batch["pairs"])[0]  # one network
        S = torch.nn.functional.cosine_similarity(out[:n], out[n:], dim=-1)
        loss = siamese_loss(S, batch["y"])
        pos = batch["y"] > 0.5
        S_ = S.detach()
        terms = {"mean_s_same": float(S_[pos].mean()) if pos.any() else 0.0,
                 "mean_s_other": float(S_[~pos].mean()) if (~pos).any() else 0.0}
        return loss, terms


@dataclass
class MetaModel:
    """A meta-trained network and what it was trained on (``info``: d_in, hidden, layers,
    model_id, representation, train_types, run_id ...)."""

    net: QueryNetworks
    info: dict[str, Any]

    @torch.no_grad()
    def transform(self, X: np.ndarray, *, device: str = "cpu", chunk: int = 8192) -> np.ndarray:
        """(N, output dim) unit vectors: ``X`` mapped through the network (the ``meta`` representation)."""
        net = self.net.to(device).eval()
        out = np.empty((len(X), net.weights[-1].shape[2]), dtype=np.float32)
        for a in range(0, len(X), chunk):
            x = torch.as_tensor(np.ascontiguousarray(X[a:a + chunk], dtype=np.float32), device=device)
            out[a:a + len(x)] = torch.nn.functional.normalize(net(x)[0], dim=-1).cpu().numpy()
        return out

    def save(self, out_dir: str | Path) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        with atomic_path(out / "meta.pt") as tmp:
            torch.save(self.net.state_dict(), tmp)
        atomic_write_json(out / "meta.json", self.info)
        return [out / f for f in META_FILES]


def train_meta_network(X: np.ndarray, labels: list[str | None], args: Any, *, hidden: int = 768, layers: int = 3,
                       pairs: int = 20_000, pos_fraction: float = 0.5, residual: bool = False, seed: int = 0,
                       out_dir: str | Path,
                       info: dict[str, Any] | None = None, callbacks: tuple = ()) -> tuple[MetaModel, Any]:
    """Train the network on labelled items (``labels[i]`` a training type, or None for an item that
    is only ever a not-same-class partner). ``args``: :class:`eventatlas.training.TrainingArgs`.
    Returns the model and the trainer's ``TrainResult`` (step logs under ``out_dir``)."""
    from ..training import Trainer

    task = _MetaPairTask(X, labels, pairs, pos_fraction)
    gen = torch.Generator().manual_seed(int(np.random.default_rng([seed, 13]).integers(2**31)))
    net = QueryNetworks(1, X.shape[1], hidden, layers, generator=gen, residual=residual)
    res = Trainer(net, task, args, out_dir, seed=seed, phase="meta", callbacks=list(callbacks)).fit()
    net.eval()
    meta = {"d_in": int(X.shape[1]), "hidden": int(hidden), "layers": int(layers), "residual": bool(residual),
            "pairs_per_epoch": int(pairs),
            "pos_fraction": float(pos_fraction), "train_types": task.types,
            "n_train_mentions": int(sum(len(v) for v in task.by_type.values())), **(info or {})}
    return MetaModel(net.cpu(), meta), res


def load_meta(run: str | Path) -> MetaModel:
    """The meta-trained model of a run: a run id (looked up under ``runs_dir()``), a run directory,
    or its ``run.json``. One-line :class:`MetaError` when it is missing or holds no meta model."""
    from .. import config as paths

    if str(run).startswith("run:"):  # a saved model (eventatlas.modeling.saved)
        return _load_saved(str(run))
    p = Path(run)
    if p.name == "run.json":
        p = p.parent
    if not p.is_dir():
        cand = paths.runs_dir() / str(run)
        if not cand.is_dir():
            raise MetaError(f"meta model {str(run)!r}: no such run (looked in {paths.runs_dir()})")
        p = cand
    missing = [f for f in META_FILES if not (p / f).exists()]
    if missing:
        raise MetaError(f"meta model {str(run)!r}: run {p.name} holds no meta-trained EMR network "
                        f"(missing {', '.join(missing)}; train one with the emr method and models [meta])")
    try:
        info = json.loads((p / "meta.json").read_text())
        net = QueryNetworks(1, int(info["d_in"]), int(info["hidden"]), int(info["layers"]),
                            residual=bool(info.get("residual", False)))
        net.load_state_dict(torch.load(p / "meta.pt", map_location="cpu", weights_only=True))
    except (ValueError, KeyError, RuntimeError, OSError, pickle.UnpicklingError) as e:
        raise MetaError(f"meta model {str(run)!r}: cannot load {p / 'meta.pt'}: {str(e).splitlines()[0]}") from None
    net.eval()
    info["run_dir"] = str(p)
    return MetaModel(net, info)


def _load_saved(ref: str) -> MetaModel:
    from ..modeling.saved import ModelError, resolve_ref

    try:
        m = resolve_ref(ref)
        state, info = m.head("meta")
    except ModelError as e:
        raise MetaError(f"meta model {ref!r}: {e}") from None
    net = QueryNetworks(1, int(info["d_in"]), int(info["hidden"]), int(info["layers"]),
                        residual=bool(info.get("residual", False)))
    net.load_state_dict(state)
    net.eval()
    return MetaModel(net, {**info, "run_dir": str(m.path.parent)})


def type_key(type_id: str) -> str:
    """A type name compared across datasets: the last dotted part, lower case, ``-``/space as ``_``
    (OntoEvent-MAVEN ``Conflict.Attack`` and MAVEN ``Attack`` are the same type)."""
    return type_id.rsplit(".", 1)[-1].strip().lower().replace("-", "_").replace(" ", "_")


def unseen_types(types: list[str], train_types: list[str]) -> list[str]:
    """The ``types`` whose :func:`type_key` is not a training type's."""
    seen = {type_key(t) for t in train_types}
    return [t for t in types if type_key(t) not in seen]
