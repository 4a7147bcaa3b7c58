"""EMR Siamese loss (hand-computed), stacked per-query networks (independent), scores."""
import numpy as np
import pytest
import torch

from eventatlas.emr.losses.siamese import siamese_loss
from eventatlas.emr.models import (QueryNetworks, SiameseParams, adhoc_query, positive_pairs, siamese_rank_scores,
                                   siamese_scores, train_query_networks)


def test_siamese_loss_hand_computed():
    S = torch.tensor([0.5, -0.2, 1.2, 0.3, -0.4])
    y = torch.tensor([1, 1, 1, 0, 0])
    # y=1: (1-S)^2 unless S > 1 -> 0.25, 1.44, 0 ; y=0: S^2 -> 0.09, 0.16 (negative cosines penalised too)
    per = siamese_loss(S, y, reduction="none")
    assert per.tolist() == pytest.approx([0.25, 1.44, 0.0, 0.09, 0.16])
    assert float(siamese_loss(S, y)) == pytest.approx(1.94 / 5)
    # one mean per network over the last dimension
    two = siamese_loss(torch.stack([S, S * 0]), torch.stack([y, y]))
    assert two.tolist() == pytest.approx([1.94 / 5, 3 / 5])
    with pytest.raises(ValueError):
        siamese_loss(S, y, reduction="max")


def test_positive_pairs_all_then_capped():
    rng = np.random.default_rng(0)
    assert positive_pairs(3, 200, rng).tolist() == [[0, 1], [0, 2], [1, 2]]
    assert positive_pairs(2, 200, rng).tolist() == [[0, 1]]
    capped = positive_pairs(30, 200, rng)  # 435 pairs -> 200
    assert len(capped) == 200 and (capped[:, 0] < capped[:, 1]).all() and len({tuple(p) for p in capped}) == 200


def test_stacked_networks_equal_networks_alone():
    net = QueryNetworks(3, 6, hidden=4, layers=3, generator=torch.Generator().manual_seed(0))
    x = torch.randn(5, 6)
    out = net(x)  # the same batch through every network
    assert out.shape == (3, 5, 4)
    W, b = [w[1] for w in net.weights], [c[1] for c in net.biases]
    h = torch.relu(x @ W[0] + b[0])
    h = torch.relu(h @ W[1] + b[1])
    assert torch.allclose(out[1], h @ W[2] + b[2], atol=1e-6)


def _shots(seed, G=2, k=3, d=8):
    return np.random.default_rng(seed).normal(size=(G, k, d)).astype(np.float32)


def test_training_one_query_does_not_touch_another():
    p = SiameseParams(epochs=3, batch_size=5, lr=1e-3, negatives=7, hidden=8, query_batch=2)
    outside = np.random.default_rng(9).normal(size=(20, 8)).astype(np.float32)
    a = _shots(1)
    b = a.copy()
    b[1] = _shots(2)[1]  # only query 1 differs
    na, _ = train_query_networks(a, outside, p, seed=4)
    nb, _ = train_query_networks(b, outside, p, seed=4)
    for wa, wb in zip(na.weights, nb.weights):
        assert torch.allclose(wa[0], wb[0], atol=1e-6)  # network 0 trained the same
        assert not torch.allclose(wa[1], wb[1])


def test_training_lowers_the_loss_and_separates_the_query_type():
    rng = np.random.default_rng(0)
    d = 16
    centre, shared = rng.normal(size=d), rng.normal(size=d) * 4  # a dominant direction every mention shares
    same = (centre + shared + rng.normal(scale=0.3, size=(12, d))).astype(np.float32)
    other = (shared + rng.normal(scale=1.0, size=(60, d))).astype(np.float32)
    p = SiameseParams(epochs=40, batch_size=10, lr=3e-3, negatives=30, hidden=16)
    corpus = np.concatenate([same[4:], other])
    net, hist = train_query_networks(same[None, :4], corpus, p, seed=0)
    assert hist[-1] < hist[0] / 2
    s = siamese_scores(net, same[None, :4], corpus)[0]
    # margin 0.24-0.39 over seeds 0-4 (the batch order now comes from the training core's sampler)
    assert s[:8].mean() > s[8:].mean() + 0.2
    scores, info = siamese_rank_scores([same[:4], same[:4]], corpus, p, seed=0)
    assert scores.shape == (2, len(corpus)) and info["queries"] == 2
    with pytest.raises(ValueError, match="at least 2 examples"):
        train_query_networks(same[None, :1], corpus, p)


def test_adhoc_query_is_the_mean_unit_shot():
    shots = np.array([[3.0, 0.0], [0.0, 2.0]], dtype=np.float32)
    assert adhoc_query(shots).tolist() == pytest.approx([0.5, 0.5])


def test_siamese_tuning_reads_every_epoch_of_each_grid_cell(tmp_path):
    """The dev grid on a synthetic episode: one training per (lr, negatives), dev MAP per epoch."""
    import pyarrow as pa

    from eventatlas.emr.episodes import sample_episode
    from eventatlas.emr.protocol import tune_siamese
    from eventatlas.methods.emr import SiameseTuning

    rng = np.random.default_rng(0)
    labels = [t for t in "ABC" for _ in range(20)] + [None] * 30
    centres = {t: rng.normal(size=8) for t in "ABC"}
    X = np.stack([centres[t] + rng.normal(scale=0.5, size=8) if t else rng.normal(size=8) for t in labels])
    pool = pa.table({"mention_id": [f"m{i}" for i in range(len(labels))], "label": labels,
                     "source": ["mention"] * len(labels)})
    ep = sample_episode(pool, min_mentions=20, n_corpus=8, n_query=4, n_dev=8, n_none=10, queries_per_type=1,
                        ks=(2,), seed=0)
    grid = SiameseTuning(lr=[1e-3, 1e-2], negatives=[10], epochs=[1, 3], k=2, queries_per_type=2, n_none=5)
    out = tune_siamese(ep, X.astype(np.float32), SiameseParams(batch_size=10, hidden=8, query_batch=4), grid, seed=0,
                       device="cpu")
    assert len(out["grid"]) == 2 * 1 * 3  # every epoch of each training is scored
    assert [r["epochs"] for r in out["grid"][:3]] == [1, 2, 3]
    cands = [r for r in out["grid"] if r["candidate"]]
    assert {r["epochs"] for r in cands} == {1, 3}
    best = max(r["dev_map"] for r in cands)
    assert out["best_dev_map"] == best and out["chosen"]["epochs"] in (1, 3)
    assert out["chosen"]["lr"] in (1e-3, 1e-2) and out["chosen"]["hidden"] == 8
    assert 0 < out["adhoc_dev_map"] <= 1 and out["dev_episode"]["m"] == 3
