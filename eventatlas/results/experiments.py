"""Experiments' tables from the warehouse (view ``experiment_results``, migration 010), the goal judged
(met / not met), and their rendering: a Markdown page per experiment (``eventatlas report --markdown DIR``,
the pages under docs/results/) and a section of the HTML report. Reads the warehouse read-only; the
output depends only on the warehouse (no clock), so a page regenerates byte for byte.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..escaping import markdown_text
from ..store.warehouse import Warehouse


def _has_tables(wh: Warehouse) -> bool:
    _, rows = wh.query_rows("SELECT table_name FROM information_schema.tables WHERE table_name = 'experiment_results'")
    return bool(rows)


def load(wh: Warehouse, mode: str | None = None) -> list[dict[str, Any]]:
    """One dict per (experiment, mode) in the warehouse: its declaration, cells, runs and plots."""
    if not wh.path.exists() or not _has_tables(wh):
        return []
    ecols, exps = wh.query_rows("SELECT experiment, mode, title, description, goal, goal_rule, diagnosis, spec_sha256 "
                                "FROM experiments" + (" WHERE mode = ?" if mode else "") + " ORDER BY experiment, mode",
                                [mode] if mode else [])
    out = []
    for e in (dict(zip(ecols, r)) for r in exps):
        key = [e["experiment"], e["mode"]]
        ccols, cells = wh.query_rows("SELECT * FROM experiment_results WHERE experiment = ? AND mode = ? "
                                     "ORDER BY row_order, col_order, paper", key)
        rcols, runs = wh.query_rows(
            "SELECT er.cell, er.seed, er.run_id, er.reused, r.status, r.code_version, r.method FROM experiment_runs er "
            "LEFT JOIN runs r USING (run_id) WHERE er.experiment = ? AND er.mode = ? ORDER BY er.cell, er.seed", key)
        _, refs = wh.query_rows("SELECT DISTINCT paper, table_ref, setting FROM experiment_references "
                                "WHERE experiment = ? ORDER BY paper, table_ref", [e["experiment"]])
        _, plots = wh.query_rows(
            "SELECT a.run_id, a.kind, a.path FROM artifacts a JOIN experiment_runs er USING (run_id) WHERE "
            "er.experiment = ? AND er.mode = ? AND a.kind LIKE 'plot/%' ORDER BY a.run_id, a.kind", key)
        e["goal_rule"] = json.loads(e["goal_rule"]) if e["goal_rule"] else {}
        e["cells"] = [dict(zip(ccols, r)) for r in cells]
        e["runs"] = [dict(zip(rcols, r)) for r in runs]
        e["sources"] = refs
        e["plots"] = plots
        e["verdict"] = judge(e)
        out.append(e)
    return out


def _cell(e: dict[str, Any], row: str, col: str) -> dict[str, Any] | None:
    return next((c for c in e["cells"] if c["row_label"] == row and c["col_label"] == col), None)


def judge(e: dict[str, Any]) -> tuple[str, list[str]]:
    """(``met`` | ``not met`` | ``not judged``, one reason per rule) from the goal's ``within`` / ``beats``."""
    rule, reasons, ok, missing = e["goal_rule"], [], [], False
    within = rule.get("within")
    if within is not None:
        for c in e["cells"]:
            if c["reference"] is None or c["mean_shown"] is None:
                continue
            gap = (c["mean_shown"] - c["reference"]) * (1 if c["higher_is_better"] else -1)
            two = rule.get("two_sided")
            ok.append(abs(gap) <= within if two else gap >= -within)
            reasons.append(f"{c['row_label']} / {c['col_label']}: {c['mean_shown']:.1f} vs reference "
                           f"{c['reference']:.1f} ({gap:+.1f}; allowed {'±' if two else '-'}{within:g})")
    for b in rule.get("beats") or []:
        a = _cell(e, *b["cell"])
        if b.get("over"):
            o, times = _cell(e, *b["over"]), b.get("times")
            name, target = " / ".join(b["over"]), (o or {}).get("mean_shown")
            if times is not None and target is not None:
                name, target = f"{times:g} x {name}", times * target
        else:
            name, target = "the figure", b.get("at_least")
        if not a or a["mean_shown"] is None or target is None:
            reasons.append(f"{' / '.join(b['cell'])} over {name}: no value yet")
            missing = True
            continue
        gap = (a["mean_shown"] - target) * (1 if a["higher_is_better"] else -1)
        ok.append(gap >= b["by"])
        reasons.append(f"{' / '.join(b['cell'])} {a['mean_shown']:.1f} vs {name} {target:.1f}: {gap:+.1f} "
                       f"(needs {b['by']:+g})")
    if not all(ok):
        return "not met", reasons
    if missing or not ok:  # a rule without values yet: nothing to say either way
        return "not judged", reasons or ["no cell with both a value and a reference yet"]
    return "met", reasons


