from __future__ import annotations

import json
from collections import defaultdict

import pytest
from conftest import shared_path

from eventatlas.config import samples_dir
from eventatlas.readers import maven, maven_fewshot
from support.readers import collect, assert_offsets


def test_maven_sample_splits_negatives_candidates_coref():
    out, r, st = collect(maven, samples_dir() / "maven")
    ms = out["mentions"]
    assert_offsets(ms)
    assert len(r) == 0
    by_split = defaultdict(list)
    for m in ms:
        by_split[m["split"]].append(m)
    assert len(by_split["train"]) == 13 and len(by_split["valid"]) == 3 and len(by_split["test"]) == 4
    assert all(m["labels"] == [] for m in by_split["test"]) and all(m["labels"] for m in by_split["train"])
    assert st["negative_triggers"] == 3 + 1 and st["test_candidates"] == 4  # test negatives are unlabeled candidates
    # multi-mention events -> coref to the event's first mention
    assert len(out["mention_relations"]) == 4 and {x["relation"] for x in out["mention_relations"]} == {"coref"}
    types = {t["type_id"]: t for t in out["event_types"]}
    assert types["Rescuing"]["definition"].startswith("Saving someone")  # maven_definition.json beside the data
    # original sentence text kept: "Harlow Bay" sentence has "6.8" which tokens split as one token
    assert any("magnitude 6.8 earthquake" in m["sentence"] for m in ms)


def test_maven_offset_mismatch_and_missing_sentence(tmp_path):
    docs = [json.loads(l) for l in (samples_dir() / "maven" / "train.jsonl").open()]
    docs[0]["events"][0]["mention"][0]["trigger_word"] = "started"  # text says "began"
    docs[0]["events"][1]["mention"][0]["sent_id"] = 99
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    out, r, _ = collect(maven, tmp_path)
    assert r.counts() == {"offset_mismatch": 1, "bad_sentence": 1}
    assert "events[0].mention[0]" in r.rows[0]["location"] and r.rows[0]["location"].startswith("line 1")


@pytest.mark.shared_data
def test_real_fewshot_counts_definitions_offsets():
    src = shared_path("maven", "fewshot")
    out, r, st = collect(maven_fewshot, src)
    assert st["instances"] == 574 and len(r) == 0
    assert len(out["documents"]) == 549  # instance ids repeat across type lists
    ms = out["mentions"]
    assert len(ms) == 593
    assert_offsets(ms)
    raw = json.loads((src / "dev.json").read_text())
    assert len({(str(i["id"]), e["start"], e["end"], e["event_type"]) for v in raw.values() for i in v for e in i["events"]}) == 593
    types = {t["type_id"]: t for t in out["event_types"]}
    assert len(types) == 168 and all(t["definition"] for t in types.values())
    assert {m["split"] for m in ms if m["labels"][0] in raw} == {"dev"}  # the 16 few-shot types are the dev split


def test_fewshot_sample_dedup_and_listed_under():
    out, r, st = collect(maven_fewshot, samples_dir() / "maven_fewshot")
    assert st["instances"] == 8 and len(out["mentions"]) == 8 and len(r) == 0
    assert_offsets(out["mentions"])
    raid = next(m for m in out["mentions"] if m["trigger"] == "raid")
    assert json.loads(raid["extra"])["listed_under"] == ["Attack", "Rescuing"]
    assert next(m for m in out["mentions"] if m["trigger"] == "destroyed")["split"] == "train"


def test_maven_sentence_list_sample_keeps_sentences_without_events(tmp_path):
    from eventatlas.readers import maven_sentences

    out, r, st = collect(maven_sentences, samples_dir() / "maven_sentences" / "maven_sentences_sample.json")
    ms = out["mentions"]
    assert_offsets(ms)
    assert len(r) == 0 and st == {"sentences": 10, "sentences_without_events": 2}
    assert len(out["documents"]) == 10 and len(ms) == 13  # 1+2+2+2+2+2+1+1 events in 8 sentences
    assert sorted(json.loads(d["extra"])["n_events"] for d in out["documents"])[:3] == [0, 0, 1]
    assert {m["labels"][0] for m in ms} == {t["type_id"] for t in out["event_types"]}
    # a broken entry is a counted reject, the rest is read
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": 1, "tokens": ["A", "b"], "events": [{"text": "b", "start": 1, "end": 5,
                                                                          "event_type": "X"}]},
                               {"id": 1, "tokens": ["again"], "events": []}, {"tokens": ["no", "id"]}]))
    out, r, _ = collect(maven_sentences, bad)
    assert sorted(x["reason"] for x in r.rows) == ["bad_offsets", "duplicate_document", "missing_field"]
    assert len(out["documents"]) == 1 and not out["mentions"]


@pytest.mark.shared_data
def test_maven_sentence_list_real_subset():
    from eventatlas.readers import maven_sentences

    out, r, st = collect(maven_sentences, shared_path("maven", "subset", "maven_subset_a.json"))
    assert_offsets(out["mentions"])
    assert len(r) == 0 and st == {"sentences": 3979, "sentences_without_events": 284}
    assert len(out["mentions"]) == 9562 and len(out["event_types"]) == 165
    # definitions from the sibling fewshot/ folder
    assert sum(1 for t in out["event_types"] if t["definition"]) == 165
