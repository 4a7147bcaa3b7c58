"""Event detection scored the way TextEE and the ACE/MAVEN literature score triggers: strict span match.

A prediction or gold mention is ``(sentence key, start, end, type)`` with end-exclusive character offsets.
* trigger identification (``ti_*``): a predicted span is correct when a gold trigger of the same sentence has
  exactly its offsets (any type);
* trigger classification (``tc_*``): when it also has the gold type.
Micro precision / recall / F1 over every sentence. Duplicates count once (a set per side), so a detector
that predicts one span twice is not paid twice. ``type_agnostic`` keeps the TI scores only (another
dataset's inventory: the types cannot match). F1 is the harmonic mean, 0 where precision + recall is 0.
"""
from __future__ import annotations

from typing import Any, Hashable, Iterable

from .base import RowKey, metric_rows

Span = tuple[Hashable, int, int, str]  # sentence key, start, end, type


def _prf(correct: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    p = correct / n_pred if n_pred else 0.0
    r = correct / n_gold if n_gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


def detection_scores(pred: Iterable[Span], gold: Iterable[Span], *, type_agnostic: bool = False) -> dict[str, float]:
    """TI (and TC unless ``type_agnostic``) precision, recall and F1, plus the counts behind them."""
    pred_typed, gold_typed = set(pred), set(gold)
    pred_spans = {s[:3] for s in pred_typed}
    gold_spans = {s[:3] for s in gold_typed}
    ti = len(pred_spans & gold_spans)
    p, r, f = _prf(ti, len(pred_spans), len(gold_spans))
    out = {"ti_precision": p, "ti_recall": r, "ti_f1": f, "n_predicted": float(len(pred_spans)),
           "n_gold": float(len(gold_spans))}
    if not type_agnostic:
        # a span predicted with two types is two classification predictions (one at most is right)
        tc = len(pred_typed & gold_typed)
        p, r, f = _prf(tc, len(pred_typed), len(gold_typed))
        out.update({"tc_precision": p, "tc_recall": r, "tc_f1": f})
    return out


def evaluate_detection(pred: Iterable[Span], gold: Iterable[Span], *, key: RowKey,
                       type_agnostic: bool = False) -> list[dict[str, Any]]:
    """Metric rows (task ``detection``) of :func:`detection_scores`."""
    return metric_rows(detection_scores(pred, gold, type_agnostic=type_agnostic), task="detection", key=key)
