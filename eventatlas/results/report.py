"""A results report: one self-contained HTML page from the warehouse (``eventatlas report``).

A contents list links every section. Sections: the leaderboard per task and dataset (mean ± std over
seeds per metric, the best mean of each column marked where the column's values differ and it is not 0,
the metric's direction from ``metric_direction``), a bar chart of the first metric per task and dataset,
learning curves (loss by step) of trained runs from ``train_steps``, one chart per method with its axes
named and its legend under it, 2-D projections of embeddings coloured by gold type per dataset, the
untuned encoder's beside the trained methods' (artifacts ``plot/projection/...`` and ``plot/umap/...``), the runs' other PNG plots
(artifacts ``plot/...``, e.g. metric bars; the newest run's per method, dataset and kind; all embedded
as data URIs), the wiki
event-grounding builds with their diff to the previous build, the benchmarks (per benchmark the latest
ratio against its baseline with both arms and the machine, and its history over code versions), and
the run table (config, code version, data fingerprint, device, status, error). When the warehouse
holds an atlas, the report links its atlas page, ``<report>_atlas.html`` beside it: the searchable,
offline, interactive graph of :mod:`eventatlas.atlas.page` (inline SVG and JavaScript, no library, no
CDN), with the atlas's counts in the report. Discover runs (view ``discovered_types``) get a section of their
own, each with its type and new-type counts and a link to its page (:mod:`eventatlas.discover.page`).

The markup is in Jinja2 templates (``eventatlas/templates/report*.html``, the charts' SVG in
``report_charts.svg``; :mod:`eventatlas.results.templating`), which escape every value; this module reads
the warehouse and computes what they show (formatted numbers, chart coordinates). Charts are inline SVG (no
JavaScript, no CDN, no image files), so the page works offline and opens anywhere. Numbers in cells carry
``data-*`` attributes (the raw value) so a test can check them against the warehouse. Reads the warehouse
read-only.
"""
from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import config
from ..escaping import markdown_text
from ..metric_specs import is_fraction
from ..store.warehouse import Warehouse
# the leaderboard rule (configurations, metrics shown, order, best) is the one `eventatlas leaderboard` uses
from ..metric_specs import scale
from .leaderboard import CONFIG_COLS, IDENTITY, build
from .templating import render as render_template


def _fmt(v: float | None, metric: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v * scale(metric):.1f}"


def load(wh: Warehouse) -> dict[str, Any]:
    """Everything the page shows, as plain Python (one read-only pass over the warehouse)."""
    cols, rows = wh.query_rows(
        f"SELECT {', '.join(IDENTITY)}, metric, mean, std, n_seeds, best FROM leaderboard ORDER BY task, dataset, metric")
    board = [dict(zip(cols, r)) for r in rows]
    _, lower = wh.query_rows("SELECT metric FROM metric_direction WHERE NOT higher_is_better")
    _, runs = wh.query_rows(
        "SELECT run_id, flow, method, status, seed, device, code_version, data_fingerprints, params, started_at, "
        "finished_at, error FROM runs ORDER BY started_at DESC NULLS LAST, run_id")
    run_cols = ["run_id", "flow", "method", "status", "seed", "device", "code_version", "data_fingerprints", "params",
                "started_at", "finished_at", "error"]
    _, steps = wh.query_rows(
        "SELECT s.run_id, r.method, r.seed, coalesce(r.params ->> 'dataset', '') AS dataset, s.phase, s.step, s.loss "
        "FROM train_steps s JOIN runs r USING (run_id) WHERE s.loss IS NOT NULL ORDER BY s.run_id, s.phase, s.step")
    _, plots = wh.query_rows(
        "SELECT a.run_id, a.kind, a.path, r.method, r.seed, coalesce(r.params ->> 'dataset', '') FROM artifacts a "
        "JOIN runs r USING (run_id) WHERE a.kind LIKE 'plot/%' "
        "ORDER BY r.started_at DESC NULLS LAST, a.run_id DESC, a.kind")
    _, tables = wh.query_rows("SELECT table_name FROM information_schema.tables")
    builds, diffs = [], []
    if {"wiki_builds", "wiki_build_diffs"} <= {t[0] for t in tables}:
        bcols, brows = wh.query_rows("SELECT build_id, dataset, recorded_at, n_events, n_mentions, previous_build_id "
                                     "FROM wiki_builds ORDER BY recorded_at DESC NULLS LAST, build_id DESC")
        builds = [dict(zip(bcols, r)) for r in brows]
        if builds:
            dcols, drows = wh.query_rows("SELECT language, events_added, events_removed, mentions_added, "
                                         "mentions_removed FROM wiki_build_diffs WHERE build_id = ? ORDER BY language",
                                         [builds[0]["build_id"]])
            diffs = [dict(zip(dcols, r)) for r in drows]
    return {"board": board, "lower": {r[0] for r in lower}, "runs": [dict(zip(run_cols, r)) for r in runs],
            "steps": steps, "plots": plots, "builds": builds, "diffs": diffs, "warehouse": str(wh.path),
            "benchmarks": load_benchmarks(wh), "experiments": _experiments(wh), "atlas": load_atlas(wh, tables),
            "discovered": load_discovered(wh, tables)}


