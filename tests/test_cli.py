"""The `eventatlas` CLI: --help on every command, and the warehouse commands on a temp warehouse."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from eventatlas.cli import app
from eventatlas.warehouse import Warehouse

COMMANDS = ["ingest", "ingest-samples", "datasets", "embed", "cluster", "train-all", "leaderboard", "sql", "demo",
            "migrate", "build-wikievents"]
runner = CliRunner()


def test_top_level_help_lists_every_command():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0, r.output
    for c in COMMANDS:
        assert c in r.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    r = runner.invoke(app, [command, "--help"])
    assert r.exit_code == 0, r.output
    assert "Usage:" in r.output and command in r.output


def test_migrate_sql_leaderboard(eventatlas_env):
    r = runner.invoke(app, ["migrate"])
    assert r.exit_code == 0, r.output
    assert "applied [1, 2" in r.output
    assert "up to date" in runner.invoke(app, ["migrate"]).output
    wh = Warehouse()
    for seed, v in ((0, 0.4812), (1, 0.4412)):
        wh.publish({"run_id": f"r{seed}", "method": "untuned", "seed": seed, "status": "completed",
                    "finished_at": f"2026-01-0{seed + 1} 00:00:00"},
                   [{"task": "induction", "dataset": "onto", "split": "all", "method": "untuned",
                     "representation": "trigger", "clustering": "agglomerative", "metric": "ari", "value": v,
                     "seed": seed}])
    r = runner.invoke(app, ["leaderboard"])
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if "onto" in ln)
    # best 48.1, mean 46.1, sample std of (48.12, 44.12) = 2.83 -> 2.8, 2 seeds
    cells = [c.strip() for c in line.strip("│┃ ").split("│")]
    assert cells[:5] == ["onto", "untuned", "trigger", "agglomerative", "2"]
    assert cells[5:8] == ["46.1", "2.8", "48.1"]
    r = runner.invoke(app, ["sql", "SELECT metric, round(value, 4) AS v FROM metrics ORDER BY v"])
    assert r.exit_code == 0 and "0.4412" in r.output and "0.4812" in r.output
    r = runner.invoke(app, ["sql", "DELETE FROM metrics"])
    assert r.exit_code == 1 and "read-only" in r.output
    assert len(wh.query("SELECT * FROM metrics")) == 2


def test_sql_without_warehouse_says_what_to_do(eventatlas_env):
    r = runner.invoke(app, ["sql", "SELECT 1"])
    assert r.exit_code == 1 and "eventatlas migrate" in r.output


def test_datasets_empty_and_train_all_bad_params(eventatlas_env):
    r = runner.invoke(app, ["datasets"])
    assert r.exit_code == 0 and "ingest-samples" in r.output
    r = runner.invoke(app, ["train-all", "--params", "{not json"])
    assert r.exit_code == 1 and "bad --params" in r.output


def test_build_wikievents_command_on_fixture_dumps(tmp_path):
    """`eventatlas build-wikievents --dumps layout.yaml` builds the fixture world end to end through the flow.

    Runs the real console command in a subprocess: an in-process CliRunner would leave Prefect's
    log handlers bound to its closed capture stream for the rest of the session."""
    import os
    import subprocess
    import sys

    import pyarrow.parquet as pq
    import yaml

    from wiki_world.world import LANGS, WORLD_PARAMS, build_world, write_dumps

    layout = tmp_path / "layout.yaml"
    layout.write_text(yaml.safe_dump(write_dumps(build_world(), tmp_path / "dumps")))
    out = tmp_path / "wg"
    env = {**os.environ, "EVENTATLAS_DATA": str(tmp_path / "data"), "EVENTATLAS_WAREHOUSE": str(tmp_path / "wh.duckdb"),
           "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    r = subprocess.run([sys.executable, "-m", "eventatlas.cli", "build-wikievents", "--dumps", str(layout),
                        "--languages", ",".join(LANGS), "--params", json.dumps(WORLD_PARAMS), "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    mentions = pq.read_table(out / "mentions.parquet")
    assert mentions.num_rows > 0
    # every label is a known event of the build's dictionary
    types = set(pq.read_table(out / "event_types.parquet").column("type_id").to_pylist())
    assert all(set(ls) <= types for ls in mentions.column("labels").to_pylist())
    # the build was recorded in the warehouse
    import duckdb

    con = duckdb.connect(str(tmp_path / "wh.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM wiki_builds").fetchone()[0] == 1
