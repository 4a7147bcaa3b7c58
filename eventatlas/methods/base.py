"""What a method returns. The metric-row contract lives in the evaluation layer
(:mod:`eventatlas.evaluation.base`); the selection of labelled mentions in the data layer."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..data.selection import NotApplicable  # noqa: F401  (methods raise it; re-exported for them)
from ..evaluation.base import METRIC_KEYS  # noqa: F401


@dataclass
class MethodResult:
    """Long-form metric rows (keys ``METRIC_KEYS``), artifacts (kind, path, rows, sha256), the effective
    parameters for the run record, the device the work ran on, and the training logs
    (``train_steps`` / ``train_evals`` Parquet files written by :class:`eventatlas.training.Trainer`)."""

    metrics: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    device: str | None = None
    train_steps: list[str] = field(default_factory=list)
    train_evals: list[str] = field(default_factory=list)

    def add_artifact(self, kind: str, path: Any, rows: int | None = None) -> None:
        from ..io import sha256_file

        self.artifacts.append({"kind": kind, "path": str(path), "rows": rows, "sha256": sha256_file(path)})

    def add_training(self, result: Any) -> None:
        """Attach a :class:`eventatlas.training.TrainResult` (its logs and learning-curve plot)."""
        if result.steps_path:
            self.train_steps.append(result.steps_path)
        if result.evals_path:
            self.train_evals.append(result.evals_path)
        if result.plot_path:
            self.add_artifact(f"plot/learning_curve/{result.phase}", result.plot_path)
        self.device = self.device or result.device
