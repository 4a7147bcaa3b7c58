"""Evaluation layer: evaluators that turn predictions into metric rows (``base.METRIC_KEYS``).

Every evaluator computes its numbers with :mod:`eventatlas.evaluation.metrics` and returns long-form rows
built by :func:`eventatlas.evaluation.base.metric_rows`; a row's identity (dataset, method, seed, ...) is one
:class:`~eventatlas.evaluation.base.RowKey`. Nothing here trains or writes the warehouse.
Each metric name is declared once in :mod:`eventatlas.metric_specs` (task, direction, scale).

Evaluators (import the submodule you need; ``retrieval`` loads faiss, ``clustering`` the clustering code):
``pairs.evaluate_event_pairs`` (similarity), ``retrieval.evaluate_retrieval`` / ``evaluate_scores``,
``grounding.evaluate_grounding``, ``clustering.evaluate_partitions`` / ``cluster_and_score`` (induction).
"""
from .base import METRIC_KEYS, TASKS, RowKey, metric_rows
from ..metric_specs import METRIC_SPECS, MetricSpec, spec_for

__all__ = ["METRIC_KEYS", "METRIC_SPECS", "MetricSpec", "RowKey", "TASKS", "metric_rows", "spec_for"]
