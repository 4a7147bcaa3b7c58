"""`eventatlas demo` runs every method family's quick form on the shipped samples in its own data root,
writes the report there and prints one line per method x task x dataset within 100 columns; afterwards
the commands it prints (leaderboard, report, sql) and the README's SQL examples work with no environment
variable set. `train-all` prints only the leaderboard rows of the runs it produced. A tiny random BERT
stands in for the encoder (fast)."""
from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from unittest import mock

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas import config
from eventatlas.cli import app
from eventatlas.cli.train import DEMO_SQL
from eventatlas.methods import SPECS
from eventatlas.metric_specs import scale
from eventatlas.store.warehouse import Warehouse

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from support.tiny_models import tiny_bert

    from eventatlas.data.ingest import ingest

    root = tmp_path_factory.mktemp("demo")
    env = {"EVENTATLAS_DATA": str(root / "user"), "EVENTATLAS_WAREHOUSE": str(root / "user.duckdb"),
           "PREFECT_HOME": str(root / "prefect"), "EVENTATLAS_CACHE": str(root / "cache")}
    checkout = root / "checkout"  # a checkout whose default warehouse does not exist yet
    (checkout / "datasets").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")

    with mock.patch.dict(os.environ, env), mock.patch.object(config, "REPO_ROOT", checkout):
        os.environ.pop("EVENTATLAS_DEMO_ROOT", None)
        os.environ.pop("PREFECT_API_URL", None)
        # the user's own data: the OntoEvent sample under a name of their own
        ingest("ontoevent", config.samples_dir() / "ontoevent", dataset="my_ontoevent", progress=False)
        texts = [p.read_text(encoding="utf-8", errors="ignore") for p in config.samples_dir().rglob("*")
                 if p.is_file() and p.suffix in (".json", ".jsonl", ".txt", ".xml", ".tsv") and p.stat().st_size < 2e6]
        model = tiny_bert(root, texts, layers=4)  # window4 (EMR) needs 4 layers
        yield {"root": root, "params": json.dumps({m: {"model_id": str(model)} for m in SPECS})}


@pytest.fixture(scope="module")
def demo_run(env):
    """The demo, once, with no warehouse of the user's: (result, demo root)."""
    with mock.patch.dict(os.environ, {"COLUMNS": "400"}):
        os.environ.pop("EVENTATLAS_WAREHOUSE")  # the user has none: the printed commands need no option
        r = runner.invoke(app, ["demo", "--params", env["params"]])
    return r, (env["root"] / "user" / "demo").resolve()


def test_demo_runs_every_method_in_its_own_root(env, demo_run):
    r, demo = demo_run
    assert r.exit_code == 0, r.output
    assert f"demo data root: {demo}" in r.output
    wh = Warehouse(demo / "eventatlas.duckdb")
    ran = {row[0] for row in wh.query_rows("SELECT DISTINCT method FROM metrics")[1]}
    assert ran == set(SPECS)  # every method family
    datasets = {row[0] for row in wh.query_rows("SELECT DISTINCT dataset FROM metrics")[1]}
    assert datasets and all(d.endswith("_sample") for d in datasets)
    assert (demo / "report.html").is_file() and "report: " in r.output
    assert 'data-experiment="swcc" data-mode="quick"' in (demo / "report.html").read_text(encoding="utf-8")
    # the user's data root and warehouse are untouched
    assert not Path(os.environ["EVENTATLAS_WAREHOUSE"]).exists()
    assert sorted(p.name for p in (env["root"] / "user" / "datasets").iterdir()) == ["my_ontoevent"]


def _summary(output: str) -> list[list[str]]:
    lines = output.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("method ") and " metric " in ln)
    end = lines.index("next:")
    return [ln.split() for ln in lines[start + 1:end] if ln.strip() and not ln.startswith("report: ")]


