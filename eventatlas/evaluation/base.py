"""The metric row every evaluator emits (long form, one value per row).

Columns (the warehouse ``metrics`` table has the same ones, plus ``run_id``):

* ``task``: what is evaluated: ``induction`` (clustering mentions into types/frames),
  ``naming``, ``linking``, ``similarity`` (event pairs), ``retrieval``, ``grounding``,
  ``training`` (facts of the training itself, e.g. the chosen stopping epoch), ``atlas`` (type -> frame
  links of the atlas scored against the hand mappings, :mod:`eventatlas.atlas.gold`), ``detection``
  (event triggers found in text, :mod:`eventatlas.evaluation.detection`).
* ``dataset``, ``split``: the data scored.
* ``setting``: the evaluation protocol inside the task (e.g. ``10 seen / 40 unseen``,
  ``fold 1``, ``k=5``); ``None`` when the task has a single protocol.
* ``method``: the method (``untuned``, ``batch_attention``, ...).
* ``representation``: the mention representation (``trigger``, ``sentence``, ...), or ``None``.
* ``clustering``: a clustering *algorithm* name (``agglomerative``, ...) and nothing else; ``None``
  where no clustering is involved.
* ``variant``: what else distinguishes the row inside a method: the clustering input
  (``attn_dot``), the baseline inside a run (``untuned:ft``), an oracle (``perfect``), an
  ensemble (``ensemble3:attn_cos``), a loss (``triplet``)... ``None`` for the plain method.
* ``metric``, ``value`` (float), ``seed`` (``-1`` for rows that pool several seeds).
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Iterable, Mapping

from ..metric_specs import METRIC_SPECS, default_metrics, spec_for

log = logging.getLogger(__name__)

METRIC_KEYS = ("task", "dataset", "split", "setting", "method", "representation", "clustering", "variant",
               "metric", "value", "seed")
TASKS = ("induction", "naming", "linking", "similarity", "retrieval", "grounding", "training", "atlas",
         "detection", "discovery")
# the metrics shown first per task (`eventatlas leaderboard`, the report, a run's metric bars); for
# similarity, per dataset the first one it has: each similarity set has its own accuracy
DEFAULT_METRICS = default_metrics()

_stray = sorted({t for s in METRIC_SPECS for t in s.tasks} - set(TASKS))
if _stray:
    raise ValueError(f"metric specs name unknown tasks {_stray}; known: {TASKS}")
_undeclared: set[str] = set()


@dataclasses.dataclass(frozen=True)
class RowKey:
    """The identity of a metric row: every column of ``METRIC_KEYS`` except ``task``, ``metric`` and ``value``
    (their meanings are in this module's docstring). Evaluators take one instead of the keywords, so a new
    method family passes its identity once; an evaluator that fills a column itself (``clustering`` per
    partition, ``representation`` per pooling, ...) does so with :meth:`replace`."""

    dataset: str
    method: str
    seed: int
    split: str | None = None
    setting: str | None = None
    representation: str | None = None
    clustering: str | None = None
    variant: str | None = None

    def replace(self, **changes: Any) -> RowKey:
        """A copy with ``changes`` (field name -> value)."""
        return dataclasses.replace(self, **changes)


def metric_rows(scores: Mapping[str, Any], *, task: str, key: RowKey,
                only: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """One row per ``scores`` entry (``only`` keeps a subset of metric names)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}")
    if not isinstance(key, RowKey):  # a dict of the old keywords would fail later with a bare AttributeError
        raise TypeError(f"key must be a RowKey, got {type(key).__name__}")
    keep = set(only) if only is not None else None
    for name in scores:
        if spec_for(name) is None and name not in _undeclared and (keep is None or name in keep):
            _undeclared.add(name)  # once per name: shown as a fraction, higher is better
            log.warning("metric %r has no spec in eventatlas.metric_specs: shown x100, higher is better",
                        name)
    return [{"task": task, "dataset": key.dataset, "split": key.split, "setting": key.setting, "method": key.method,
             "representation": key.representation, "clustering": key.clustering, "variant": key.variant,
             "metric": name, "value": float(value), "seed": int(key.seed)}
            for name, value in scores.items() if keep is None or name in keep]
