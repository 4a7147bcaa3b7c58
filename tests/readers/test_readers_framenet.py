from __future__ import annotations

import json
import shutil
import zipfile
from collections import Counter

import pytest
from conftest import shared_path

from eventatlas.config import samples_dir
from eventatlas.errors import InputError
from eventatlas.readers import framenet, framenet_jsonl
from support.readers import collect, assert_offsets


@pytest.mark.shared_data
def test_real_frames_and_relations_without_fulltext():
    out, r, st = collect(framenet, shared_path("framenet17"))
    frames = {t["type_id"]: t for t in out["event_types"]}
    assert len(frames) == 1221 and len(r) == 0
    rel = Counter(x["relation"] for x in out["type_relations"])
    assert rel["Inheritance"] == 781 and rel["Subframe"] == 131 and rel["Precedes"] == 89 and sum(rel.values()) == 2070
    assert st["lu_index_entries"] == 13572
    ab = frames["Abandonment"]
    assert ab["parent_id"] == "Intentionally_affect"
    assert ab["definition"].startswith("An Agent leaves behind a Theme effectively rendering it")
    assert "<" not in ab["definition"] and "abandoned" not in ab["definition"]  # markup and examples removed
    extra = json.loads(ab["extra"])
    assert {fe["name"] for fe in extra["FEs"]} >= {"Agent", "Theme"} and any(lu["name"] == "abandon.v" for lu in extra["LUs"])
    assert any("Carolyn" in ex for ex in extra["examples"])
    # direction: source = child (sub), target = parent (super); every parent_id is a known frame
    inh = {(x["source_id"], x["target_id"]) for x in out["type_relations"] if x["relation"] == "Inheritance"}
    assert ("Abandonment", "Intentionally_affect") in inh
    assert all(f["parent_id"] in frames for f in frames.values() if f["parent_id"])
    assert sum(1 for f in frames.values() if f["parent_id"]) == len({s for s, _ in inh})


@pytest.mark.shared_data
def test_real_opensesame_jsonl_counts_and_offsets():
    d = shared_path("framenet17")
    out, r, st = collect(framenet_jsonl, d)
    lines = sum(1 for f in d.glob("*.jsonl") for l in f.open() if l.strip())
    assert lines == 19391 + 2272
    ms = out["mentions"]
    assert len(ms) + st["duplicate_mentions"] == lines and len(r) == 0  # identical annotations deduplicated
    assert Counter(m["split"] for m in ms) == {"train": 19090, "dev": 2271}
    assert_offsets(ms)
    first = json.loads(next((d / "fulltext_opensesame_dev.jsonl").open()))
    m0 = next(m for m in ms if m["sentence"] == first["text"] and m["trigger_start"] == first["target"][0] and m["labels"] == [first["frame"]])
    assert json.loads(m0["extra"]) == {"lu": first["lu"], "pos": first["lu"].rsplit(".", 1)[1]}
    assert [a["role"] for a in m0["arguments"]] == [fe[0] for fe in first["fe"]]


def test_sample_release_directory_and_zip(tmp_path):
    out, r, _ = collect(framenet, samples_dir() / "framenet")
    frames = {t["type_id"]: t for t in out["event_types"]}
    assert set(frames) == {"Event", "Intentionally_act", "Attack", "Arriving", "Surrendering"} and len(r) == 0
    assert frames["Attack"]["parent_id"] == "Intentionally_act" and frames["Event"]["parent_id"] is None
    assert frames["Attack"]["definition"] == "An Assailant physically attacks a Victim."
    assert ("Surrendering", "Attack", "Precedes") in {(x["source_id"], x["target_id"], x["relation"]) for x in out["type_relations"]}
    ms = out["mentions"]
    assert_offsets(ms)
    assert sorted((m["trigger"], m["labels"][0], m["split"]) for m in ms) == [
        ("arrived", "Arriving", "fulltext"), ("attacked", "Attack", "fulltext"), ("raid", "Attack", "exemplar"), ("surrendered", "Surrendering", "fulltext")]
    raid = next(m for m in ms if m["trigger"] == "raid")
    assert raid["arguments"] == [{"role": "Assailant", "text": None, "start": None, "end": None, "entity_id": "INI"}]
    # the same release as one zip (frame/ fulltext/ lu/ inside) gives the same rows
    z = tmp_path / "fn.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for p in (samples_dir() / "framenet").rglob("*.xml"):
            zf.write(p, "framenet/" + str(p.relative_to(samples_dir() / "framenet")))
    out2, _, _ = collect(framenet, z)
    assert sorted(m["mention_id"] for m in out2["mentions"]) == sorted(m["mention_id"] for m in ms)
    assert len(out2["event_types"]) == 5 and len(out2["type_relations"]) == 6


def test_broken_frame_xml_names_file_and_line(tmp_path):
    d = tmp_path / "fn"
    shutil.copytree(samples_dir() / "framenet", d)
    p = d / "frame" / "Attack.xml"
    p.write_text(p.read_text().replace("</frame>", "</fram>"))
    with pytest.raises(InputError) as e:
        collect(framenet, d)
    assert "Attack.xml" in str(e.value) and "malformed XML" in str(e.value) and str(e.value.location).startswith("line ")


def test_external_entity_in_fulltext_is_refused(tmp_path):
    d = tmp_path / "fn"
    shutil.copytree(samples_dir() / "framenet", d)
    p = next((d / "fulltext").glob("*.xml"))
    txt = p.read_text().replace('standalone="yes"?>', 'standalone="no"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>', 1)
    p.write_text(txt.replace("Relief columns", "&e; columns"))
    with pytest.raises(InputError, match="refused unsafe XML"):
        collect(framenet, d)


def test_jsonl_sample_and_bad_offsets(tmp_path):
    out, r, _ = collect(framenet_jsonl, samples_dir() / "framenet_jsonl")
    assert len(out["mentions"]) == 4 and len(r) == 0
    assert_offsets(out["mentions"])
    assert Counter(m["split"] for m in out["mentions"]) == {"train": 3, "dev": 1}
    rows = [json.loads(l) for l in (samples_dir() / "framenet_jsonl" / "fulltext_sample_train.jsonl").open()]
    rows[0]["target"] = [rows[0]["target"][0] + 2, rows[0]["target"][1] + 2]  # cuts into words
    rows[1]["target"] = [30, 500]
    del rows[2]["frame"]
    p = tmp_path / "x_train.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in rows))
    out, r, _ = collect(framenet_jsonl, p)
    assert r.counts() == {"offset_mismatch": 2, "missing_field": 1} and not out["mentions"]
    assert [x["location"] for x in r.rows] == ["line 1", "line 2", "line 3"]
