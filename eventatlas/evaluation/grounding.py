"""Set-valued event grounding (task ``grounding``), e.g. hierarchical event grounding (Ou et al.
2023): each mention's gold is a *set* of event ids (its atomic event plus the ancestors it is
part of), and a system returns a ranked list of candidate event ids, optionally with scores and
a predicted set.

Metrics (means over mentions; :mod:`eventatlas.evaluation.metrics` computes each):

* ``recall@k`` for each k in ``ks``: 1 when *every* gold id is in the top k candidates, else 0
  (``metrics.recall_at_k == 1``). With |gold| > k it is 0 by construction.
* ``recall_at_min``: fractional recall at k = |gold| (``metrics.recall_at_min``): the share of
  gold ids among the top-|gold| candidates.
* ``strict_acc_top_min``: share of mentions whose top-|gold| candidate set equals the gold set
  (``metrics.strict_accuracy``); the all-or-nothing version of ``recall_at_min``.
* Predicted sets (when ``predicted`` or ``threshold`` is given): ``strict_acc`` (exact set match),
  ``micro_p/r/f1`` and ``macro_p/r/f1`` (``metrics.prf_micro`` / ``metrics.prf_macro``, loose
  Ling & Weld 2012 definitions). ``threshold`` predicts the candidates scoring >= it.
* ``recall_at_min_atomic_bound``: the highest ``recall_at_min`` a system that outputs only the
  single atomic event (no ancestors) can reach: even when that one event is right, the top-|gold|
  list holds 1 of the |gold| ids, so the bound is the mean over mentions of 1/|gold|. It is a
  property of the gold sets (not of the system) and shows what predicting the hierarchy is worth.
"""
from __future__ import annotations

from typing import Any, Collection, Hashable, Sequence

import numpy as np

from . import metrics as M
from .base import RowKey, metric_rows

DEFAULT_KS = (1, 5, 10)

__all__ = ["DEFAULT_KS", "grounding_scores", "evaluate_grounding"]


def _check(ranked, gold, scores, predicted) -> tuple[list[list], list[set]]:
    rk = [list(r) for r in ranked]
    gs = [set(g) for g in gold]
    if not gs:
        raise ValueError("grounding needs at least one mention, got none")
    if len(rk) != len(gs):
        raise ValueError(f"{len(rk)} ranked candidate lists but {len(gs)} gold sets")
    for i, (r, g) in enumerate(zip(rk, gs)):
        if not g:
            raise ValueError(f"mention {i} has an empty gold set")
        if len(set(r)) != len(r):
            raise ValueError(f"mention {i}: ranked candidates repeat an id")
    if scores is not None:
        if len(scores) != len(rk):
            raise ValueError(f"{len(rk)} ranked lists but {len(scores)} score lists")
        for i, (r, s) in enumerate(zip(rk, scores)):
            s = np.asarray(s, dtype=np.float64)
            if s.shape != (len(r),):
                raise ValueError(f"mention {i}: {len(r)} candidates but {s.size} scores")
            if not np.isfinite(s).all():
                raise ValueError(f"mention {i}: scores contain NaN or inf")
            if (np.diff(s) > 0).any():
                raise ValueError(f"mention {i}: candidates must be ranked best first (scores non-increasing)")
    if predicted is not None and len(predicted) != len(rk):
        raise ValueError(f"{len(rk)} mentions but {len(predicted)} predicted sets")
    return rk, gs


def grounding_scores(
    ranked: Sequence[Sequence[Hashable]],
    gold: Sequence[Collection[Hashable]],
    *,
    scores: Sequence[Sequence[float]] | None = None,
    predicted: Sequence[Collection[Hashable]] | None = None,
    threshold: float | None = None,
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, float]:
    """The metrics of the module docstring as {name: value}.

    ``ranked[m]``: candidate ids for mention m, best first (no repeats; may be empty).
    ``gold[m]``: its non-empty gold id set. ``scores[m]``: the candidates' scores (non-increasing),
    needed for ``threshold``. Give ``predicted`` or ``threshold`` (not both) for the set metrics.
    """
    if predicted is not None and threshold is not None:
        raise ValueError("give predicted sets or a threshold, not both")
    if threshold is not None and scores is None:
        raise ValueError("threshold needs the candidates' scores")
    ks = tuple(sorted({M._check_k(k) for k in ks}))
    if not ks:
        raise ValueError("ks is empty: give at least one cut-off")
    rk, gs = _check(ranked, gold, scores, predicted)
    out: dict[str, float] = {}
    for k in ks:
        out[f"recall@{k}"] = float(np.mean([M.recall_at_k(r, g, k) == 1.0 for r, g in zip(rk, gs)]))
    out["recall_at_min"] = float(np.mean([M.recall_at_min(r, g) for r, g in zip(rk, gs)]))
    out["strict_acc_top_min"] = M.strict_accuracy([r[: len(g)] for r, g in zip(rk, gs)], gs)
    if threshold is not None:
        predicted = [[c for c, s in zip(r, sc) if s >= threshold] for r, sc in zip(rk, scores)]
    if predicted is not None:
        out["strict_acc"] = M.strict_accuracy(predicted, gs)
        out["micro_p"], out["micro_r"], out["micro_f1"] = M.prf_micro(predicted, gs)
        out["macro_p"], out["macro_r"], out["macro_f1"] = M.prf_macro(predicted, gs)
    out["recall_at_min_atomic_bound"] = float(np.mean([1.0 / len(g) for g in gs]))
    return out


def evaluate_grounding(
    ranked: Sequence[Sequence[Hashable]],
    gold: Sequence[Collection[Hashable]],
    *,
    scores: Sequence[Sequence[float]] | None = None,
    predicted: Sequence[Collection[Hashable]] | None = None,
    threshold: float | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    key: RowKey,
) -> list[dict[str, Any]]:
    """:func:`grounding_scores` as metric rows (task ``grounding``, identity ``key``)."""
    values = grounding_scores(ranked, gold, scores=scores, predicted=predicted, threshold=threshold, ks=ks)
    return metric_rows(values, task="grounding", key=key)
