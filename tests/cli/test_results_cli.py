"""The leaderboard fits the terminal (columns chosen by width, `--wide` for all); `--warehouse` picks the
warehouse of any command; the read commands (models, datasets, leaderboard, runs) read the user's data root
while it has anything, else the demo's, saying so in one note line; the demo's headline rule
(`leaderboard.headlines`) against hand-computed cases."""
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
    # one value on every row (task, dataset, split): the heading line above the table, not columns
    assert "task induction · dataset ontoevent_maven · split unseen" in r.stdout
    assert not {"task", "dataset", "split"} & set(cols)
    # what tells rows apart, and the score: every configuration column that varies, even at 60 columns
    assert cols[0] == "method" and {"rep", "clustering", "ari_mean"} <= set(cols)
    left = " ".join(r.stdout[r.stdout.index("left out to fit"):].split())
    assert f"fit {width} columns" in left and "--wide" in left
    assert "task" not in left and "ari_std" in left  # the task is in the heading; the std goes before metrics
    assert ("v_measure" in left) == (width < 100)  # of the metrics, the last goes first
    assert len(_table_lines(r.stdout)) == 4 + 8  # no row folded over two lines: 8 configurations
    rows = [ln for ln in _table_lines(r.stdout) if ln.startswith("│")]
    assert len(set(rows)) == 8  # no two alike


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


def _root_with(root, name, warehouse=None):
    """A data root holding one dataset ``<name>_ds`` (its manifest), one run ``<name>-model`` (a saved model's
    card) and, when given, a warehouse with one run ``<name>-run`` scored on that dataset: no training."""
    import json

    ds = root / "datasets" / f"{name}_ds"
    ds.mkdir(parents=True)
    (ds / "manifest.json").write_text(json.dumps({"dataset": f"{name}_ds", "reader": "jsonl",
                                                  "rows": {"mentions": 3, "event_types": 2}}))
    model = root / "runs" / f"{name}-model" / "model"
    model.mkdir(parents=True)
    (model / "model_card.json").write_text(json.dumps({"method": "swcc", "run_id": f"{name}-model",
                                                       "trained_on": f"{name}_ds"}))
    if warehouse is not None:
        wh = Warehouse(warehouse)
        wh.migrate()
        wh.publish({"run_id": f"{name}-run", "method": "untuned", "seed": 0, "status": "completed"},
                   [_row("untuned", "trigger", "agglomerative", "ari", 0.5, dataset=f"{name}_ds")])


READS = {"models": "run:{}-model", "datasets": "{}_ds", "leaderboard": "{}_ds", "runs": "{}-run"}


@pytest.fixture
def roots(tmp_path, monkeypatch):
    """A user's data root (EVENTATLAS_DATA) with the checkout's default warehouse, both empty, and a demo root
    (EVENTATLAS_DEMO_ROOT) elsewhere, empty too."""
    checkout = tmp_path / "checkout"  # a checkout without a warehouse: its default file does not exist
    (checkout / "datasets").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    monkeypatch.setattr(config, "REPO_ROOT", checkout)
    monkeypatch.delenv("EVENTATLAS_WAREHOUSE", raising=False)
    monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path / "user"))
    monkeypatch.setenv("EVENTATLAS_DEMO_ROOT", str(tmp_path / "demo"))
    monkeypatch.setenv("COLUMNS", "200")
    return {"user": tmp_path / "user", "warehouse": checkout / "warehouse" / "eventatlas.duckdb",
            "demo": tmp_path / "demo"}


def test_nothing_anywhere_is_one_line_saying_how_to_get_data(roots):
    for cmd in READS:
        r = runner.invoke(app, [cmd])
        assert r.exit_code == 2 and r.stdout == "", (cmd, r.output)
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("error: ") and "`make demo`" in r.stderr, cmd
    r = runner.invoke(app, ["runs"])
    assert r.stderr.startswith(f"error: no warehouse at {roots['warehouse']}: `make demo`")
    r = runner.invoke(app, ["datasets"])
    assert r.stderr.startswith(f"error: nothing in data root {roots['user']} (no dataset, run or warehouse")
    assert "`eventatlas ingest-samples`" in r.stderr
    r = runner.invoke(app, ["--root", str(roots["demo"]), "models"])  # an empty root named: the same refusal
    assert r.exit_code == 2 and r.stderr.startswith(f"error: nothing in data root {roots['demo']}")


