"""The meta-trained EMR network: learns on some types, ranks held-out types; saved/loaded by run id."""
import json
from pathlib import Path

import numpy as np
import torch
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas.cli import app
from eventatlas.data.ingest import ingest
from eventatlas.emr.meta import MetaError, load_meta, train_meta_network, type_key, unseen_types
from eventatlas.emr.models import QueryNetworks, SiameseParams, train_query_networks
from eventatlas.evaluation import RowKey
from eventatlas.evaluation.retrieval import evaluate_retrieval, relevance_from_labels
from eventatlas.run.runner import run_method
from eventatlas.tracking.records import load_metrics, read_record
from eventatlas.training import TrainingArgs

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "samples" / "emr" / "emr_sample.json"
runner = CliRunner()


def _world(seed=0, n_types=8, per_type=30, d_sig=12, d_noise=12, noise=0.25):
    """Mentions whose type lives in the first ``d_sig`` dimensions (a centre + small noise) while the
    last ``d_noise`` hold a large nuisance shared by no type (topic, sentence length ...): raw cosine
    is dominated by the nuisance, a network that learned to ignore it on other types is not."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_types, d_sig))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    X, y = [], []
    for t in range(n_types):
        sig = centres[t] + rng.normal(scale=noise, size=(per_type, d_sig))
        X.append(np.hstack([sig, rng.normal(scale=3.0, size=(per_type, d_noise))]))
        y += [f"T{t}"] * per_type
    return np.vstack(X).astype(np.float32), y


def _args(**kw):
    return TrainingArgs(**{"epochs": 10, "batch_size": 64, "lr": 3e-3, "optimizer": "adam", "schedule": "constant",
                           "max_grad_norm": None, "precision": "fp32", "device": "cpu", "bucket": False,
                           "checkpoints": False, "plot": False, "progress": False, **kw})


def _map(Z, y, held, shots_per_query=3):
    """MAP of 3-shot queries of the held-out types over the held-out + a sample of other mentions."""
    idx = [i for i, t in enumerate(y) if t in held]
    shots = [[i for i, t in enumerate(y) if t == h][:shots_per_query] for h in held]
    corpus = [i for i in range(len(y)) if i not in sum(shots, [])]
    rel = relevance_from_labels(held, [y[i] for i in corpus])
    rows = evaluate_retrieval([Z[s] for s in shots], Z[corpus], rel, ks=(10,), key=RowKey("d", "m", 0))
    assert idx
    return next(r["value"] for r in rows if r["metric"] == "map")


def test_meta_network_ranks_held_out_types_above_others(tmp_path):
    X, y = _world(noise=0.1)
    held = ["T6", "T7"]
    train = [i for i, t in enumerate(y) if t not in held]  # the held-out types are never trained on
    meta, res = train_meta_network(X[train], [y[i] for i in train], _args(), hidden=32, layers=2, pairs=2000,
                                   seed=0, out_dir=tmp_path / "meta", info={"representation": "toy"})
    assert sorted(meta.info["train_types"]) == [f"T{t}" for t in range(6)]
    assert res.history[-1]["loss"] < res.history[0]["loss"]
    raw, learned = _map(X, y, held), _map(meta.transform(X), y, held)
    # random ranking: 27 relevant of 234 -> MAP ~0.12; raw cosine is close to it (0.16), the network
    # that learned on 6 other types to ignore the nuisance is far above it (0.71; 0.5-0.8 over seeds)
    assert learned > 0.45 and learned > raw + 0.25, (raw, learned)
    # saved and loaded by run directory: the same mapping
    run_dir = tmp_path / "runs" / "r1"
    meta.save(run_dir)
    back = load_meta(run_dir)
    np.testing.assert_allclose(back.transform(X[:5]), meta.transform(X[:5]), atol=1e-6)
    assert back.info["train_types"] == meta.info["train_types"] and back.info["representation"] == "toy"
    # per-query adaptation starts every query network from the meta weights
    nets = back.net.replicate(3)
    assert nets.n_networks == 3 and all(np.allclose(w[2].detach(), back.net.weights[i][0].detach())
                                        for i, w in enumerate(nets.weights))
    shots = np.stack([X[[i for i, t in enumerate(y) if t == h][:3]] for h in held])
    adapted, hist = train_query_networks(shots, X, SiameseParams(epochs=2, batch_size=20, lr=1e-3, negatives=20,
                                                                 hidden=32, layers=2), init=back.net)
    assert adapted.n_networks == 2 and len(hist) == 2
    with pytest.raises(ValueError, match="one-network"):
        nets.replicate(2)


def test_load_meta_refuses_missing_and_foreign_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path))
    with pytest.raises(MetaError, match=r"meta model 'nope': no such run"):
        load_meta("nope")
    (tmp_path / "runs" / "other").mkdir(parents=True)
    with pytest.raises(MetaError, match="holds no meta-trained EMR network"):
        load_meta("other")
    bad = tmp_path / "runs" / "broken"
    bad.mkdir()
    (bad / "meta.json").write_text(json.dumps({"d_in": 4, "hidden": 3, "layers": 1}))
    (bad / "meta.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(MetaError, match="cannot load"):
        load_meta("broken")


def test_type_names_compare_across_datasets():
    assert type_key("Conflict.Attack") == type_key("Attack") == "attack"
    assert type_key("Commerce.Carry-Goods") == type_key("Carry_goods")
    assert unseen_types(["Conflict.Attack", "Life.Die", "Movement.Arriving"], ["Attack", "Arriving"]) == ["Life.Die"]


def test_shape_mismatch_between_meta_and_query_networks():
    net = QueryNetworks(1, 6, hidden=4, layers=2)
    with pytest.raises(RuntimeError):
        train_query_networks(np.zeros((1, 2, 5), np.float32), np.zeros((4, 5), np.float32),
                             SiameseParams(epochs=1, hidden=4, layers=2), init=net)


PARAMS = {"min_mentions": 8, "n_corpus": 4, "n_query": 3, "n_dev": 1, "n_none": 50, "queries_per_type": 2,
          "ks": [2, 3], "repetitions": 1, "models": ["adhoc", "meta", "meta_adapt"],
          "meta": {"epochs": 2, "pairs": 200, "batch_size": 50, "hidden": 16, "adapt_epochs": 2}}


def test_meta_run_is_saved_evaluated_and_searchable(eventatlas_env, tmp_path, monkeypatch):
    ddir = eventatlas_env / "data" / "datasets" / "emr_sample"
    ingest("maven_sentences", SAMPLE, out_dir=ddir, dataset="emr_sample")
    split = tmp_path / "split.json"  # the few-shot split format: {split: [types]}
    split.write_text(json.dumps({"train": ["Death", "Arriving", "Election"], "test": ["Acquisition", "Attack"]}))
    params = {**PARAMS, "meta": {**PARAMS["meta"], "split_file": str(split), "eval_split": "test"}}
    rec_path = run_method("emr", ddir, seed=0, params=params, device="cpu")
    rec = read_record(rec_path)
    run = rec["run"]
    assert run["status"] == "completed", run.get("error")
    meta = run["params"]["meta"]
    # the split's train types are trained on; the m types are the test types (never trained on)
    assert meta["source"] == "trained" and sorted(meta["train_types"]) == ["Arriving", "Death", "Election"]
    ep = run["params"]["episodes"][0]
    assert ep["types"] == ["Acquisition", "Attack"]
    rows = load_metrics(rec)
    assert {r["variant"] for r in rows} == {"adhoc", "meta", "meta_adapt"}
    kinds = {a["kind"] for a in rec["artifacts"]}
    assert "model/emr_meta" in kinds and "plot/learning_curve/meta" in kinds
    assert (rec_path.parent / "meta.pt").exists() and rec["train_steps_path"]
    run_id = rec_path.parent.name
    # evaluated again from the saved run (the cross-dataset path): same unseen types
    again = read_record(run_method("emr", ddir, seed=0, params={**params, "models": ["meta"], "meta_run": run_id},
                                   device="cpu"))["run"]
    assert again["status"] == "completed", again.get("error")
    assert again["params"]["meta"]["source"] == "meta_run" and again["params"]["episodes"][0]["types"] == ep["types"]
    # eventatlas search with the meta model
    ex = tmp_path / "ex.jsonl"
    ex.write_text("\n".join(json.dumps(s) for s in ["Rebels [stormed] the town hall .", "Gunmen [attacked] the embassy ."]))
    out = tmp_path / "m.parquet"
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "--model", f"meta:{run_id}",
                            "--top", "5", "-o", str(out)], terminal_width=300)
    assert r.exit_code == 0, r.output
    res = pq.read_table(out).to_pylist()
    assert len(res) == 5 and all(a["score"] >= b["score"] for a, b in zip(res, res[1:]))
    # the same network as a saved model: meta:run:<id> (and the window4 representation it was trained on)
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "--model",
                            f"meta:run:{run_id}", "--top", "5", "-o", str(tmp_path / "m2.parquet")], terminal_width=300)
    assert r.exit_code == 0, r.output
    assert pq.read_table(tmp_path / "m2.parquet").to_pylist() == res
    assert "over the window4 representation" in r.output
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "--model", "meta:no-such-run"],
                      terminal_width=400)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "meta model 'no-such-run': no such run" in r.output
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "--model", f"meta:{run_id}",
                            "-r", "trigger"], terminal_width=400)
    assert r.exit_code == 2 and "trained on representation='window4'" in r.output
    # a caller that keeps the corpus index maps the corpus through the network once, not once per query
    from eventatlas.emr.meta import MetaModel
    from eventatlas.emr.search import CorpusIndex, search

    index = CorpusIndex.build(ddir, representation="window4", device="cpu")
    sizes, real = [], MetaModel.transform
    monkeypatch.setattr(MetaModel, "transform", lambda self, X, **kw: sizes.append(len(X)) or real(self, X, **kw))
    first = search(ddir, ex, model=f"meta:{run_id}", top=5, device="cpu", index=index)
    second = search(ddir, ex, model=f"meta:{run_id}", top=5, device="cpu", index=index)
    assert sizes.count(len(index)) == 1 and sizes.count(2) == 2  # the corpus once; each query's 2 examples
    assert first.equals(second) and first.column("mention_id").to_pylist() == [a["mention_id"] for a in res]


@pytest.mark.shared_data
@pytest.mark.slow  # ~60 s: ingests the MAVEN subset, encodes 240 real mentions
def test_meta_network_on_real_maven_sentences_ranks_a_held_out_type_first(tmp_path):
    """Real MAVEN subset mentions of 10 frequent types (24 each): a network meta-trained on 8 of them
    ranks 4-shot queries of the 2 held-out types far above random, on the frozen trigger vectors."""
    from conftest import shared_path

    from eventatlas.emr.episodes import candidate_pool
    from eventatlas.modeling.encode import Encoder

    src = shared_path("maven", "subset", "maven_subset_a.json")
    ingest("maven_sentences", src, out_dir=tmp_path / "maven_subset", dataset="maven_subset")
    pool = candidate_pool(tmp_path / "maven_subset", seed=0, no_event=False).to_pylist()
    types = ["Attack", "Catastrophe", "Competition", "Process_start", "Causation", "Motion", "Killing",
             "Social_event", "Arriving", "Statement"]  # train types of the MAVEN few-shot split
    held = ["Killing", "Arriving"]  # held out here: never trained on
    rows = [r for t in types for r in [p for p in pool if p["label"] == t][:24]]
    X = Encoder(device="cpu", progress=False).encode_mentions([r["sentence"] for r in rows],
                                                               [r["trigger_start"] for r in rows],
                                                               [r["trigger_end"] for r in rows], "trigger")
    y = [r["label"] for r in rows]
    train = [i for i, t in enumerate(y) if t not in held]
    meta, _ = train_meta_network(X[train], [y[i] for i in train], _args(epochs=8, lr=1e-3), hidden=128, layers=2,
                                 pairs=2000, seed=0, out_dir=tmp_path / "meta")
    assert not set(held) & set(meta.info["train_types"])
    got = _map(meta.transform(X), y, held, shots_per_query=4)
    random_map = 20 / (len(y) - 8)  # 20 relevant left per query among 232 candidates
    print(f"held-out MAP {got:.3f} (random {random_map:.3f})")
    assert got > 3 * random_map, got


def _pool(y):
    """A pool table for labels ``y``: each mention's trigger is one of 3 words of its type."""
    import pyarrow as pa

    n = len(y)
    return pa.table({"mention_id": [f"m{i}" for i in range(n)], "doc_id": [f"d{i}" for i in range(n)],
                     "sentence": [f"w{t}x{i % 3} here" for i, t in enumerate(y)], "trigger_start": [0] * n,
                     "trigger_end": [len(f"w{t}x{i % 3}") for i, t in enumerate(y)],
                     "trigger": [f"w{t}x{i % 3}" for i, t in enumerate(y)], "label": list(y),
                     "source": ["mention"] * n})