# marks a cell picked on its own test set's labels (table.chosen_on_test); TEST_CHOSEN_NOTE says so under the table
DAGGER = "†"
TEST_CHOSEN_NOTE = (f"{DAGGER} chosen on this test set: the setting or variant was picked on these same test "
                    "labels, not on a dev set, so the figure is optimistic.")


def _value(c: dict[str, Any] | None) -> str:
    if c is None or c["mean_shown"] is None:
        return "–"
    std = f" ± {c['std_shown']:.1f}" if c["std_shown"] is not None else ""
    many = f", {c['n_configs']} configs" if (c["n_configs"] or 1) > 1 else ""
    mark = f" {DAGGER}" if c.get("chosen_on_test") else ""
    return f"{c['mean_shown']:.1f}{std} (n={c['n']}{many}){mark}"


def _any_chosen_on_test(e: dict[str, Any]) -> bool:
    return any(c.get("chosen_on_test") and c["mean_shown"] is not None for c in e["cells"])


def _grid(e: dict[str, Any]) -> tuple[list[str], list[str]]:
    rows = list(dict.fromkeys(c["row_label"] for c in e["cells"]))
    cols = list(dict.fromkeys(c["col_label"] for c in e["cells"]))
    return rows, cols


def _md_escape(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(e: dict[str, Any]) -> str:
    """The experiment's page: table (ours beside the paper's), goal and verdict, diagnosis, runs, plots."""
    rows, cols = _grid(e)
    verdict, reasons = e["verdict"]
    metric = ", ".join(dict.fromkeys(c["metric"] for c in e["cells"]))
    comment = ("<!-- generated by `eventatlas report --markdown DIR` from the warehouse; do not edit by hand: "
               f"edit experiments/{e['experiment']}.yaml and rerun the experiment -->")
    quick = e["mode"] == "quick"
    lines = [f"# {e['title']}", "", comment, ""]
    if quick:  # the samples' numbers say nothing about the method: no full-run prose, no reference figures
        lines += [f"**A smoke test.** This is the quick form: the shipped samples (a few sentences), one seed, in "
                  f"seconds. It shows that the pipeline runs end to end and fills the table; its numbers say "
                  f"nothing about the method. The measured results, their setup and diagnosis: "
                  f"[{e['experiment']}.md]({e['experiment']}.md) (`eventatlas experiment run {e['experiment']}`).",
                  ""]
    elif e["description"]:
        lines += [e["description"].strip(), ""]
    lines += [f"Experiment `{e['experiment']}` ({e['mode']}; `eventatlas experiment run {e['experiment']}"
              f"{' --quick' if e['mode'] == 'quick' else ''}`). Metric: {metric}; mean ± sample std over seeds "
              "(n = metric rows), fractions x100" + ("." if quick else "; the reference figure in brackets."), ""]
    lines += ["| | " + " | ".join(_md_escape(c) for c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for r in rows:
        cells = []
        for col in cols:
            c = _cell(e, r, col)
            ref = f" [{c['reference']:.1f}]" if c and c["reference"] is not None and not quick else ""
            cells.append(_value(c) + ref)
        lines.append(f"| {_md_escape(r)} | " + " | ".join(cells) + " |")
    lines.append("")
    if _any_chosen_on_test(e):
        lines += [TEST_CHOSEN_NOTE, ""]
    if e["sources"] and not quick:
        lines += ["Reference figures: " + "; ".join(
            f"{p}" + (f", {t}" if t else "") + (f" ({s})" if s else "") for p, t, s in e["sources"]) + ".", ""]
    if quick:
        lines += [f"**Goal (judged on the full run only):** {e['goal'].strip()}", ""]
    else:
        lines += [f"**Goal:** {e['goal'].strip()}", "", f"**Status: {verdict}.**", ""]
        lines += [f"- {x}" for x in reasons] + [""]
    if e["diagnosis"] and not quick:
        lines += ["## Diagnosis", "", e["diagnosis"].strip(), ""]
    if e["plots"]:
        lines += ["## Plots", ""] + [f"- `{k}` of run `{rid}`: `{_in_run(rid, p)}`" for rid, k, p in e["plots"]]
        lines.append("")
    runs = e["runs"]
    versions = sorted({str(r["code_version"]) for r in runs if r["code_version"]})
    lines += ["---", "", "Runs (cell, seed, run id, status" + ", reused" + "):", ""]
    lines += [f"- {r['cell']} seed {r['seed']}: `{r['run_id']}` {r['status'] or 'not in the warehouse'}"
              + (" (reused)" if r["reused"] else "") for r in runs]
    lines += ["", f"Code version: {', '.join(versions) or 'unknown'}. Declaration digest {e['spec_sha256']}.", ""]
    # every value comes from the warehouse: HTML in it (a label, a title) is shown, not run; the page's own
    # comment (index 2) stays a comment
    return "\n".join(x if i == 2 else markdown_text(x) for i, x in enumerate(lines))


def _in_run(run_id: str, path: str) -> str:
    """``runs/<run_id>/...`` of an artifact path: relative to the data root, never this machine's path."""
    marker = f"/runs/{run_id}/"
    p = "/" + str(path).replace("\\", "/")
    return f"runs/{run_id}/" + (p.split(marker, 1)[1] if marker in p else Path(path).name)


def write_markdown(out_dir: str | os.PathLike, wh: Warehouse | None = None, mode: str | None = None) -> list[Path]:
    """One page per experiment (and mode) in ``out_dir`` (``<name>.md``; ``<name>.quick.md`` for the quick
    form), each written atomically; returns the paths. ``report.write_pages`` adds the benchmarks page."""
    from ..io import atomic_write_text

    wh = wh or Warehouse()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for e in load(wh, mode):
        p = out / f"{e['experiment']}{'.quick' if e['mode'] == 'quick' else ''}.md"
        atomic_write_text(p, markdown(e))
        paths.append(p)
    return paths


def html_view(experiments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the report's experiments section shows (``templates/report_experiments.html``): per experiment
    its table beside the paper's figures, goal, met / not met, diagnosis, the plots its runs attached and
    links (ids) to the runs."""
    from ..tracking.plots import png_data_uri

    out = []
    for e in experiments:
        rows, cols = _grid(e)
        verdict, reasons = e["verdict"]
        table = [{"label": r, "cells": [{"mean": c["mean"] if c else None, "text": _value(c),
                                         "reference": c["reference"] if c else None}
                                        for c in (_cell(e, r, col) for col in cols)]} for r in rows]
        figures = [{"kind": k, "run_id": rid, "uri": uri} for rid, k, p in e["plots"]
                   if p and Path(p).is_file() and (uri := png_data_uri(p))]
        out.append({"experiment": e["experiment"], "mode": e["mode"], "title": e["title"], "goal": e["goal"],
                    "anchor": f"exp-{e['experiment']}-{e['mode']}", "cols": cols, "table": table,
                    "chosen_note": TEST_CHOSEN_NOTE if _any_chosen_on_test(e) else None,
                    "reference": "; ".join(" ".join(x for x in s if x) for s in e["sources"]) if e["sources"] else None,
                    "verdict": verdict, "reasons": reasons, "diagnosis": e["diagnosis"], "figures": figures,
                    "runs": e["runs"]})
    return out


def html_section(experiments: list[dict[str, Any]]) -> str:
    """The report's experiments section alone (the report includes the same template)."""
    from .templating import render

    return render("report_experiments.html", experiments=html_view(experiments))
