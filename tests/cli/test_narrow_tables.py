"""At an 80-column terminal (or a pipe) the tables fit and still tell rows apart: the columns with one value on
every row become the heading line, a configuration column that tells rows apart is shown before the metrics,
ids are printed whole on a line of their own (copyable), titles are cut with …; `--help` lists the commands by
panel, each with its short help whole."""
from __future__ import annotations

from types import SimpleNamespace

import duckdb
import pytest
from typer.testing import CliRunner

from eventatlas.cli import app
from eventatlas.store.warehouse import Warehouse

runner = CliRunner()
WIDTH = 80


def _invoke(monkeypatch, args):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    r = runner.invoke(app, args, terminal_width=WIDTH, env={"COLUMNS": str(WIDTH)})
    assert r.exit_code == 0, r.output
    assert all(len(ln) <= WIDTH for ln in r.stdout.splitlines()), r.stdout
    return r.stdout


def _header(output: str) -> list[str]:
    head = next(ln for ln in output.splitlines() if ln.startswith("┃"))
    return [c.strip() for c in head.strip("┃").split("┃")]


def _row_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("│")]


def test_leaderboard_rows_that_differ_only_in_setting_and_variant_stay_apart(eventatlas_env, monkeypatch):
    """The demo's grounding table: 8 configurations of one dataset, split, method and representation, told
    apart only by setting, variant and clustering, with the same score (the bug: 8 identical rows)."""
    wh = Warehouse()
    wh.migrate()
    rows = [{"task": "grounding", "dataset": "framenet_grounding_sample", "split": "test", "setting": setting,
             "method": "grounding", "representation": "marked", "clustering": cl, "variant": variant, "metric": m,
             "value": 1.0, "seed": 0}
            for setting in ("train 30 / dev 10", "train 15 of 30 / dev 10") for variant in ("bi", "hp")
            for cl in ("top1", "threshold") for m in ("recall_at_min", "strict_acc", "micro_f1", "macro_f1")]
    wh.publish({"run_id": "g0", "method": "grounding", "seed": 0, "status": "completed"}, rows)
    out = _invoke(monkeypatch, ["leaderboard"])
    heading = next(ln for ln in out.splitlines() if ln.startswith("task grounding"))
    assert heading.startswith("task grounding · dataset framenet_grounding_sample · split test")
    assert "method grounding" in out and "rep marked" in out  # the rest of the heading
    cols = _header(out)
    assert {"setting", "variant", "clustering"} <= set(cols) and "dataset" not in cols and "method" not in cols
    lines = _row_lines(out)
    assert len(lines) == 8 and len(set(lines)) == 8, out  # one line each, no two alike
    left = " ".join(out[out.index("left out to fit"):].split())
    assert "fit 80 columns" in left and "--wide" in left and "macro_f1" in left  # a metric gave way


def test_a_key_column_that_tells_rows_apart_comes_before_the_metrics(monkeypatch, capsys):
    from eventatlas.cli.tables import print_rows

    cols = ["name", "kind", "m1", "m2", "m3"]
    rows = [("a", "x" * 20, 1.0, 22222222222.0, 3.0), ("a", "y" * 20, 1.0, 22222222222.0, 3.0)]
    print_rows(cols, rows, width=44, fit=True, priority=["m1", "m2", "m3", "name", "kind"], key=["name", "kind"])
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "name a"  # one value on both rows: the heading
    assert "kind" in _header(out) and "x" * 20 in out and "y" * 20 in out
    assert "left out to fit 44 columns: m2" in out  # the metric that gave way is named


def test_models_prints_every_run_id_whole_on_one_line(eventatlas_env, monkeypatch):
    from eventatlas.modeling import saved

    ids = [f"batch_attention-ontoevent_maven_sample-s{s}-20261128T07{s}500-0123456789ab" for s in range(3)]
    assert all(len(i) == 70 for i in ids)

    def card(dataset):
        return SimpleNamespace(method="batch_attention", trained_on=dataset, encoders=["encoder"], heads=["proxies"],
                               size_bytes=4.2e6, precision="fp32", created_at="2026-11-28 07:15:00")

    found = [SimpleNamespace(ref=f"run:{i}", card=card("ontoevent_maven_sample" if n else "maven_subset"))
             for n, i in enumerate(ids)]
    monkeypatch.setattr(saved, "saved_models", lambda: found)
    for i in ids:  # the data root has the runs
        (eventatlas_env / "data" / "runs" / i).mkdir(parents=True)
    out = _invoke(monkeypatch, ["models"])
    for i in ids:
        assert any(f"run:{i}" in ln for ln in out.splitlines()), out  # copyable: never broken over lines
    assert "method batch_attention" in out  # the same on every model: the heading
    assert "trained_on" in _header(out) and "maven_subset" in out


