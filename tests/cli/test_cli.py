"""The `eventatlas` CLI: --help on every command, and the warehouse commands on a temp warehouse."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from eventatlas.cli import app
from eventatlas.store.warehouse import Warehouse

COMMANDS = ["ingest", "ingest-samples", "datasets", "embed", "cluster", "train-all", "train", "methods", "leaderboard",
            "sql", "demo", "migrate", "build-wikievents", "publish", "restore", "report", "search", "ground", "runs",
            "extract-events", "ensemble", "models", "evaluate", "atlas", "experiment", "detect", "discover"]
runner = CliRunner()


def test_top_level_help_lists_every_command():
    import typer

    assert sorted(typer.main.get_command(app).commands) == sorted(COMMANDS)  # a new command joins the list
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0, r.output
    for c in COMMANDS:
        assert c in r.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    r = runner.invoke(app, [command, "--help"])
    assert r.exit_code == 0, r.output
    assert "Usage:" in r.output and command in r.output


def test_cluster_takes_algorithm_option():
    r = runner.invoke(app, ["cluster", "--help"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "--algorithm" in r.output and "-a" in r.output and "--method" not in r.output


def test_migrate_sql_leaderboard(eventatlas_env, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # every column fits
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
    # columns empty in every row (setting, variant, precision) are left out
    assert _header(r.output) == ["task", "dataset", "split", "method", "rep", "clustering", "seeds", "ari_mean",
                                 "ari_std", "ari"]
    assert cells == ["induction", "onto", "all", "untuned", "trigger", "agglomerative", "2", "46.1", "2.8", "48.1"]
    r = runner.invoke(app, ["sql", "SELECT metric, round(value, 4) AS v FROM metrics ORDER BY v"])
    assert r.exit_code == 0 and "0.4412" in r.output and "0.4812" in r.output
    r = runner.invoke(app, ["sql", "DELETE FROM metrics"])
    assert r.exit_code == 2 and "read-only" in r.output
    assert len(wh.query("SELECT * FROM metrics")) == 2


def test_sql_without_warehouse_says_what_to_do(eventatlas_env):
    r = runner.invoke(app, ["sql", "SELECT 1"])
    assert r.exit_code == 2 and "eventatlas migrate" in r.output and "make demo" in r.output


def test_datasets_empty_and_train_all_bad_params(eventatlas_env):
    r = runner.invoke(app, ["datasets"])  # nothing in the data root, no demo: one line saying how to get data
    assert r.exit_code == 2 and len(r.output.splitlines()) == 1 and "ingest-samples" in r.output
    r = runner.invoke(app, ["train-all", "--params", "{not json"])
    assert r.exit_code == 2 and "bad --params" in r.output


@pytest.mark.parametrize("params, expect", [
    ('{"untuned": {"k_sen": 10}}', "unknown key 'k_sen' (did you mean 'k_seen'?)"),
    ('{"untuned": {"k_seen": "ten"}}', "untuned.k_seen: Input should be a valid integer"),
    ('{"batch_attention": {"train": {"epoch": 3}}}', "unknown key 'train.epoch' (did you mean 'epochs'?)"),
    ('{"untuned": {"clusterings": ["kmeans"]}}', "untuned.clusterings.0: Input should be"),
    ('{"nosuch": {}}', "unknown method 'nosuch'"),
])
def test_bad_params_fail_in_the_cli_before_anything_runs(eventatlas_env, monkeypatch, params, expect):
    # nothing may run: not Prefect, not a flow, not a method (the flow module is never imported)
    import sys

    monkeypatch.delitem(sys.modules, "flows.train_all", raising=False)
    methods = "untuned,batch_attention" if "batch_attention" in params else "untuned,nosuch" if "nosuch" in params \
        else "untuned"
    r = runner.invoke(app, ["train-all", "--methods", methods, "--params", params], terminal_width=300)
    assert r.exit_code == 2, r.output
    assert expect in " ".join(r.output.split()), r.output
    assert "flows.train_all" not in sys.modules
    assert not (eventatlas_env / "data").exists() and not (eventatlas_env / "warehouse.duckdb").exists()


def test_unavailable_device_is_refused_before_anything_runs(eventatlas_env, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    r = runner.invoke(app, ["train-all", "--device", "cuda"], terminal_width=300)
    assert r.exit_code == 2 and "no CUDA GPU" in r.output
    ds = eventatlas_env / "ds"
    ds.mkdir()
    (ds / "manifest.json").write_text("{}")
    r = runner.invoke(app, ["train", "untuned", str(ds), "--device", "cuda:1"], terminal_width=300)
    assert r.exit_code == 2 and "no CUDA GPU" in r.output


def test_methods_lists_specs_and_keys():
    r = runner.invoke(app, ["methods"], terminal_width=300)
    assert r.exit_code == 0, r.output
    assert "untuned" in r.output and "batch_attention" in r.output and "typed_mentions" in r.output
    assert "k_seen" in r.output and "representations" in r.output and "GPU: advised" in r.output


def test_build_wikievents_command_on_fixture_dumps(tmp_path):
    """`eventatlas build-wikievents --dumps layout.yaml` builds the fixture world end to end through the flow.

    Runs the real console command in a subprocess: an in-process CliRunner would leave Prefect's
    log handlers bound to its closed capture stream for the rest of the session."""
    import os
    import subprocess
    import sys

    import pyarrow.parquet as pq
    import yaml

    from support.wiki_world.world import LANGS, WORLD_PARAMS, build_world, write_dumps

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


def _cells(output: str, needle: str) -> list[str]:
    line = next(ln for ln in output.splitlines() if needle in ln)
    return [c.strip() for c in line.strip("│┃ ").split("│")]


def _header(output: str, after: int = 0) -> list[str]:
    """The column names of the first table header after line ``after``."""
    line = next(ln for ln in output.splitlines()[after:] if ln.startswith("┃"))
    return [c.strip() for c in line.strip("┃ ").split("┃")]


def test_leaderboard_one_table_per_task_and_clear_errors(eventatlas_env, monkeypatch):
    from eventatlas.cli import base as cli

    monkeypatch.setattr(cli.console, "width", 300)  # one table row a line
    monkeypatch.setenv("COLUMNS", "300")  # the leaderboard shows every column that fits the terminal
    wh = Warehouse()
    wh.migrate()
    base = {"dataset": "onto", "split": "unseen", "method": "ba", "representation": "trigger", "seed": 0}
    wh.publish({"run_id": "b0", "method": "ba", "seed": 0, "status": "completed"}, [
        {**base, "task": "induction", "clustering": "manifold", "variant": "attn_cos", "metric": "ari", "value": 0.41},
        {**base, "task": "induction", "clustering": "manifold", "variant": "ft", "metric": "ari", "value": 0.45},
        {**base, "task": "induction", "setting": "10 seen / 40 unseen", "clustering": "manifold", "variant": "ft",
         "metric": "ari", "value": 0.30},
        {**base, "task": "naming", "variant": "perfect", "metric": "naming_hits@1", "value": 0.5},
        {**base, "task": "naming", "variant": "perfect", "metric": "naming_mean_rank", "value": 2.4},
        {**base, "task": "training", "variant": "stopping", "metric": "stop_epoch_paper", "value": 3.0},
    ])
    r = runner.invoke(app, ["leaderboard"])
    assert r.exit_code == 0, r.output
    titles = [ln.strip() for ln in r.output.splitlines() if "leaderboard from" in ln]
    assert [t.split()[0] for t in titles] == ["induction", "naming", "training"]
    # induction: sorted by ari (best first), variant and setting shown; fractions x100
    assert _header(r.output) == ["task", "dataset", "split", "setting", "method", "rep", "clustering", "variant",
                                 "seeds", "ari_mean", "ari_std", "ari"]
    rows = [_cells(r.output, "attn_cos"), _cells(r.output, "│ ft"), _cells(r.output, "10 seen")]
    assert rows[0] == ["induction", "onto", "unseen", "", "ba", "trigger", "manifold", "attn_cos", "1", "41", "", "41"]
    assert rows[1][7] == "ft" and rows[1][-1] == "45" and rows[2][3].startswith("10 seen") and rows[2][-1] == "30"
    lines = r.output.splitlines()
    assert lines.index(next(ln for ln in lines if "│ 45" in ln)) < lines.index(next(ln for ln in lines if "│ 41" in ln))
    # naming: hits@1 (x100) first, then the task's other metric (the report's rule: at most 6 metrics, all
    # shown); training: the chosen epoch as it is, not x100
    naming = r.output.splitlines().index(next(ln for ln in r.output.splitlines() if ln.strip().startswith("naming ")))
    assert _header(r.output, naming)[-2:] == ["naming_hits@1", "naming_mean_rank"]
    assert _cells(r.output, "perfect")[-2:] == ["50", "2.4"]
    assert _cells(r.output, "stopping")[-1] == "3"

    r = runner.invoke(app, ["leaderboard", "--task", "naming", "--metrics", "naming_mean_rank,naming_hits@1"])
    assert r.exit_code == 0, r.output
    # a rank is shown as it is (mean, std over 1 seed, best), hits@1 x100
    assert "induction" not in r.output and _cells(r.output, "perfect")[-4:] == ["2.4", "", "2.4", "50"]

    for args, msg in ((["--task", "nope"], "unknown task 'nope'; known in "),
                      (["--dataset", "maven"], "unknown dataset 'maven'; known in "),
                      (["--metrics", "ari,purityf"], "unknown metric 'purityf'; known in "),
                      (["--metrics", "naming_hit@1"], "unknown metric 'naming_hit@1' (did you mean 'naming_hits@1'?)"),
                      (["--task", "naming", "--metrics", "ari"], "unknown metric 'ari'")):
        r = runner.invoke(app, ["leaderboard", *args])
        assert r.exit_code == 2, r.output
        err = [ln for ln in r.output.splitlines() if ln.strip()]
        assert len(err) == 1 and msg in err[0], r.output  # one line, naming the known values
    assert err[0].endswith("known in " + str(wh.path) + ": naming_hits@1, naming_mean_rank")
    r = runner.invoke(app, ["leaderboard", "--task", "nope"])
    assert r.output.strip().endswith(": induction, naming, training")
    r = runner.invoke(app, ["leaderboard", "--dataset", "maven"])
    assert r.output.strip().endswith(": onto")


def test_leaderboard_on_empty_or_missing_warehouse(eventatlas_env):
    r = runner.invoke(app, ["leaderboard"])
    assert r.exit_code == 2 and "eventatlas migrate" in r.output
    runner.invoke(app, ["migrate"])
    r = runner.invoke(app, ["leaderboard"])
    assert r.exit_code == 0 and "is empty: no completed run has metrics yet" in r.output
