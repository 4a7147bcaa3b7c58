"""Declared experiments: every YAML's quick form runs on the shipped samples (a tiny random BERT for every
method), its table lands in the warehouse's ``experiment_results`` view; finished cells are reused and a
killed experiment finishes only its missing cells; bad declarations are refused in one line (exit 2); the
deployments match the folder; the committed docs/results pages equal a regeneration from a fixture warehouse.
"""
from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from eventatlas import config
from eventatlas.experiments import ExperimentError, experiment_files, load
from eventatlas.experiments.run import Outcome, run_experiment
from eventatlas.pipelines.engine import in_process, run_grid
from eventatlas.store.publishing import publish_records
from eventatlas.store.warehouse import Warehouse

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "experiments"  # tests/support/experiments.py
METHODS = ("untuned", "batch_attention", "emr", "frame_dml", "swcc", "grounding")
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One data root and warehouse for the module (datasets ingested once) and a tiny BERT over the samples."""
    from support.tiny_models import tiny_bert

    root = tmp_path_factory.mktemp("experiments")
    saved = {k: os.environ.get(k) for k in ("EVENTATLAS_DATA", "EVENTATLAS_WAREHOUSE", "EVENTATLAS_CACHE")}
    os.environ.update(EVENTATLAS_DATA=str(root / "data"), EVENTATLAS_WAREHOUSE=str(root / "wh.duckdb"),
                      EVENTATLAS_CACHE=str(root / "cache"))
    texts = [p.read_text(encoding="utf-8", errors="ignore") for p in config.samples_dir().rglob("*")
             if p.is_file() and p.suffix in (".json", ".jsonl", ".txt", ".xml", ".tsv") and p.stat().st_size < 2e6]
    model = tiny_bert(root, texts, layers=4)  # window4 (EMR) needs 4 layers
    try:
        yield {"root": root, "params": {m: {"model_id": str(model)} for m in METHODS}}
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def _publish(recs):
    return publish_records(recs).as_dict()


def _here(jobs, say=None):
    """The in-process engine's grid: each job here, published as it ends; one record path per job."""
    return run_grid(jobs, in_process(say=say), _publish).by_job


def _run(name, world, *, execute=None, rerun=False, said=None):
    exp = load(name, quick=True)
    return run_experiment(exp, execute=execute or (lambda jobs: _here(jobs)), publish=_publish,
                          params=world["params"], rerun=rerun, say=(said.append if said is not None else lambda m: None))


def _results(name: str) -> list[dict]:
    cols, rows = Warehouse().query_rows("SELECT * FROM experiment_results WHERE experiment = ? AND mode = 'quick' "
                                        "ORDER BY row_order, col_order", [name])
    return [dict(zip(cols, r)) for r in rows]


@pytest.mark.parametrize("name", sorted(experiment_files()))
def test_quick_form_runs_and_fills_its_table(world, name):
    t0 = time.perf_counter()
    out = _run(name, world)
    TIMINGS[name] = time.perf_counter() - t0
    assert out.failed == [], out.failed
    assert out.ran + out.reused == len(out.cells) and out.cells
    cells = _results(name)
    exp = load(name, quick=True)
    assert len(cells) == len(exp.table.rows) * len(exp.table.columns)
    filled = [c for c in cells if c["mean"] is not None]
    assert filled, f"{name}: no table cell got a value"
    # one cell against the metric rows by hand: the mean of the selected rows of the linked runs
    c = filled[0]
    flt = next(x for x in exp.table_cells() if x["row_label"] == c["row_label"] and x["col_label"] == c["col_label"])
    values = []
    for cr in out.cells:
        if cr.status != "completed" or (flt["cell"] and not _like(cr.cell, flt["cell"])):
            continue
        for r in pq.read_table(Path(cr.record).parent / "metrics.parquet").to_pylist():
            if r["metric"] == flt["metric"] and r["value"] is not None and all(
                    flt[k] is None or _like(r.get(k), flt[k])
                    for k in ("task", "dataset", "split", "setting", "method", "trained_on", "representation",
                              "clustering", "variant")):
                values.append(r["value"])
    assert c["n"] == len(values) and math.isclose(c["mean"], sum(values) / len(values))
    assert math.isclose(c["mean_shown"], c["mean"] * (1 if flt["metric"].startswith(("n_", "stop_")) else 100))


def _like(value, pattern) -> bool:
    import fnmatch
    import re

    if value is None:
        return False
    if pattern.startswith("~"):
        return re.fullmatch(pattern[1:], value) is not None
    return fnmatch.fnmatchcase(value, pattern.replace("%", "*"))


