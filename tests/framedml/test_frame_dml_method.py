"""frame_dml end to end: train-all on a tiny self-written FrameNet-layout sample (datasets/samples/framenet_verbs)."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from support.tiny_models import tiny_bert


def _ingest_sample(root: Path) -> Path:
    from eventatlas import config
    from eventatlas.data.ingest import ingest

    out = root / "data" / "datasets" / "fn_verbs_sample"
    ingest("framenet", config.samples_dir() / "framenet_verbs", out_dir=out, dataset="fn_verbs_sample")
    return out


def test_sample_split_and_not_applicable(eventatlas_env):
    from eventatlas.data.verbsplit import assign, dataset_table, frame_mentions, split_verbs
    from eventatlas.methods import get_spec
    from eventatlas.methods.context import method_runner
    from eventatlas.methods.context import method_runner
    from eventatlas.methods.base import NotApplicable

    ds = _ingest_sample(eventatlas_env)
    fm = frame_mentions(ds)
    assert len(fm) == 64  # every verb exemplar, sentence[start:end] == trigger
    for s, a, b, t in zip(fm.column("sentence"), fm.column("trigger_start"), fm.column("trigger_end"),
                          fm.column("trigger")):
        assert s[a:b] == t
    assert sorted(v for v, fs in fm.verb_frames().items() if len(fs) > 1) == ["run", "strike"]
    rows = dataset_table(fm, assign(fm.verbs, split_verbs(fm.verb_frames(), seed=0)))
    assert rows[-1] == {"set": "all", "verbs": 14, "monosemous": 12, "polysemous": 2, "lus": 16, "frames": 6,
                        "instances": 64}
    # a typed dataset without FrameNet verbs is skipped before any model loads
    from eventatlas.io import DatasetWriter

    d = eventatlas_env / "data" / "datasets" / "novb"
    with DatasetWriter(d, "novb", tables=["mentions"]) as w:
        for i in range(6):
            w.write("mentions", {"dataset": "novb", "mention_id": f"m{i}", "doc_id": "d", "sentence": "a b",
                                 "trigger_start": 0, "trigger_end": 1, "trigger": "a", "labels": [f"T{i % 2}"]})
        w.commit()
    with pytest.raises(NotApplicable):
        method_runner(get_spec("frame_dml"))(d, eventatlas_env / "out", seed=0)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_frame_dml_through_train_all(eventatlas_env, monkeypatch):
    from prefect.testing.utilities import prefect_test_harness

    from eventatlas.store.warehouse import Warehouse
    from flows.train_all import train_all

    root = eventatlas_env
    monkeypatch.setenv("PREFECT_HOME", str(root / "prefect"))
    ds = _ingest_sample(root)
    model = tiny_bert(root, pq.read_table(ds / "mentions.parquet", columns=["sentence"]).column(0).to_pylist())
    params = {"frame_dml": {
        "model_id": str(model), "losses": ["vanilla", "triplet", "adacos"], "margins": {"triplet": [0.2, 0.5]},
        "alphas": [0.0, 0.5, 1.0], "folds": [0, 1], "precision": "fp32",
        "train": {"epochs": 2, "batch_size": 8, "lr": 1e-3, "precision": "fp32", "threads": 1}}}
    with prefect_test_harness(server_startup_timeout=300):
        summary = train_all(datasets=["fn_verbs_sample"], methods=["frame_dml"], seeds=[0], params=params)
    assert summary["failed"] == [] and summary["runs"] == 1
    record = json.loads(Path(summary["records"][0]).read_text())
    assert record["run"]["status"] == "completed", record["run"].get("error")

    df = Warehouse().query("SELECT * FROM metrics WHERE method = 'frame_dml'")
    test = df[(df.split == "test") & (df.task == "induction")]
    assert set(test["variant"]) == {"vanilla", "triplet", "adacos"}
    assert set(test["representation"]) == {"word", "mask", "w+m"}
    assert set(test["clustering"]) == {"one_step", "two_step"}
    assert set(test["setting"]) == {"fold 0", "fold 1", "mean of 2 folds"}
    bcf = test[test.metric == "bcubed_f"]
    assert len(bcf) == 3 * 3 * 2 * 3 and bcf["value"].between(0, 1).all()
    rec = df[(df.task == "retrieval") & (df.split == "test")]
    assert set(rec["metric"]) == {"recall_all", "recall_same", "recall_diff"}
    # dev's one-step cut gives exactly dev's gold frame count (the transferred height's definition)
    params_json = json.loads((Path(summary["records"][0]).parent / "frame_dml_params.json").read_text())
    dev = df[(df.split == "dev") & (df.clustering == "one_step") & (df.metric == "n_clusters") &
             (df.setting == "fold 0")]
    table = {r["set"]: r for r in params_json["dataset_table"]}
    dev_set = params_json["folds"]["0"]["roles"]["dev"][0]
    assert set(dev["value"]) == {table[f"set{dev_set}"]["frames"]}
    # the chosen margin is one of the grid, chosen on dev; training facts are rows
    tr = df[(df.task == "training") & (df.variant == "triplet")]
    assert set(tr[tr.metric == "margin"]["value"]) <= {0.2, 0.5}
    assert (tr[tr.metric == "seconds_per_epoch"]["value"] > 0).all()
    kinds = [a["kind"] for a in record["artifacts"]]
    assert "plot/projection/vanilla_vs_finetuned" in kinds and "frame_dml/dataset_table" in kinds
    # the saved model: per fold, the dev-best fine-tuned encoder, its loss head over the training frames
    # (adacos has proxies; triplet none) and the mixing weights the dev chose
    from eventatlas.modeling.saved import resolve_ref

    m = resolve_ref(f"run:{record['run']['run_id']}")
    assert set(m.card.encoders) == {"fold0", "fold1"} and m.card.encoder == "fold0"
    for fold in ("fold0", "fold1"):
        info = m.card.inference[fold]
        assert info["loss"] in ("triplet", "adacos") and 0 <= info["alpha_one_step"] <= 1
        dev = {loss: v["dev_one_step_bcubed_f"] for loss, v in params_json["folds"][fold[-1]]["models"].items()
               if loss != "vanilla"}
        assert info["loss"] == max(dev, key=dev.get) and info["dev"] == dev[info["loss"]]  # the dev-best loss
        if info["loss"] == "adacos":
            w, cfg = m.head(f"{fold}_adacos")
            assert len(cfg["classes"]) == params_json["folds"][fold[-1]]["train_frames"]
    assert resolve_ref(f"run:{record['run']['run_id']}@fold1").encoder_path.name == "fold1"
    png = next(a["path"] for a in record["artifacts"] if a["kind"] == "plot/projection/vanilla_vs_finetuned")
    png = Path(png) if Path(png).is_absolute() else Path(summary["records"][0]).parent / png
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    steps = pq.read_table(record["train_steps_path"] if Path(record["train_steps_path"]).is_absolute()
                          else Path(summary["records"][0]).parent / record["train_steps_path"]).to_pylist()
    assert {s["phase"] for s in steps} >= {"fold0/triplet_m0.2", "fold0/adacos"}


def test_pair_batches_are_length_sorted_and_restore_order(tmp_path):
    import numpy as np
    import torch

    from eventatlas.framedml.training import DMLModel, DMLTask
    from eventatlas.modeling.mention_encoder import MentionEncoder

    sents = ["a b c d e f g h they walk", "walk now", "they walk to the very long old station today", "eat it",
             "we eat fish", "buy", "they buy a car now ok", "x y buy"]
    words = ["walk", "walk", "walk", "eat", "eat", "buy", "buy", "buy"]
    enc = MentionEncoder(str(tiny_bert(tmp_path, sents)), max_length=32)
    starts = [s.rfind(w) for s, w in zip(sents, words)]
    items = enc.prepare(sents, starts, [a + len(w) for a, w in zip(starts, words)], "trigger")
    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    for loss, groups in (("triplet", 3), ("contrastive", 2)):
        model = DMLModel(enc, loss, n_classes=3, margin=0.5)
        model.eval()
        task = DMLTask(model, items, labels)
        b = task.make_batch(np.arange(8), np.random.default_rng(0))
        chunks = list(b["x"].values())
        assert len(chunks) == groups and sum(c["input_ids"].shape[0] for c in chunks) == 8 * groups
        lengths = [int(c["attention_mask"].sum(1).max()) for c in chunks]
        assert lengths == sorted(lengths)  # each sub-batch padded to its own (sorted) length
        with torch.no_grad():
            emb = task._embed_sorted(model, b)
            # the rows come back in batch order: row j is the j-th of (anchors, partners...)
            inv = b["inv"].numpy()
            flat = [it for c in chunks for it in range(c["input_ids"].shape[0])]
            assert len(flat) == len(inv)
            sub = {k: v[:1] for k, v in chunks[0].items()}
            first_sorted = enc(sub["input_ids"], sub["attention_mask"], sub["pool"], "trigger")[0]
            j = int(np.flatnonzero(inv == 0)[0])  # the batch row placed first after sorting
            assert torch.allclose(emb[j], first_sorted, atol=1e-5)


@pytest.mark.timeout(300)
def test_select_epoch_keeps_the_dev_best_epoch(eventatlas_env):
    """``select_epoch``: dev is scored after every epoch, the best epoch's weights are the ones evaluated
    (its dev score is the final dev score) and its number is a training row."""
    from eventatlas.methods import get_spec
    from eventatlas.methods.context import method_runner
    from eventatlas.methods.context import method_runner

    ds = _ingest_sample(eventatlas_env)
    model = tiny_bert(eventatlas_env, pq.read_table(ds / "mentions.parquet", columns=["sentence"]).column(0).to_pylist())
    out = eventatlas_env / "out_select"
    res = method_runner(get_spec("frame_dml"))(
        ds, out, seed=0, model_id=str(model), losses=["adacos"], alphas=[0.0, 0.5, 1.0], folds=[0],
        precision="fp32", projection=False, ranking=False, select_epoch=True,
        train={"epochs": 3, "batch_size": 8, "lr": 3e-3, "precision": "fp32", "threads": 1})
    info = res.params["folds"]["0"]["models"]["adacos"]
    curve = [h["dev_one_step_bcubed_f"] for h in info["dev_curve"]]
    assert len(curve) == 3
    (evals,) = res.train_evals  # the same curve in the run's train_evals log
    ev = pq.read_table(evals).to_pandas()
    ev = ev[ev.metric == "dev_one_step_bcubed_f"].sort_values("epoch")
    assert ev["value"].tolist() == pytest.approx(curve)
    best = max(range(3), key=lambda e: (curve[e], -e))  # EarlyStopping keeps the first best
    facts = {m["metric"]: m["value"] for m in res.metrics if m["task"] == "training"}
    assert facts["epochs_selected"] == best + 1
    assert info["dev_one_step_bcubed_f"] == pytest.approx(curve[best], abs=1e-9)


def test_full_test_fold_unless_max_test(eventatlas_env, monkeypatch):
    """``max_test`` None (the default) clusters the whole test fold, an int subsamples it (seeded); the
    wall time of every test clustering and the linkage path the memory ceiling picks are recorded (above
    ``EVENTATLAS_MAX_DENSE_N`` the O(N·d) NN-chain, as on a 23k-instance FN 1.5 fold)."""
    from eventatlas.methods import get_spec
    from eventatlas.methods.context import method_runner
    from eventatlas.methods.context import method_runner

    ds = _ingest_sample(eventatlas_env)
    model = tiny_bert(eventatlas_env, pq.read_table(ds / "mentions.parquet", columns=["sentence"]).column(0).to_pylist())
    kw = dict(seed=0, model_id=str(model), losses=["vanilla"], alphas=[0.0, 1.0], folds=[0], precision="fp32",
              projection=False, ranking=False)
    full = method_runner(get_spec("frame_dml"))(ds, eventatlas_env / "full", **kw).params["folds"]["0"]
    assert full["n_test"] == full["n_test_full"] > 10
    assert set(full["models"]["vanilla"]["test_clustering_s"]) == {
        f"{r} {c}" for r in ("word", "mask", "w+m") for c in ("one_step", "two_step")}
    assert full["models"]["vanilla"]["test_linkage"] == "dense"  # a few dozen rows, far below the ceiling
    monkeypatch.setenv("EVENTATLAS_MAX_DENSE_N", "5")
    sub = method_runner(get_spec("frame_dml"))(ds, eventatlas_env / "sub", max_test=10, **kw)
    assert sub.params["folds"]["0"]["n_test"] == 10
    assert sub.params["folds"]["0"]["models"]["vanilla"]["test_linkage"] == "nnchain"
    n = {m["setting"]: m["value"] for m in sub.metrics
         if m["split"] == "test" and m["metric"] == "n_frames" and m["clustering"] == "one_step"}
    assert list(n) == ["fold 0, test<= 10"] and n["fold 0, test<= 10"] <= 10


@pytest.mark.timeout(300)
def test_saved_model_applies_with_the_frame_dml_protocol(eventatlas_env):
    """``eventatlas evaluate`` of a saved frame_dml model runs this method's protocol without training: its rows
    equal a vanilla run whose encoder is the saved one, labelled with the trained loss; ``exclude_verbs_of``
    drops exactly the verbs of the model's training and dev sets."""
    from eventatlas.data.verbsplit import fold_roles, frame_mentions, split_verbs
    from eventatlas.framedml.protocol import model_verbs
    from eventatlas.methods import get_spec
    from eventatlas.methods.context import method_runner
    from eventatlas.run.runner import evaluate_model, run_method

    ds = _ingest_sample(eventatlas_env)
    model = tiny_bert(eventatlas_env, pq.read_table(ds / "mentions.parquet", columns=["sentence"]).column(0).to_pylist())
    common = dict(alphas=[0.0, 1.0], precision="fp32", projection=False, ranking=False)
    rec = json.loads(run_method("frame_dml", ds, seed=0, device="cpu", params=dict(
        model_id=str(model), losses=["adacos"], folds=[0], **common,
        train={"epochs": 1, "batch_size": 8, "lr": 3e-3, "precision": "fp32", "threads": 1})).read_text())
    assert rec["run"]["status"] == "completed", rec["run"].get("error")
    ref = f"run:{rec['run']['run_id']}"
    ev = json.loads(evaluate_model(ref, ds, seed=0, device="cpu", params={"folds": [1]}).read_text())
    assert ev["run"]["status"] == "completed", ev["run"].get("error")
    assert (ev["run"]["task"], ev["run"]["method"]) == ("evaluate", "frame_dml")
    from eventatlas.tracking.records import load_metrics

    test = [r for r in load_metrics(ev) if r["split"] == "test" and r["task"] == "induction"]
    assert test and {r["variant"] for r in test} == {"adacos"} and {r["trained_on"] for r in test} == {"fn_verbs_sample"}
    vanilla = method_runner(get_spec("frame_dml"))(ds, eventatlas_env / "as_vanilla", seed=0, model_id=ref,
                                             losses=["vanilla"], folds=[1], **common)
    want = {(r["representation"], r["clustering"], r["metric"]): r["value"] for r in vanilla.metrics
            if r["split"] == "test" and r["task"] == "induction"}
    got = {(r["representation"], r["clustering"], r["metric"]): r["value"] for r in test}
    assert got == pytest.approx(want) and len(got) == len(want)
    # the verbs the model saw: fold 0's train (set 2) and dev (set 1) sets of the sample's verb split
    sets = split_verbs(frame_mentions(ds).verb_frames(), n_sets=3, seed=0)
    roles = fold_roles(0, 3)
    assert model_verbs(ref) == set(sets[roles["dev"][0]]) | set(sets[roles["train"][0]])
