"""Model selection on the labelled dev part (eventatlas.induction.dev): the seen types' mentions in the
held-out sentences; the (epoch, input, algorithm) with the best dev ARI is chosen and its weights applied."""
from __future__ import annotations

import numpy as np
import pytest

from eventatlas.induction.dev import choose, dev_rows, heldout_part, partition_aris

PROTO = {"k_seen": 2, "heldout_sentences": 0.5, "heldout_seed": 0}


def _selections(root):
    from support.mini_events import write_mini_events

    from eventatlas.induction.protocol import select_mentions
    from eventatlas.methods.batch_attention import BatchAttentionConfig

    ds = write_mini_events(root)
    cfg = BatchAttentionConfig(**PROTO)
    return ds, cfg, select_mentions(ds, cfg, 0), heldout_part(cfg, ds, 0, k_seen_default=None)


def test_dev_part_is_the_seen_types_mentions_of_the_heldout_sentences(tmp_path):
    import pyarrow.parquet as pq

    from eventatlas.data.selection import heldout_sentence_mask

    ds, _, train, held = _selections(tmp_path)
    dev = dev_rows(held)
    seen = set(train.seen_types)
    assert seen == {"Conflict.Attack", "Life.Death"}  # the 2 most frequent (7 mentions each; ties by id)
    # by hand from the whole table: every mention of a seen type whose sentence the hash holds out, no other
    allm = pq.read_table(ds / "mentions.parquet").to_pylist()
    mask = heldout_sentence_mask([m["sentence"] for m in allm], 0.5, 0)
    want = sorted(m["mention_id"] for m, h in zip(allm, mask) if h and m["labels"][0] in seen)
    got = sorted(held.mention_ids[i] for i in dev)
    assert got == want and 0 < len(got) < 14
    assert {held.labels[i] for i in dev} <= seen  # never an unseen type
    assert not set(held.sentences[i] for i in dev) & set(train.sentences)  # never a training sentence
    assert not set(dev) & set(held.eval_index.tolist())  # disjoint from the unseen mentions scored
    from eventatlas.methods.batch_attention import BatchAttentionConfig

    with pytest.raises(ValueError, match="heldout_sentences"):  # no hold-out, no dev part
        heldout_part(BatchAttentionConfig(k_seen=2), ds, 0, k_seen_default=None)


def test_choice_is_the_argmax_over_epochs_inputs_and_algorithms_ties_earliest():
    curves = [{"ft/agglomerative": 0.10, "attn_cos/manifold": 0.30},
              {"ft/agglomerative": 0.50, "attn_cos/manifold": 0.20},
              {"ft/agglomerative": 0.40, "attn_cos/manifold": 0.50}]  # 0.50 again, later: not chosen
    assert choose(curves) == {"epoch": 1, "input": "ft", "algorithm": "agglomerative", "dev_ari": 0.50}
    assert choose([{"ft/manifold": float("nan"), "attn_cos/agglomerative": -0.1}])["input"] == "attn_cos"
    with pytest.raises(ValueError):
        choose([])


def test_partition_aris_scores_every_input_and_algorithm():
    # two tight groups of features: ft (cosine of F) recovers them exactly, ARI 1 by hand
    f = np.array([[1, 0, 0], [0.99, 0.01, 0], [0.98, 0.02, 0], [0, 1, 0], [0.01, 0.99, 0], [0, 0.98, 0.02]],
                 np.float32)
    emb = {"F": f, "Q": f, "K": f}
    out = partition_aris(emb, list("aaabbb"), ["ft", "attn_cos"], ["agglomerative"])
    assert set(out) == {"ft/agglomerative", "attn_cos/agglomerative"}
    assert out["ft/agglomerative"] == pytest.approx(1.0)