def test_quick_forms_fit_the_suite_budget(world):
    if len(TIMINGS) < len(experiment_files()):
        pytest.skip("runs after the quick-form tests")
    print("quick-form wall seconds:", json.dumps({k: round(v, 1) for k, v in TIMINGS.items()}))
    assert sum(TIMINGS.values()) < 240  # a shared 2-core machine; alone they take about a minute


def test_finished_cells_are_reused_and_rerun_forces(world):
    said: list[str] = []
    first = _run("untuned_similarity", world)
    again = _run("untuned_similarity", world, said=said)
    assert again.ran == 0 and again.reused == len(again.cells) == 2
    assert [c.run_id for c in again.cells] == [c.run_id for c in first.cells]
    assert sum("reused run" in s for s in said) == 2
    forced = _run("untuned_similarity", world, rerun=True)
    assert forced.ran == 2 and forced.reused == 0
    assert not {c.run_id for c in forced.cells} & {c.run_id for c in first.cells}
    # the experiment's links now point at the newest runs; the view averages only those (n = 1 per cell)
    assert all(c["n"] in (0, 1) for c in _results("untuned_similarity"))


class Killed(BaseException):
    """What a kill looks like to the code after it: nothing more runs, nothing more is written."""


def test_killed_experiment_finishes_only_the_missing_cells(world, tmp_path):
    # a private copy with its own cells, so no earlier test's runs are reused
    data = yaml.safe_load((config.REPO_ROOT / "experiments" / "untuned_baselines.yaml").read_text())
    data["name"] = "resume_probe"
    data["quick"]["params"]["untuned"]["clusterings"] = ["agglomerative", "manifold", "affinity"]
    path = tmp_path / "resume_probe.yaml"
    path.write_text(yaml.safe_dump(data))
    exp = load(str(path), quick=True)
    done: list[str] = []

    def dies_after_one(jobs):
        rec = _here(jobs[:1])
        done.extend(rec)
        raise Killed()

    with pytest.raises(Killed):
        run_experiment(exp, execute=dies_after_one, publish=_publish, params=world["params"], say=lambda m: None)
    assert len(done) == 1
    ran: list[dict] = []

    def counting(jobs):
        ran.extend(jobs)
        return _here(jobs)

    out = run_experiment(exp, execute=counting, publish=_publish, params=world["params"], say=lambda m: None)
    assert len(ran) == 1 and out.ran == 1 and out.reused == 1
    reused = next(c for c in out.cells if c.reused)
    assert reused.record == done[0]


def test_killed_cell_run_is_taken_over(world):
    """A cell killed half-way leaves a run directory without a record: the next attempt writes into it."""
    from eventatlas.run.runner import training_prefix

    from eventatlas.experiments.run import ingest_missing

    exp = load("untuned_baselines", quick=True)
    ingest_missing(exp, lambda line: None)  # on its own too, not only after a test that ingested it (any order)
    cell = exp.all_cells()[0]
    ddir = config.datasets_dir() / exp.dataset_name(cell.dataset)
    params = {**exp.cell_params(cell), "clusterings": ["agglomerative"], **world["params"]["untuned"]}
    prefix = training_prefix("untuned", ddir, seed=0, params=params)
    dead = config.runs_dir() / f"{prefix}-20000101T000000-deadbeef"
    dead.mkdir(parents=True)
    said: list[str] = []
    rec = _here([{"method": "untuned", "dataset": ddir.name, "seed": 0, "params": params, "dataset_dir": str(ddir),
                  "device": "auto", "reuse_unfinished": True}], said.append)
    assert Path(rec[0]).parent == dead
    # a log piped to a file shows each cell start and end (a cell can train for an hour)
    assert len(said) == 2 and said[0].startswith(f"[1/1] untuned on {ddir.name} seed 0: started")
    assert said[1].startswith(f"[1/1] untuned on {ddir.name} seed 0: completed in ") and dead.name in said[1]


