"""The publish path: run records (core, eventatlas.tracking.records) landed by the `publish` flow / task,
training logs included, PNG plots attached to the Prefect run, `eventatlas publish` on records written
outside a flow, and `eventatlas ensemble` publishing the ensemble of finished runs."""
from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventatlas.store.warehouse import Warehouse
from eventatlas.tracking.records import (
    RecordError,
    find_records,
    finish_record,
    new_record,
    read_record,
    write_metrics,
    write_record,
)
from eventatlas.tracking.tables import TRAIN_EVALS_SCHEMA, TRAIN_STEPS_SCHEMA, TableError


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from prefect.testing.utilities import prefect_test_harness

    root = tmp_path_factory.mktemp("publish")
    saved = {k: os.environ.get(k) for k in ("EVENTATLAS_DATA", "EVENTATLAS_WAREHOUSE", "PREFECT_HOME")}
    os.environ.update(EVENTATLAS_DATA=str(root / "data"), EVENTATLAS_WAREHOUSE=str(root / "wh.duckdb"),
                      PREFECT_HOME=str(root / "prefect"))
    try:
        with prefect_test_harness(server_startup_timeout=120):
            yield root
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _png(path: Path, size: tuple[int, int]) -> Path:
    from PIL import Image, ImageDraw

    im = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(im)
    for i in range(0, size[0], 40):
        d.ellipse([i, i % size[1], i + 30, i % size[1] + 30], fill=(i % 255, 80, 160))
    path.parent.mkdir(parents=True, exist_ok=True)
    im.save(path)
    return path


def _row(metric, value, seed=0, **kw):
    return {"task": "induction", "dataset": "onto", "split": "unseen", "method": "ba", "representation": "trigger",
            "clustering": "agglomerative", "variant": "attn_dot", "metric": metric, "value": value, "seed": seed, **kw}


def _trained_record(run_dir: Path, run_id: str, seed: int) -> Path:
    """What a trained method's run leaves: metrics, training logs under relative paths, a plot."""
    rec = new_record(run_id, flow="test", task="train", method="ba", params={"dataset": "onto"}, seed=seed)
    write_metrics(rec, [_row("ari", 0.5 + seed / 10, seed), _row("naming_mrr", 0.25, seed, task="naming",
                                                                 clustering=None, variant="perfect")], run_dir)
    pq.write_table(pa.Table.from_pylist([{"step": s, "epoch": s // 2, "loss": 1.0 / (s + 1), "lr": 1e-4,
                                          "examples_per_s": 40.0, "tokens_per_s": 800.0, "padding_fraction": 0.2,
                                          "terms": {"contrastive": 0.8 / (s + 1)}} for s in range(4)],
                                        schema=TRAIN_STEPS_SCHEMA), run_dir / "train_steps.parquet")
    pq.write_table(pa.Table.from_pylist([{"step": 3, "epoch": 1, "metric": "silhouette", "value": 0.3}],
                                        schema=TRAIN_EVALS_SCHEMA), run_dir / "train_evals.parquet")
    rec["train_steps_path"] = "train_steps.parquet"  # relative: resolved against the record's directory
    rec["train_evals_path"] = "train_evals.parquet"
    rec["artifacts"] += [
        {"kind": "plot/umap/trigger", "path": str(_png(run_dir / "umap.png", (1600, 1000)))},
        {"kind": "plot/loss", "path": str(run_dir / "gone.png")},  # missing: warned about, not fatal
        {"kind": "umap/trigger", "path": str(_png(run_dir / "other.png", (20, 20)))},  # not a plot/ kind
    ]
    return write_record(run_dir, finish_record(rec))


