"""Quiet by default, verbose with -v; embedding shows its own progress."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from support.tiny_models import tiny_bert

from eventatlas import config
from eventatlas.verbosity import set_verbosity

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def restore_verbosity():
    saved = dict(os.environ)
    yield
    set_verbosity(True)
    os.environ.clear()
    os.environ.update(saved)


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eventatlas.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **env, "COLUMNS": "200"}, timeout=300)


def test_cli_quiet_by_default_verbose_with_v(tmp_path):
    env = {"EVENTATLAS_DATA": str(tmp_path / "data"), "EVENTATLAS_WAREHOUSE": str(tmp_path / "wh.duckdb"),
           "PREFECT_HOME": str(tmp_path / "prefect"),
           "EVENTATLAS_PREFECT": "always"}  # through the flow: Prefect's own logs are what -v must show
    for k in ("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY"):
        env[k] = ""  # unset for the child (an empty value counts as unset for these)
    sample = str(config.samples_dir() / "ontoevent")
    quiet = _cli("ingest", "ontoevent", "--path", sample, env=env)
    assert quiet.returncode == 0, quiet.stderr
    lines = [ln for ln in (quiet.stdout + quiet.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ingested ontoevent_maven"), lines
    loud = _cli("-v", "ingest", "ontoevent", "--path", sample, env=env)
    assert loud.returncode == 0, loud.stderr
    assert "Finished in state Completed" in loud.stderr and "ingested ontoevent_maven" in loud.stdout


def test_transformers_bars_and_sklearn_warnings_follow_verbosity(tmp_path, capfd, restore_verbosity):
    from sklearn.cluster import AffinityPropagation
    from transformers import AutoModel

    model = tiny_bert(tmp_path / "m", ["a b c"])
    X = np.ones((4, 3))
    for verbose in (False, True):
        set_verbosity(verbose)
        capfd.readouterr()
        AutoModel.from_pretrained(model)
        err = capfd.readouterr().err
        assert ("Loading weights" in err) == verbose, err
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            set_verbosity(verbose)  # its filters go on top of the "default" one
            AffinityPropagation(random_state=0).fit(X)
        assert any("equal similarities" in str(w.message) for w in caught) == verbose


def test_embedding_shows_its_own_progress(tmp_path, caplog, capsys):
    from eventatlas.modeling.encode import embed_mentions
    from eventatlas.data.ingest import ingest

    m = ingest("ontoevent", config.samples_dir() / "ontoevent", out_dir=tmp_path / "ds", dataset="onto", progress=False)
    sents = pq.read_table(Path(m["path"]) / "mentions.parquet")["sentence"].to_pylist()
    model = tiny_bert(tmp_path / "m", sents)
    n = len(sents)
    with caplog.at_level(logging.INFO, logger="eventatlas.modeling.encode"):
        embed_mentions(Path(m["path"]), str(model), "trigger", cache_dir=tmp_path / "cache", progress=True,
                       precision="fp32", device="cpu")
    err = capsys.readouterr().err
    assert f"embed ds trigger: 100%" in err and f"{n}/{n}" in err  # one bar over the whole table
    assert "encode trigger" not in err  # not the encoder's per-chunk bars
    assert any(r.getMessage().startswith(f"embed ds trigger: {n} mentions in ") for r in caplog.records)