def test_two_concurrent_runs_train_a_cell_once(world, tmp_path):
    """Two identical experiment runs at once: the second waits for the first's cell and reuses its run."""
    import threading

    from eventatlas.run.runner import training_prefix

    spec = {"name": "lock_probe", "title": "lock probe", "methods": ["untuned"],
            "datasets": {"hard": {"reader": "hard_similarity", "sample": True}},
            # a configuration of its own, so no earlier test's run is reused
            "params": {"untuned": {"poolings": ["mean"], "template": "{verb} {obj} {subj}",
                                   "encoder": {"batch_size": 8, "precision": "fp32"}}},
            "table": {"rows": {"hard": {"dataset": "hard"}}, "columns": {"acc": {"metric": "hard_sim_acc"}}},
            "goal": {"text": "runs"}}
    path = tmp_path / "lock_probe.yaml"
    path.write_text(yaml.safe_dump(spec))
    exp = load(str(path))
    started, second_waits = threading.Event(), threading.Event()
    trained: list[dict] = []
    said: dict[int, list[str]] = {1: [], 2: []}
    out: dict[int, object] = {}

    def first_execute(jobs):
        started.set()
        second_waits.wait(120)  # the second run is under way before this one trains
        trained.extend(jobs)
        return _here(jobs)

    def second_execute(jobs):
        trained.extend(jobs)
        return _here(jobs)

    def second_say(msg):
        said[2].append(msg)
        if "waiting for" in msg:
            second_waits.set()

    def run(i, execute, say):
        try:
            out[i] = run_experiment(exp, execute=execute, publish=_publish, params=world["params"], say=say)
        except BaseException as e:  # noqa: BLE001 - reported by the assertions below
            out[i] = e
        finally:
            second_waits.set()  # never leave the first run waiting

    one = threading.Thread(target=run, args=(1, first_execute, said[1].append))
    one.start()
    assert started.wait(300), said[1]
    two = threading.Thread(target=run, args=(2, second_execute, second_say))
    two.start()
    one.join(600)
    two.join(600)
    assert isinstance(out[1], Outcome) and isinstance(out[2], Outcome), out
    assert len(trained) == 1 and out[1].ran == 1 and out[2].ran == 0 and out[2].reused == 1
    assert out[1].cells[0].run_id == out[2].cells[0].run_id
    # a plan is said before anything runs
    assert said[1][0] == said[2][0] == "plan: 1 cell(s) x 1 seed(s) = 1 cell run(s); those already finished are reused"
    ddir = config.datasets_dir() / "hard_similarity_sample"
    prefix = training_prefix("untuned", ddir, seed=0, params={**exp.params["untuned"], **world["params"]["untuned"]})
    assert len(list(config.runs_dir().glob(f"{prefix}-*"))) == 1
    _, rows = Warehouse().query_rows("SELECT count(*) FROM runs WHERE starts_with(run_id, ?)", [prefix + "-"])
    assert rows[0][0] == 1


# ----------------------------------------------------------------------------- refusals (exit 2, one line)
runner = CliRunner()


def _cli(*args):
    from eventatlas.cli import app

    r = runner.invoke(app, list(args))
    return r.exit_code, r.output.strip()


def _yaml(tmp_path, **change) -> Path:
    data = yaml.safe_load((config.REPO_ROOT / "experiments" / "untuned_baselines.yaml").read_text())
    data.update(change)
    p = tmp_path / f"{data['name']}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_unknown_key_is_refused_naming_file_and_key(tmp_path, eventatlas_env):
    p = _yaml(tmp_path, tabel={})
    code, out = _cli("experiment", "run", str(p), "--quick")
    assert code == 2 and out.count("\n") == 0
    assert out == f"error: {p}: unknown key 'tabel'"
    data = yaml.safe_load(p.read_text())
    data.pop("tabel")
    data["table"]["rows"]["OntoEvent trigger (ARI)"]["clusterin"] = "x"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ExperimentError, match=r"unknown key 'table.rows.OntoEvent trigger \(ARI\).clusterin'"):
        load(str(p))


def test_unknown_method_is_refused(tmp_path, eventatlas_env):
    p = _yaml(tmp_path, methods=["untuned", "untunde"])
    code, out = _cli("experiment", "run", str(p))
    assert code == 2 and out.count("\n") == 0 and "unknown method 'untunde'" in out and str(p) in out


def test_missing_dataset_is_refused_in_one_line(tmp_path, eventatlas_env):
    # maven has no default input (the release is not in the shared data) and is not ingested here
    p = _yaml(tmp_path, datasets={"onto": {"reader": "maven"}, "fn": {"reader": "maven", "name": "maven_two"}})
    code, out = _cli("experiment", "run", str(p))
    assert code == 2 and out.count("\n") == 0
    assert re.search(r"dataset '(onto|fn)' \(maven(_two)?\) is not ingested and it has no default input", out)
    assert "`eventatlas ingest maven --path PATH --dataset maven" in out
    code, out = _cli("experiment", "run", "untuned_baselinez")
    assert code == 2 and "unknown experiment 'untuned_baselinez' (did you mean 'untuned_baselines'?)" in out


