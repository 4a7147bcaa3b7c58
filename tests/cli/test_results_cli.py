"""The leaderboard fits the terminal (columns chosen by width, `--wide` for all); `--warehouse` picks the
warehouse of any command; the read commands fall back to the demo's warehouse only while the user has
none; the demo's headline rule (`leaderboard.headlines`) against hand-computed cases."""
from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from eventatlas import config
from eventatlas.cli import app
from eventatlas.results.leaderboard import build, headlines
from eventatlas.store.warehouse import Warehouse

runner = CliRunner()


def _row(method, rep, clustering, metric, value, seed=0, dataset="ontoevent_maven", split="unseen", task="induction"):
    return {"task": task, "dataset": dataset, "split": split, "method": method, "representation": rep,
            "clustering": clustering, "variant": None, "metric": metric, "value": value, "seed": seed}


@pytest.fixture
def filled(eventatlas_env):
    """A warehouse with 2 methods x 2 representations x 2 clusterings, 5 induction metrics, seeds 0 and 1."""
    wh = Warehouse()
    wh.migrate()
    for seed in (0, 1):
        for method in ("untuned", "batch_attention"):
            rows = [_row(method, rep, cl, m, 0.1 * i + 0.05 * seed + (0.2 if method == "batch_attention" else 0), seed)
                    for i, (rep, cl) in enumerate([("trigger", "agglomerative"), ("trigger", "manifold"),
                                                   ("sentence", "agglomerative"), ("sentence", "manifold")])
                    for m in ("ari", "bcubed_f", "nmi", "purity_f", "v_measure")]
            wh.publish({"run_id": f"{method}-s{seed}", "method": method, "seed": seed, "status": "completed"}, rows)
    return wh


def _table_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln[:1] in "┏┃┡│└"]


def _header(output: str) -> list[str]:
    head = next(ln for ln in output.splitlines() if ln.startswith("┃"))
    return [c.strip() for c in head.strip("┃").split("┃")]