def load_discovered(wh: Warehouse, tables: list[tuple]) -> list[dict[str, Any]]:
    """The discover runs (view ``discovered_types``): run id, dataset, types, new types (None where the run
    judged none), newest first."""
    if "discovered_types" not in {t[0] for t in tables}:
        return []
    _, cols = wh.query_rows("SELECT column_name FROM information_schema.columns WHERE table_name = 'discovered_types'")
    new = "CASE WHEN count(t.new) > 0 THEN count_if(t.new) END" if ("new",) in cols else "NULL"  # older runs: none
    names, rows = wh.query_rows(
        f"SELECT t.run_id, coalesce(any_value(r.params ->> 'dataset'), '') AS dataset, count(*) AS types, {new} AS new "
        "FROM discovered_types t LEFT JOIN runs r USING (run_id) GROUP BY t.run_id "
        "ORDER BY any_value(r.started_at) DESC NULLS LAST, t.run_id DESC")
    return [{**dict(zip(names, r)), "page": None} for r in rows]


def load_atlas(wh: Warehouse, tables: list[tuple] | None = None) -> dict[str, Any] | None:
    """The atlas's counts (nodes per inventory, links per kind and relation); None without one."""
    if tables is None:
        _, tables = wh.query_rows("SELECT table_name FROM information_schema.tables")
    if "atlas_nodes" not in {t[0] for t in tables}:
        return None
    _, inv = wh.query_rows("SELECT inventory, any_value(kind), count(*) FROM atlas_nodes GROUP BY inventory ORDER BY inventory")
    if not inv:
        return None
    _, links = wh.query_rows("SELECT kind, coalesce(method, relation), count(*) FROM atlas_links "
                             "GROUP BY ALL ORDER BY 1, 2")
    return {"inventories": inv, "links": links}


def _experiments(wh: Warehouse) -> list[dict[str, Any]]:
    """The declared experiments' tables, goals and runs (:mod:`eventatlas.results.experiments`)."""
    from .experiments import load as load_experiments

    return load_experiments(wh)