def test_summary_is_one_line_per_method_task_dataset_within_100_columns(demo_run):
    r, demo = demo_run
    lines = r.stdout.splitlines()
    start = lines.index(next(ln for ln in lines if ln.startswith("method ")))
    assert all(len(ln) <= 100 for ln in lines[:lines.index("next:")] if not ln.startswith("demo data root: "))
    assert lines[start].split() == ["method", "task", "dataset", "metric", "value", "best", "of"]
    rows = _summary(r.stdout)
    keys = [(m, t, d) for m, t, d, *_ in rows]
    assert len(keys) == len(set(keys))
    assert {m for m, *_ in rows} == set(SPECS)
    assert {t for _, t, *_ in rows} >= {"induction", "similarity", "retrieval", "grounding"}
    assert len(rows) < 30  # a summary, not a grid
    wh = Warehouse(demo / "eventatlas.duckdb")
    # each line's value is the mean over seeds of the method's best configuration by that metric (direction-aware)
    _, low = wh.query_rows("SELECT metric FROM metric_direction WHERE NOT higher_is_better")
    lower = {x[0] for x in low}
    for method, task, dataset, metric, value, n_configs in rows:
        _, best = wh.query_rows(f"SELECT {'min' if metric in lower else 'max'}(mean) FROM leaderboard WHERE method = ? "
                                "AND task = ? AND dataset = ? AND metric = ? AND coalesce(split, '') NOT IN "
                                "('train', 'dev', 'valid', 'validation')", [method, task, dataset, metric])
        if best[0][0] is None:  # the method has only selection splits on this dataset
            _, best = wh.query_rows(f"SELECT {'min' if metric in lower else 'max'}(mean) FROM leaderboard WHERE "
                                    "method = ? AND task = ? AND dataset = ? AND metric = ?", [method, task, dataset, metric])
        assert float(value) == pytest.approx(scale(metric) * best[0][0], abs=0.051), (method, task, dataset, metric)
        _, n = wh.query_rows("SELECT count(DISTINCT (split, setting, trained_on, representation, clustering, variant, "
                             "precision)) FROM leaderboard WHERE method = ? AND task = ? AND dataset = ? AND "
                             "metric = ? AND mean IS NOT NULL", [method, task, dataset, metric])
        assert int(n_configs) == n[0][0]
    heads = {(t, m) for _, t, _, m, *_ in rows}
    assert ("induction", "ari") in heads and ("grounding", "recall_at_min") in heads  # the leaderboard's headlines


def test_readme_demo_output_is_what_the_demo_prints(demo_run):
    """The README's `make demo` transcript lists exactly the summary rows the demo prints (method, task,
    dataset, metric, in order) and its run count. The values are a real run's with the packaged MiniLM;
    this test's demo runs a tiny random encoder, so only the rows and the count are compared."""
    r, _ = demo_run
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```console\n\$ make demo\n(.*?)```", readme, re.S).group(1)
    shown = _summary(block.replace("\n...\n", "\n"))
    assert [row[:4] for row in shown] == [row[:4] for row in _summary(r.stdout)]
    n_runs = re.search(r"^(\d+) runs in ", r.stdout, re.M).group(1)
    assert re.search(rf"^{n_runs} runs in \d+ s \(\d+ s CPU\)", block, re.M), (n_runs, block[:300])


def _next_commands(output: str) -> list[list[str]]:
    lines = output.splitlines()
    return [shlex.split(ln.strip())[1:] for ln in lines[lines.index("next:") + 1:] if ln.strip()]


def test_printed_commands_and_readme_sql_work_without_any_variable(env, demo_run, tmp_path, monkeypatch):
    r, demo = demo_run
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.chdir(tmp_path)
    # the user has a dataset of their own: the commands the demo prints name its root, and read it silently
    cmds = _next_commands(r.output)
    assert [c[:3] for c in cmds] == [["--root", str(demo), c] for c in ("leaderboard", "report", "sql")], cmds
    for cmd in cmds:
        out = runner.invoke(app, cmd)
        assert out.exit_code == 0 and out.stderr == "", (cmd, out.output)
    # without the option the user's root is read, and one line says where the demo's is
    out = runner.invoke(app, ["datasets"])
    assert out.exit_code == 0 and "my_ontoevent" in out.stdout
    assert out.stderr.startswith(f"note: reading your data root {env['root'] / 'user'} (1 dataset, ") and \
        out.stderr.endswith(f"is at {demo}: --root {demo}\n") and len(out.stderr.splitlines()) == 1
    # a fresh user (nothing in their data root): the demo prints its commands bare, and they read the demo's
    monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path / "fresh"))
    monkeypatch.setenv("EVENTATLAS_DEMO_ROOT", str(demo))
    with mock.patch.dict(os.environ, {"COLUMNS": "400"}):
        r = runner.invoke(app, ["demo", "--params", env["params"]])  # every cell reused: seconds
    assert r.exit_code == 0, r.output
    cmds = _next_commands(r.output)
    assert [c[0] for c in cmds] == ["leaderboard", "report", "sql"]  # no option: the user has nothing
    for cmd in cmds:
        out = runner.invoke(app, cmd)
        assert out.exit_code == 0, (cmd, out.output)
        assert f"reading the demo's, {demo} (" in out.stderr and len(out.stderr.splitlines()) == 1
        if cmd[0] == "leaderboard":
            assert "grounding leaderboard" in out.stdout and "framenet_grounding_sample" in out.stdout
            assert all(len(ln) <= 100 for ln in out.stdout.splitlines())
        if cmd[0] == "sql":
            assert "ontoevent_maven_sample" in out.stdout
    assert (tmp_path / "report.html").is_file()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"\n{DEMO_SQL};\n" in readme  # the command the demo prints is the README's first example
    block = re.search(r"```sql\n(.*?)```", readme, re.S).group(1)
    queries = [q.strip() for q in re.sub(r"--[^\n]*", "", block).split(";") if q.strip()]
    assert len(queries) >= 7
    for q in queries:
        out = runner.invoke(app, ["sql", q])
        assert out.exit_code == 0, (q, out.output)
        assert "┃" in out.stdout, q  # a table (its header at least: no run failed)
    # the saved models of the demo are listed too, with the same note
    out = runner.invoke(app, ["models"])
    assert out.exit_code == 0 and "run:" in out.stdout and f"reading the demo's, {demo} (" in out.stderr
    # with an option, that is read and nothing is said about the demo's
    out = runner.invoke(app, ["--warehouse", str(demo / "eventatlas.duckdb"), "runs", "-n", "1"])
    assert out.exit_code == 0 and "note:" not in out.stderr


