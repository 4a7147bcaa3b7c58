"""Grounding model pieces on hand-made cases: gold forcing, tau_c, hierarchy discovery h(e_i, e_j),
mention markers, dot-product retrieval; and the method end to end on the FrameNet benchmark sample."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from eventatlas.grounding.crossencoder import force_golds, pair_input, tune_threshold
from eventatlas.grounding.data import MARKERS, Mentions
from eventatlas.grounding.discovery import discovery_scores, h_scores, rank_parents, retrieved_sets
from eventatlas.modeling.inputs import ModelInput



def test_force_golds_replaces_the_lowest_negatives():
    ranked = [5, 3, 9, 1, 7, 2, 8, 4]
    # golds 11 and 12 were not retrieved: they take the places of the two lowest-scoring negatives (4, then 8)
    assert force_golds(ranked, [3, 11, 12]) == [5, 3, 9, 1, 7, 2, 12, 11]
    assert force_golds(ranked, [3, 4]) == ranked  # all golds present: unchanged
    assert force_golds([1, 2], [7, 8, 9]) == [7, 8]  # more golds than k: the first k golds
    assert len(force_golds(ranked, [20, 21, 22, 23])) == 8


def test_pair_input_truncates_the_candidate_side():
    m = ModelInput([101, 5, 6, 102], [2], [])
    c = ModelInput([101, 7, 8, 9, 10, 102], [], [])
    assert pair_input(m, c, 20).ids == [101, 5, 6, 102, 7, 8, 9, 10, 102]
    p = pair_input(m, c, 7)
    assert p.ids == [101, 5, 6, 102, 7, 8, 102] and p.target == [0]  # [CLS] pooled, final [SEP] kept


def test_tune_threshold_picks_the_best_strict_accuracy():
    cands = np.array([[1, 2, 3], [4, 5, 6]])
    scores = np.array([[0.9, 0.6, 0.2], [0.8, 0.3, 0.1]])
    tau, vals = tune_threshold(scores, cands, [[1, 2], [4]], grid=[0.1, 0.5, 0.7])
    assert tau == 0.5 and vals["strict_acc"] == 1.0  # 0.5 keeps {1, 2} and {4}
    tau, vals = tune_threshold(scores, cands, [[1], [4]], grid=[0.1, 0.5, 0.7])
    assert tau == 0.7 and vals["strict_acc"] == 1.0
    with pytest.raises(TypeError, match="swapped"):
        tune_threshold(cands, scores, [[1], [4]])  # the ids passed as scores


TOPK = np.array([[1, 0, 4, 5], [1, 0, 2, 5], [2, 4, 0, 5], [3, 1, 5, 4], [3, 5, 2, 4]])
PARENT = np.array([-1, 0, 0, 1, -1, -1, 0])  # 1 -> 0, 2 -> 0, 3 -> 1, 6 -> 0 (6: retrieved by no mention)


def test_h_on_a_hand_made_retrieval():
    sets = retrieved_sets(TOPK, 4)
    assert sets[0] == {0, 1, 2} and sets[1] == {0, 1, 3} and sets[3] == {3, 4} and 6 not in sets
    h = h_scores(sets)
    # h(1, 0) = |{0,1,3} & {0,1,2}| / |{0,1,3}| = 2/3 ; h(0, 1) = 2/3 too here ; h(3, 1) = |{3,4} & {0,1,3}| / 2 = 1/2
    assert h[1][0] == pytest.approx(2 / 3) and h[3][1] == pytest.approx(0.5) and h[1][5] == pytest.approx(1.0)
    assert h[4][3] == pytest.approx(2 / 4) and h[3][4] == pytest.approx(1.0)  # asymmetric: |M_i| differs
    assert 0 not in h[3]  # no shared mention, no score
    # ties (h(1,0) = h(1,4) = 2/3) broken by candidate index
    assert rank_parents(h, 1) == [5, 0, 4, 2, 3]
    assert rank_parents(h, 3) == [4, 5, 1, 2]


def test_discovery_recall_counts_unlinked_events_as_misses():
    s = discovery_scores(TOPK, PARENT, [1, 2, 3, 4, 6], k_retrieve=4, ks=(1, 2, 4))
    # non-root events 1, 2, 3, 6: gold parents ranked 2nd, 2nd, 3rd, and absent (6 is never retrieved)
    assert s["discovery_recall@1"] == 0.0
    assert s["discovery_recall@2"] == pytest.approx(2 / 4)
    assert s["discovery_recall@4"] == pytest.approx(3 / 4)
    assert s["discovery_events"] == 4 and s["discovery_linked"] == pytest.approx(3 / 4)


def test_mention_markers_wrap_the_span():
    m = Mentions(["a"], ["Police arrested him ."], [7], [15], [[0]])
    texts, a, b = m.marked()
    assert texts[0] == f"Police {MARKERS[0]} arrested {MARKERS[1]} him ."
    assert texts[0][a[0]:b[0]] == f"{MARKERS[0]} arrested {MARKERS[1]}"


def test_dot_product_retrieval_is_not_cosine():
    from eventatlas.grounding.biencoder import retrieve

    cands = np.array([[1.0, 0.0], [10.0, 1.0], [0.0, 1.0]], dtype=np.float32)
    ids, scores = retrieve(np.array([[1.0, 0.2]], dtype=np.float32), cands, 2)
    assert ids.tolist() == [[1, 0]] and scores[0].tolist() == pytest.approx([10.2, 1.0])  # cosine would rank 0 first


def test_retrieval_among_a_subset_returns_pool_indices():
    from eventatlas.grounding.biencoder import retrieve

    cands = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.5, 0.5]], dtype=np.float32)
    ids, scores = retrieve(np.array([[1.0, 0.0]], dtype=np.float32), cands, 2, among=[2, 3])
    assert ids.tolist() == [[3, 2]] and scores[0].tolist() == pytest.approx([0.5, 0.0])  # 0 and 1 are not searched


@pytest.fixture(scope="module")
def sample_world(tmp_path_factory):
    from eventatlas.config import samples_dir
    from eventatlas.data.ingest import ingest
    from support.tiny_models import tiny_bert

    root = tmp_path_factory.mktemp("grounding")
    ingest("framenet_grounding", samples_dir() / "framenet_grounding", out_dir=root / "fng", dataset="fng", progress=False)
    texts = pq.read_table(root / "fng" / "mentions.parquet")["sentence"].to_pylist()
    texts += [f"{r['name']} {r['definition']}" for r in pq.read_table(root / "fng" / "event_types.parquet").to_pylist()]
    return root, tiny_bert(root, texts)


def test_method_runs_every_variant_and_the_cross_encoder(sample_world, monkeypatch):
    from eventatlas.methods import SPECS
    from eventatlas.methods.context import method_runner

    root, model = sample_world
    monkeypatch.setenv("EVENTATLAS_CACHE", str(root / "cache"))
    spec = SPECS["grounding"]
    cfg = spec.validate({"model_id": str(model), "variants": ["untuned", "baseline", "multilabel", "hp", "hjl", "hp_hjl"],
                         "cross_encoder": True, "device": "cpu", "cross_k": 4, "ks": [1, 4], "mention_pool": "trigger",
                         "train": {"epochs": 1, "batch_size": 4}, "hp": {"epochs": 1}})
    res = method_runner(spec)(root / "fng", root / "run", seed=0, config=cfg)
    rows = {(r["variant"], r["split"], r["metric"]): r["value"] for r in res.metrics}
    for v in ("untuned", "baseline", "multilabel", "hp", "hjl", "hp_hjl"):
        for split in ("dev", "test"):
            assert 0 <= rows[(v, split, "recall_at_min")] <= 1 and (v, split, "recall@4") in rows
    cross = f"cross:{res.params['best_on_dev']}"
    assert {(cross, "test", m) for m in ("strict_acc", "micro_f1", "macro_f1")} <= set(rows)
    assert 0.05 <= res.params["cross"]["tau_c"] <= 0.95
    assert all(r["task"] == "grounding" for r in res.metrics)
    # the hierarchy loss ran in HJL (a logged term), HP pre-trained first (its own phase)
    import pandas as pd

    steps = pd.concat([pd.read_parquet(p) for p in res.train_steps])
    assert {"hp/hp", "hp_hjl/hp", "hjl", "cross:" + res.params["best_on_dev"]} <= set(steps.phase)
    assert any("hierarchy" in dict(t) for t in steps[steps.phase == "hjl"].terms)
    assert (root / "run" / "multilabel" / "model" / "config.json").exists()


def test_ground_command_bad_input_one_line_each(eventatlas_env):
    from typer.testing import CliRunner

    from eventatlas import config
    from eventatlas.cli import app

    run = config.runs_dir() / "grounding-x"
    run.mkdir(parents=True)
    (run / "grounding.json").write_text('{"dataset": "nocands", "best_on_dev": "multilabel"}')
    ds = config.datasets_dir() / "nocands"
    ds.mkdir(parents=True)
    (ds / "manifest.json").write_text('{"dataset": "nocands"}')
    cases = [(["--run", "grounding-x", "--text", "no marked mention"], "no trigger marked with [brackets]"),
             (["--run", "grounding-nope", "--text", "Police [arrested] him ."], "unknown run 'grounding-nope'"),
             (["--run", "grounding-x", "--text", "Police [arrested] him ."], "has no candidates")]
    for args, msg in cases:
        r = CliRunner().invoke(app, ["ground", "--dataset", "nocands", *args])
        assert r.exit_code == 2 and msg in r.output and len(r.output.strip().splitlines()) == 1, r.output


class _StubEncoder:
    """collate returns the items themselves: enough to inspect which candidates a batch holds."""

    hidden_size = 4

    def collate(self, items, representation):
        return list(items)


def test_pool_negatives_are_all_negative_columns_from_outside_the_eval_events():
    # regression: with in-batch golds as the only candidates, never-seen pool events
    # were never pushed away and outranked the gold even for training mentions
    from eventatlas.grounding.biencoder import LinkingTask

    golds = [[0, 5], [1, 5], [0]]
    items = [ModelInput([1, 2], [], []) for _ in golds]
    cands = [ModelInput([100 + c], [], []) for c in range(12)]
    pool = [c for c in range(12) if c not in (8, 9)]  # 8, 9: events of an evaluation split
    for loss in ("bce", "softmax"):
        task = LinkingTask(_StubEncoder(), items, golds, cands, np.full(12, -1), loss=loss, negatives=4, negative_pool=pool)
        batch = task.make_batch(np.arange(3), np.random.default_rng(0))
        ids = [it.ids[0] - 100 for it in batch["candidates"]]
        n_in = 3 if loss == "bce" else 2  # distinct golds {0, 5, 1} / distinct atomic golds {0, 1}
        extra = ids[n_in:]
        assert len(extra) == 4 and len(set(ids)) == len(ids)  # no candidate twice
        assert not set(extra) & {0, 1, 5, 8, 9}  # never a gold of the batch, never an evaluation event
        if loss == "bce":
            assert batch["target"].shape == (3, 7) and batch["target"][:, n_in:].sum() == 0
            assert batch["target"][:, :n_in].tolist() == [[1, 1, 0], [0, 1, 1], [1, 0, 0]]
        else:
            assert batch["target"].tolist() == [0, 1, 0]  # columns of the atomic golds, unchanged
    with pytest.raises(ValueError, match="negative_pool"):
        LinkingTask(_StubEncoder(), items, golds, cands, np.full(12, -1), negatives=2)


def test_cosine_score_is_scaled_cosine_and_dot_is_raw():
    import torch

    from eventatlas.grounding.biencoder import BiEncoder

    m = torch.tensor([[3.0, 4.0]])
    c = torch.tensor([[1.0, 0.0], [0.0, 10.0]])
    dot = BiEncoder(_StubEncoder(), score="dot")
    assert dot.scores(m, c).tolist() == [[3.0, 40.0]] and dot.bias is None
    cos = BiEncoder(_StubEncoder(), score="cosine", scale=10.0)
    assert cos.scores(m, c).tolist() == [[pytest.approx(6.0), pytest.approx(8.0)]]  # 10 * (0.6, 0.8)
    assert float(cos.bias.detach()) == -5.0  # BCE offset starts at scale / 2 below 0
    with pytest.raises(ValueError, match="score"):
        BiEncoder(_StubEncoder(), score="l2")


def test_outside_eval_excludes_every_eval_event_even_beyond_the_caps(sample_world):
    from eventatlas.grounding.data import load

    root, _ = sample_world
    full = pq.read_table(root / "fng" / "mentions.parquet", columns=["labels", "split"]).to_pylist()
    gd = load(root / "fng", max_mentions={"dev": 1, "test": 1}, splits=("train", "dev"))
    idx = gd.index
    held_out = {idx[l] for r in full if r["split"] != "train" for l in r["labels"]}
    assert held_out and held_out > gd.events_of("dev")  # the caps and the unloaded test split hide some
    pool = set(gd.outside_eval())
    assert not pool & held_out and pool | held_out == set(range(len(gd.type_ids)))
    assert gd.events_of("train") <= pool


def test_method_with_cosine_negatives_and_dev_selected_epoch(sample_world, monkeypatch):
    from eventatlas.methods import SPECS
    from eventatlas.methods.context import method_runner

    root, model = sample_world
    monkeypatch.setenv("EVENTATLAS_CACHE", str(root / "cache"))
    spec = SPECS["grounding"]
    cfg = spec.validate({"model_id": str(model), "variants": ["multilabel"], "device": "cpu", "ks": [1, 4],
                         "score": "cosine", "negatives": 3, "select_on_dev": True, "patience": 1,
                         "train": {"epochs": 3, "batch_size": 4}})
    res = method_runner(spec)(root / "fng", root / "run_cos", seed=0, config=cfg)
    info = res.params["variants"]["multilabel"]["train"]
    by_epoch = info["dev_recall_at_min_by_epoch"]
    assert 1 <= len(by_epoch) <= 3 and all(0 <= v <= 1 for v in by_epoch)
    assert by_epoch[info["best_epoch"]] == max(by_epoch)
    cv = np.load(root / "run_cos" / "multilabel" / "candidate_vectors.npy")
    assert np.allclose(np.linalg.norm(cv, axis=1), 1.0, atol=1e-5)  # cosine runs store unit vectors
    dev_r = next(r["value"] for r in res.metrics if r["variant"] == "multilabel" and r["split"] == "dev"
                 and r["metric"] == "recall_at_min")
    assert dev_r == pytest.approx(max(by_epoch))  # the kept weights are the selected epoch's


def test_cross_encoder_feed_is_picked_by_dev_recall_at_cross_k():
    from eventatlas.grounding.protocol import pick_on_dev

    dev = {"baseline": {"recall_at_min": 0.079, "recall@8": 0.009},  # README run A, dev
           "multilabel": {"recall_at_min": 0.069, "recall@8": 0.101},
           "hp": {"recall_at_min": 0.079, "recall@8": 0.05}}
    assert pick_on_dev(dev, "recall_at_min") == "baseline"  # first of a tie
    # the cross-encoder can only recover golds inside the top 8: the multilabel model holds all of them 11x as often
    assert pick_on_dev(dev, "recall@8") == "multilabel"
    assert pick_on_dev({}, "recall@8") is None


def test_msoftmax_linking_batches_keep_the_multilabel_targets():
    from eventatlas.grounding.biencoder import LinkingTask
    from eventatlas.grounding.protocol import variant_label
    from eventatlas.methods.grounding import GroundingConfig

    golds = [[0, 5], [1, 5], [0]]
    items = [ModelInput([1, 2], [], []) for _ in golds]
    cands = [ModelInput([100 + c], [], []) for c in range(12)]
    task = LinkingTask(_StubEncoder(), items, golds, cands, np.full(12, -1), loss="msoftmax", negatives=2,
                       negative_pool=range(6, 12))
    batch = task.make_batch(np.arange(3), np.random.default_rng(0))
    assert batch["target"].tolist() == [[1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [1, 0, 0, 0, 0]]  # every gold a positive
    cfg = GroundingConfig(multilabel_loss="msoftmax")
    assert [variant_label(v, cfg) for v in ("untuned", "baseline", "multilabel", "hp_hjl")] == \
        ["untuned", "baseline", "multilabel+msoftmax", "hp_hjl+msoftmax"]
    assert variant_label("hp", GroundingConfig()) == "hp"
    with pytest.raises(ValueError, match="loss must be one of"):
        LinkingTask(_StubEncoder(), items, golds, cands, np.full(12, -1), loss="hinge")


def test_method_msoftmax_rows_and_cross_fed_by_dev_recall_at_k(sample_world, monkeypatch):
    from eventatlas.methods import SPECS
    from eventatlas.methods.context import method_runner

    root, model = sample_world
    monkeypatch.setenv("EVENTATLAS_CACHE", str(root / "cache"))
    spec = SPECS["grounding"]
    cfg = spec.validate({"model_id": str(model), "variants": ["baseline", "multilabel"], "device": "cpu", "ks": [1, 2],
                         "score": "cosine", "negatives": 3, "multilabel_loss": "msoftmax", "cross_encoder": True,
                         "cross_k": 3, "train": {"epochs": 1, "batch_size": 4}})
    from eventatlas.grounding import crossencoder as X

    forced_lists = []  # the cross-encoder's training lists, before gold forcing

    def spy(ranked, golds):
        forced_lists.append(list(ranked))
        return force_golds(ranked, golds)

    monkeypatch.setattr(X, "force_golds", spy)
    res = method_runner(spec)(root / "fng", root / "run_msm", seed=0, config=cfg)
    rows = {(r["variant"], r["split"], r["metric"]): r["value"] for r in res.metrics}
    assert {v for v, _, _ in rows} >= {"baseline", "multilabel+msoftmax"} and ("multilabel", "dev", "recall@1") not in rows
    assert (root / "run_msm" / "multilabel+msoftmax" / "model" / "config.json").exists()
    # recall@3 is not among ks: it is computed for the pick, which is the best dev Recall@cross_k
    assert res.params["best_on_dev_by"] == "recall@3"
    from eventatlas.evaluation.grounding import grounding_scores
    from eventatlas.grounding import biencoder as B
    from eventatlas.grounding.biencoder import retrieve
    from eventatlas.grounding.data import load
    from eventatlas.grounding.protocol import _vectors
    from eventatlas.methods.grounding import GroundingConfig
    from eventatlas.modeling.mention_encoder import MentionEncoder

    gd = load(root / "fng", max_mentions={"dev": None}, splits=("train", "dev"))
    r3 = {}
    for v in ("baseline", "multilabel+msoftmax"):
        enc = MentionEncoder(root / "run_msm" / v / "model", max_length=128)
        mv = _vectors(enc, B.mention_inputs(enc, gd.splits["dev"]), GroundingConfig(score="cosine"), "cpu")
        ids, _ = retrieve(mv, np.load(root / "run_msm" / v / "candidate_vectors.npy"), 3)
        r3[v] = grounding_scores([list(r) for r in ids], gd.splits["dev"].golds, ks=[3])["recall@3"]
    assert r3[res.params["best_on_dev"]] == max(r3.values())
    assert res.params["cross"]["bi_encoder"] == res.params["best_on_dev"]
    assert (f"cross:{res.params['best_on_dev']}", "test", "strict_acc") in rows
    # zero-shot: no event of an evaluation split in the cross-encoder's training lists, not even as a negative
    gd_all = load(root / "fng", splits=("train", "dev", "test"))
    eval_events = gd_all.events_of("dev") | gd_all.events_of("test")
    assert forced_lists and eval_events and not eval_events & {c for r in forced_lists for c in r}


def test_title_span_and_masking_on_a_hand_made_pair():
    from eventatlas.grounding.crossencoder import mask_titles, title_span

    # [CLS] m m [SEP] | t t [ENT_TITLE] d [SEP]   (CLS 2, SEP 3, MASK 4, ENT_TITLE 99)
    pair = ModelInput([2, 10, 11, 3, 20, 21, 99, 30, 3], [0], [])
    assert title_span(pair.ids, 99, 3) == (4, 6)
    assert title_span([2, 10, 3, 20, 3], 99, 3) is None  # marker truncated away
    assert title_span([2, 3, 99, 30, 3], 99, 3) is None  # empty title
    rng = np.random.default_rng(0)
    masked = mask_titles([pair], [(4, 6)], 1.0, 4, rng)[0]
    assert masked.ids == [2, 10, 11, 3, 4, 4, 99, 30, 3] and masked.target == [0]
    assert pair.ids[4:6] == [20, 21]  # the stored pair is untouched (a fresh draw every batch)
    assert mask_titles([pair], [(4, 6)], 0.0, 4, rng)[0].ids == pair.ids
    # p = 0.5 over many pairs: about half are masked, and the draw follows the rng (reproducible)
    many = mask_titles([pair] * 400, [(4, 6)] * 400, 0.5, 4, np.random.default_rng(1))
    share = sum(m.ids[4] == 4 for m in many) / 400
    again = mask_titles([pair] * 400, [(4, 6)] * 400, 0.5, 4, np.random.default_rng(1))
    assert 0.4 < share < 0.6 and [m.ids for m in many] == [m.ids for m in again]


def test_cross_task_masks_training_titles_with_the_encoders_tokens(sample_world):
    from eventatlas.grounding import biencoder as B
    from eventatlas.grounding import crossencoder as X
    from eventatlas.grounding.data import load
    from eventatlas.modeling.mention_encoder import MentionEncoder

    root, model = sample_world
    gd = load(root / "fng")
    enc = MentionEncoder(model, max_length=64)
    B.add_markers(enc)
    c_items = B.candidate_inputs(enc, gd)
    ms = gd.splits["train"]
    pairs = X.mention_pairs(enc, ms, [[0, 1]] * len(ms.ids), c_items, 32)
    task = X.CrossTask(enc, pairs, [[1.0, 0.0]] * len(pairs), title_mask=1.0)
    batch = task.make_batch(np.arange(2), np.random.default_rng(0))
    title_id = enc.tokenizer.convert_tokens_to_ids(MARKERS[2])
    mask_id = enc.tokenizer.mask_token_id
    for row in batch["pairs"]["input_ids"].tolist():
        b = row.index(title_id)
        a = max(j for j in range(b) if row[j] == enc.tokenizer.sep_token_id) + 1
        assert b > a and set(row[a:b]) == {mask_id}  # the whole title, nothing else
        assert row[b + 1] != mask_id  # the description stays
    plain = X.CrossTask(enc, pairs, [[1.0, 0.0]] * len(pairs)).make_batch(np.arange(2), np.random.default_rng(0))
    assert mask_id not in plain["pairs"]["input_ids"].tolist()[0]
    with pytest.raises(ValueError, match="probability"):
        X.CrossTask(enc, pairs, [[1.0, 0.0]] * len(pairs), title_mask=1.5)
