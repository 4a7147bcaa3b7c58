"""The event_detection family end to end on the self-written mini world (5 types, 32 sentences) with a tiny
random BERT: the parts are sentence-disjoint, dev chooses the epoch and threshold, the rows are the strict
scores of the held-out predictions it writes, the lexical baseline sits beside them, and the model is saved."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from eventatlas.data import Manifest, NotApplicable
from eventatlas.methods import SPECS
from eventatlas.methods.context import run_in_dir
from support.mini_events import mini_tiny_bert, write_mini_events

PARAMS = {"complete_sentences": True, "heldout_sentences": 0.3, "dev_sentences": 0.3, "thresholds": [0.3, 0.5, 0.7],
          "eval_batch_size": 8, "train": {"epochs": 3, "batch_size": 4, "lr": 1e-3, "precision": "fp32"}}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("det")
    return write_mini_events(root / "data"), mini_tiny_bert(root)


def test_a_dataset_not_declared_complete_is_refused(world, tmp_path):
    ddir, model = world
    with pytest.raises(NotApplicable, match="not declared fully annotated"):
        run_in_dir(SPECS["event_detection"], ddir, tmp_path, config={"model_id": str(model)}, device="cpu")


def test_detector_trains_selects_on_dev_and_scores_heldout(world, tmp_path):
    from eventatlas.detection.protocol import gold_of, split
    from eventatlas.detection.words import sentences_of
    from eventatlas.evaluation.detection import detection_scores

    ddir, model = world
    res = run_in_dir(SPECS["event_detection"], ddir, tmp_path, seed=1, config={**PARAMS, "model_id": str(model)},
                     device="cpu")
    man = Manifest.read(ddir)
    parts = split(sentences_of(man.read_table("mentions"), None), 0.3, 0.3, 0)
    texts = {k: {s.text for s in v} for k, v in parts.items()}
    assert not (texts["train"] & texts["heldout"]) and not (texts["dev"] & texts["heldout"])
    assert res.params["parts"]["heldout"] == {"sentences": len(parts["heldout"]),
                                              "triggers": sum(len(s.gold) for s in parts["heldout"])}
    th = res.params["threshold"]
    assert th in PARAMS["thresholds"] and 1 <= res.params["epoch"] <= 3
    by = {(r["split"], r["variant"], r["metric"]): r["value"] for r in res.metrics}
    assert by[("dev", None, "threshold")] == th and by[("dev", None, "epochs_selected")] == res.params["epoch"]
    # the held-out rows are the strict scores of the predictions the run wrote
    pred = pq.read_table(tmp_path / "detections_heldout.parquet").to_pylist()
    got = detection_scores([((p["doc_id"], p["sent_idx"]), p["start"], p["end"], p["type"]) for p in pred],
                           gold_of(parts["heldout"]))
    for m in ("ti_precision", "ti_recall", "ti_f1", "tc_f1", "n_gold"):
        assert by[("heldout", "detector", m)] == pytest.approx(got[m])
    assert by[("heldout", "detector", "n_gold")] == res.params["parts"]["heldout"]["triggers"]
    assert all(p["sentence"][p["start"]:p["end"]] == p["trigger"] and p["score"] >= th for p in pred)
    # the lexical baseline: every held-out trigger word was a training trigger of its type in this world
    assert by[("heldout", "lexical", "ti_recall")] > 0.5
    assert {a["kind"] for a in res.artifacts} >= {"detections/heldout", "plot/dev_threshold"}
    card = json.loads((tmp_path / "model.partial" / "model_card.json").read_text())
    assert card["method"] == "event_detection" and set(card["heads"]) == {"identification", "typing"}
    assert card["inference"]["threshold"] == th and card["inference"]["types"] == sorted(
        {t for s in parts["train"] for _, _, t in s.gold})
