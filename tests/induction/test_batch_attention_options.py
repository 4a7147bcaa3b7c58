"""The MAVEN 150/18 protocol's type split and the batch-attention fixes (each option tested)."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from eventatlas.data import NotApplicable, choose_unseen_types, select_labelled
from eventatlas.evaluation import RowKey


def _counts_table(counts: dict[str, int], order_seed: int = 0) -> pa.Table:
    labels = [t for t, c in counts.items() for _ in range(c)]
    rng = np.random.default_rng(order_seed)
    labels = [labels[i] for i in rng.permutation(len(labels))]
    n = len(labels)
    return pa.table({"mention_id": [f"m{i}" for i in range(n)], "labels": [[t] for t in labels],
                     "sentence": ["x y"] * n, "trigger_start": [0] * n, "trigger_end": [1] * n})


COUNTS = {f"T{i:02d}": c for i, c in enumerate([50, 40, 40, 30, 20, 12, 10, 10, 9, 3, 2, 1])}


def test_unseen_choice_is_fixed_seeded_and_needs_enough_mentions():
    a, rec = choose_unseen_types([t for t, c in COUNTS.items() for _ in range(c)], 3, min_mentions=10, seed=0)
    # only the 8 types with >= 10 mentions are candidates; the draw is independent of row order
    assert rec["n_candidates"] == 8 and set(a) <= {f"T{i:02d}" for i in range(8)}
    assert all(COUNTS[t] >= 10 for t in a) and len(set(a)) == 3
    assert a == sorted(a, key=lambda t: (-COUNTS[t], t))  # recorded most frequent first
    assert rec["types"] == a and rec["mentions"] == {t: COUNTS[t] for t in a} and rec["seed"] == 0
    # the same split for every row order and every run seed; another unseen_seed draws another set
    s1 = select_labelled(_counts_table(COUNTS, 1), n_unseen=3, unseen_min_mentions=10, unseen_seed=0, seed=0)
    s2 = select_labelled(_counts_table(COUNTS, 2), n_unseen=3, unseen_min_mentions=10, unseen_seed=0, seed=7)
    assert s1.unseen_types == s2.unseen_types == a
    draws = {tuple(choose_unseen_types(list(Counter(COUNTS).elements()), 3, min_mentions=10, seed=s)[0])
             for s in range(6)}
    assert len(draws) > 1
    with pytest.raises(NotApplicable, match="only 8 types have >= 10 mentions"):
        choose_unseen_types(list(Counter(COUNTS).elements()), 9, min_mentions=10)


def test_unseen_choice_selection_seen_is_the_rest_and_recorded():
    sel = select_labelled(_counts_table(COUNTS), n_unseen=3, unseen_min_mentions=10, unseen_seed=0)
    assert len(sel.seen_types) == 9 and set(sel.seen_types).isdisjoint(sel.unseen_types)
    assert sel.setting() == "9 seen / 3 unseen"
    assert sorted(set(sel.eval_labels.tolist())) == sorted(sel.unseen_types)
    assert len(sel.eval_index) == sum(COUNTS[t] for t in sel.unseen_types)
    assert sel.record["unseen_choice"]["types"] == sel.unseen_types
    json.dumps(sel.record)  # the record lands in run params as JSON
    # k_seen below the rest: the k most frequent of the rest are seen, the others are left out (recorded)
    small = select_labelled(_counts_table(COUNTS), k_seen=2, n_unseen=3, unseen_min_mentions=10, unseen_seed=0)
    assert len(small.seen_types) == 2 and small.unseen_types == sel.unseen_types
    assert small.record["drops"]["unchosen_type"]["n"] == sum(COUNTS.values()) - sum(
        COUNTS[t] for t in small.seen_types + small.unseen_types)
    assert len(small.eval_index) == len(sel.eval_index)


@pytest.mark.shared_data
def test_maven_subset_protocol_split_is_deterministic():
    """The registry's MAVEN 150/18 protocol on the real subset: 147 seen, 18 unseen with >= 30 mentions."""
    from conftest import shared_path
    from eventatlas.data.registry import load_registry

    path = shared_path("maven", "subset", "maven_subset_a.json")
    proto = load_registry()["maven_sentences"]["protocol"]["induction"]
    labels = [e["event_type"] for s in json.loads(path.read_text()) for e in s["events"]]
    kw = dict(min_mentions=proto["unseen_min_mentions"], seed=proto["unseen_seed"])
    a, rec = choose_unseen_types(labels, proto["n_unseen"], **kw)
    b, _ = choose_unseen_types(labels[::-1], proto["n_unseen"], **kw)
    assert a == b and len(a) == 18 and min(rec["mentions"].values()) >= 30
    assert len(set(labels)) - 18 == proto["k_seen"] == 147


