"""Retrieval beyond the surface word: trigger lemmas, novel-trigger sets, the supervised contrastive loss,
and the encoder fine-tuned for retrieval (model ``contrastive``) chosen and saved by the dev rule."""
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from typer.testing import CliRunner

from eventatlas.cli import app
from eventatlas.data.ingest import ingest
from eventatlas.data.lemmas import trigger_lemma
from eventatlas.emr.episodes import Episode, Query
from eventatlas.emr.losses.supcon import SupervisedContrastiveLoss
from eventatlas.run.runner import run_method
from eventatlas.tracking.records import load_metrics, read_record

runner = CliRunner()


def test_trigger_lemmas_fold_inflection_not_synonyms():
    assert trigger_lemma("attacked") == trigger_lemma("Attacks") == "attack"
    assert trigger_lemma("bought") == "buy" and trigger_lemma("took part") == "take part"
    assert trigger_lemma("raid") != trigger_lemma("attack")  # another word for the event stays another lemma


def test_episode_novel_sets_are_the_relevant_items_with_another_lemma():
    pool = pa.table({"trigger": ["attacked", "attacks", "raided", "bombing", "bought", "attack"],
                     "label": ["A", "A", "A", "A", "B", "A"]})
    corpus = np.array([1, 2, 3, 4])  # attacks (same lemma as a shot), raided, bombing (novel), bought (other type)
    ep = Episode(pool=pool, types=["A", "B"], corpus=corpus, corpus_labels=["A", "A", "A", "B"], query_pool={},
                 dev={}, queries={2: [Query("A", np.array([0, 5]))]})
    assert [r.tolist() for r in ep.novel(2)] == [[1, 2]]  # corpus positions of raided and bombing


def test_supervised_contrastive_loss_hand_computed():
    """Three unit vectors, labels a a b, tau 1: s01 = 0, s02 = 1, s12 = 0. Anchor 0 has the positive 1
    against {1, 2}: -log(e^0 / (e^0 + e^1)); anchor 1 the positive 0 against {0, 2}: -log(1/2); anchor 2
    has no positive and is left out of the mean."""
    e = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    want = (-math.log(1 / (1 + math.e)) - math.log(0.5)) / 2
    assert SupervisedContrastiveLoss(1.0)(e, torch.tensor([0, 0, 1])).item() == pytest.approx(want, rel=1e-5)
    # tau 0.5 doubles every logit: anchor 0: -log(1 / (1 + e^2)), anchor 1: -log(1/2)
    want = (-math.log(1 / (1 + math.e ** 2)) - math.log(0.5)) / 2
    assert SupervisedContrastiveLoss(0.5)(e * 3.0, torch.tensor([0, 0, 1])).item() == pytest.approx(want, rel=1e-5)
    with pytest.raises(ValueError, match="temperature"):
        SupervisedContrastiveLoss(0.0)


WORDS = {  # 8 types, 3 trigger words each: a query's other two words are its novel triggers
    "Attack": ["attacked", "raided", "bombed"], "Acquisition": ["bought", "acquired", "purchased"],
    "Death": ["died", "perished", "drowned"], "Arriving": ["arrived", "landed", "docked"],
    "Election": ["elected", "voted", "chose"], "Meeting": ["met", "gathered", "convened"],
    "Building": ["built", "constructed", "erected"], "Arrest": ["arrested", "detained", "jailed"]}
SUBJECTS = ["The rebels", "Officials", "The company", "Two men", "The army", "Villagers", "Investors", "Police"]


def _corpus(path):
    docs, n = [], 0
    for t, words in WORDS.items():
        for i in range(12):
            w = words[i % 3]
            toks = SUBJECTS[i % len(SUBJECTS)].split() + [w, "near", "the", "river", "on", "monday", "."]
            at = len(SUBJECTS[i % len(SUBJECTS)].split())
            docs.append({"id": f"s{n:03d}", "tokens": toks,
                         "events": [{"text": w, "start": at, "end": at + 1, "event_type": t}]})
            n += 1
    path.write_text(json.dumps(docs))
    return [" ".join(d["tokens"]) for d in docs]


def test_diverse_positives_draw_one_mention_per_lemma_before_repeating():
    from eventatlas.emr.finetune import ContrastiveTask

    class _Enc:  # make_batch only needs collate; lengths come from the items
        def collate(self, items, rep):
            return {"rows": [it.row for it in items]}

    class _Item:
        def __init__(self, row):
            self.row, self.ids = row, [0] * (1 + row % 3)

    # Attack: 6 x "attack", 1 "raid", 1 "bombing"; Arrest: 3 x "arrest", 1 "detain"
    keys = ["attack"] * 6 + ["raid", "bombing"] + ["arrest"] * 3 + ["detain"]
    labels = ["Attack"] * 8 + ["Arrest"] * 4
    items = [_Item(i) for i in range(len(keys))]
    plain = ContrastiveTask(_Enc(), items, labels, types_per_batch=2, per_type=3, steps=1, representation="trigger",
                            temperature=0.1)
    diverse = ContrastiveTask(_Enc(), items, labels, types_per_batch=2, per_type=3, steps=1,
                              representation="trigger", temperature=0.1, keys=keys)
    rng = np.random.default_rng(0)
    for _ in range(20):
        attack = diverse._draw("Attack", rng)
        assert len(set(attack)) == 3 and {keys[i] for i in attack} == {"attack", "raid", "bombing"}
        arrest = diverse._draw("Arrest", rng)  # 2 lemmas for K = 3: both, then a second "arrest"
        assert len(set(arrest)) == 3 and {keys[i] for i in arrest} == {"arrest", "detain"}
    # a random draw of Attack holds all three lemmas only in 6 * 1 * 1 / C(8, 3) = 6/56 of the draws
    both = sum({keys[i] for i in plain._draw("Attack", rng)} == {"attack", "raid", "bombing"} for _ in range(400))
    assert both < 100
    batch = diverse.make_batch(np.zeros(1, np.int64), rng)
    assert sorted(batch["labels"].tolist()) == [0, 0, 0, 1, 1, 1] and len(set(batch["x"]["rows"])) == 6
    with pytest.raises(ValueError, match="2 lemma keys for 12"):
        ContrastiveTask(_Enc(), items, labels, types_per_batch=2, per_type=3, steps=1, representation="trigger",
                        temperature=0.1, keys=keys[:2])


