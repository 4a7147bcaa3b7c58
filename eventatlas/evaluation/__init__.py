"""Evaluation layer: evaluators that turn predictions into metric rows (``base.METRIC_KEYS``).

Every evaluator computes its numbers with :mod:`eventatlas.metrics` and returns long-form rows
built by :func:`eventatlas.evaluation.base.metric_rows`. Nothing here trains or writes the warehouse.
"""
from .base import METRIC_KEYS, TASKS, metric_rows

__all__ = ["METRIC_KEYS", "TASKS", "metric_rows"]