def test_records_roundtrip_and_find(tmp_path):
    a = _trained_record(tmp_path / "runs" / "a", "ra", 0)
    b = _trained_record(tmp_path / "runs" / "deep" / "b", "rb", 1)
    rec = read_record(a)
    assert rec["run"]["run_id"] == "ra" and rec["run"]["status"] == "completed" and rec["run"]["finished_at"]
    assert rec["train_steps_path"] == str(tmp_path / "runs" / "a" / "train_steps.parquet")
    assert [x["kind"] for x in rec["artifacts"]] == ["metrics", "plot/umap/trigger", "plot/loss", "umap/trigger"]
    # a run.json, its directory, a tree searched recursively; each at most once
    assert find_records([a]) == [a.resolve()]
    assert find_records([a.parent, tmp_path / "runs"]) == [a.resolve(), b.resolve()]
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordError, match="empty: no run.json under this directory"):
        find_records([tmp_path / "runs" / "a", tmp_path / "empty"])
    with pytest.raises(RecordError, match="nope: no such file or directory"):
        find_records([tmp_path / "nope"])
    (tmp_path / "bad.json").write_text('{"metrics_path": null}')
    with pytest.raises(RecordError, match="bad.json: not a run record"):
        read_record(tmp_path / "bad.json")
    # a method's rows without a task never reach disk
    with pytest.raises(TableError, match="'task' is required"):
        write_metrics(new_record("rc", flow="t", task="train"), [{"dataset": "d", "metric": "ari", "value": 1}],
                      tmp_path / "c")


def test_publish_flow_lands_logs_and_attaches_plots(env):
    from prefect.client.orchestration import get_client
    from PIL import Image

    from flows.publish import publish

    runs = env / "data" / "runs"
    _trained_record(runs / "seed0", "ba-onto-s0", 0)
    _trained_record(runs / "nested" / "seed1", "ba-onto-s1", 1)
    out = publish([str(runs)])
    assert sorted(out["published"]) == ["ba-onto-s0", "ba-onto-s1"] and out["metric_rows"] == 4
    wh = Warehouse()
    lc = wh.query("SELECT run_id, dataset, seed, count(*) AS n, max(terms['contrastive']) AS c FROM learning_curves "
                  "GROUP BY ALL ORDER BY run_id")
    assert lc.values.tolist() == [["ba-onto-s0", "onto", 0, 4, 0.8], ["ba-onto-s1", "onto", 1, 4, 0.8]]
    assert wh.query("SELECT count(*) AS n FROM train_evals").n[0] == 2
    lb = wh.query("SELECT task, variant, best, n_seeds FROM leaderboard ORDER BY task")
    assert lb.values.tolist() == [["induction", "attn_dot", 0.6, 2], ["naming", "perfect", 0.25, 2]]
    # publishing the same records again replaces rows (no duplicates in any table)
    publish([str(runs)])
    n = wh.query("SELECT (SELECT count(*) FROM metrics) AS m, (SELECT count(*) FROM train_steps) AS s, "
                 "(SELECT count(*) FROM artifacts) AS a, (SELECT count(*) FROM runs) AS r").iloc[0].to_dict()
    assert n == {"m": 4, "s": 8, "a": 8, "r": 2}

    async def artifacts():
        async with get_client() as c:
            return await c.read_artifacts()

    arts = [a for a in asyncio.run(artifacts()) if a.key and a.key.startswith("plot-")]
    keys = {a.key for a in arts}
    # one markdown artifact per plot/ PNG that exists; the missing one and the non-plot kind are not attached
    assert keys == {"plot-umap-trigger-ba-onto-seed0", "plot-umap-trigger-ba-onto-seed1"}
    assert sorted(out["plots"]) == ["plot-umap-trigger-ba-onto-seed0", "plot-umap-trigger-ba-onto-seed1"]
    md = next(a for a in arts if a.key == "plot-umap-trigger-ba-onto-seed0")
    assert md.type == "markdown" and str(runs / "seed0" / "umap.png") in md.data
    uri = md.data.split("](data:image/png;base64,", 1)[1].split(")", 1)[0]
    im = Image.open(io.BytesIO(base64.b64decode(uri)))
    assert im.format == "PNG" and im.size == (800, 500)  # downscaled, aspect kept