@pytest.mark.timeout(120)
def test_chosen_epoch_is_the_dev_argmax_and_its_weights_are_the_applied_ones(tmp_path, monkeypatch):
    """A tiny random BERT trained 3 epochs with the dev rule; the dev curve is scripted (0.1, 0.7, 0.3 for the
    best input/algorithm) so the argmax is not the last epoch: epoch 1's weights must be the saved model's."""
    import torch

    from support.mini_events import mini_tiny_bert

    from eventatlas.induction import dev as devmod
    from eventatlas.induction.protocol import train_representation
    from safetensors.torch import load_file

    from eventatlas.modeling.saved import ModelWriter

    from eventatlas.methods.batch_attention import BatchAttentionConfig

    ds, _, train, held = _selections(tmp_path)
    model = mini_tiny_bert(tmp_path)
    cfg = BatchAttentionConfig(**PROTO, model_id=str(model), select_on="dev", keep_models="all", dev_diagnostic=False,
                               inputs=["ft", "attn_dot"], algorithms=["agglomerative"], naming_weight=0,
                               augmentation="dropout_view", stop_window=1, max_length=32, device="cpu",
                               train={"epochs": 3, "batch_size": 4, "max_steps_per_epoch": 2, "lr": 1e-3,
                                      "head_lr": 1e-2, "warmup_steps": 0, "precision": "fp32",
                                      "threads": 1, "checkpoints": False, "plot": False, "progress": False})
    script = iter([{"ft/agglomerative": 0.1, "attn_dot/agglomerative": 0.0},
                   {"ft/agglomerative": 0.2, "attn_dot/agglomerative": 0.7},
                   {"ft/agglomerative": 0.3, "attn_dot/agglomerative": 0.25}])
    seen_labels = []

    def scripted(emb, labels, inputs, algorithms, **kw):
        seen_labels.append(sorted(set(labels)))
        return next(script)

    monkeypatch.setattr(devmod, "partition_aris", scripted)
    writer = ModelWriter(tmp_path / "run", method="batch_attention")
    summary, res = train_representation(train, cfg, "trigger", tmp_path / "run" / "trigger", seed=0, device="cpu",
                                        type_texts={}, writer=writer, dev_sel=held)
    writer.close(representation="trigger", epoch=summary["chosen_epoch"]["dev"], precision="fp32")
    dev = summary["dev"]
    # the dev part was scored every epoch, on the seen types only
    assert len(dev["curves"]) == 3 and all(set(s) <= set(train.seen_types) for s in seen_labels)
    best = int(np.argmax([max(c.values()) for c in dev["curves"]]))
    assert best == 1 and summary["chosen_epoch"]["dev"] == 1 and summary["stop_rule"] == "dev"
    assert dev["choice"] == {"epoch": 1, "input": "attn_dot", "algorithm": "agglomerative", "dev_ari": 0.7}
    assert dev["n_dev_mentions"] == len(dev_rows(held))
    assert "paper" in summary["chosen_epoch"]  # the label-free rule's choice is kept beside it
    # the trainer logged the monitored dev_ari each epoch
    assert [h["eval/dev_ari"] for h in summary["history"]] == [0.1, 0.7, 0.3]
    # the applied weights are epoch 1's (EarlyStopping restored them; the saved model holds them)
    epochs = [torch.load(tmp_path / "run" / "trigger" / "models" / f"epoch_{e:02d}.pt", weights_only=True)
              for e in range(3)]
    state = load_file(str(writer.dir / writer.card.heads["clusterer_trigger"].file))
    clus = {k[len("clusterer."):]: v for k, v in epochs[1].items() if k.startswith("clusterer.")}
    assert set(state) == set(clus) and all(torch.equal(torch.as_tensor(state[k]), clus[k]) for k in clus)
    last = {k[len("clusterer."):]: v for k, v in epochs[2].items() if k.startswith("clusterer.")}
    assert any(not torch.equal(torch.as_tensor(state[k]), last[k]) for k in last)
    assert writer.card.inference["trigger"]["dev_choice"]["epoch"] == 1
    assert writer.card.inference["trigger"]["stop_rule"] == "dev" and writer.card.epoch == 1


@pytest.mark.timeout(120)
def test_frozen_side_is_chosen_on_the_same_dev_part(tmp_path, monkeypatch):
    """untuned with select_on dev: each marker option x algorithm is scored on the dev part (split dev); the
    best dev ARI picks the option and algorithm whose held-out unseen rows are repeated as dev_chosen."""
    from support.mini_events import mini_tiny_bert, write_mini_events

    from eventatlas.methods import get_spec
    from eventatlas.methods.context import method_runner

    monkeypatch.setenv("EVENTATLAS_CACHE", str(tmp_path / "cache"))
    ds = write_mini_events(tmp_path)
    model = mini_tiny_bert(tmp_path)
    run = method_runner(get_spec("untuned"))
    res = run(ds, tmp_path / "frozen", config=None, model_id=str(model), representations=["trigger"],
              clusterings=["agglomerative", "manifold"], part="heldout", select_on="dev",
              marker_options=[False, True], device="cpu", projection="none", **PROTO)
    ari = [r for r in res.metrics if r["metric"] == "ari"]
    dev = {(r["variant"], r["clustering"]): r["value"] for r in ari if r["split"] == "dev"}
    assert set(dev) == {(f"dev:{o}", a) for o in ("no_markers", "trigger_markers") for a in ("agglomerative", "manifold")}
    ch = res.params["dev_choice"]
    best = max(dev.values())
    assert dev[(f"dev:{ch['option']}", ch["algorithm"])] == best == ch["dev_ari"]
    scored = {(r["variant"], r["clustering"]): r["value"] for r in ari if r["split"] != "dev"}
    assert scored[("dev_chosen", "dev_chosen")] == scored[(ch["option"], ch["algorithm"])]
    assert {v for v, _ in scored} == {"no_markers", "trigger_markers", "dev_chosen"}
    # the dev part: the seen types' mentions in the held-out sentences
    _, _, _, held = _selections(tmp_path / "again")
    assert ch["n_dev_mentions"] == len(dev_rows(held))