def leaderboard_tables(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One table per (task, dataset): configurations x chosen metrics, mean/std/n, best mean marked
    (:func:`eventatlas.results.leaderboard.build`, the rule `eventatlas leaderboard` prints)."""
    return build(data["board"], data["lower"])


def _table_view(t: dict[str, Any], lower: set[str]) -> dict[str, Any]:
    """One leaderboard table: header, and per configuration its cells (None where it has no value)."""
    head = [*CONFIG_COLS, "seeds", *(f"{m} {'↓' if m in lower else '↑' if is_fraction(m) else ''}"
                                     for m in t["metrics"])]
    rows, marked = [], _best_marked(t)
    for conf, cells in t["rows"]:
        shown = []
        for m in t["metrics"]:
            c = cells.get(m)
            if c is None:
                shown.append(None)
                continue
            std = f" ± {_fmt(c['std'], m)}" if c.get("std") is not None else ""
            shown.append({"metric": m, "mean": c["mean"], "std": c["std"], "text": _fmt(c["mean"], m) + std,
                          "best": m in marked and c["mean"] is not None and math.isclose(c["mean"], t["best"][m])})
        rows.append({"conf": conf, "n": max((c.get("n_seeds") or 0) for c in cells.values()), "cells": shown})
    return {"task": t["task"], "dataset": t["dataset"], "head": head, "rows": rows, "bars": _bars(t)}


def _best_marked(t: dict[str, Any]) -> set[str]:
    """The metrics whose best mean the report highlights: only where it tells something, i.e. the column's
    values differ as shown (one row, or all rows equal: no best) and the best is not a 0.0."""
    out = set()
    for m, best in t["best"].items():
        shown = {_fmt(c[m]["mean"], m) for _, c in t["rows"] if m in c and c[m]["mean"] is not None}
        if len(shown) > 1 and _fmt(best, m).lstrip("-") not in ("0.0", ""):
            out.add(m)
    return out


def _bars(t: dict[str, Any]) -> dict[str, Any] | None:
    """Horizontal bars of the first metric's mean per configuration (x100 for fractions); None without one."""
    m = t["metrics"][0]
    rows = [(conf, cells[m]["mean"]) for conf, cells in t["rows"] if m in cells and cells[m]["mean"] is not None][:40]
    # label by what tells the bars apart: configuration columns equal on every bar are left out
    method = CONFIG_COLS.index("method")
    varying = [i for i in range(len(CONFIG_COLS)) if len({conf[i] for conf, _ in rows}) > 1] or [method]
    items = []
    for conf, v in rows:
        label = " / ".join(str(conf[i]) for i in varying if conf[i] not in (None, "")) or str(conf[method])
        items.append((label if len(label) <= 52 else label[:51] + "…", v))
    if not items:
        return None
    vmax = max(abs(v) for _, v in items) or 1.0
    label_w, bar_w, h = 330, 360, 16
    return {"metric": m, "x100": is_fraction(m), "width": 760, "height": h * len(items) + 24, "label_w": label_w,
            "bar_h": h, "bars": [{"label": label, "y": 18 + i * h, "length": max(1.0, bar_w * abs(v) / vmax),
                                  "value": _fmt(v, m)} for i, (label, v) in enumerate(items)]}


_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")


def _curves(steps: list[tuple]) -> list[dict[str, Any]]:
    """Loss by step, one chart per run family (method), one polyline per run x phase (trained runs only), in
    SVG coordinates, with the axes named and a legend (HTML under the chart, never cut off)."""
    series: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for run_id, method, seed, dataset, phase, step, loss in steps:
        if loss is not None and math.isfinite(loss):
            series[(run_id, method, seed, dataset, phase)].append((float(step), float(loss)))
    by_method: dict[str, dict[tuple, list]] = defaultdict(dict)
    for key, pts in series.items():
        by_method[str(key[1])][key] = pts
    return [_curve_chart(m, by_method[m]) for m in sorted(by_method)]


def _curve_chart(method: str, series: dict[tuple, list[tuple[float, float]]]) -> dict[str, Any]:
    xs = [x for s in series.values() for x, _ in s]
    ys = [y for s in series.values() for _, y in s]
    x0, x1, y0, y1 = min(xs), max(xs) or 1.0, min(ys), max(ys)
    x1 = x1 if x1 > x0 else x0 + 1
    y1 = y1 if y1 > y0 else y0 + 1
    w, h, left, right, top, bottom = 760, 300, 64, 10, 10, 40  # margins: the y ticks and label, the x ones
    lines = []
    for i, (key, pts) in enumerate(sorted(series.items(), key=lambda kv: [str(k) for k in kv[0]])):
        run_id, _, seed, dataset, phase = key
        points = " ".join(f"{left + (x - x0) / (x1 - x0) * (w - left - right):.1f},"
                          f"{h - bottom - (y - y0) / (y1 - y0) * (h - bottom - top):.1f}" for x, y in sorted(pts))
        lines.append({"points": points, "colour": _COLOURS[i % len(_COLOURS)], "run_id": run_id, "n": len(pts),
                      "method": method, "seed": seed, "dataset": dataset, "phase": phase})
    return {"method": method, "width": w, "height": h, "left": left, "right": w - right, "top": top,
            "bottom": h - bottom, "mid_x": (left + w - right) / 2, "mid_y": (top + h - bottom) / 2,
            "x0": f"{x0:g}", "x1": f"{x1:g}", "y0": f"{y0:.3g}", "y1": f"{y1:.3g}", "lines": lines}


# 2-D embedding projections: the untuned method's and batch attention's (shown side by side per dataset)
PROJECTION_KINDS = ("plot/projection/", "plot/umap/")


def _is_projection(kind: str) -> bool:
    return str(kind).startswith(PROJECTION_KINDS)


def _latest_plots(plots: list[tuple]) -> list[tuple]:
    """The newest run's plot per (method, dataset, kind) whose PNG exists (``plots`` come newest first)."""
    seen, out = set(), []
    for p in plots:
        run_id, kind, path, method, seed, dataset = p
        if not (path and str(path).lower().endswith(".png") and Path(path).is_file()):
            continue
        if (method, dataset, kind) not in seen:
            seen.add((method, dataset, kind))
            out.append(p)
    return out


def _figure(p: tuple) -> dict[str, Any]:
    from ..tracking.plots import png_data_uri

    run_id, kind, path, method, seed, dataset = p
    return {"run_id": run_id, "kind": kind, "method": method, "dataset": dataset, "path": path,
            "uri": png_data_uri(path), "caption": f"{kind} — {method} seed {seed} {dataset} ({run_id})"}


def _projections(plots: list[tuple]) -> list[dict[str, Any]]:
    """Per dataset, the newest projection of each method in one row: untuned first, trained beside it."""
    by_ds: dict[str, list[tuple]] = defaultdict(list)
    for p in _latest_plots([p for p in plots if _is_projection(p[1])]):
        by_ds[p[5]].append(p)
    out = []
    for ds in sorted(by_ds):
        figs = sorted(by_ds[ds], key=lambda p: (p[3] != "untuned", str(p[3]), str(p[1])))
        methods = {p[3] for p in figs}
        note = None if "untuned" in methods and len(methods) > 1 else (
            "Only the untuned encoder" if methods == {"untuned"} else "No untuned run")
        out.append({"dataset": ds, "note": note, "figures": [_figure(p) for p in figs]})
    return out


def _plots(plots: list[tuple]) -> list[dict[str, Any]]:
    """The runs' other PNG plots (downscaled data URIs: the page stays one file), newest run's per
    (method, dataset, kind)."""
    return [_figure(p) for p in _latest_plots([p for p in plots if not _is_projection(p[1])])]


WIKI_BUILD_COLS = ("build_id", "dataset", "recorded_at", "n_events", "n_mentions", "previous_build_id")
WIKI_DIFF_COLS = ("language", "events_added", "events_removed", "mentions_added", "mentions_removed")


def _runs(runs: list[dict]) -> list[dict[str, Any]]:
    """The run table's rows: data fingerprints shortened, the config cut to 160 characters (whole in a tooltip)."""
    out = []
    for r in runs:
        fp = r["data_fingerprints"]
        try:
            fp = ", ".join(f"{k}: {str(v)[:12]}" for k, v in json.loads(fp).items()) if fp else ""
        except (TypeError, ValueError):
            pass
        params = r["params"] or ""
        out.append({**r, "fingerprints": fp, "params": params, "version": str(r["code_version"] or "")[:12],
                    "short": params if len(params) <= 160 else params[:157] + "..."})
    return out


def render(data: dict[str, Any], title: str = "eventatlas results") -> str:
    """The page as one HTML string (inline CSS and SVG only; ``templates/report.html``)."""
    from .experiments import html_view

    tables = [_table_view(t, data["lower"]) for t in leaderboard_tables(data)]
    tasks = [{"name": task, "tables": [t for t in tables if t["task"] == task]}
             for task in dict.fromkeys(t["task"] for t in tables)]
    return render_template(
        "report.html", title=title, warehouse=data["warehouse"], n_runs=len(data["runs"]),
        generated=datetime.now(timezone.utc).isoformat(timespec="seconds"), tasks=tasks,
        experiments=html_view(data.get("experiments") or []), curves=_curves(data["steps"]),
        projections=_projections(data.get("plots") or []), plots=_plots(data.get("plots") or []),
        builds=data.get("builds") or [], diffs=data.get("diffs") or [], build_cols=WIKI_BUILD_COLS,
        diff_cols=WIKI_DIFF_COLS, atlas=data.get("atlas"), atlas_page=data.get("atlas_page"),
        discovered=data.get("discovered") or [],
        bench=_benchmarks(data.get("benchmarks") or []), runs=_runs(data["runs"]))


# ----------------------------------------------------------------------------- benchmarks
BENCH_KEY = ("benchmark", "setting", "quantity")


def load_benchmarks(wh: Warehouse) -> list[dict[str, Any]]:
    """Every benchmark row of a completed, non-smoke run with its code version, newest run first; none
    when the warehouse predates the ``benchmarks`` table (migration 008)."""
    _, found = wh.query_rows("SELECT 1 FROM information_schema.tables WHERE table_name = 'benchmarks'")
    if not found:
        return []
    cols, rows = wh.query_rows(
        "SELECT b.run_id, b.benchmark, b.setting, b.quantity, b.higher_is_better, b.ours_label, b.baseline_label, "
        "b.ours, b.baseline, b.ratio, b.\"precision\", b.device, b.cpu_model, b.gpu_model, b.threads, b.loadavg_start, "
        "b.loadavg_end, r.code_version, r.finished_at FROM benchmarks b JOIN runs r USING (run_id) "
        "WHERE r.status = 'completed' AND NOT b.smoke "
        "ORDER BY r.finished_at DESC NULLS LAST, b.run_id DESC, b.benchmark, b.setting NULLS FIRST, b.quantity")
    return [dict(zip(cols, r)) for r in rows]


def _num(v: float | None, unit: str = "") -> str:
    return "" if v is None else f"{v:.3g}{unit}"


def _machine(r: dict[str, Any]) -> str:
    parts = [r.get("gpu_model"), r.get("cpu_model"), f"{r['threads']} threads" if r.get("threads") else None]
    return ", ".join(str(p) for p in parts if p)


def _load(r: dict[str, Any]) -> str:
    a, b = r.get("loadavg_start"), r.get("loadavg_end")
    return "" if a is None else f"{a:.1f} → {b:.1f}" if b is not None else f"{a:.1f}"


def _arm(label: Any, value: Any) -> str:
    """A benchmark arm's cell; a measurement with no baseline arm (a memory ceiling) shows none."""
    return "-" if value is None else f"{label}: {_num(value)}"


def _bench_row(r: dict[str, Any]) -> dict[str, Any]:
    """A benchmark row with what its cells show (both arms, the ratio, the machine and its load)."""
    return {**r, "ours_text": f"{r['ours_label']}: {_num(r['ours'])}", "ratio_text": _num(r["ratio"], "×"),
            "baseline_text": _arm(r["baseline_label"], r["baseline"]), "machine": _machine(r),
            "better": r["ratio"] is not None and r["ratio"] > 1, "load": _load(r),
            "arrow": "↑" if r["higher_is_better"] else "↓", "version": str(r["code_version"] or "")}


def _benchmarks(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The latest figures per benchmark x setting x quantity (ratio > 1: eventatlas better, whatever the
    quantity's direction), then each benchmark's history over its runs (code versions), newest first."""
    if not rows:
        return None
    latest: dict[tuple, dict[str, Any]] = {}
    for r in rows:  # newest first: the first row of each key is its latest
        latest.setdefault(tuple(r[k] for k in BENCH_KEY), r)
    return {"latest": [_bench_row(r) for _, r in sorted(latest.items(), key=lambda kv: [str(k) for k in kv[0]])],
            "history": [{"benchmark": b, "rows": [_bench_row(r) for r in rows if r["benchmark"] == b]}
                        for b in sorted({r["benchmark"] for r in rows})]}


def benchmarks_html(rows: list[dict[str, Any]]) -> str:
    """The report's benchmarks section alone (``templates/report_benchmarks.html``)."""
    return render_template("report_benchmarks.html", bench=_benchmarks(rows))


BENCHMARKS_PAGE = "benchmarks.md"


def _md(v: Any) -> str:
    from .experiments import _md_escape  # the experiment pages' table-cell escape

    return "" if v is None else _md_escape(v)


def benchmarks_markdown(rows: list[dict[str, Any]]) -> str:
    """The benchmarks page (``docs/results/benchmarks.md``, by ``eventatlas report --markdown DIR``): the latest
    figures per benchmark x setting x quantity, then each benchmark's history, newest first, as in the
    report's section (:func:`benchmarks_html`). Only warehouse values: it regenerates byte for byte."""
    lines = ["# Benchmarks", "",
             "<!-- generated by `eventatlas report --markdown DIR` from the warehouse table `benchmarks`; do not edit "
             "by hand: run the benchmark (benchmarks/*.py) and regenerate -->", "",
             "Each benchmark measures eventatlas against its baseline in the same run, on the same machine and input "
             "(the scripts under `benchmarks/`; `make bench` runs the main ones). Ratio > 1 means eventatlas is better "
             "(↑: higher is better, ↓: lower is better). Load: the 1-minute load average at start → end; on a shared "
             "machine it says how much else ran.", ""]
    if not rows:
        return "\n".join(lines + ["No benchmark run in the warehouse yet: `make bench` (or any "
                                   "`benchmarks/bench_*.py`) records one.", ""])
    head = len(lines)  # the page's own text (its comment included) above; below, values from the warehouse
    latest: dict[tuple, dict[str, Any]] = {}
    for r in rows:  # newest first: the first row of each key is its latest
        latest.setdefault(tuple(r[k] for k in BENCH_KEY), r)
    lines += ["## Latest", "", "| benchmark | setting | quantity | eventatlas | baseline | ratio | machine | load | "
              "code version |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in sorted(latest.items(), key=lambda kv: [str(k) for k in kv[0]]):
        lines.append(_bench_md_row(r, [r["benchmark"], r["setting"], f"{r['quantity']} {'↑' if r['higher_is_better'] else '↓'}"]))
    for bench in sorted({r["benchmark"] for r in rows}):
        lines += ["", f"## {bench}: history", "", "| finished | setting | quantity | eventatlas | baseline | ratio | "
                  "machine | load | code version |", "|---|---|---|---|---|---|---|---|---|"]
        lines += [_bench_md_row(r, [str(r["finished_at"] or "")[:16], r["setting"], r["quantity"]])
                  for r in rows if r["benchmark"] == bench]
    return "\n".join(lines[:head] + [markdown_text(x) for x in lines[head:]] + [""])


def _bench_md_row(r: dict[str, Any], first: list[Any]) -> str:
    cells = [*first, f"{r['ours_label']}: {_num(r['ours'])}", _arm(r["baseline_label"], r["baseline"]),
             f"**{_num(r['ratio'], '×')}**" if r["ratio"] is not None and r["ratio"] > 1 else _num(r["ratio"], "×"),
             _machine(r), _load(r), r["code_version"]]
    return "| " + " | ".join(_md(c) for c in cells) + " |"


def write_pages(out_dir: str | os.PathLike, wh: Warehouse | None = None, mode: str | None = None) -> list[Path]:
    """The Markdown results pages (``report --markdown DIR``): one per experiment (and mode, see
    :func:`experiments.write_markdown`) and, unless ``mode`` picks one, the benchmarks page
    (``benchmarks.md``), each written atomically; returns the paths."""
    from ..io import atomic_write_text
    from .experiments import write_markdown

    wh = wh or Warehouse()
    paths = write_markdown(out_dir, wh, mode)
    if mode is None:
        p = Path(out_dir) / BENCHMARKS_PAGE
        atomic_write_text(p, benchmarks_markdown(load_benchmarks(wh)))
        paths.append(p)
    return paths


def write_report(out: str | os.PathLike, warehouse: Warehouse | None = None) -> Path:
    """Render the warehouse's report into ``out`` (written atomically)."""
    wh = warehouse or Warehouse()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = load(wh)
    if data["atlas"]:
        data["atlas_page"] = write_atlas_page(out.with_name(f"{out.stem}_atlas.html"), wh).name
    for d in data.get("discovered") or []:  # each discover run's own page, linked relative to the report
        page = config.runs_dir() / d["run_id"] / "page.html"
        d["page"] = Path(os.path.relpath(page.resolve(), out.parent.resolve())).as_posix() if page.exists() else None
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(render(data), encoding="utf-8")
    os.replace(tmp, out)
    return out


def write_atlas_page(out: Path, wh: Warehouse) -> Path:
    """The atlas page (:func:`eventatlas.atlas.page.write_html`) from the warehouse's atlas."""
    from ..atlas.page import write_html
    from .atlas_query import all_rows, evidence_sentences

    nodes, links = all_rows(wh.path)
    return write_html(nodes, links, out.parent, evidence_sentences(links, warehouse_path=wh.path), name=out.name)
