"""`train-all --runner ray[:N] | ray:ADDRESS` through prefect-ray (the optional extra `[ray]`): the
runner string, the one-line refusal without the extra, and a real local Ray cluster whose grid equals
a local run (skipped when prefect-ray is not installed: CI does not install the 79 MB ray wheel)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas.run.scaleout import RAY_MISSING, RunnerSpec, parse_runner

HAVE_RAY = importlib.util.find_spec("prefect_ray") is not None


@pytest.mark.parametrize("text, spec", [
    ("ray", RunnerSpec("ray")),
    ("ray:3", RunnerSpec("ray", 3)),
    ("ray:auto", RunnerSpec("ray", address="auto")),
    ("ray:ray://10.0.0.5:10001", RunnerSpec("ray", address="ray://10.0.0.5:10001")),
    ("ray:head.example:6379", RunnerSpec("ray", address="head.example:6379")),
])
def test_parse_ray_runner(text, spec):
    assert parse_runner(text, check_installed=False) == spec


@pytest.mark.parametrize("text", ["ray:0", "ray:-2", "ray:ray://host", "ray:host:99999", "ray:tcp://h:1"])
def test_bad_ray_runner_refused(text):
    with pytest.raises(ValueError, match="bad runner"):
        parse_runner(text, check_installed=False)


def test_ray_refused_in_one_line_without_the_extra(monkeypatch, eventatlas_env):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "prefect_ray" else real(name, *a))
    with pytest.raises(ValueError, match=r"needs prefect-ray and ray.*pip install -e '\.\[ray\]'"):
        parse_runner("ray")
    from eventatlas.cli import app

    r = CliRunner().invoke(app, ["train-all", "--runner", "ray:2"])
    assert r.exit_code == 2 and r.output.strip().splitlines() == [f"error: {RAY_MISSING}"], r.output


@pytest.mark.skipif(not HAVE_RAY, reason="prefect-ray is not installed (optional extra: pip install -e '.[ray]')")
@pytest.mark.timeout(600)
def test_train_all_on_a_local_ray_cluster_equals_a_local_run(tmp_path, monkeypatch):
    import psutil
    import ray
    from prefect.testing.utilities import prefect_test_harness

    from test_flows import build_tiny_bert
    from test_scaleout import _metric_rows, _run_ids, _runs_of

    for k, v in {"EVENTATLAS_DATA": tmp_path / "data", "EVENTATLAS_WAREHOUSE": tmp_path / "wh.duckdb",
                 "PREFECT_HOME": tmp_path / "prefect"}.items():
        monkeypatch.setenv(k, str(v))
    from eventatlas.data.ingest import ingest_samples

    (man,) = ingest_samples(names=["ontoevent"])
    texts = pq.read_table(Path(man["path"]) / "mentions.parquet", columns=["sentence"])["sentence"].to_pylist()
    model = build_tiny_bert(tmp_path / "tiny-bert", texts)
    params = {"untuned": {"model_id": str(model), "representations": ["trigger", "mask"], "k_seen": 0,
                          "encoder": {"batch_size": 8, "precision": "fp32"}}}
    from flows.train_all import train_all

    inits: list[dict] = []
    real_init = ray.init
    monkeypatch.setattr(ray, "init", lambda *a, **kw: inits.append(kw) or real_init(*a, **kw))
    seeds = [0, 1]
    with prefect_test_harness(server_startup_timeout=180):
        local = train_all(datasets=[man["dataset"]], seeds=seeds, params=params)
        on_ray = train_all(datasets=[man["dataset"]], seeds=seeds, params=params, runner="ray:2")
    assert [kw.get("num_cpus") for kw in inits] == [2]  # one temporary cluster of 2 CPUs (= 2 cells at a time)
    assert on_ray["runner"] == "ray:2" and not on_ray["failed"] and not local["failed"]
    runs = _runs_of(_run_ids(on_ray))
    assert len(runs) == len(set(runs.run_id)) == 2 and set(runs.status) == {"completed"}
    assert set(_run_ids(on_ray)).isdisjoint(_run_ids(local))
    rows = _metric_rows(_run_ids(on_ray))
    assert rows and rows == _metric_rows(_run_ids(local))  # identical metrics, no duplicate rows
    # the temporary Ray cluster was torn down with the flow: no raylet / GCS left under this process
    assert not ray.is_initialized()
    left = [p.name() for p in psutil.Process().children(recursive=True) if "ray" in p.name().lower()
            or "gcs_server" in p.name()]
    assert left == [], left
