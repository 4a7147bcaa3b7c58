"""The FrameNet hierarchical-grounding benchmark builder on the self-written sample and
on the real FrameNet 1.7 / 1.5 data."""
from __future__ import annotations

import json
from collections import defaultdict

import pyarrow.parquet as pq
import pytest
from conftest import shared_path

from eventatlas.config import samples_dir
from eventatlas.data import Manifest
from eventatlas.data.ingest import ingest
from eventatlas.errors import InputError
from eventatlas.readers import framenet_grounding
from support.readers import assert_offsets, collect

SAMPLE = samples_dir() / "framenet_grounding_edge"  # edge cases: a too-deep subframe, two parents, non-dictionary frames
CLEAN = samples_dir() / "framenet_grounding"  # the shipped sample (ingest-samples): no rejects


def _tables(out):
    return {t: {r["type_id"]: r for r in out["event_types"]} if t == "event_types" else rows for t, rows in out.items()}


def test_sample_hierarchy_dictionary_and_labels():
    out, rej, st = collect(framenet_grounding, SAMPLE)
    frames = {r["type_id"]: r for r in out["event_types"]}
    assert len(frames) == 23 and st["candidate_frames"] == 23  # the whole candidate pool, with definitions
    assert frames["Trial"]["definition"].startswith("A Defendant is tried")
    par = {k: v["parent_id"] for k, v in frames.items()}
    assert par["Court_examination"] == "Trial" and par["Trial"] == "Criminal_process" and par["Criminal_process"] is None
    # 4th level cut (trees of at most 3 levels), multi-parent resolved as the wiki builder does
    assert par["Witness_testimony"] is None
    reasons = {r["reason"] for r in rej.rows}
    assert {"hierarchy_depth_cut", "hierarchy_multi_parent"} <= reasons
    assert par["Birth"] == "Life_scenario"
    extra = {k: json.loads(v["extra"]) for k, v in frames.items()}
    dictionary = {k for k, e in extra.items() if e["in_dictionary"]}
    assert st["dictionary_frames"] == len(dictionary) == 18
    # no Subframe edge left (Giving_birth_scenario lost its only child Birth to the multi-parent rule)
    assert not {"Witness_testimony", "Release", "Weather", "Color", "Giving_birth_scenario"} & dictionary
    ms = {m["trigger"]: m for m in out["mentions"]}
    assert_offsets(out["mentions"])
    assert ms["cross-examined"]["labels"] == ["Court_examination", "Trial", "Criminal_process"]  # frame + ancestors
    assert ms["journey"]["labels"] == ["Travel"]  # a root mention's gold is itself
    assert len([m for m in out["mentions"] if m["trigger"] == "arrested"]) == 3  # 1 full text + 2 FN1.5 exemplars
    assert {json.loads(m["extra"])["source"] for m in out["mentions"]} == {"fulltext", "exemplar"}
    # every other annotation is a reject with its reason
    assert {"released", "rained", "red", "testified"}.isdisjoint(ms) and "bought" not in ms
    by_reason = defaultdict(int)
    for r in rej.rows:
        by_reason[r["reason"]] += 1
    assert by_reason["frame_not_in_dictionary"] == 4 and by_reason["frame_not_in_fn17"] == 1
    rels = {(r["source_id"], r["target_id"], r["relation"]) for r in out["type_relations"]}
    assert ("Trial", "Criminal_process", "part_of") in rels and ("Trial", "Arraignment", "follows") in rels


def test_sample_zero_shot_splits_never_split_a_component():
    out, _, st = collect(framenet_grounding, SAMPLE)
    frames = {r["type_id"]: json.loads(r["extra"]) for r in out["event_types"]}
    by_comp = defaultdict(set)
    for f, e in frames.items():
        if e["in_dictionary"]:
            by_comp[e["component"]].add(e["split"])
    assert all(len(s) == 1 for s in by_comp.values())  # no component split across
    assert st["components_with_dictionary_frames"] == len(by_comp) == 5  # Life + Giving_birth join through Birth
    # Precedes joins components: Release (no Subframe) sits in the criminal-process component
    assert frames["Release"]["component"] == frames["Criminal_process"]["component"]
    assert sorted(s for (s,) in by_comp.values()) == ["dev", "test", "train", "train", "train"]
    for m in out["mentions"]:  # a mention's split is its atomic frame's, and all its golds share it
        assert {frames[g]["split"] for g in m["labels"]} == {m["split"]}
    # another seed reshuffles components, never splits one
    out2, _, _ = collect(framenet_grounding, SAMPLE, seed=3)
    f2 = {r["type_id"]: json.loads(r["extra"]) for r in out2["event_types"]}
    comp2 = defaultdict(set)
    for e in f2.values():
        if e["in_dictionary"]:
            comp2[e["component"]].add(e["split"])
    assert all(len(s) == 1 for s in comp2.values())


def test_sample_ingest_is_a_grounding_dataset(tmp_path):
    man = ingest("framenet_grounding", CLEAN, out_dir=tmp_path / "fng", dataset="fng", progress=False)
    assert man["rejects"] == {}
    assert "grounding" in Manifest.read(tmp_path / "fng").kinds()
    t1 = {r["split"]: r for r in man["stats"]["table1"]}
    assert sum(r["mentions"] for r in t1.values()) == man["rows"]["mentions"] == 18  # 14 full text + 4 exemplars
    assert {s: (r["events"], r["trees"]) for s, r in t1.items()} == {"train": (12, 3), "dev": (3, 1), "test": (3, 1)}
    assert t1["train"]["max_depth"] == 3
    ms = pq.read_table(tmp_path / "fng" / "mentions.parquet").to_pylist()
    assert {m["split"] for m in ms} == {"train", "dev", "test"}
    # only the files read are fingerprinted (not everything else under the directory)
    assert man["fingerprint"] == ingest("framenet_grounding", CLEAN, out_dir=tmp_path / "fng2", progress=False)["fingerprint"]


def test_missing_inputs_name_the_path(tmp_path):
    with pytest.raises(InputError, match="framenet17"):
        collect(framenet_grounding, tmp_path)


@pytest.mark.shared_data
@pytest.mark.slow
def test_real_framenet_benchmark_table1():
    out, rej, st = collect(framenet_grounding, shared_path())
    frames = {r["type_id"]: json.loads(r["extra"]) for r in out["event_types"]}
    assert len(frames) == 1221  # every FN1.7 frame is a candidate
    par = {r["type_id"]: r["parent_id"] for r in out["event_types"]}
    assert par["Arrest"] == "Criminal_process" and par["Trial"] == "Criminal_process"
    by_comp = defaultdict(set)
    for e in frames.values():
        if e["in_dictionary"]:
            by_comp[e["component"]].add(e["split"])
    assert all(len(s) == 1 for s in by_comp.values())
    t1 = {r["split"]: r for r in st["table1"]}
    assert set(t1) == {"train", "dev", "test"} and all(t1[s]["mentions"] > 0 for s in t1)
    assert max(r["max_depth"] for r in t1.values()) == 3
    assert st["mentions_read"]["fulltext"] > 20_000 and st["mentions_read"]["exemplar"] > 50_000