def test_chosen_on_test_marks_rows_and_cells_and_refuses_unknown_labels(tmp_path, eventatlas_env):
    from eventatlas.results.experiments import DAGGER, TEST_CHOSEN_NOTE, markdown

    data = yaml.safe_load((config.REPO_ROOT / "experiments" / "untuned_baselines.yaml").read_text())
    data["table"]["chosen_on_test"] = ["OntoEvent sentence (ARI)", ["OntoEvent trigger (ARI)", "manifold"]]
    p = tmp_path / "untuned_baselines.yaml"
    p.write_text(yaml.safe_dump(data))
    exp = load(str(p))
    marked = {(c["row_label"], c["col_label"]) for c in exp.table_cells() if c["chosen_on_test"]}
    assert marked == {("OntoEvent sentence (ARI)", "agglomerative"), ("OntoEvent sentence (ARI)", "manifold"),
                      ("OntoEvent trigger (ARI)", "manifold")}
    # the page: a dagger on each marked cell that has a value, and the note under the table once
    cells = [{**c, "metric": "ari", "mean_shown": 40.0 + i, "std_shown": None, "n": 1, "n_configs": 1,
              "reference": None} for i, c in enumerate(exp.table_cells())]
    page = markdown({"experiment": exp.name, "mode": "full", "title": exp.title, "description": None, "cells": cells,
                     "verdict": ("not judged", []), "sources": [], "goal": "g", "diagnosis": None, "plots": [],
                     "runs": [], "spec_sha256": "x"})
    assert page.count(DAGGER) == 3 + 1 and page.count(TEST_CHOSEN_NOTE) == 1
    assert re.search(rf"\| OntoEvent trigger \(ARI\) \| \d\d\.0 \(n=1\) \| \d\d\.0 \(n=1\) {DAGGER} \|", page)
    unmarked = [{**c, "chosen_on_test": False} for c in cells]
    assert DAGGER not in markdown({"experiment": exp.name, "mode": "full", "title": exp.title, "description": None,
                                   "cells": unmarked, "verdict": ("not judged", []), "sources": [], "goal": "g",
                                   "diagnosis": None, "plots": [], "runs": [], "spec_sha256": "x"})
    data["table"]["chosen_on_test"] = [["OntoEvent trigger (ARI)", "manifld"]]
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ExperimentError, match=r"table.chosen_on_test: 'OntoEvent trigger \(ARI\)' / 'manifld' is "
                                              r"not a table cell"):
        load(str(p))


def test_every_declared_experiment_validates_and_has_a_quick_form():
    for name in experiment_files():
        full, quick = load(name), load(name, quick=True)
        assert quick.mode == "quick" and all(r.sample for r in quick.datasets.values()), name
        assert full.references and full.goal.text and full.table.rows, name


# ----------------------------------------------------------------------------- deployments
def test_generated_deployments_match_the_folder():
    import importlib

    from eventatlas.experiments.deploy import ENTRYPOINT, deployments, prefect_file

    deps = deployments()
    assert [d["name"] for d in deps] == list(experiment_files())
    path, fn = ENTRYPOINT.split(":")
    flow_obj = getattr(importlib.import_module(path[:-3].replace("/", ".")), fn)
    assert flow_obj.name == "experiment"
    base = yaml.safe_load((config.REPO_ROOT / "prefect.yaml").read_text())
    for d in deps:
        assert d["entrypoint"] == ENTRYPOINT and d["parameters"]["name"] == d["name"]
        assert d["work_pool"] == base["definitions"]["work_pool"]
        assert all(s["active"] is False for s in d["schedules"])
        flow_obj.validate_parameters(d["parameters"])
    assert prefect_file()["pull"] == base["pull"]
    # not hand-copied into prefect.yaml
    assert not [d for d in base["deployments"] if d["entrypoint"] == ENTRYPOINT]


# ----------------------------------------------------------------------------- committed pages
def test_committed_result_pages_equal_a_regeneration(tmp_path):
    from support.experiments import fixture_warehouse

    from eventatlas.results.report import write_pages

    pages = write_pages(tmp_path / "pages", fixture_warehouse(tmp_path))
    committed = sorted((ROOT / "docs" / "results").glob("*.md"))
    assert sorted(p.name for p in pages) == sorted(p.name for p in committed if p.name != "README.md")
    for p in pages:
        assert p.read_text(encoding="utf-8") == (ROOT / "docs" / "results" / p.name).read_text(encoding="utf-8"), (
            f"docs/results/{p.name} is stale: regenerate it (see docs/results/README.md)")


