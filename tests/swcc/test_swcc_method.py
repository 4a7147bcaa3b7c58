"""SWCC: training events from the self-written tuple sample, the step's batch and losses on a tiny BERT,
and one end-to-end run through ``train-all`` (train on the sample, score the similarity samples)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from eventatlas.config import samples_dir
from eventatlas.data.ingest import ingest

TUPLES = samples_dir() / "event_tuples" / "tuples_sample.txt"


@pytest.fixture
def tuples(eventatlas_env):
    d = eventatlas_env / "data" / "datasets" / "event_tuples_sample"
    ingest("event_tuples", TUPLES, out_dir=d, dataset="event_tuples_sample")
    return d


def test_events_and_weighted_partners(tuples):
    from eventatlas.swcc.data import load_events, minmax

    ev = load_events(tuples)
    assert len(ev) == ev.record["n_events_all"] == 28  # 33 tuples; 5 (s, v, o) occur in two documents
    assert "police arrested suspect" in ev.texts and "stocks fell" in ev.texts  # template order, nulls dropped
    i, j = ev.texts.index("striker scored goal"), ev.texts.index("fans celebrated victory")
    k = ev.texts.index("coach praised players")
    nb = dict(zip(ev.indices[ev.indptr[i]:ev.indptr[i + 1]].tolist(), ev.weights[ev.indptr[i]:ev.indptr[i + 1]]))
    # counts are 1 or 2 in the sample: min-max gives 1.0 to the pairs seen in two documents, 0.0 to the rest
    assert nb[j] == 1.0 and nb[k] == 0.0 and ev.record["count_max"] == 2.0
    # partners are drawn by count: j (2) twice as often as each count-1 partner
    rng = np.random.default_rng(0)
    draws = [ev.sample_partner(i, rng)[0] for _ in range(3000)]
    n_partners = len(nb)
    share_j = draws.count(j) / len(draws)
    total = sum(ev.counts[ev.indptr[i]:ev.indptr[i + 1]])
    assert share_j == pytest.approx(2 / total, abs=0.03) and set(draws) <= set(nb) and n_partners >= 5
    w, degenerate = minmax(np.array([1.0, 1.0]))
    assert degenerate and w.tolist() == [1.0, 1.0]
    # log weighting: the count-1 pairs (0.0 under min-max) get log 2 / log 3 > 0, the count-2 pair 1.0
    lg = load_events(tuples, weighting="log")
    nb_log = dict(zip(lg.indices[lg.indptr[i]:lg.indptr[i + 1]].tolist(), lg.weights[lg.indptr[i]:lg.indptr[i + 1]]))
    assert nb_log[j] == 1.0 and nb_log[k] == pytest.approx(np.log(2) / np.log(3))
    assert lg.record["weighting"] == "log" and lg.record["pairs_weight_zero"] == 0
    sub = load_events(tuples, max_events=10, seed=3)
    assert len(sub) == 10 and sub.record["subsampled"] and set(sub.texts) <= set(ev.texts)
    assert (sub.indices < 10).all()
    # whole documents: the subsample keeps co-occurring pairs (a uniform 10 of 28 would keep few)
    assert sub.record["n_documents_sampled"] >= 2 and sub.record["n_pairs"] >= 6


@pytest.fixture
def tiny_model(tmp_path):
    from support.tiny_models import tiny_bert

    return tiny_bert(tmp_path, TUPLES.read_text().replace("_NULL_", "").split("\n") + ["military launch program"],
                     hidden=32, layers=1)


def test_pair_weights_hand_computed():
    from eventatlas.swcc.data import pair_weights

    c = np.array([1.0, 3.0, 7.0])
    # min-max: (c - 1) / 6; log: log(1 + c) / log 8 = log2(1 + c) / 3 -> 1/3, 2/3, 1; uniform: 1
    assert pair_weights(c, "minmax")[0].tolist() == pytest.approx([0.0, 1 / 3, 1.0])
    assert pair_weights(c, "log")[0].tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert pair_weights(c, "uniform")[0].tolist() == [1.0, 1.0, 1.0]
    w, degenerate = pair_weights(np.array([4.0, 4.0]), "log")
    assert degenerate and w.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="weighting must be one of"):
        pair_weights(c, "sqrt")
    with pytest.raises(ValueError, match="counts >= 1"):
        pair_weights(np.array([0.0, 2.0]), "log")


@pytest.mark.parametrize("variant", ["swcc", "infonce", "margin", "no_weak"])
def test_batch_and_loss_on_a_tiny_encoder(tuples, tiny_model, variant):
    from eventatlas.modeling.mention_encoder import MentionEncoder
    from eventatlas.swcc.data import load_events
    from eventatlas.swcc.model import SWCCModel
    from eventatlas.swcc.task import SWCCTask, switches

    ev = load_events(tuples)
    enc = MentionEncoder(str(tiny_model), max_length=16)
    items = enc.prepare(ev.texts, [0] * len(ev), [len(t) for t in ev.texts], "sentence")
    sw = switches(variant)
    model = SWCCModel(enc, n_prototypes=3, mlm=sw.mlm)
    assert model.mlm_source in (None, "linear")  # the tiny checkpoint has no MLM head
    task = SWCCTask(model, items, ev, pooling_rep="cls", sw=sw)
    batch = task.make_batch(np.arange(6), np.random.default_rng(0))
    n_views = 2 + sw.second_view + sw.weak
    assert batch["views"]["input_ids"].shape[0] == 6 * n_views
    if sw.mlm:  # exactly one labelled, masked, non-special position per event
        lab = batch["m"]["labels"]
        assert ((lab != -100).sum(1) == 1).all()
        assert (batch["m"]["input_ids"][lab != -100] == enc.mask.id).all()
    model.train()
    loss, terms = task.loss(model, batch)
    assert torch.isfinite(loss) and loss.requires_grad
    want = {"swcc": {"cl_self", "cl_weak", "proto_swap", "mlm"}, "infonce": {"cl_self"}, "margin": {"margin"},
            "no_weak": {"cl_self", "proto_swap", "mlm"}}[variant]
    assert set(terms) == want
    loss.backward()
    assert model.encoder.model.embeddings.word_embeddings.weight.grad is not None


def test_train_all_end_to_end(tuples, tiny_model, eventatlas_env):
    from eventatlas.store.warehouse import Warehouse
    from flows.train_all import train_all

    ingest("hard_similarity", samples_dir() / "event_similarity" / "hard_similarity" / "hard_quadruples_sample.txt",
           out_dir=eventatlas_env / "data" / "datasets" / "hard_similarity_sample", dataset="hard_similarity_sample")
    ingest("mcnc", samples_dir() / "event_similarity" / "mcnc",
           out_dir=eventatlas_env / "data" / "datasets" / "mcnc_sample", dataset="mcnc_sample")
    params = {"swcc": {"model_id": str(tiny_model), "max_length": 16, "n_prototypes": 3, "plot_events": 20,
                       "dev_datasets": ["mcnc_sample"], "train": {"epochs": 2, "batch_size": 8, "threads": 1, "lr": 1e-3}}}
    out = train_all(methods=["swcc"], seeds=[0], params=params, device="cpu")
    wh = Warehouse()
    runs = wh.query("SELECT params->>'dataset' AS dataset, status, error, params FROM runs WHERE method = 'swcc'")
    # swcc applies to the co-occurrence dataset only (no event_cooccurrence kind elsewhere)
    assert runs.dataset.tolist() == ["event_tuples_sample"] and runs.status.tolist() == ["completed"], runs.error[0]
    params_rec = json.loads(runs.params[0])
    assert params_rec["eval_datasets"] == ["hard_similarity_sample", "mcnc_sample"]
    assert params_rec["events"]["n_events"] == 28 and params_rec["mlm_head"] == "linear"
    # the dev set's final scores are recorded apart (choices are made on them, never on the test sets)
    assert params_rec["dev_datasets"] == ["mcnc_sample"] and set(params_rec["dev"]) == {"mcnc_sample/mcnc_acc",
                                                                                         "mcnc_sample/mcnc_random"}
    m = wh.query("SELECT dataset, metric, value, variant, representation, setting FROM metrics "
                 "WHERE method = 'swcc' ORDER BY dataset, metric")
    assert set(zip(m.dataset, m.metric)) == {("hard_similarity_sample", "hard_sim_acc"), ("mcnc_sample", "mcnc_acc"),
                                             ("mcnc_sample", "mcnc_random")}
    assert set(m.variant) == {"swcc"} and set(m.representation) == {"cls"}
    assert set(m.setting) == {"{subj} {verb} {obj} (lower-cased)"} and m.value.between(0, 1).all()
    evals = wh.query("SELECT DISTINCT metric, epoch FROM train_evals")
    assert {"hard_similarity_sample/hard_sim_acc", "mcnc_sample/mcnc_acc"} <= set(evals.metric)
    assert sorted(set(evals.epoch)) == [0, 1]
    steps = wh.query("SELECT terms FROM train_steps")
    assert len(steps) == 2 * (28 // 8)  # drop_last: 3 full batches per epoch
    arts = wh.query("SELECT kind, path FROM artifacts")
    kinds = set(arts.kind)
    assert {"plot/prototypes", "swcc/prototypes", "plot/learning_curve/swcc"} <= kinds
    png = Path(arts[arts.kind == "plot/prototypes"].path.iloc[0])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out["runs"] >= 1
    # the saved model: the encoder with the run's [CLS] pooling (sentence-transformers reads it), prototypes
    from sentence_transformers import SentenceTransformer

    from eventatlas.modeling.saved import resolve_ref

    m = resolve_ref("run:swcc:event_tuples_sample:latest")
    assert m.card.encoder == "encoder" and m.card.representation == "cls" and m.card.precision == "fp32"
    assert m.head("prototypes")[0]["prototypes"].shape[0] == 3
    st = SentenceTransformer(str(m.encoder_path), device="cpu")
    pool = st[1]  # sentence-transformers 6 names the mode pooling_mode; earlier versions get_pooling_mode_str()
    assert (getattr(pool, "pooling_mode", None) or pool.get_pooling_mode_str()) == "cls"
    assert wh.query_rows("SELECT method, trained_on FROM models")[1] == [("swcc", "event_tuples_sample")]
