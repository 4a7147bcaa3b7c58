"""Train, select and score an event detector on a fully annotated typed-mentions dataset.

Sentences (:func:`.words.sentences_of`) are split sentence-disjointly by the hash rule of
:func:`eventatlas.data.selection.heldout_sentence_mask`: ``heldout`` of them are held out (scored once, at
the end), ``dev`` of the rest choose the epoch and the identification threshold, the others train. The
inventory is the training part's types. Every epoch the dev sentences are decoded at each threshold of the
grid; the epoch and threshold with the best dev mean of TI F1 and TC F1 win (early stopping keeps that
epoch's weights). The lexical baseline (:mod:`.lexical`, from the same training sentences) is scored on the
same parts.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..data.selection import heldout_sentence_mask
from ..evaluation.base import RowKey, metric_rows
from ..evaluation.detection import detection_scores
from ..training.callbacks import Callback, EarlyStopping
from .decode import spans
from .lexical import LexicalDetector
from .words import Encoded, Sentence, encode, label

log = logging.getLogger(__name__)

DEV_SALT = 7919  # the dev draw's hash seed is the held-out seed + this: another, independent cut


def split(sentences: Sequence[Sentence], heldout: float, dev: float, seed: int) -> dict[str, list[Sentence]]:
    """``train`` / ``dev`` / ``heldout`` sentences; equal texts always fall in the same part."""
    held = heldout_sentence_mask([s.text for s in sentences], heldout, seed)
    rest = [s for s, h in zip(sentences, held) if not h]
    in_dev = heldout_sentence_mask([s.text for s in rest], dev, seed + DEV_SALT)
    return {"train": [s for s, d in zip(rest, in_dev) if not d], "dev": [s for s, d in zip(rest, in_dev) if d],
            "heldout": [s for s, h in zip(sentences, held) if h]}


def gold_of(sentences: Sequence[Sentence]) -> set[tuple]:
    return {(s.key, a, b, t) for s in sentences for a, b, t in s.gold}


def predicted(sentences: Sequence[Sentence], items: Sequence[Encoded], scores: Sequence[tuple], threshold: float,
              types: Sequence[str]) -> list[tuple]:
    """``(key, start, end, type, score, type_score)`` of every trigger the detector finds."""
    return [(s.key, *sp) for s, it, (pi, pt) in zip(sentences, items, scores)
            for sp in spans(pi, pt, it.spans, threshold, types)]


def choose_threshold(sentences: Sequence[Sentence], items: Sequence[Encoded], scores: Sequence[tuple],
                     grid: Sequence[float], types: Sequence[str]) -> tuple[float, dict[str, float], list[dict]]:
    """The grid's threshold with the best mean of TI F1 and TC F1 on these sentences (the first of equals),
    its scores, and the whole curve."""
    gold = gold_of(sentences)
    curve = []
    for th in grid:
        got = detection_scores([p[:4] for p in predicted(sentences, items, scores, th, types)], gold)
        curve.append({"threshold": float(th), **got, "score": (got["ti_f1"] + got["tc_f1"]) / 2})
    best = max(curve, key=lambda c: c["score"])  # max keeps the first maximum
    return best["threshold"], best, curve


class DevSelection(Callback):
    """Decodes dev at every threshold after each epoch; reports ``dev_score`` (for :class:`EarlyStopping`)
    and remembers each epoch's chosen threshold and curve (restored on ``--resume``)."""

    def __init__(self, score_fn, sentences, items, grid, types):
        self.score_fn, self.sentences, self.items, self.grid, self.types = score_fn, sentences, items, grid, types
        self.by_epoch: dict[int, dict[str, Any]] = {}

    def on_epoch_end(self, trainer, epoch: int) -> dict[str, float]:
        th, best, curve = choose_threshold(self.sentences, self.items, self.score_fn(trainer.unwrapped), self.grid,
                                           self.types)
        self.by_epoch[epoch] = {"threshold": th, "curve": curve}
        log.info("detection epoch %d: dev TI F1 %.1f, TC F1 %.1f at threshold %.2f", epoch + 1, 100 * best["ti_f1"],
                 100 * best["tc_f1"], th)
        return {"dev_score": best["score"], "dev_ti_f1": best["ti_f1"], "dev_tc_f1": best["tc_f1"], "dev_threshold": th}

    def state_dict(self) -> dict[str, Any]:
        return {"by_epoch": self.by_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.by_epoch = {int(k): v for k, v in (state.get("by_epoch") or {}).items()}


def rows(pred: Sequence[tuple], sentences: Sequence[Sentence], key: RowKey) -> list[dict[str, Any]]:
    return metric_rows(detection_scores([p[:4] for p in pred], gold_of(sentences)), task="detection", key=key)


def lexical_rows(train: Sequence[Sentence], parts: dict[str, tuple[list[Sentence], list[Encoded]]],
                 key: RowKey) -> list[dict[str, Any]]:
    lex = LexicalDetector(train)
    out = []
    for part, (sents, items) in parts.items():
        pred = [(s.key, *p) for s, it in zip(sents, items) for p in lex.predict(s.text, it.spans)]
        out += rows(pred, sents, key.replace(split=part, variant="lexical"))
    return out


def encode_part(tokenizer: Any, sentences: Sequence[Sentence], max_length: int, type_index: dict[str, int],
                stats: dict[str, int]) -> list[Encoded]:
    return [label(e, s, type_index, stats) for e, s in zip(encode(tokenizer, [s.text for s in sentences], max_length),
                                                         sentences)]


def curve_png(curve: Sequence[dict], chosen: float, path: Path, title: str) -> Path:
    """Dev TI / TC F1 against the threshold at the chosen epoch."""
    from ..tracking.plots import pyplot, save_png

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    th = [c["threshold"] for c in curve]
    for m, name in (("ti_f1", "trigger identification F1"), ("tc_f1", "trigger classification F1")):
        ax.plot(th, [100 * c[m] for c in curve], marker=".", label=name)
    ax.axvline(chosen, color="grey", linestyle="--", label=f"chosen {chosen:.2f}")
    ax.set_xlabel("identification threshold (1 - P(O))")
    ax.set_ylabel("dev F1 (x100)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return save_png(fig, path)


def early_stopping(patience: int) -> EarlyStopping:
    return EarlyStopping("dev_score", mode="max", patience=patience, restore_best=True)


def seeded_cap(items: list, cap: int | None, seed: int) -> list:
    if not cap or len(items) <= cap:
        return items
    keep = np.sort(np.random.default_rng([seed, 11]).choice(len(items), size=cap, replace=False))
    return [items[int(i)] for i in keep]
