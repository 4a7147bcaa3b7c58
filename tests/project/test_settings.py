"""One settings object: a command resolves data root, warehouse, cache and demo root once (absolute), every
path function reads them while they are active, child processes get them through the environment, and
nothing outlives the command."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from eventatlas import config


def test_resolve_makes_every_path_absolute_and_derives_the_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = config.Settings.resolve({"EVENTATLAS_DATA": "data/demo"})
    assert s.data_root == tmp_path / "data" / "demo"
    assert s.cache == tmp_path / "data" / "demo" / "cache" and s.demo_root == tmp_path / "data" / "demo" / "demo"
    assert s.chosen == {"data_root"}
    given = config.Settings.resolve({"EVENTATLAS_DATA": "x"}, warehouse="w.duckdb", cache="")
    assert given.warehouse == tmp_path / "w.duckdb" and given.data_root == tmp_path / "x"
    assert given.cache == tmp_path / "x" / "cache" and given.chosen == {"data_root", "warehouse"}


def test_a_new_data_root_moves_what_was_not_chosen(tmp_path):
    s = config.Settings.resolve({"EVENTATLAS_CACHE": str(tmp_path / "c")})
    moved = s.with_(data_root=tmp_path / "d")
    assert moved.cache == tmp_path / "c" and moved.demo_root == tmp_path / "d" / "demo"
    assert moved.warehouse == s.warehouse and moved.chosen == {"cache", "data_root"}


def test_use_is_what_every_path_function_reads_and_is_undone(tmp_path, monkeypatch):
    monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path / "outer"))
    monkeypatch.delenv("EVENTATLAS_WAREHOUSE", raising=False)
    inner = config.Settings.resolve(data_root=tmp_path / "inner", warehouse=tmp_path / "wh.duckdb")
    with config.use(inner):
        # the environment changing under a running command does not move it
        monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path / "elsewhere"))
        assert config.data_root() == tmp_path / "inner" and config.runs_dir() == tmp_path / "inner" / "runs"
        assert config.warehouse_path() == tmp_path / "wh.duckdb"
        assert config.demo_warehouse() == tmp_path / "inner" / "demo" / "eventatlas.duckdb"
        # a child process sees the same settings
        out = subprocess.run([sys.executable, "-c", "from eventatlas import config; print(config.warehouse_path())"],
                             capture_output=True, text=True, check=True).stdout.strip()
        assert Path(out) == tmp_path / "wh.duckdb"
        with config.use(inner.with_(warehouse=tmp_path / "other.duckdb")):
            assert config.warehouse_path() == tmp_path / "other.duckdb"
        assert config.warehouse_path() == tmp_path / "wh.duckdb"
        config.switch(warehouse=tmp_path / "demo.duckdb")
        assert config.warehouse_path() == tmp_path / "demo.duckdb" and "warehouse" in config.current().chosen
    assert "EVENTATLAS_WAREHOUSE" not in os.environ
    # the environment is as it was on entry (use() exported the command's settings for its children)
    assert os.environ["EVENTATLAS_DATA"] == str(tmp_path / "outer") and config.data_root() == tmp_path / "outer"


def test_the_cli_resolves_once_per_command_and_leaves_nothing_behind(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from eventatlas.cli import app

    monkeypatch.delenv("EVENTATLAS_WAREHOUSE", raising=False)
    monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path / "data"))
    wh = tmp_path / "chosen.duckdb"
    r = CliRunner().invoke(app, ["--warehouse", str(wh), "migrate"])
    assert r.exit_code == 0, r.output
    assert wh.exists() and not (tmp_path / "data" / "eventatlas.duckdb").exists()
    assert "EVENTATLAS_WAREHOUSE" not in os.environ and not config._ACTIVE
