"""Paths and saved models: a relative data root is made absolute once (an evaluate run reaches the warehouse);
``run:`` references are names, never patterns or paths; every ``torch.load`` refuses pickled code; a saved
model loads only files inside its own directory."""
from __future__ import annotations

import ast
import json
import os
import pickle
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from typer.testing import CliRunner

from eventatlas import config
from eventatlas.modeling.saved import CARD_NAME, ModelError, ModelWriter, finalize, resolve_ref
from support.tiny_models import tiny_bert

ROOT = Path(__file__).resolve().parents[2]
MAVEN = ROOT / "datasets" / "samples" / "maven" / "train.jsonl"
TEXTS = ["Troops attacked the town at dawn .", "The company acquired a rival firm ."]


def _saved(run_dir: Path, *, encoder_src: Path | None = None, method: str = "swcc") -> Path:
    """A finished run directory with a saved model (a head, and an encoder when ``encoder_src`` is given)."""
    w = ModelWriter(run_dir, method=method)
    if encoder_src is not None:
        w.encoder_files(encoder_src, max_length=32, base_model="tiny")
    w.head("proxies", {"weight": torch.zeros(2, 3)}, kind="arcface")
    w.close()
    finalize(run_dir, {"run_id": run_dir.name, "data_fingerprints": {"x": "fp"}, "seed": 0, "params": {}}, [])
    return run_dir / "model"


# ----------------------------------------------------------------------------- one absolute data root
def test_paths_are_absolute_and_taken_against_the_directory_current_when_read(tmp_path, monkeypatch):
    for name, value in (("EVENTATLAS_DATA", "d"), ("EVENTATLAS_CACHE", "c"), ("EVENTATLAS_WAREHOUSE", "w.duckdb"),
                        ("EVENTATLAS_DEMO_ROOT", "demo")):
        monkeypatch.setenv(name, value)
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        monkeypatch.chdir(tmp_path / sub)
        here = tmp_path / sub
        assert (config.data_root(), config.runs_dir(), config.datasets_dir()) == (here / "d", here / "d" / "runs",
                                                                                 here / "d" / "datasets")
        assert (config.cache_dir(), config.warehouse_path(), config.demo_root()) == (here / "c", here / "w.duckdb",
                                                                                    here / "demo")
    monkeypatch.delenv("EVENTATLAS_DEMO_ROOT")
    monkeypatch.setenv("EVENTATLAS_DATA", "d/../e")
    assert config.demo_root() == tmp_path / "b" / "e" / "demo"  # normalised, absolute