def test_contrastive_encoder_is_chosen_on_dev_saved_and_searchable(eventatlas_env, tmp_path):
    from support.tiny_models import tiny_bert

    src = tmp_path / "sents.json"
    sents = _corpus(src)
    ddir = eventatlas_env / "data" / "datasets" / "synth"
    ingest("maven_sentences", src, out_dir=ddir, dataset="synth")
    enc = tiny_bert(tmp_path, sents, layers=1, name="tiny_enc")
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["Death", "Arriving", "Election", "Meeting"], "dev": ["Building", "Arrest"],
                                 "test": ["Attack", "Acquisition"]}))
    params = {"model_id": str(enc), "min_mentions": 11, "n_corpus": 6, "n_query": 5, "n_dev": 0, "n_none": 10,
              "queries_per_type": 2, "ks": [2, 5], "repetitions": 1, "representation": "trigger",
              "models": ["adhoc", "contrastive"], "no_event": False, "save_model": True,
              "meta": {"split_file": str(split), "eval_split": "test", "dev_split": "dev"},
              "contrastive": {"train": {"epochs": 3, "lr": 1e-3, "warmup_steps": 0, "plot": False},
                              "steps_per_epoch": 4, "types_per_batch": 4, "per_type": 3, "diverse_positives": True}}
    rec_path = run_method("emr", ddir, seed=0, params=params, device="cpu")
    rec = read_record(rec_path)
    run = rec["run"]
    assert run["status"] == "completed", run.get("error")
    p = run["params"]
    # trained on the train types only; evaluated on the test types; the dev types shaped the epoch
    assert p["split"]["seen"] == sorted(["Death", "Arriving", "Election", "Meeting"]) or \
        sorted(p["split"]["seen"]) == ["Arriving", "Death", "Election", "Meeting"]
    assert p["episodes"][0]["types"] == ["Acquisition", "Attack"] and p["split"]["dev_types"] == ["Building", "Arrest"]
    ft = p["contrastive"]
    assert ft["diverse_positives"] is True
    assert len(ft["dev_curve"]) == ft["epochs_trained"] <= 3
    assert ft["epochs_selected"] == int(np.argmax(ft["dev_curve"])) + 1 and ft["best_dev"] == max(ft["dev_curve"])
    rows = load_metrics(rec)
    test = {(r["variant"], r["setting"], r["metric"]): r["value"] for r in rows if r["split"] == "test"}
    assert ("contrastive", "k=5 m=2", "novel_recall@10") in test and ("adhoc", "k=5 m=2", "novel_recall@50") in test
    assert all(0 <= v <= 1 for (_, _, m), v in test.items() if m.startswith("novel_recall"))
    dev = [r for r in rows if r["split"] == "dev" and r["metric"] == "dev_rule"]
    assert {r["variant"] for r in dev} == {"adhoc", "contrastive"}
    best = max(dev, key=lambda r: r["value"])
    assert p["dev_choice"]["chosen"] == {"model": best["variant"], "representation": best["representation"]}
    # the dev rule is the mean of dev MAP and dev novel_recall@50
    dv = {(r["variant"], r["metric"]): r["value"] for r in rows if r["split"] == "dev"}
    for v in ("adhoc", "contrastive"):
        assert dv[(v, "dev_rule")] == pytest.approx((dv[(v, "map")] + dv[(v, "novel_recall@50")]) / 2)
    # the tuned encoder is the run's saved model: search --model run:<id> ranks with it
    card = json.loads((rec_path.parent / "model" / "model_card.json").read_text())
    assert card["encoder"] == "contrastive" and card["epoch"] == ft["epochs_selected"]
    run_id = rec_path.parent.name
    out = tmp_path / "hits.parquet"
    r = runner.invoke(app, ["search", "--dataset", "synth", "--model", f"run:{run_id}", "-q",
                            "Police [raided] the river .", "--top", "5", "-o", str(out)], terminal_width=300)
    assert r.exit_code == 0, r.output
    hits = pq.read_table(out)
    assert hits.num_rows == 5 and hits.schema.metadata[b"model"] == f"run:{run_id}".encode()
    # without --model (auto): the ranker this run's dev rule chose, said in a note
    r = runner.invoke(app, ["search", "--dataset", "synth", "-q", "Police [raided] the river .", "--top", "3"],
                      terminal_width=300)
    assert r.exit_code == 0, r.output
    want = f"run:{run_id}" if p["dev_choice"]["chosen"]["model"] == "contrastive" else "adhoc"
    assert f"note: --model {want} (" in r.output