# ----------------------------------------------------------------------------- pseudo-labels (loss mask)
def test_pseudo_labels_unmask_only_unseen_unseen_pairs_hand_computed():
    import math

    import torch

    from eventatlas.induction.losses.masked_contrastive import label_matrices, masked_contrastive_loss

    l3 = math.log(3.0)
    s = torch.tensor([[l3, 0.0, l3, -l3], [0.0, l3, 0.0, l3], [-l3, l3, 0.0, l3], [l3, -l3, 0.0, -l3]])
    lab = torch.tensor([0, 0, -1, -1])
    pseudo = torch.zeros(4, 4, dtype=torch.bool)
    pseudo[2, 3] = pseudo[3, 2] = True  # two unseen mentions: used
    pseudo[0, 2] = pseudo[2, 0] = True  # a seen mention's pair is already labelled: ignored
    y, m = label_matrices(lab, pseudo)
    assert y.int().tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]]
    assert m.all()
    # without pseudo-labels (test_induction_core): 18 ln2 - 2 ln3 over 16 entries; now (2,3): Y=1 P=.75
    # -> ln(4/3) and (3,2): Y=1 P=.5 -> ln2 join the sum
    expected = (21 * math.log(2) - 3 * math.log(3)) / 16
    assert float(masked_contrastive_loss(s, lab, 0.5, pseudo)) == pytest.approx(expected, abs=1e-6)
    assert float(masked_contrastive_loss(s, lab, 0.5, None)) == pytest.approx(
        (18 * math.log(2) - 2 * math.log(3)) / 16, abs=1e-6)


def test_mutual_neighbours_are_mutual_and_thresholded():
    from eventatlas.induction.training import mutual_neighbours

    f = np.array([[1.0, 0.0], [0.99, 0.14], [0.0, 1.0], [0.1, 0.99], [-1.0, 0.05]])
    out = mutual_neighbours(f, [10, 11, 12, 13, 14], k=1)
    # 0<->1 and 2<->3 are mutual nearest neighbours; 4's nearest (0) prefers 1
    assert out == {10: [11], 11: [10], 12: [13], 13: [12]}
    assert mutual_neighbours(f, [10, 11, 12, 13, 14], k=1, min_cos=0.999) == {}


# ----------------------------------------------------------------------------- the task: neighbours, word dropout
SENTS = ["The army attacked the town .", "Rebels stormed a convoy .", "The king died in Paris .",
         "Two miners died after the collapse .", "Leaders met in Geneva ."]
TRIG = ["attacked", "stormed", "died", "died", "met"]


@pytest.fixture(scope="module")
def tiny_task(tmp_path_factory):
    from pathlib import Path

    from support.tiny_models import tiny_bert

    from eventatlas.induction.model import InductionModel
    from eventatlas.induction.training import InductionTask
    from eventatlas.modeling.mention_encoder import MentionEncoder
    from eventatlas.modeling.inputs import mark_triggers

    from transformers import BertTokenizerFast

    d = tiny_bert(tmp_path_factory.mktemp("m"), SENTS + ["[ ]", "gunmen ambushed"])
    # tiny_bert's BertTokenizerFast(vocab_file=...) maps every word to [UNK] under transformers 5
    # (the keyword is `vocab`); these tests read real pieces, so the tokenizer is re-saved here
    BertTokenizerFast(vocab=str(d / "vocab.txt"), do_lower_case=True).save_pretrained(d)
    enc = MentionEncoder(str(d), max_length=32)
    a = [s.index(t) for s, t in zip(SENTS, TRIG)]
    b = [i + len(t) for i, t in zip(a, TRIG)]
    ms, ma, mb = mark_triggers(SENTS, a, b)
    items = enc.prepare(ms, ma, mb, "trigger")
    model = InductionModel(enc)

    def make(**kw):
        return InductionTask(model, items, np.array([0, 0, -1, -1, -1]), "trigger", **kw)

    return enc, items, (ms, ma, mb), make