def test_meta_epoch_is_chosen_on_dev_types(tmp_path):
    """The dev rule of the network after every epoch (dev types: neither trained on nor tested); early
    stopping keeps the best epoch's weights."""
    from types import SimpleNamespace

    from eventatlas.emr.dev import DevCallback, dev_episode
    from eventatlas.emr.meta import MetaModel
    from eventatlas.training.callbacks import EarlyStopping, EvalCallback

    X, y = _world(noise=0.1, n_types=10)
    dev_types, train = ["T8", "T9"], [i for i, t in enumerate(y) if t not in ("T6", "T7", "T8", "T9")]
    cfg = SimpleNamespace(n_query=5, min_mentions=20, n_corpus=15, n_none=40)
    dev = dev_episode(_pool(y), cfg, {f"T{i}" for i in range(8)}, dev_types, seed=0)
    # the dev episode holds only dev types and None items drawn outside the excluded types
    labels = [y[i] for i in dev.episode.corpus]
    assert set(labels) <= {"T8", "T9", None} and {q.type for q in dev.queries} == {"T8", "T9"}
    Xd = X[dev.items]
    fn = DevCallback(dev, lambda tr: MetaModel(tr.unwrapped, {}).transform(Xd))
    meta, res = train_meta_network(X[train], [y[i] for i in train], _args(epochs=6), hidden=32, layers=2, pairs=1000,
                                   seed=0, out_dir=tmp_path / "m",
                                   callbacks=(EvalCallback(fn), EarlyStopping("dev_score", "max", patience=2)))
    assert 1 <= len(fn.history) <= 6 and all(0 < v <= 1 for v in fn.history)
    evals = pq.read_table(res.evals_path).to_pylist()
    assert [e["value"] for e in evals if e["metric"] == "dev_score"] == pytest.approx(fn.history)
    # the kept weights are the best epoch's: their dev score is the curve's maximum
    again = fn(type("T", (), {"unwrapped": meta.net, "accelerator": type("A", (), {"device": "cpu"})()})())
    assert again["dev_score"] == pytest.approx(max(fn.history))


def test_residual_network_starts_as_the_identity_and_round_trips(tmp_path):
    X, y = _world(noise=0.1)
    net = QueryNetworks(1, X.shape[1], hidden=16, layers=2, residual=True)
    out = net(torch.as_tensor(X[:4]))
    assert out.shape == (1, 4, X.shape[1]) and torch.allclose(out[0], torch.as_tensor(X[:4]))
    train = [i for i, t in enumerate(y) if t not in ("T6", "T7")]
    meta, _ = train_meta_network(X[train], [y[i] for i in train], _args(epochs=2), hidden=16, layers=2, pairs=500,
                                 residual=True, seed=0, out_dir=tmp_path / "m")
    assert meta.transform(X[:3]).shape == (3, X.shape[1]) and meta.info["residual"] is True
    meta.save(tmp_path / "run")
    back = load_meta(tmp_path / "run")
    assert back.net.residual and back.net.replicate(2).residual
    np.testing.assert_allclose(back.transform(X[:5]), meta.transform(X[:5]), atol=1e-6)
