"""Saved models: the on-disk format, naming (run:<ref>), loading with plain transformers and
sentence-transformers, refusals, and the warehouse's models table."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from eventatlas.modeling.mention_encoder import MentionEncoder
from eventatlas.modeling.saved import (ModelError, ModelWriter, finalize, headline_metrics, resolve_ref,
                                       saved_models)
from support.tiny_models import tiny_bert

TEXTS = ["Troops attacked the town at dawn .", "The company acquired a rival firm .", "Rebels attacked a convoy ."]


def _run(run_dir: Path, run_id: str, method: str = "frame_dml", dataset: str = "fnsample", rows=None) -> dict:
    run = {"run_id": run_id, "method": method, "params": {"config": {"lr": 1e-5, "precision": "fp32"}},
           "code_version": "abc123", "data_fingerprints": {dataset: "fp-" + dataset}, "seed": 7}
    return finalize(run_dir, run, rows or [])


@pytest.fixture
def saved(tmp_path, eventatlas_env):
    from eventatlas import config

    model_dir = tiny_bert(tmp_path, TEXTS)
    enc = MentionEncoder(model_dir, max_length=32)
    with torch.no_grad():  # a "trained" encoder: weights that differ from the base model's
        enc.model.embeddings.word_embeddings.weight.mul_(1.5)
    run_dir = config.runs_dir() / "frame_dml-fnsample-s7-abcd1234-20261125T000000"
    w = ModelWriter(run_dir, method="frame_dml")
    w.encoder(enc, base_model="tiny")
    w.head("proxies", {"weight": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, kind="arcface",
           config={"margin": 0.5, "scale": 30.0})
    w.close(representation="trigger", epoch=2)
    cell = {"task": "induction", "dataset": "fnsample", "split": "test", "representation": "trigger"}
    rows = [{**cell, "clustering": "agglomerative", "metric": "bcubed_f", "value": 0.5},
            {**cell, "clustering": "agglomerative", "metric": "ari", "value": 0.3},
            {**cell, "clustering": "agglomerative", "metric": "nmi", "value": 0.6},
            {**cell, "clustering": "agglomerative", "metric": "purity_f", "value": 0.55},
            {**cell, "clustering": "agglomerative", "metric": "n_clusters", "value": 4},
            {**cell, "clustering": "kmeans", "metric": "ari", "value": 0.2},
            {**cell, "clustering": "kmeans", "metric": "nmi", "value": 0.7},
            {**cell, "clustering": "kmeans", "metric": "bcubed_f", "value": 0.4},
            {"task": "induction", "split": "dev", "representation": "trigger", "metric": "bcubed_f", "value": 0.9}]
    entry = _run(run_dir, run_dir.name, rows=rows)
    return enc, run_dir, entry


def test_round_trip_card_and_parts(saved):
    enc, run_dir, entry = saved
    assert not (run_dir / "model.partial").exists()
    m = resolve_ref(f"run:{run_dir.name}")
    c = m.card
    assert (c.method, c.trained_on, c.data_fingerprint, c.seed, c.code_version) == \
        ("frame_dml", "fnsample", "fp-fnsample", 7, "abc123")
    assert (c.representation, c.epoch, c.precision, c.base_model) == ("trigger", 2, "fp32", "tiny")
    assert c.metrics["induction/test/trigger/agglomerative/bcubed_f"] == 0.5  # test rows only, labelled
    assert not any("/dev/" in k for k in c.metrics)
    files = {(p.stat().st_dev, p.stat().st_ino): p.stat().st_size for p in m.path.rglob("*")
             if p.is_file() and p.name != "model_card.json"}  # the top-level hard links count once
    assert entry["size_bytes"] == c.size_bytes == sum(files.values())
    assert entry["parts"] == ["encoder", "proxies"]
    tensors, cfg = m.head("proxies")
    assert torch.equal(tensors["weight"], torch.arange(6, dtype=torch.float32).reshape(2, 3))
    assert cfg == {"margin": 0.5, "scale": 30.0}
    assert (m.encoder_path / "model.safetensors").is_file()
    assert "## Headline numbers" in (m.path / "README.md").read_text()


def test_saved_encoder_loads_with_transformers_and_sentence_transformers(saved):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    enc, run_dir, _ = saved
    path = resolve_ref(f"run:{run_dir.name}").encoder_path
    hf = AutoModel.from_pretrained(path)
    assert torch.equal(hf.embeddings.word_embeddings.weight, enc.model.embeddings.word_embeddings.weight)
    st = SentenceTransformer(str(path), device="cpu")
    got = st.encode(TEXTS[:2], convert_to_numpy=True)
    # sentence-transformers' mean pooling == eventatlas's `sentence` representation of the same model
    from eventatlas.modeling.encode import Encoder

    ours = Encoder(f"run:{run_dir.name}", device="cpu", precision="fp32", progress=False).encode_sentences(TEXTS[:2])
    np.testing.assert_allclose(got, ours, rtol=1e-4, atol=1e-5)


def test_run_ref_forms_and_refusals(saved, tmp_path):
    from eventatlas import config

    _, run_dir, _ = saved
    rid = run_dir.name
    assert resolve_ref(f"run:{rid[:20]}").card.run_id == rid  # unique prefix
    assert resolve_ref("run:frame_dml:fnsample:latest").card.run_id == rid
    assert resolve_ref(str(run_dir / "model")).card.run_id == rid  # a model directory
    with pytest.raises(ModelError, match="no saved model of a run 'nope'"):
        resolve_ref("run:nope")
    with pytest.raises(ModelError, match="no saved swcc model trained on 'fnsample'"):
        resolve_ref("run:swcc:fnsample:latest")
    with pytest.raises(ModelError, match="path separators"):
        resolve_ref("run:../etc")
    with pytest.raises(ModelError, match="no encoder 'sentence'"):
        resolve_ref(f"run:{rid}@sentence")
    (config.runs_dir() / "untuned-x-s0-1").mkdir()
    with pytest.raises(ModelError, match="saved no model"):
        resolve_ref("run:untuned-x-s0-1")
    # a second run sharing the prefix makes the short form ambiguous; newest first in the listing
    other = config.runs_dir() / (rid[:20] + "zz")
    w = ModelWriter(other, method="frame_dml")
    w.head("proxies", {"weight": torch.zeros(1)}, kind="arcface")
    w.close()
    _run(other, other.name)
    with pytest.raises(ModelError, match="ambiguous, 2 runs"):
        resolve_ref(f"run:{rid[:20]}")
    assert [m.card.run_id for m in saved_models()] == [other.name, rid]
    with pytest.raises(ModelError, match="saved no encoder"):
        resolve_ref(f"run:{other.name}").encoder_path


def test_encoder_option_takes_a_run_ref(saved):
    """Everywhere an encoder id is accepted, run:<id> resolves to the saved encoder (one resolver)."""
    from eventatlas.modeling.mention_encoder import model_name, resolve_model

    _, run_dir, _ = saved
    assert resolve_model(f"run:{run_dir.name[:12]}") == str(run_dir / "model" / "encoder")
    assert model_name(f"run:{run_dir.name[:12]}") == f"run:{run_dir.name}"  # recorded canonically
    with pytest.raises(ModelError):
        MentionEncoder("run:absent")


def test_a_killed_save_leaves_no_half_model(tmp_path):
    run_dir = tmp_path / "r1"
    w = ModelWriter(run_dir, method="swcc")
    w.head("prototypes", {"c": torch.ones(2, 2)}, kind="prototypes")
    # killed before close(): the partial directory has no card, finalize reports no model and cleans up
    assert _run(run_dir, "r1") is None
    assert not (run_dir / "model.partial").exists() and not (run_dir / "model").exists()
    # a retried run starts from an empty partial directory
    w = ModelWriter(run_dir, method="swcc")
    assert list(w.dir.iterdir()) == []


def test_head_names_and_card_fields_are_checked(tmp_path):
    w = ModelWriter(tmp_path / "r", method="swcc")
    with pytest.raises(ModelError, match="model part name"):
        w.head("../x", {"a": torch.zeros(1)}, kind="k")
    with pytest.raises(Exception, match="not_a_field|extra"):
        w.close(not_a_field=1)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model_card.json").write_text(json.dumps({"method": "x", "format_version": 99}))
    with pytest.raises(ModelError, match="newer than this eventatlas reads"):
        resolve_ref(str(bad))


def test_headline_metrics_by_hand():
    rows = [{"task": "similarity", "split": "test", "variant": "hard", "metric": "accuracy", "value": 0.6},
            {"task": "similarity", "split": "test", "variant": "hard", "metric": "accuracy", "value": 0.1},
            {"task": "similarity", "split": "dev", "metric": "spearman", "value": 0.7}]
    assert headline_metrics(rows) == {"similarity/test/hard/accuracy": 0.6}  # first value of a cell kept
    assert headline_metrics(rows[2:]) == {"similarity/dev/spearman": 0.7}  # no test rows: all rows


def test_publish_lands_the_model_row(saved, tmp_path):
    from eventatlas.store.publishing import publish_records
    from eventatlas.store.warehouse import Warehouse
    from eventatlas.tracking.records import finish_record, new_record, write_metrics, write_record

    _, run_dir, entry = saved
    rec = new_record(run_dir.name, flow="train-all", task="train", method="frame_dml", device="cpu",
                     data_fingerprints={"fnsample": "fp"}, seed=7)
    write_metrics(rec, [{"task": "induction", "dataset": "fnsample", "method": "frame_dml", "metric": "bcubed_f",
                         "value": 0.5, "seed": 7, "trained_on": "fnsample"}], run_dir)
    rec["model"] = entry
    write_record(run_dir, finish_record(rec))
    wh = Warehouse(tmp_path / "w.duckdb")
    wh.migrate()
    publish_records([run_dir / "run.json"], warehouse_path=wh.path)
    _, rows = wh.query_rows("SELECT run_id, method, trained_on, size_bytes, parts FROM models")
    assert rows == [(run_dir.name, "frame_dml", "fnsample", entry["size_bytes"], ["encoder", "proxies"])]
    _, rows = wh.query_rows("SELECT trained_on FROM leaderboard")
    assert rows == [("fnsample",)]
    publish_records([run_dir / "run.json"], warehouse_path=wh.path)  # re-publishing replaces, not adds
    assert wh.query_rows("SELECT count(*) FROM models")[1] == [(1,)]


def test_cli_models_and_evaluate_refusals(saved, monkeypatch):
    from typer.testing import CliRunner

    from eventatlas.cli import app
    from eventatlas.cli.base import console

    monkeypatch.setattr(console, "width", 300)  # one line per model

    _, run_dir, _ = saved
    runner = CliRunner()
    r = runner.invoke(app, ["models"])
    assert r.exit_code == 0, r.output
    assert f"run:{run_dir.name}" in r.output and "fnsample" in r.output and "encoder, proxies" in r.output
    r = runner.invoke(app, ["models", "--method", "swcc"], terminal_width=300)
    assert r.exit_code == 0 and "no saved models" in r.output
    r = runner.invoke(app, ["evaluate", "run:absent", "--on", "anything"], terminal_width=300)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "no saved model of a run 'absent'" in r.output
    r = runner.invoke(app, ["evaluate", run_dir.name[:14], "--on", "not_ingested"], terminal_width=300)
    assert r.exit_code == 2 and "dataset 'not_ingested' is not ingested" in r.output


def test_encoder_files_links_a_written_directory(tmp_path):
    """A run that already wrote an HF directory adds it without loading it again: same bytes, hard-linked,
    and the sentence-transformers files beside them."""
    from sentence_transformers import SentenceTransformer

    src = tiny_bert(tmp_path, TEXTS)
    w = ModelWriter(tmp_path / "run", method="grounding")
    d = w.encoder_files(src, max_length=32, name="biencoder", base_model="tiny")
    w.close()
    assert (d / "model.safetensors").samefile(src / "model.safetensors")
    assert (w.card.encoder, w.card.base_model) == ("biencoder", "tiny")
    st = SentenceTransformer(str(d), device="cpu")
    assert st.encode(TEXTS[:1]).shape == (1, 32)
    with pytest.raises(ModelError, match="not a Hugging Face model directory"):
        w.encoder_files(tmp_path, max_length=32, name="other")


def test_a_model_on_another_dataset_takes_that_datasets_protocol(tmp_path, eventatlas_env):
    """A batch_attention model trained on FrameNet verbs (lu_pos v, k_seen 100: FrameNet's registry protocol)
    applied to OntoEvent selects with OntoEvent's protocol (k_seen 10, every part of speech), not FrameNet's,
    which would select no mention; a value given with --params still wins, and the model's own (non-protocol)
    settings are kept."""
    from eventatlas import config
    from eventatlas.data.ingest import ingest
    from eventatlas.run.runner import _evaluation

    enc = MentionEncoder(tiny_bert(tmp_path, TEXTS), max_length=32)
    run_dir = config.runs_dir() / "batch_attention-framenet_sample-s0-abcd1234-20261125T000000"
    w = ModelWriter(run_dir, method="batch_attention")
    w.encoder(enc, base_model="tiny")
    w.close(representation="trigger", epoch=1)
    run = {"run_id": run_dir.name, "method": "batch_attention", "code_version": "abc", "seed": 0,
           "params": {"config": {"k_seen": 100, "lu_pos": "v", "pseudo_k": 3, "precision": "fp32"}},
           "data_fingerprints": {"framenet_sample": "fp"}}
    finalize(run_dir, run, [])
    ingest("ontoevent", config.samples_dir() / "ontoevent", dataset="ontoevent_maven_sample", progress=False)
    onto = config.datasets_dir() / "ontoevent_maven_sample"
    cfg = _evaluation(f"run:{run_dir.name}", onto, 0, None, "cpu")[3]
    assert (cfg.k_seen, cfg.lu_pos, cfg.pseudo_k) == (10, None, 3)
    cfg = _evaluation(f"run:{run_dir.name}", onto, 0, {"lu_pos": "v"}, "cpu")[3]
    assert cfg.lu_pos == "v"
