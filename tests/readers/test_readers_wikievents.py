from __future__ import annotations

import json
from collections import defaultdict

import pytest
from conftest import shared_path

from eventatlas.config import samples_dir
from eventatlas.errors import InputError
from eventatlas.io import Rejects
from eventatlas.readers import wikievents
from support.readers import assert_offsets


def collect(path, **kw):
    r, st, out = Rejects("t"), {}, defaultdict(list)
    for t, row in wikievents.read(path, rejects=r, stats=st, **kw):
        out[t].append(row)
    return out, r, st


@pytest.mark.shared_data
def test_real_wikievents_counts_and_offsets():
    src = shared_path("wikievents", "dev.jsonl")
    out, r, st = collect(src)
    ms = out["mentions"]
    assert len(ms) == 345 and len(out["documents"]) == 20 and len(r) == 0
    assert len({m["labels"][0] for m in ms}) == 35  # distinct types used in dev (meta.json lists 49)
    assert st["ontology_types"] == 49
    assert_offsets(ms)
    # the trigger text of the source equals our slice for every mention
    src_trig = {(json.loads(l)["doc_id"], e["trigger"]["start"]): e["trigger"]["text"] for l in src.open() for e in json.loads(l)["event_mentions"]}
    assert all(src_trig[(m["doc_id"], json.loads(m["extra"])["token_span"][0])] == m["trigger"] for m in ms)
    types = {t["type_id"]: t for t in out["event_types"]}
    assert types["Life.Die.Unspecified"]["parent_id"] == "Life" and types["Life"]["parent_id"] is None
    with_offsets = sum(a["start"] is not None for m in ms for a in m["arguments"])
    assert with_offsets == 426 and sum(len(m["arguments"]) for m in ms) == 428
    # the shipped coref file clusters entities: it annotates arguments, no event coref relations
    assert not out["mention_relations"]
    assert sum("arg_coref" in json.loads(m["extra"]) for m in ms) > 100


def test_sample_with_event_and_entity_coref():
    out, r, _ = collect(samples_dir() / "wikievents")
    assert_offsets(out["mentions"])
    assert len(out["mentions"]) == 7 and len(r) == 0
    assert [x["relation"] for x in out["mention_relations"]] == ["coref"]
    killed = next(m for m in out["mentions"] if m["trigger"] == "killed")
    assert json.loads(killed["extra"])["arg_coref"] == {"sample_bombing_1-T8": 0}
    ids = {m["mention_id"] for m in out["mentions"]}
    assert out["mention_relations"][0]["source_mention_id"] in ids and out["mention_relations"][0]["target_mention_id"] in ids


def test_shifted_trigger_and_missing_fields_are_rejected(tmp_path):
    docs = [json.loads(l) for l in (samples_dir() / "wikievents" / "dev.jsonl").open()]
    docs[0]["event_mentions"][0]["trigger"]["start"] += 1
    docs[0]["event_mentions"][0]["trigger"]["end"] += 1
    del docs[0]["event_mentions"][1]["trigger"]["text"]
    del docs[1]["tokens"]
    p = tmp_path / "dev.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in docs))
    out, r, _ = collect(p)
    assert r.counts() == {"offset_mismatch": 1, "missing_field": 2}
    assert {x["location"] for x in r.rows} == {"line 1 event_mentions[0]", "line 1 event_mentions[1]", "line 2"}
    assert len(out["mentions"]) == 2


def test_wrong_encoding_is_fatal(tmp_path):
    p = tmp_path / "dev.jsonl"
    p.write_bytes((samples_dir() / "wikievents" / "dev.jsonl").read_bytes().replace(b"Marlow", b"M\xe4rlow"))
    with pytest.raises(InputError, match="dev.jsonl:line 1: not valid UTF-8"):
        collect(p)