def test_trigger_markers_keep_the_trigger_span(tiny_task):
    enc, items, (ms, ma, mb), _ = tiny_task
    assert ms[0] == "The army [ attacked ] the town ."
    assert all(s[x:y] == t for s, x, y, t in zip(ms, ma, mb, TRIG))
    toks = enc.tokenizer.convert_ids_to_tokens(items[2].ids)
    assert [toks[j] for j in items[2].target] == ["died"]
    assert toks[items[2].target[0] - 1] == "[" and toks[items[2].target[-1] + 1] == "]"


def test_pseudo_neighbours_join_the_batch_with_their_matrix(tiny_task):
    _, _, _, make = tiny_task
    task = make(augmentation="dropout_view", pseudo_neighbours={2: [3], 3: [2]})
    rng = np.random.default_rng(0)
    b = task.make_batch(np.array([0, 2]), rng)  # 3 joins as 2's partner
    assert b["labels"].tolist() == [0, -1, -1]
    assert b["pseudo"].int().tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert "pseudo" not in make(augmentation="dropout_view").make_batch(np.array([0, 2]), rng)


def test_word_dropout_never_touches_the_trigger(tiny_task):
    from eventatlas.induction.augment import word_dropout

    toks = ["[CLS]", "the", "gun", "##men", "attack", "##ed", "a", "con", "##voy", "[SEP]"]
    protect = {0, 4, 5, 9}
    assert word_dropout(toks, protect, np.random.default_rng(0), p=0.999999) == [0, 4, 5, 9]
    assert word_dropout(toks, protect, np.random.default_rng(0), p=0.0) == list(range(10))
    for seed in range(20):  # whole words: a continuation never survives without its head
        kept = word_dropout(toks, protect, np.random.default_rng(seed), p=0.5)
        assert {0, 4, 5, 9} <= set(kept)
        assert all(not toks[i].startswith("##") or (i - 1) in kept for i in kept)
    enc, items, _, make = tiny_task
    task = make(augmentation="word_dropout", perturb_p=0.9)
    rng = np.random.default_rng(1)
    for it in items:
        v = task._perturbed(it, rng)
        got = enc.tokenizer.convert_ids_to_tokens(v.ids)
        want = enc.tokenizer.convert_ids_to_tokens(it.ids)
        assert [got[j] for j in v.target] == [want[j] for j in it.target] and len(v.ids) <= len(it.ids)