@pytest.mark.timeout(300)
def test_evaluate_with_a_relative_data_root_lands_the_run_in_the_warehouse(tmp_path, monkeypatch):
    """``EVENTATLAS_DATA=data`` (relative): the evaluate run's record points at its files once, so the run
    is published (the relative root used to be joined twice: <root>/runs/<id>/<root>/runs/<id>/...)."""
    from eventatlas.cli import app
    from eventatlas.data.ingest import ingest
    from eventatlas.store.warehouse import Warehouse

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVENTATLAS_DATA", "data")
    monkeypatch.setenv("EVENTATLAS_WAREHOUSE", "wh.duckdb")
    monkeypatch.setenv("EVENTATLAS_PREFECT", "never")
    ingest("maven", MAVEN, dataset="m")
    texts = pq.read_table(config.datasets_dir() / "m" / "mentions.parquet", columns=["sentence"]).column(0)
    src = tiny_bert(tmp_path, texts.to_pylist(), layers=4)  # window4 needs 4 layers
    rid = "swcc-x-s0-abcd1234-20260101T000000"
    _saved(Path("data") / "runs" / rid, encoder_src=src)  # (a relative run directory too)
    r = CliRunner().invoke(app, ["evaluate", f"run:{rid}", "--on", "m", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    _, rows = Warehouse(tmp_path / "wh.duckdb").query_rows(
        "SELECT r.run_id, r.status, count(m.run_id) FROM runs r JOIN metrics m USING (run_id) "
        "WHERE r.task = 'evaluate' GROUP BY ALL")
    ((run_id, status, n),) = rows
    assert status == "completed" and n > 0 and run_id.startswith("eval-swcc-m-s0-")
    rec = json.loads((tmp_path / "data" / "runs" / run_id / "run.json").read_text())
    assert rec["metrics_path"] == str(tmp_path / "data" / "runs" / run_id / "metrics.parquet")
    # the command says what it scored: a headline line per task, a value of the run's own metric rows
    from eventatlas.metric_specs import scale

    heads = [ln for ln in r.output.splitlines() if " on m: " in ln]
    assert heads, r.output
    scored = pq.read_table(rec["metrics_path"]).to_pylist()
    for ln in heads:
        task, rest = ln.split(" on m: ")
        metric, value = rest.split(" ")[:2]
        assert any(x["task"] == task and x["metric"] == metric and abs(x["value"] * scale(metric) - float(value)) <= 0.05
                   for x in scored), (ln, task, metric)


# ----------------------------------------------------------------------------- run: references are names
def test_run_references_take_no_wildcards_or_path_parts(tmp_path, eventatlas_env, monkeypatch):
    import typer

    from eventatlas.cli import app
    from eventatlas.cli.atlas import _inventory_args

    rid = "swcc-x-s0-abcd1234-20260101T000007"
    _saved(config.runs_dir() / rid)
    assert resolve_ref(f"run:{rid[:12]}").card.run_id == rid  # a prefix still names it
    for ref, why in (("*7", "holds '*'"), ("swcc-x?s0", "holds '?'"), ("[s]wcc", "holds '[]'"),
                     (f"../runs/{rid}", "path separator"), ("..", "holds '..'"), ("swcc:*:latest", "holds '*'")):
        with pytest.raises(ModelError, match=rf"^{re.escape(f'run:{ref}: ')}.*{re.escape(why)}"):
            resolve_ref(f"run:{ref}")
    r = CliRunner().invoke(app, ["evaluate", "run:*7", "--on", "m"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert "holds '*'" in r.output and "wildcards" in r.output
    # the atlas's run:<id>/<rep>/<algo> names a run by id: '..' (a directory) is not one
    monkeypatch.chdir(config.runs_dir())
    with pytest.raises(typer.Exit) as ei:
        _inventory_args("run:../x/y")
    assert ei.value.exit_code == 2


def test_cli_run_dir_refuses_patterns_in_one_line(eventatlas_env, capsys):
    import typer

    from eventatlas.cli.base import run_dir

    (config.runs_dir() / "r-1").mkdir(parents=True)
    assert run_dir("r-1") == config.runs_dir() / "r-1"
    for bad in ("r-?", "r-[1]", "*"):
        with pytest.raises(typer.Exit) as ei:
            run_dir(bad)
        assert ei.value.exit_code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"run {bad!r}: holds" in err and "wildcards" in err


# ----------------------------------------------------------------------------- pickles never run
class _Payload:
    """Unpickling this calls open(path, "w"): what a crafted checkpoint would run."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_every_torch_load_passes_weights_only_true():
    calls = []
    for base in ("eventatlas", "scripts", "tasks", "flows", "tests"):
        for f in sorted((ROOT / base).rglob("*.py")):
            if f == Path(__file__).resolve():  # the payload test below loads the old default way on purpose
                continue
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.load":
                    kw = {k.arg: ast.unparse(k.value) for k in node.keywords}
                    calls.append((f"{f.relative_to(ROOT)}:{node.lineno}", kw.get("weights_only")))
    assert len(calls) >= 6
    assert [c for c in calls if c[1] != "True"] == []


def test_a_pickled_payload_in_a_checkpoint_is_refused_not_run(tmp_path, monkeypatch):
    """As on a torch whose default still unpickles anything (TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD emulates it)."""
    from eventatlas.induction.protocol import save_chosen

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "ran"
    (tmp_path / "models").mkdir()
    torch.save({"w": torch.zeros(1), "x": _Payload(marker)}, tmp_path / "models" / "epoch_00.pt")
    with pytest.raises(pickle.UnpicklingError, match="weights_only"):
        save_chosen(None, torch.nn.Linear(1, 1), tmp_path, "trigger", 0, None)
    assert not marker.exists()
    torch.load(tmp_path / "models" / "epoch_00.pt")["x"].close()  # loaded the old default way, it runs
    assert marker.exists()


# ----------------------------------------------------------------------------- parts stay inside the model
@pytest.fixture
def model(tmp_path, eventatlas_env) -> Path:
    return _saved(config.runs_dir() / "swcc-x-s0-abcd1234-20260101T000000", encoder_src=tiny_bert(tmp_path, TEXTS))


def _edit_card(model: Path, **changes) -> None:
    card = json.loads((model / CARD_NAME).read_text())
    card.update(changes)
    (model / CARD_NAME).write_text(json.dumps(card))


def test_a_saved_model_loads_from_its_own_directory(model):
    m = resolve_ref(f"run:{model.parent.name}")
    assert m.encoder_path == model / "encoder" and (m.encoder_path / "model.safetensors").is_file()


def test_latest_reference_searches_the_runs_directory_it_is_given(tmp_path, eventatlas_env):
    """``run:<method>:<dataset>:latest`` under another runs directory (``runs_dir=``) finds the model there
    and nowhere else: the data root's own runs directory holds none."""
    other = tmp_path / "other_runs"
    m = _saved(other / "swcc-x-s0-abcd1234-20260101T000000")
    card = json.loads((m / CARD_NAME).read_text())
    ref = f"run:swcc:{card['trained_on']}:latest"
    assert resolve_ref(ref, runs_dir=other).path == m
    with pytest.raises(ModelError, match=f"no saved swcc model trained on .* under {re.escape(str(config.runs_dir()))}"):
        resolve_ref(ref)


def test_a_card_naming_a_path_outside_the_model_is_refused(model, tmp_path):
    elsewhere = tmp_path / "tiny_bert"  # a real encoder directory outside the data root
    for changes, why in (({"encoders": {"encoder": str(elsewhere)}}, r"encoder 'encoder' is the absolute path"),
                         ({"encoders": {"encoder": "../../../../tiny_bert"}},
                          r"encoder 'encoder' \(.*\) leaves it through '\.\.', outside the model directory"),
                         # a loader that expands "~" would leave the model for the user's home
                         ({"encoders": {"encoder": "~/tiny_bert"}}, r"encoder 'encoder' is the absolute path '~/tiny_bert'"),
                         ({"heads": {"proxies": {"kind": "arcface", "file": "/etc/passwd"}}},
                          r"head 'proxies' is the absolute path '/etc/passwd'")):
        backup = (model / CARD_NAME).read_text()
        _edit_card(model, **changes)
        with pytest.raises(ModelError, match=f"^{re.escape(str(model / CARD_NAME))}: {why}") as ei:
            resolve_ref(f"run:{model.parent.name}")
        assert "\n" not in str(ei.value)
        (model / CARD_NAME).write_text(backup)
    assert resolve_ref(f"run:{model.parent.name}").card.encoders == {"encoder": "encoder"}


def test_symlinks_out_of_the_model_are_refused(model, tmp_path):
    import shutil

    run = model.parent
    ref = f"run:{run.name}"
    # the model folder itself a link to a model elsewhere
    outside = tmp_path / "outside_model"
    shutil.move(model, outside)
    model.symlink_to(outside, target_is_directory=True)
    with pytest.raises(ModelError, match="the model directory is a link to .*outside its run directory"):
        resolve_ref(ref)
    model.unlink()
    shutil.move(outside, model)
    resolve_ref(ref)
    # the encoder folder a link out of the model
    shutil.move(model / "encoder", tmp_path / "enc")
    (model / "encoder").symlink_to(tmp_path / "enc", target_is_directory=True)
    with pytest.raises(ModelError, match=r"encoder 'encoder' \(.*\) is a link to .*outside the model directory"):
        resolve_ref(ref)
    (model / "encoder").unlink()
    shutil.move(tmp_path / "enc", model / "encoder")
    # one weights file of the encoder a link out
    weights = model / "encoder" / "model.safetensors"
    weights.rename(tmp_path / "w.safetensors")
    weights.symlink_to(tmp_path / "w.safetensors")
    with pytest.raises(ModelError, match=r"model\.safetensors\) is a link to"):
        resolve_ref(ref)
    # listed models skip it rather than load it
    from eventatlas.modeling.saved import saved_models

    assert [m.card.run_id for m in saved_models()] == []
    os.unlink(weights)
