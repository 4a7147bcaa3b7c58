"""A results report: one self-contained HTML page from the warehouse (``eventatlas report``).

Sections: the leaderboard per task and dataset (mean ± std over seeds per metric, the best mean of
each column marked, the metric's direction from ``metric_direction``), a bar chart of the first
metric per task and dataset, learning curves (loss by step) of trained runs from ``train_steps``,
2-D projections of embeddings coloured by gold type per dataset, the untuned encoder's beside the
trained methods' (artifacts ``plot/projection/...`` and ``plot/umap/...``), the runs' other PNG plots
(artifacts ``plot/...``, e.g. metric bars; the newest run's per method, dataset and kind; all embedded
as data URIs), the wiki
event-grounding builds with their diff to the previous build, the benchmarks (per benchmark the latest
ratio against its baseline with both arms and the machine, and its history over code versions), and
the run table (config, code version, data fingerprint, device, status, error). When the warehouse
holds an atlas, the report links its atlas page, ``<report>_atlas.html`` beside it: the searchable,
offline, interactive graph of :mod:`eventatlas.results.atlas_page` (inline SVG and JavaScript, no library, no
CDN), with the atlas's counts in the report.

Charts are inline SVG written here (no JavaScript, no CDN, no image files), so the page works
offline and opens anywhere. Numbers in cells carry ``data-*`` attributes (the raw value) so a test
can check them against the warehouse. Reads the warehouse read-only.
"""
from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..evaluation.base import NOT_FRACTION
from .escaping import html_text, markdown_text
# the leaderboard rule (configurations, metrics shown, order, best) is the one `eventatlas leaderboard` uses
from .leaderboard import CONFIG_COLS, IDENTITY, build
from .warehouse import Warehouse

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:15px;margin:20px 0 6px}
table{border-collapse:collapse;margin:6px 0 14px;font-size:13px}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.best{font-weight:700;background:#e6f4ea}.muted{color:#777}.err{color:#a40000}
svg text{font:11px system-ui,sans-serif}.note{color:#555;font-size:12px}
.side{display:flex;gap:12px;align-items:flex-start}.side figure{flex:1 1 0;margin:0;min-width:0}
"""


_e = html_text


def _scale(metric: str) -> float:
    return 1.0 if NOT_FRACTION.search(metric) else 100.0


def _fmt(v: float | None, metric: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v * _scale(metric):.1f}"


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
            "benchmarks": load_benchmarks(wh), "experiments": _experiments(wh), "atlas": load_atlas(wh, tables)}


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


def _atlas_html(atlas: dict[str, Any] | None, page: str | None) -> str:
    if not atlas:
        return '<p class="muted">No atlas in this warehouse (<code>eventatlas atlas build</code> makes one).</p>'
    rows = "".join(f"<tr><td>{_e(i)}</td><td>{_e(k)}</td><td class=\"num\">{n:,}</td></tr>" for i, k, n in atlas["inventories"])
    lrows = "".join(f"<tr><td>{_e(k)}</td><td>{_e(m)}</td><td class=\"num\">{n:,}</td></tr>" for k, m, n in atlas["links"])
    link = (f'<p><a id="atlas-page" href="{_e(page)}">Open the atlas page</a>: a searchable, interactive graph of '
            f'every inventory and link, with the evidence sentences (works offline).</p>') if page else ""
    return (f"{link}<div class=\"side\"><table><thead><tr><th>inventory</th><th>nodes</th><th>count</th></tr></thead>"
            f"<tbody>{rows}</tbody></table><table><thead><tr><th>link kind</th><th>scorer / source</th><th>links</th>"
            f"</tr></thead><tbody>{lrows}</tbody></table></div>")


def _experiments(wh: Warehouse) -> list[dict[str, Any]]:
    """The declared experiments' tables, goals and runs (:mod:`eventatlas.results.experiments`)."""
    from .experiments import load as load_experiments

    return load_experiments(wh)


def leaderboard_tables(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One table per (task, dataset): configurations x chosen metrics, mean/std/n, best mean marked
    (:func:`eventatlas.results.leaderboard.build`, the rule `eventatlas leaderboard` prints)."""
    return build(data["board"], data["lower"])


def _table_html(t: dict[str, Any], lower: set[str]) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in CONFIG_COLS) + "<th>seeds</th>" + "".join(
        f"<th>{_e(m)} {'↓' if m in lower else '↑' if not NOT_FRACTION.search(m) else ''}</th>" for m in t["metrics"])
    body = []
    for conf, cells in t["rows"]:
        n = max((c.get("n_seeds") or 0) for c in cells.values())
        tds = "".join(f"<td>{_e(v)}</td>" for v in conf) + f'<td class="num">{n}</td>'
        for m in t["metrics"]:
            c = cells.get(m)
            if c is None:
                tds += "<td></td>"
                continue
            is_best = m in t["best"] and c["mean"] is not None and math.isclose(c["mean"], t["best"][m])
            std = f" ± {_fmt(c['std'], m)}" if c.get("std") is not None else ""
            tds += (f'<td class="num{" best" if is_best else ""}" data-metric="{_e(m)}" data-mean="{c["mean"]!r}" '
                    f'data-std="{c["std"]!r}" data-best="{str(is_best).lower()}">{_fmt(c["mean"], m)}{std}</td>')
        body.append(f"<tr>{tds}</tr>")
    return (f'<table class="leaderboard" data-task="{_e(t["task"])}" data-dataset="{_e(t["dataset"])}">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def _bars_svg(t: dict[str, Any]) -> str:
    """Horizontal bars of the first metric's mean per configuration (x100 for fractions)."""
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
        return ""
    vmax = max(abs(v) for _, v in items) or 1.0
    w, label_w, bar_w, h = 760, 330, 360, 16
    out = [f'<svg class="bars" width="{w}" height="{h * len(items) + 24}" role="img" '
           f'aria-label="{_e(m)} by configuration">']
    for i, (label, v) in enumerate(items):
        y = 18 + i * h
        length = max(1.0, bar_w * abs(v) / vmax)
        out.append(f'<text x="{label_w - 6}" y="{y + 11}" text-anchor="end">{_e(label)}</text>'
                   f'<rect x="{label_w}" y="{y + 2}" width="{length:.1f}" height="{h - 4}" fill="#4c78a8"/>'
                   f'<text x="{label_w + length + 4:.1f}" y="{y + 11}">{_fmt(v, m)}</text>')
    out.append(f'<text x="{label_w}" y="12" class="muted">{_e(m)} (mean over seeds'
               f'{", x100" if not NOT_FRACTION.search(m) else ""})</text></svg>')
    return "".join(out)


def _curves_svg(steps: list[tuple]) -> str:
    """Loss by step, one polyline per run x phase (trained runs only)."""
    series: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for run_id, method, seed, dataset, phase, step, loss in steps:
        if loss is not None and math.isfinite(loss):
            series[(run_id, method, seed, dataset, phase)].append((float(step), float(loss)))
    if not series:
        return '<p class="muted">No trained run has training steps in the warehouse.</p>'
    xs = [x for s in series.values() for x, _ in s]
    ys = [y for s in series.values() for _, y in s]
    x0, x1, y0, y1 = min(xs), max(xs) or 1.0, min(ys), max(ys)
    x1 = x1 if x1 > x0 else x0 + 1
    y1 = y1 if y1 > y0 else y0 + 1
    w, h, pad = 760, 300, 40
    colours = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d"]
    out = [f'<svg class="curves" width="{w}" height="{h + 20 + 16 * len(series)}" role="img" aria-label="learning curves">',
           f'<line x1="{pad}" y1="{h - pad}" x2="{w - 10}" y2="{h - pad}" stroke="#999"/>'
           f'<line x1="{pad}" y1="10" x2="{pad}" y2="{h - pad}" stroke="#999"/>'
           f'<text x="{pad}" y="{h - pad + 14}">{x0:g}</text><text x="{w - 10}" y="{h - pad + 14}" text-anchor="end">'
           f'step {x1:g}</text><text x="{pad - 4}" y="14" text-anchor="end">{y1:.3g}</text>'
           f'<text x="{pad - 4}" y="{h - pad}" text-anchor="end">{y0:.3g}</text>']
    for i, (key, pts) in enumerate(sorted(series.items(), key=lambda kv: [str(k) for k in kv[0]])):
        c = colours[i % len(colours)]
        path = " ".join(f"{pad + (x - x0) / (x1 - x0) * (w - pad - 10):.1f},"
                        f"{h - pad - (y - y0) / (y1 - y0) * (h - pad - 10):.1f}" for x, y in sorted(pts))
        run_id, method, seed, dataset, phase = key
        out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="1.5" '
                   f'data-run="{_e(run_id)}" data-points="{len(pts)}"/>')
        out.append(f'<text x="{pad}" y="{h + 4 + 16 * i}" fill="{c}">■ {_e(method)} seed {_e(seed)} {_e(dataset)} '
                   f'{_e(phase or "")} ({_e(run_id)})</text>')
    out.append("</svg>")
    return "".join(out)


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


def _figure(p: tuple, width: str = "800px") -> str:
    from .plots import png_data_uri

    run_id, kind, path, method, seed, dataset = p
    uri = png_data_uri(path)
    caption = f"{kind} — {method} seed {seed} {dataset} ({run_id})"
    return (f'<figure data-run="{_e(run_id)}" data-kind="{_e(kind)}" data-method="{_e(method)}" '
            f'data-dataset="{_e(dataset)}">' +
            (f'<img alt="{_e(caption)}" src="{uri}" style="max-width:{width}">' if uri else
             f'<p class="muted">too large to embed: <code>{_e(path)}</code></p>') +
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _projections_html(plots: list[tuple]) -> str:
    """Per dataset, the newest projection of each method in one row: untuned first, trained beside it."""
    by_ds: dict[str, list[tuple]] = defaultdict(list)
    for p in _latest_plots([p for p in plots if _is_projection(p[1])]):
        by_ds[p[5]].append(p)
    if not by_ds:
        return '<p class="muted">No run has a projection plot (untuned runs on typed mentions draw one).</p>'
    out = []
    for ds in sorted(by_ds):
        figs = sorted(by_ds[ds], key=lambda p: (p[3] != "untuned", str(p[3]), str(p[1])))
        methods = {p[3] for p in figs}
        note = "" if "untuned" in methods and len(methods) > 1 else (
            f'<p class="note">{"Only the untuned encoder" if methods == {"untuned"} else "No untuned run"} has a '
            f"projection for this dataset.</p>")
        out.append(f'<h3>{_e(ds)}</h3>{note}<div class="side" data-dataset="{_e(ds)}">'
                   + "".join(_figure(p, "100%") for p in figs) + "</div>")
    return "".join(out)


def _plots_html(plots: list[tuple]) -> str:
    """The runs' other PNG plots inline (downscaled data URIs: the page stays one file), newest run's per
    (method, dataset, kind)."""
    out = [_figure(p) for p in _latest_plots([p for p in plots if not _is_projection(p[1])])]
    return "".join(out) or '<p class="muted">No run has a PNG plot artifact.</p>'


def _experiments_html(experiments: list[dict[str, Any]]) -> str:
    """One section per declared experiment: its table beside the paper's figures, goal, met / not met."""
    from .experiments import html_section

    return html_section(experiments)


def _wiki_html(builds: list[dict], diffs: list[dict]) -> str:
    if not builds:
        return '<p class="muted">No wiki event-grounding build in the warehouse.</p>'
    cols = ("build_id", "dataset", "recorded_at", "n_events", "n_mentions", "previous_build_id")
    rows = "".join("<tr>" + "".join(f"<td>{_e(b[c])}</td>" for c in cols) + "</tr>" for b in builds)
    out = (f'<table class="wiki-builds"><thead><tr>{"".join(f"<th>{c}</th>" for c in cols)}</tr></thead>'
           f"<tbody>{rows}</tbody></table>")
    if diffs:
        dcols = ("language", "events_added", "events_removed", "mentions_added", "mentions_removed")
        drows = "".join("<tr>" + "".join(f"<td>{_e(d[c])}</td>" for c in dcols) + "</tr>" for d in diffs)
        out += (f"<h3>Diff of {_e(builds[0]['build_id'])} to {_e(builds[0]['previous_build_id'] or '(none)')}</h3>"
                f'<table class="wiki-diff"><thead><tr>{"".join(f"<th>{c}</th>" for c in dcols)}</tr></thead>'
                f"<tbody>{drows}</tbody></table>")
    return out


def _runs_html(runs: list[dict]) -> str:
    head = "".join(f"<th>{c}</th>" for c in ("run", "flow", "method", "status", "seed", "device", "code version",
                                             "data fingerprint", "config", "started", "error"))
    body = []
    for r in runs:
        fp = r["data_fingerprints"]
        try:
            fp = ", ".join(f"{k}: {str(v)[:12]}" for k, v in json.loads(fp).items()) if fp else ""
        except (TypeError, ValueError):
            pass
        params = r["params"] or ""
        short = params if len(params) <= 160 else params[:157] + "..."
        body.append(f'<tr id="run-{_e(r["run_id"])}" data-run="{_e(r["run_id"])}" data-status="{_e(r["status"])}"><td>{_e(r["run_id"])}</td>'
                    f'<td>{_e(r["flow"])}</td><td>{_e(r["method"])}</td><td>{_e(r["status"])}</td>'
                    f'<td class="num">{_e(r["seed"])}</td><td>{_e(r["device"])}</td>'
                    f'<td>{_e(str(r["code_version"] or "")[:12])}</td><td>{_e(fp)}</td>'
                    f'<td title="{_e(params)}"><code>{_e(short)}</code></td><td>{_e(r["started_at"])}</td>'
                    f'<td class="err">{_e(r["error"])}</td></tr>')
    return f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def render(data: dict[str, Any], title: str = "eventatlas results") -> str:
    """The page as one HTML string (inline CSS and SVG only)."""
    tables = leaderboard_tables(data)
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
             f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><style>{_CSS}</style></head><body>",
             f"<h1>{_e(title)}</h1><p class=\"note\">From <code>{_e(data['warehouse'])}</code>, "
             f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}. Mean ± sample std over seeds; fractions "
             f"x100; the best mean of each column is marked (↑ higher is better, ↓ lower). {len(data['runs'])} runs.</p>"]
    if not tables:
        parts.append('<p class="muted">The leaderboard is empty: no completed run has metrics yet.</p>')
    for task in dict.fromkeys(t["task"] for t in tables):
        parts.append(f'<h2 id="task-{_e(task)}">{_e(task)}</h2>')
        for t in (t for t in tables if t["task"] == task):
            parts.append(f"<h3>{_e(t['dataset'])}</h3>{_table_html(t, data['lower'])}{_bars_svg(t)}")
    parts.append(f"<h2 id=\"experiments\">Experiments</h2>{_experiments_html(data.get('experiments') or [])}")
    parts.append(f"<h2 id=\"curves\">Learning curves</h2>{_curves_svg(data['steps'])}")
    parts.append(f"<h2 id=\"projections\">Embedding projections: untuned vs trained</h2>"
                 f"{_projections_html(data.get('plots') or [])}")
    parts.append(f"<h2 id=\"plots\">Plots</h2>{_plots_html(data.get('plots') or [])}")
    parts.append(f"<h2 id=\"wiki\">Wiki event-grounding builds</h2>"
                 f"{_wiki_html(data.get('builds') or [], data.get('diffs') or [])}")
    parts.append(f"<h2 id=\"atlas\">Atlas</h2>{_atlas_html(data.get('atlas'), data.get('atlas_page'))}")
    parts.append(f"<h2 id=\"benchmarks\">Benchmarks</h2>{benchmarks_html(data.get('benchmarks') or [])}")
    parts.append(f"<h2 id=\"runs\">Runs</h2>{_runs_html(data['runs'])}</body></html>")
    return "\n".join(parts)


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


def _bench_cells(r: dict[str, Any]) -> str:
    ratio = r["ratio"]
    return (f'<td class="num" data-ours="{r["ours"]!r}">{_e(r["ours_label"])}: {_num(r["ours"])}</td>'
            f'<td class="num" data-baseline="{r["baseline"]!r}">{_e(r["baseline_label"])}: {_num(r["baseline"])}</td>'
            f'<td class="num{" best" if ratio is not None and ratio > 1 else ""}" data-ratio="{ratio!r}">'
            f'{_num(ratio, "×")}</td>')


def benchmarks_html(rows: list[dict[str, Any]]) -> str:
    """The latest figures per benchmark x setting x quantity (ratio > 1: eventatlas better, whatever the
    quantity's direction), then each benchmark's history over its runs (code versions), newest first."""
    if not rows:
        return ('<p class="muted">No benchmark run in the warehouse: <code>make bench</code> (or any '
                '<code>benchmarks/bench_*.py</code>) records one.</p>')
    latest: dict[tuple, dict[str, Any]] = {}
    for r in rows:  # newest first: the first row of each key is its latest
        latest.setdefault(tuple(r[k] for k in BENCH_KEY), r)
    head = ("benchmark", "setting", "quantity", "eventatlas", "baseline", "ratio", "precision", "machine", "load",
            "code version", "finished")
    body = []
    for key, r in sorted(latest.items(), key=lambda kv: [str(k) for k in kv[0]]):
        arrow = "↑" if r["higher_is_better"] else "↓"
        body.append(f'<tr data-benchmark="{_e(r["benchmark"])}" data-setting="{_e(r["setting"])}" '
                    f'data-quantity="{_e(r["quantity"])}" data-run="{_e(r["run_id"])}"><td>{_e(r["benchmark"])}</td>'
                    f'<td>{_e(r["setting"])}</td><td>{_e(r["quantity"])} {arrow}</td>{_bench_cells(r)}'
                    f'<td>{_e(r["precision"])}</td><td>{_e(_machine(r))}</td><td class="num">{_e(_load(r))}</td>'
                    f'<td>{_e(str(r["code_version"] or ""))}</td><td>{_e(r["finished_at"])}</td></tr>')
    out = [f'<p class="note">Each benchmark measures eventatlas against its baseline in the same run; ratio &gt; 1 '
           f'means eventatlas is better (↑ higher or ↓ lower is better). Load: the 1-minute load average at start → '
           f'end (other jobs on the machine).</p><table class="benchmarks-latest"><thead><tr>'
           f'{"".join(f"<th>{h}</th>" for h in head)}</tr></thead><tbody>{"".join(body)}</tbody></table>']
    for bench in sorted({r["benchmark"] for r in rows}):
        hist = [r for r in rows if r["benchmark"] == bench]
        hrows = "".join(
            f'<tr data-run="{_e(r["run_id"])}"><td>{_e(str(r["code_version"] or ""))}</td><td>{_e(r["finished_at"])}</td>'
            f'<td>{_e(r["setting"])}</td><td>{_e(r["quantity"])}</td>{_bench_cells(r)}<td>{_e(_machine(r))}</td>'
            f'<td class="num">{_e(_load(r))}</td></tr>' for r in hist)
        hh = ("code version", "finished", "setting", "quantity", "eventatlas", "baseline", "ratio", "machine", "load")
        out.append(f'<h3>{_e(bench)}: history</h3><table class="benchmark-history" data-benchmark="{_e(bench)}">'
                   f'<thead><tr>{"".join(f"<th>{h}</th>" for h in hh)}</tr></thead><tbody>{hrows}</tbody></table>')
    return "".join(out)


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
    cells = [*first, f"{r['ours_label']}: {_num(r['ours'])}", f"{r['baseline_label']}: {_num(r['baseline'])}",
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
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(render(data), encoding="utf-8")
    os.replace(tmp, out)
    return out


def write_atlas_page(out: Path, wh: Warehouse) -> Path:
    """The atlas page (:func:`eventatlas.results.atlas_page.write_html`) from the warehouse's atlas."""
    from .atlas_page import write_html
    from .atlas_query import all_rows, evidence_sentences

    nodes, links = all_rows(wh.path)
    return write_html(nodes, links, out.parent, evidence_sentences(links, warehouse_path=wh.path), name=out.name)