@pytest.mark.parametrize("width", [60, 80, 100])
def test_leaderboard_fits_the_terminal(filled, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    r = runner.invoke(app, ["leaderboard"])
    assert r.exit_code == 0, r.output
    assert all(len(ln) <= width for ln in r.stdout.splitlines()), r.stdout
    cols = _header(r.stdout)
    assert cols[0] == "dataset" and {"method", "ari_mean"} <= set(cols)  # what tells rows apart, and the score
    left = " ".join(r.stdout[r.stdout.index("left out to fit"):].split())
    assert f"fit {width} columns" in left and "--wide" in left
    assert "task" in left and "v_measure" in left  # the task is the table's title; the last metric goes first
    assert len(_table_lines(r.stdout)) == 4 + 8  # no row folded over two lines: 8 configurations
    if width >= 80:
        assert {"rep", "clustering"} <= set(cols)


def test_leaderboard_wide_shows_every_column_unfolded(filled, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    r = runner.invoke(app, ["leaderboard", "--wide"])
    assert r.exit_code == 0, r.output
    assert _header(r.stdout) == ["task", "dataset", "split", "method", "rep", "clustering", "seeds", "ari_mean",
                                 "ari_std", "ari", "bcubed_f", "nmi", "purity_f", "v_measure"]
    assert "left out" not in r.stdout
    assert len(_table_lines(r.stdout)) == 4 + 8
    best = next(ln for ln in r.stdout.splitlines() if "batch_attention" in ln and "sentence" in ln and "manifold" in ln)
    cells = [c.strip() for c in best.strip("│").split("│")]
    assert cells[6:9] == ["2", "52.5", "3.5"]  # mean of 0.5, 0.55 (x100); sample std 0.0354 x100


def test_leaderboard_all_columns_when_the_terminal_is_wide_enough(filled, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    r = runner.invoke(app, ["leaderboard"])
    assert len(_header(r.stdout)) == 14 and "left out" not in r.stdout


def test_warehouse_option_picks_the_file(filled, monkeypatch, tmp_path):
    other = tmp_path / "other.duckdb"
    Warehouse(other).migrate()
    r = runner.invoke(app, ["--warehouse", str(other), "sql", "SELECT count(*) AS n FROM metrics"])
    assert r.exit_code == 0, r.output
    assert "│ 0 │" in r.stdout
    monkeypatch.setenv("EVENTATLAS_WAREHOUSE", str(filled.path))  # the option wins over the variable
    r = runner.invoke(app, ["--warehouse", str(other), "sql", "SELECT count(*) AS n FROM metrics"])
    assert "│ 0 │" in r.stdout and "note:" not in r.stderr


def test_read_commands_fall_back_to_the_demo_only_while_the_user_has_none(tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"  # a checkout without a warehouse: its default file does not exist
    (checkout / "datasets").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    monkeypatch.setattr(config, "REPO_ROOT", checkout)
    default = checkout / "warehouse" / "eventatlas.duckdb"
    monkeypatch.delenv("EVENTATLAS_WAREHOUSE", raising=False)
    monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("EVENTATLAS_DEMO_ROOT", raising=False)
    r = runner.invoke(app, ["runs"])  # neither the user's nor the demo's: exit 2, how to get one
    assert r.exit_code == 2 and r.stderr.startswith(f"error: no warehouse at {default}: `make demo`")
    demo = tmp_path / "data" / "demo" / "eventatlas.duckdb"
    Warehouse(demo).migrate()
    r = runner.invoke(app, ["sql", "SELECT 1 AS one"])
    assert r.exit_code == 0, r.output
    assert r.stderr == (f"note: no warehouse at {default}; reading the demo's, {demo} (--warehouse PATH or "
                        "EVENTATLAS_WAREHOUSE picks another)\n")
    assert "EVENTATLAS_WAREHOUSE" not in os.environ  # the fallback held for that command only
    Warehouse(default).migrate()  # the user has one now: it is read, silently
    r = runner.invoke(app, ["sql", "SELECT 1 AS one"])
    assert r.exit_code == 0 and r.stderr == ""


def test_warehouse_option_refuses_a_directory(tmp_path):
    r = runner.invoke(app, ["--warehouse", str(tmp_path), "runs"])
    assert r.exit_code == 2 and r.stderr.startswith(f"error: --warehouse {tmp_path}: a directory")


def _lb(method, metric, mean, split="unseen", rep="trigger", dataset="d", task="induction"):
    return {"task": task, "dataset": dataset, "split": split, "setting": None, "method": method, "trained_on": None,
            "representation": rep, "clustering": "agglomerative", "variant": None, "precision": None,
            "metric": metric, "mean": mean, "std": None, "n_seeds": 1, "best": mean}


def test_headlines_best_configuration_per_method_by_the_headline_metric():
    board = [_lb("untuned", "ari", 0.30, rep="trigger"), _lb("untuned", "ari", 0.40, rep="sentence"),
             _lb("untuned", "nmi", 0.90, rep="trigger"),
             _lb("ft", "ari", 0.70, split="dev"), _lb("ft", "ari", 0.50, split="test"),  # dev chooses, test scores
             _lb("ft", "n_clusters", 4.0, split="test"),
             # a lower-is-better headline: the smallest mean rank wins
             _lb("emr", "naming_mean_rank", 3.0, task="naming", rep="a"),
             _lb("emr", "naming_mean_rank", 2.0, task="naming", rep="b"),
             # only a count: no headline line
             _lb("x", "stop_epoch_paper", 3.0, task="training")]
    boards = build(board, {"naming_mean_rank"}, ["ari", "nmi", "naming_mean_rank", "stop_epoch_paper"])
    got = {(h["method"], h["task"]): (h["metric"], h["mean"], h["config"].get("representation"),
                                      h["config"].get("split"), h["n_configs"]) for h in headlines(boards)}
    assert got == {("untuned", "induction"): ("ari", 0.40, "sentence", "unseen", 2),
                   ("ft", "induction"): ("ari", 0.50, "trigger", "test", 2),
                   ("emr", "naming"): ("naming_mean_rank", 2.0, "b", "unseen", 2)}
