"""``grounding`` end to end: a tiny train-all on the wiki fixture world's build, published to the
warehouse, then ``eventatlas ground`` on the run, with its one-line errors."""
from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas.metric_specs import is_fraction


runner = CliRunner()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from prefect.testing.utilities import prefect_test_harness

    from eventatlas import config
    from eventatlas.wiki.build import build
    from support.tiny_models import tiny_bert
    from support.wiki_world.world import LANGS, WORLD_PARAMS, build_world

    root = tmp_path_factory.mktemp("grounding_flow")
    env = dict(EVENTATLAS_DATA=str(root / "data"), EVENTATLAS_WAREHOUSE=str(root / "wh.duckdb"),
               PREFECT_HOME=str(root / "prefect"), EVENTATLAS_CACHE=str(root / "cache"))
    with mock.patch.dict(os.environ, env):  # restored when the module's tests are done
        ds = config.datasets_dir() / "wikigrounding"
        build(build_world().backend(), ds, languages=LANGS, params=WORLD_PARAMS, build_id="b1")
        texts = pq.read_table(ds / "mentions.parquet")["sentence"].to_pylist()
        texts += [f"{r['name']} {r['definition']}" for r in pq.read_table(ds / "event_types.parquet").to_pylist()]
        model = tiny_bert(root, texts)
        with prefect_test_harness(server_startup_timeout=120):
            yield {"root": root, "model": str(model), "dataset": ds}


@pytest.mark.slow  # ~60-90 s: Prefect harness + wiki world build + 3 tiny trainings
def test_train_all_grounding_then_ground(world):
    from eventatlas.cli import app
    from eventatlas.data import Manifest
    from eventatlas.store.warehouse import Warehouse
    from flows.train_all import train_all

    assert "grounding" in Manifest.read(world["dataset"]).kinds()
    params = {"grounding": {"model_id": world["model"], "variants": ["untuned", "multilabel", "hp"], "cross_encoder": True,
                            "cross_k": 4, "train": {"epochs": 1, "batch_size": 8}, "hp": {"epochs": 1}}}
    out = train_all(datasets=["wikigrounding"], methods=["grounding"], params=params)
    assert out["runs"] == 1 and not out["failed"]
    wh = Warehouse()
    runs = wh.query("SELECT run_id, status FROM runs WHERE method = 'grounding'")
    assert list(runs.status) == ["completed"]
    m = wh.query("SELECT variant, split, metric, value FROM metrics WHERE task = 'grounding'")
    got = {(r.variant, r.split, r.metric) for r in m.itertuples()}
    assert {("multilabel", "test", "recall_at_min"), ("hp", "dev", "recall@8"), ("untuned", "test", "recall@1")} <= got
    assert any(v.startswith("cross:") and metric == "strict_acc" for v, _, metric in got)
    assert m[m.metric.map(is_fraction)].value.between(0, 1).all()
    steps = wh.query("SELECT DISTINCT phase FROM train_steps")
    assert {"multilabel", "hp/hp"} <= set(steps.phase)
    run_id = runs.run_id[0]
    # the saved model: the dev-chosen bi-encoder and the cross-encoder, their weights linked to the run's
    # own copies (one copy on disk), with the candidate vectors and the tuned threshold
    from eventatlas.modeling.saved import resolve_ref

    saved = resolve_ref(f"run:{run_id}")
    chosen = saved.card.inference["bi_encoder"]
    assert set(saved.card.encoders) == {"biencoder", "cross"} and saved.card.encoder == "biencoder"
    assert saved.card.heads["cross_head"].config["tau_c"] == saved.card.inference["tau_c"]
    run_dir = saved.path.parent
    assert (saved.encoder_path / "model.safetensors").samefile(run_dir / chosen / "model" / "model.safetensors")
    assert saved.head("candidates")[0]["vectors"].shape[0] == saved.card.heads["candidates"].config["n"]

    mention = pq.read_table(world["dataset"] / "mentions.parquet").to_pylist()[0]
    s, a, b = mention["sentence"], mention["trigger_start"], mention["trigger_end"]
    text = f"{s[:a]}[{s[a:b]}]{s[b:]}"
    r = runner.invoke(app, ["ground", "--dataset", "wikigrounding", "--run", run_id, "--text", text])
    assert r.exit_code == 0, r.output
    assert "predicted" in r.output and "tau_c" in r.output
    r = runner.invoke(app, ["ground", "--dataset", "wikigrounding", "--run", run_id, "--text", text, "--variant", "untuned"])
    assert r.exit_code == 0 and "untuned, top 8" in " ".join(r.output.split())

    # bad input: one line each
    for args, msg in ((["--text", "no marked mention here"], "no trigger marked"),
                      (["--run", "grounding-nope", "--text", text], "unknown run 'grounding-nope'")):
        full = ["ground", "--dataset", "wikigrounding", "--run", run_id, *args]
        r = runner.invoke(app, full)
        assert r.exit_code == 2 and msg in r.output and len(r.output.strip().splitlines()) == 1, r.output
    empty = world["root"] / "data" / "datasets" / "nocands"
    empty.mkdir(parents=True)
    (empty / "manifest.json").write_text('{"dataset": "nocands"}')
    r = runner.invoke(app, ["ground", "--dataset", "nocands", "--run", run_id, "--text", text])
    assert r.exit_code == 2 and "has no candidates" in r.output and len(r.output.strip().splitlines()) == 1, r.output
