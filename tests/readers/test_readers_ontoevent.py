from __future__ import annotations

import json
from collections import defaultdict

import pytest
from conftest import shared_path

from eventatlas.config import samples_dir
from eventatlas.io import Rejects
from eventatlas.readers import ontoevent
from support.readers import assert_offsets


def collect(path, **kw):
    r, st, out = Rejects("t"), {}, defaultdict(list)
    for t, row in ontoevent.read(path, rejects=r, stats=st, **kw):
        out[t].append(row)
    return out, r, st


@pytest.mark.shared_data
def test_real_ontoevent_counts_and_offsets():
    src = shared_path("ontoevent_maven", "event_relation.json")
    out, r, st = collect(src)
    ms = out["mentions"]
    assert len(ms) == 5003 and len({m["mention_id"] for m in ms}) == 5003
    assert len({m["labels"][0] for m in ms}) == 50
    assert_offsets(ms)
    raw = json.loads(src.read_text())
    # trigger text (source lower-cased) equals our original-cased slice, case-insensitively
    by_key = {(m["doc_id"], m["sent_idx"], tuple(json.loads(m["extra"])["trigger_pos"])): m for m in ms}
    for a, b in raw["CAUSE"][:200]:
        for x in (a, b):
            assert by_key[(x["doc_id"], x["sent_id"], tuple(x["trigger_pos"]))]["trigger"].lower() == x["trigger"].lower()
    rel = defaultdict(int)
    for x in out["mention_relations"]:
        rel[x["relation"]] += 1
    assert dict(rel) == {"CAUSE": 1703, "BEFORE": 306, "AFTER": 609, "CAUSEDBY": 152, "EQUAL": 519}
    assert len(out["type_relations"]) == 347 + 84 + 84
    types = {t["type_id"]: t for t in out["event_types"]}
    assert types["Proecess.Process-Start"]["parent_id"] == "Proecess" and types["Proecess.Process-Start"]["name"] == "Process Start"
    assert all(t["parent_id"] in types for t in types.values() if t["parent_id"])
    # most sentences keep the original text; the few where tokens cannot be aligned are counted
    assert st["sentence_from_tokens"] < 50 and len(r) == 0


def test_sample_relations_and_original_case():
    out, r, _ = collect(samples_dir() / "ontoevent")
    assert_offsets(out["mentions"])
    assert len(out["mentions"]) == 8  # 'surrendered' and 'destroyed' appear in several pairs: deduplicated
    storm = next(m for m in out["mentions"] if m["labels"] == ["Natural-Disaster.Catastrophe"])
    assert storm["trigger"] == "Storm"  # tokens are lower-cased, the kept sentence is not
    assert {x["relation"] for x in out["mention_relations"]} == {"CAUSE", "BEFORE", "AFTER", "CAUSEDBY", "EQUAL"}
    assert len(out["mention_relations"]) == 8 and len(r) == 0


def test_bad_records_become_rejects(tmp_path):
    good = json.loads((samples_dir() / "ontoevent" / "event_relation.json").read_text())
    a, b = good["CAUSE"][0]
    shifted = dict(b, trigger_pos=[b["trigger_pos"][0] + 1, b["trigger_pos"][1] + 1])
    missing = {k: v for k, v in a.items() if k != "event_mention"}
    p = tmp_path / "event_relation.json"
    p.write_text(json.dumps({"CAUSE": [[a, shifted], [missing, b]], "BEFORE": [[a, b]]}))
    out, r, _ = collect(p)
    c = r.counts()
    assert c["offset_mismatch"] == 1 and c["missing_field"] == 1 and c["relation_dropped"] == 2
    assert len(out["mention_relations"]) == 1
