"""The metric row every evaluator emits (long form, one value per row).

Columns (the warehouse ``metrics`` table has the same ones, plus ``run_id``):

* ``task``: what is evaluated: ``induction`` (clustering mentions into types/frames),
  ``naming``, ``linking``, ``similarity`` (event pairs), ``retrieval``, ``grounding``,
  ``training`` (facts of the training itself, e.g. the chosen stopping epoch), ``atlas`` (type -> frame
  links of the atlas scored against the hand mappings, :mod:`eventatlas.atlas.gold`).
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

import re
from typing import Any, Iterable, Mapping

METRIC_KEYS = ("task", "dataset", "split", "setting", "method", "representation", "clustering", "variant",
               "metric", "value", "seed")
TASKS = ("induction", "naming", "linking", "similarity", "retrieval", "grounding", "training", "atlas")
# the metrics shown first per task (`eventatlas leaderboard`, the report, a run's metric bars)
DEFAULT_METRICS = {"induction": ("ari", "bcubed_f", "nmi"), "naming": ("naming_hits@1", "naming_mrr"),
                   "linking": ("linking_hits@10", "linking_mrr"), "training": ("stop_epoch_paper", "stop_epoch_code"),
                   "atlas": ("hits@1", "mrr"),
                   # per dataset the first one it has: each similarity set has its own accuracy
                   "similarity": ("hard_sim_acc", "hard_sim_ext_acc", "transitive_spearman", "mcnc_acc"),
                   "retrieval": ("map", "r_precision", "recall_all"), "grounding": ("recall_at_min", "strict_acc")}
# Counts, ranks and epochs are shown as they are; every other metric is a fraction shown x100.
NOT_FRACTION = re.compile(r"(mean_rank|n_clusters|unmapped_clusters|n_queries|n_queries_renamed|n_frames|"
                          r"discovery_events|seconds|seconds_per_epoch)$|^stop_epoch_")


def metric_rows(scores: Mapping[str, Any], *, task: str, dataset: str, method: str, seed: int,
                split: str | None = None, setting: str | None = None, representation: str | None = None,
                clustering: str | None = None, variant: str | None = None,
                only: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """One row per ``scores`` entry (``only`` keeps a subset of metric names)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}")
    keep = set(only) if only is not None else None
    return [{"task": task, "dataset": dataset, "split": split, "setting": setting, "method": method,
             "representation": representation, "clustering": clustering, "variant": variant,
             "metric": name, "value": float(value), "seed": int(seed)}
            for name, value in scores.items() if keep is None or name in keep]