# ----------------------------------------------------------------------------- encoder freeze / warm-up
def test_encoder_lambda_by_hand():
    from eventatlas.training.loop import encoder_lambda, lr_lambda

    f = encoder_lambda(lr_lambda("constant", 0, 10), freeze=2, warmup=4)
    assert [f(s) for s in range(8)] == [0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert encoder_lambda(lr_lambda("constant", 0, 10))(0) == 1.0


def test_frozen_encoder_does_not_move_while_the_heads_train(tmp_path):
    from pathlib import Path

    import torch

    from support.tiny_models import tiny_bert
    from support.train_worker import SENTS as WS, Head, Task

    from eventatlas.modeling.mention_encoder import MentionEncoder
    from eventatlas.training import Trainer, TrainingArgs

    d = tiny_bert(tmp_path / "m", [s for s, _, _ in WS])
    torch.manual_seed(0)
    enc = MentionEncoder(str(d), max_length=32)
    model = Head(enc, 3)
    enc0 = {k: v.detach().clone() for k, v in enc.state_dict().items()}
    head0 = model.out.weight.detach().clone()
    args = TrainingArgs(epochs=1, batch_size=4, lr=1e-2, head_lr=1e-2, schedule="constant", max_steps=3,
                        encoder_freeze_steps=3, device="cpu", precision="fp32", threads=1, progress=False,
                        checkpoints=False, plot=False)
    Trainer(model, Task(enc, 0), args, tmp_path / "out", seed=0).fit()
    assert all(torch.equal(enc0[k], v) for k, v in enc.state_dict().items())
    assert not torch.equal(head0, model.out.weight)
    args2 = args.model_copy(update={"max_steps": 5})
    Trainer(model, Task(enc, 0), args2, tmp_path / "out2", seed=0).fit()  # steps 3-4 move the encoder
    assert any(not torch.equal(enc0[k], v) for k, v in enc.state_dict().items())


# ----------------------------------------------------------------------------- scale-normalised scores
def test_normalised_scores_hand_computed():
    from eventatlas.induction.evaluate import distance_inputs, normalised_scores

    s = np.array([[9.0, 1.0, 3.0], [2.0, 9.0, 4.0], [10.0, 20.0, 9.0]])
    z = normalised_scores(s)
    # off-diagonal row 0: (1, 3) -> mean 2, std 1; column 0: (2, 10) -> mean 6, std 4
    # column 1: (1, 20) -> mean 10.5, std 9.5; column 2: (3, 4) -> mean 3.5, std 0.5; row 1: (2, 4) -> 3, 1
    assert z[0, 1] == pytest.approx(0.5 * ((1 - 2) / 1 + (1 - 10.5) / 9.5))
    assert z[1, 0] == pytest.approx(0.5 * ((2 - 3) / 1 + (2 - 6) / 4))
    assert z[0, 2] == pytest.approx(0.5 * ((3 - 2) / 1 + (3 - 3.5) / 0.5))
    # a row scaled by 10 and shifted gets the same row z-scores: only column statistics change
    assert np.allclose(distance_inputs({"S": s, "F": np.eye(3)}, ["attn_dot_norm"])["attn_dot_norm"], -z)


def test_unseen_choice_is_drawn_before_the_training_subsample():
    full = select_labelled(_counts_table(COUNTS), n_unseen=3, unseen_min_mentions=10, unseen_seed=0)
    sub = select_labelled(_counts_table(COUNTS), n_unseen=3, unseen_min_mentions=10, unseen_seed=0, max_train=60)
    assert sub.record["unseen_choice"] == full.record["unseen_choice"]
    assert set(sub.unseen_types) <= set(full.unseen_types) and len(sub) == 60


@pytest.mark.slow
def test_untuned_with_trigger_markers_embeds_marked_inputs(tmp_path, monkeypatch):
    from pathlib import Path

    import pyarrow.parquet as pq
    from transformers import BertTokenizerFast

    from support.tiny_models import tiny_bert

    from eventatlas.data.ingest import ingest_samples
    from eventatlas.methods import get_spec
    from eventatlas.methods.context import method_runner

    run = method_runner(get_spec("untuned"))

    monkeypatch.setenv("EVENTATLAS_CACHE", str(tmp_path / "cache"))
    ingest_samples(tmp_path / "ds", names=["ontoevent"])
    ds = next((tmp_path / "ds").iterdir())
    sents = pq.read_table(ds / "mentions.parquet", columns=["sentence"])["sentence"].to_pylist()
    model = tiny_bert(tmp_path, sents + ["[ ]"])
    BertTokenizerFast(vocab=str(model / "vocab.txt"), do_lower_case=True).save_pretrained(model)
    cfg = {"model_id": str(model), "representations": ["trigger"], "clusterings": ["agglomerative"], "k_seen": 2,
           "device": "cpu"}
    res = run(ds, tmp_path / "marked", config=None, trigger_markers=True, **cfg)
    sel = pq.read_table(tmp_path / "marked" / "selected_mentions.parquet").to_pylist()
    assert all(r["sentence"][r["trigger_start"] - 2:r["trigger_end"] + 2] == f"[ {r['trigger']} ]" for r in sel)
    assert {r["variant"] for r in res.metrics} == {"trigger_markers"}
    plain = run(ds, tmp_path / "plain", **cfg)
    assert {r["variant"] for r in plain.metrics} == {None}


def test_ensemble_is_clustered_with_the_members_manifold_neighbour_count(tmp_path, monkeypatch):
    """Posthoc ensembles used the default neighbour count (all N) even where the run config or the dataset
    protocol sets k_manifold (MAVEN 150/18: 3000); they now use the members' setting."""
    import eventatlas.evaluation.clustering as ec
    from eventatlas.evaluation.clustering import cluster_partitions
    from eventatlas.induction.evaluate import distance_inputs, ensemble, ensemble_rows
    from eventatlas.induction.training import save_npz
    from eventatlas.methods.batch_attention import BatchAttentionConfig, cluster_settings
    from eventatlas.evaluation.metrics import clustering_scores

    rng = np.random.default_rng(0)
    y = [f"T{i % 3}" for i in range(30)]
    centres = rng.normal(size=(3, 8)) * 3
    summaries, runs = [], []
    for s in range(2):
        emb = {k: (centres[[i % 3 for i in range(30)]] + rng.normal(size=(30, 8))).astype(np.float32)
               for k in ("Q", "K", "F")}
        runs.append(emb)
        path = save_npz(tmp_path / f"s{s}" / "epoch_00.npz", emb)
        summaries.append({"unseen_mention_ids": [f"m{i}" for i in range(30)], "unseen_labels": y,
                          "epoch_files": [str(path)], "chosen_epoch": {"paper": 0}, "stop_rule": "paper"})
    seen_k = []
    real = ec.cluster

    def spy(x, algorithm, n, **kw):
        if algorithm.startswith("manifold"):
            seen_k.append(kw.get("k"))
        return real(x, algorithm, n, **kw)

    monkeypatch.setattr(ec, "cluster", spy)
    key = RowKey("toy", "batch_attention", -1, split="unseen", representation="trigger")
    rows = ensemble_rows(summaries, key, algorithms=("manifold",), k_manifold=5)
    assert seen_k and set(seen_k) == {5}
    expected = cluster_partitions(distance_inputs(ensemble(runs)), 3, algorithms=("manifold",), metric="precomputed",
                                  k_manifold=5)
    got = {r["variant"]: r["value"] for r in rows if r["metric"] == "ari"}
    assert got == {f"ensemble2:{inp}": pytest.approx(clustering_scores(y, lab.tolist())["ari"])
                   for (inp, _), lab in expected.items()}
    seen_k.clear()
    ensemble_rows(summaries, key, algorithms=("manifold",))
    assert set(seen_k) == {None}  # no setting: the algorithm's default (all N)
    # the members' setting: the run config first, else the dataset protocol
    assert cluster_settings(BatchAttentionConfig(), {"k_manifold": 3000}) == {"n_clusters": None, "k_manifold": 3000}
    assert cluster_settings(BatchAttentionConfig(k_manifold=7, n_clusters=4), {"k_manifold": 3000}) == \
        {"n_clusters": 4, "k_manifold": 7}


def test_only_the_main_process_prunes_the_saved_models(tmp_path):
    # under a data-parallel launch every process reaches prune_models; only the main one saved the
    # models, and two processes deleting the same files raced (the second unlink raised)
    from eventatlas.induction.training import SilhouetteSelection

    models = tmp_path / "models"
    models.mkdir()
    for e in range(3):
        (models / f"epoch_{e:02d}.pt").write_bytes(b"x")
    cb = SilhouetteSelection([], "trigger", tmp_path, [2])
    cb.prune_models(1, is_main=False)  # another rank: leaves them to the main process
    assert sorted(p.name for p in models.iterdir()) == ["epoch_00.pt", "epoch_01.pt", "epoch_02.pt"]
    cb.prune_models(1, is_main=True)
    assert sorted(p.name for p in models.iterdir()) == ["epoch_01.pt"]
    SilhouetteSelection([], "trigger", tmp_path, [2], keep_models="all").prune_models(2)
    assert sorted(p.name for p in models.iterdir()) == ["epoch_01.pt"]


def test_untuned_baseline_in_trained_runs_is_clustered_like_the_untuned_method(tmp_path, monkeypatch):
    """`untuned:ft` inside a trained run was clustered on a float32 `1 - F F^T` by its own `cluster` calls,
    while the `untuned` method clusters the same features by cosine in float64. manifold_sym on real MAVEN
    147/18 mentions moves by ~4 ARI under float32 rounding (47.0 vs 43.1 for identical features), so the two
    baselines disagreed. Now the untuned features are one more input of the trained inputs' clustering call,
    with float64 cosine distances, and every partition equals the untuned method's."""
    import eventatlas.evaluation.clustering as ec
    from eventatlas.evaluation.clustering import cluster_and_score
    from eventatlas.induction.evaluate import evaluate_trained
    from eventatlas.induction.training import save_npz

    rng = np.random.default_rng(3)
    n, types = 60, 4
    y = [f"T{i % types}" for i in range(n)]
    centres = rng.normal(size=(types, 16))

    def unit_features(scale):
        x = (centres[[i % types for i in range(n)]] + scale * rng.normal(size=(n, 16))).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)  # as the model's features: unit float32 rows

    untuned = {"F": unit_features(1.5), "Q": unit_features(1.0), "K": unit_features(1.0)}
    trained = {"F": unit_features(0.7), "Q": unit_features(0.7), "K": unit_features(0.7)}
    summary = {"unseen_mention_ids": [f"m{i}" for i in range(n)], "unseen_labels": y,
               "epoch_files": [str(save_npz(tmp_path / "epochs" / "epoch_00.npz", trained))],
               "untuned_file": str(save_npz(tmp_path / "epochs" / "untuned.npz", untuned)),
               "chosen_epoch": {"paper": 0}, "stop_rule": "paper"}
    calls = []
    real = ec.cluster_partitions

    def spy(inputs, *a, **kw):
        calls.append(dict(inputs))
        return real(inputs, *a, **kw)

    monkeypatch.setattr(ec, "cluster_partitions", spy)
    algos = ("agglomerative", "manifold", "manifold_sym", "affinity")
    key = RowKey("toy", "batch_attention", 0, split="unseen", representation="trigger")
    rows, _ = evaluate_trained(tmp_path, summary, key=key, n_clusters=None, k_manifold=None, inputs=("ft", "attn_dot"),
                               algorithms=algos, model_id=None, names={}, mapping=None, framenet_dir=None,
                               umap_plot=False)
    # one clustering call for the trained inputs and the untuned baseline
    assert len(calls) == 1 and set(calls[0]) == {"ft", "attn_dot", "untuned:ft"}
    # its distances are the float64 cosine distances of the untuned features (float32 rounding is ~1e-7)
    f = untuned["F"].astype(np.float64)
    f /= np.linalg.norm(f, axis=1, keepdims=True)
    assert np.abs(calls[0]["untuned:ft"] - (1.0 - f @ f.T)).max() < 1e-12
    # and every partition scores as the untuned method's own call (cluster_and_score on the features, cosine)
    monkeypatch.setattr(ec, "cluster_partitions", real)
    ref = cluster_and_score(untuned["F"], y, n_clusters=types, algorithms=algos,
                            key=RowKey("toy", "untuned", 0, representation="trigger"))
    want = {(r["clustering"], r["metric"]): r["value"] for r in ref.rows}
    got = {(r["clustering"], r["metric"]): r["value"] for r in rows
           if r["task"] == "induction" and r["variant"] == "untuned:ft"}
    assert set(got) == set(want) and got == pytest.approx(want)


