"""The publish task: the only code path that writes the warehouse.

Takes run-record paths, writes each run (row + metrics + artifacts + training logs) in one
transaction, refreshes the Parquet views, and attaches Prefect artifacts: a metrics table per
run and each PNG plot the record lists (``plot/...`` kinds) as a markdown artifact.
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Iterable

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from eventatlas import config
from eventatlas.evaluation.base import METRIC_KEYS
from eventatlas.metric_specs import headline_metrics, scale
from eventatlas.store.publishing import publish_records
from eventatlas.tracking.plots import is_png_plot, plot_markdown
from eventatlas.tracking.records import load_metrics, read_record

HEADLINE = headline_metrics()  # the summary's columns, declared in eventatlas.metric_specs
TABLE_KEYS = METRIC_KEYS


def _key(s: str) -> str:
    """Prefect artifact keys: lowercase letters, digits, dashes."""
    return re.sub(r"[^a-z0-9-]+", "-", s.lower()).strip("-")[:100]


def metrics_markdown(rows: Iterable[dict[str, Any]], title: str) -> str:
    """Pivot of the induction rows: one line per configuration, headline metrics as columns (fractions x100)."""
    grid: dict[tuple, dict[str, float]] = defaultdict(dict)
    present: set[str] = set()
    for r in rows:
        if r.get("task", "induction") != "induction":
            continue
        grid[(r["dataset"], r.get("method"), r.get("representation"), r.get("clustering"), r.get("variant"),
              r.get("seed"))][r["metric"]] = r["value"]
        present.add(r["metric"])
    cols = [m for m in HEADLINE if m in present]
    lines = [f"# {title}", "", "| dataset | method | representation | clustering | variant | seed | "
             + " | ".join(cols) + " |", "|" + "---|" * (6 + len(cols))]
    for (d, meth, rep, cl, var, seed), vals in sorted(grid.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        cells = [f"{scale(c) * vals[c]:.1f}" if c in vals and vals[c] is not None else "" for c in cols]
        lines.append(f"| {d} | {meth} | {rep} | {cl} | {var or ''} | {seed} | " + " | ".join(cells) + " |")
    all_fractions = all(scale(c) == 100.0 for c in cols)
    lines += ["", "Values are x100." if all_fractions else "Fractions are x100, counts as they are."]
    return "\n".join(lines)


def _dataset_of(run: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    params = run.get("params") if isinstance(run.get("params"), dict) else {}
    fps = run.get("data_fingerprints") if isinstance(run.get("data_fingerprints"), dict) else {}
    return str((rows[0]["dataset"] if rows else None) or params.get("dataset") or ",".join(sorted(fps)) or "")


def attach_plots(rec: dict[str, Any], dataset: str) -> list[str]:
    """One markdown artifact per PNG plot of the record (keys without the run id, so each
    configuration's plots form a history in the UI, like the metrics tables)."""
    logger = get_run_logger()
    run = rec["run"]
    keys = []
    for a in rec.get("artifacts") or []:
        if not is_png_plot(a):
            continue
        try:
            md = plot_markdown(a["path"], f"{a['kind']} of {run['run_id']}")
        except OSError as e:  # a missing or unreadable plot must not undo a landed publish
            logger.warning("plot %s of run %s not attached: %s", a["path"], run["run_id"], e)
            continue
        key = _key(f"{a['kind']}-{run.get('method')}-{dataset}-seed{run.get('seed')}")
        create_markdown_artifact(key=key, markdown=md, description=f"{a['kind']} of run {run['run_id']}")
        keys.append(key)
    return keys


@task(name="publish")
def publish_task(record_paths: list[str], warehouse_path: str | None = None, data_root: str | None = None,
                 artifacts: bool = True) -> dict[str, Any]:
    """:func:`eventatlas.store.publishing.publish_records` (runs queued for this warehouse first; a busy
    warehouse queues the runs instead of failing: ``queued`` in the result) + Prefect artifacts."""
    logger = get_run_logger()
    plots: list[str] = []

    def attach(rec: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        if not artifacts:
            return
        run = rec["run"]
        dataset = _dataset_of(run, rows)
        if rows:
            create_table_artifact(
                key=_key(f"metrics-{run.get('method')}-{dataset}-seed{run.get('seed')}"),
                table=[{k: r.get(k) for k in TABLE_KEYS} for r in rows],
                description=f"Metrics of run {run['run_id']} ({run.get('method')}, {len(rows)} rows)",
            )
        plots.extend(attach_plots(rec, dataset))

    out = publish_records(record_paths, warehouse_path=warehouse_path, data_root=data_root or config.data_root(),
                          on_record=attach, warn=logger.warning)
    if out.from_queue:
        logger.info("published %d queued run(s): %s", len(out.from_queue), out.from_queue)
    return {**out.as_dict(), "plots": plots}


@task(name="summarize")
def summarize_task(record_paths: list[str], key: str = "train-all-summary") -> str:
    """Markdown artifact with every run's headline metrics (read from the run records)."""
    rows, lines = [], []
    for p in record_paths:
        rec = read_record(p)
        rows.extend(load_metrics(rec))
        run = rec["run"]
        lines.append(f"- `{run['run_id']}`: {run.get('status')}" + (f" ({run['error'].splitlines()[0]})"
                                                                     if run.get("error") else ""))
    md = metrics_markdown(rows, "eventatlas metrics") + "\n\n## Runs\n" + "\n".join(lines)
    create_markdown_artifact(key=_key(key), markdown=md, description=f"{len(record_paths)} runs")
    return md
