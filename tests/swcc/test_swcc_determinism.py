"""SWCC reproducibility on tiny data: one configuration gives the same losses, weights and scores in two
processes whatever their hash seed (PYTHONHASHSEED), and the configured thread count holds for the
scoring around the training loop too."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from eventatlas.config import samples_dir

TUPLES = samples_dir() / "event_tuples" / "tuples_sample.txt"
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import hashlib, json, sys
import torch
from eventatlas.data.ingest import ingest
from eventatlas.config import samples_dir
from eventatlas.run.runner import run_method
root, model = sys.argv[1], sys.argv[2]
d = ingest("event_tuples", samples_dir() / "event_tuples" / "tuples_sample.txt", out_dir=root + "/data/datasets/t",
           dataset="t")
ingest("hard_similarity", samples_dir() / "event_similarity" / "hard_similarity" / "hard_quadruples_sample.txt",
       out_dir=root + "/data/datasets/h", dataset="h")
params = {"model_id": model, "max_length": 16, "n_prototypes": 3, "plot_events": 20, "eval_datasets": ["h"],
          "train": {"epochs": 1, "batch_size": 8, "threads": 1, "lr": 1e-3}}
path = run_method("swcc", root + "/data/datasets/t", seed=0, params=params, device="cpu")
rec = json.loads(path.read_text())
summary = json.loads((path.parent / "swcc_summary.json").read_text())
import pyarrow.parquet as pq
m = pq.read_table(rec["metrics_path"]).to_pylist() if rec.get("metrics_path") else []
weights = sorted(hashlib.sha256(f.read_bytes()).hexdigest() for f in path.parent.rglob("*.safetensors"))
timing = ("seconds", "per_s")  # wall times differ run to run; everything else must not
history = [{k: v for k, v in row.items() if not any(t in k for t in timing)} for row in summary["history"]]
print(json.dumps({"status": rec["run"]["status"], "history": history, "weights": weights,
                  "before": summary["before_training"],
                  "metrics": sorted((r["dataset"], r["metric"], r["value"]) for r in m)}))
"""


@pytest.fixture
def tiny_model(tmp_path):
    from support.tiny_models import tiny_bert

    return tiny_bert(tmp_path, TUPLES.read_text().replace("_NULL_", "").split("\n") + ["military launch program"],
                     hidden=32, layers=1)


def _run(tmp: Path, model: Path, hashseed: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": hashseed, "EVENTATLAS_DATA": str(tmp / "data"),
           "EVENTATLAS_WAREHOUSE": str(tmp / "w.duckdb"), "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp), str(model)], env=env, capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # two fresh processes (about a minute on a loaded 2-core machine)
def test_same_configuration_same_numbers_under_any_hash_seed(tmp_path, tiny_model):
    a = _run(tmp_path / "a", tiny_model, "1")
    b = _run(tmp_path / "b", tiny_model, "2")
    assert a["status"] == "completed" and a["metrics"] and a["weights"], a
    assert len(a["history"]) == 1 and a["history"][0]["loss"] > 0  # one epoch's row
    assert a == b  # bit-identical losses, saved weights and scores


def test_scoring_holds_the_configured_thread_count(monkeypatch):
    import torch

    from eventatlas.methods import swcc

    seen = []
    monkeypatch.setattr(swcc, "train_and_score", lambda ctx, result: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    ctx = SimpleNamespace(config=SimpleNamespace(train=SimpleNamespace(threads=1)), result=lambda: "result")
    assert swcc.run(ctx) == "result"
    assert seen == [1] and torch.get_num_threads() == before  # pinned for the whole run, then given back
