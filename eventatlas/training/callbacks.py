"""Callbacks of the training loop: evaluation, early stopping, model selection.

A callback's ``on_epoch_end`` may return metrics (logged to ``train_evals`` and visible to the
callbacks after it through ``trainer.last_evals``) and may call ``trainer.request_stop(reason)``.
Callbacks keep their state in ``state_dict``/``load_state_dict`` so ``--resume`` restores them.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Callable


class Callback:
    def on_train_begin(self, trainer) -> None:
        pass

    def on_epoch_end(self, trainer, epoch: int) -> dict[str, float] | None:
        return None

    def on_train_end(self, trainer) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class EvalCallback(Callback):
    """Calls ``fn(trainer) -> {metric: value}`` every ``every`` epochs (a dev metric, a silhouette...)."""

    def __init__(self, fn: Callable[[Any], dict[str, float]], every: int = 1):
        self.fn, self.every = fn, max(1, int(every))

    def on_epoch_end(self, trainer, epoch: int) -> dict[str, float] | None:
        if (epoch + 1) % self.every == 0:
            return {k: float(v) for k, v in self.fn(trainer).items()}
        return None


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by ``min_delta`` for ``patience`` evaluations.

    With ``restore_best`` the weights of the best epoch are kept (on the CPU) and put back at the
    end, so the returned model is the selected one, not the last one."""

    def __init__(self, monitor: str, mode: str = "max", patience: int = 2, min_delta: float = 0.0,
                 restore_best: bool = True):
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', not {mode!r}")
        self.monitor, self.mode, self.patience, self.min_delta = monitor, mode, int(patience), float(min_delta)
        self.restore_best = restore_best
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.bad = 0
        self._weights: dict | None = None

    def _better(self, v: float) -> bool:
        if self.best is None or math.isnan(self.best):
            return not math.isnan(v)
        return v > self.best + self.min_delta if self.mode == "max" else v < self.best - self.min_delta

    def on_epoch_end(self, trainer, epoch: int) -> dict[str, float] | None:
        v = trainer.last_evals.get(self.monitor)
        if v is None:
            return None
        if self._better(v):
            self.best, self.best_epoch, self.bad = float(v), epoch, 0
            if self.restore_best:
                self._weights = {k: t.detach().to("cpu", copy=True) for k, t in trainer.unwrapped.state_dict().items()}
        else:
            self.bad += 1
            if self.bad >= self.patience:
                trainer.request_stop(f"early stopping: {self.monitor} did not improve for {self.bad} epochs "
                                     f"(best {self.best:.4f} at epoch {self.best_epoch})")
        return None

    def on_train_end(self, trainer) -> None:
        if self.restore_best and self._weights is not None:
            trainer.unwrapped.load_state_dict(self._weights)

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_epoch": self.best_epoch, "bad": self.bad,
                "weights": copy.copy(self._weights) if self._weights is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_epoch, self.bad = state.get("best"), state.get("best_epoch"), state.get("bad", 0)
        self._weights = state.get("weights")