# ----------------------------------------------------------------------------- sentence-disjoint hold-out
def _sentences_table(counts: dict[str, int], per_sentence: int = 3) -> pa.Table:
    """Mentions grouped ``per_sentence`` to a sentence; every 7th sentence text recurs under a second id."""
    labels = [t for t, c in counts.items() for _ in range(c)]
    labels = [labels[i] for i in np.random.default_rng(0).permutation(len(labels))]
    n = len(labels)
    sent = [f"sentence {(i // per_sentence) - ((i // per_sentence) % 7 == 1)} about things" for i in range(n)]
    return pa.table({"mention_id": [f"m{i}" for i in range(n)], "labels": [[t] for t in labels],
                     "sentence": sent, "trigger_start": [0] * n, "trigger_end": [8] * n})


def test_heldout_sentences_are_disjoint_deterministic_and_recorded():
    from eventatlas.data.selection import heldout_sentence_mask

    table = _sentences_table(COUNTS)
    kw = dict(n_unseen=3, unseen_min_mentions=10, unseen_seed=0, heldout_sentences=0.3, heldout_seed=0)
    train = select_labelled(table, **kw)
    held = select_labelled(table, part="heldout", **kw)
    full = select_labelled(table, n_unseen=3, unseen_min_mentions=10, unseen_seed=0)
    # disjoint by sentence text (recurring texts fall on one side), and the two parts cover the selection
    assert set(train.sentences).isdisjoint(held.sentences)
    assert len(train) + len(held) == len(full)
    assert sorted(train.mention_ids + held.mention_ids) == sorted(full.mention_ids)
    # the type split is the dataset's in both parts
    assert train.unseen_types == held.unseen_types == full.unseen_types
    assert train.seen_types == held.seen_types == full.seen_types
    # recorded with the draw, the counts and a digest of the held-out texts; same in both parts
    rt, rh = train.record["heldout"], held.record["heldout"]
    n_sent = len(set(table["sentence"].to_pylist()))
    assert rt["n_sentences"] == rh["n_sentences"] == n_sent
    assert rt["n_heldout_sentences"] == rh["n_heldout_sentences"] == len(set(held.sentences))
    assert rt["heldout_sha256"] == rh["heldout_sha256"]
    assert 0.1 < rt["n_heldout_sentences"] / n_sent < 0.5
    assert train.record["drops"]["heldout_part"]["n"] == len(held)
    assert (rt["part"], rh["part"]) == ("train", "heldout")
    # deterministic: another row order gives the same parts; another seed another draw
    again = select_labelled(table.take(pa.array(np.arange(len(table))[::-1])), part="heldout", **kw)
    assert sorted(again.mention_ids) == sorted(held.mention_ids)
    other = select_labelled(table, part="heldout", **{**kw, "heldout_seed": 1})
    assert other.record["heldout"]["heldout_sha256"] != rh["heldout_sha256"]
    # the side of a sentence is the hash rule's, by hand for one text
    import hashlib
    t = "sentence 0 about things"
    side = int.from_bytes(hashlib.sha256(f"0:{t}".encode()).digest()[:8], "big") < int(0.3 * 2**64)
    assert heldout_sentence_mask([t], 0.3, 0)[0] == side
    with pytest.raises(ValueError, match="needs heldout_sentences"):
        select_labelled(table, part="heldout")
    with pytest.raises(ValueError, match=r"in \(0, 1\)"):
        heldout_sentence_mask([t], 1.0)


def test_heldout_part_flows_from_the_method_configs():
    """batch_attention's protocol and untuned's config carry the hold-out into the selection; a training
    config's hold-out with ``part: heldout`` (what ``eventatlas evaluate RUN --params`` adds) selects the
    held-out part."""
    from eventatlas.induction.protocol import select_mentions
    from eventatlas.methods.batch_attention import BatchAttentionConfig
    from eventatlas.methods.untuned import UntunedConfig

    table = _sentences_table(COUNTS)
    trained = BatchAttentionConfig(n_unseen=3, unseen_min_mentions=10, heldout_sentences=0.3)
    applied = trained.model_copy(update={"part": "heldout"})
    a, b = select_mentions(table, trained, 0), select_mentions(table, applied, 0)
    assert set(a.sentences).isdisjoint(b.sentences) and b.record["heldout"]["part"] == "heldout"
    assert UntunedConfig(heldout_sentences=0.3, part="heldout").part == "heldout"
    with pytest.raises(ValueError):
        BatchAttentionConfig(heldout_sentences=1.5)
