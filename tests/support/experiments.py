"""The fixture behind the committed docs/results pages: the experiments' runs (records and metrics,
paths made relative), which run answers which cell, and the benchmark runs (records and their
`benchmarks.parquet`), exported from a data root; and the warehouse built from it (what
`test_committed_result_pages_equal_a_regeneration` regenerates the pages, benchmarks.md included, from).

Refresh after changing an experiment (the pages say which runs and code version made them):

    EVENTATLAS_DATA=D EVENTATLAS_WAREHOUSE=D/wh.duckdb eventatlas experiment run NAME [--quick]   # each page
    EVENTATLAS_DATA=D EVENTATLAS_WAREHOUSE=D/wh.duckdb python benchmarks/bench_NAME.py            # benchmarks.md
    EVENTATLAS_DATA=D EVENTATLAS_WAREHOUSE=D/wh.duckdb python tests/support/experiments.py [--benchmarks | --only NAME...]
    # = export into tests/fixtures/experiments (--benchmarks: only the benchmark runs; --only: only these
    #   experiments' runs replace theirs), then `eventatlas report --markdown docs/results` on its warehouse
    python tests/support/experiments.py --pages             # only the pages (and their images), from the fixture
    python tests/support/experiments.py --plots-from D...   # fixture runs' page plots found in data roots D, then --pages

A full page shows the plots of each cell's lowest-seed run (``page_runs``), copied small into
docs/results/images/<experiment>/; the export keeps small copies of those plots only (``small_png``: at most
800 px wide, 150 kB), so the fixture stays small.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "experiments"


def export(out: Path = FIXTURE, only: list[str] | None = None) -> dict:
    """The experiments' linked runs (quick and full) and the benchmark runs (not smoke) of the configured
    warehouse into ``out``. ``only``: just these experiments' runs replace theirs in the fixture (the others
    and the benchmark runs stay as they are), for an experiment run in a data root of its own."""
    from eventatlas.store.warehouse import Warehouse

    _, rows = Warehouse().query_rows("SELECT experiment, mode, cell, seed, run_id, reused FROM experiment_runs "
                                     "ORDER BY experiment, mode, cell, seed")
    links: dict[str, dict[str, list]] = {}
    if only:
        links = {k: v for k, v in json.loads((out / "links.json").read_text(encoding="utf-8")).items()
                 if k not in only}
        rows = [r for r in rows if r[0] in only]
    elif (out / "runs").exists():
        shutil.rmtree(out / "runs")
    for exp, mode, cell, seed, run_id, reused in rows:
        links.setdefault(exp, {}).setdefault(mode, []).append({"cell": cell, "seed": seed, "run_id": run_id,
                                                               "reused": reused})
    plotted = _plotted(links)
    for run_id in dict.fromkeys(r[4] for r in rows):
        _copy_run(run_id, out, plots=run_id in plotted)
    if only:  # runs no experiment links any more go (benchmark runs stay)
        linked = {ln["run_id"] for modes in links.values() for lns in modes.values() for ln in lns}
        for d in (out / "runs").iterdir():
            if d.name not in linked and not d.name.startswith("bench-"):
                shutil.rmtree(d)
    else:
        export_benchmarks(out)
    (out / "links.json").write_text(json.dumps(links, indent=1, sort_keys=True), encoding="utf-8")
    return links


def export_benchmarks(out: Path = FIXTURE) -> list[str]:
    """Replace the fixture's benchmark runs by the configured warehouse's (completed, not smoke)."""
    from eventatlas.store.warehouse import Warehouse

    _, rows = Warehouse().query_rows("SELECT DISTINCT b.run_id FROM benchmarks b JOIN runs r USING (run_id) "
                                     "WHERE NOT b.smoke AND r.status = 'completed' ORDER BY 1")
    for old in (out / "runs").glob("bench-*"):
        shutil.rmtree(old)
    for (run_id,) in rows:
        _copy_run(run_id, out)
    return [r[0] for r in rows]


def _plotted(links: dict) -> set[str]:
    """The runs whose plots the full pages show (each cell's lowest seed): the only plots the fixture keeps."""
    from eventatlas.results.experiments import page_runs

    return {r for modes in links.values() for r in page_runs(modes.get("full") or [])}


def _copy_plots(rec: dict, run_dir: Path, dst: Path) -> list[str]:
    """Small copies (:func:`eventatlas.results.experiments.small_png`) of a run's PNG plots into ``dst``, each
    at its path inside the run (``train/learning_curve.png``); returns those paths."""
    from eventatlas.results.experiments import small_png

    done = []
    for a in rec.get("artifacts") or []:
        if not (str(a.get("kind") or "").startswith("plot/") and str(a.get("path") or "").lower().endswith(".png")):
            continue
        src = Path(a["path"]) if Path(a["path"]).is_absolute() else run_dir / a["path"]
        if not src.is_file():
            src = run_dir / _in_run(a["path"], run_dir.name)  # a record moved with its data root
        inside = _in_run(a["path"], run_dir.name)
        if src.is_file() and small_png(src, dst / inside) is not None:
            done.append(inside)
    return done


def plots_from(roots: list[Path], out: Path = FIXTURE) -> list[str]:
    """The page plots (:func:`_plotted`) of the fixture's runs, taken from the data roots ``roots`` that hold
    those runs' directories (a run id names one run): for pages whose runs were exported without them."""
    from eventatlas.tracking.records import read_record

    links = json.loads((out / "links.json").read_text(encoding="utf-8"))
    done = []
    for run_id in sorted(_plotted(links)):
        for root in roots:
            run_dir = root / "runs" / run_id
            if (run_dir / "run.json").is_file() and (out / "runs" / run_id).is_dir():
                done += [f"{run_id}/{p}" for p in _copy_plots(read_record(run_dir / "run.json"), run_dir,
                                                               out / "runs" / run_id)]
                break
    return done


def _copy_run(run_id: str, out: Path, plots: bool = False) -> None:
    """A run's record and its metric / benchmark rows, with no path of the machine that ran it; ``plots``:
    small copies of its PNG plots too (a run a full page shows the plots of)."""
    from eventatlas import config
    from eventatlas.tracking.records import read_record

    rec = read_record(config.runs_dir() / run_id / "run.json")
    dst = out / "runs" / run_id
    dst.mkdir(parents=True, exist_ok=True)
    if plots:
        _copy_plots(rec, config.runs_dir() / run_id, dst)
    for key, name in (("metrics_path", "metrics.parquet"), ("benchmarks_path", "benchmarks.parquet")):
        if rec.get(key):
            shutil.copy2(rec[key], dst / name)
            rec[key] = name
    rec["train_steps_path"] = rec["train_evals_path"] = None  # not on the pages
    rec["artifacts"] = [{**a, "path": _in_run(a["path"], run_id)} for a in rec.get("artifacts") or [] if a.get("path")]
    rec.pop("model", None)
    # an absolute path keeps its last part
    text = re.sub(r'"(/[^"]+)"', lambda m: json.dumps(Path(m.group(1)).name), json.dumps(rec, indent=1, sort_keys=True))
    (dst / "run.json").write_text(text, encoding="utf-8")


def _in_run(path: str, run_id: str) -> str:
    """An artifact's path inside its run directory (``train/learning_curve.png``), else its last part."""
    parts = Path(path).parts
    return "/".join(parts[parts.index(run_id) + 1:]) if run_id in parts[:-1] else Path(path).name


def fixture_warehouse(root: Path, fixture: Path = FIXTURE):
    """A warehouse under ``root`` holding the fixture: its runs published and each experiment's links."""
    from eventatlas.experiments import load
    from eventatlas.store.publishing import publish_experiment, publish_records
    from eventatlas.store.warehouse import Warehouse

    runs = root / "runs"
    shutil.copytree(fixture / "runs", runs)
    wh = Warehouse(root / "fixture.duckdb")
    publish_records(sorted(runs.glob("*/run.json")), warehouse_path=wh.path, data_root=root)
    for name, modes in json.loads((fixture / "links.json").read_text(encoding="utf-8")).items():
        for mode, links in modes.items():
            publish_experiment(load(name, quick=mode == "quick"), links, warehouse_path=wh.path)
    return wh


if __name__ == "__main__":
    import tempfile

    sys.path.insert(0, str(ROOT))
    from eventatlas.results.report import write_pages

    if sys.argv[1:] == ["--benchmarks"]:  # only the benchmark runs: the experiments' runs stay as they are
        print(f"exported benchmark runs {export_benchmarks()} into {FIXTURE}")
    elif sys.argv[1:2] == ["--plots-from"]:  # the fixture's runs stay; their page plots come from these roots
        print("\n".join(plots_from([Path(p) for p in sys.argv[2:]])) or "no page plot found there")
    elif sys.argv[1:] != ["--pages"]:  # --pages: nothing exported, the pages regenerated from the fixture
        only = sys.argv[2:] if sys.argv[1:2] == ["--only"] else None
        links = export(only=only)
        print(f"exported {sum(len(ln) for modes in links.values() for ln in modes.values())} linked runs and the "
              f"benchmark runs into {FIXTURE}")
    with tempfile.TemporaryDirectory() as tmp:
        for p in write_pages(ROOT / "docs" / "results", fixture_warehouse(Path(tmp))):
            print(p)