def test_read_commands_read_the_users_root_else_the_demos_with_one_note(roots):
    user, demo = roots["user"], roots["demo"]
    _root_with(demo, "demo", demo / "eventatlas.duckdb")
    # (1) nothing of the user's: every read command reads the demo's root and warehouse, said in one line
    for cmd, shown in READS.items():
        r = runner.invoke(app, [cmd])
        assert r.exit_code == 0, (cmd, r.output)
        assert shown.format("demo") in r.stdout, (cmd, r.stdout)
        assert r.stderr == (f"note: nothing in your data root {user} yet (no dataset, run or warehouse "
                            f"{roots['warehouse']}); reading the demo's, {demo} (1 dataset, 1 run; --root PATH reads "
                            "another)\n"), cmd
    assert os.environ["EVENTATLAS_DATA"] == str(user)  # the fallback held for that command only
    assert "EVENTATLAS_WAREHOUSE" not in os.environ
    # (2) the user's root gets something: it is read, and the note says where the demo's is and how to read it
    _root_with(user, "my", roots["warehouse"])
    for cmd, shown in READS.items():
        r = runner.invoke(app, [cmd])
        assert r.exit_code == 0, (cmd, r.output)
        assert shown.format("my") in r.stdout and shown.format("demo") not in r.stdout, (cmd, r.stdout)
        assert r.stderr == (f"note: reading your data root {user} (1 dataset, 1 run); the demo's (1 dataset, 1 run) "
                            f"is at {demo}: --root {demo}\n"), cmd
        # (3) --root names the demo's: its root and warehouse, silently
        r = runner.invoke(app, ["--root", str(demo), cmd])
        assert r.exit_code == 0, (cmd, r.output)
        assert shown.format("demo") in r.stdout and shown.format("my") not in r.stdout, (cmd, r.stdout)
        assert r.stderr == "", cmd
    # --warehouse alone: the user's data root with that warehouse, silently
    r = runner.invoke(app, ["--warehouse", str(demo / "eventatlas.duckdb"), "runs"])
    assert r.exit_code == 0 and "demo-run" in r.stdout and r.stderr == ""
    r = runner.invoke(app, ["--warehouse", str(demo / "eventatlas.duckdb"), "models"])
    assert r.exit_code == 0 and "run:my-model" in r.stdout and r.stderr == ""
    # --root with --warehouse: the root's datasets and runs, the named warehouse
    r = runner.invoke(app, ["--root", str(demo), "--warehouse", str(roots["warehouse"]), "runs"])
    assert r.exit_code == 0 and "my-run" in r.stdout and r.stderr == ""


def test_a_dataset_alone_makes_the_users_root_the_one_read(roots):
    user, demo = roots["user"], roots["demo"]
    _root_with(demo, "demo", demo / "eventatlas.duckdb")
    _root_with(user, "my")  # a dataset and a run directory, no warehouse yet
    r = runner.invoke(app, ["datasets"])
    assert r.exit_code == 0 and "my_ds" in r.stdout and "demo_ds" not in r.stdout
    assert r.stderr == (f"note: reading your data root {user} (1 dataset, 1 run, no warehouse); the demo's "
                        f"(1 dataset, 1 run) is at {demo}: --root {demo}\n")
    r = runner.invoke(app, ["leaderboard"])  # the user's has no warehouse: said after the note, nothing hidden
    assert r.exit_code == 2 and r.stderr.splitlines()[1].startswith(f"error: no warehouse at {roots['warehouse']}")


def test_root_option_refuses_a_file(tmp_path):
    (tmp_path / "f").write_text("")
    r = runner.invoke(app, ["--root", str(tmp_path / "f"), "runs"])
    assert r.exit_code == 2 and r.stderr == f"error: --root {tmp_path / 'f'}: not a directory; give a data root (e.g. data/demo)\n"


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