def test_publish_flow_refuses_bad_rows_with_a_clear_error(env, tmp_path):
    from flows.publish import publish

    run_dir = tmp_path / "old"
    rec = new_record("bad-task", flow="test", task="train", method="ba")
    run_dir.mkdir()
    pq.write_table(pa.table({"task": ["clustering"], "dataset": ["onto"], "metric": ["ari"], "value": [0.1]}),
                   run_dir / "metrics.parquet")
    rec["metrics_path"] = "metrics.parquet"
    write_record(run_dir, finish_record(rec))
    from eventatlas.store.publishing import PublishRejected

    with pytest.raises(PublishRejected, match=rf"{run_dir / 'run.json'}: metric row 0: unknown task 'clustering'"):
        publish([str(run_dir)])  # named with its file; the rest of a batch would have landed
    assert Warehouse().query("SELECT count(*) AS n FROM runs WHERE run_id = 'bad-task'").n[0] == 0


@pytest.mark.timeout(900)
def test_ensemble_of_finished_runs_is_a_published_run(tmp_path, monkeypatch):
    """Two seeds trained by `eventatlas train`'s core (records only), then `eventatlas ensemble RUN RUN` (the
    real console command, in a subprocess) writes the ensemble's record and lands it through the publish path."""
    from support.mini_events import mini_tiny_bert, write_mini_events

    from eventatlas.run.runner import run_method

    monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("EVENTATLAS_CACHE", str(tmp_path / "cache"))
    wh_path = tmp_path / "wh.duckdb"
    ddir = write_mini_events(tmp_path / "data")
    model = mini_tiny_bert(tmp_path)
    params = {"model_id": str(model), "k_seen": 2, "linking": False, "stop_window": 2, "umap_plot": False,
              "representations": ["trigger"], "augmentation": "token_perturb",
              "train": {"epochs": 2, "batch_size": 8, "precision": "fp32", "threads": 1}}
    runs = [run_method("batch_attention", ddir, seed=seed, params=params, device="cpu", flow="cli-train")
            for seed in (0, 1)]
    ids = [read_record(p)["run"]["run_id"] for p in runs]
    assert not wh_path.exists()  # records only

    env = {**os.environ, "EVENTATLAS_DATA": str(tmp_path / "data"), "EVENTATLAS_WAREHOUSE": str(wh_path),
           "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    r = subprocess.run([sys.executable, "-m", "eventatlas.cli", "ensemble", *ids], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "published 1 run records (1 completed" in " ".join(r.stdout.split())
    wh = Warehouse(wh_path)
    (run_id, flow, seed, params_json), = wh.query_rows("SELECT run_id, flow, seed, params FROM runs")[1]
    assert flow == "ensemble" and seed == -1
    assert [m["run_id"] for m in json.loads(params_json)["members"]] == ids
    df = wh.query("SELECT * FROM metrics")
    assert set(df.run_id) == {run_id} and set(df.seed) == {-1} and set(df.task) == {"induction"}
    assert set(df.variant) == {"ensemble2:attn_dot", "ensemble2:attn_dot_neg", "ensemble2:attn_cos",
                               "ensemble2:ft", "ensemble2:attn_dot_norm"}
    assert set(df.clustering.dropna()) <= {"agglomerative", "manifold", "manifold_sym", "affinity"}
    # the members trained in fp32: the ensemble's leaderboard rows carry that precision
    assert {r[0] for r in wh.query_rows("SELECT DISTINCT precision FROM leaderboard")[1]} == {"fp32"}

    # runs of other methods are refused in one line, exit 2, nothing written
    other = tmp_path / "data" / "runs" / "other"
    write_record(other, finish_record(new_record("other", flow="cli-train", task="train", method="untuned")))
    r = subprocess.run([sys.executable, "-m", "eventatlas.cli", "ensemble", ids[0], "other"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "an ensemble takes completed batch_attention runs" in r.stderr, r.stderr
    assert len(wh.query_rows("SELECT run_id FROM runs")[1]) == 1

    # bad input: one clear line, exit 2 (bad input), before anything starts
    r = subprocess.run([sys.executable, "-m", "eventatlas.cli", "publish", str(tmp_path / "nothing-here")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "nothing-here: no such file or directory" in r.stderr  # errors go to stderr