def test_runs_prints_every_run_id_whole_and_the_error(eventatlas_env, monkeypatch):
    wh = Warehouse()
    wh.migrate()
    ids = [f"ingest-ontoevent_maven_sample-s{s}-20261128T07{s}500-0123456789abcdef0123456789ab" for s in range(2)]
    wh.publish({"run_id": ids[0], "flow": "ingest", "method": "ingest", "seed": 0, "status": "completed",
                "started_at": "2026-11-28 07:00:00"}, [])
    wh.publish({"run_id": ids[1], "flow": "ingest", "method": "ingest", "seed": 1, "status": "failed",
                "started_at": "2026-11-28 07:15:00", "error": "InputError: maven/dev.jsonl:1: 'event_mentions' is "
                "not a list (traceback: /data/runs/x/error.txt)"}, [])
    out = _invoke(monkeypatch, ["runs"])
    for i in ids:
        assert any(i in ln for ln in out.splitlines()), out
    assert "flow ingest" in out and "InputError: maven/dev.jsonl:1:" in out
    assert out.index(ids[1]) < out.index(ids[0])  # newest first


def _declare(wh: Warehouse, name: str, mode: str, cells: list[str]) -> None:
    con = duckdb.connect(str(wh.path))
    try:
        con.execute("INSERT INTO experiments (experiment, mode, title, goal, goal_rule) VALUES (?, ?, 't', 'g', "
                    "'{\"within\": 2}')", [name, mode])
        for n, cell in enumerate(cells):
            con.execute("INSERT INTO experiment_runs (experiment, mode, cell, seed, run_id) VALUES (?, ?, ?, 0, ?)",
                        [name, mode, cell, f"{name}-{n}"])
    finally:
        con.close()


def test_experiment_list_fits_with_a_status_column(eventatlas_env, monkeypatch):
    from eventatlas.experiments import experiment_files, load

    out = _invoke(monkeypatch, ["experiment", "list"])  # no warehouse yet: nothing has run
    cols = _header(out)
    assert cols[:3] == ["experiment", "status", "title"]
    names = sorted(experiment_files())
    lines = _row_lines(out)
    assert len(lines) == len(names) and all("not run" in ln for ln in lines)
    assert all(any(ln.startswith(f"│ {n} ") for ln in lines) for n in names)  # names whole
    assert "…" in out  # long titles cut to fit
    assert "left out to fit 80 columns:" in out

    wh = Warehouse()
    wh.migrate()
    full, quick = names[0], next(n for n in names[1:] if load(n).quick)
    cells = [c.name for c in load(full).all_cells()]
    wh.publish({"run_id": f"{full}-0", "method": "untuned", "seed": 0, "status": "completed"}, [])
    _declare(wh, full, "full", cells[:1])
    qcells = [c.name for c in load(quick, quick=True).all_cells()]
    _declare(wh, quick, "quick", qcells[:1])
    out = _invoke(monkeypatch, ["experiment", "list"])
    status = {ln.split("│")[1].strip(): ln.split("│")[2].strip() for ln in _row_lines(out)}
    assert status[full] == f"not judged, 1/{len(cells)} cells"  # no value yet: the goal is not judged
    assert status[quick] == f"quick: not judged, 0/{len(qcells)}"  # its run is not in the runs table
    assert sum(v == "not run" for v in status.values()) == len(names) - 2


def test_help_lists_every_command_by_panel(monkeypatch):
    import typer

    from eventatlas.cli.base import HELP_PANELS

    out = _invoke(monkeypatch, ["--help"])
    lines = out.splitlines()
    assert all(f"{p}:" in lines for p in HELP_PANELS)
    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():
        assert cmd.rich_help_panel in HELP_PANELS, name  # every command in one of the panels
        assert any(ln.startswith(f"  {name} ") for ln in lines), name
    commands = out[out.index(f"{HELP_PANELS[0]}:"):]
    assert "..." not in commands  # each short help whole
    # in panel order, each command under its own panel
    starts = [lines.index(f"{p}:") for p in HELP_PANELS]
    assert starts == sorted(starts)
    for name, cmd in group.commands.items():
        at = next(n for n, ln in enumerate(lines) if ln.startswith(f"  {name} "))
        assert max(s for s in starts if s < at) == lines.index(f"{cmd.rich_help_panel}:"), name


@pytest.mark.parametrize("width", [60, 120])
def test_heading_items_are_never_split(width, capsys):
    from eventatlas.cli.tables import print_rows

    cols = ["task", "dataset", "split", "method", "x", "score"]
    rows = [("grounding", "framenet_grounding_sample", "test", "grounding", "a" * 40, 1.0),
            ("grounding", "framenet_grounding_sample", "test", "grounding", "b" * 40, 2.0)]
    print_rows(cols, rows, width=width, fit=True, key=cols[:5])
    out = capsys.readouterr().out
    if width == 120:  # it fits: the table as it is
        assert _header(out) == cols
        return
    head = [ln for ln in out.splitlines() if not ln.startswith(("┏", "┃", "┡", "│", "└"))]
    items = [i for ln in head for i in ln.split(" · ")]
    assert items == ["task grounding", "dataset framenet_grounding_sample", "split test", "method grounding"]


def test_an_id_wider_than_the_terminal_is_still_printed_whole(capsys):
    from eventatlas.cli.tables import print_rows

    long_id = "x" * 50 + "-" + "y" * 49
    print_rows(["id", "kind", "n"], [(long_id, "a", 1), ("short", "b", 2)], width=80, fit=True, key=["id"],
               under=["id"])
    out = capsys.readouterr().out
    assert any(long_id in ln for ln in out.splitlines()) and any("short" in ln for ln in out.splitlines())
    assert _header(out) == ["kind", "n"]
