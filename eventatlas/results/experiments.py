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
    kind = _reference_kind_column(wh)
    for e in (dict(zip(ecols, r)) for r in exps):
        key = [e["experiment"], e["mode"]]
        ccols, cells = wh.query_rows("SELECT * FROM experiment_results WHERE experiment = ? AND mode = ? "
                                     "ORDER BY row_order, col_order, paper", key)
        # a method run's precision is in its config (fp32 | bf16); older records have it beside
        rcols, runs = wh.query_rows(
            "SELECT er.cell, er.seed, er.run_id, er.reused, r.status, r.code_version, r.method, "
            "coalesce(r.params ->> '$.config.precision', r.params ->> '$.precision') AS precision "
            "FROM experiment_runs er LEFT JOIN runs r USING (run_id) WHERE er.experiment = ? AND er.mode = ? "
            "ORDER BY er.cell, er.seed", key)
        _, refs = wh.query_rows(f"SELECT row_label, col_label, paper, table_ref, setting, {kind} FROM "
                                "experiment_references WHERE experiment = ? ORDER BY 6, paper, table_ref, setting, "
                                "row_label, col_label", [e["experiment"]])
        _, plots = wh.query_rows(
            "SELECT er.cell, er.seed, a.run_id, a.kind, a.path FROM artifacts a JOIN experiment_runs er "
            "USING (run_id) WHERE er.experiment = ? AND er.mode = ? AND a.kind LIKE 'plot/%' "
            "ORDER BY er.cell, er.seed, a.run_id, a.kind", key)
        e["goal_rule"] = json.loads(e["goal_rule"]) if e["goal_rule"] else {}
        e["cells"] = [dict(zip(ccols, r)) for r in cells]
        e["runs"] = [dict(zip(rcols, r)) for r in runs]
        e["sources"] = _sources(refs)
        by_cell = {(r[0], r[1]): e["sources"][tuple(r[2:])]["label"] for r in refs}
        for c in e["cells"]:
            c["reference_label"] = by_cell.get((c["row_label"], c["col_label"]), "reference")
        _mark_precision(e)
        e["plots"] = plots
        e["verdict"] = judge(e)
        out.append(e)
    return out


# what a reference figure is called on the pages (the YAML's references[].source.kind): a published figure,
# or the project's own earlier measurement, never shown as a paper's
REFERENCE_KINDS = {"paper": "paper", "own": "earlier measurement"}


def _reference_kind_column(wh: Warehouse) -> str:
    """``kind`` of experiment_references (migration 013); a warehouse written before it has papers only."""
    _, cols = wh.query_rows("SELECT column_name FROM information_schema.columns "
                            "WHERE table_name = 'experiment_references' AND column_name = 'kind'")
    return "coalesce(kind, 'paper')" if cols else "'paper'"


def _sources(refs: list[tuple]) -> dict[tuple, dict[str, Any]]:
    """(paper, table, setting, kind) -> its label (``paper``, ``earlier measurement``; numbered when a page
    has more than one source of a kind) and fields, in the order the rows come (kind, then source)."""
    keys = list(dict.fromkeys(tuple(r[2:]) for r in refs))
    out = {}
    for k in keys:
        same = [x for x in keys if x[3] == k[3]]
        label = REFERENCE_KINDS.get(k[3], str(k[3]))
        out[k] = {"paper": k[0], "table": k[1], "setting": k[2], "kind": k[3],
                  "label": label + (f" {same.index(k) + 1}" if len(same) > 1 else "")}
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
            reasons.append(f"{c['row_label']} / {c['col_label']}: {c['mean_shown']:.1f} vs "
                           f"{c.get('reference_label') or 'reference'} {c['reference']:.1f} ({gap:+.1f}; allowed "
                           f"{'±' if two else '-'}{within:g})")
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
    prec = f", {c['precision_shown']}" if c.get("precision_shown") else ""
    mark = f" {DAGGER}" if c.get("chosen_on_test") else ""
    return f"{c['mean_shown']:.1f}{std} (n={c['n']}{many}{prec}){mark}"


