"""The publish task: the only code path that writes the warehouse.

Takes run-record paths, writes each run (row + metrics + artifacts) in one transaction,
refreshes the Parquet views, and attaches Prefect table + markdown artifacts.
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Iterable

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from eventatlas import config
from eventatlas.warehouse import Warehouse

from .common import read_record
from .train import load_metrics

HEADLINE = ("ari", "nmi", "bcubed_f", "purity_f", "fmi", "v_measure")


def _key(s: str) -> str:
    """Prefect artifact keys: lowercase letters, digits, dashes."""
    return re.sub(r"[^a-z0-9-]+", "-", s.lower()).strip("-")[:100]


def metrics_markdown(rows: Iterable[dict[str, Any]], title: str) -> str:
    """Pivot: one line per (dataset, representation, clustering), headline metrics as columns (x100)."""
    grid: dict[tuple, dict[str, float]] = defaultdict(dict)
    present: set[str] = set()
    for r in rows:
        grid[(r["dataset"], r.get("method"), r.get("representation"), r.get("clustering"), r.get("seed"))][r["metric"]] = r["value"]
        present.add(r["metric"])
    cols = [m for m in HEADLINE if m in present]
    lines = [f"# {title}", "", "| dataset | method | representation | clustering | seed | "
             + " | ".join(cols) + " |", "|" + "---|" * (5 + len(cols))]
    for (d, meth, rep, cl, seed), vals in sorted(grid.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        cells = [f"{100 * vals[c]:.1f}" if c in vals and vals[c] is not None else "" for c in cols]
        lines.append(f"| {d} | {meth} | {rep} | {cl} | {seed} | " + " | ".join(cells) + " |")
    lines += ["", "Values are x100."]
    return "\n".join(lines)


@task(name="publish")
def publish_task(record_paths: list[str], warehouse_path: str | None = None, data_root: str | None = None,
                 artifacts: bool = True) -> dict[str, Any]:
    logger = get_run_logger()
    wh = Warehouse(warehouse_path)
    wh.migrate()
    published, failed, skipped, all_rows = [], [], [], []
    for p in record_paths:
        rec = read_record(p)
        run = rec["run"]
        rows = load_metrics(rec)
        wh.publish(run, rows, rec.get("artifacts", []))
        {"completed": published, "skipped": skipped}.get(run.get("status"), failed).append(run["run_id"])
        all_rows.extend(rows)
        if artifacts and rows:
            create_table_artifact(
                key=_key(f"metrics-{run.get('method')}-{rows[0]['dataset']}-seed{run.get('seed')}"),
                table=[{k: r[k] for k in ("dataset", "split", "method", "representation", "clustering", "metric",
                                          "value", "seed")} for r in rows],
                description=f"Metrics of run {run['run_id']} ({run.get('method')}, {len(rows)} rows)",
            )
        logger.info("published run %s (%s, %d metric rows) to %s", run["run_id"], run.get("status"), len(rows),
                    wh.path)
    views = wh.refresh_views(data_root or config.data_root())
    return {"published": published, "failed": failed, "skipped": skipped, "metric_rows": len(all_rows), "views": views,
            "warehouse": str(wh.path)}


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
