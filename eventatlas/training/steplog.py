"""Per-step training records (``train_steps.parquet``), per-epoch evaluations (``train_evals.parquet``)
and the learning-curve PNG. The warehouse loads the two Parquet files beside the run's metrics, so
learning curves of different runs compare in SQL."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..schema import TRAIN_EVALS, TRAIN_STEPS

STEPS_SCHEMA = TRAIN_STEPS  # one definition, shared with the warehouse (eventatlas.schema)
EVALS_SCHEMA = TRAIN_EVALS


def steps_table(rows: list[dict[str, Any]]) -> pa.Table:
    cols = {f.name: [r.get(f.name) for r in rows] for f in STEPS_SCHEMA}
    cols["terms"] = [list((r.get("terms") or {}).items()) for r in rows]
    return pa.Table.from_pydict(cols, schema=STEPS_SCHEMA)


def evals_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pydict({f.name: [r.get(f.name) for r in rows] for f in EVALS_SCHEMA}, schema=EVALS_SCHEMA)


def _smooth(y: np.ndarray, w: int) -> np.ndarray:
    if len(y) < 3 or w <= 1:
        return y
    w = min(w, len(y))
    k = np.ones(w) / w
    return np.convolve(np.pad(y, (w - 1, 0), mode="edge"), k, mode="valid")


def plot_learning_curve(steps: list[dict[str, Any]], evals: list[dict[str, Any]], path: str | Path, title: str) -> Path:
    """Loss (raw and smoothed) and loss terms per step; evaluation metrics per epoch on the right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..io import atomic_path

    fig, ax = plt.subplots(1, 2 if evals else 1, figsize=(12 if evals else 7, 4.5), squeeze=False)
    a = ax[0][0]
    if steps:
        x = np.array([r["step"] for r in steps])
        y = np.array([r["loss"] for r in steps], dtype=float)
        a.plot(x, y, color="0.75", lw=0.8, label="loss")
        a.plot(x, _smooth(y, max(1, len(y) // 25)), color="C0", lw=1.8, label="loss (smoothed)")
        terms = sorted({k for r in steps for k in (r.get("terms") or {}) if not k.startswith("lr")})
        for i, t in enumerate(terms[:6]):
            v = np.array([(r.get("terms") or {}).get(t, np.nan) for r in steps], dtype=float)
            a.plot(x, _smooth(v, max(1, len(v) // 25)), lw=1, color=f"C{i + 1}", label=t)
        a.set_xlabel("optimizer step")
        a.set_ylabel("loss")
        a.legend(fontsize=8)
    a.set_title("training loss")
    if evals:
        b = ax[0][1]
        for i, m in enumerate(sorted({r["metric"] for r in evals})):
            # the loop counts epochs from 0; an evaluation after the first epoch is drawn at 1
            pts = [(r["epoch"] + 1, r["value"]) for r in evals if r["metric"] == m]
            b.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=f"C{i}", label=m)
        done = sorted({r["epoch"] + 1 for r in evals})
        if len(done) <= 20:
            b.set_xticks(done)
        b.set_xlabel("epochs trained")
        b.set_title("evaluation")
        b.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return path