def _mark_precision(e: dict[str, Any]) -> None:
    """``e["precisions"]``: the precisions of the page's runs; when they differ (bf16 beside fp32), each cell
    gets ``precision_shown``, its own runs' (``bf16``, ``fp32``, ``bf16+fp32``), which :func:`_value` shows."""
    of = {r["run_id"]: r.get("precision") for r in e["runs"]}
    e["precisions"] = sorted({p for p in of.values() if p})
    if len(e["precisions"]) > 1:
        for c in e["cells"]:
            shown = sorted({of.get(r) or "unknown" for r in c.get("run_ids") or []})
            c["precision_shown"] = "+".join(shown) or None


def _any_chosen_on_test(e: dict[str, Any]) -> bool:
    return any(c.get("chosen_on_test") and c["mean_shown"] is not None for c in e["cells"])


def _grid(e: dict[str, Any]) -> tuple[list[str], list[str]]:
    rows = list(dict.fromkeys(c["row_label"] for c in e["cells"]))
    cols = list(dict.fromkeys(c["col_label"] for c in e["cells"]))
    return rows, cols


def _md_escape(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _source_list(e: dict[str, Any]) -> list[dict[str, Any]]:
    """The page's reference sources as dicts (:func:`_sources`); ``(paper, table, setting)`` tuples are papers."""
    src = e.get("sources") or []
    if isinstance(src, dict):
        return list(src.values())
    return [{"paper": p, "table": t, "setting": st, "kind": "paper", "label": "paper"} for p, t, st in src]


def _ref_text(c: dict[str, Any] | None) -> str:
    """A cell's reference figure on the page: a paper's bare in brackets (the line under the table says whose),
    the project's own earlier one labelled so in the brackets."""
    if c is None or c.get("reference") is None:
        return ""
    label = c.get("reference_label") or "paper"
    return f" [{c['reference']:.1f}]" if label == "paper" else f" [{label}: {c['reference']:.1f}]"


def _source_line(s: dict[str, Any]) -> str:
    where = f"{s['paper']}" + (f", {s['table']}" if s["table"] else "") + (f" ({s['setting']})" if s["setting"] else "")
    if s["kind"] == "paper":
        return (f"In brackets: the paper's figures, from {where}." if s["label"] == "paper"
                else f"Marked \"{s['label']}\": a paper's figures, from {where}.")
    return f"Marked \"{s['label']}\": this project's own earlier figures, not a paper's, from {where}."


def markdown(e: dict[str, Any], figures: list[dict[str, Any]] | None = None) -> str:
    """The experiment's page: table (ours beside the paper's figures or our own earlier ones, each labelled),
    goal and verdict, diagnosis, plots (``figures``: the images :func:`write_markdown` wrote beside it), runs."""
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
    with_refs = not quick and any(c.get("reference") is not None for c in e["cells"])
    lines += [f"Experiment `{e['experiment']}` ({e['mode']}; `eventatlas experiment run {e['experiment']}"
              f"{' --quick' if e['mode'] == 'quick' else ''}`). Metric: {metric}; mean ± sample std over seeds "
              "(n = metric rows), fractions x100" + ("; the reference figure in brackets." if with_refs else "."), ""]
    lines += ["| | " + " | ".join(_md_escape(c) for c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for r in rows:
        cells = [_value(c) + ("" if quick else _ref_text(c)) for c in (_cell(e, r, col) for col in cols)]
        lines.append(f"| {_md_escape(r)} | " + " | ".join(cells) + " |")
    lines.append("")
    if len(e.get("precisions") or []) > 1:
        lines += [f"The runs differ in precision ({', '.join(e['precisions'])}): each figure names its runs'.", ""]
    if _any_chosen_on_test(e):
        lines += [TEST_CHOSEN_NOTE, ""]
    if not quick:
        lines += [_source_line(s) for s in _source_list(e)]
        lines += [""] if _source_list(e) else []
    if quick:
        lines += [f"**Goal (judged on the full run only):** {e['goal'].strip()}", ""]
    else:
        lines += [f"**Goal:** {e['goal'].strip()}", "", f"**Status: {verdict}.**", ""]
        lines += [f"- {x}" for x in reasons] + [""]
    if e["diagnosis"] and not quick:
        lines += ["## Diagnosis", "", e["diagnosis"].strip(), ""]
    if figures:
        seeds = len({r["seed"] for r in e["runs"]}) > 1
        lines += ["## Plots", "", "Each cell's plots from its run of the lowest seed" + (
            " (the other seeds' are in their own runs)." if seeds else "."), ""]
        for f in figures:
            lines += [f"![{f['alt']}]({f['src']})", "", f"*{f['caption']}*", ""]
    # the plots of page_plots not written beside the page (figures None: no images asked for, none counted)
    if figures is not None and (missing := len(page_plots(e)) - len(figures)) > 0:
        lines += [f"{missing} plot{'s' if missing > 1 else ''} of these runs (each cell's lowest seed) "
                  f"{'were' if missing > 1 else 'was'} not kept with the records this page was written from, so "
                  f"{'they are' if missing > 1 else 'it is'} not shown.", ""]
    runs = e["runs"]
    versions = sorted({str(r["code_version"]) for r in runs if r["code_version"]})
    lines += ["---", "", "Runs (cell, seed, run id, status, precision, reused):", ""]
    lines += [f"- {r['cell']} seed {r['seed']}: `{r['run_id']}` {r['status'] or 'not in the warehouse'}"
              + (f", {r['precision']}" if r.get("precision") else "") + (" (reused)" if r["reused"] else "")
              for r in runs]
    lines += ["", f"Code version: {', '.join(versions) or 'unknown'}. Declaration digest {e['spec_sha256']}.", ""]
    # every value comes from the warehouse: HTML in it (a label, a title) is shown, not run; the page's own
    # comment (index 2) stays a comment
    return "\n".join(x if i == 2 else markdown_text(x) for i, x in enumerate(lines))


# ----------------------------------------------------------------------------- plots beside the pages
IMAGES = "images"  # docs/results/images/<experiment>/: the full pages' plots, small copies
IMAGE_PX = 800  # widest side after downscaling (taller plots: up to twice as high)
IMAGE_BYTES = 150_000  # a copy over it is made smaller (3/4 the side) until it fits, else left out


def page_runs(links: list[dict[str, Any]]) -> set[str]:
    """The runs whose plots a full page shows: per cell, the run of the lowest seed (``links``: dicts with
    cell, seed, run_id). The fixture export keeps the plots of these runs only."""
    first: dict[str, dict[str, Any]] = {}
    for ln in sorted(links, key=lambda x: (str(x["cell"]), int(x["seed"]))):
        first.setdefault(str(ln["cell"]), ln)
    return {ln["run_id"] for ln in first.values()}


def page_plots(e: dict[str, Any]) -> list[tuple]:
    """(cell, seed, run_id, kind, path) of the PNG plots a full page shows: :func:`page_runs`' runs', each run
    and kind once; none for a quick page (a smoke test)."""
    if e["mode"] == "quick":
        return []
    keep, seen, out = page_runs(e["runs"]), set(), []
    for cell, seed, run_id, kind, path in e.get("plots") or []:
        if run_id in keep and str(path or "").lower().endswith(".png") and (run_id, kind) not in seen:
            seen.add((run_id, kind))
            out.append((cell, seed, run_id, kind, path))
    return out


def small_png(src: str | os.PathLike, dst: str | os.PathLike, max_px: int = IMAGE_PX,
              max_bytes: int = IMAGE_BYTES) -> Path | None:
    """``src`` as a small PNG at ``dst`` (written atomically): at most ``max_px`` wide and twice that high,
    opaque, 256 colours, optimised; None (nothing written) when even a half-size copy stays over ``max_bytes``.
    The same input gives the same bytes, so a regenerated page's images equal the committed ones."""
    import io

    from PIL import Image

    from ..io import atomic_path

    with Image.open(src) as im:
        im.load()
        done = (im.format == "PNG" and im.mode == "P" and im.width <= max_px and im.height <= 2 * max_px
                and Path(src).stat().st_size <= max_bytes)
        rgba = im.convert("RGBA")
    if done:  # already a small copy (the fixture's): kept byte for byte
        data = Path(src).read_bytes()
        dst = Path(dst)
        dst.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(dst) as tmp:
            Path(tmp).write_bytes(data)
        return dst
    img = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
    side = max_px
    for _ in range(4):
        small = img.copy()
        small.thumbnail((side, 2 * side), Image.Resampling.LANCZOS)  # keeps the aspect ratio, never upscales
        small = small.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        buf = io.BytesIO()
        small.save(buf, format="PNG", optimize=True)
        if buf.tell() <= max_bytes:
            dst = Path(dst)
            dst.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(dst) as tmp:
                Path(tmp).write_bytes(buf.getvalue())
            return dst
        side = side * 3 // 4
    return None


def _file_part(s: Any) -> str:
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "_" for ch in str(s)).strip("._") or "x"


def write_figures(e: dict[str, Any], out_dir: Path) -> list[dict[str, Any]]:
    """The page's plots (:func:`page_plots`) whose files exist, copied small into
    ``out_dir/images/<experiment>/`` (older images there that the page no longer shows go); what
    :func:`markdown` embeds. Nothing for a quick page."""
    if e["mode"] == "quick":
        return []
    folder = out_dir / IMAGES / _file_part(e["experiment"])
    figures, written = [], set()
    for cell, seed, run_id, kind, path in page_plots(e):
        if not Path(path).is_file():
            continue
        name = f"{_file_part(cell)}-s{seed}-{_file_part(str(kind).removeprefix('plot/').replace('/', '-'))}.png"
        if small_png(path, folder / name) is None:
            continue
        written.add(name)
        figures.append({"src": f"{IMAGES}/{folder.name}/{name}", "alt": f"{kind}, {cell}, seed {seed}",
                        "caption": f"`{kind}`: cell {cell}, seed {seed}, run `{run_id}`"})
    if folder.is_dir():
        for old in folder.glob("*.png"):
            if old.name not in written:
                old.unlink()
        if not any(folder.iterdir()):
            folder.rmdir()
    return figures


def write_markdown(out_dir: str | os.PathLike, wh: Warehouse | None = None, mode: str | None = None) -> list[Path]:
    """One page per experiment (and mode) in ``out_dir`` (``<name>.md``; ``<name>.quick.md`` for the quick
    form), each written atomically, a full page's plots beside it (:func:`write_figures`); returns the
    pages' paths. ``report.write_pages`` adds the benchmarks page."""
    from ..io import atomic_write_text

    wh = wh or Warehouse()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for e in load(wh, mode):
        p = out / f"{e['experiment']}{'.quick' if e['mode'] == 'quick' else ''}.md"
        atomic_write_text(p, markdown(e, write_figures(e, out)))
        paths.append(p)
    return paths


def html_view(experiments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the report's experiments section shows (``templates/report_experiments.html``): per experiment
    its table beside the reference figures (each labelled paper or earlier measurement), goal, met / not met,
    diagnosis, the plots its runs attached and links (ids) to the runs."""
    from ..tracking.plots import png_data_uri

    out = []
    for e in experiments:
        rows, cols = _grid(e)
        verdict, reasons = e["verdict"]
        quick = e["mode"] == "quick"  # a smoke test on the samples: no figure to compare with, as on its page
        table = [{"label": r, "cells": [{"mean": c["mean"] if c else None, "text": _value(c),
                                         "reference": c["reference"] if c and not quick else None,
                                         "reference_label": (c.get("reference_label") or "paper") if c else None}
                                        for c in (_cell(e, r, col) for col in cols)]} for r in rows]
        figures = [{"kind": k, "run_id": rid, "uri": uri} for _, _, rid, k, p in page_plots(e)
                   if p and Path(p).is_file() and (uri := png_data_uri(p))]
        refs = [f"{s['label'][0].upper()}{s['label'][1:]}" + (" (the project's own, not a paper's)"
                                                            if s["kind"] == "own" else "")
                + ": " + " ".join(x for x in (s["paper"], s["table"], s["setting"]) if x)
                for s in ([] if quick else _source_list(e))]
        out.append({"experiment": e["experiment"], "mode": e["mode"], "title": e["title"], "goal": e["goal"],
                    "anchor": f"exp-{e['experiment']}-{e['mode']}", "cols": cols, "table": table,
                    "chosen_note": TEST_CHOSEN_NOTE if _any_chosen_on_test(e) else None,
                    "precisions": e.get("precisions") or [], "references": refs,
                    "verdict": verdict, "reasons": reasons, "diagnosis": e["diagnosis"], "figures": figures,
                    "runs": e["runs"]})
    return out


def html_section(experiments: list[dict[str, Any]]) -> str:
    """The report's experiments section alone (the report includes the same template)."""
    from .templating import render

    return render("report_experiments.html", experiments=html_view(experiments))