def test_report_has_a_section_per_experiment(tmp_path):
    from support.experiments import fixture_warehouse

    from eventatlas.results.report import load as load_report
    from eventatlas.results.report import render

    wh = fixture_warehouse(tmp_path)
    page = render(load_report(wh))
    links = json.loads((FIXTURE / "links.json").read_text(encoding="utf-8"))
    assert '<h2 id="experiments">Experiments</h2>' in page
    for name, modes in links.items():
        for mode in modes:
            assert f'data-experiment="{name}" data-mode="{mode}"' in page
    assert page.count('class="verdict"') == sum(map(len, links.values()))


def test_sigkilled_experiment_finishes_only_the_missing_cells(world, tmp_path):
    """The real thing: `eventatlas experiment run` killed with SIGKILL once its first cell finished; started
    again, it reuses that cell, takes over the killed cell's run directory and runs the rest."""
    import signal
    import subprocess
    import sys

    spec = {"name": "kill_probe", "title": "kill probe", "methods": ["untuned", "swcc"],
            "datasets": {"hard": {"reader": "hard_similarity", "sample": True},
                         "mcnc": {"reader": "mcnc", "sample": True},
                         "tuples": {"reader": "event_tuples", "sample": True}},
            "params": {"untuned": {"poolings": ["mean"], "encoder": {"batch_size": 8, "precision": "fp32"}},
                       "swcc": {"eval_datasets": ["hard_similarity_sample"], "max_length": 16, "n_prototypes": 3,
                                "plot_events": 20, "train": {"epochs": 3, "batch_size": 8, "lr": 1.0e-3}}},
            "cells": [{"name": "first", "method": "untuned", "dataset": "hard"},
                      {"name": "slow", "method": "swcc", "dataset": "tuples"},
                      {"name": "last", "method": "untuned", "dataset": "mcnc"}],
            "table": {"rows": {"hard": {"dataset": "hard"}}, "columns": {"acc": {"metric": "hard_sim_acc"}}},
            "references": [{"source": {"paper": "none"}, "values": {"hard": {"acc": 50.0}}}],
            "goal": {"text": "runs"}}
    path = tmp_path / "kill_probe.yaml"
    path.write_text(yaml.safe_dump(spec))
    cmd = [sys.executable, "-m", "eventatlas.cli", "experiment", "run", str(path), "--params",
           json.dumps(world["params"])]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    runs = config.runs_dir()
    before = set(runs.glob("*")) if runs.exists() else set()
    deadline = time.monotonic() + 240
    first, slow_dirs = [], []

    def new(pattern):
        return sorted(p for p in runs.glob(pattern) if p not in before and p.parent not in before)

    while time.monotonic() < deadline and proc.poll() is None and not slow_dirs:  # kill inside the slow cell
        first = new("untuned-hard_similarity_sample-*/run.json")
        slow_dirs = new("swcc-event_tuples_sample-*")
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.fail(f"the experiment ended before it could be killed: {proc.stdout.read().decode()[-2000:]}")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    slow_dirs = new("swcc-event_tuples_sample-*")
    assert first and len(slow_dirs) == 1 and not (slow_dirs[0] / "run.json").exists()
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"first seed 0: reused {first[0].parent.name}" in out.stdout
    assert "slow seed 0: ran" in out.stdout and "last seed 0: ran" in out.stdout
    assert "2 cell run(s) ran, 1 reused" in out.stdout
    # killed inside the slow cell: its directory is taken over, not left beside a new one
    assert f"slow seed 0: ran {slow_dirs[0].name} (completed)" in out.stdout
    assert new("swcc-event_tuples_sample-*") == slow_dirs


def test_declaration_digest_does_not_depend_on_where_the_checkout_lies(tmp_path):
    """The pages print the digest, and CI checks them out elsewhere: the source path is not hashed."""
    import shutil

    from eventatlas.experiments.spec import load, parse

    import yaml

    src = ROOT / "experiments" / "untuned_baselines.yaml"
    moved = tmp_path / "elsewhere" / src.name
    moved.parent.mkdir()
    shutil.copy(src, moved)
    here = load("untuned_baselines")
    there = parse(yaml.safe_load(moved.read_text(encoding="utf-8")), moved)
    assert here.source != there.source and here.digest() == there.digest()
    changed = parse({**yaml.safe_load(moved.read_text(encoding="utf-8")), "seeds": [7]}, moved)
    assert changed.digest() != here.digest()  # the content is hashed
