"""Evaluation layer: evaluators that turn predictions into metric rows (``base.METRIC_KEYS``).

Every evaluator computes its numbers with :mod:`eventatlas.evaluation.metrics` and returns long-form rows
built by :func:`eventatlas.evaluation.base.metric_rows`. Nothing here trains or writes the warehouse.

Evaluators (import the submodule you need; ``retrieval`` loads faiss, ``clustering`` the clustering code):
``pairs.evaluate_event_pairs`` (similarity), ``retrieval.evaluate_retrieval`` / ``evaluate_scores``,
``grounding.evaluate_grounding``, ``clustering.evaluate_partitions`` / ``cluster_and_score`` (induction).
"""
from .base import METRIC_KEYS, TASKS, metric_rows

__all__ = ["METRIC_KEYS", "TASKS", "metric_rows"]
