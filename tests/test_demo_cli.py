"""`eventatlas demo` runs on the shipped samples in its own data root whatever the user ingested, and
`train-all` prints only the leaderboard rows of the runs it produced (tiny random BERT: fast)."""
from __future__ import annotations

import json
import os
from unittest import mock
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas.cli import app
from eventatlas.results.warehouse import Warehouse

runner = CliRunner()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from prefect.testing.utilities import prefect_test_harness
    from test_flows import build_tiny_bert

    from eventatlas import config
    from eventatlas.data.ingest import ingest

    root = tmp_path_factory.mktemp("demo")
    env = {"EVENTATLAS_DATA": str(root / "user"), "EVENTATLAS_WAREHOUSE": str(root / "user.duckdb"),
           "PREFECT_HOME": str(root / "prefect"), "EVENTATLAS_CACHE": str(root / "cache")}
    with mock.patch.dict(os.environ, env):
        os.environ.pop("EVENTATLAS_DEMO_ROOT", None)
        # the user's own data: the OntoEvent sample under a name of their own
        m = ingest("ontoevent", config.samples_dir() / "ontoevent", dataset="my_ontoevent", progress=False)
        texts = pq.read_table(Path(m["path"]) / "mentions.parquet", columns=["sentence"])["sentence"].to_pylist()
        texts += [json.dumps(json.loads(line)) for p in config.samples_dir().rglob("*.jsonl")
                  for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
        model = build_tiny_bert(root / "tiny-bert", texts)
        tiny = json.dumps({"untuned": {"model_id": str(model), "encoder": {"batch_size": 8, "precision": "fp32"}}})
        with prefect_test_harness(server_startup_timeout=120):
            yield {"root": root, "params": tiny}


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    from eventatlas.cli import base as cli

    monkeypatch.setattr(cli.console, "width", 400)  # one table row a line


def _table_datasets(output: str) -> list[str]:
    """The dataset column of every leaderboard row printed."""
    return [ln.strip("│ ").split("│")[1].strip() for ln in output.splitlines()
            if ln.startswith("│") and ln.strip("│ ").split("│")[0].strip() in ("induction", "similarity", "retrieval")]


def test_demo_uses_its_own_root(env):
    r = runner.invoke(app, ["demo", "--params", env["params"]])
    assert r.exit_code == 0, r.output
    demo = Path(env["root"] / "user" / "demo").resolve()
    assert f"demo data root: {demo}" in r.output
    assert {p.name for p in (demo / "datasets").iterdir()} == {p.name for p in (demo / "datasets").glob("*_sample")}
    wh = duck(demo / "eventatlas.duckdb")
    ran = {row[0] for row in wh.execute("SELECT DISTINCT dataset FROM metrics").fetchall()}
    assert ran and all(d.endswith("_sample") for d in ran)
    printed = set(_table_datasets(r.output))
    assert printed and printed <= ran
    # the user's data root and warehouse are untouched, and the environment is restored
    assert not Path(os.environ["EVENTATLAS_WAREHOUSE"]).exists()
    assert sorted(p.name for p in (env["root"] / "user" / "datasets").iterdir()) == ["my_ontoevent"]
    assert os.environ["EVENTATLAS_DATA"] == str(env["root"] / "user")


def test_train_all_prints_only_its_rows(env):
    # an earlier run on another dataset is in the warehouse: its rows must not be printed
    wh = Warehouse()
    wh.migrate()
    wh.publish({"run_id": "old", "method": "untuned", "seed": 0, "status": "completed"},
               [{"task": "induction", "dataset": "other", "split": "unseen", "method": "untuned",
                 "representation": "trigger", "clustering": "agglomerative", "metric": "ari", "value": 0.9, "seed": 0}])
    params = json.loads(env["params"])
    params["untuned"].update(representations=["trigger"], clusterings=["agglomerative"])
    r = runner.invoke(app, ["train-all", "--datasets", "my_ontoevent", "--params", json.dumps(params), "--report"])
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


def duck(path):
    import duckdb

    return duckdb.connect(str(path), read_only=True)
