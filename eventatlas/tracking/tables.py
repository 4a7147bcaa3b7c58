"""The row layouts a run record's files share with the warehouse, and their checks: metric rows
(:data:`METRICS_SCHEMA`, :func:`metrics_table`) and training logs (:data:`TRAIN_STEPS_SCHEMA`,
:data:`TRAIN_EVALS_SCHEMA`, :func:`train_log_table`). A run writes its files in these layouts and the
publish path lands them unchanged: both check rows with these functions, before anything reaches disk or the
warehouse.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow as pa

from ..schema import TRAIN_EVALS, TRAIN_STEPS


class TableError(RuntimeError):
    """Rows or a training log that do not fit their table; the message names the row or the file."""


# run_id + eventatlas.evaluation.base.METRIC_KEYS + trained_on, in the warehouse's column order
METRICS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("task", pa.string()),
        pa.field("dataset", pa.string()),
        pa.field("split", pa.string()),
        pa.field("setting", pa.string()),
        pa.field("method", pa.string()),
        pa.field("representation", pa.string()),
        pa.field("clustering", pa.string()),
        pa.field("variant", pa.string()),
        pa.field("metric", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("seed", pa.int32()),
        # where the scored model was trained (migration 007): NULL for the untuned baseline, the row's
        # own dataset for a run scored on its data, another one for a cross-dataset cell
        pa.field("trained_on", pa.string()),
    ]
)
# What a trainer writes to runs/<run_id>/train_steps.parquet and train_evals.parquet (the
# warehouse tables of migration 004 add run_id); defined with the other schemas.
TRAIN_STEPS_SCHEMA = TRAIN_STEPS
TRAIN_EVALS_SCHEMA = TRAIN_EVALS


def _describe_row(r: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={r.get(k)!r}" for k in ("dataset", "method", "representation", "clustering", "metric")
                     if r.get(k) is not None)


def metrics_table(rows: Iterable[Mapping[str, Any]], run_id: str | None = None) -> pa.Table:
    """Long-form metric rows (eventatlas.evaluation.base.METRIC_KEYS) -> Arrow table with the
    warehouse column types. Refuses, naming the row: a missing or unknown ``task``, a missing
    ``metric``/``dataset``, a non-numeric ``value``, a ``clustering`` in the old combined
    ``<variant>/<algorithm>`` form."""
    from ..evaluation.base import TASKS

    cols: dict[str, list] = {n: [] for n in METRICS_SCHEMA.names}
    for i, r in enumerate(rows):
        task = r.get("task")
        if task is None:
            raise TableError(f"metric row {i}: 'task' is required (one of {', '.join(TASKS)}); "
                                 f"row: {_describe_row(r)}")
        if task not in TASKS:
            raise TableError(f"metric row {i}: unknown task {task!r} (known: {', '.join(TASKS)}); "
                                 f"row: {_describe_row(r)}")
        if not r.get("metric") or not r.get("dataset"):
            raise TableError(f"metric row {i}: 'metric' and 'dataset' are required; row: {_describe_row(r)}")
        clus = r.get("clustering")
        if isinstance(clus, str) and "/" in clus:
            raise TableError(f"metric row {i}: clustering {clus!r} must be an algorithm name; put the rest in "
                                 f"'variant' (clustering={split_legacy_clustering(clus)[0]!r}, "
                                 f"variant={split_legacy_clustering(clus)[1]!r}); row: {_describe_row(r)}")
        for n in METRICS_SCHEMA.names:
            v = r.get(n)
            if n == "run_id" and v is None:
                v = run_id
            if n == "value" and v is not None:
                try:
                    v = float(v)
                except (TypeError, ValueError):
                    raise TableError(f"metric row {i}: value {v!r} is not a number ({dict(r)})") from None
            cols[n].append(v)
    return pa.Table.from_pydict(cols, schema=METRICS_SCHEMA)


# Clustering values that never named an algorithm in the old combined column.
_LEGACY_VARIANTS = ("perfect", "stopping")


def split_legacy_clustering(text: str | None) -> tuple[str | None, str | None]:
    """The old combined ``clustering`` text -> (clustering, variant), as migration 003 backfills.

    ``attn_dot/manifold`` -> (manifold, attn_dot); ``untuned:ft/affinity`` -> (affinity, untuned:ft);
    ``ensemble3:attn_cos/agglomerative`` -> (agglomerative, ensemble3:attn_cos); ``perfect`` ->
    (None, perfect); ``agglomerative`` -> (agglomerative, None). Split at the last ``/``.
    """
    if text is None:
        return None, None
    if text in _LEGACY_VARIANTS:
        return None, text
    if "/" in text:
        variant, _, algo = text.rpartition("/")
        return algo or None, variant or None
    return text or None, None


def legacy_task(metric: str) -> str:
    """The task of a metric row written before rows carried one (migration 003's rule)."""
    if metric.startswith("naming_"):
        return "naming"
    if metric.startswith("linking_"):
        return "linking"
    if metric.startswith("stop_epoch_"):
        return "training"
    return "induction"


def legacy_metric_keys(clustering: str | None, metric: str) -> dict[str, str | None]:
    """``task``, ``clustering``, ``variant`` of an old-style row (clustering text, metric name)."""
    algo, variant = split_legacy_clustering(clustering)
    return {"task": legacy_task(metric), "clustering": algo, "variant": variant}


def train_log_table(data: Any, schema: pa.Schema, what: str, run_id: str | None = None) -> pa.Table | None:
    """A training log (Arrow table, Parquet path or list of dicts) checked against ``schema``;
    with ``run_id`` the result gains a leading run_id column (the warehouse table's layout)."""
    if data is None:
        return None
    src = f"{what} ({data})" if isinstance(data, (str, os.PathLike)) else what
    if isinstance(data, (str, os.PathLike)):
        import pyarrow.parquet as pq

        if not Path(data).exists():
            raise TableError(f"{src}: file not found")
        table = pq.read_table(data)
    elif isinstance(data, pa.Table):
        table = data
    else:
        rows = [dict(r) for r in data]
        extra = sorted({k for r in rows for k in r} - set(schema.names))
        if extra:
            raise TableError(f"{src}: unexpected columns {extra}; expected {schema.names}")
        # missing keys become nulls (the null check below still guards required columns)
        table = pa.Table.from_pylist(rows, schema=pa.schema([f.with_nullable(True) for f in schema]))
    missing = [n for n in schema.names if n not in table.column_names]
    extra = [n for n in table.column_names if n not in schema.names]
    if missing or extra:
        raise TableError(f"{src}: columns must be exactly {schema.names}"
                             + (f"; missing {missing}" if missing else "") + (f"; unexpected {extra}" if extra else ""))
    table = table.select(schema.names)
    for f in schema:
        if not f.nullable and table.column(f.name).null_count:
            raise TableError(f"{src}: column {f.name!r} has {table.column(f.name).null_count} null value(s)")
    try:
        table = table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise TableError(f"{src}: columns do not fit {schema}: {e}") from None
    if run_id is not None:
        table = table.add_column(0, pa.field("run_id", pa.string(), nullable=False),
                                 pa.array([run_id] * table.num_rows, pa.string()))
    return table