def test_printed_commands_name_the_root_when_the_user_has_a_warehouse(env, demo_run):
    # the user's warehouse exists: the demo's root is not the one read by default, so its commands carry --root
    Warehouse().migrate()
    with mock.patch.dict(os.environ, {"COLUMNS": "400"}):
        r = runner.invoke(app, ["demo", "--params", env["params"]])
    assert r.exit_code == 0, r.output
    assert " 0 ran, " in r.output and " reused" in r.output  # every cell reused: seconds
    demo = demo_run[1]
    cmds = _next_commands(r.output)
    assert all(c[:2] == ["--root", str(demo)] for c in cmds), cmds


def _table_datasets(output: str) -> list[str]:
    """The dataset column of every leaderboard row printed (--wide: the task is the first column)."""
    return [ln.strip("│ ").split("│")[1].strip() for ln in output.splitlines()
            if ln.startswith("│") and ln.strip("│ ").split("│")[0].strip() in ("induction", "similarity", "retrieval")]


def test_train_all_prints_only_its_rows(env, monkeypatch):
    from prefect.testing.utilities import prefect_test_harness

    monkeypatch.setenv("COLUMNS", "400")  # every column fits: the task column comes first
    # an earlier run on another dataset is in the warehouse: its rows must not be printed
    wh = Warehouse()
    wh.migrate()
    wh.publish({"run_id": "old", "method": "untuned", "seed": 0, "status": "completed"},
               [{"task": "induction", "dataset": "other", "split": "unseen", "method": "untuned",
                 "representation": "trigger", "clustering": "agglomerative", "metric": "ari", "value": 0.9, "seed": 0}])
    params = json.loads(env["params"])["untuned"]
    params.update(representations=["trigger"], clusterings=["agglomerative"], encoder={"batch_size": 8})
    with prefect_test_harness(server_startup_timeout=120):
        r = runner.invoke(app, ["train-all", "--datasets", "my_ontoevent", "--params",
                                json.dumps({"untuned": params}), "--report"])
    assert r.exit_code == 0, r.output
    page = Path(os.environ["EVENTATLAS_DATA"]) / "report.html"
    assert f"results report: {page}" in r.output
    assert 'data-dataset="my_ontoevent"' in page.read_text(encoding="utf-8")
    assert "rows of the 1 runs just produced" in r.output
    assert set(_table_datasets(r.output)) == {"my_ontoevent"} and "other" not in _table_datasets(r.output)
    n_conf = wh.query_rows("SELECT count(DISTINCT (task, coalesce(setting, ''), representation, clustering, "
                           "coalesce(variant, ''))) FROM metrics WHERE dataset = 'my_ontoevent' AND task = 'induction' "
                           "AND metric = 'ari'")[1][0][0]
    assert sum(1 for d in _table_datasets(r.output) if d == "my_ontoevent") >= n_conf > 0
    r = runner.invoke(app, ["leaderboard"])  # the full leaderboard still has both
    assert {"other", "my_ontoevent"} <= set(_table_datasets(r.output))
