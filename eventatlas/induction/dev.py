"""Model selection on a labelled dev part (the alternative to the label-free stopping rule).

With a sentence hold-out (``heldout_sentences``), the *dev part* is the mentions of the **seen** types in
the held-out sentences: labelled (their types are the training labels), never trained on (the training
run never reads those sentences) and disjoint from what is scored (the unseen types). After every epoch
the dev part is embedded and clustered with each scored input x algorithm, and its ARI recorded (a curve
per input and algorithm). The rule: the (epoch, input, algorithm) with the best dev ARI is chosen (ties:
the earliest epoch, then the order of the inputs and algorithms); that epoch's weights are the ones
kept (:class:`eventatlas.training.EarlyStopping` with ``restore_best``) and applied to the unseen types.

The frozen encoder is chosen the same way (:func:`eventatlas.induction.frozen.frozen_dev_choice`): each
marker option x algorithm on the same dev part.

Optionally (``diagnostic``) the unseen types' mentions of the held-out sentences are embedded and clustered
per epoch too: a curve on the test labels, recorded for the diagnosis only (never read by any choice).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..training import Callback

log = logging.getLogger(__name__)


def dev_rows(sel) -> np.ndarray:
    """Row indices of ``sel`` (a held-out part's :class:`~eventatlas.data.selection.LabelledMentions`) that
    form the dev part: mentions of the seen types only."""
    return np.flatnonzero(sel.seen_index >= 0)


def heldout_part(cfg: Any, source, seed: int, *, k_seen_default: int | None, **extra: Any):
    """The held-out sentences' selection under ``cfg``'s protocol (``part`` forced to ``heldout``)."""
    if not getattr(cfg, "heldout_sentences", None):
        raise ValueError("selection on dev needs heldout_sentences (the dev part is the seen types' mentions in "
                         "the held-out sentences)")
    return cfg.model_copy(update={"part": "heldout"}).select(source, seed=seed, k_seen_default=k_seen_default,
                                                              **extra)


def subsample(index: np.ndarray, cap: int | None, seed: int) -> np.ndarray:
    """A sorted seeded subsample of ``index`` of at most ``cap`` entries."""
    if not cap or len(index) <= cap:
        return np.asarray(index)
    rng = np.random.default_rng([seed, 7])
    return np.sort(rng.choice(np.asarray(index), size=int(cap), replace=False))


def partition_aris(emb: dict[str, np.ndarray], labels: Sequence[str], inputs: Sequence[str],
                   algorithms: Sequence[str], *, k_manifold: int | None = None, seed: int = 0) -> dict[str, float]:
    """ARI of every ``input/algorithm`` partition of ``emb`` (F, Q, K) into as many clusters as gold types."""
    from sklearn.metrics import adjusted_rand_score

    from .evaluate import cluster_all, distance_inputs

    y = list(labels)
    parts = cluster_all(distance_inputs(emb, inputs), len(set(y)), algorithms=algorithms, k_manifold=k_manifold,
                        seed=seed)
    return {f"{inp}/{algo}": float(adjusted_rand_score(y, lab)) for (inp, algo), lab in parts.items()}


def choose(curves: Sequence[dict[str, float]]) -> dict[str, Any]:
    """The (epoch, input, algorithm) of the best dev ARI over ``curves`` (one ``{input/algo: ari}`` per
    epoch); ties go to the earliest epoch, then the first key in order."""
    best = None
    for e, c in enumerate(curves):
        for name, v in c.items():
            if v == v and (best is None or v > best[0]):
                best = (v, e, name)
    if best is None:
        raise ValueError("no dev score to choose from")
    inp, algo = best[2].split("/", 1)
    return {"epoch": best[1], "input": inp, "algorithm": algo, "dev_ari": best[0]}


class DevSelection(Callback):
    """Per-epoch dev ARI (and, for the diagnosis, the held-out unseen ARI); returns ``dev_ari`` (the epoch's best
    over inputs x algorithms) for :class:`~eventatlas.training.EarlyStopping` to monitor."""

    def __init__(self, dev_items, dev_labels, representation: str, *, inputs: Sequence[str],
                 algorithms: Sequence[str], k_manifold: int | None = None, seed: int = 0, eval_batch_size: int = 64,
                 diagnostic_items=None, diagnostic_labels=None):
        self.items, self.labels, self.rep = list(dev_items), list(dev_labels), representation
        self.inputs, self.algorithms, self.k_manifold, self.seed, self.bs = list(inputs), list(algorithms), \
            k_manifold, seed, eval_batch_size
        self.diag_items = list(diagnostic_items) if diagnostic_items is not None else None
        self.diag_labels = list(diagnostic_labels) if diagnostic_labels is not None else None
        self.curves: list[dict[str, float]] = []
        self.diagnostic: list[dict[str, float]] = []

    def _aris(self, trainer, items, labels) -> dict[str, float]:
        from .training import embed_fqk

        emb = embed_fqk(trainer.unwrapped, items, self.rep, device=str(trainer.accelerator.device),
                        precision=trainer.precision, batch_size=self.bs)
        return partition_aris(emb, labels, self.inputs, self.algorithms, k_manifold=self.k_manifold, seed=self.seed)

    def on_epoch_end(self, trainer, epoch: int) -> dict[str, float]:
        aris = self._aris(trainer, self.items, self.labels)
        self.curves.append(aris)
        if self.diag_items:
            self.diagnostic.append(self._aris(trainer, self.diag_items, self.diag_labels))
        best = max(aris.values())
        log.info("dev part: epoch %d best ARI %.4f (%s)", epoch, best, max(aris, key=aris.get))
        return {"dev_ari": best, **{f"dev_ari/{k}": v for k, v in aris.items()}}

    def choice(self) -> dict[str, Any]:
        return choose(self.curves)

    def state_dict(self) -> dict[str, Any]:
        return {"curves": self.curves, "diagnostic": self.diagnostic}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.curves = list(state.get("curves", []))
        self.diagnostic = list(state.get("diagnostic", []))


def curve_png(curves: Sequence[dict[str, float]], path: Path, title: str, *, chosen: dict[str, Any] | None = None,
              label_free_epoch: int | None = None, diagnostic: Sequence[dict[str, float]] | None = None) -> Path:
    """Dev ARI per epoch, one line per input/algorithm (the diagnostic held-out unseen curve of the chosen
    input/algorithm dashed, when recorded); the dev choice and the label-free rule's epoch marked."""
    from ..tracking.plots import pyplot, save_png

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = np.arange(1, len(curves) + 1)
    for name in curves[0] if curves else []:
        ax.plot(x, [100 * c.get(name, np.nan) for c in curves], marker="o", ms=3, lw=1.2, label=f"dev {name}")
    if chosen is not None:
        name = f"{chosen['input']}/{chosen['algorithm']}"
        ax.scatter([chosen["epoch"] + 1], [100 * chosen["dev_ari"]], s=90, facecolors="none", edgecolors="k",
                   zorder=5, label=f"dev choice: {name}, epoch {chosen['epoch'] + 1}")
        if diagnostic:
            ax.plot(x, [100 * d.get(name, np.nan) for d in diagnostic], "k--", lw=1.5,
                    label=f"held-out unseen {name} (diagnostic, not used)")
    if label_free_epoch is not None:
        ax.axvline(label_free_epoch + 1, color="grey", ls=":", label=f"label-free rule: epoch {label_free_epoch + 1}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("ARI x 100")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3)
    return save_png(fig, path)


def label_free_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The dev choice beside the label-free rule's (a run's params): the chosen (epoch, input, algorithm)
    and its dev ARI; the label-free epoch, its stopping score and the dev ARI there; the held-out unseen
    diagnostic (test labels, never used to choose) at both epochs when it was recorded."""
    dev = summary["dev"]
    ch, curves, diag = dev["choice"], dev["curves"], dev.get("diagnostic_heldout_unseen") or []
    name = f"{ch['input']}/{ch['algorithm']}"
    lf = summary["chosen_epoch"][dev["label_free_rule"]]
    out = {"choice": ch, "n_dev_mentions": dev.get("n_dev_mentions"), "n_dev_types": dev.get("n_dev_types"),
           "dev_curve_chosen": [c.get(name) for c in curves],
           "best_dev_ari_per_epoch": [max(c.values()) for c in curves],
           "label_free": {"rule": dev["label_free_rule"], "epoch": lf, "stop_score": summary["stop_scores"][lf],
                          "dev_ari_same_input": curves[lf].get(name), "best_dev_ari": max(curves[lf].values())}}
    if diag:
        out["diagnostic_heldout_unseen"] = {
            "curve_chosen": [d.get(name) for d in diag], "at_dev_epoch": diag[ch["epoch"]].get(name),
            "at_label_free_epoch": diag[lf].get(name), "best_per_epoch": [max(d.values()) for d in diag]}
    return out

