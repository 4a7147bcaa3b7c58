"""Data layer: typed manifests and kinds, registry protocols, labelled-mention selection with its drop record."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from eventatlas.data import Manifest, NotApplicable, protocol_for, select_labelled
from eventatlas.io import DatasetWriter

# type counts: A 3, B 2, C 2, D 1, E 1 (+ one unlabelled row); ties broken by type id
LABS = [["A"], ["A"], ["A"], ["C"], ["B"], ["C"], ["B", "A"], ["D"], ["E"], []]
EXTRA = ['{"lu": "x.v"}'] * 8 + ['{"lu": "y.n"}', None]


def _table():
    n = len(LABS)
    return pa.table({"mention_id": [f"m{i}" for i in range(n)], "labels": LABS, "extra": EXTRA,
                     "sentence": [f"s{i}" for i in range(n)], "trigger_start": [0] * n, "trigger_end": [1] * n,
                     "split": ["train"] * 9 + ["dev"]})


def test_seen_unseen_ties_and_the_drop_record():
    sel = select_labelled(_table(), k_seen=2)
    # seen = A (3) and B (2, wins the tie with C by id); unseen = C, C, D, E
    assert sel.seen_types == ["A", "B"] and sel.unseen_types == ["C", "D", "E"]
    assert sel.eval_labels.tolist() == ["C", "C", "D", "E"]
    assert [sel.mention_ids[i] for i in sel.eval_index] == ["m3", "m5", "m7", "m8"]
    assert sel.seen_index.tolist() == [0, 0, 0, -1, 1, -1, 1, -1, -1]  # the training view: all 9 labelled
    r = sel.record
    assert (r["n_types"], r["n_unseen_types"], r["n_types_clustered"]) == (5, 3, 3)
    assert r["drops"] == {"unlabelled": {"n": 1, "reason": "no gold label"},
                          "seen_type": {"n": 5, "reason": "mention of a seen type: trained on, not scored"}}
    assert sel.setting() == "2 seen / 3 unseen"


def test_filters_say_what_they_dropped():
    sel = select_labelled(_table(), k_seen=0, lu_pos="v")
    assert len(sel) == 8 and "E" not in sel.labels.tolist()  # E's LU is a noun
    assert sel.record["drops"]["lu_pos"] == {"n": 1, "reason": "lexical unit part of speech is not 'v'"}
    assert sel.setting() == "0 seen / 4 unseen, verbs"
    with pytest.raises(NotApplicable, match="only 0 unseen mentions"):
        select_labelled(_table(), k_seen=0, splits=["dev"])  # the dev row is unlabelled
    sel = select_labelled(_table(), k_seen=0, splits=["train"])
    assert sel.record["drops"]["split"] == {"n": 1, "reason": "split not in ['train']"}


def test_k_seen_is_clamped_and_recorded_not_an_error():
    sel = select_labelled(_table(), k_seen=10)
    assert sel.record["k_seen"] == 3 and sel.record["k_seen_requested"] == 10
    assert sorted(set(sel.eval_labels.tolist())) == ["D", "E"]
    with pytest.raises(NotApplicable, match="1 unseen types"):
        select_labelled(_table(), seen_types=["A", "B", "C", "D"])
    with pytest.raises(ValueError, match="seen_types not among"):
        select_labelled(_table(), seen_types=["Z"])


def test_subsamples_are_seeded_and_recorded():
    a = select_labelled(_table(), k_seen=0, max_eval=5, seed=1)
    b = select_labelled(_table(), k_seen=0, max_eval=5, seed=1)
    c = select_labelled(_table(), k_seen=0, max_eval=5, seed=2)
    ids = lambda s: [s.mention_ids[i] for i in s.eval_index]  # noqa: E731
    assert ids(a) == ids(b) != ids(c)
    assert a.record["subsampled"] and a.record["n_unseen_mentions"] == 9 and a.record["n_mentions_clustered"] == 5
    assert a.record["drops"]["eval_subsample"] == {"n": 4, "reason": "seeded subsample to max_eval=5"}
    t = select_labelled(_table(), k_seen=0, max_train=6, seed=0)
    assert len(t) == 6 and t.record["drops"]["train_subsample"]["n"] == 3


def _dataset(root, name, reader, mentions=(), pairs=(), types=()):
    with DatasetWriter(root / name, name) as w:
        for m in mentions:
            w.write("mentions", m)
        for p in pairs:
            w.write("event_pairs", p)
        for t in types:
            w.write("event_types", t)
        w.commit({"reader": reader, "fingerprint": f"fp-{name}"})
    return root / name


def _mention(i, labels):
    return {"mention_id": f"m{i}", "dataset": "d", "doc_id": "d", "sentence": "They met.", "trigger_start": 5,
            "trigger_end": 8, "trigger": "met", "labels": labels}


def test_manifest_kinds_fingerprint_and_protocol(tmp_path):
    typed = Manifest.read(_dataset(tmp_path, "onto", "ontoevent", [_mention(0, ["A"]), _mention(1, [])]))
    assert typed.kinds() == {"mentions", "typed_mentions"} and typed.data_fingerprint() == "fp-onto"
    assert typed.rows["mentions"] == 2 and typed.reader == "ontoevent"
    pairs = Manifest.read(_dataset(tmp_path, "hs", "hard_similarity", pairs=[
        {"dataset": "hs", "item_id": "1", "task": "hard_similarity", "score": 1.0}]))
    assert pairs.kinds() == {"event_pairs"}
    grounding = Manifest.read(_dataset(tmp_path, "wg", "wikigrounding", [_mention(0, ["Q1", "Q2"])], types=[
        {"dataset": "wg", "type_id": "Q1", "parent_id": "Q2"}, {"dataset": "wg", "type_id": "Q2"}]))
    assert "grounding" in grounding.kinds()
    # the registry's protocol: a task section, overridden by a method section; samples find their entry
    fn = Manifest.read(_dataset(tmp_path, "framenet_fulltext_sample", "framenet_jsonl", [_mention(0, ["F"])]))
    assert protocol_for(fn, "untuned")["k_seen"] == 0 and protocol_for(fn, "untuned")["lu_pos"] == "v"
    assert protocol_for(fn, "batch_attention")["k_seen"] == 100
    assert protocol_for(typed, "untuned") == {"k_seen": 10, "mapping": "ontoevent_framenet.tsv"}
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        Manifest.read(tmp_path / "nothing")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match="manifest.json: not valid JSON"):
        Manifest.read(tmp_path / "broken")
    assert json.loads((tmp_path / "onto" / "manifest.json").read_text())["dataset"] == typed.dataset
